'use strict';
const test = require('node:test');
const assert = require('node:assert');
const fs = require('fs');
const os = require('os');
const path = require('path');
const Database = require('..');

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'litelane-node-'));
const file = (n) => path.join(dir, n);

test('prepare, run, get, all, iterate', () => {
	const db = new Database(file('a.db'));
	db.exec('CREATE TABLE t(id INTEGER PRIMARY KEY, name TEXT UNIQUE, n REAL)');
	const ins = db.prepare('INSERT INTO t(name, n) VALUES (?, ?)');
	assert.deepStrictEqual(ins.run('a', 1.5), { changes: 1, lastInsertRowid: 1 });
	assert.deepStrictEqual(ins.run(['b', 2]), { changes: 1, lastInsertRowid: 2 });
	const named = db.prepare('INSERT INTO t(name, n) VALUES (@name, :n)');
	named.run({ name: 'c', n: 3 });
	assert.deepStrictEqual(db.prepare('SELECT name, n FROM t WHERE id = ?').get(1), { name: 'a', n: 1.5 });
	assert.strictEqual(db.prepare('SELECT count(*) FROM t').pluck().get(), 3);
	assert.deepStrictEqual(db.prepare('SELECT name FROM t ORDER BY id').raw().all(), [['a'], ['b'], ['c']]);
	assert.deepStrictEqual([...db.prepare('SELECT id FROM t ORDER BY id').pluck().iterate()], [1, 2, 3]);
	assert.strictEqual(db.prepare('SELECT 1').reader, true);
	assert.strictEqual(ins.reader, false);
	db.close();
});

test('SqliteError with extended code', () => {
	const db = new Database(file('b.db'));
	db.exec('CREATE TABLE t(name TEXT UNIQUE)');
	db.prepare('INSERT INTO t VALUES (?)').run('x');
	assert.throws(() => db.prepare('INSERT INTO t VALUES (?)').run('x'), (e) => {
		return e instanceof Database.SqliteError && e.code === 'SQLITE_CONSTRAINT_UNIQUE';
	});
	db.close();
});

test('transaction(fn) commits, rolls back, nests', () => {
	const db = new Database(file('c.db'));
	db.exec('CREATE TABLE t(x)');
	const ins = db.prepare('INSERT INTO t VALUES (?)');
	const many = db.transaction((xs) => { for (const x of xs) ins.run(x); return db.inTransaction; });
	assert.strictEqual(many([1, 2, 3]), true);
	assert.strictEqual(db.inTransaction, false);
	assert.throws(() => db.transaction(() => { ins.run(4); throw new Error('no'); })(), /no/);
	const outer = db.transaction(() => {
		ins.run(5);
		try { db.transaction(() => { ins.run(6); throw new Error('inner'); })(); } catch { /* undone */ }
	});
	outer();
	assert.deepStrictEqual(db.prepare('SELECT x FROM t ORDER BY x').pluck().all(), [1, 2, 3, 5]);
	db.close();
});

test('function, safeIntegers, pragma', () => {
	const db = new Database(':memory:');
	db.function('twice', (x) => x * 2);
	assert.strictEqual(db.prepare('SELECT twice(21)').pluck().get(), 42);
	assert.throws(() => { db.function('boom', () => { throw new Error('boom!'); }); db.prepare('SELECT boom()').get(); }, /boom!/);
	assert.strictEqual(db.prepare('SELECT 9007199254740993').pluck().safeIntegers().get(), 9007199254740993n);
	assert.strictEqual(typeof db.pragma('cache_size', { simple: true }), 'number');
	db.close();
});

test('pragmas that write the database commit (user_version, application_id)', () => {
	for (const name of [':memory:', file('pragma.db')]) {
		const db = new Database(name, { profile: 'safe' });
		db.pragma('user_version = 3');
		db.exec('PRAGMA application_id = 77');
		assert.strictEqual(db.pragma('user_version', { simple: true }), 3, name);
		assert.strictEqual(db.pragma('application_id', { simple: true }), 77, name);
		db.close();
	}
	const again = new Database(file('pragma.db'));
	assert.strictEqual(again.pragma('user_version', { simple: true }), 3);
	again.close();
});

test('litelane additions: insertMany, metrics, checkpoint', () => {
	const db = new Database(file('d.db'), { profile: 'safe' });
	db.exec('CREATE TABLE t(a, b)');
	const rows = Array.from({ length: 1000 }, (_, i) => [i, `r${i}`]);
	assert.deepStrictEqual(db.insertMany('t', ['a', 'b'], rows), { inserted: 1000 });
	assert.strictEqual(db.prepare('SELECT count(*) FROM t').pluck().get(), 1000);
	assert.ok(db.metrics().commits >= 1);
	const c = db.checkpoint('TRUNCATE');
	assert.strictEqual(typeof c.walFrames, 'number');
	const m = db.metrics();
	// A small WAL that nothing pins; the TRUNCATE held the writers once.
	assert.strictEqual(m.walOverLimit, null);
	assert.strictEqual(m.walOverLimitCount, 0);
	assert.ok(m.checkpointHolds >= 1, `checkpointHolds ${m.checkpointHolds}`);
	assert.ok(m.checkpointHoldMaxMs <= m.checkpointHoldTimeMs);
	db.close();
});

test('writers of several processes queue, none sees SQLITE_BUSY', () => {
	const { spawnSync, spawn } = require('child_process');
	const f = file('x.db');
	const db = new Database(f, { profile: 'safe' });
	db.exec('CREATE TABLE t(p INTEGER, i INTEGER)');
	db.close();
	const script = `
		const Database = require(${JSON.stringify(path.join(__dirname, '..'))});
		const db = new Database(${JSON.stringify(f)}, { profile: 'safe' });
		const ins = db.prepare('INSERT INTO t VALUES (?, ?)');
		const tx = db.transaction((p, i) => { ins.run(p, i); ins.run(p, i + 0.5); });
		for (let i = 0; i < 200; i++) { tx(process.argv[1], i); ins.run(process.argv[1], -i); }
		db.close();
	`;
	const kids = [0, 1, 2, 3].map((p) => spawnSync(process.execPath, ['-e', script, String(p)], { encoding: 'utf8' }));
	// spawnSync runs them one after the other; run them at once as well.
	for (const k of kids) assert.strictEqual(k.status, 0, k.stderr);
	return Promise.all([4, 5, 6, 7].map((p) => new Promise((resolve, reject) => {
		const c = spawn(process.execPath, ['-e', script, String(p)], { stdio: ['ignore', 'ignore', 'pipe'] });
		let err = '';
		c.stderr.on('data', (d) => { err += d; });
		c.on('exit', (code) => (code === 0 ? resolve() : reject(new Error(err))));
	}))).then(() => {
		const check = new Database(f);
		assert.strictEqual(check.prepare('SELECT count(*) FROM t').pluck().get(), 8 * 600);
		check.close();
	});
});

test('table(): a generator as a virtual table, on the readers and the writer', () => {
	const db = new Database(file('vtab.db'));
	const seen = [];
	db.table('series', {
		columns: ['value'],
		parameters: ['start', 'stop'],
		*rows(start, stop) {
			seen.push([start, stop]);
			for (let v = start; v <= stop; v++) yield [v];
		},
	});
	// A read (reader of the pool) and a write using it (the writer).
	assert.deepStrictEqual(db.prepare('SELECT value FROM series(?, ?)').pluck().all(2, 4), [2, 3, 4]);
	db.exec('CREATE TABLE t(v)');
	db.prepare('INSERT INTO t SELECT value * 10 FROM series WHERE start = ? AND stop = ?').run(1, 3);
	assert.deepStrictEqual(db.prepare('SELECT v FROM t ORDER BY v').pluck().all(), [10, 20, 30]);
	// A NULL parameter or two values for one parameter: no rows, no call.
	seen.length = 0;
	assert.deepStrictEqual(db.prepare('SELECT * FROM series(?, ?)').all(1, null), []);
	assert.deepStrictEqual(db.prepare('SELECT * FROM series WHERE start = ? AND start = ? AND stop = 9').all(1, 2), []);
	assert.deepStrictEqual(seen, []);
	// Only `=` on a parameter; a bad row is a TypeError; a throw comes out as is.
	assert.throws(() => db.prepare('SELECT * FROM series WHERE start > 1'), Database.SqliteError);
	db.table('bad', { columns: ['a', 'b'], *rows() { yield [1]; } });
	assert.throws(() => db.prepare('SELECT * FROM bad').all(), TypeError);
	const boom = new Error('boom');
	// A generator that throws before its first row (so it never yields).
	// eslint-disable-next-line require-yield
	db.table('boom', { columns: ['a'], *rows() { throw boom; } });
	assert.throws(() => db.prepare('SELECT * FROM boom').all(), (e) => e === boom);
	// A factory module through CREATE VIRTUAL TABLE, called once per table.
	let made = 0;
	db.table('words', function (...args) {
		made += 1;
		return { columns: ['w'], *rows() { yield* args.map((w) => [w]); } };
	});
	db.exec('CREATE VIRTUAL TABLE greeting USING words(hello, world)');
	assert.deepStrictEqual(db.prepare('SELECT w FROM greeting').pluck().all(), ['hello', 'world']);
	assert.deepStrictEqual(db.prepare('SELECT w FROM greeting').pluck().all(), ['hello', 'world']);
	assert.strictEqual(made, 1);
	db.close();
});

test('backup(): step by step with progress, writes during it reach the copy, abort removes a new file', async () => {
	const db = new Database(file('bk.db'));
	db.exec('CREATE TABLE t(x TEXT)');
	const ins = db.prepare('INSERT INTO t VALUES (?)');
	for (let i = 0; i < 50; i++) ins.run('x'.repeat(1000));
	const seen = [];
	const result = await db.backup(file('bk-copy.db'), {
		progress(p) {
			seen.push(p);
			if (seen.length === 2) ins.run('written during the backup');
			return 3;
		},
	});
	assert.ok(seen.length > 3, `several steps, saw ${seen.length}`);
	assert.strictEqual(seen[0].remainingPages, seen[0].totalPages);
	assert.strictEqual(result.remainingPages, 0);
	const copy = new Database(file('bk-copy.db'));
	assert.strictEqual(copy.prepare('SELECT count(*) FROM t').pluck().get(), 51);
	copy.close();
	const err = new Error('stop');
	await assert.rejects(db.backup(file('bk-aborted.db'), { progress() { throw err; } }), (e) => e === err);
	assert.strictEqual(fs.existsSync(file('bk-aborted.db')), false);
	db.close();
});

test('loadExtension(): a missing file is an SqliteError; SQL load_extension() stays refused', () => {
	const db = new Database(file('ext.db'));
	assert.throws(() => db.loadExtension(file('no-such-extension.so')), (e) => e instanceof Database.SqliteError && e.code === 'SQLITE_ERROR');
	assert.throws(() => db.loadExtension(42), TypeError);
	assert.throws(() => db.prepare('SELECT load_extension(?)').get(file('no-such-extension.so')), /not authorized/);
	db.close();
});

test('insertMany: packed columns keep every value (unicode, mixed types, nulls, blobs)', () => {
	const db = new Database(file('im.db'));
	db.exec('CREATE TABLE t(i INTEGER PRIMARY KEY, s TEXT, x, b BLOB)');
	const words = ['', 'a', 'é', '日本語', '😀x', 'z😀😀', 'plain'];
	const rows = Array.from({ length: 2000 }, (_, i) => [
		i,
		words[i % words.length] + i,
		i % 3 === 0 ? null : i % 3 === 1 ? `t${i}` : i / 4,
		Buffer.from([i & 255, 7]),
	]);
	assert.deepStrictEqual(db.insertMany('t', ['i', 's', 'x', 'b'], rows), { inserted: 2000 });
	const back = db.prepare('SELECT i, s, x, b FROM t ORDER BY i').raw().all();
	assert.deepStrictEqual(back, rows);
	assert.throws(() => db.insertMany('t', ['i', 's'], [[1, 'a'], [2]]), RangeError);
	assert.throws(() => db.insertMany('t', ['i', 's'], [[1, 'dup']]), (e) => e.code === 'SQLITE_CONSTRAINT_PRIMARYKEY');
	db.close();
});

test('insertMany of many rows (pipelined in chunks): all or nothing', () => {
	const db = new Database(file('pipe.db'));
	db.exec('CREATE TABLE t(id INTEGER PRIMARY KEY, name TEXT, v REAL)');
	const rows = Array.from({ length: 100000 }, (_, i) => [i, `n${i}`, i / 4]);
	assert.deepStrictEqual(db.insertMany('t', ['id', 'name', 'v'], rows), { inserted: 100000 });
	assert.deepStrictEqual(db.prepare('SELECT count(*), sum(id), max(v) FROM t').raw().get(), [100000, 4999950000, 99999 / 4]);
	// A duplicate key in a late chunk: nothing of this insert stays.
	const again = rows.map((r) => [r[0] + 100000, r[1], r[2]]);
	again[90000][0] = 5;
	assert.throws(() => db.insertMany('t', ['id', 'name', 'v'], again), (e) => e.code === 'SQLITE_CONSTRAINT_PRIMARYKEY');
	// A value SQLite cannot store in a late chunk: a TypeError, nothing stays.
	const bad = rows.map((r) => [r[0] + 300000, r[1], r[2]]);
	bad[70000][2] = {};
	assert.throws(() => db.insertMany('t', ['id', 'name', 'v'], bad), (e) => e instanceof TypeError && /can only bind/.test(e.message));
	assert.strictEqual(db.prepare('SELECT count(*) FROM t').pluck().get(), 100000);
	// The writer is free again.
	db.exec("INSERT INTO t VALUES (1000000, 'x', 1)");
	db.close();
});

test('named parameters are read by name: non-enumerable ones bind, a throwing getter throws', () => {
	const db = new Database(file('named.db'));
	const stmt = db.prepare('SELECT @a AS a, :b AS b');
	const obj = Object.create(null);
	Object.defineProperty(obj, 'a', { value: 1, enumerable: false });
	obj.b = 'two';
	obj.unused = 3;
	assert.deepStrictEqual(stmt.get(obj), { a: 1, b: 'two' });
	const err = new Error('getter');
	const bad = {};
	Object.defineProperty(bad, 'b', { get() { throw err; } });
	bad.a = 1;
	assert.throws(() => stmt.get(bad), (e) => e === err);
	assert.throws(() => stmt.get({ a: 1 }), RangeError);
	db.close();
});

test('verbose shortens long bound values as better-sqlite3 does', () => {
	const log = [];
	const db = new Database(':memory:', { verbose: (s) => log.push(s) });
	db.prepare('SELECT ?, ?, ?').get('short', 'x'.repeat(40), Buffer.alloc(34, 1));
	assert.deepStrictEqual(log, [`SELECT 'short', '${'x'.repeat(32)}'/*+8 bytes*/, x'${'01'.repeat(32)}'/*+2 bytes*/`]);
	db.close();
});

test('an empty Buffer binds as an empty blob (its data pointer is NULL)', () => {
	const db = new Database(file('empty-blob.db'));
	db.exec('CREATE TABLE b(x)');
	db.prepare('INSERT INTO b VALUES (?)').run(Buffer.alloc(0));
	db.prepare('INSERT INTO b VALUES (?)').run(Buffer.from([1, 2, 3]));
	const rows = db.prepare('SELECT typeof(x) t, length(x) n, x FROM b ORDER BY rowid').all();
	assert.deepStrictEqual(rows.map((r) => [r.t, r.n]), [['blob', 0], ['blob', 3]]);
	assert.deepStrictEqual([...rows[1].x], [1, 2, 3]);
	db.close();
});

test('a statement whose columns change with the schema (SELECT * after ADD COLUMN)', () => {
	const db = new Database(file('star.db'));
	db.exec('CREATE TABLE s(x)');
	db.prepare('INSERT INTO s VALUES (1)').run();
	const star = db.prepare('SELECT * FROM s');
	assert.deepStrictEqual(star.all(), [{ x: 1 }]);
	db.exec('ALTER TABLE s ADD COLUMN y DEFAULT 7');
	assert.deepStrictEqual(star.all(), [{ x: 1, y: 7 }]);
	assert.deepStrictEqual(star.get(), { x: 1, y: 7 });
	db.close();
});

test('get(): every kind of parameter and value crosses the shared memory as _rows gives it', () => {
	const db = new Database(file('fast.db'));
	db.exec("CREATE TABLE t(id INTEGER PRIMARY KEY, a TEXT, b BLOB, c REAL, d, e TEXT)");
	const blob = Buffer.from([0, 1, 2, 255]);
	db.prepare('INSERT INTO t VALUES (?, ?, ?, ?, ?, ?)').run(1, 'héllo ☃', blob, 2.5, null, 'two');
	db.prepare('INSERT INTO t VALUES (?, ?, ?, ?, ?, ?)').run(2, '', Buffer.alloc(0), -0.5, 9007199254740993n, null);
	const get = db.prepare('SELECT * FROM t WHERE id = ?');
	const all = (id) => db.prepare('SELECT * FROM t WHERE id = ?').all(id)[0];
	for (const id of [1, 2]) assert.deepStrictEqual(get.get(id), all(id));
	assert.deepStrictEqual(get.get(1), { id: 1, a: 'héllo ☃', b: blob, c: 2.5, d: null, e: 'two' });
	assert.strictEqual(get.get(3), undefined);
	assert.strictEqual(get.get(1n).id, 1);
	assert.strictEqual(get.get('1').id, 1);
	assert.strictEqual(get.get(null), undefined);
	assert.strictEqual(get.get(undefined), undefined);
	assert.deepStrictEqual(get.get([1]), all(1));
	// Several strings, bigints and buffers as parameters, in order.
	const many = db.prepare('SELECT ? AS x, ? AS y, ? AS z, ? AS w, ? AS v');
	assert.deepStrictEqual(many.get('a', 5n, Buffer.from('b'), 'c', 1.5), { x: 'a', y: 5, z: Buffer.from('b'), w: 'c', v: 1.5 });
	assert.deepStrictEqual(many.raw().get('a', null, 'b', 7, Buffer.alloc(0)), ['a', null, 'b', 7, Buffer.alloc(0)]);
	assert.strictEqual(db.prepare('SELECT a FROM t WHERE id = ?').pluck().get(1), 'héllo ☃');
	assert.strictEqual(db.prepare('SELECT c FROM t WHERE id = ?').pluck().get(1), 2.5);
	assert.strictEqual(db.prepare('SELECT d FROM t WHERE id = ?').pluck().get(2), 9007199254740992);
	assert.strictEqual(db.prepare('SELECT d FROM t WHERE id = ?').safeIntegers().pluck().get(2), 9007199254740993n);
	assert.deepStrictEqual(db.prepare('SELECT id, c FROM t WHERE id = ?').safeIntegers().get(1), { id: 1n, c: 2.5 });
	// Errors as better-sqlite3 gives them.
	assert.throws(() => get.get(), /Too few parameter values/);
	assert.throws(() => get.get(1, 2), /Too many parameter values/);
	assert.throws(() => get.get(2n ** 64n), RangeError);
	assert.throws(() => get.get(Symbol('x')), TypeError);
	assert.throws(() => db.prepare('SELECT * FROM t WHERE id = :id').get(1), TypeError);
	assert.deepStrictEqual(db.prepare('SELECT * FROM t WHERE id = :id').get({ id: 1 }), all(1));
	// A column named __proto__, and more columns than the shared memory holds.
	// (assigned, as better-sqlite3 does: it sets the prototype, here to nothing)
	const proto = db.prepare('SELECT 1 AS "__proto__", 2 AS b');
	assert.deepStrictEqual(proto.get(), proto.all()[0]);
	const wide = Array.from({ length: 100 }, (_, i) => `${i} AS c${i}`).join(', ');
	const row = db.prepare(`SELECT ${wide}`).get();
	assert.strictEqual(Object.keys(row).length, 100);
	assert.strictEqual(row.c99, 99);
	// In a transaction, on the writer: it sees its own uncommitted row.
	db.transaction(() => {
		db.prepare('INSERT INTO t(id, a) VALUES (3, ?)').run('mine');
		assert.strictEqual(get.get(3).a, 'mine');
	})();
	// A statement whose columns change with the schema.
	db.exec('CREATE TABLE s(x)');
	db.prepare('INSERT INTO s VALUES (1)').run();
	const star = db.prepare('SELECT * FROM s');
	assert.deepStrictEqual(star.get(), { x: 1 });
	db.exec('ALTER TABLE s ADD COLUMN y DEFAULT 7');
	assert.deepStrictEqual(star.get(), { x: 1, y: 7 });
	db.exec('ALTER TABLE s ADD COLUMN z DEFAULT 8');
	assert.deepStrictEqual(star.all(), [{ x: 1, y: 7, z: 8 }]);
	const joined = db.prepare('SELECT t.id, s.x FROM t, s WHERE t.id = ?').expand();
	assert.deepStrictEqual(joined.get(1), { t: { id: 1 }, s: { x: 1 } });
	assert.deepStrictEqual(joined.get(1), joined.all(1)[0]);
	db.close();
	assert.throws(() => get.get(1), TypeError);
});

test('run(): results and parameters through the shared memory', () => {
	const db = new Database(file('fastrun.db'));
	db.exec('CREATE TABLE t(id INTEGER PRIMARY KEY, a TEXT, b BLOB, c)');
	const ins = db.prepare('INSERT INTO t VALUES (?, ?, ?, ?)');
	assert.deepStrictEqual(ins.run(1, 'x', Buffer.from('y'), 5n), { changes: 1, lastInsertRowid: 1 });
	assert.deepStrictEqual(ins.run(null, null, null, null), { changes: 1, lastInsertRowid: 2 });
	assert.deepStrictEqual(ins.run(2 ** 62, 'big', Buffer.alloc(0), 'z'), { changes: 1, lastInsertRowid: 2 ** 62 });
	// safeIntegers: the rowid exactly, as better-sqlite3 gives it.
	assert.deepStrictEqual(ins.safeIntegers().run(9007199254740993n, 'b', null, 1), { changes: 1, lastInsertRowid: 9007199254740993n });
	assert.deepStrictEqual(db.prepare('SELECT a, b, c FROM t WHERE id = 1').get(), { a: 'x', b: Buffer.from('y'), c: 5 });
	assert.deepStrictEqual(db.prepare('UPDATE t SET c = ? WHERE id < ?').run(7, 3), { changes: 2, lastInsertRowid: Number(9007199254740993n) });
	assert.strictEqual(db.prepare('SELECT count(*) FROM t').run().changes, 0);
	assert.throws(() => ins.run(1, 2), /Too few parameter values/);
	assert.throws(() => ins.run(10, 1, 2, 3, 4), /Too many parameter values/);
	assert.throws(() => ins.run([10, 1, 2, 3, 4]), /Too many parameter values/);
	assert.throws(() => ins.run(1, 'dup', null, null), (e) => e instanceof Database.SqliteError && e.code === 'SQLITE_CONSTRAINT_PRIMARYKEY');
	// Inside a transaction (on the held writer), and rolled back.
	assert.throws(() => db.transaction(() => { db.prepare('DELETE FROM t WHERE id = ?').run(1); throw new Error('undo'); })(), /undo/);
	assert.strictEqual(db.prepare('SELECT count(*) FROM t WHERE id = 1').pluck().get(), 1);
	db.close();
});
