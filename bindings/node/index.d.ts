// Types of the `litelane` package: better-sqlite3's API (what litelane
// implements of it) plus litelane's additions. See docs/node.md.
/// <reference types="node" />

declare namespace Database {
	type Profile = 'safe' | 'balanced' | 'fast';
	type CheckpointMode = 'PASSIVE' | 'FULL' | 'RESTART' | 'TRUNCATE';

	/** A virtual table for `Database#table`. */
	interface VirtualTableOptions {
		columns: string[];
		/** A generator function; its arguments are the parameters' values. */
		rows: (...params: any[]) => Generator<unknown[] | Record<string, unknown>, void, undefined>;
		/** Parameter names (default `$1`...`$n`, n being `rows.length`); at most 32. */
		parameters?: string[];
		safeIntegers?: boolean;
		directOnly?: boolean;
	}

	interface Options {
		readonly?: boolean;
		fileMustExist?: boolean;
		/** Busy timeout for locks held by other processes, in ms (default 5000). */
		timeout?: number;
		/** Called with the SQL of every statement run. */
		verbose?: (message?: unknown, ...additional: unknown[]) => void;
		/** litelane: the durability profile (default 'balanced'); docs/durability.md. */
		profile?: Profile;
	}

	interface SerializeOptions {
		/** The schema to serialize: 'main' (default), 'temp' or an attached name. */
		attached?: string;
	}

	interface RunResult {
		changes: number;
		lastInsertRowid: number | bigint;
	}

	interface ColumnDefinition {
		name: string;
		column: string | null;
		table: string | null;
		database: string | null;
		type: string | null;
	}

	interface RegistrationOptions {
		varargs?: boolean;
		deterministic?: boolean;
		safeIntegers?: boolean;
		directOnly?: boolean;
	}

	interface PragmaOptions {
		simple?: boolean;
	}

	type Transaction<F extends (...args: any[]) => any> = {
		(...params: Parameters<F>): ReturnType<F>;
		default(...params: Parameters<F>): ReturnType<F>;
		deferred(...params: Parameters<F>): ReturnType<F>;
		immediate(...params: Parameters<F>): ReturnType<F>;
		exclusive(...params: Parameters<F>): ReturnType<F>;
		readonly database: Database;
	};

	/** litelane: Database#metrics(). */
	interface Metrics {
		queueWaitP50Ms: number;
		queueWaitP95Ms: number;
		queueWaitP99Ms: number;
		queueWaitMaxMs: number;
		queueDepth: number;
		transactions: number;
		rollbacks: number;
		rowsWritten: number;
		commits: number;
		meanGroupSize: number;
		walPages: number;
		/** null while the WAL is within its limit. */
		walOverLimit: null | {
			durationMs: number;
			walPages: number;
			limitPages: number;
			reason: 'pinnedByRead' | 'pinnedElsewhere' | 'catchingUp' | 'checkpointFailed';
			pinnedBy: PinnedRead | null;
			error: string | null;
		};
		walOverLimitCount: number;
		walOverLimitTimeMs: number;
		/** The oldest read of this process that pinned the WAL at the last checkpoint that could not finish. */
		walPinnedBy: PinnedRead | null;
		/** Checkpoints that held the writers, and the longest and total hold. */
		checkpointHolds: number;
		checkpointHoldMaxMs: number;
		checkpointHoldTimeMs: number;
	}

	/** litelane: a read that pins the WAL (Metrics). */
	interface PinnedRead {
		label: string;
		ageMs: number;
		sql: string;
	}

	/** litelane: Database#checkpoint(). */
	interface CheckpointResult {
		walFrames: number;
		checkpointedFrames: number;
		busy: boolean;
	}

	/**
	 * litelane: one statement of Database#writeAsync(): its SQL alone, or
	 * `[sql, params]` where `params` is an array of what Statement#run takes
	 * (values bind by position, a plain object by name) or a plain object of
	 * named values.
	 */
	type WriteStatement = string | [sql: string, params?: unknown[] | Record<string, unknown>];

	/** litelane: Database#importFile()'s options (those of `litelane import`, docs/import.md). */
	interface ImportOptions {
		/** The table (default: the file name without its extensions). */
		table?: string;
		/** More files or glob patterns, imported into the same table after the first. */
		more?: string[];
		/** Default: from the extension (CSV when unknown). */
		format?: 'csv' | 'tsv' | 'ndjson';
		/** What to do with the table (default 'create': fail if it exists). */
		mode?: 'create' | 'append' | 'replace';
		/** true: the first CSV/TSV record is a header; false: it is data; unset: sniffed. */
		header?: boolean;
		/** One character (default: sniffed among , ; | and tab). */
		delimiter?: string;
		/** Column types of a created table, e.g. `{ age: 'INTEGER' }` (TEXT, INTEGER, REAL, BOOLEAN, DATE, TIMESTAMP, NUMERIC). */
		columnTypes?: Record<string, string>;
		/** 'infer' (default) or 'text' (every column TEXT). */
		types?: 'infer' | 'text';
		/** A STRICT table: values that do not fit their column are rejected. */
		strict?: boolean;
		/** The key: a created table's primary key, and what onConflict matches rows by. */
		pk?: string | string[];
		/** What a row whose key is already there does (default 'fail': rejected). */
		onConflict?: 'fail' | 'upsert' | 'ignore' | 'replace';
		/** Add input columns the existing table lacks instead of failing. */
		alter?: boolean;
		/** Fields equal to one of these are NULL (besides the empty field, unless noDefaultNulls). */
		nulls?: string[];
		noDefaultNulls?: boolean;
		/** Store each row's source file in this column. */
		sourceColumn?: string;
		/** A plan written by `litelane sniff --json`, used instead of sniffing. */
		plan?: string;
		/** Commit every this many rows (so that `resume` can continue). */
		commitEvery?: number;
		/** Continue an interrupted commitEvery import of the same file. */
		resume?: boolean;
		/** Write rejected records to this file (JSON lines). */
		rejects?: string;
		/** Also insert rejected records into this table. */
		rejectsTable?: string;
		/** Stop (keeping nothing past the last commit) after more than this many rejects. */
		maxRejects?: number;
		/** Called on the JavaScript thread at most every 100 ms and when a file ends. */
		progress?: (progress: ImportProgress) => void;
		/** Stops the import: the transaction under way rolls back, the promise rejects with an AbortError. */
		signal?: AbortSignal;
	}

	interface ImportProgress {
		/** Rows of this file handed to SQLite so far. */
		rows: number;
		/** Bytes of the input read so far (as stored: compressed for .gz/.zst). */
		bytes: number;
		/** The input's size, or null when unknown. */
		totalBytes: number | null;
	}

	/** litelane: what Database#importFile() did (`litelane import --json`'s object, keys in camelCase). */
	interface ImportSummary {
		table: string;
		rowsInserted: number;
		rowsRejected: number;
		/** The first 100 rejected records (all are counted in rowsRejected). */
		rejectedRecords: { source: string; line: number; record: number; reason: string; raw: string }[];
		[key: string]: unknown;
	}

	class Statement<BindParameters extends unknown[] = unknown[], Result = unknown> {
		readonly database: Database;
		readonly source: string;
		readonly reader: boolean;
		readonly readonly: boolean;
		readonly busy: boolean;
		run(...params: BindParameters): RunResult;
		get(...params: BindParameters): Result | undefined;
		all(...params: BindParameters): Result[];
		iterate(...params: BindParameters): IterableIterator<Result>;
		pluck(toggleState?: boolean): this;
		expand(toggleState?: boolean): this;
		raw(toggleState?: boolean): this;
		bind(...params: BindParameters): this;
		columns(): ColumnDefinition[];
		safeIntegers(toggleState?: boolean): this;
	}

	class SqliteError extends Error {
		name: string;
		message: string;
		code: string;
		constructor(message: string, code: string);
	}
}

declare class Database {
	/**
	 * A file name, `':memory:'`/`''` for a private in-memory database, or a
	 * Buffer from `serialize()`: an in-memory database with its content
	 * (`readonly` allowed).
	 */
	constructor(filename?: string | Buffer, options?: Database.Options);
	readonly name: string;
	readonly open: boolean;
	readonly inTransaction: boolean;
	readonly readonly: boolean;
	readonly memory: boolean;

	prepare<BindParameters extends unknown[] = unknown[], Result = unknown>(
		source: string,
	): Database.Statement<BindParameters, Result>;
	transaction<F extends (...args: any[]) => any>(fn: F): Database.Transaction<F>;
	exec(source: string): this;
	pragma(source: string, options?: Database.PragmaOptions): unknown;
	function(name: string, cb: (...params: any[]) => unknown): this;
	function(name: string, options: Database.RegistrationOptions, cb: (...params: any[]) => unknown): this;
	defaultSafeIntegers(toggleState?: boolean): this;
	unsafeMode(unsafe?: boolean): this;
	close(): this;

	/**
	 * litelane: bulk insert through the engine's inserter, in one transaction
	 * of its own (all or nothing); rows are packed by column, and more than
	 * 32,768 rows are inserted on a thread of the engine while the next
	 * chunk is packed.
	 */
	insertMany(table: string, columns: string[], rows: unknown[][]): { inserted: number };
	/** litelane: the engine's metrics (write queue, commits, group sizes). */
	metrics(): Database.Metrics;
	/** litelane: one checkpoint on the writer (default 'PASSIVE'). */
	checkpoint(mode?: Database.CheckpointMode): Database.CheckpointResult;
	/**
	 * litelane: one write transaction given in advance, run off the
	 * JavaScript thread in a turn of the engine's write queue (maybe
	 * group-committed with other writers). Resolves once committed, as
	 * durable as the profile promises, with each statement's result; all
	 * statements or none. Rejects with a SqliteError when it rolled back,
	 * and with one whose code is 'LITELANE_OUTCOME_UNKNOWN' when the commit
	 * may or may not have happened (docs/durability.md).
	 */
	writeAsync(statements: Database.WriteStatement[]): Promise<Database.RunResult[]>;
	/**
	 * litelane: imports a CSV, TSV or NDJSON file (maybe .gz/.zst) into a
	 * table with litelane-import, off the JavaScript thread. A database file
	 * only (not ':memory:').
	 */
	importFile(file: string, options?: Database.ImportOptions): Promise<Database.ImportSummary>;

	/**
	 * SQLite's backup API from the engine's writer, one step per turn of the
	 * event loop; `progress` returns the next step's page count (default 100).
	 */
	backup(destination: string, options?: { attached?: string; progress?: (info: { totalPages: number; remainingPages: number }) => number | void }): Promise<{ totalPages: number; remainingPages: number }>;
	aggregate(name: string, options: {
		start?: unknown; step: (total: any, ...args: any[]) => unknown; inverse?: (total: any, ...args: any[]) => unknown;
		result?: (total: any) => unknown; varargs?: boolean; deterministic?: boolean; safeIntegers?: boolean; directOnly?: boolean;
	}): this;

	/**
	 * A virtual table whose rows a generator yields (arrays or objects, one
	 * value per column); its parameters are hidden columns constrained with
	 * `=` or passed as `name(?, ?)`. With a factory, a module for
	 * `CREATE VIRTUAL TABLE t USING name(args)`.
	 */
	table(name: string, definition: Database.VirtualTableOptions): this;
	table(name: string, factory: (this: { module: string; database: string; table: string }, ...args: string[]) => Database.VirtualTableOptions): this;

	/** Loads an SQLite extension on every connection of the engine (C API only). */
	loadExtension(path: string, entryPoint?: string): this;

	/**
	 * The bytes of the database (or of the attached database `attached`),
	 * a database file image that `new Database(buffer)` opens. Outside a
	 * transaction: committed data; inside this handle's transaction: with
	 * its own uncommitted writes (docs/node.md).
	 */
	serialize(options?: Database.SerializeOptions): Buffer;
}

export = Database;
