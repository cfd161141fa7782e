'use strict';
// Issue 37's Node benchmarks: litelane's package beside better-sqlite3 in
// one run, peers alternating within each repetition, medians and ratios as
// markdown. Usage: scripts/node-bench [--short] [options]   (docs/node.md)
//
//   --rows N          rows per bulk insert (default 1000000; --short 100000)
//   --reps R          repetitions of every measurement (default 5; --short 2)
//   --gets N          point gets per repetition (default 200000; --short 20000)
//   --table N         rows in the table the gets read (default 100000)
//   --workers LIST    node:cluster worker counts (default 4,8,16; --short 4,8)
//   --seconds S       seconds each cluster round writes (default 10; --short 1.5)
//   --only LIST       sections to run: insert,get,cluster (default all)
//   --dir DIR         where the database files go (default target/node-bench)
//   --out FILE        also write the markdown there
//
// better-sqlite3 is the one scripts/node-suite builds from source
// (target/node-suite/deps); BSQ_MODULE points elsewhere.
const cluster = require('node:cluster');
const fs = require('fs');
const os = require('os');
const path = require('path');

const pkg = path.join(__dirname, '..');
const repoRoot = path.join(pkg, '..', '..');
const bsqModule = process.env.BSQ_MODULE || path.join(repoRoot, 'target', 'node-suite', 'deps', 'node_modules', 'better-sqlite3');

function load(engine) {
	if (engine === 'litelane') return require(pkg);
	try {
		return require(bsqModule);
	} catch (e) {
		throw new Error(`better-sqlite3 not found at ${bsqModule} (run scripts/node-suite once, or set BSQ_MODULE): ${e.message}`);
	}
}

// How each engine opens a file for the cluster rounds: litelane under
// `safe` (WAL, synchronous=FULL, its queues); better-sqlite3 in WAL with
// synchronous=FULL and a 5 s busy timeout.
function openFor(engine, file, role) {
	const Database = load(engine);
	if (engine === 'litelane') return new Database(file, { profile: role === 'cluster' ? 'safe' : 'balanced', timeout: 5000 });
	const db = new Database(file, { timeout: 5000 });
	db.pragma('journal_mode = WAL');
	db.pragma(role === 'cluster' ? 'synchronous = FULL' : 'synchronous = NORMAL');
	return db;
}

function removeDb(file) {
	for (const s of ['', '-wal', '-shm', '-journal', '-lane']) fs.rmSync(file + s, { force: true });
}

const median = (xs) => {
	const s = xs.slice().sort((a, b) => a - b);
	const m = s.length >> 1;
	return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
};
const fmt = (n, d = 0) => n.toLocaleString('en-US', { minimumFractionDigits: d, maximumFractionDigits: d });
const now = () => process.hrtime.bigint();
const seconds = (t0) => Number(now() - t0) / 1e9;

// ---- the cluster worker ---------------------------------------------------

if (cluster.isWorker) {
	const { ENGINE, FILE, SECONDS, WORKER } = process.env;
	const db = openFor(ENGINE, FILE, 'cluster');
	const insert = db.prepare('INSERT INTO t(worker, seq, payload) VALUES (?, ?, ?)');
	const payload = 'p'.repeat(100);
	const id = Number(WORKER);
	process.on('message', (m) => {
		if (m !== 'go') return;
		const end = Date.now() + Number(SECONDS) * 1000;
		let seq = 0;
		let acked = 0;
		const failed = [];
		const errors = {};
		while (Date.now() < end) {
			seq += 1;
			try {
				insert.run(id, seq, payload);
				acked += 1;
			} catch (e) {
				failed.push(seq);
				const code = e.code || e.name || 'Error';
				errors[code] = (errors[code] || 0) + 1;
			}
		}
		db.close();
		process.send({ acked, failed, errors }, () => process.exit(0));
	});
	process.send('ready');
	return;
}

// ---- the primary ----------------------------------------------------------

const argv = process.argv.slice(2);
const short = argv.includes('--short');
function opt(name, dflt) {
	const i = argv.indexOf(name);
	return i >= 0 ? argv[i + 1] : dflt;
}
const ROWS = Number(opt('--rows', short ? 100000 : 1000000));
const REPS = Number(opt('--reps', short ? 2 : 5));
const GETS = Number(opt('--gets', short ? 20000 : 200000));
const TABLE = Number(opt('--table', 100000));
const WORKERS = opt('--workers', short ? '4,8' : '4,8,16').split(',').map(Number);
const SECONDS = Number(opt('--seconds', short ? 1.5 : 10));
const ONLY = opt('--only', 'insert,get,cluster').split(',');
const DIR = path.resolve(opt('--dir', path.join(repoRoot, 'target', 'node-bench')));
const OUT = opt('--out', null);
fs.mkdirSync(DIR, { recursive: true });

const lines = [];
const out = (s = '') => { lines.push(s); console.log(s); };
const note = (s) => console.error(`# ${s}`);

// Peers in a different order each repetition, so that neither always runs
// first (warm caches, the other engineers' builds...).
function alternate(peers, rep) {
	const k = rep % peers.length;
	return peers.slice(k).concat(peers.slice(0, k));
}

// 1. Bulk insert: litelane's insertMany against better-sqlite3's one-row
//    statement in a transaction and its 64-row statements.
function insertSection() {
	const rows = Array.from({ length: ROWS }, (_, i) => [i, `name-${i}`, i * 0.25]);
	const create = 'CREATE TABLE t(id INTEGER PRIMARY KEY, name TEXT, v REAL)';
	const onThread = (db) => {
		// The same call with its pipeline off (LITELANE_INSERT_CHUNK=0): all
		// rows packed first, then inserted on this thread.
		const saved = process.env.LITELANE_INSERT_CHUNK;
		process.env.LITELANE_INSERT_CHUNK = '0';
		try { db.insertMany('t', ['id', 'name', 'v'], rows); } finally {
			if (saved === undefined) delete process.env.LITELANE_INSERT_CHUNK; else process.env.LITELANE_INSERT_CHUNK = saved;
		}
	};
	const peers = {
		'litelane insertMany': (db) => db.insertMany('t', ['id', 'name', 'v'], rows),
		'litelane insertMany, not pipelined': onThread,
		'better-sqlite3 one-row statement, one transaction': (db) => {
			const ins = db.prepare('INSERT INTO t VALUES (?, ?, ?)');
			db.transaction(() => { for (const r of rows) ins.run(r[0], r[1], r[2]); })();
		},
		'better-sqlite3 64-row statements, one transaction': (db) => {
			const one = db.prepare('INSERT INTO t VALUES (?, ?, ?)');
			const many = db.prepare(`INSERT INTO t VALUES ${Array(64).fill('(?, ?, ?)').join(', ')}`);
			const args = new Array(64 * 3);
			db.transaction(() => {
				let i = 0;
				for (; i + 64 <= rows.length; i += 64) {
					for (let j = 0; j < 64; j++) {
						const r = rows[i + j];
						args[3 * j] = r[0]; args[3 * j + 1] = r[1]; args[3 * j + 2] = r[2];
					}
					many.run(args);
				}
				for (; i < rows.length; i++) one.run(rows[i][0], rows[i][1], rows[i][2]);
			})();
		},
	};
	const rates = Object.fromEntries(Object.keys(peers).map((k) => [k, []]));
	for (let rep = 0; rep < REPS; rep++) {
		for (const name of alternate(Object.keys(peers), rep)) {
			const engine = name.startsWith('litelane') ? 'litelane' : 'better-sqlite3';
			const file = path.join(DIR, 'insert.db');
			removeDb(file);
			const db = openFor(engine, file, 'insert');
			db.exec(create);
			const t0 = now();
			peers[name](db);
			const s = seconds(t0);
			const n = db.prepare('SELECT count(*) FROM t').pluck().get();
			db.close();
			removeDb(file);
			if (n !== ROWS) throw new Error(`${name}: ${n} rows stored, ${ROWS} inserted`);
			rates[name].push(ROWS / s);
			note(`insert rep ${rep + 1}/${REPS} ${name}: ${fmt(ROWS / s)} rows/s`);
		}
	}
	const lite = median(rates['litelane insertMany']);
	out(`### Bulk insert of ${fmt(ROWS)} rows (id INTEGER PRIMARY KEY, name TEXT, v REAL), median of ${REPS}`);
	out();
	out('| peer | rows/s (median) | runs | litelane insertMany ÷ peer |');
	out('|---|---:|---|---:|');
	for (const [name, xs] of Object.entries(rates)) {
		const m = median(xs);
		out(`| ${name} | ${fmt(m)} | ${xs.map((x) => fmt(x)).join(', ')} | ${name === 'litelane insertMany' ? '—' : `${(lite / m).toFixed(2)}×`} |`);
	}
	out();
}

// 2. Point get by primary key.
function getSection() {
	const files = {};
	const dbs = {};
	for (const engine of ['litelane', 'better-sqlite3']) {
		files[engine] = path.join(DIR, `get-${engine}.db`);
		removeDb(files[engine]);
		const db = openFor(engine, files[engine], 'get');
		db.exec('CREATE TABLE t(id INTEGER PRIMARY KEY, name TEXT, v REAL)');
		const ins = db.prepare('INSERT INTO t VALUES (?, ?, ?)');
		db.transaction(() => { for (let i = 0; i < TABLE; i++) ins.run(i, `name-${i}`, i * 0.25); })();
		dbs[engine] = db;
	}
	const keys = new Int32Array(GETS);
	let x = 12345;
	for (let i = 0; i < GETS; i++) { x = (x * 1103515245 + 12345) & 0x7fffffff; keys[i] = x % TABLE; }
	const times = { litelane: [], 'better-sqlite3': [] };
	// CPU time (user + system) per get as well: on a machine others load,
	// it moves far less than the wall clock does.
	const cpus = { litelane: [], 'better-sqlite3': [] };
	for (let rep = 0; rep < REPS; rep++) {
		for (const engine of alternate(Object.keys(times), rep)) {
			const get = dbs[engine].prepare('SELECT * FROM t WHERE id = ?');
			for (let i = 0; i < Math.min(GETS, 10000); i++) get.get(keys[i]);
			let sum = 0;
			const c0 = process.cpuUsage();
			const t0 = now();
			for (let i = 0; i < GETS; i++) sum += get.get(keys[i]).v;
			const us = (seconds(t0) * 1e6) / GETS;
			const c = process.cpuUsage(c0);
			const cpu = (c.user + c.system) / GETS;
			if (!(sum > 0)) throw new Error('gets returned nothing');
			times[engine].push(us);
			cpus[engine].push(cpu);
			note(`get rep ${rep + 1}/${REPS} ${engine}: ${us.toFixed(2)} µs/call, ${cpu.toFixed(2)} µs CPU/call`);
		}
	}
	for (const engine of Object.keys(dbs)) { dbs[engine].close(); removeDb(files[engine]); }
	const l = median(times.litelane);
	const b = median(times['better-sqlite3']);
	out(`### Point get by primary key (${fmt(GETS)} gets per run, table of ${fmt(TABLE)} rows), median of ${REPS}`);
	out();
	out('| peer | µs per get (median) | runs | µs of CPU per get (median) | runs |');
	out('|---|---:|---|---:|---|');
	for (const [engine, xs] of Object.entries(times)) out(`| ${engine} | ${median(xs).toFixed(2)} | ${xs.map((v) => v.toFixed(2)).join(', ')} | ${median(cpus[engine]).toFixed(2)} | ${cpus[engine].map((v) => v.toFixed(2)).join(', ')} |`);
	out();
	out(`litelane's time per get ÷ better-sqlite3's: **${(l / b).toFixed(2)}×** (CPU time: ${(median(cpus.litelane) / median(cpus['better-sqlite3'])).toFixed(2)}×)`);
	out();
}

// 3. node:cluster: W worker processes, one-row writes to one file.
function clusterRound(engine, workers) {
	return new Promise((resolve, reject) => {
		const file = path.join(DIR, 'cluster.db');
		removeDb(file);
		const setup = openFor(engine, file, 'cluster');
		setup.exec('CREATE TABLE t(id INTEGER PRIMARY KEY, worker INTEGER, seq INTEGER, payload TEXT)');
		setup.close();
		cluster.setupPrimary({ exec: __filename, args: [], silent: false });
		const procs = [];
		const reports = new Map();
		let ready = 0;
		let t0;
		for (let w = 0; w < workers; w++) {
			const p = cluster.fork({ ENGINE: engine, FILE: file, SECONDS: String(SECONDS), WORKER: String(w) });
			procs.push(p);
			p.on('message', (m) => {
				if (m === 'ready') {
					if (++ready === workers) { t0 = now(); for (const q of procs) q.send('go'); }
					return;
				}
				reports.set(w, m);
			});
			p.on('exit', (code) => {
				if (code !== 0 && !reports.has(w)) reject(new Error(`${engine} worker ${w} exited with ${code}`));
				if (reports.size === workers && procs.every((q) => q.isDead())) finish();
			});
		}
		let done = false;
		function finish() {
			if (done) return;
			done = true;
			const wall = seconds(t0);
			const check = openFor(engine, file, 'cluster');
			const count = check.prepare('SELECT count(*) FROM t WHERE worker = ?').pluck();
			const inSet = check.prepare('SELECT count(*) FROM t WHERE worker = ? AND seq = ?').pluck();
			let acked = 0;
			let lost = 0;
			let errors = 0;
			const codes = {};
			for (const [w, r] of reports) {
				acked += r.acked;
				// Rows stored for seqs that failed (their outcome was unknown
				// to the worker) are not acknowledged ones.
				let storedFailed = 0;
				for (const s of r.failed) storedFailed += inSet.get(w, s);
				lost += Math.max(0, r.acked - (count.get(w) - storedFailed));
				for (const [c, n] of Object.entries(r.errors)) { codes[c] = (codes[c] || 0) + n; errors += n; }
			}
			check.close();
			removeDb(file);
			resolve({ rate: acked / wall, acked, lost, errors, codes });
		}
	});
}

async function clusterSection() {
	const results = [];
	for (const workers of WORKERS) {
		const per = { litelane: [], 'better-sqlite3': [] };
		for (let rep = 0; rep < REPS; rep++) {
			for (const engine of alternate(Object.keys(per), rep)) {
				const r = await clusterRound(engine, workers);
				per[engine].push(r);
				note(`cluster ${workers} workers rep ${rep + 1}/${REPS} ${engine}: ${fmt(r.rate)} writes/s, ${r.errors} errors, ${r.lost} lost`);
			}
		}
		results.push([workers, per]);
	}
	out(`### node:cluster, one-row writes for ${SECONDS} s per round (litelane \`safe\` vs better-sqlite3 WAL, synchronous=FULL, timeout 5 s), median of ${REPS}`);
	out();
	out('| workers | litelane writes/s | better-sqlite3 writes/s | ratio | litelane errors / lost | better-sqlite3 errors / lost |');
	out('|---:|---:|---:|---:|---|---|');
	for (const [workers, per] of results) {
		const l = median(per.litelane.map((r) => r.rate));
		const b = median(per['better-sqlite3'].map((r) => r.rate));
		const sum = (rs, k) => rs.reduce((a, r) => a + r[k], 0);
		const codes = (rs) => {
			const all = {};
			for (const r of rs) for (const [c, n] of Object.entries(r.codes)) all[c] = (all[c] || 0) + n;
			const s = Object.entries(all).map(([c, n]) => `${c} ${n}`).join(', ');
			return s ? ` (${s})` : '';
		};
		out(`| ${workers} | ${fmt(l)} | ${fmt(b)} | ${(l / b).toFixed(2)}× | ${sum(per.litelane, 'errors')} / ${sum(per.litelane, 'lost')}${codes(per.litelane)} | ${sum(per['better-sqlite3'], 'errors')} / ${sum(per['better-sqlite3'], 'lost')}${codes(per['better-sqlite3'])} |`);
	}
	out();
	out('Errors and lost acknowledged rows are totals over all rounds; a row is lost when a worker was told its insert succeeded and the row is not in the file afterwards.');
	out();
}

(async () => {
	const started = Date.now();
	const bsqVersion = require(path.join(bsqModule, 'package.json')).version;
	out(`## litelane vs better-sqlite3 ${bsqVersion} (Node ${process.version}, ${os.cpus().length} cores, ${new Date().toISOString().slice(0, 16)}Z)`);
	out();
	out(`Command: \`${['scripts/node-bench', ...argv].join(' ')}\`; SQLite ${load('litelane').sqliteVersion()} in litelane. Peers alternate within each repetition.`);
	out();
	if (ONLY.includes('insert')) insertSection();
	if (ONLY.includes('get')) getSection();
	if (ONLY.includes('cluster')) await clusterSection();
	out(`Wall time ${((Date.now() - started) / 1000).toFixed(0)} s.`);
	if (OUT) fs.writeFileSync(OUT, lines.join('\n') + '\n');
})().catch((e) => { console.error(e); process.exit(1); });
