'use strict';
// litelane's own asynchronous additions: writeAsync and importFile.
const test = require('node:test');
const assert = require('node:assert');
const fs = require('fs');
const os = require('os');
const path = require('path');
const { Worker } = require('worker_threads');
const Database = require('..');

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'litelane-node-async-'));
const file = (n) => path.join(dir, n);

test('writeAsync commits every statement and resolves with their results', async () => {
	const db = new Database(file('w1.db'));
	db.exec('CREATE TABLE t(id INTEGER PRIMARY KEY, name TEXT, n REAL)');
	const results = await db.writeAsync([
		['INSERT INTO t(name, n) VALUES (?, ?)', ['a', 1.5]],
		['INSERT INTO t(name, n) VALUES (@name, :n)', { name: 'b', n: 2 }],
		['INSERT INTO t(name, n) VALUES (?, @n)', ['c', { n: 3 }]],
		'UPDATE t SET n = n * 2',
		['DELETE FROM t WHERE name = ?', ['nobody']],
	]);
	assert.deepStrictEqual(results, [
		{ changes: 1, lastInsertRowid: 1 },
		{ changes: 1, lastInsertRowid: 2 },
		{ changes: 1, lastInsertRowid: 3 },
		{ changes: 3, lastInsertRowid: 3 },
		{ changes: 0, lastInsertRowid: 3 },
	]);
	assert.deepStrictEqual(db.prepare('SELECT name, n FROM t ORDER BY id').raw().all(), [['a', 3], ['b', 4], ['c', 6]]);
	// Another connection sees it committed.
	const other = new Database(file('w1.db'));
	assert.strictEqual(other.prepare('SELECT count(*) FROM t').pluck().get(), 3);
	other.close();
	assert.deepStrictEqual(await db.writeAsync([]), []);
	db.close();
});

test('writeAsync: lastInsertRowid is exact as a BigInt under defaultSafeIntegers, a number otherwise', async () => {
	const db = new Database(file('w-big.db'));
	db.exec('CREATE TABLE t(id INTEGER PRIMARY KEY, v)');
	const big = 9007199254740993n; // 2^53 + 1: no number holds it
	db.defaultSafeIntegers(true);
	const [r] = await db.writeAsync([['INSERT INTO t(id, v) VALUES (?, 1)', [big]]]);
	assert.strictEqual(r.lastInsertRowid, big);
	db.defaultSafeIntegers(false);
	const [n] = await db.writeAsync([['INSERT INTO t(v) VALUES (2)']]);
	assert.strictEqual(n.lastInsertRowid, Number(big + 1n));
	assert.strictEqual(typeof n.changes, 'number');
	db.close();
});

test('writeAsync: a failing statement rejects with SqliteError and nothing stays', async () => {
	const db = new Database(file('w2.db'));
	db.exec('CREATE TABLE t(name TEXT UNIQUE)');
	db.prepare('INSERT INTO t VALUES (?)').run('taken');
	await assert.rejects(
		db.writeAsync([
			['INSERT INTO t VALUES (?)', ['first']],
			['INSERT INTO t VALUES (?)', ['second']],
			['INSERT INTO t VALUES (?)', ['taken']],
		]),
		(e) => e instanceof Database.SqliteError && e.code === 'SQLITE_CONSTRAINT_UNIQUE',
	);
	assert.deepStrictEqual(db.prepare('SELECT name FROM t').pluck().all(), ['taken']);
	await assert.rejects(db.writeAsync([['INSERT INTO nowhere VALUES (1)']]),
		(e) => e instanceof Database.SqliteError && e.code === 'SQLITE_ERROR' && /no such table/.test(e.message));
	await assert.rejects(db.writeAsync([['INSERT INTO t VALUES (?)', []]]), RangeError);
	await assert.rejects(db.writeAsync('INSERT INTO t VALUES (1)'), TypeError);
	await assert.rejects(db.writeAsync([[1]]), TypeError);
	// A function registered with db.function() runs on the JavaScript
	// thread only: a statement calling it fails, and its transaction too.
	db.function('twice', (x) => x * 2);
	await assert.rejects(db.writeAsync([['INSERT INTO t VALUES (?)', ['kept?']], ['INSERT INTO t VALUES (twice(?))', [2]]]),
		(e) => e instanceof Database.SqliteError && /off the JavaScript thread/.test(e.message));
	assert.deepStrictEqual(db.prepare('SELECT name FROM t').pluck().all(), ['taken']);
	// Inside a transaction this connection holds: refused, not a hang.
	db.exec('BEGIN');
	await assert.rejects(db.writeAsync(['INSERT INTO t VALUES (1)']), /cannot run inside the transaction/);
	db.exec('ROLLBACK');
	db.close();
	await assert.rejects(db.writeAsync(['SELECT 1']), /not open/);
	const ro = new Database(file('w2.db'), { readonly: true });
	await assert.rejects(ro.writeAsync([['INSERT INTO t VALUES (?)', ['ro']]]), (e) => e.code === 'SQLITE_READONLY');
	await assert.rejects(ro.importFile(file('w2.db')), (e) => e.code === 'SQLITE_READONLY');
	assert.deepStrictEqual(ro.prepare('SELECT name FROM t').pluck().all(), ['taken']);
	ro.close();
});

test('writeAsync: many concurrent calls all land', async () => {
	const db = new Database(file('w3.db'));
	db.exec('CREATE TABLE t(k INTEGER, v TEXT)');
	const n = 300;
	const all = [];
	for (let i = 0; i < n; i++) {
		all.push(db.writeAsync([
			['INSERT INTO t VALUES (?, ?)', [i, 'x']],
			['INSERT INTO t VALUES (?, ?)', [-i - 1, 'y']],
		]));
	}
	const results = await Promise.all(all);
	assert.strictEqual(results.length, n);
	assert.ok(results.every((r) => r.length === 2 && r[0].changes === 1 && r[1].changes === 1));
	assert.strictEqual(db.prepare('SELECT count(*) FROM t').pluck().get(), 2 * n);
	assert.strictEqual(db.prepare('SELECT count(DISTINCT k) FROM t').pluck().get(), 2 * n);
	db.close();
});

test('writeAsync from worker_threads workers', async () => {
	const db = new Database(file('w4.db'));
	db.exec('CREATE TABLE t(w INTEGER, i INTEGER)');
	const code = `
		const { parentPort, workerData } = require('worker_threads');
		const Database = require(workerData.pkg);
		const db = new Database(workerData.path);
		const all = [];
		for (let i = 0; i < 50; i++) all.push(db.writeAsync([['INSERT INTO t VALUES (?, ?)', [workerData.w, i]]]));
		Promise.all(all).then((r) => { db.close(); parentPort.postMessage(r.length); },
			(e) => parentPort.postMessage('error: ' + e.message));
	`;
	const pkg = path.join(__dirname, '..');
	const runs = [0, 1, 2].map((w) => new Promise((resolve, reject) => {
		const worker = new Worker(code, { eval: true, workerData: { pkg, path: file('w4.db'), w } });
		worker.once('message', resolve);
		worker.once('error', reject);
	}));
	const mine = db.writeAsync([['INSERT INTO t VALUES (?, ?)', [9, 0]]]);
	assert.deepStrictEqual(await Promise.all(runs), [50, 50, 50]);
	await mine;
	assert.deepStrictEqual(db.prepare('SELECT w, count(*) FROM t GROUP BY w ORDER BY w').raw().all(), [[0, 50], [1, 50], [2, 50], [9, 1]]);
	db.close();
});

function writeCsv(name, lines) {
	const p = file(name);
	fs.writeFileSync(p, lines.join('\n') + '\n');
	return p;
}

test('importFile: types, a rejected row, progress', async () => {
	const db = new Database(file('i1.db'));
	const csv = writeCsv('people.csv', [
		'id,name,age,score',
		'1,ann,31,1.5',
		'2,bob,42,2.25',
		'3,cid,not-a-number,3',
		'4,dee,27,4.75',
	]);
	const ticks = [];
	const summary = await db.importFile(csv, {
		table: 'people',
		pk: 'id',
		columnTypes: { age: 'INTEGER' },
		strict: true,
		progress: (p) => ticks.push(p),
	});
	assert.strictEqual(summary.table, 'people');
	assert.strictEqual(summary.rowsInserted, 3);
	assert.strictEqual(summary.rowsRejected, 1);
	assert.strictEqual(summary.rejectedRecords.length, 1);
	const [rej] = summary.rejectedRecords;
	assert.strictEqual(rej.line, 4);
	assert.strictEqual(rej.source, csv);
	assert.match(rej.raw, /^3,cid,not-a-number,3/);
	assert.match(rej.reason, /age/);
	assert.deepStrictEqual(summary.columns.map((c) => c.type), ['INTEGER', 'TEXT', 'INTEGER', 'REAL']);
	const rows = db.prepare('SELECT id, name, age, score, typeof(age) AS ta, typeof(score) AS ts FROM people ORDER BY id').all();
	assert.deepStrictEqual(rows.map((r) => r.name), ['ann', 'bob', 'dee']);
	assert.deepStrictEqual(rows.map((r) => [r.ta, r.ts]), [['integer', 'real'], ['integer', 'real'], ['integer', 'real']]);
	assert.strictEqual(rows[1].age, 42);
	assert.ok(ticks.length >= 1, 'progress was called');
	const last = ticks[ticks.length - 1];
	// Rows handed to SQLite: the rejected one never was.
	assert.strictEqual(last.rows, 3);
	assert.strictEqual(last.totalBytes, fs.statSync(csv).size);
	assert.strictEqual(last.bytes, last.totalBytes);
	db.close();
});

test('importFile: append into an existing table; errors name the file', async () => {
	const db = new Database(file('i2.db'));
	db.exec('CREATE TABLE items(sku TEXT PRIMARY KEY, qty INTEGER)');
	db.prepare('INSERT INTO items VALUES (?, ?)').run('a', 1);
	const tsv = writeCsv('items.tsv', ['sku\tqty', 'b\t2', 'c\t3']);
	const s = await db.importFile(tsv, { table: 'items', mode: 'append' });
	assert.strictEqual(s.rowsInserted, 2);
	assert.deepStrictEqual(db.prepare('SELECT sku, qty FROM items ORDER BY sku').raw().all(), [['a', 1], ['b', 2], ['c', 3]]);
	// The table exists: the default mode (create) refuses.
	await assert.rejects(db.importFile(tsv, { table: 'items' }), (e) => e instanceof Database.SqliteError && e.message.includes('items.tsv'));
	const missing = file('no-such-file.csv');
	await assert.rejects(db.importFile(missing), (e) => e instanceof Database.SqliteError && e.message.includes(missing));
	await assert.rejects(db.importFile(tsv, { tabel: 'x' }), /unknown option "tabel"/);
	await assert.rejects(db.importFile(tsv, { mode: 'sideways' }), TypeError);
	db.close();
	const mem = new Database(':memory:');
	await assert.rejects(mem.importFile(tsv), /in memory/);
	mem.close();
});

test('importFile: an AbortSignal stops it', async () => {
	const db = new Database(file('i3.db'));
	const lines = ['n,text'];
	for (let i = 0; i < 100000; i++) lines.push(`${i},row number ${i} with some text to read`);
	const big = writeCsv('big.csv', lines);
	// Aborted as soon as it is under way (before the pool thread reads a
	// record, so the outcome does not depend on timing).
	const ac = new AbortController();
	const pending = db.importFile(big, { table: 'big', signal: ac.signal });
	ac.abort(new Error('changed my mind'));
	await assert.rejects(pending, (e) => e.name === 'AbortError' && e.code === 'ABORT_ERR' && e.cause.message === 'changed my mind' && e.message.includes(big));
	// The transaction under way rolled back: no table, no rows.
	assert.strictEqual(db.prepare("SELECT count(*) FROM sqlite_master WHERE name = 'big'").pluck().get(), 0);
	// Aborted before it starts.
	await assert.rejects(db.importFile(big, { signal: AbortSignal.abort() }), (e) => e.name === 'AbortError');
	// A progress callback that throws stops it too, and its error is the one.
	const boom = new Error('boom');
	await assert.rejects(db.importFile(big, { table: 'big2', progress: () => { throw boom; } }), (e) => e === boom);
	// And the signal not fired: it runs to the end.
	const s = await db.importFile(big, { table: 'big3', signal: new AbortController().signal });
	assert.strictEqual(s.rowsInserted, 100000);
	assert.strictEqual(db.prepare('SELECT count(*) FROM big3').pluck().get(), 100000);
	db.close();
});
