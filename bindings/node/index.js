'use strict';
// litelane for Node.js: better-sqlite3's API over litelane's engine.
// Writes go through the engine's fair write queue (shared with other
// processes that open the same file), reads through its reader pool, and an
// explicit transaction holds the writer from BEGIN to COMMIT/ROLLBACK.
// See docs/node.md.
const fs = require('fs');
const path = require('path');
const SqliteError = require('./lib/sqlite-error');

let native;
function addon() {
	if (!native) native = require('./litelane.node');
	return native;
}

const KINDS = { TypeError, RangeError };
let pendingFunctionError = null;
let hasPendingFunctionError = false;

// Native errors arrive as `KIND\u0001message`: an SQLite code name, or
// TypeError/RangeError; a JavaScript function's own exception is rethrown.
function translate(err) {
	if (!(err instanceof Error)) return err;
	const msg = err.message;
	const i = msg.indexOf('\u0001');
	if (i < 0) return err;
	const kind = msg.slice(0, i);
	const text = msg.slice(i + 1);
	if (kind === 'FunctionError' && hasPendingFunctionError) {
		const e = pendingFunctionError;
		pendingFunctionError = null;
		hasPendingFunctionError = false;
		return e;
	}
	pendingFunctionError = null;
	hasPendingFunctionError = false;
	if (KINDS[kind]) return new KINDS[kind](text);
	if (kind === 'Error') return new Error(text);
	return new SqliteError(text, kind);
}

function call(db, fn) {
	try {
		return fn(db);
	} catch (err) {
		throw translate(err);
	}
}

// A native call that may run user functions: the connection is busy
// meanwhile (better-sqlite3 refuses reentrant use the same way).
function busyCall(st, fn) {
	st.busy = true;
	try {
		return call(st.db, fn);
	} finally {
		st.busy = false;
	}
}

const BUSY = 'This database connection is busy executing a query';
// What Statement#_getFast returns when the statement takes the general path.
const NOT_FAST = Symbol('not fast');

// Database methods better-sqlite3 refuses while a user function runs
// (busy) or, unless `iterating` is allowed, while a statement iterates.
function ready(st, allowIterating) {
	const db = open(st);
	if (st.busy) throw new TypeError(BUSY);
	if (!allowIterating && st.iterating > 0 && !st.unsafe) throw new TypeError(BUSY);
	return db;
}

function bool(options, key) {
	let value = false;
	if (key in options && typeof (value = options[key]) !== 'boolean') {
		throw new TypeError(`Expected the "${key}" option to be a boolean`);
	}
	return value;
}

const cpp = Symbol('litelane native database');

function Database(filenameGiven, options) {
	if (new.target == null) return new Database(filenameGiven, options);
	// A Buffer (from Database#serialize()): an in-memory database that
	// starts with its content.
	let buffer;
	if (Buffer.isBuffer(filenameGiven)) {
		buffer = filenameGiven;
		filenameGiven = ':memory:';
	}
	if (filenameGiven == null) filenameGiven = '';
	if (options == null) options = {};
	if (typeof filenameGiven !== 'string') throw new TypeError('Expected first argument to be a string');
	if (typeof options !== 'object') throw new TypeError('Expected second argument to be an options object');
	if ('readOnly' in options) throw new TypeError('Misspelled option "readOnly" should be "readonly"');
	if ('memory' in options) throw new TypeError('Option "memory" was removed in v7.0.0 (use ":memory:" filename instead)');

	const filename = filenameGiven.trim();
	const anonymous = filename === '' || filename === ':memory:';
	const readonly = bool(options, 'readonly');
	const fileMustExist = bool(options, 'fileMustExist');
	const timeout = 'timeout' in options ? options.timeout : 5000;
	const verbose = 'verbose' in options ? options.verbose : null;
	const profile = 'profile' in options ? options.profile : undefined;

	if (readonly && anonymous && !buffer) throw new TypeError('In-memory/temporary databases cannot be readonly');
	if (!Number.isInteger(timeout) || timeout < 0) throw new TypeError('Expected the "timeout" option to be a positive integer');
	if (timeout > 0x7fffffff) throw new RangeError('Option "timeout" cannot be greater than 2147483647');
	if (verbose != null && typeof verbose !== 'function') throw new TypeError('Expected the "verbose" option to be a function');
	if (profile !== undefined && typeof profile !== 'string') throw new TypeError('Expected the "profile" option to be a string');

	if (!anonymous && !filename.startsWith('file:')) {
		if (!fs.existsSync(path.dirname(filename))) {
			throw new TypeError('Cannot open database because the directory does not exist');
		}
		if ((readonly || fileMustExist) && !fs.existsSync(filename)) {
			throw new SqliteError('unable to open database file', 'SQLITE_CANTOPEN');
		}
	}

	const { NativeDatabase } = addon();
	const db = call(null, () => new NativeDatabase(anonymous ? ':memory:' : filename, { profile, timeout }));
	if (buffer && buffer.length > 0) {
		try {
			call(db, (d) => d.deserialize(buffer));
		} catch (err) {
			db.close();
			throw err;
		}
	}
	const scratch = newScratch();
	const fast = db.setScratch(scratch.buffer, db);
	Object.defineProperty(this, cpp, {
		value: {
			db,
			name: filenameGiven,
			memory: anonymous,
			readonly,
			verbose: verbose || null,
			safeIntegers: false,
			busy: false,
			iterating: 0,
			unsafe: false,
			// Kept here so that no call asks the native side (one crossing less per statement).
			isOpen: true,
			// Where a point read's parameters and row cross (Statement#get),
			// and the native function that reads it.
			scratch,
			fast,
		},
	});
}

// The memory Statement#get shares with the native side (src/lib.rs,
// `Scratch`, has the layout): a statement's parameters and its row's
// numbers and nulls pass through it without a native call per value.
const MAX_FAST_PARAMS = 32;
const MAX_FAST_COLUMNS = 64;
const TAG_NULL = 0;
const TAG_NUMBER = 1;
const TAG_OTHER = 2;
const FAST_READER = 1;
const FAST_SAFE_INTS = 2;
const FAST_EXTRAS_ARRAY = 4;
const FAST_WRONG_COUNT = 8;
const FAST_OP_GET = 0;
const FAST_OP_RUN = 1;
function newScratch() {
	const buffer = new ArrayBuffer(1024);
	return {
		buffer,
		header: new Uint32Array(buffer, 0, 16),
		paramNums: new Float64Array(buffer, 64, MAX_FAST_PARAMS),
		paramTags: new Uint8Array(buffer, 320, MAX_FAST_PARAMS),
		colNums: new Float64Array(buffer, 384, MAX_FAST_COLUMNS),
		colTags: new Uint8Array(buffer, 896, MAX_FAST_COLUMNS),
		// A run's last insert rowid, exactly (safeIntegers).
		rowid: new BigInt64Array(buffer, 384 + 16, 1),
	};
}

// Writes a statement's parameters into the scratch memory: numbers and
// nulls there, the others (strings, bigints, buffers) returned, the only
// one itself or an array of them (undefined when none). NOT_FAST for a
// parameter the general path must see (arrays, objects, anything else).
function packParams(sc, args) {
	const n = args.length;
	let nx = 0;
	let x;
	let xs;
	for (let i = 0; i < n; i++) {
		const a = args[i];
		if (typeof a === 'number') {
			sc.paramNums[i] = a;
			sc.paramTags[i] = TAG_NUMBER;
		} else if (a === null || a === undefined) {
			sc.paramTags[i] = TAG_NULL;
		} else if (typeof a === 'string' || typeof a === 'bigint' || Buffer.isBuffer(a)) {
			sc.paramTags[i] = TAG_OTHER;
			if (nx === 0) x = a;
			else if (nx === 1) xs = [x, a];
			else xs.push(a);
			nx++;
		} else {
			return NOT_FAST;
		}
	}
	return nx > 1 ? xs : x;
}

function state(db) {
	return db[cpp];
}

function open(st) {
	if (!st.isOpen) throw new TypeError('The database connection is not open');
	return st.db;
}

Object.defineProperties(Database.prototype, {
	name: { get() { return state(this).name; }, enumerable: true },
	open: { get() { return state(this).isOpen; }, enumerable: true },
	inTransaction: { get() { const st = state(this); return st.isOpen && st.db.inTransaction; }, enumerable: true },
	readonly: { get() { return state(this).readonly; }, enumerable: true },
	memory: { get() { return state(this).memory; }, enumerable: true },
});

Database.prototype.prepare = function prepare(sql) {
	if (typeof sql !== 'string') throw new TypeError('Expected first argument to be a string');
	ready(state(this), true);
	return new Statement(this, sql, false);
};

Database.prototype.exec = function exec(sql) {
	if (typeof sql !== 'string') throw new TypeError('Expected first argument to be a string');
	const st = state(this);
	const db = ready(st, false);
	if (st.verbose) { const verbose = st.verbose; verbose(sql); }
	if (st.readonly) {
		// Refuse a write in a read-only database before anything runs.
		for (const part of splitForCheck(sql)) {
			const info = call(db, (d) => d.prepare(part));
			if (!info.reader) throw new SqliteError('attempt to write a readonly database', 'SQLITE_READONLY');
		}
	}
	busyCall(st, (d) => d.exec(sql));
	return this;
};

function splitForCheck(sql) {
	// The native side splits exactly; here a rough split is enough, as
	// each part is only prepared to see whether it writes.
	return sql.split(';').map((s) => s.trim()).filter((s) => s.length);
}

Database.prototype.close = function close() {
	const st = state(this);
	if (st.isOpen) {
		ready(st, false);
		call(st.db, (d) => d.close());
		st.isOpen = false;
	}
	return this;
};

Database.prototype.defaultSafeIntegers = function defaultSafeIntegers(toggle) {
	state(this).safeIntegers = toggle === undefined ? true : !!toggle;
	return this;
};

Database.prototype.unsafeMode = function unsafeMode(unsafe) {
	// Lets statements run while others iterate (rows are read in one go
	// here, so it is always safe).
	state(this).unsafe = unsafe === undefined ? true : !!unsafe;
	return this;
};

Database.prototype.pragma = function pragma(source, options) {
	if (options == null) options = {};
	if (typeof source !== 'string') throw new TypeError('Expected first argument to be a string');
	if (typeof options !== 'object') throw new TypeError('Expected second argument to be an options object');
	const simple = bool(options, 'simple');
	ready(state(this), false);
	const stmt = new Statement(this, `PRAGMA ${source}`, true);
	return simple ? stmt.pluck().get() : stmt.all();
};

Database.prototype.checkpoint = function checkpoint(mode) {
	const db = open(state(this));
	const [walFrames, checkpointedFrames, busy] = call(db, (d) => d.checkpoint(mode == null ? 'PASSIVE' : String(mode)));
	return { walFrames, checkpointedFrames, busy: !!busy };
};

Database.prototype.metrics = function metrics() {
	const db = open(state(this));
	return JSON.parse(call(db, (d) => d.metrics()));
};

// A native promise's rejection as this package's errors.
function settled(promise) {
	return promise.then(null, (err) => { throw translate(err); });
}

// The parameters of one writeAsync entry, as Statement#run takes them:
// an array is the list of run's arguments (values bind by position, a
// plain object by name), a plain object binds by name.
function writeParams(params, i) {
	const anon = [];
	let named = null;
	const addNamed = (o) => {
		if (named) throw new TypeError(`writeAsync entry ${i}: you cannot specify named parameters in two different objects`);
		named = {};
		for (const k of Object.keys(o)) named[k] = o[k];
	};
	if (params === undefined || params === null) return { anon, named };
	if (Array.isArray(params)) {
		for (const a of params) {
			if (Array.isArray(a)) { for (const x of a) anon.push(x); continue; }
			if (a !== null && typeof a === 'object' && !Buffer.isBuffer(a) && isPlainObject(a)) { addNamed(a); continue; }
			anon.push(a);
		}
		return { anon, named };
	}
	if (typeof params === 'object' && !Buffer.isBuffer(params) && isPlainObject(params)) {
		addNamed(params);
		return { anon, named };
	}
	throw new TypeError(`writeAsync entry ${i}: parameters must be an array or a plain object`);
}

// litelane: one write transaction, given in advance, run off this thread.
Database.prototype.writeAsync = function writeAsync(statements) {
	try {
		if (!Array.isArray(statements)) throw new TypeError('Expected first argument to be an array of [sql, params] entries');
		const entries = statements.map((s, i) => {
			if (typeof s === 'string') return [s, [], null];
			if (!Array.isArray(s) || typeof s[0] !== 'string' || s.length > 2) {
				throw new TypeError(`writeAsync entry ${i} is not a string or an [sql, params] array`);
			}
			const p = writeParams(s[1], i);
			return [s[0], p.anon, p.named];
		});
		const st = state(this);
		const db = ready(st, false);
		if (st.readonly) throw new SqliteError('attempt to write a readonly database', 'SQLITE_READONLY');
		const safe = st.safeIntegers;
		const exact = (rs) => rs.map((r) => ({
			changes: r.changes,
			lastInsertRowid: safe ? r.lastInsertRowid : Number(r.lastInsertRowid),
		}));
		return settled(call(db, (d) => d.writeAsync(entries))).then(exact);
	} catch (err) {
		return Promise.reject(translate(err));
	}
};

// importFile's options: the name JavaScript gives, and ImportOptions' field.
const IMPORT_OPTIONS = {
	table: 'table', more: 'more', format: 'format', types: 'types', mode: 'mode',
	onConflict: 'on_conflict', noHeader: 'no_header', noDefaultNulls: 'no_default_nulls',
	strict: 'strict', alter: 'alter', resume: 'resume', delimiter: 'delimiter', plan: 'plan',
	rejects: 'rejects', pk: 'pk', sourceColumn: 'source_column', rejectsTable: 'rejects_table',
	commitEvery: 'commit_every', maxRejects: 'max_rejects', nulls: 'nulls',
};

function abortError(message, signal) {
	const e = new Error(message);
	e.name = 'AbortError';
	e.code = 'ABORT_ERR';
	if (signal) e.cause = signal.reason;
	return e;
}

// litelane: imports a CSV/TSV/NDJSON file with litelane-import, off this thread.
Database.prototype.importFile = function importFile(source, options) {
	try {
		if (typeof source !== 'string') throw new TypeError('Expected first argument to be a string (the file to import)');
		if (options == null) options = {};
		if (typeof options !== 'object') throw new TypeError('Expected second argument to be an options object');
		const native = {};
		let progress = null;
		let signal = null;
		for (const key of Object.keys(options)) {
			const v = options[key];
			if (v === undefined) continue;
			if (key === 'progress') {
				if (typeof v !== 'function') throw new TypeError('Expected the "progress" option to be a function');
				progress = v;
			} else if (key === 'signal') {
				if (v === null || typeof v !== 'object' || typeof v.aborted !== 'boolean' || typeof v.addEventListener !== 'function') {
					throw new TypeError('Expected the "signal" option to be an AbortSignal');
				}
				signal = v;
			} else if (key === 'header') {
				// true: the first record is a header; false: it is data;
				// unset: sniffed.
				if (typeof v !== 'boolean') throw new TypeError('Expected the "header" option to be a boolean');
				native[v ? 'header' : 'no_header'] = true;
			} else if (key === 'columnTypes') {
				if (v === null || typeof v !== 'object') throw new TypeError('Expected the "columnTypes" option to be an object of column: TYPE');
				native.types_for = Object.keys(v).map((c) => `${c}=${v[c]}`);
			} else if (Object.prototype.hasOwnProperty.call(IMPORT_OPTIONS, key)) {
				native[IMPORT_OPTIONS[key]] = v;
			} else {
				throw new TypeError(`importFile: unknown option "${key}"; the options are ${Object.keys(IMPORT_OPTIONS).concat(['header', 'columnTypes', 'progress', 'signal']).join(', ')}`);
			}
		}
		if (signal && signal.aborted) return Promise.reject(abortError(`importFile of ${source} was aborted before it started`, signal));
		const st = state(this);
		const db = ready(st, false);
		if (st.readonly) throw new SqliteError('attempt to write a readonly database', 'SQLITE_READONLY');
		const stop = new (addon().ImportStop)();
		let callbackError = null;
		let hasCallbackError = false;
		let finished = false;
		let lastSeen = null;
		const tell = (p) => {
			if (hasCallbackError) return;
			lastSeen = p;
			try {
				progress(p);
			} catch (e) {
				callbackError = e;
				hasCallbackError = true;
				stop.stop();
			}
		};
		// A report that arrives after the promise settled is dropped.
		const onProgress = progress && ((p) => { if (!finished) tell(p); });
		const onAbort = () => stop.stop();
		if (signal) signal.addEventListener('abort', onAbort, { once: true });
		const done = () => { if (signal) signal.removeEventListener('abort', onAbort); };
		const pending = call(db, (d) => d.importFile(source, JSON.stringify(native), onProgress || undefined, stop));
		return settled(pending).then((text) => {
			done();
			const out = JSON.parse(text);
			if (hasCallbackError) throw callbackError;
			if (typeof out.aborted === 'string') {
				finished = true;
				throw abortError(`importFile of ${source} was aborted: ${out.aborted}`, signal);
			}
			// The last report, if the threadsafe call has not delivered it yet.
			if (progress && out.progress) {
				const [rows, bytes, totalBytes] = out.progress;
				if (!lastSeen || lastSeen.rows !== rows || lastSeen.bytes !== bytes) tell({ rows, bytes, totalBytes });
			}
			finished = true;
			if (hasCallbackError) throw callbackError;
			return out.summary;
		}, (err) => {
			finished = true;
			done();
			if (hasCallbackError) throw callbackError;
			throw err;
		});
	} catch (err) {
		return Promise.reject(translate(err));
	}
};

// Packs column `c` of rows[from..to) for the native side: a Float64Array
// when every value is a number, [all strings joined, their lengths] when
// every value is a string, else the values themselves.
function packColumn(rows, c, from, to) {
	const n = to - from;
	if (n === 0) return [];
	const first = rows[from][c];
	if (typeof first === 'number') {
		const out = new Float64Array(n);
		for (let i = 0; i < n; i++) {
			const v = rows[from + i][c];
			if (typeof v !== 'number') return plainColumn(rows, c, from, to);
			out[i] = v;
		}
		return out;
	}
	if (typeof first === 'string') {
		const parts = new Array(n);
		const lengths = new Uint32Array(n);
		for (let i = 0; i < n; i++) {
			const v = rows[from + i][c];
			if (typeof v !== 'string') return plainColumn(rows, c, from, to);
			parts[i] = v;
			lengths[i] = v.length;
		}
		return [parts.join(''), lengths];
	}
	return plainColumn(rows, c, from, to);
}

function plainColumn(rows, c, from, to) {
	const out = new Array(to - from);
	for (let i = from; i < to; i++) out[i - from] = rows[i][c];
	return out;
}

function packRows(rows, m, from, to) {
	const packed = new Array(m);
	for (let c = 0; c < m; c++) packed[c] = packColumn(rows, c, from, to);
	return packed;
}

// Rows per chunk of a pipelined insertMany: the engine inserts one chunk
// on a thread of its own while JavaScript packs the next.
// LITELANE_INSERT_CHUNK sets it; 0 packs everything first and inserts on
// this thread (scripts/node-bench compares both).
function insertChunkRows() {
	const v = process.env.LITELANE_INSERT_CHUNK;
	if (v === undefined || v === '') return 32768;
	const n = Number(v);
	return Number.isInteger(n) && n > 0 ? n : Infinity;
}

Database.prototype.insertMany = function insertMany(table, columns, rows) {
	if (typeof table !== 'string') throw new TypeError('Expected first argument to be a string');
	if (!Array.isArray(columns) || !columns.every((c) => typeof c === 'string')) throw new TypeError('Expected second argument to be an array of column names');
	if (!Array.isArray(rows)) throw new TypeError('Expected third argument to be an array of rows');
	const db = open(state(this));
	const n = rows.length;
	const m = columns.length;
	for (let i = 0; i < n; i++) {
		const r = rows[i];
		if (!Array.isArray(r) || r.length !== m) {
			throw new RangeError(`Row ${i} of insertMany is not an array of ${m} values`);
		}
	}
	const chunkRows = insertChunkRows();
	if (n <= chunkRows || !call(db, (d) => d.insertStart(table, columns))) {
		const inserted = call(db, (d) => d.insertColumns(table, columns, n, packRows(rows, m, 0, n)));
		return { inserted };
	}
	let finished = false;
	try {
		for (let from = 0; from < n; from += chunkRows) {
			const to = Math.min(n, from + chunkRows);
			const packed = packRows(rows, m, from, to);
			call(db, (d) => d.insertChunk(to - from, packed));
		}
		finished = true;
		return { inserted: call(db, (d) => d.insertFinish(false)) };
	} finally {
		if (!finished) {
			try { db.insertFinish(true); } catch { /* the first error is the one to report */ }
		}
	}
};

Database.prototype.function = function defineFunction(name, options, fn) {
	if (options == null) options = {};
	if (typeof options === 'function') { fn = options; options = {}; }
	if (typeof name !== 'string') throw new TypeError('Expected first argument to be a string');
	if (typeof fn !== 'function') throw new TypeError('Expected last argument to be a function');
	if (typeof options !== 'object') throw new TypeError('Expected second argument to be an options object');
	if (!name) throw new TypeError('User-defined function name cannot be an empty string');
	const st = state(this);
	const safeIntegers = 'safeIntegers' in options ? bool(options, 'safeIntegers') : st.safeIntegers;
	const deterministic = bool(options, 'deterministic');
	const directOnly = bool(options, 'directOnly');
	const varargs = bool(options, 'varargs');
	let argCount = -1;
	if (!varargs) {
		argCount = fn.length;
		if (!Number.isInteger(argCount) || argCount < 0) throw new TypeError('Expected function.length to be a positive integer');
		if (argCount > 100) throw new RangeError('User-defined functions cannot have more than 100 arguments');
	}
	const db = ready(st, false);
	// `undefined` tells the native side that the function threw.
	const wrapped = function () {
		try {
			const r = fn.apply(this, arguments);
			return r === undefined ? null : r;
		} catch (e) {
			pendingFunctionError = e;
			hasPendingFunctionError = true;
			return undefined;
		}
	};
	call(db, (d) => d.function(name, wrapped, argCount, deterministic, directOnly, safeIntegers));
	return this;
};

Database.prototype.aggregate = function defineAggregate(name, options) {
	if (typeof name !== 'string') throw new TypeError('Expected first argument to be a string');
	if (typeof options !== 'object' || options === null) throw new TypeError('Expected second argument to be an options object');
	if (!name) throw new TypeError('User-defined function name cannot be an empty string');
	const fnOption = (key, required) => {
		const value = key in options ? options[key] : null;
		if (typeof value === 'function') return value;
		if (value != null) throw new TypeError(`Expected the "${key}" option to be a function`);
		if (required) throw new TypeError(`Missing required option "${key}"`);
		return null;
	};
	const length = ({ length }) => {
		if (Number.isInteger(length) && length >= 0) return length;
		throw new TypeError('Expected function.length to be a positive integer');
	};
	const start = 'start' in options ? options.start : null;
	const step = fnOption('step', true);
	const inverse = fnOption('inverse', false);
	const result = fnOption('result', false);
	const st = state(this);
	const safeIntegers = 'safeIntegers' in options ? bool(options, 'safeIntegers') : st.safeIntegers;
	const deterministic = bool(options, 'deterministic');
	const directOnly = bool(options, 'directOnly');
	const varargs = bool(options, 'varargs');
	let argCount = -1;
	if (!varargs) {
		argCount = Math.max(length(step), inverse ? length(inverse) : 0);
		if (argCount > 0) argCount -= 1;
		if (argCount > 100) throw new RangeError('User-defined functions cannot have more than 100 arguments');
	}
	const db = ready(st, false);
	// Accumulators by id; op: 0 start, 1 step, 2 inverse, 3 value, 4 final,
	// 5 value of an empty window.
	const accs = new Map();
	const windowed = new Set();
	const finish = (v) => {
		if (result) v = result(v);
		return v === undefined ? null : v;
	};
	const dispatch = function (op, id, ...args) {
		try {
			switch (op) {
				case 0: accs.set(id, typeof start === 'function' ? start() : start); return null;
				case 1: case 2: {
					const r = (op === 1 ? step : inverse)(accs.get(id), ...args);
					if (r !== undefined) accs.set(id, r);
					return null;
				}
				case 3: windowed.add(id); return finish(accs.get(id));
				case 4: {
					// After a window's values (op 3), SQLite's final call only
					// cleans up: its result is not used, so result() is not called.
					const v = accs.get(id);
					accs.delete(id);
					if (windowed.delete(id)) return null;
					return finish(v);
				}
				case 6: accs.delete(id); windowed.delete(id); return null;
				default: return finish(typeof start === 'function' ? start() : start);
			}
		} catch (e) {
			if (op === 4) { accs.delete(id); windowed.delete(id); }
			pendingFunctionError = e;
			hasPendingFunctionError = true;
			return undefined;
		}
	};
	call(db, (d) => d.aggregate(name, dispatch, argCount, !!inverse, deterministic, directOnly, safeIntegers));
	return this;
};
// ---- virtual tables (Database#table) -----------------------------------

const GeneratorFunction = Object.getPrototypeOf(function* () {});

function identifiers(list, what) {
	if (!Array.isArray(list)) throw new TypeError(`Expected the "${what}" option to be an array of strings`);
	const seen = new Set();
	for (let i = 0; i < list.length; i++) {
		const name = list[i];
		if (typeof name !== 'string') throw new TypeError(`Expected the "${what}" option to be an array of strings`);
		if (seen.has(name)) throw new TypeError(`Duplicate name "${name}" in the "${what}" option`);
		seen.add(name);
	}
	return list.slice();
}

// Checks a table definition ({ columns, rows, parameters?, safeIntegers?,
// directOnly? }) and returns what the native module needs.
function tableDefinition(def, defaultSafeIntegers) {
	if (typeof def !== 'object' || def === null) throw new TypeError('Virtual table definition must be an object');
	const safeIntegers = 'safeIntegers' in def ? bool(def, 'safeIntegers') : defaultSafeIntegers;
	const directOnly = bool(def, 'directOnly');
	const rows = def.rows;
	if (typeof rows !== 'function' || Object.getPrototypeOf(rows) !== GeneratorFunction) {
		throw new TypeError('Expected the "rows" option to be a generator function');
	}
	if (!('columns' in def)) throw new TypeError('Missing required option "columns"');
	const columns = identifiers(def.columns, 'columns');
	if (!columns.length) throw new RangeError('Virtual tables must have at least one column');
	let parameters;
	if ('parameters' in def) {
		parameters = identifiers(def.parameters, 'parameters');
	} else {
		const n = rows.length;
		if (typeof n !== 'number' || !Number.isInteger(n) || n < 0) {
			throw new TypeError('Expected the "rows" generator function\'s length to be a positive integer');
		}
		if (n > 32) throw new RangeError('Virtual tables cannot have more than 32 parameters');
		parameters = Array.from({ length: n }, (_, i) => `$${i + 1}`);
	}
	if (parameters.length > 32) throw new RangeError('Virtual tables cannot have more than 32 parameters');
	for (const p of parameters) {
		if (columns.includes(p)) throw new TypeError(`"${p}" is both a column and a parameter`);
	}
	const quote = (s) => `"${s.replace(/"/g, '""')}"`;
	const declaration = `CREATE TABLE x(${columns.map(quote).concat(parameters.map((p) => `${quote(p)} HIDDEN`)).join(', ')})`;
	return { rows, columns, parameters: parameters.length, safeIntegers, directOnly, declaration };
}

function sqlValue(v) {
	return v === null || typeof v === 'number' || typeof v === 'bigint' || typeof v === 'string' || Buffer.isBuffer(v);
}

// One yielded row as an array in column order.
function tableRow(def, value) {
	const n = def.columns.length;
	let row;
	if (Array.isArray(value)) {
		if (value.length !== n) throw new TypeError(`Virtual table row has ${value.length} values, expected ${n}`);
		row = value;
	} else if (value !== null && typeof value === 'object') {
		const keys = Object.keys(value);
		if (keys.length !== n) throw new TypeError(`Virtual table row has ${keys.length} properties, expected ${n}`);
		row = new Array(n);
		for (let i = 0; i < n; i++) {
			const c = def.columns[i];
			if (!Object.prototype.hasOwnProperty.call(value, c)) throw new TypeError(`Virtual table row is missing column "${c}"`);
			row[i] = value[c];
		}
	} else {
		throw new TypeError('Virtual table generators must yield arrays or objects');
	}
	for (let i = 0; i < n; i++) {
		if (row[i] === undefined) {
			if (row === value) row = value.slice();
			row[i] = null;
		} else if (!sqlValue(row[i])) throw new TypeError('Virtual table rows can only hold numbers, strings, bigints, buffers, and null');
	}
	return row;
}

Database.prototype.table = function table(name, factory) {
	if (typeof name !== 'string') throw new TypeError('Expected first argument to be a string');
	if (!name) throw new TypeError('Virtual table module name cannot be an empty string');
	const st = state(this);
	let fixed = null;
	if (typeof factory === 'object' && factory !== null) {
		fixed = tableDefinition(factory, st.safeIntegers);
	} else if (typeof factory !== 'function' || Object.getPrototypeOf(factory) === GeneratorFunction) {
		throw new TypeError('Expected second argument to be a function or a table definition object');
	}
	const db = ready(st, false);
	const defaultSafe = st.safeIntegers;
	// Definitions by key (0: the fixed one), tables made by the factory by
	// database and name (every connection of the engine opens them), and
	// running generators by cursor id.
	const defs = new Map();
	const tables = new Map();
	const running = new Map();
	let nextKey = 1;
	if (fixed) defs.set(0, fixed);
	const step = (def, gen) => {
		const r = gen.next();
		return r.done ? null : tableRow(def, r.value);
	};
	const dispatch = function (op, a, b, ...rest) {
		try {
			switch (op) {
				case 0: { // connect (a: create), b: module, rest: database, table, args
					let key = 0;
					if (!fixed) {
						const [database, tableName, ...args] = rest;
						const id = `${database}\u0000${tableName}`;
						key = a ? undefined : tables.get(id);
						if (key === undefined) {
							const made = factory.apply({ module: b, database, table: tableName }, args);
							const def = tableDefinition(made, defaultSafe);
							key = nextKey++;
							defs.set(key, def);
							tables.set(id, key);
						}
					}
					const def = defs.get(key);
					return [key, def.declaration, def.columns.length, def.parameters, def.directOnly, def.safeIntegers];
				}
				case 1: { // filter (a: key, b: cursor, rest: parameters)
					const def = defs.get(a);
					running.delete(b);
					const gen = def.rows.apply(undefined, rest);
					running.set(b, gen);
					return step(def, gen);
				}
				case 2: { // next
					const gen = running.get(b);
					if (!gen) return null;
					return step(defs.get(a), gen);
				}
				case 3: running.delete(b); return null;
				default: return null;
			}
		} catch (e) {
			if (op === 1 || op === 2) running.delete(b);
			pendingFunctionError = e;
			hasPendingFunctionError = true;
			return undefined;
		}
	};
	call(db, (d) => d.table(name, dispatch, !!fixed));
	return this;
};
// Loads an SQLite extension on every connection of the engine (its
// functions, collations and modules are then usable on the readers and the
// writer alike).
Database.prototype.loadExtension = function loadExtension(filename, entryPoint) {
	if (typeof filename !== 'string') throw new TypeError('Expected first argument to be a string');
	if (entryPoint !== undefined && typeof entryPoint !== 'string') throw new TypeError('Expected second argument to be a string');
	const db = ready(state(this), false);
	call(db, (d) => d.loadExtension(filename, entryPoint));
	return this;
};
// The database's bytes (sqlite3_serialize), a file image that
// `new Database(buffer)` opens: committed data outside a transaction, the
// transaction's own writes too inside one (docs/node.md).
Database.prototype.serialize = function serialize(options) {
	if (options == null) options = {};
	if (typeof options !== 'object') throw new TypeError('Expected first argument to be an options object');
	const attachedName = 'attached' in options ? options.attached : 'main';
	if (typeof attachedName !== 'string') throw new TypeError('Expected the "attached" option to be a string');
	if (!attachedName) throw new TypeError('The "attached" option cannot be an empty string');
	const db = ready(state(this), false);
	return call(db, (d) => d.serialize(attachedName)) || Buffer.alloc(0);
};
// A step-wise online backup (SQLite's backup API) from the engine's writer
// connection, one step per turn of the event loop: `progress` sees
// { totalPages, remainingPages } after each step and returns how many pages
// the next step copies (default 100). Writes of this process during the
// backup reach the copy; an aborted backup leaves an existing destination
// as it was and removes one it created.
Database.prototype.backup = async function backup(filename, options) {
	if (options == null) options = {};
	if (typeof filename !== 'string') throw new TypeError('Expected first argument to be a string');
	if (typeof options !== 'object') throw new TypeError('Expected second argument to be an options object');
	filename = filename.trim();
	const attachedName = 'attached' in options ? options.attached : 'main';
	const handler = 'progress' in options ? options.progress : null;
	if (!filename) throw new TypeError('Backup filename cannot be an empty string');
	if (filename === ':memory:') throw new TypeError('Invalid backup filename ":memory:"');
	if (typeof attachedName !== 'string') throw new TypeError('Expected the "attached" option to be a string');
	if (!attachedName) throw new TypeError('The "attached" option cannot be an empty string');
	if (handler != null && typeof handler !== 'function') throw new TypeError('Expected the "progress" option to be a function');
	if (!fs.existsSync(path.dirname(filename))) throw new TypeError('Cannot save backup because the directory does not exist');
	const st = state(this);
	await new Promise(setImmediate);
	const db = open(st);
	const id = call(db, (d) => d.backupStart(filename, attachedName));
	let pages = 0;
	try {
		for (;;) {
			open(st);
			const [done, totalPages, remainingPages] = call(db, (d) => d.backupStep(id, pages));
			if (done) return { totalPages, remainingPages };
			if (handler) {
				const next = handler({ totalPages, remainingPages });
				if (next === undefined) pages = 100;
				else if (typeof next !== 'number') throw new TypeError('Expected the progress callback to return a number');
				else if (next === Infinity) pages = -1;
				else pages = Number.isFinite(next) ? Math.max(0, Math.min(Math.floor(next), 0x7fffffff)) : 0;
			} else {
				pages = 100;
			}
			await new Promise(setImmediate);
		}
	} catch (err) {
		if (st.isOpen) {
			try { st.db.backupAbort(id); } catch { /* the first error is the one to report */ }
		}
		throw err;
	}
};

// ---- transactions --------------------------------------------------------

const controllers = new WeakMap();

Database.prototype.transaction = function transaction(fn) {
	if (typeof fn !== 'function') throw new TypeError('Expected first argument to be a function');
	open(state(this));
	const self = this;
	let controller = controllers.get(this);
	if (!controller) {
		const shared = {
			commit: new Statement(this, 'COMMIT', false),
			rollback: new Statement(this, 'ROLLBACK', false),
			savepoint: new Statement(this, 'SAVEPOINT `\t_bs3.\t`', false),
			release: new Statement(this, 'RELEASE `\t_bs3.\t`', false),
			rollbackTo: new Statement(this, 'ROLLBACK TO `\t_bs3.\t`', false),
		};
		controller = {
			default: Object.assign({ begin: new Statement(this, 'BEGIN', false) }, shared),
			deferred: Object.assign({ begin: new Statement(this, 'BEGIN DEFERRED', false) }, shared),
			immediate: Object.assign({ begin: new Statement(this, 'BEGIN IMMEDIATE', false) }, shared),
			exclusive: Object.assign({ begin: new Statement(this, 'BEGIN EXCLUSIVE', false) }, shared),
		};
		controllers.set(this, controller);
	}
	const wrap = ({ begin, commit, rollback, savepoint, release, rollbackTo }) => function sqliteTransaction() {
		let before, after, undo;
		if (self.inTransaction) {
			before = savepoint; after = release; undo = rollbackTo;
		} else {
			before = begin; after = commit; undo = rollback;
		}
		before.run();
		try {
			const result = Function.prototype.apply.call(fn, this, arguments);
			if (result && typeof result.then === 'function') {
				throw new TypeError('Transaction function cannot return a promise');
			}
			after.run();
			return result;
		} catch (ex) {
			if (self.inTransaction) {
				undo.run();
				if (undo !== rollback) after.run();
			}
			throw ex;
		}
	};
	const properties = {
		default: { value: wrap(controller.default) },
		deferred: { value: wrap(controller.deferred) },
		immediate: { value: wrap(controller.immediate) },
		exclusive: { value: wrap(controller.exclusive) },
		database: { value: this, enumerable: true },
	};
	Object.defineProperties(properties.default.value, properties);
	Object.defineProperties(properties.deferred.value, properties);
	Object.defineProperties(properties.immediate.value, properties);
	Object.defineProperties(properties.exclusive.value, properties);
	return properties.default.value;
};

// ---- statements ----------------------------------------------------------

function isPlainObject(v) {
	const proto = Object.getPrototypeOf(v);
	return proto === Object.prototype || proto === null;
}

// A function building a row object with the statement's column names as
// fixed keys (one hidden class for every row of the statement); null when a
// name would not be an own data property of an object literal.
function rowMaker(names) {
	if (names.includes('__proto__')) return null;
	const fields = names.map((name, i) => `${JSON.stringify(name)}: v[o + ${i}]`).join(', ');
	return new Function('v', 'o', `return { ${fields} };`);
}

// The same for a row in the scratch memory: column i is a number
// (colNums[i]), null, or the next of the values the native call returned
// (`x`, an array of them when `many`).
function fastRowMaker(names) {
	if (names.includes('__proto__')) return null;
	const fields = names.map((name, i) => `${JSON.stringify(name)}: t[${i}] === ${TAG_NUMBER} ? f[${i}] : t[${i}] === ${TAG_NULL} ? null : many ? x[k++] : x`).join(', ');
	return new Function('t', 'f', 'x', 'many', `let k = 0; return { ${fields} };`);
}

// Column i of the row in the scratch memory (see fastRowMaker).
function fastValues(sc, n, x) {
	const many = Array.isArray(x);
	const values = new Array(n);
	let k = 0;
	for (let i = 0; i < n; i++) {
		const t = sc.colTags[i];
		values[i] = t === TAG_NUMBER ? sc.colNums[i] : t === TAG_NULL ? null : many ? x[k++] : x;
	}
	return values;
}

class Statement {
	constructor(database, sql, pragma) {
		const st = state(database);
		const db = open(st);
		const info = call(db, (d) => d.prepare(sql));
		this._st = st;
		this._sql = sql;
		// Pragmas and statements only the writer's connection can prepare
		// (temporary tables) run on the writer.
		this._onReader = info.reader && !info.writerOnly && !pragma;
		this._returnsData = info.columnCount > 0;
		this._readonly = info.reader;
		this._pragma = pragma;
		this._pluck = false;
		this._expand = false;
		this._raw = false;
		this._safe = st.safeIntegers;
		this._bound = null;
		this._paramNames = info.parameters;
		Object.defineProperty(this, 'database', { value: database, enumerable: true });
		Object.defineProperty(this, 'source', { value: sql, enumerable: true });
		Object.defineProperty(this, 'reader', { value: this._returnsData, enumerable: true });
		Object.defineProperty(this, 'readonly', { value: info.reader, enumerable: true });

		this._iterating = false;
		this._id = undefined;
		this._names = undefined;
		this._make = undefined;
		this._fastMake = undefined;
		for (const k of ['_pragma', '_iterating', '_st', '_sql', '_onReader', '_returnsData', '_readonly', '_pluck', '_expand', '_raw', '_safe', '_bound', '_id', '_names', '_make', '_fastMake', '_columnsCache', '_paramNames']) {
			Object.defineProperty(this, k, { enumerable: false, writable: true });
		}
	}

	_params(args) {
		if (this._bound) {
			if (args.length) throw new TypeError('This statement already has bound parameters');
			return this._bound;
		}
		const anon = [];
		let named = null;
		for (const a of args) {
			if (Array.isArray(a)) {
				for (const x of a) anon.push(x);
				continue;
			}
			if (a !== null && typeof a === 'object' && !Buffer.isBuffer(a) && isPlainObject(a)) {
				if (named) throw new TypeError('You cannot specify named parameters in two different objects');
				// Each named parameter read by its name, as SQLite names it:
				// getters run (and may throw) here; one that is missing is
				// reported when binding.
				named = {};
				for (const name of this._paramNames) {
					if (name && name in a) named[name] = a[name];
				}
				continue;
			}
			anon.push(a);
		}
		return { anon, named };
	}

	_checkWrite() {
		if (this._st.readonly && !this._readonly) {
			throw new SqliteError('attempt to write a readonly database', 'SQLITE_READONLY');
		}
	}

	_trace(p) {
		const verbose = this._st.verbose;
		if (verbose) {
			const db = this._st.db;
			let text = this._sql;
			try { text = db.expandedSql(this._sql, this._onReader && !db.inTransaction, p.anon, p.named); } catch { /* as written */ }
			verbose(text);
		}
	}

	_ready(allowIterating) {
		const db = ready(this._st, allowIterating);
		if (this._iterating) throw new TypeError('This statement is busy executing a query');
		return db;
	}

	_modReady() {
		if (this._st.busy) throw new TypeError(BUSY);
		if (this._iterating) throw new TypeError('This statement is busy executing a query');
	}

	run(...args) {
		const done = this._runFast(args);
		if (done !== NOT_FAST) return done;
		const db = this._ready(false);
		const p = this._params(args);
		this._checkWrite();
		this._trace(p);
		// More or fewer values than the statement has parameters: not through
		// the engine's execute, so that binding reports it as better-sqlite3 does.
		const wrongCount = p.named === null && p.anon.length !== this._paramNames.length;
		const r = busyCall(this._st, (d) => d.run(this._sql, this._onReader && !db.inTransaction, p.anon, p.named, wrongCount));
		const rowid = this._safe ? BigInt(r.lastInsertRowid) : r.lastInsertRowid;
		return { changes: r.changes, lastInsertRowid: rowid };
	}

	// For `_getFast` (`reads`) and `_runFast`: the statement interned and
	// `args` packed into the scratch memory; the parameters left to pass
	// as JavaScript values, or NOT_FAST when the fast path does not apply.
	_packFast(args, reads) {
		const st = this._st;
		if (this._bound !== null || st.verbose !== null || args.length > MAX_FAST_PARAMS) return NOT_FAST;
		const db = this._ready(reads);
		if (this._id === undefined) this._id = call(db, (d) => d.intern(this._sql));
		if (this._id < 0) return NOT_FAST;
		const x = packParams(st.scratch, args);
		if (x === NOT_FAST) return NOT_FAST;
		this._checkWrite();
		return x;
	}

	// `run` through the scratch memory, for the parameters `_getFast`
	// takes; NOT_FAST when it did not run.
	_runFast(args) {
		const x = this._packFast(args, false);
		if (x === NOT_FAST) return NOT_FAST;
		const st = this._st;
		const sc = st.scratch;
		sc.header[0] = this._id;
		sc.header[1] = (this._onReader ? FAST_READER : 0) | (Array.isArray(x) ? FAST_EXTRAS_ARRAY : 0) | (args.length !== this._paramNames.length ? FAST_WRONG_COUNT : 0);
		sc.header[2] = args.length;
		sc.header[4] = FAST_OP_RUN;
		st.busy = true;
		try {
			st.fast(x);
		} catch (err) {
			throw translate(err);
		} finally {
			st.busy = false;
		}
		return { changes: sc.colNums[0], lastInsertRowid: this._safe ? sc.rowid[0] : sc.colNums[1] };
	}

	_rows(args, firstOnly) {
		if (!this._returnsData) {
			// A pragma that sets something: run it, no rows.
			if (this._pragma) { this.run(...args); return []; }
			throw new TypeError('This statement does not return data. Use run() instead');
		}
		const db = this._ready(true);
		const p = this._params(args);
		this._checkWrite();
		this._trace(p);
		if (this._id === undefined) this._id = call(db, (d) => d.intern(this._sql));
		if (this._id < 0) {
			const out = busyCall(this._st, (d) => d.query(this._sql, this._onReader && !db.inTransaction, p.anon, p.named, this._safe, firstOnly));
			const names = out[0];
			const rows = [];
			for (let r = 1; r < out.length; r++) rows.push(this._shape(names, out[r], 0));
			return rows;
		}
		// The native side runs it in this handle's transaction when one is open.
		const flat = busyCall(this._st, (d) => d.rows(this._id, this._onReader, p.anon, p.named, this._safe, firstOnly));
		const n = flat[0];
		if (!this._names || this._names.length !== n) {
			this._names = this.columns().map((c) => c.name);
			this._make = rowMaker(this._names);
			this._fastMake = undefined;
		}
		const rows = [];
		for (let o = 1; o < flat.length; o += n) rows.push(this._shape(this._names, flat, o));
		return rows;
	}

	// The row at `values[o..]` as the statement's mode wants it.
	_shape(names, values, o) {
		const n = names.length;
		if (this._pluck) return values[o];
		if (this._raw) return values.slice(o, o + n);
		if (this._expand) {
			const cols = this._columnsCache || (this._columnsCache = this.columns());
			const out = {};
			for (let i = 0; i < n; i++) {
				const t = cols[i].table || '$';
				(out[t] || (out[t] = {}))[names[i]] = values[o + i];
			}
			return out;
		}
		if (o > 0 && this._make && names === this._names) return this._make(values, o);
		const out = {};
		for (let i = 0; i < n; i++) out[names[i]] = values[o + i];
		return out;
	}

	get(...args) {
		const row = this._getFast(args);
		if (row !== NOT_FAST) return row;
		const rows = this._rows(args, true);
		return rows.length ? rows[0] : undefined;
	}

	// `get` through the scratch memory: for parameters that are all
	// numbers, strings, bigints, buffers, null or undefined (anything else,
	// a bound statement or `verbose` take `_rows`). NOT_FAST when it did not
	// run.
	_getFast(args) {
		if (!this._returnsData) return NOT_FAST;
		const x = this._packFast(args, true);
		if (x === NOT_FAST) return NOT_FAST;
		const st = this._st;
		const sc = st.scratch;
		sc.header[0] = this._id;
		sc.header[1] = (this._onReader ? FAST_READER : 0) | (this._safe ? FAST_SAFE_INTS : 0) | (Array.isArray(x) ? FAST_EXTRAS_ARRAY : 0);
		sc.header[2] = args.length;
		sc.header[4] = FAST_OP_GET;
		let r;
		st.busy = true;
		try {
			r = st.fast(x);
		} catch (err) {
			throw translate(err);
		} finally {
			st.busy = false;
		}
		if (r === undefined) return undefined;
		const cols = sc.header[3];
		if (this._fastMake === undefined || this._names.length !== cols) {
			this._names = this.columns().map((c) => c.name);
			this._make = rowMaker(this._names);
			this._fastMake = fastRowMaker(this._names);
		}
		if (cols > MAX_FAST_COLUMNS) return this._shape(this._names, r, 0);
		if (this._pluck) {
			const t = sc.colTags[0];
			return t === TAG_NUMBER ? sc.colNums[0] : t === TAG_NULL ? null : Array.isArray(r) ? r[0] : r;
		}
		if (this._raw) return fastValues(sc, cols, r);
		if (this._expand) return this._shape(this._names, fastValues(sc, cols, r), 0);
		if (this._fastMake !== null) return this._fastMake(sc.colTags, sc.colNums, r, Array.isArray(r));
		const values = fastValues(sc, cols, r);
		const out = {};
		for (let i = 0; i < cols; i++) out[this._names[i]] = values[i];
		return out;
	}

	all(...args) {
		return this._rows(args, false);
	}

	iterate(...args) {
		// Rows are read in one go (the engine hands a connection back at the
		// end of each call), then handed out one by one.
		const rows = this._rows(args, false);
		const st = this._st;
		const stmt = this;
		let i = 0;
		let live = true;
		const end = () => {
			if (live) { live = false; st.iterating -= 1; stmt._iterating = false; }
		};
		st.iterating += 1;
		this._iterating = true;
		return {
			next() {
				if (st.busy) throw new TypeError(BUSY);
				if (live && i < rows.length) return { value: rows[i++], done: false };
				end();
				return { value: undefined, done: true };
			},
			return() {
				if (st.busy) throw new TypeError(BUSY);
				end();
				return { value: undefined, done: true };
			},
			[Symbol.iterator]() { return this; },
		};
	}

	pluck(toggle) {
		this._modReady();
		if (!this._returnsData && !this._pragma) throw new TypeError('The pluck() method is only for statements that return data');
		const on = toggle === undefined ? true : !!toggle;
		this._pluck = on;
		if (on) { this._expand = false; this._raw = false; }
		return this;
	}

	expand(toggle) {
		this._modReady();
		if (!this._returnsData) throw new TypeError('The expand() method is only for statements that return data');
		const on = toggle === undefined ? true : !!toggle;
		this._expand = on;
		if (on) { this._pluck = false; this._raw = false; }
		return this;
	}

	raw(toggle) {
		this._modReady();
		if (!this._returnsData) throw new TypeError('The raw() method is only for statements that return data');
		const on = toggle === undefined ? true : !!toggle;
		this._raw = on;
		if (on) { this._pluck = false; this._expand = false; }
		return this;
	}

	get busy() {
		return this._iterating;
	}

	safeIntegers(toggle) {
		this._modReady();
		this._safe = toggle === undefined ? true : !!toggle;
		return this;
	}

	columns() {
		open(this._st);
		if (this._st.busy) throw new TypeError(BUSY);
		if (!this._returnsData) throw new TypeError('The columns() method is only for statements that return data');
		const db = open(this._st);
		return call(db, (d) => d.columns(this._sql, this._onReader && !db.inTransaction));
	}

	bind(...args) {
		this._ready(true);
		if (this._bound) throw new TypeError('The bind() method can only be invoked once per statement object');
		const p = this._params(args);
		const copy = (v) => (Buffer.isBuffer(v) ? Buffer.from(v) : v);
		p.anon = p.anon.map(copy);
		if (p.named) {
			const named = {};
			for (const k of Object.keys(p.named)) named[k] = copy(p.named[k]);
			p.named = named;
		}
		// Bound now, as better-sqlite3 does: wrong parameters fail here.
		const db = this._st.db;
		call(db, (d) => d.expandedSql(this._sql, this._onReader && !db.inTransaction, p.anon, p.named));
		this._bound = p;
		return this;
	}
}

module.exports = Database;
module.exports.SqliteError = SqliteError;
module.exports.Database = Database;
module.exports.Statement = Statement;
module.exports.sqliteVersion = () => addon().sqliteVersion();
