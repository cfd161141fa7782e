//! # litelane: the fast lane for SQLite
//!
//! One writer connection behind a fair FIFO queue with group commit, a pool of
//! reader connections, durability profiles, bulk insert, background
//! checkpoints and metrics — the lessons of the field reports in the
//! repository's `shared/seeds`, as defaults.
//!
//! ```
//! use litelane::{Database, Options};
//!
//! let db = Database::open_in_memory(Options::default())?;
//! db.write(|tx| {
//!     tx.execute("CREATE TABLE kv(k TEXT PRIMARY KEY, v INTEGER)", [])?;
//!     tx.execute("INSERT INTO kv VALUES ('a', 1)", [])?;
//!     Ok(())
//! })?;
//! let v: i64 = db.read(|conn| Ok(conn.query_row("SELECT v FROM kv WHERE k = 'a'", [], |r| r.get(0))?))?;
//! assert_eq!(v, 1);
//! # Ok::<(), litelane::Error>(())
//! ```
//!
//! * Writes ([`Database::write`]) from any thread queue first come, first
//!   served, and never see `SQLITE_BUSY` from another writer of the process.
//! * Reads ([`Database::read`]) run on a pool of `query_only` connections,
//!   each call on one snapshot; in WAL mode they never wait for the writer.
//! * [`Database::inserter`] loads many rows through one cached multi-row
//!   `INSERT`.
//! * [`Database::metrics`] shows queue waits, group sizes, checkpoints and
//!   who held the writer during a long wait.
//! * [`xproc`] is the fair, crash-safe queue of write turns shared by every
//!   process on one database file (Linux; see `docs/concurrency.md`).

#![warn(missing_docs)]
#![deny(unsafe_code)]

mod asyncio;
mod backup;
mod bulk;
mod carry;
mod checkpoint;
mod codes;
mod combine;
mod configure;
mod connection;
mod durability_plan;
mod error;
#[allow(unsafe_code)]
mod ffi;
mod metrics;
mod multirow;
mod options;
mod pinned_read;
mod pool;
mod queue;
mod schema_epoch;
mod shared_memory;
mod tx;
mod unpoisoned;
mod wal_space;
mod writer;
pub mod xproc;

use std::path::Path;
use std::sync::Arc;

pub use asyncio::Pending;
pub use backup::{
    backup_connection, same_file, BackupOptions, BackupProgress, BackupReport, BackupSource,
};
pub use bulk::{
    insert_sql, quote_ident, AsValueRef, BulkRow, InsertReport, Inserter, OnConflict, RowSource,
    TARGET_PARAMS_PER_STATEMENT,
};
pub use checkpoint::{CheckpointMode, CheckpointReport};
pub use codes::SqliteCode;
pub use configure::Setup;
pub use durability_plan::restore_journal_mode;
pub use error::{Error, OsError, Result, SQLITE_BUSY};
pub use metrics::{LongWait, Metrics, OverLimitReason, SlowStatement, WalOverLimit, GROUP_BUCKETS};
pub use multirow::MultiRowInsert;
pub use options::{Checkpoints, GroupCommit, Options, OverLimit, Profile, OVER_LIMIT_RETRY};
pub use pinned_read::PinnedRead;
pub use rusqlite;
pub use rusqlite::types::{Value, ValueRef};
pub use tx::{Executed, Tx};
pub use writer::HeldWrite;
pub use writer::{with_process_wait, KeepWaiting};

/// The suffixes of a database's files, for a program that moves or removes
/// one whole: the database itself (`""`), and the files SQLite and
/// litelane keep beside it (`-wal`, `-shm`, `-journal`, and the
/// cross-process queue's lock file, [`xproc::LOCK_FILE_SUFFIX`]).
pub const DATABASE_FILE_SUFFIXES: [&str; 5] =
    ["", "-wal", "-shm", "-journal", xproc::LOCK_FILE_SUFFIX];

use configure::Registry;
use connection::{Role, Target, Tracer};
use durability_plan::DurabilityPlan;
use metrics::Recorder;
use pool::Pool;
use schema_epoch::SchemaEpoch;
use writer::Writer;

/// Removes the files that hold this process's shared in-memory databases
/// (`file:name?mode=memory&cache=shared`, kept in `/dev/shm`) that are still
/// open, for a program's exit: such a database ends with its process, as in
/// SQLite, and an engine never dropped (a Python object not collected at
/// exit) would otherwise leave its files behind. Connections still open on
/// them fail afterwards; call it last. (The Python package calls it from
/// `atexit`.)
pub fn remove_shared_memory_files() {
    shared_memory::remove_open_files();
}

/// The version of the SQLite library litelane runs on, e.g. `"3.50.2"`.
pub fn sqlite_version() -> &'static str {
    rusqlite::version()
}

/// SQLite's `sqlite3_complete`: true when `sql` ends with a complete
/// statement (a semicolon outside quotes, comments and trigger bodies).
///
/// ```
/// assert!(litelane::complete_statement("SELECT 'a;b';"));
/// assert!(!litelane::complete_statement("CREATE TRIGGER t AFTER INSERT ON x BEGIN SELECT 1;"));
/// ```
pub fn complete_statement(sql: &str) -> bool {
    ffi::is_complete(sql)
}

/// Splits a script into its statements, each with its closing semicolon,
/// where SQLite's `sqlite3_complete` says a statement ends (so semicolons in
/// strings, comments and `CREATE TRIGGER` bodies stay inside). Text after the
/// last semicolon that is not only blanks and comments is the last item.
///
/// ```
/// let parts = litelane::split_statements(
///     "CREATE TABLE t(a); INSERT INTO t VALUES ('x;y'); -- done",
/// );
/// assert_eq!(parts, ["CREATE TABLE t(a);", " INSERT INTO t VALUES ('x;y');"]);
/// ```
pub fn split_statements(script: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    for (i, _) in script.match_indices(';') {
        let candidate = &script[start..=i];
        if ffi::is_complete(candidate) {
            out.push(candidate);
            start = i + 1;
        }
    }
    let tail = &script[start..];
    if !is_blank_sql(tail) {
        out.push(tail);
    }
    out
}

/// True when `sql` holds only whitespace and comments.
fn is_blank_sql(sql: &str) -> bool {
    let mut rest = sql.trim_start();
    loop {
        if let Some(r) = rest.strip_prefix("--") {
            rest = r
                .split_once('\n')
                .map_or("", |(_, after)| after)
                .trim_start();
        } else if let Some(r) = rest.strip_prefix("/*") {
            rest = r
                .split_once("*/")
                .map_or("", |(_, after)| after)
                .trim_start();
        } else {
            return rest.is_empty();
        }
    }
}

/// An open database: one writer, a pool of readers, and the threads that
/// serve them. Cheap to clone (all clones share the same connections); the
/// connections close when the last clone is dropped.
#[derive(Clone)]
pub struct Database {
    inner: Arc<Inner>,
}

struct Inner {
    target: Target,
    opts: Options,
    /// What the profile decided for this open (`durability_plan.rs`).
    plan: DurabilityPlan,
    /// The journal mode the file had before this open's plan replaced it
    /// (see [`Database::journal_mode_to_restore`]).
    journal_mode_to_restore: Option<String>,
    max_parameters: usize,
    recorder: Arc<Recorder>,
    // Field order is drop order: stop the checkpointer and async threads
    // before the connections they use close.
    asyncs: asyncio::Executor,
    _checkpointer: Option<checkpoint::Checkpointer>,
    writer: Arc<Writer>,
    pool: Arc<Pool>,
    /// In WAL mode: where `Database::checkpoint(Passive)` runs, beside the
    /// writers (`None` without WAL).
    side_checkpoints: Option<SideCheckpoints>,
    config: Arc<Registry>,
    /// A shared in-memory database's file: removed with the last engine on
    /// it, after the connections above closed.
    _shared_memory: Option<shared_memory::SharedMemoryFile>,
}

/// A connection of its own for explicit PASSIVE checkpoints: a PASSIVE
/// checkpoint needs no turn of the writer, so writers do not wait for it.
/// Opened with the database, its WAL with it (a read opens it), so that it
/// checkpoints the file the database opened even after that file was
/// renamed or replaced at its path (a connection opened later would reach
/// the new file and could copy the old file's WAL into it). `None` when it
/// could not be opened: checkpoints then take a turn of the writer.
struct SideCheckpoints {
    conn: std::sync::Mutex<Option<rusqlite::Connection>>,
}

/// The connection of [`SideCheckpoints`], with its WAL open.
fn open_side_checkpoints(
    target: &Target,
    opts: &Options,
    plan: &DurabilityPlan,
    tracer: &Arc<Tracer>,
) -> Option<rusqlite::Connection> {
    let conn = connection::open(target, Role::Checkpointer, opts, plan, tracer, None, None).ok()?;
    conn.query_row("PRAGMA schema_version", [], |_| Ok(()))
        .ok()?;
    Some(conn)
}

/// The cross-process queue of the file, when `opts` asks for it and the
/// database is a file opened to be written (by path or by URI); otherwise, or when the queue cannot be
/// used, `None`, and the metrics say why.
fn open_process_queue(
    target: &Target,
    opts: &Options,
    recorder: &Recorder,
) -> Option<xproc::ProcessQueue> {
    match (&target.path, opts.process_queue) {
        (Some(_), true) if target.read_only => {
            // No `-lane` file beside a file opened to be only read (an
            // `immutable=1` file may be on a read-only medium).
            recorder.note_process_queue_off(
                "the database was opened read-only (a URI with mode=ro or immutable=1): it has \
                 no writes to queue"
                    .into(),
            );
            None
        }
        (Some(path), true) => match xproc::ProcessQueue::open_waiting(path, opts.busy_timeout) {
            Ok(q) => {
                q.set_stock_settings(opts.stock_settings);
                if let Some(why) = q.combining_off() {
                    recorder.note_combined_commits_off(why);
                }
                Some(q)
            }
            Err(degraded) => {
                recorder.note_process_queue_off(degraded.to_string());
                None
            }
        },
        _ => None,
    }
}

/// The pool's reader connections (`opts.readers`, at least one), each
/// with the database's recorded setups applied.
fn open_readers(
    target: &Target,
    opts: &Options,
    plan: &DurabilityPlan,
    tracer: &Arc<Tracer>,
    config: &Registry,
) -> Result<Vec<pool::Reader>> {
    (0..opts.readers.max(1))
        .map(|i| {
            let trace = Arc::default();
            let mut seen = 0;
            let conn = connection::open(
                target,
                Role::Reader,
                opts,
                plan,
                tracer,
                Some(&trace),
                Some((config, &mut seen)),
            )?;
            Ok(pool::Reader::new(conn, i, trace, seen))
        })
        .collect()
}

impl Database {
    /// Opens (creating if needed) the database file at `path`, or an
    /// in-memory database shared by the writer and readers when `path` is
    /// `":memory:"`.
    ///
    /// Every connection is configured the same way: the profile's
    /// `journal_mode` and `synchronous` (one plan per open,
    /// `durability_plan.rs`), `foreign_keys=ON`, defensive mode,
    /// `trusted_schema=OFF`, double-quoted string literals off, the cache,
    /// mmap (readers only) and busy-timeout of `opts`. Readers are
    /// `query_only`.
    ///
    /// Fails with a clear [`Error`] (never a panic) when the file is not a
    /// database (`SQLITE_NOTADB`), is read-only ([`Error::ReadOnly`]), or
    /// cannot be opened.
    pub fn open(path: impl AsRef<Path>, opts: Options) -> Result<Database> {
        let mut target = Target::new(path.as_ref());
        let shared_memory = match &target.shared_memory {
            Some((name, _)) => Some(shared_memory::SharedMemoryFile::acquire(name)?),
            None => None,
        };
        if let Some(file) = &shared_memory {
            target = target.in_file(file.path());
        }
        let mut plan = DurabilityPlan::new(opts.profile, target.kind(), opts.process_queue);
        let recorder = Arc::new(Recorder::default());
        let tracer = Arc::new(Tracer {
            recorder: Arc::clone(&recorder),
            slow_nanos: opts.slow_statement.as_nanos().min(u64::MAX as u128) as u64,
            writer_last_sql: Default::default(),
            writer_capture: Default::default(),
            writer_nanos_since_capture: Default::default(),
        });
        let config = Arc::new(Registry::default());
        let schema = Arc::new(SchemaEpoch::default());
        let mut writer_seen = 0;
        let (mut writer_conn, journal_mode_to_restore) = connection::open_writer(
            &target,
            &opts,
            &plan,
            &tracer,
            Some((&config, &mut writer_seen)),
        )?;
        let max_parameters = writer_conn
            .limit(rusqlite::limits::Limit::SQLITE_LIMIT_VARIABLE_NUMBER)
            .map_err(|e| Error::from_sqlite(e, "reading SQLITE_LIMIT_VARIABLE_NUMBER"))?
            as usize;
        let queue = Arc::default();
        let signal = checkpoint::install_wal_hook(
            &mut writer_conn,
            plan.checkpoints,
            &queue,
            &recorder,
            &opts.checkpoints,
        )?;
        let process_queue = open_process_queue(&target, &opts, &recorder);
        if process_queue.is_none() {
            plan = plan.without_process_queue();
        }
        // The writer's syncer (under shared sync) and the background
        // checkpointer each have a connection of this role.
        let open_checkpointer = || {
            connection::open(
                &target,
                Role::Checkpointer,
                &opts,
                &plan,
                &tracer,
                None,
                None,
            )
        };
        let writer = Arc::new(Writer::new(
            writer_conn,
            queue,
            opts.group_commit.clone(),
            opts.long_wait,
            opts.busy_timeout,
            process_queue,
            opts.process_turn_linger,
            Arc::clone(&recorder),
            Arc::clone(&tracer),
            Arc::clone(&config),
            writer_seen,
            Arc::clone(&schema),
            plan.shared_sync,
            open_checkpointer,
        )?);
        let readers = open_readers(&target, &opts, &plan, &tracer, &config)?;
        let pool = Arc::new(Pool::new(
            readers,
            Arc::clone(&recorder),
            Arc::clone(&config),
            schema,
        ));
        let checkpointer =
            if plan.checkpoints && opts.checkpoints.background && !opts.checkpoints.external {
                let conn = open_checkpointer()?;
                Some(checkpoint::Checkpointer::start(
                    conn,
                    Arc::clone(&writer),
                    Arc::clone(&pool),
                    signal,
                    Arc::clone(&recorder),
                    opts.checkpoints.clone(),
                )?)
            } else {
                None
            };
        let side_checkpoints = plan.checkpoints.then(|| SideCheckpoints {
            conn: std::sync::Mutex::new(open_side_checkpoints(&target, &opts, &plan, &tracer)),
        });
        Ok(Database {
            inner: Arc::new(Inner {
                asyncs: asyncio::Executor::new(opts.async_threads),
                pool,
                target,
                max_parameters,
                recorder,
                _checkpointer: checkpointer,
                writer,
                side_checkpoints,
                config,
                opts,
                plan,
                journal_mode_to_restore,
                _shared_memory: shared_memory,
            }),
        })
    }

    /// The journal mode the database file had when this open replaced it,
    /// for the one who closes the database to put back afterwards with
    /// [`restore_journal_mode`] (litelane itself restores nothing on
    /// close). `Some` only under [`Profile::Fast`] on a file opened to be
    /// written: its rollback journal in memory takes a file in WAL mode out
    /// of it, and the file stays out of WAL mode after close (`Some("wal")`;
    /// a file in a rollback journal mode gives `Some("delete")`, which
    /// restoring leaves as it is). `None` for the other profiles (WAL is
    /// the file's own mode), in memory, and read-only.
    ///
    /// ```
    /// use litelane::{Database, Options, Profile};
    /// let dir = tempfile::tempdir()?;
    /// let path = dir.path().join("app.db");
    /// let plain = litelane::rusqlite::Connection::open(&path)?;
    /// plain.query_row("PRAGMA journal_mode = WAL", [], |_| Ok(()))?;
    /// drop(plain);
    /// let db = Database::open(&path, Options::with_profile(Profile::Fast))?;
    /// let mode = db.journal_mode_to_restore().map(str::to_string);
    /// assert_eq!(mode.as_deref(), Some("wal"));
    /// drop(db);
    /// assert_eq!(litelane::restore_journal_mode(&path, "wal")?, "wal");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn journal_mode_to_restore(&self) -> Option<&str> {
        self.inner.journal_mode_to_restore.as_deref()
    }

    /// Opens a private in-memory database (see [`Database::open`]). Readers
    /// see what the writer committed. In-memory databases use a rollback
    /// journal kept in memory (there is no WAL without a file), so a reader
    /// and the writer's commit can briefly wait for each other.
    pub fn open_in_memory(opts: Options) -> Result<Database> {
        Database::open(":memory:", opts)
    }

    /// Runs `f` as one write transaction and returns its value.
    ///
    /// Writers are served first come, first served. `Ok` commits (the call
    /// returns after the commit, and under [`Profile::Safe`] after the
    /// fsync); `Err` or a panic rolls back `f`'s changes alone, and the
    /// writer stays usable.
    ///
    /// **Group commit.** When writers queue up, the thread holding the
    /// writer runs the queued closures itself, back to back, each in its own
    /// savepoint of one transaction, and commits them together (one fsync
    /// for the group). That is why `f` and `T` must be `Send`: `f` may run on
    /// another thread while this one sleeps (it may still borrow from this
    /// thread's stack: the call does not return before `f` has run and the
    /// outcome is known). Use [`write_local`](Database::write_local) for a
    /// closure that is not `Send`.
    ///
    /// **Outcomes.** This returns `Ok` exactly when `f`'s work is committed.
    /// If another write of the same group ends the shared transaction (e.g.
    /// `INSERT OR ROLLBACK`), or SQLite rolls it back after an I/O error,
    /// this returns [`Error::RolledBack`] (retryable): nothing of `f` was
    /// committed. Do not run `BEGIN`, `COMMIT` or `ROLLBACK` in `f`: a
    /// `COMMIT` is refused (it fails, and the transaction rolls back).
    ///
    /// Calling `write` again from inside `f` is an error; use [`Tx::write`]
    /// for a nested transaction.
    pub fn write<T, F>(&self, f: F) -> Result<T>
    where
        F: FnOnce(&Tx<'_>) -> Result<T> + Send,
        T: Send,
    {
        self.inner.writer.write("", f)
    }

    /// [`write`](Database::write) with a label, shown in
    /// [`Metrics::long_waits`] when this transaction holds up other writers
    /// and in [`Error::RolledBack`] when it ends a shared transaction.
    pub fn write_labeled<T, F>(&self, label: &str, f: F) -> Result<T>
    where
        F: FnOnce(&Tx<'_>) -> Result<T> + Send,
        T: Send,
    {
        self.inner.writer.write(label, f)
    }

    /// Runs one statement that writes and returns no rows (`INSERT`,
    /// `UPDATE`, `DELETE`, ...), with `params` bound by position, as a
    /// transaction of its own: `Ok` exactly when it is committed (and
    /// durable as the profile promises). Same outcome rules as
    /// [`write`](Database::write).
    ///
    /// Because the whole write is known in advance, it can be committed by
    /// another process: when it has to wait for another process's write
    /// turn, it is posted beside the lock file and the process holding the
    /// turn runs it in its own transaction and commit (one fsync for the
    /// writes of many processes; docs/concurrency.md, "Combined commits").
    /// It then runs on that process's connection, which litelane allows only
    /// when neither connection has anything of its own that could change
    /// the statement's meaning (setups from [`configure`](Database::configure),
    /// temporary tables, attached databases).
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = litelane::Database::open(dir.path().join("app.db"), Default::default())?;
    /// db.write(|tx| Ok(tx.execute_batch("CREATE TABLE t(x)")?))?;
    /// let done = db.execute("INSERT INTO t VALUES (?1)", &[litelane::Value::Integer(7)])?;
    /// assert_eq!((done.changes, done.last_insert_rowid), (1, 1));
    /// # Ok::<(), litelane::Error>(())
    /// ```
    pub fn execute(&self, sql: &str, params: &[Value]) -> Result<Executed> {
        self.inner.writer.execute(sql, params)
    }

    /// [`write_labeled`](Database::write_labeled) for a closure that is not
    /// `Send`: `f` always runs on the calling thread, in a turn of its own
    /// (it never joins another writer's group; writers queued behind it may
    /// join its transaction). Same outcome rules as `write`.
    pub fn write_local<T>(&self, label: &str, f: impl FnOnce(&Tx<'_>) -> Result<T>) -> Result<T> {
        self.inner.writer.write_local(label, f)
    }

    /// Runs `f` on a reader connection inside one read transaction: all its
    /// statements see one consistent snapshot of committed data. In WAL mode
    /// readers never wait for the writer. Statements prepared with
    /// `prepare_cached` stay cached on that connection.
    pub fn read<T>(&self, f: impl FnOnce(&rusqlite::Connection) -> Result<T>) -> Result<T> {
        self.inner.pool.read("", f)
    }

    /// [`read`](Database::read) for a closure that runs exactly one
    /// statement: it is then its own read transaction (one snapshot), and
    /// the read skips the `BEGIN`/`COMMIT` that `read` wraps around `f` —
    /// what makes a point query cheaper through bindings that run one
    /// statement per call (the Node package's `get`). With more than one
    /// statement in `f`, each sees its own snapshot.
    pub fn read_single<T>(&self, f: impl FnOnce(&rusqlite::Connection) -> Result<T>) -> Result<T> {
        self.inner.pool.read_single("", f)
    }

    /// [`read`](Database::read) with a label, shown in
    /// [`Metrics::wal_pinned_by`] when this read's snapshot holds back a
    /// checkpoint.
    pub fn read_labeled<T>(
        &self,
        label: &str,
        f: impl FnOnce(&rusqlite::Connection) -> Result<T>,
    ) -> Result<T> {
        self.inner.pool.read(label, f)
    }

    /// Keeps `setup` in force on every SQLite connection of this database
    /// that runs statements — the writer, every reader of the pool, and any
    /// connection opened later — under `key`: a function, a collation, a
    /// hook, anything set per connection rather than in the file.
    ///
    /// `setup` is first run on a private in-memory connection; if it fails
    /// there, this returns the error and nothing is recorded. Otherwise it is
    /// recorded and runs on each connection when that connection is next
    /// free: on the writer before the next write it runs, on a reader when it
    /// is next taken from the pool, on a connection opened later before its
    /// first statement. This call never waits for a connection, so it may be
    /// called from anywhere, even inside a write closure (the writer then
    /// gets it from the next write on). It must be idempotent: it runs once
    /// per connection, in the order setups were set.
    ///
    /// Setting a key again replaces its setup (it then runs after the
    /// others). To remove what a setup installed, set the key to a setup
    /// that undoes it, e.g. `conn.remove_function(name, n_arg)`: it runs on
    /// the connections that had the old one, and harmlessly on later ones.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use litelane::{rusqlite::functions::FunctionFlags, Database, Options};
    ///
    /// let db = Database::open_in_memory(Options::default())?;
    /// db.configure(
    ///     "function twice/1",
    ///     Arc::new(|conn: &mut litelane::rusqlite::Connection| {
    ///         conn.create_scalar_function(
    ///             "twice",
    ///             1,
    ///             FunctionFlags::SQLITE_UTF8 | FunctionFlags::SQLITE_DETERMINISTIC,
    ///             |ctx| Ok(2 * ctx.get::<i64>(0)?),
    ///         )
    ///     }),
    /// )?;
    /// let v: i64 = db.read(|c| Ok(c.query_row("SELECT twice(21)", [], |r| r.get(0))?))?;
    /// assert_eq!(v, 42);
    /// # Ok::<(), litelane::Error>(())
    /// ```
    pub fn configure(&self, key: &str, setup: Setup) -> Result<()> {
        self.inner.config.set(key, setup)
    }

    /// The keys of the setups [`configure`](Database::configure) recorded,
    /// in the order they run on a new connection.
    pub fn configured(&self) -> Vec<String> {
        self.inner.config.keys()
    }

    /// A bulk inserter for `table(columns...)`; see [`Inserter`].
    pub fn inserter<'a>(&'a self, table: &str, columns: &[&str]) -> Result<Inserter<'a>> {
        Inserter::new(self, table, columns)
    }

    /// A snapshot of the metrics.
    pub fn metrics(&self) -> Metrics {
        let mut m = self
            .inner
            .recorder
            .snapshot(self.inner.writer.queue_depth());
        m.wal_file_bytes = self
            .inner
            .target
            .wal_path()
            .and_then(|p| std::fs::metadata(p).ok())
            .map_or(0, |md| md.len());
        let recorder = &self.inner.recorder;
        let incomplete = recorder.last_incomplete_checkpoint();
        m.wal_pinned_by = incomplete.and_then(|at| self.inner.pool.oldest_read(at));
        let over = recorder.over_limit();
        m.wal_over_limit_count = over.count;
        m.wal_over_limit_time = over.total;
        m.wal_over_limit = over.current.map(|(since, limit)| WalOverLimit {
            duration: since.elapsed(),
            wal_pages: m.wal_pages,
            limit_pages: limit,
            reason: match (recorder.checkpoint_error(), &m.wal_pinned_by) {
                (Some(e), _) => OverLimitReason::CheckpointFailed(e),
                (None, Some(read)) => OverLimitReason::PinnedByRead(read.clone()),
                (None, None) if incomplete.is_some() => OverLimitReason::PinnedElsewhere,
                (None, None) => OverLimitReason::CatchingUp,
            },
        });
        m
    }

    /// The options the database was opened with.
    pub fn options(&self) -> &Options {
        &self.inner.opts
    }

    /// The database file, or `None` for an in-memory database.
    pub fn path(&self) -> Option<&Path> {
        self.inner.target.path.as_deref()
    }

    /// SQLite's limit on bound parameters per statement for this database.
    pub fn max_parameters(&self) -> Result<usize> {
        Ok(self.inner.max_parameters)
    }

    /// Runs one checkpoint now. In WAL mode a `Passive` one runs on a
    /// connection of its own (opened by the first), beside the writers,
    /// which never wait for it; it reports `busy` when it could not copy
    /// everything (a read on an old snapshot, or the background
    /// checkpointer running at that moment). `Full`, `Restart` and
    /// `Truncate` (and every mode without WAL) run in a turn of their own on
    /// the writer (so they never race a commit of this process): writers of
    /// this process wait for them (counted in
    /// [`Metrics::checkpoint_hold_max`]), and they wait up to
    /// `busy_timeout` for other processes and old readers.
    pub fn checkpoint(&self, mode: CheckpointMode) -> Result<CheckpointReport> {
        if let (CheckpointMode::Passive, Some(side)) = (mode, &self.inner.side_checkpoints) {
            if let Some(conn) = unpoisoned::lock(&side.conn).as_ref() {
                return checkpoint::run(conn, mode);
            }
        }
        let recorder = &self.inner.recorder;
        self.inner
            .writer
            .with_turn(&format!("checkpoint ({mode})"), false, |conn| {
                let held = std::time::Instant::now();
                let r = checkpoint::run(conn, mode);
                recorder.record_checkpoint_hold(held.elapsed());
                r
            })?
    }

    /// Copies the database, consistent as of one moment, to a new file at
    /// `dest` while it stays in use; see [`backup_with`](Database::backup_with)
    /// (this is it with [`BackupOptions::default`]). `progress` is called
    /// after each step with the pages copied so far.
    pub fn backup(
        &self,
        dest: impl AsRef<Path>,
        mut progress: impl FnMut(BackupProgress),
    ) -> Result<BackupReport> {
        self.backup_with(dest, &BackupOptions::default(), &mut progress)
    }

    /// Online backup with SQLite's backup API, `opts.pages_per_step` pages
    /// per step.
    ///
    /// In WAL mode (`safe`, `balanced`) the copy reads from one reader
    /// snapshot: it holds every commit acknowledged before it started and
    /// none after, and writers never wait for it (checkpoints cannot reset
    /// the WAL while it runs). Without WAL (`fast`, in-memory) it copies in
    /// one turn on the writer, and writers wait for the whole copy.
    ///
    /// The copy is written to a temporary file beside `dest` and moved to
    /// `dest` only when complete and synced, so `dest` never holds half a
    /// backup. Refuses (with [`Error::InvalidInput`]) a `dest` that is this
    /// database or one of its side files (compared by device and inode), or
    /// an existing non-empty file unless `opts.overwrite`.
    pub fn backup_with(
        &self,
        dest: impl AsRef<Path>,
        opts: &BackupOptions,
        progress: &mut dyn FnMut(BackupProgress),
    ) -> Result<BackupReport> {
        backup::run(self, self.inner.plan.wal(), dest.as_ref(), opts, progress)
    }

    /// Runs a read on the writer's connection if the writer is free right
    /// now (`None`, with nothing done, if another write holds it or waits):
    /// one snapshot, as [`read`](Database::read) gives. A read right after
    /// this process's own write is several times cheaper there (measured: a
    /// one-row lookup 2.5 µs on a reader, 10.4 µs on a reader after each
    /// write, because SQLite resets a connection's page cache when the WAL
    /// changed under it); writers that arrive meanwhile wait for it.
    ///
    /// ```
    /// let db = litelane::Database::open_in_memory(Default::default())?;
    /// db.write(|tx| Ok(tx.execute_batch("CREATE TABLE t(x); INSERT INTO t VALUES (7);")?))?;
    /// let x = db.try_read_on_writer(|c| Ok(c.query_row("SELECT x FROM t", [], |r| r.get::<_, i64>(0))?));
    /// assert_eq!(x.transpose()?, Some(7));
    /// # Ok::<(), litelane::Error>(())
    /// ```
    pub fn try_read_on_writer<T>(
        &self,
        f: impl FnOnce(&rusqlite::Connection) -> Result<T>,
    ) -> Option<Result<T>> {
        self.inner.writer.try_read(f, false)
    }

    /// [`try_read_on_writer`](Database::try_read_on_writer) for a closure
    /// that runs exactly one statement, which SQLite runs as a snapshot of
    /// its own: no `BEGIN` and `COMMIT` around it (two statements fewer). A
    /// statement that writes fails (`SQLITE_CONSTRAINT_COMMITHOOK`): only
    /// the writer's own `COMMIT` commits.
    ///
    /// ```
    /// let db = litelane::Database::open_in_memory(Default::default())?;
    /// db.write(|tx| Ok(tx.execute_batch("CREATE TABLE t(x); INSERT INTO t VALUES (7);")?))?;
    /// let x = db.try_read_statement_on_writer(|c| {
    ///     Ok(c.query_row("SELECT x FROM t", [], |r| r.get::<_, i64>(0))?)
    /// });
    /// assert_eq!(x.transpose()?, Some(7));
    /// let wrote = db.try_read_statement_on_writer(|c| Ok(c.execute("INSERT INTO t VALUES (8)", [])?));
    /// assert!(wrote.expect("the writer was free").is_err());
    /// # Ok::<(), litelane::Error>(())
    /// ```
    pub fn try_read_statement_on_writer<T>(
        &self,
        f: impl FnOnce(&rusqlite::Connection) -> Result<T>,
    ) -> Option<Result<T>> {
        self.inner.writer.try_read(f, true)
    }

    /// [`try_read_statement_on_writer`](Database::try_read_statement_on_writer),
    /// waiting for the writer's turn (in arrival order, behind queued
    /// writes) when it is taken: for a program that keeps state on the
    /// writer's connection alone (an `ATTACH`, a `TEMP` table, a connection
    /// `PRAGMA`) and must read with it. A statement that writes fails
    /// (`SQLITE_CONSTRAINT_COMMITHOOK`), except one that changes only the
    /// connection (`PRAGMA foreign_keys`, `ATTACH`), which commits nothing.
    ///
    /// ```
    /// let db = litelane::Database::open_in_memory(Default::default())?;
    /// db.read_on_writer(|c| Ok(c.execute_batch("PRAGMA case_sensitive_like = ON")?))?;
    /// let n: i64 =
    ///     db.read_on_writer(|c| Ok(c.query_row("SELECT 'a' LIKE 'A'", [], |r| r.get(0))?))?;
    /// assert_eq!(n, 0);
    /// # Ok::<(), litelane::Error>(())
    /// ```
    pub fn read_on_writer<T>(
        &self,
        f: impl FnOnce(&rusqlite::Connection) -> Result<T>,
    ) -> Result<T> {
        self.inner.writer.read_waiting(f)
    }

    /// Starts a write transaction that the caller holds across calls and
    /// runs on its own thread ([`HeldWrite`]), if the writer is free right
    /// now; `Ok(None)` if another write holds or waits for it (then nothing
    /// was done: queue with [`write`](Database::write) instead). This is how
    /// a transaction of several statements avoids a hand-over to another
    /// thread per statement when nobody else is writing.
    ///
    /// While it is held, a write of this thread through another handle
    /// would wait for it forever: finish it first.
    ///
    /// ```
    /// let db = litelane::Database::open_in_memory(Default::default())?;
    /// let mut tx = db.try_hold_writer("example")?.expect("nobody else writes");
    /// tx.run(|tx| Ok(tx.execute_batch("CREATE TABLE t(x); INSERT INTO t VALUES (1);")?))?;
    /// let n: i64 = tx.run(|tx| Ok(tx.query_row("SELECT count(*) FROM t", [], |r| r.get(0))?))?;
    /// tx.commit()?;
    /// assert_eq!(n, 1);
    /// # Ok::<(), litelane::Error>(())
    /// ```
    pub fn try_hold_writer(&self, label: &str) -> Result<Option<HeldWrite>> {
        self.inner.writer.try_hold(label)
    }

    /// [`try_hold_writer`](Database::try_hold_writer), waiting for the
    /// writer's turn when it is taken: in arrival order behind the writes
    /// queued before it (never run by another thread: it is the caller's
    /// own transaction), then for the cross-process turn up to
    /// [`Options::busy_timeout`]. For APIs whose callers run a transaction
    /// one call at a time (the C ABI's `litelane_begin`).
    ///
    /// ```
    /// let db = litelane::Database::open_in_memory(Default::default())?;
    /// let mut tx = db.hold_writer("example")?;
    /// tx.run(|tx| Ok(tx.execute_batch("CREATE TABLE t(x); INSERT INTO t VALUES (1);")?))?;
    /// tx.commit()?;
    /// # Ok::<(), litelane::Error>(())
    /// ```
    pub fn hold_writer(&self, label: &str) -> Result<HeldWrite> {
        self.inner.writer.hold(label)
    }

    /// Runs `f` on the writer's connection in a turn of its own, outside any
    /// transaction: for statements SQLite refuses inside one (`VACUUM`, a
    /// `PRAGMA journal_mode` change). Writers of this process wait for it
    /// (it does not take the turn among processes: a write waits for
    /// SQLite's write lock up to the busy timeout); there is no group commit
    /// and no rollback: each statement `f` runs commits on its own (`PRAGMA
    /// user_version = 3`, an `INSERT`), durable as the profile promises when
    /// this returns, and a transaction `f` leaves open is rolled back.
    /// Refused with [`Error::WritesStopped`] after a commit's outcome was
    /// unknown; an fsync failure here is an [`Error::OutcomeUnknown`].
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = litelane::Database::open(dir.path().join("app.db"), Default::default())?;
    /// db.write(|tx| Ok(tx.execute_batch("CREATE TABLE t(x); DELETE FROM t;")?))?;
    /// db.write_outside_transaction("vacuum", |conn| Ok(conn.execute_batch("VACUUM")?))?;
    /// # Ok::<(), litelane::Error>(())
    /// ```
    pub fn write_outside_transaction<T>(
        &self,
        label: &str,
        f: impl FnOnce(&rusqlite::Connection) -> Result<T>,
    ) -> Result<T> {
        self.inner
            .writer
            .outside_transaction(label, false, |c| f(c))
    }

    /// Replaces this database's content with a copy of the database file
    /// at `src`, while the database stays open: the copy runs in one turn of
    /// the writer (writers of this process wait for it; readers go on and
    /// see the new content from their next read). Returns the pages copied;
    /// `progress` is called after each step of `pages_per_step` pages (at
    /// least 1). `src` is only read.
    pub fn restore_from(
        &self,
        src: impl AsRef<Path>,
        pages_per_step: u32,
        progress: &mut dyn FnMut(BackupProgress),
    ) -> Result<u64> {
        backup::restore(self, src.as_ref(), pages_per_step, progress)
    }

    pub(crate) fn pool(&self) -> &Arc<Pool> {
        &self.inner.pool
    }

    pub(crate) fn writer(&self) -> &Arc<Writer> {
        &self.inner.writer
    }

    pub(crate) fn executor(&self) -> &asyncio::Executor {
        &self.inner.asyncs
    }
}

#[cfg(test)]
mod split_tests {
    use super::split_statements;

    #[test]
    fn statements_end_where_sqlite_says() {
        let cases: &[(&str, &[&str])] = &[
            ("", &[]),
            ("  -- nothing\n /* at all */ ", &[]),
            ("SELECT 1", &["SELECT 1"]),
            ("SELECT 1;SELECT 2;", &["SELECT 1;", "SELECT 2;"]),
            ("SELECT ';';", &["SELECT ';';"]),
            ("SELECT \"a;b\" FROM t;", &["SELECT \"a;b\" FROM t;"]),
            (
                "SELECT 1 -- a ; comment\n;",
                &["SELECT 1 -- a ; comment\n;"],
            ),
            ("SELECT /* ; */ 1;", &["SELECT /* ; */ 1;"]),
            (
                "CREATE TRIGGER tr AFTER INSERT ON t BEGIN SELECT 1; SELECT 2; END; SELECT 3;",
                &[
                    "CREATE TRIGGER tr AFTER INSERT ON t BEGIN SELECT 1; SELECT 2; END;",
                    " SELECT 3;",
                ],
            ),
            (
                "SELECT 1; 'unterminated;",
                &["SELECT 1;", " 'unterminated;"],
            ),
            ("SELECT 1; -- trailing", &["SELECT 1;"]),
            ("SELECT 1;;", &["SELECT 1;", ";"]),
        ];
        for (script, want) in cases {
            assert_eq!(&split_statements(script), want, "{script:?}");
        }
    }
}

#[cfg(test)]
mod version_tests {
    /// SQLite 3.7.0 through 3.51.2 can corrupt a WAL database when one
    /// connection checkpoints while another commits a transaction that
    /// starts the WAL over (the "WAL-reset bug", fixed in 3.51.3:
    /// <https://sqlite.org/wal.html#walresetbug>). litelane's checkpointer
    /// and writer are exactly two such connections, so the SQLite it is
    /// built with (and lane SQLite, built from the same source) must have
    /// the fix.
    #[test]
    fn the_bundled_sqlite_has_the_wal_reset_fix() {
        let version: Vec<u32> = super::sqlite_version()
            .split('.')
            .map(|part| part.parse().expect("a numeric version part"))
            .collect();
        assert!(
            version.as_slice() >= [3, 51, 3].as_slice(),
            "SQLite {} predates the WAL-reset fix (3.51.3)",
            super::sqlite_version()
        );
    }
}
