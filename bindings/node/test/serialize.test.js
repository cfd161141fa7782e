'use strict';
// Database#serialize() and new Database(buffer) (issue 37; docs/node.md).
const test = require('node:test');
const assert = require('node:assert');
const fs = require('fs');
const os = require('os');
const path = require('path');
const Database = require('..');

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'litelane-node-ser-'));
const file = (n) => path.join(dir, n);

function seeded(name, rows = 500) {
	const db = new Database(file(name));
	db.exec('CREATE TABLE t(id INTEGER PRIMARY KEY, name TEXT, blob BLOB)');
	const ins = db.prepare('INSERT INTO t(name, blob) VALUES (?, ?)');
	db.transaction(() => {
		for (let i = 0; i < rows; i++) ins.run(`row ${i}`, Buffer.alloc(20, i & 255));
	})();
	return db;
}

const count = (db, schema = 'main') => db.prepare(`SELECT count(*) FROM ${schema}.t`).pluck().get();

test('serialize -> new Database(buffer): the rows survive, and serialize gives the same bytes back', () => {
	const db = seeded('round.db');
	const buffer = db.serialize();
	assert.ok(Buffer.isBuffer(buffer));
	assert.strictEqual(buffer.length % 4096, 0);
	db.close();

	const copy = new Database(buffer);
	assert.strictEqual(copy.memory, true);
	assert.strictEqual(copy.name, ':memory:');
	assert.strictEqual(copy.readonly, false);
	assert.strictEqual(count(copy), 500);
	assert.deepStrictEqual(copy.prepare('SELECT name, blob FROM t WHERE id = 7').get(), { name: 'row 6', blob: Buffer.alloc(20, 6) });
	assert.ok(copy.serialize().equals(buffer));
	// Writable, and independent of the buffer.
	copy.prepare('INSERT INTO t(name) VALUES (?)').run('new');
	assert.strictEqual(count(copy), 501);
	assert.strictEqual(count(new Database(buffer)), 500);
	copy.close();
});

test('the buffer is a database file: written to disk, it opens and reads back', () => {
	const db = seeded('tofile.db', 300);
	const buffer = db.serialize();
	db.close();
	fs.writeFileSync(file('written.db'), buffer);
	const again = new Database(file('written.db'));
	assert.strictEqual(count(again), 300);
	assert.strictEqual(again.pragma('integrity_check', { simple: true }), 'ok');
	again.close();
});

test('a database file\'s own bytes (WAL mode) open as a buffer', () => {
	const db = seeded('raw.db', 50);
	db.pragma('wal_checkpoint(TRUNCATE)');
	const raw = fs.readFileSync(file('raw.db'));
	assert.strictEqual(raw[18], 2); // WAL
	const copy = new Database(raw);
	assert.strictEqual(count(copy), 50);
	// Its image says "rollback journal": there is no -wal beside a buffer.
	assert.strictEqual(copy.serialize()[18], 1);
	copy.close();
	db.close();
});

test('serialize of an in-memory database, and of a page size other than 4096', () => {
	const db = new Database(':memory:');
	db.pragma('page_size = 1024');
	db.exec("CREATE TABLE t(x); INSERT INTO t VALUES (1), (2), ('three')");
	const buffer = db.serialize();
	assert.strictEqual(buffer.readUInt16BE(16), 1024);
	const copy = new Database(buffer);
	assert.strictEqual(copy.pragma('page_size', { simple: true }), 1024);
	assert.deepStrictEqual(copy.prepare('SELECT x FROM t').pluck().all(), [1, 2, 'three']);
	assert.ok(copy.serialize().equals(buffer));
	copy.close();
	db.close();
});

test('serialize({ attached }) gives the attached database', () => {
	const src = seeded('attached.db', 200);
	const direct = src.serialize();
	src.close();
	const db = new Database();
	db.prepare('ATTACH ? AS other').run(file('attached.db'));
	const viaAttach = db.serialize({ attached: 'other' });
	assert.ok(viaAttach.equals(direct));
	assert.strictEqual(count(new Database(viaAttach)), 200);
	assert.strictEqual(db.serialize().length, 4096); // main: empty
	db.exec('CREATE TEMP TABLE t(x); INSERT INTO temp.t VALUES (1)');
	assert.strictEqual(count(new Database(db.serialize({ attached: 'temp' }))), 1);
	db.close();
});

test('serialize in an open transaction has its own writes; outside one, committed data only', () => {
	const db = seeded('tx.db', 10);
	const other = new Database(file('tx.db'));
	db.exec('BEGIN');
	db.prepare('INSERT INTO t(name) VALUES (?)').run('uncommitted');
	// The transaction's view, as better-sqlite3's one connection has it.
	assert.strictEqual(count(new Database(db.serialize())), 11);
	// Another handle reads committed data (a reader's snapshot).
	assert.strictEqual(count(new Database(other.serialize())), 10);
	db.exec('ROLLBACK');
	assert.strictEqual(count(new Database(db.serialize())), 10);
	db.transaction(() => db.prepare('INSERT INTO t(name) VALUES (?)').run('committed'))();
	assert.strictEqual(count(new Database(other.serialize())), 11);
	other.close();
	db.close();
});

test('new Database(buffer, { readonly: true }) reads and refuses writes', () => {
	const db = seeded('ro.db', 20);
	const buffer = db.serialize();
	db.close();
	const ro = new Database(buffer, { readonly: true });
	assert.strictEqual(ro.readonly, true);
	assert.strictEqual(count(ro), 20);
	assert.throws(() => ro.prepare('INSERT INTO t(name) VALUES (?)').run('x'),
		(e) => e instanceof Database.SqliteError && e.code === 'SQLITE_READONLY');
	assert.throws(() => ro.exec('DELETE FROM t'), (e) => e.code === 'SQLITE_READONLY');
	assert.ok(ro.serialize().equals(buffer));
	ro.close();
	// Without a buffer, an in-memory database still cannot be readonly.
	assert.throws(() => new Database(':memory:', { readonly: true }), TypeError);
});

test('an empty database serializes to one page (as better-sqlite3), which opens as an empty database', () => {
	const db = new Database();
	const buffer = db.serialize();
	assert.strictEqual(buffer.length, 4096);
	assert.strictEqual(buffer.toString('latin1', 0, 15), 'SQLite format 3');
	db.close();
	const again = new Database(buffer);
	assert.deepStrictEqual(again.prepare('SELECT * FROM sqlite_master').all(), []);
	assert.ok(again.serialize().equals(buffer));
	again.exec('CREATE TABLE t(x)');
	assert.strictEqual(again.serialize().length, 8192);
	again.close();
	// An empty Buffer is an empty database too.
	const fromNothing = new Database(Buffer.alloc(0));
	assert.deepStrictEqual(fromNothing.prepare('SELECT * FROM sqlite_master').all(), []);
	fromNothing.exec('CREATE TABLE t(x)');
	fromNothing.close();
});

test('serialize and new Database(buffer) errors', () => {
	const db = seeded('errors.db', 1);
	assert.throws(() => db.serialize('main'), { name: 'TypeError', message: 'Expected first argument to be an options object' });
	assert.throws(() => db.serialize({ attached: 1 }), { name: 'TypeError', message: 'Expected the "attached" option to be a string' });
	assert.throws(() => db.serialize({ attached: '' }), { name: 'TypeError', message: 'The "attached" option cannot be an empty string' });
	// better-sqlite3 throws a plain Error here too (its message: "Out of memory").
	assert.throws(() => db.serialize({ attached: 'nope' }), (e) => e.constructor === Error && e.message === 'unknown database nope');
	const it = db.prepare('SELECT * FROM t').iterate();
	it.next();
	assert.throws(() => db.serialize(), { name: 'TypeError', message: 'This database connection is busy executing a query' });
	it.return();
	db.close();
	assert.throws(() => db.serialize(), { name: 'TypeError', message: 'The database connection is not open' });
	// Not a database: refused when opening.
	assert.throws(() => new Database(Buffer.alloc(8192, 'not a database')),
		(e) => e instanceof Database.SqliteError && e.code === 'SQLITE_NOTADB');
});
