'use strict';
// The better-sqlite3 API over litelane: build bindings/node first
// (`cd bindings/node && npm install`), then `node examples/node/quickstart.js`.
const fs = require('fs');
const os = require('os');
const path = require('path');
const Database = require('../../bindings/node');

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'litelane-example-'));
const db = new Database(path.join(dir, 'app.db'), { profile: 'safe' });

db.exec('CREATE TABLE users(id INTEGER PRIMARY KEY, name TEXT UNIQUE, karma INTEGER)');
const add = db.prepare('INSERT INTO users(name, karma) VALUES (@name, @karma)');
console.log(add.run({ name: 'ada', karma: 10 }));

// One engine write turn: every insert commits together, or none does.
const addAll = db.transaction((users) => { for (const u of users) add.run(u); });
addAll([{ name: 'grace', karma: 7 }, { name: 'linus', karma: 3 }]);

try {
	add.run({ name: 'ada', karma: 0 });
} catch (e) {
	console.log(`${e.name} ${e.code}: ${e.message}`);
}

// litelane's bulk inserter.
db.insertMany('users', ['name', 'karma'], Array.from({ length: 1000 }, (_, i) => [`user${i}`, i]));

console.log(db.prepare('SELECT name, karma FROM users WHERE karma > ? ORDER BY karma DESC LIMIT 3').all(5));
console.log('users:', db.prepare('SELECT count(*) FROM users').pluck().get());
console.log('commits:', db.metrics().commits);
db.close();
fs.rmSync(dir, { recursive: true, force: true });
