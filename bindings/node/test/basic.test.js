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
		try { db.transaction(() => { ins.run(6); throw new Error('inner'); })(); } catch (_) { /* undone */ }
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

test('litelane additions: insertMany, metrics, checkpoint', () => {
	const db = new Database(file('d.db'), { profile: 'safe' });
	db.exec('CREATE TABLE t(a, b)');
	const rows = Array.from({ length: 1000 }, (_, i) => [i, `r${i}`]);
	assert.deepStrictEqual(db.insertMany('t', ['a', 'b'], rows), { inserted: 1000 });
	assert.strictEqual(db.prepare('SELECT count(*) FROM t').pluck().get(), 1000);
	assert.ok(db.metrics().commits >= 1);
	const c = db.checkpoint('TRUNCATE');
	assert.strictEqual(typeof c.walFrames, 'number');
	db.close();
});
