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
