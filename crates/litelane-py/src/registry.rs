//! The process's engines: one litelane `Database` (a [`Shared`]) per file,
//! shared by every connection and `litelane.open` handle to that file, found
//! through the registry; the files an engine opened; what a fork leaves.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, Mutex, Weak};
use std::thread::ThreadId;

use litelane::{CheckpointMode, Database, Error, Options, Value};
use pyo3::prelude::*;

use crate::errors::{exc, Class};
use crate::functions::EngineState;
use crate::sync::lock;

/// One open database and who in this process holds a transaction on it.
pub struct Shared {
    pub db: Database,
    pub display: String,
    /// Open transactions (`Txn`s not yet finished) per Python thread.
    open_txns: Mutex<HashMap<ThreadId, u32>>,
    /// User functions, collations and hook dispatchers (`functions.rs`).
    pub funcs: EngineState,
    /// The process's fork generation when it opened ([`after_fork_in_child`]).
    generation: u64,
    /// `SQLITE_LIMIT_SQL_LENGTH` of the engine's connections, in bytes, kept
    /// here so that every statement is checked against it without a call
    /// into SQLite (`sqlite3` refuses a longer one with `DataError`).
    pub(crate) sql_length_limit: AtomicI64,
    /// The engine of one DB-API connection alone (see [`open_private`]):
    /// every statement runs on its writer's connection, which holds the
    /// connection's own state (pragmas, attached databases, `TEMP` tables),
    /// as `sqlite3`'s one SQLite connection does.
    pub private: bool,
    /// The files it opened, for an engine opened by path (see [`Files`]).
    files: Option<Files>,
}

/// The identity (device, inode) of the file at `path`, if there is one.
fn file_id(path: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino()))
}

/// The database file an engine opened by path and the `-wal` and `-shm`
/// files SQLite keeps beside it, by identity: what lets a connection to a
/// path whose file was deleted, renamed or replaced meanwhile open the file
/// that is there now, as `sqlite3` does, instead of joining the engine still
/// open on the old one (see [`open_shared`]).
struct Files {
    path: PathBuf,
    db: (u64, u64),
    wal: Option<(u64, u64)>,
    shm: Option<(u64, u64)>,
    /// The `-wal` and `-shm` names were given up ([`Shared::let_go_of_names`]).
    let_go: AtomicBool,
}

impl Files {
    /// For a database opened as `display` (a path or a `file:` URI) whose
    /// file is `file` (the engine's [`Database::path`]), looked at right
    /// after the engine opened it; None for in-memory databases.
    fn of(display: &str, file: Option<&Path>) -> Option<Files> {
        if display.is_empty() || display == ":memory:" || memory_uri(display) {
            return None;
        }
        let path = std::fs::canonicalize(file?).ok()?;
        let beside = |suffix: &str| {
            let mut s = path.clone().into_os_string();
            s.push(suffix);
            file_id(Path::new(&s))
        };
        Some(Files {
            db: file_id(&path)?,
            wal: beside("-wal"),
            shm: beside("-shm"),
            path,
            let_go: AtomicBool::new(false),
        })
    }

    /// True when the file at the path is no longer the one opened.
    fn moved(&self) -> bool {
        file_id(&self.path) != Some(self.db)
    }
}

/// Runs a write again while it fails with a retryable `RolledBack` (another
/// write of its group ended the shared transaction: nothing of it was
/// committed), and reports a non-retryable one as the SQLite error that
/// caused it.
fn retried<T>(mut run: impl FnMut() -> litelane::Result<T>) -> litelane::Result<T> {
    /// Retries are free of side effects, but bounded all the same.
    const MAX_RETRIES: usize = 64;
    let mut tries = 0;
    loop {
        match run() {
            // Only a write undone by another of its group runs again: an
            // `SQLITE_BUSY` has already waited its whole timeout (for
            // another process's turn, or SQLite's lock), and running it
            // again would multiply that wait (64 × 5 s), where `sqlite3`
            // raises "database is locked" after one.
            Err(
                e @ Error::RolledBack {
                    retryable: true, ..
                },
            ) if tries < MAX_RETRIES => {
                drop(e);
                tries += 1;
            }
            Err(Error::RolledBack {
                cause,
                retryable: false,
                ..
            }) => return Err(*cause),
            r => return r,
        }
    }
}

/// Bumped in a child process right after `fork()`: engines opened before
/// belong to the parent (their threads do not exist in the child, their
/// connections must not be used there).
static FORK_GENERATION: AtomicU64 = AtomicU64::new(0);

/// Called by `os.register_at_fork(after_in_child=...)`: forgets every engine
/// of the parent, so a connection opened in the child gets a new one, and a
/// handle from before the fork refuses to run (see [`Shared::stale`]).
#[pyfunction]
pub fn after_fork_in_child() {
    FORK_GENERATION.fetch_add(1, Ordering::AcqRel);
    // The map holds only weak references; the handles leak their engines.
    // (Its lock is free unless another thread was opening an engine at the
    // instant of the fork.)
    if let Ok(mut reg) = REGISTRY.try_lock() {
        reg.clear();
    }
    crate::workers::forget_after_fork();
}

impl Shared {
    fn new(db: Database, display: &str) -> Shared {
        let limit = db
            .read(|c| Ok(c.limit(litelane::rusqlite::limits::Limit::SQLITE_LIMIT_SQL_LENGTH)?))
            .map_or(i64::MAX, i64::from);
        let files = Files::of(display, db.path());
        Shared {
            db,
            display: display.to_string(),
            open_txns: Mutex::default(),
            funcs: EngineState::default(),
            generation: FORK_GENERATION.load(Ordering::Acquire),
            sql_length_limit: AtomicI64::new(limit),
            private: false,
            files,
        }
    }

    /// Copies what the WAL holds into the database file: a passive
    /// checkpoint, then, with `wait` and frames left behind (a reader's
    /// snapshot in the way), a full one, which waits for readers up to the
    /// busy timeout. Returns whether every frame is in the file.
    fn copy_wal_into_file(&self, wait: bool) -> bool {
        let copied = |r: &litelane::Result<litelane::CheckpointReport>| {
            r.as_ref()
                .is_ok_and(|r| !r.busy && r.checkpointed_frames >= r.wal_frames)
        };
        if copied(&self.db.checkpoint(CheckpointMode::Passive)) {
            return true;
        }
        wait && copied(&self.db.checkpoint(CheckpointMode::Full))
    }

    /// True when this engine's database file is no longer the one at its
    /// path (deleted, renamed or replaced while open).
    fn moved(&self) -> bool {
        self.files.as_ref().is_some_and(Files::moved)
    }

    /// For an engine whose file was deleted, renamed or replaced while open
    /// (once): copies what its WAL holds into its own file (a renamed file
    /// keeps its commits; skipped while a transaction is open on it, which
    /// holds the writer), then removes the `-wal` and `-shm` files from the
    /// path if they are still its own. Its connections keep them open and go
    /// on reading the old file, as a deleted file stays readable to whoever
    /// has it open, while an engine opened on the file now at the path
    /// creates its own instead of taking this one's: SQLite would otherwise
    /// apply the old file's WAL to the new file, and map one `-shm` for two
    /// files. (Its writes already fail: the writer refuses to commit into a
    /// file that moved.)
    fn let_go_of_names(&self, wait: bool) {
        let Some(files) = &self.files else { return };
        if files.let_go.swap(true, Ordering::AcqRel) {
            return;
        }
        if lock(&self.open_txns).is_empty() {
            self.copy_wal_into_file(wait);
        }
        for (suffix, id) in [("-wal", files.wal), ("-shm", files.shm)] {
            let mut name = files.path.clone().into_os_string();
            name.push(suffix);
            if id.is_some() && file_id(Path::new(&name)) == id {
                let _ = std::fs::remove_file(&name);
            }
        }
    }

    /// Runs `f`, one statement that reads, where this engine reads: on the
    /// writer's connection if it is free, else on a reader; always on the
    /// writer's connection (waiting for it) for a private engine, whose
    /// state lives there alone.
    pub fn read<T>(
        &self,
        f: impl FnOnce(&litelane::rusqlite::Connection) -> litelane::Result<T>,
    ) -> litelane::Result<T> {
        if self.private {
            return self.db.read_on_writer(f);
        }
        // A closure called at most once, whichever way it runs.
        let mut f = Some(f);
        let mut once = |c: &litelane::rusqlite::Connection| {
            (f.take().expect("a read runs its statement once"))(c)
        };
        match self.db.try_read_statement_on_writer(&mut once) {
            Some(r) => r,
            None => self.db.read(once),
        }
    }

    /// `DataError` for SQL longer than `SQLITE_LIMIT_SQL_LENGTH` bytes, as
    /// `sqlite3` checks every statement before preparing it (SQLite's own
    /// check would pass it: the statement cache trims trailing blanks).
    pub fn check_sql_length(&self, py: Python<'_>, sql: &str) -> PyResult<()> {
        match i64::try_from(sql.len()) {
            Ok(n) if n <= self.sql_length_limit.load(Ordering::Relaxed) => Ok(()),
            _ => Err(exc(py, Class::DataError, "query string is too large")),
        }
    }

    /// True in a child process for an engine opened before its `fork()`.
    pub fn stale(&self) -> bool {
        self.generation != FORK_GENERATION.load(Ordering::Acquire)
    }
}

impl Drop for Shared {
    /// An engine closing on a file that moved: SQLite leaves its WAL beside
    /// the path (it neither checkpoints nor deletes a moved file's WAL), where
    /// the next engine opened there would apply it to another file.
    fn drop(&mut self) {
        if !self.stale() && self.moved() {
            // No waiting here: a drop may run anywhere, the GIL held.
            self.let_go_of_names(false);
        }
    }
}

/// Lets go of a handle's engine: dropped normally, or leaked in a forked
/// child (dropping would join threads that do not exist there and close
/// connections the parent still uses).
pub fn release_shared(shared: Option<Arc<Shared>>) {
    match shared {
        Some(sh) if sh.stale() => std::mem::forget(sh),
        other => drop(other),
    }
}

impl Shared {
    /// Refuses a write from a thread that already holds a transaction on
    /// this database through another connection: it would wait for itself
    /// forever (the standard library would wait `timeout`, then report
    /// "database is locked").
    pub fn check_no_open_txn(&self) -> litelane::Result<()> {
        let me = std::thread::current().id();
        if lock(&self.open_txns).get(&me).copied().unwrap_or(0) > 0 {
            return Err(Error::user(format!(
                "database is locked: this thread holds an open transaction on another \
                 connection to {}; commit or roll it back first (waiting would never end)",
                self.display
            )));
        }
        Ok(())
    }

    /// One write transaction of its own (group commit), run again when it
    /// was undone through no fault of its own: another write of its group
    /// ended the shared transaction ([`Error::is_retryable`]), so nothing of
    /// it happened. A write that ended the transaction itself reports
    /// SQLite's error that did it (an `INSERT OR ROLLBACK`'s constraint).
    pub fn write<T>(
        &self,
        f: impl Fn(&litelane::Tx<'_>) -> litelane::Result<T> + Sync,
    ) -> litelane::Result<T>
    where
        T: Send,
    {
        retried(|| self.db.write(|tx| f(tx)))
    }

    /// `Database::execute` (one statement, a transaction of its own, which
    /// another process may commit), retried and unwrapped as [`write`](Shared::write).
    pub fn execute(&self, sql: &str, params: &[Value]) -> litelane::Result<litelane::Executed> {
        retried(|| self.db.execute(sql, params))
    }

    pub fn mark_open(&self, thread: ThreadId) {
        *lock(&self.open_txns).entry(thread).or_insert(0) += 1;
    }

    /// True when a thread other than `me` has a transaction open on this
    /// database (through any connection of this process).
    pub fn txn_open_elsewhere(&self, me: ThreadId) -> bool {
        lock(&self.open_txns)
            .iter()
            .any(|(t, n)| *t != me && *n > 0)
    }

    pub fn mark_closed(&self, thread: ThreadId) {
        let mut m = lock(&self.open_txns);
        if let Some(n) = m.get_mut(&thread) {
            *n -= 1;
            if *n == 0 {
                m.remove(&thread);
            }
        }
    }
}

/// The engines of one registry key: the one new connections join, and the
/// others still open on it (connections' own engines, see [`open_private`],
/// and engines left on a file that was deleted or replaced).
#[derive(Default)]
struct Engines {
    shared: Weak<Shared>,
    others: Vec<Weak<Shared>>,
}

static REGISTRY: LazyLock<Mutex<HashMap<String, Engines>>> = LazyLock::new(Default::default);

/// The registry's entry for `key`, pruned of engines that closed.
fn registry_entry<'r>(reg: &'r mut HashMap<String, Engines>, key: &str) -> &'r mut Engines {
    reg.retain(|_, e| {
        e.others.retain(|w| w.strong_count() > 0);
        e.shared.strong_count() > 0 || !e.others.is_empty()
    });
    reg.entry(key.to_string()).or_default()
}

/// The registry key of a path: its canonical form, or `None` for private
/// in-memory databases.
/// True when the `file:` URI `uri`'s query has `kv` (`key=value`).
fn uri_has(uri: &str, kv: &str) -> bool {
    let query = uri.split_once('?').map_or("", |(_, q)| q);
    query.split(['&', '#']).any(|p| p == kv)
}

/// True when `path` is a `file:` URI of an in-memory database.
fn memory_uri(path: &str) -> bool {
    path.starts_with("file::memory:") || (path.starts_with("file:") && uri_has(path, "mode=memory"))
}

fn registry_key(path: &str) -> Option<String> {
    if path.is_empty() || path == ":memory:" {
        return None;
    }
    if path.starts_with("file:") {
        // A private in-memory database by URI has no name to share.
        return (!memory_uri(path) || uri_has(path, "cache=shared")).then(|| path.to_string());
    }
    let p = Path::new(path);
    let canonical = p.canonicalize().ok().or_else(|| {
        let parent = match p.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
            _ => PathBuf::from("."),
        };
        Some(parent.canonicalize().ok()?.join(p.file_name()?))
    })?;
    Some(canonical.to_string_lossy().into_owned())
}

/// Opens an engine for one DB-API connection alone, on the file of `of`
/// with its options but one reader: the connection's every statement runs
/// on this engine's writer (see [`Shared::private`]); its writes still take
/// the cross-process turn, which orders them with the shared engine's.
pub fn open_private(of: &Shared) -> litelane::Result<Arc<Shared>> {
    let mut opts = of.db.options().clone();
    opts.readers = 1;
    // The name it was opened with: a shared in-memory database's URI
    // reaches the same database again.
    let mut sh = Shared::new(Database::open(&of.display, opts)?, &of.display);
    sh.private = true;
    let sh = Arc::new(sh);
    if let Some(key) = registry_key(&of.display) {
        registry_entry(&mut lock(&REGISTRY), &key)
            .others
            .push(Arc::downgrade(&sh));
    }
    Ok(sh)
}

/// The file a `file:` URI names when it opens it `immutable=1`.
fn immutable_file(uri: &str) -> Option<PathBuf> {
    let rest = uri.strip_prefix("file:")?;
    let (name, query) = rest.split_once('?')?;
    let query = query.split('#').next().unwrap_or("");
    if !query.split('&').any(|kv| kv == "immutable=1") {
        return None;
    }
    // SQLite decodes %HH in the name; a `//host` authority is empty or localhost.
    let name = name
        .strip_prefix("//localhost")
        .or_else(|| name.strip_prefix("//"))
        .unwrap_or(name);
    let bytes = name.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        match (
            bytes[i],
            bytes.get(i + 1).copied().and_then(hex),
            bytes.get(i + 2).copied().and_then(hex),
        ) {
            (b'%', Some(h), Some(l)) => {
                out.push((h * 16 + l) as u8);
                i += 3;
            }
            (b, _, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    std::fs::canonicalize(String::from_utf8(out).ok()?).ok()
}

/// Copies what the WAL holds into the database file (a passive checkpoint)
/// for every engine of this process on `file` (every file engine: `None`).
/// A connection that opens a file `immutable=1` reads the file alone, never
/// its WAL; with `sqlite3` a commit is in the file as soon as it returns
/// (rollback journal), so an immutable reader opened after a write sees it
/// there. An engine in a transaction is left as it is (its writer is held).
pub fn checkpoint_for_immutable(file: Option<&Path>) {
    let engines: Vec<Arc<Shared>> = lock(&REGISTRY)
        .values()
        .flat_map(|e| std::iter::once(&e.shared).chain(&e.others))
        .filter_map(Weak::upgrade)
        .filter(|sh| {
            sh.files
                .as_ref()
                .is_some_and(|f| file.is_none_or(|file| f.path == file))
        })
        .collect();
    for sh in engines {
        if lock(&sh.open_txns).is_empty() {
            sh.copy_wal_into_file(true);
        }
    }
}

/// `checkpoint_for_immutable` for Python: before `ATTACH`ing a file
/// `immutable=1` (which file is in SQL `litelane.dbapi` does not parse).
#[pyfunction]
#[pyo3(name = "checkpoint_for_immutable")]
pub fn py_checkpoint_for_immutable(py: Python<'_>) {
    py.detach(|| checkpoint_for_immutable(None));
}

/// `join_any`: share an open engine whatever its options. `stock_given`:
/// `opts.stock_settings` was asked for (else an open engine's is taken).
pub fn open_shared(
    path: &str,
    mut opts: Options,
    join_any: bool,
    stock_given: bool,
) -> litelane::Result<Arc<Shared>> {
    if let Some(file) = immutable_file(path) {
        checkpoint_for_immutable(Some(&file));
    }
    let Some(key) = registry_key(path) else {
        let db = if path.is_empty() || path == ":memory:" {
            Database::open_in_memory(opts)?
        } else {
            Database::open(path, opts)?
        };
        // A private in-memory database: one connection's alone already.
        let mut sh = Shared::new(db, path);
        sh.private = true;
        return Ok(Arc::new(sh));
    };
    loop {
        let mut reg = lock(&REGISTRY);
        let entry = registry_entry(&mut reg, &key);
        if let Some(existing) = entry.shared.upgrade() {
            if !existing.moved() {
                if !stock_given {
                    opts.stock_settings = existing.db.options().stock_settings;
                }
                if !join_any && existing.db.options() != &opts {
                    return Err(Error::InvalidInput {
                        message: format!(
                            "{path} is already open in this process with other options \
                             (profile {}); every connection to a file shares one engine, so \
                             open it with the same profile and options",
                            existing.db.options().profile
                        ),
                    });
                }
                return Ok(existing);
            }
            // The file at the path is not the one it has open (deleted,
            // renamed or replaced meanwhile): as with `sqlite3`, a new
            // connection opens the file there now, and the connections of
            // the old engine stay on the old file.
            entry.others.push(Arc::downgrade(&existing));
            entry.shared = Weak::new();
        }
        let stale: Vec<Arc<Shared>> = entry
            .others
            .iter()
            .filter_map(Weak::upgrade)
            .filter(|e| {
                e.moved()
                    && !e
                        .files
                        .as_ref()
                        .is_some_and(|f| f.let_go.load(Ordering::Acquire))
            })
            .collect();
        if stale.is_empty() {
            let shared = Arc::new(Shared::new(Database::open(path, opts)?, path));
            entry.shared = Arc::downgrade(&shared);
            return Ok(shared);
        }
        // Outside the registry's lock: a checkpoint waits for the writer.
        drop(reg);
        for e in stale {
            e.let_go_of_names(true);
        }
    }
}
