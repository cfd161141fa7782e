#!/usr/bin/env node
// The better-sqlite3 client of scripts/lane-fairness and scripts/lane-bench:
// writes tagged rows into the table `rows` of a WAL database for a while and
// logs every write. Same options and log format as bench/lane/go/writer.go:
//
//   W kind pid wid seq arrival_ns grant_ns end_ns status
//   B kind pid wid seq grant_ns            (with --flush, when BEGIN returned)
//
// --module DIR is the better-sqlite3 package to load (one built against the
// lane amalgamation, one against the stock one: target/lane-bench/node-*).
'use strict';
const fs = require('fs');

const opts = {
  db: '', kind: 'node', mode: 'auto', sync: 'NORMAL', log: '', seconds: 3, count: 0,
  rows: 1, payload: 64, 'start-at': 0, 'timeout-ms': 5000, 'hold-ms': 0, flush: false,
  module: '',
};
const argv = process.argv.slice(2);
for (let i = 0; i < argv.length; i++) {
  const a = argv[i];
  if (a === '--help' || a === '-h') {
    console.log('writer.js --db FILE --log FILE --module DIR [--kind K] [--mode auto|immediate|deferred] ' +
      '[--sync NORMAL] [--seconds S | --count N] [--rows R] [--start-at NS] [--timeout-ms MS] [--hold-ms MS] [--flush]');
    process.exit(0);
  }
  if (!a.startsWith('--') || !(a.slice(2) in opts)) {
    console.error(`writer.js: unknown argument ${a}`);
    process.exit(2);
  }
  const k = a.slice(2);
  if (k === 'flush') { opts.flush = true; continue; }
  opts[k] = typeof opts[k] === 'number' ? Number(argv[++i]) : argv[++i];
}
if (!opts.db || !opts.log || !opts.module) {
  console.error('writer.js: --db, --log and --module are required');
  process.exit(2);
}
if (!['auto', 'immediate', 'deferred'].includes(opts.mode)) {
  console.error('writer.js: --mode is auto, immediate or deferred');
  process.exit(2);
}
const Database = require(opts.module);

// Wall-clock nanoseconds (as Go's time.Now().UnixNano() and Python's
// time.time_ns(), to within a microsecond).
const origin = performance.timeOrigin;
const now = () => Math.round((origin + performance.now()) * 1e6);
const sleepBuf = new Int32Array(new SharedArrayBuffer(4));
const sleepMs = (ms) => { if (ms > 0) Atomics.wait(sleepBuf, 0, 0, ms); };

const fd = fs.openSync(opts.log, 'w');
let buf = [];
const line = (s) => {
  if (opts.flush) fs.writeSync(fd, s);
  else {
    buf.push(s);
    if (buf.length >= 4096) { fs.writeSync(fd, buf.join('')); buf = []; }
  }
};

const db = new Database(opts.db, { timeout: opts['timeout-ms'] });
db.pragma(`synchronous=${opts.sync}`);
const ins = db.prepare('INSERT INTO rows(kind, pid, wid, seq, sub, payload) VALUES (?, ?, ?, ?, ?, ?)');
const begin = db.prepare(opts.mode === 'immediate' ? 'BEGIN IMMEDIATE' : 'BEGIN');
const commit = db.prepare('COMMIT');
const rollback = db.prepare('ROLLBACK');
const peek = db.prepare('SELECT max(id) AS m FROM rows');
const payload = 'x'.repeat(opts.payload);
const pid = process.pid;

if (opts['start-at'] > 0) sleepMs((opts['start-at'] - now()) / 1e6);
const start = now();
const deadline = start + opts.seconds * 1e9;
for (let seq = 0; ; seq++) {
  if (opts.count > 0 ? seq >= opts.count : now() >= deadline) break;
  const arrival = now();
  let grant = 0;
  let status = 'ok';
  try {
    if (opts.mode === 'auto') {
      ins.run(opts.kind, pid, 0, seq, 0, payload);
    } else {
      begin.run();
      try {
        if (opts.mode === 'deferred') peek.get();
        grant = now();
        if (opts.flush && opts.mode === 'immediate') line(`B\t${opts.kind}\t${pid}\t0\t${seq}\t${grant}\n`);
        const n = opts.mode === 'deferred' ? 1 : opts.rows;
        for (let sub = 0; sub < n; sub++) ins.run(opts.kind, pid, 0, seq, sub, payload);
        sleepMs(opts['hold-ms']);
        commit.run();
      } catch (e) {
        if (db.inTransaction) rollback.run();
        throw e;
      }
    }
  } catch (e) {
    status = 'err:' + String(e.message).replace(/[\t\n]/g, ' ') + (e.code ? ` [${e.code}]` : '');
  }
  const end = now();
  line(`W\t${opts.kind}\t${pid}\t0\t${seq}\t${arrival}\t${grant}\t${end}\t${status}\n`);
}
if (buf.length) fs.writeSync(fd, buf.join(''));
fs.closeSync(fd);
db.close();
