//! `Engine`: one process-wide litelane `Database` per file, shared by every
//! connection and `litelane.open` handle to that file.

use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender};
use std::sync::{Arc, LazyLock, Mutex, MutexGuard, Weak};
use std::thread::ThreadId;
use std::time::Duration;

use litelane::{CheckpointMode, Database, Error, Options, Profile, Value};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString, PyTuple};

use crate::convert::{row_tuple, rows_list, to_params, to_py};
use crate::errors::{exc, IntoPy};
use crate::exec::{self, leading_keyword, Outcome, Params};
use crate::functions::{EngineState, Hooks};
use crate::txn::Txn;

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

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
    sql_length_limit: AtomicI64,
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
            _ => Err(exc(py, "DataError", "query string is too large")),
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
fn open_private(of: &Shared) -> litelane::Result<Arc<Shared>> {
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
fn open_shared(
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

/// A read that pins the WAL as a dict (`label`, `age` in seconds, `sql`),
/// or None.
fn pinned_read_dict<'py>(
    py: Python<'py>,
    read: Option<&litelane::PinnedRead>,
) -> PyResult<Option<Bound<'py, PyDict>>> {
    let Some(r) = read else { return Ok(None) };
    let d = PyDict::new(py);
    d.set_item("label", &r.label)?;
    d.set_item("age", r.age.as_secs_f64())?;
    d.set_item("sql", &r.sql)?;
    Ok(Some(d))
}

/// The WAL over its limit as a dict (`duration` in seconds, `wal_pages`,
/// `limit_pages`, `reason`: "pinned_by_read", "pinned_elsewhere",
/// "catching_up" or "checkpoint_failed"; `pinned_by` for the first,
/// `error` for the last), or None while it is within its limit.
fn over_limit_dict<'py>(
    py: Python<'py>,
    over: Option<&litelane::WalOverLimit>,
) -> PyResult<Option<Bound<'py, PyDict>>> {
    use litelane::OverLimitReason as R;
    let Some(o) = over else { return Ok(None) };
    let d = PyDict::new(py);
    d.set_item("duration", o.duration.as_secs_f64())?;
    d.set_item("wal_pages", o.wal_pages)?;
    d.set_item("limit_pages", o.limit_pages)?;
    let reason = match &o.reason {
        R::PinnedByRead(r) => {
            d.set_item("pinned_by", pinned_read_dict(py, Some(r))?)?;
            "pinned_by_read"
        }
        R::PinnedElsewhere => "pinned_elsewhere",
        R::CatchingUp => "catching_up",
        R::CheckpointFailed(e) => {
            d.set_item("error", e)?;
            "checkpoint_failed"
        }
        _ => "other",
    };
    d.set_item("reason", reason)?;
    Ok(Some(d))
}

fn seconds(py: Python<'_>, name: &str, v: &Bound<'_, PyAny>) -> PyResult<Duration> {
    let s: f64 = v.extract().map_err(|_| {
        exc(
            py,
            "ProgrammingError",
            format!("option {name}: expected seconds (a number)"),
        )
    })?;
    Duration::try_from_secs_f64(s).map_err(|_| {
        exc(
            py,
            "ProgrammingError",
            format!("option {name}: {s} is not a duration in seconds"),
        )
    })
}

fn build_options(
    py: Python<'_>,
    profile: &str,
    readers: Option<usize>,
    options: Option<&Bound<'_, PyDict>>,
) -> PyResult<Options> {
    let profile: Profile = profile.parse().py_err(py)?;
    let mut o = Options::with_profile(profile);
    if let Some(r) = readers {
        if r == 0 {
            return Err(exc(py, "ProgrammingError", "readers must be at least 1"));
        }
        o.readers = r;
    }
    let Some(options) = options else {
        return Ok(o);
    };
    let bad = |name: &str, what: &str| {
        exc(
            py,
            "ProgrammingError",
            format!("option {name}: expected {what}"),
        )
    };
    for (k, v) in options.iter() {
        let name: String = k.extract()?;
        let int =
            |what: &str| -> PyResult<u64> { v.extract::<u64>().map_err(|_| bad(&name, what)) };
        let flag =
            || -> PyResult<bool> { v.extract::<bool>().map_err(|_| bad(&name, "True or False")) };
        let pages = || -> PyResult<u32> {
            u32::try_from(int("pages")?).map_err(|_| bad(&name, "pages below 2^32"))
        };
        match name.as_str() {
            "cache_size_kib" => {
                o.cache_size_kib =
                    u32::try_from(int("KiB")?).map_err(|_| bad(&name, "KiB below 2^32"))?
            }
            "mmap_size" => o.mmap_size = int("bytes")?,
            "busy_timeout" => o.busy_timeout = seconds(py, &name, &v)?,
            "statement_cache" => o.statement_cache = int("a count")? as usize,
            "journal_size_limit" => o.journal_size_limit = int("bytes")?,
            "persistent_wal" => o.persistent_wal = flag()?,
            "group_commit" => o.group_commit.enabled = flag()?,
            "group_commit_max_jobs" => o.group_commit.max_jobs = int("a count")?.max(1) as usize,
            "group_commit_max_wait" => o.group_commit.max_wait = seconds(py, &name, &v)?,
            "background_checkpoints" => o.checkpoints.background = flag()?,
            "checkpoint_after_pages" => o.checkpoints.passive_after_pages = pages()?,
            "wal_limit_pages" => o.checkpoints.limit_pages = pages()?,
            "over_limit" => {
                o.checkpoints.over_limit = match v.extract::<String>().as_deref() {
                    Ok("grow") => litelane::OverLimit::Grow,
                    Ok("hold_writers") => litelane::OverLimit::HoldWriters,
                    _ => return Err(bad(&name, "\"grow\" or \"hold_writers\"")),
                }
            }
            "escalation_wait" => o.checkpoints.escalation_wait = seconds(py, &name, &v)?,
            "max_read_age" => {
                o.checkpoints.max_read_age = match v.is_none() {
                    true => None,
                    false => Some(seconds(py, &name, &v)?),
                }
            }
            "slow_statement" => o.slow_statement = seconds(py, &name, &v)?,
            "long_wait" => o.long_wait = seconds(py, &name, &v)?,
            "async_threads" => o.async_threads = int("a count")?.max(1) as usize,
            "process_queue" => o.process_queue = flag()?,
            "stock_settings" => o.stock_settings = flag()?,
            "process_turn_linger" => o.process_turn_linger = seconds(py, &name, &v)?,
            _ => {
                return Err(exc(
                    py,
                    "ProgrammingError",
                    format!(
                        "unknown option {name:?}: expected one of cache_size_kib, mmap_size, \
                         busy_timeout, statement_cache, journal_size_limit, persistent_wal, \
                         group_commit, group_commit_max_jobs, group_commit_max_wait, \
                         background_checkpoints, checkpoint_after_pages, wal_limit_pages, \
                         over_limit, escalation_wait, max_read_age, slow_statement, long_wait, \
                         async_threads, process_queue, stock_settings, process_turn_linger"
                    ),
                ))
            }
        }
    }
    Ok(o)
}

/// Refuses transaction-control statements where litelane owns the
/// transaction (use the API's commit/rollback instead).
pub fn refuse_control(py: Python<'_>, sql: &str) -> PyResult<()> {
    if !exec::starts_with_keyword(sql, &["BEGIN", "COMMIT", "END", "ROLLBACK"]) {
        return Ok(()); // the usual case, decided without allocating
    }
    let kw = leading_keyword(sql);
    let bare_rollback = kw == "ROLLBACK"
        && !sql
            .to_ascii_uppercase()
            .split_whitespace()
            .any(|w| w == "TO");
    if matches!(kw.as_str(), "BEGIN" | "COMMIT" | "END") || bare_rollback {
        return Err(exc(
            py,
            "ProgrammingError",
            format!("{kw} is not run as a statement here: litelane owns the transaction (use transaction(), commit() or rollback())"),
        ));
    }
    Ok(())
}

/// The result of `execute` as the tuple
/// `(columns, rows, rowcount, lastrowid, wrote, decltypes)`.
pub fn outcome_tuple<'py>(py: Python<'py>, o: &Outcome) -> PyResult<Bound<'py, PyTuple>> {
    let columns = match &o.columns {
        Some(c) => PyTuple::new(py, c)?.into_any(),
        None => py.None().into_bound(py),
    };
    (
        columns,
        rows_list(py, &o.rows)?,
        o.rowcount,
        o.lastrowid,
        o.wrote,
        PyTuple::new(py, &o.decltypes)?,
    )
        .into_pyobject(py)
}

/// `cursor.description` per result shape (column names, declared types),
/// built once: a statement run again returns the same tuple. Read and
/// filled with the GIL held; emptied when it grows past 1,024 shapes.
type Shape = (Vec<String>, Vec<Option<String>>);
static DESCRIPTIONS: LazyLock<Mutex<HashMap<Shape, Py<PyTuple>>>> =
    LazyLock::new(|| Mutex::new(HashMap::new()));

/// The DB-API `cursor.description` of a result: one
/// `(name, declared type or None, None, None, None, None, None)` per
/// column; `None` for a statement without result columns. Returns it with
/// the rest of the outcome.
pub fn description<'py>(py: Python<'py>, o: Outcome) -> PyResult<(Bound<'py, PyAny>, Outcome)> {
    let Outcome {
        columns,
        decltypes,
        rows,
        rowcount,
        lastrowid,
        wrote,
    } = o;
    let rest = Outcome {
        columns: None,
        decltypes: Vec::new(),
        rows,
        rowcount,
        lastrowid,
        wrote,
    };
    let Some(columns) = columns else {
        return Ok((py.None().into_bound(py), rest));
    };
    let key = (columns, decltypes);
    let mut cache = lock(&DESCRIPTIONS);
    if let Some(d) = cache.get(&key) {
        return Ok((d.bind(py).clone().into_any(), rest));
    }
    let items = key
        .0
        .iter()
        .zip(&key.1)
        .map(|(name, decl)| {
            (
                name,
                decl,
                py.None(),
                py.None(),
                py.None(),
                py.None(),
                py.None(),
            )
                .into_pyobject(py)
        })
        .collect::<PyResult<Vec<_>>>()?;
    let d = PyTuple::new(py, items)?;
    if cache.len() >= 1024 {
        cache.clear();
    }
    cache.insert(key, d.clone().unbind());
    Ok((d.into_any(), rest))
}

/// The result of a statement as the DB-API layer (`litelane.dbapi`) stores
/// it: `(description, rows, rowcount, lastrowid, wrote)`, the description
/// as `cursor.description` shows it (see `description`).
pub fn dbapi_tuple<'py>(py: Python<'py>, o: Outcome) -> PyResult<Bound<'py, PyTuple>> {
    let (desc, o) = description(py, o)?;
    (
        desc,
        rows_list(py, &o.rows)?,
        o.rowcount,
        o.lastrowid,
        o.wrote,
    )
        .into_pyobject(py)
}

/// `outcome_tuple`, or `dbapi_tuple` when `describe`.
pub fn result_tuple<'py>(
    py: Python<'py>,
    o: Outcome,
    describe: bool,
) -> PyResult<Bound<'py, PyTuple>> {
    if describe {
        dbapi_tuple(py, o)
    } else {
        outcome_tuple(py, &o)
    }
}

/// Rows as tuples, or as dicts keyed by column name.
pub fn rows_out<'py>(py: Python<'py>, o: &Outcome, dicts: bool) -> PyResult<Bound<'py, PyList>> {
    if !dicts {
        return rows_list(py, &o.rows);
    }
    let names: Vec<Bound<'py, PyString>> = o
        .columns
        .iter()
        .flatten()
        .map(|c| PyString::new(py, c))
        .collect();
    let list = PyList::empty(py);
    for r in &o.rows {
        list.append(row_dict(py, &names, r)?)?;
    }
    Ok(list)
}

fn row_dict<'py>(
    py: Python<'py>,
    names: &[Bound<'py, PyString>],
    row: &[Value],
) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    for (n, v) in names.iter().zip(row) {
        d.set_item(n, to_py(py, v)?)?;
    }
    Ok(d)
}

/// A handle on the process-wide engine of one database file.
#[pyclass(frozen, module = "litelane._litelane")]
pub struct Engine {
    shared: Mutex<Option<Arc<Shared>>>,
    /// This handle's authorizer, progress handler and trace callback, in
    /// force around every statement it runs.
    hooks: Arc<Hooks>,
    /// How long this handle's writes wait for another process's write turn
    /// (`_set_timeout`, the DB-API connection's `timeout`); `None`: the
    /// engine's `busy_timeout` option.
    wait_timeout: Mutex<Option<Duration>>,
}

/// A `keep_waiting` for the engine's cross-process waits
/// (`litelane::with_process_wait`) that runs Python's signal handlers
/// (taking the GIL for it): a handler that raises (Ctrl-C's
/// `KeyboardInterrupt`) ends the wait, its exception kept in `raised`.
fn signal_check(raised: Arc<Mutex<Option<PyErr>>>) -> litelane::KeepWaiting {
    Arc::new(move || {
        Python::attach(|py| match py.check_signals() {
            Ok(()) => true,
            Err(e) => {
                *lock(&raised) = Some(e);
                false
            }
        })
    })
}

/// Runs `f` with the GIL released, its waits for another process's turn
/// bounded by `timeout` (`None`: the engine's `busy_timeout`) and ended by
/// a Python signal handler that raises, whose exception is then returned
/// instead of the engine's error.
pub(crate) fn detach_waiting<T: Send>(
    py: Python<'_>,
    timeout: Option<Duration>,
    f: impl FnOnce() -> litelane::Result<T> + Send,
) -> PyResult<T> {
    let raised = Arc::new(Mutex::new(None));
    let check = signal_check(Arc::clone(&raised));
    let out = py.detach(|| litelane::with_process_wait(timeout, Some(check), f));
    if let Some(e) = lock(&raised).take() {
        return Err(e);
    }
    out.py_err(py)
}

impl Drop for Engine {
    fn drop(&mut self) {
        let taken = lock(&self.shared).take();
        if let Some(sh) = taken.as_ref().filter(|sh| !sh.stale()) {
            crate::functions::forget(&sh.db, &sh.funcs, &self.hooks);
        }
        release_shared(taken);
    }
}

impl Engine {
    /// [`detach_waiting`] with this handle's timeout.
    fn waiting<T: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce() -> litelane::Result<T> + Send,
    ) -> PyResult<T> {
        let timeout = *lock(&self.wait_timeout);
        detach_waiting(py, timeout, f)
    }

    /// One statement as a write of its own (`outside`: on the writer outside
    /// any transaction), with this handle's hooks; the outcome tuple (the
    /// DB-API layer's tuple when `describe`, see `result_tuple`).
    fn write_one<'py>(
        &self,
        py: Python<'py>,
        sql: String,
        params: Option<&Bound<'py, PyAny>>,
        outside: bool,
        describe: bool,
    ) -> PyResult<Bound<'py, PyTuple>> {
        let o = self.write_outcome(py, sql, params, outside)?;
        result_tuple(py, o, describe)
    }

    /// [`write_one`](Engine::write_one)'s statement as an outcome.
    pub(crate) fn write_outcome(
        &self,
        py: Python<'_>,
        sql: String,
        params: Option<&Bound<'_, PyAny>>,
        outside: bool,
    ) -> PyResult<Outcome> {
        let p = to_params(params)?;
        let sh = self.get(py)?;
        let mut o = self.waiting(py, || {
            sh.check_no_open_txn()?;
            if outside {
                sh.db.write_outside_transaction(&sql, |conn| {
                    self.hooks.around(conn, || exec::run(conn, &sql, &p))
                })
            } else if let Some(done) = self.execute_plain(&sh, &sql, &p) {
                done
            } else {
                sh.write(|tx| self.hooks.around(tx, || exec::run(tx, &sql, &p)))
                    .map(|mut o| {
                        o.wrote = true;
                        o
                    })
            }
        })?;
        o.wrote |= outside;
        Ok(o)
    }

    /// An `INSERT` or `REPLACE` with positional parameters, through the
    /// engine's `execute`, which under `safe` another process may commit in
    /// its transaction (combined commits, docs/concurrency.md): when no
    /// authorizer, trace callback, progress handler, function or collation
    /// of this engine could run in it. `None`: nothing ran; take the general
    /// path (also for a statement `execute` refuses, whose error the general
    /// path reports as `sqlite3` does).
    fn execute_plain(
        &self,
        sh: &Shared,
        sql: &str,
        p: &Params,
    ) -> Option<litelane::Result<Outcome>> {
        let values: &[Value] = match p {
            Params::Empty => &[],
            Params::Positional(v) => v,
            Params::Named(_) | Params::Lookup(_) => return None,
        };
        // A private engine's writer may hold state of its own (pragmas,
        // attached databases): its statements are never posted to run on
        // another process's connection.
        let plain = !sh.private
            && self.hooks.is_empty()
            && sh.funcs.none_installed()
            && exec::starts_with_keyword(sql, &["INSERT", "REPLACE"])
            && !sql.to_ascii_uppercase().contains("RETURNING");
        if !plain {
            return None;
        }
        match sh.execute(sql, values) {
            Err(Error::InvalidInput { .. }) => None,
            Err(e) => Some(Err(e)),
            Ok(done) => Some(Ok(Outcome {
                rowcount: done.changes as i64,
                lastrowid: done.last_insert_rowid,
                // A row not inserted (OR IGNORE) leaves lastrowid as it
                // was: the rowid, if the statement ran in another process,
                // is that process's connection's.
                wrote: done.changes > 0,
                ..Outcome::default()
            })),
        }
    }

    /// Runs `sql` if it only reads (`None` if it would write): on the writer
    /// when it is free (its page cache is warm after this process's writes),
    /// else on a reader.
    fn read_first(&self, sh: &Shared, sql: &str, p: &Params) -> litelane::Result<Option<Outcome>> {
        let run = |c: &litelane::rusqlite::Connection| {
            self.hooks.around(c, || exec::run_if_readonly(c, sql, p))
        };
        sh.read(run)
    }

    /// `execute`'s statement as an outcome (see `execute`).
    pub(crate) fn run_outcome(
        &self,
        py: Python<'_>,
        sql: String,
        params: Option<&Bound<'_, PyAny>>,
        allow_write: bool,
    ) -> PyResult<Option<Outcome>> {
        let p = to_params(params)?;
        let sh = self.get(py)?;
        // INSERT, UPDATE, DELETE and REPLACE always write: no reader needs
        // to look at them first. A read waits for no other process, so it
        // runs without the wait's signal check (`waiting`).
        if !exec::is_dml(&sql) {
            let read = py.detach(|| self.read_first(&sh, &sql, &p)).py_err(py)?;
            if read.is_some() {
                return Ok(read);
            }
        }
        if !allow_write {
            return Ok(None);
        }
        self.waiting(py, || {
            sh.check_no_open_txn()?;
            if let Some(done) = self.execute_plain(&sh, &sql, &p) {
                return done;
            }
            let mut o = sh.write(|tx| self.hooks.around(tx, || exec::run(tx, &sql, &p)))?;
            o.wrote = true;
            Ok(o)
        })
        .map(Some)
    }

    /// `begin(timeout)` with the guard on: the transaction the DB-API
    /// layer opens before a statement.
    pub(crate) fn begin_guarded(&self, py: Python<'_>, timeout: f64) -> PyResult<Txn> {
        self.begin(py, timeout, true)
    }

    pub fn get(&self, py: Python<'_>) -> PyResult<Arc<Shared>> {
        let sh = lock(&self.shared).clone().ok_or_else(|| {
            exc(
                py,
                "ProgrammingError",
                "Cannot operate on a closed database.",
            )
        })?;
        if sh.stale() {
            return Err(exc(
                py,
                "ProgrammingError",
                format!(
                    "this connection to {} was opened before the process forked; a \
                     connection does not survive fork(): open a new one in the child",
                    sh.display
                ),
            ));
        }
        Ok(sh)
    }
}

/// Opens (or joins, if this process already has it open) the engine of `path`.
///
/// With no `profile`, `readers` or `options`, the caller takes the engine
/// as it is if the file is already open in this process (whatever its
/// options), and otherwise opens it with `default_profile` and, unless the
/// options say, `stock_settings = default_stock`. Asking for options that
/// differ from an open engine's is an error.
#[pyfunction]
#[pyo3(signature = (path, profile = None, readers = None, options = None, default_profile = "balanced", default_stock = false))]
pub fn open(
    py: Python<'_>,
    path: String,
    profile: Option<&str>,
    readers: Option<usize>,
    options: Option<&Bound<'_, PyDict>>,
    default_profile: &str,
    default_stock: bool,
) -> PyResult<Engine> {
    let join_any = profile.is_none() && readers.is_none() && options.is_none_or(|o| o.is_empty());
    let stock_given = match options {
        Some(o) => o.contains("stock_settings")?,
        None => false,
    };
    let mut opts = build_options(py, profile.unwrap_or(default_profile), readers, options)?;
    if !stock_given {
        opts.stock_settings = default_stock;
    }
    let shared = py
        .detach(|| open_shared(&path, opts, join_any, stock_given))
        .py_err(py)?;
    Ok(Engine {
        shared: Mutex::new(Some(shared)),
        hooks: Arc::default(),
        wait_timeout: Mutex::new(None),
    })
}

#[pymethods]
impl Engine {
    /// The authorizer, progress handler and trace callback are held here for
    /// SQLite, out of Python's sight: shown to the garbage collector, so a
    /// connection whose callback refers back to it is freed.
    fn __traverse__(&self, visit: pyo3::PyVisit<'_>) -> Result<(), pyo3::PyTraverseError> {
        self.hooks.visit(&visit)
    }

    fn __clear__(&self) {
        self.hooks.clear();
    }

    /// Runs one statement outside any transaction: read-only statements on a
    /// reader, others as one write transaction (if `allow_write`; otherwise
    /// returns None without running it). Returns
    /// `(columns, rows, rowcount, lastrowid, wrote, decltypes)`, or with
    /// `describe` the DB-API layer's `(description, rows, rowcount,
    /// lastrowid, wrote)`.
    #[pyo3(signature = (sql, params = None, allow_write = true, describe = false))]
    fn execute<'py>(
        &self,
        py: Python<'py>,
        sql: String,
        params: Option<&Bound<'py, PyAny>>,
        allow_write: bool,
        describe: bool,
    ) -> PyResult<Option<Bound<'py, PyTuple>>> {
        self.run_outcome(py, sql, params, allow_write)?
            .map(|o| result_tuple(py, o, describe))
            .transpose()
    }

    /// Runs one statement as its own write transaction, without first
    /// checking on a reader whether it writes; the tuple of `execute`.
    #[pyo3(signature = (sql, params = None, describe = false))]
    fn execute_write<'py>(
        &self,
        py: Python<'py>,
        sql: String,
        params: Option<&Bound<'py, PyAny>>,
        describe: bool,
    ) -> PyResult<Bound<'py, PyTuple>> {
        self.write_one(py, sql, params, false, describe)
    }

    /// Runs a read-only statement and returns its rows (tuples or dicts);
    /// a statement that writes runs as its own write transaction.
    #[pyo3(signature = (sql, params = None, dicts = false))]
    fn query<'py>(
        &self,
        py: Python<'py>,
        sql: String,
        params: Option<&Bound<'py, PyAny>>,
        dicts: bool,
    ) -> PyResult<Bound<'py, PyList>> {
        refuse_control(py, &sql)?;
        let p = to_params(params)?;
        let sh = self.get(py)?;
        let o = self.waiting(py, || -> litelane::Result<Outcome> {
            if let Some(o) = self.read_first(&sh, &sql, &p)? {
                return Ok(o);
            }
            sh.check_no_open_txn()?;
            sh.write(|tx| self.hooks.around(tx, || exec::run(tx, &sql, &p)))
        })?;
        rows_out(py, &o, dicts)
    }

    /// Runs one statement for every parameter set, all in one write
    /// transaction. Returns `(None, [], rowcount, lastrowid, True)`.
    fn executemany<'py>(
        &self,
        py: Python<'py>,
        sql: String,
        seq: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyTuple>> {
        self.hooks.partial().store(0, Ordering::Relaxed);
        let sets = params_seq(seq)?;
        let sh = self.get(py)?;
        let mut o = self.waiting(py, || {
            sh.check_no_open_txn()?;
            sh.write(|tx| {
                self.hooks.around(tx, || {
                    exec::run_many(
                        tx,
                        &sql,
                        &sets,
                        sh.funcs.none_installed(),
                        self.hooks.partial(),
                    )
                })
            })
        })?;
        o.wrote = true;
        outcome_tuple(py, &o)
    }

    /// Runs a script of statements as one write transaction (BEGIN/COMMIT in
    /// the script are skipped).
    fn executescript(&self, py: Python<'_>, sql: String) -> PyResult<()> {
        let sh = self.get(py)?;
        self.waiting(py, || {
            sh.check_no_open_txn()?;
            sh.write(|tx| self.hooks.around(tx, || exec::run_script(tx, &sql)))
        })
    }

    /// True when `sql` is one read-only statement.
    fn is_readonly(&self, py: Python<'_>, sql: String) -> PyResult<bool> {
        let sh = self.get(py)?;
        py.detach(|| sh.read(|c| self.hooks.around(c, || exec::is_readonly(c, &sql))))
            .py_err(py)
    }

    /// Streams the rows of a read-only statement from a reader, `batch` rows
    /// at a time (the reader stays leased until the iterator is exhausted or
    /// dropped).
    #[pyo3(signature = (sql, params = None, dicts = false, batch = 512))]
    fn iterate(
        &self,
        py: Python<'_>,
        sql: String,
        params: Option<&Bound<'_, PyAny>>,
        dicts: bool,
        batch: usize,
    ) -> PyResult<RowIter> {
        let p = to_params(params)?;
        let sh = self.get(py)?;
        RowIter::start(sh, Arc::clone(&self.hooks), sql, p, dicts, batch.max(1))
    }

    /// Sets how long, in seconds, this handle's writes outside a
    /// transaction wait for another process's write turn before they fail
    /// with `OperationalError("database is locked: ...")`; `None` (the
    /// default): the engine's `busy_timeout` option (5 s by default). The
    /// DB-API connection passes its `timeout` here. Transactions take
    /// theirs from `begin(timeout)`.
    #[pyo3(name = "_set_timeout", signature = (seconds = None))]
    fn set_timeout(&self, seconds: Option<f64>) {
        *lock(&self.wait_timeout) =
            seconds.map(|s| Duration::try_from_secs_f64(s.max(0.0)).unwrap_or(Duration::MAX));
    }

    /// Starts a write transaction held across calls (see `Txn`). `timeout`
    /// bounds, in seconds, the wait for the writer's turn.
    ///
    /// `guard` (default true) refuses a second transaction from a thread that
    /// already holds one (it would wait for itself); asyncio passes false, as
    /// all its coroutines share one thread and none of them blocks it.
    #[pyo3(signature = (timeout = 5.0, guard = true))]
    fn begin(&self, py: Python<'_>, timeout: f64, guard: bool) -> PyResult<Txn> {
        let sh = self.get(py)?;
        if guard {
            sh.check_no_open_txn().py_err(py)?;
        }
        let timeout = Duration::try_from_secs_f64(timeout.max(0.0)).unwrap_or(Duration::MAX);
        Txn::start(py, sh, timeout, guard, Arc::clone(&self.hooks))
    }

    /// Inserts rows (tuples or dicts) into `table` through the engine's bulk
    /// inserter, converting `batch` rows at a time with the GIL held and
    /// inserting with it released. One transaction unless `commit_every`.
    #[pyo3(signature = (table, rows, columns = None, batch = 2048, commit_every = None))]
    fn insert_many<'py>(
        &self,
        py: Python<'py>,
        table: String,
        rows: &Bound<'py, PyAny>,
        columns: Option<Vec<String>>,
        batch: usize,
        commit_every: Option<u64>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let sh = self.get(py)?;
        crate::bulk::insert_many(py, sh, table, rows, columns, batch.max(1), commit_every)
    }

    /// Imports the file `path` into `table` with the `litelane-import`
    /// library, in this process, the GIL released; `options` are its
    /// options by name (see `import::import_file`), `progress` and
    /// `on_reject` optional callables. Returns the summary as a dict.
    #[pyo3(signature = (path, table, options = None, progress = None, on_reject = None))]
    fn import_file<'py>(
        &self,
        py: Python<'py>,
        path: String,
        table: String,
        options: Option<Bound<'py, PyDict>>,
        progress: Option<Py<PyAny>>,
        on_reject: Option<Py<PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let sh = self.get(py)?;
        crate::import::import_file(py, sh, path, table, options, progress, on_reject)
    }

    /// A snapshot of the engine's metrics; durations in seconds.
    fn metrics<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let m = self.get(py)?.db.metrics();
        let d = PyDict::new(py);
        d.set_item("queue_wait_p50", m.queue_wait_p50.as_secs_f64())?;
        d.set_item("queue_wait_p95", m.queue_wait_p95.as_secs_f64())?;
        d.set_item("queue_wait_p99", m.queue_wait_p99.as_secs_f64())?;
        d.set_item("queue_wait_max", m.queue_wait_max.as_secs_f64())?;
        d.set_item("queue_depth", m.queue_depth)?;
        d.set_item("transactions", m.transactions)?;
        d.set_item("rollbacks", m.rollbacks)?;
        d.set_item("outcomes_unknown", m.outcomes_unknown)?;
        d.set_item("rows_written", m.rows_written)?;
        d.set_item("commits", m.commits)?;
        d.set_item("mean_group_size", m.mean_group_size())?;
        d.set_item("group_sizes", m.group_sizes.to_vec())?;
        d.set_item("busy_errors", m.busy_errors)?;
        d.set_item("checkpoints", m.checkpoints)?;
        d.set_item("checkpoints_escalated", m.checkpoints_escalated)?;
        d.set_item("checkpoint_pages", m.checkpoint_pages)?;
        d.set_item("checkpoint_time", m.checkpoint_time.as_secs_f64())?;
        d.set_item("wal_pages", m.wal_pages)?;
        d.set_item(
            "wal_over_limit",
            over_limit_dict(py, m.wal_over_limit.as_ref())?,
        )?;
        d.set_item("wal_over_limit_count", m.wal_over_limit_count)?;
        d.set_item("wal_over_limit_time", m.wal_over_limit_time.as_secs_f64())?;
        d.set_item(
            "wal_pinned_by",
            pinned_read_dict(py, m.wal_pinned_by.as_ref())?,
        )?;
        d.set_item("checkpoint_holds", m.checkpoint_holds)?;
        d.set_item("checkpoint_hold_max", m.checkpoint_hold_max.as_secs_f64())?;
        d.set_item("checkpoint_hold_time", m.checkpoint_hold_time.as_secs_f64())?;
        d.set_item("wal_file_bytes", m.wal_file_bytes)?;
        d.set_item("wal_syncs", m.wal_syncs)?;
        d.set_item("syncs_shared", m.syncs_shared)?;
        d.set_item("combined_elsewhere", m.combined_elsewhere)?;
        d.set_item("combined_here", m.combined_here)?;
        d.set_item("process_turns", m.process_turns)?;
        d.set_item("turns_out_of_order", m.turns_out_of_order)?;
        d.set_item("process_queue_off", m.process_queue_off.as_deref())?;
        d.set_item("combined_commits_off", m.combined_commits_off.as_deref())?;
        let slow = PyList::empty(py);
        for s in &m.slow_statements {
            let e = PyDict::new(py);
            e.set_item("sql", &s.sql)?;
            e.set_item("duration", s.duration.as_secs_f64())?;
            slow.append(e)?;
        }
        d.set_item("slow_statements", slow)?;
        let long = PyList::empty(py);
        for w in &m.long_waits {
            let e = PyDict::new(py);
            e.set_item("waited", w.waited.as_secs_f64())?;
            e.set_item("waiter_label", &w.waiter_label)?;
            e.set_item("holder_label", &w.holder_label)?;
            e.set_item("holder_sql", &w.holder_sql)?;
            long.append(e)?;
        }
        d.set_item("long_waits", long)?;
        Ok(d)
    }

    /// Runs one checkpoint now (`passive`, `full`, `restart`, `truncate`).
    #[pyo3(signature = (mode = "passive"))]
    fn checkpoint<'py>(&self, py: Python<'py>, mode: &str) -> PyResult<Bound<'py, PyDict>> {
        let mode: CheckpointMode = mode.parse().py_err(py)?;
        let sh = self.get(py)?;
        let r = py
            .detach(|| {
                sh.check_no_open_txn()?;
                sh.db.checkpoint(mode)
            })
            .py_err(py)?;
        let d = PyDict::new(py);
        d.set_item("mode", r.mode.name())?;
        d.set_item("wal_frames", r.wal_frames)?;
        d.set_item("checkpointed_frames", r.checkpointed_frames)?;
        d.set_item("busy", r.busy)?;
        d.set_item("elapsed", r.elapsed.as_secs_f64())?;
        Ok(d)
    }

    /// `sqlite3`'s `getlimit`: the limit `category` (`SQLITE_LIMIT_*`) in
    /// force (read on a reader; every connection of the engine has the same).
    fn getlimit(&self, py: Python<'_>, category: i32) -> PyResult<i32> {
        let limit = limit_of(py, category)?;
        let sh = self.get(py)?;
        py.detach(|| sh.db.read(|c| Ok(c.limit(limit)?))).py_err(py)
    }

    /// `DataError` when `sql` is longer than `SQLITE_LIMIT_SQL_LENGTH`
    /// bytes (`UnicodeEncodeError` for a lone surrogate), as `sqlite3`
    /// checks every statement.
    fn check_sql_length(&self, py: Python<'_>, sql: &Bound<'_, PyString>) -> PyResult<()> {
        self.get(py)?.check_sql_length(py, &sql.to_cow()?)
    }

    /// `sqlite3`'s `setlimit`: sets the limit `category` to `value` on every
    /// connection of the engine, now and later (a negative `value` changes
    /// nothing), and returns the limit before.
    fn setlimit(&self, py: Python<'_>, category: i32, value: i32) -> PyResult<i32> {
        let limit = limit_of(py, category)?;
        let before = self.getlimit(py, category)?;
        if value >= 0 {
            let sh = self.get(py)?;
            let setup: litelane::Setup = Arc::new(move |c: &mut litelane::rusqlite::Connection| {
                c.set_limit(limit, value).map(|_| ())
            });
            py.detach(|| sh.db.configure(&format!("limit {category}"), setup))
                .py_err(py)?;
            if category == 1 {
                // SQLite caps the value at its compiled maximum: keep what it took.
                let now = self.getlimit(py, category)?;
                sh.sql_length_limit.store(i64::from(now), Ordering::Relaxed);
            }
        }
        Ok(before)
    }

    /// Runs one statement on the writer outside any transaction (`VACUUM`):
    /// returns the tuple of `execute`.
    #[pyo3(signature = (sql, params = None, describe = false))]
    fn execute_outside_transaction<'py>(
        &self,
        py: Python<'py>,
        sql: String,
        params: Option<&Bound<'py, PyAny>>,
        describe: bool,
    ) -> PyResult<Bound<'py, PyTuple>> {
        self.write_one(py, sql, params, true, describe)
    }

    /// Copies the database, consistent as of one moment, to a new file at
    /// `dest` (see `litelane::Database::backup`); returns the pages copied.
    fn backup(&self, py: Python<'_>, dest: PathBuf) -> PyResult<u64> {
        let sh = self.get(py)?;
        let r = py.detach(|| sh.db.backup(&dest, |_| {})).py_err(py)?;
        Ok(r.pages)
    }

    /// Replaces the database's content with the database file `src`,
    /// `pages` pages per step (all at once when `pages` <= 0), calling
    /// `progress(status, remaining, total)` after each step as `sqlite3`'s
    /// `backup` does. An exception from `progress` is raised once the copy
    /// is done.
    #[pyo3(signature = (src, pages = -1, progress = None))]
    fn restore(
        &self,
        py: Python<'_>,
        src: PathBuf,
        pages: i64,
        progress: Option<Py<PyAny>>,
    ) -> PyResult<u64> {
        let sh = self.get(py)?;
        let per_step = if pages <= 0 {
            u32::MAX
        } else {
            u32::try_from(pages).unwrap_or(u32::MAX)
        };
        let mut raised: Option<PyErr> = None;
        let mut report = |p: litelane::BackupProgress| {
            let Some(cb) = progress.as_ref() else { return };
            if raised.is_some() {
                return;
            }
            let remaining = p.pages_total - p.pages_done;
            let status = if remaining == 0 { 101 } else { 0 }; // SQLITE_DONE, SQLITE_OK
            Python::attach(|py| {
                if let Err(e) = cb.call1(py, (status, remaining, p.pages_total)) {
                    raised = Some(e);
                }
            });
        };
        let copied = py
            .detach(|| {
                sh.check_no_open_txn()?;
                sh.db.restore_from(&src, per_step, &mut report)
            })
            .py_err(py)?;
        match raised {
            Some(e) => Err(e),
            None => Ok(copied),
        }
    }

    /// A new handle on an engine of its own for this file (same options,
    /// one reader), for a DB-API connection that sets state of its own
    /// (docs/python.md, "Connection state"); this handle is left as it is.
    fn part(&self, py: Python<'_>) -> PyResult<Engine> {
        let sh = self.get(py)?;
        let private = py.detach(|| open_private(&sh)).py_err(py)?;
        Ok(Engine {
            shared: Mutex::new(Some(private)),
            hooks: Arc::default(),
            wait_timeout: Mutex::new(*lock(&self.wait_timeout)),
        })
    }

    /// The rows the last failing `executemany` of this handle (or of a
    /// transaction it began) changed with the sets before the one that
    /// failed; reads it back to 0.
    fn take_partial_changes(&self) -> i64 {
        self.hooks.partial().swap(0, Ordering::Relaxed)
    }

    /// Adds `n` rows to the count [`take_partial_changes`](Engine::take_partial_changes)
    /// returns (sets committed one at a time before the failing one).
    fn _add_partial_changes(&self, n: i64) {
        self.hooks.partial().fetch_add(n, Ordering::Relaxed);
    }

    /// True for an engine of one connection alone (see `part`).
    #[getter]
    fn private(&self, py: Python<'_>) -> PyResult<bool> {
        Ok(self.get(py)?.private)
    }

    /// Lets go of this handle (the engine closes when its last handle goes).
    fn close(&self, py: Python<'_>) {
        let taken = lock(&self.shared).take();
        if let Some(sh) = taken.as_ref().filter(|sh| !sh.stale()) {
            crate::functions::forget(&sh.db, &sh.funcs, &self.hooks);
        }
        // Dropping the last handle joins the engine's threads: not with the GIL.
        py.detach(move || release_shared(taken));
    }

    /// True once `close()` was called.
    #[getter]
    fn closed(&self) -> bool {
        lock(&self.shared).is_none()
    }

    /// The path the database was opened with.
    #[getter]
    fn path(&self, py: Python<'_>) -> PyResult<String> {
        Ok(self.get(py)?.display.clone())
    }

    /// The durability profile's name.
    #[getter]
    fn profile(&self, py: Python<'_>) -> PyResult<&'static str> {
        Ok(self.get(py)?.db.options().profile.name())
    }

    /// Number of reader connections.
    #[getter]
    fn readers(&self, py: Python<'_>) -> PyResult<usize> {
        Ok(self.get(py)?.db.options().readers)
    }

    /// Installs the SQL function `name` of `narg` arguments (-1: any) on
    /// every SQLite connection of the engine (`func` None removes it).
    #[pyo3(signature = (name, narg, func, deterministic = false))]
    fn create_function(
        &self,
        py: Python<'_>,
        name: String,
        narg: i32,
        func: Option<Py<PyAny>>,
        deterministic: bool,
    ) -> PyResult<()> {
        let sh = self.get(py)?;
        crate::functions::create_function(py, &sh.db, &sh.funcs, name, narg, func, deterministic)
    }

    /// Installs the aggregate (`window` false) or window function `name`
    /// implemented by `aggregate_class` (None removes it).
    #[pyo3(signature = (name, narg, aggregate_class, window = false))]
    fn create_aggregate(
        &self,
        py: Python<'_>,
        name: String,
        narg: i32,
        aggregate_class: Option<Py<PyAny>>,
        window: bool,
    ) -> PyResult<()> {
        let sh = self.get(py)?;
        crate::functions::create_aggregate(
            py,
            &sh.db,
            &sh.funcs,
            name,
            narg,
            aggregate_class,
            window,
        )
    }

    /// Installs the collation `name` (`func(a, b)` returns <0, 0 or >0;
    /// None removes it).
    fn create_collation(
        &self,
        py: Python<'_>,
        name: String,
        func: Option<Py<PyAny>>,
    ) -> PyResult<()> {
        let sh = self.get(py)?;
        crate::functions::create_collation(py, &sh.db, &sh.funcs, name, func)
    }

    /// Sets (None: clears) this handle's authorizer.
    fn set_authorizer(&self, py: Python<'_>, callback: Option<Py<PyAny>>) -> PyResult<()> {
        let sh = self.get(py)?;
        crate::functions::set_authorizer(py, &sh.db, &sh.funcs, &self.hooks, callback)
    }

    /// Sets (None, or `n` < 1: clears) this handle's progress handler,
    /// called every `n` SQLite virtual machine instructions.
    fn set_progress_handler(
        &self,
        py: Python<'_>,
        handler: Option<Py<PyAny>>,
        n: i32,
    ) -> PyResult<()> {
        let sh = self.get(py)?;
        crate::functions::set_progress_handler(py, &sh.db, &sh.funcs, &self.hooks, handler, n)
    }

    /// Sets (None: clears) this handle's trace callback.
    fn set_trace_callback(&self, py: Python<'_>, callback: Option<Py<PyAny>>) -> PyResult<()> {
        self.get(py)?;
        crate::functions::set_trace(&self.hooks, callback);
        Ok(())
    }

    /// True when `other` is a handle on the same engine.
    fn same_engine(&self, py: Python<'_>, other: &Engine) -> PyResult<bool> {
        Ok(Arc::ptr_eq(&self.get(py)?, &other.get(py)?))
    }
}

/// Converts an iterable of parameter sets.
pub fn params_seq(seq: &Bound<'_, PyAny>) -> PyResult<Vec<Params>> {
    let mut sets = Vec::new();
    for item in seq.try_iter()? {
        sets.push(to_params(Some(&item?))?);
    }
    Ok(sets)
}

enum Msg {
    Columns(Vec<String>),
    Rows(Vec<Vec<Value>>),
    Failed(Error),
}

/// Rows of one read-only statement, streamed from a reader thread.
#[pyclass(module = "litelane._litelane")]
pub struct RowIter {
    rx: Mutex<Option<Receiver<Msg>>>,
    buf: VecDeque<Vec<Value>>,
    names: Option<Vec<Py<PyString>>>,
    dicts: bool,
}

impl RowIter {
    fn start(
        sh: Arc<Shared>,
        hooks: Arc<Hooks>,
        sql: String,
        params: Params,
        dicts: bool,
        batch: usize,
    ) -> PyResult<RowIter> {
        let (tx, rx) = mpsc::sync_channel::<Msg>(2);
        let spawned = std::thread::Builder::new()
            .name("litelane-iter".into())
            .spawn(move || stream(sh, hooks, sql, params, batch, tx));
        if let Err(e) = spawned {
            return Python::attach(|py| {
                Err(exc(
                    py,
                    "OperationalError",
                    format!("starting a reader thread: {e}"),
                ))
            });
        }
        Ok(RowIter {
            rx: Mutex::new(Some(rx)),
            buf: VecDeque::new(),
            names: None,
            dicts,
        })
    }
}

/// The limit of an `SQLITE_LIMIT_*` number, as `sqlite3` checks it.
fn limit_of(py: Python<'_>, category: i32) -> PyResult<litelane::rusqlite::limits::Limit> {
    use litelane::rusqlite::limits::Limit::*;
    Ok(match category {
        0 => SQLITE_LIMIT_LENGTH,
        1 => SQLITE_LIMIT_SQL_LENGTH,
        2 => SQLITE_LIMIT_COLUMN,
        3 => SQLITE_LIMIT_EXPR_DEPTH,
        4 => SQLITE_LIMIT_COMPOUND_SELECT,
        5 => SQLITE_LIMIT_VDBE_OP,
        6 => SQLITE_LIMIT_FUNCTION_ARG,
        7 => SQLITE_LIMIT_ATTACHED,
        8 => SQLITE_LIMIT_LIKE_PATTERN_LENGTH,
        9 => SQLITE_LIMIT_VARIABLE_NUMBER,
        10 => SQLITE_LIMIT_TRIGGER_DEPTH,
        11 => SQLITE_LIMIT_WORKER_THREADS,
        _ => return Err(exc(py, "ProgrammingError", "'category' is out of bounds")),
    })
}

fn names_of(stmt: &litelane::rusqlite::Statement<'_>) -> Vec<String> {
    stmt.column_names().map(str::to_owned).collect()
}

fn stream(
    sh: Arc<Shared>,
    hooks: Arc<Hooks>,
    sql: String,
    params: Params,
    batch: usize,
    tx: SyncSender<Msg>,
) {
    let res = sh.db.read(|conn| {
        hooks.around(conn, || {
            let mut stmt = conn.prepare(&sql).map_err(|e| Error::from_sqlite(e, ""))?;
            if !stmt.readonly() {
                return Err(Error::InvalidInput {
                    message: "iterate() streams read-only statements; run writes with execute()"
                        .into(),
                });
            }
            exec::bind_params(&mut stmt, &params)?;
            crate::functions::trace(&stmt, &sql);
            let mut rows = stmt.raw_query();
            let mut chunk = Vec::with_capacity(batch);
            // The names are sent after the first step, when a statement whose
            // schema changed since it was prepared has been re-prepared.
            let mut named = false;
            while let Some(r) = rows.next()? {
                if !named {
                    named = true;
                    if tx.send(Msg::Columns(names_of(r.as_ref()))).is_err() {
                        return Ok(());
                    }
                }
                let n = r.as_ref().column_count();
                let mut row = Vec::with_capacity(n);
                for i in 0..n {
                    row.push(exec::value_at(r, i)?);
                }
                chunk.push(row);
                if chunk.len() == batch && tx.send(Msg::Rows(std::mem::take(&mut chunk))).is_err() {
                    return Ok(()); // the iterator was dropped
                }
            }
            drop(rows);
            if !named && tx.send(Msg::Columns(names_of(&stmt))).is_err() {
                return Ok(());
            }
            if !chunk.is_empty() {
                let _ = tx.send(Msg::Rows(chunk));
            }
            Ok(())
        })
    });
    if let Err(e) = res {
        let _ = tx.send(Msg::Failed(e));
    }
}

#[pymethods]
impl RowIter {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__<'py>(&mut self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        loop {
            if let Some(row) = self.buf.pop_front() {
                return Ok(Some(if self.dicts {
                    let names: Vec<Bound<'py, PyString>> = self
                        .names
                        .iter()
                        .flatten()
                        .map(|n| n.bind(py).clone())
                        .collect();
                    row_dict(py, &names, &row)?.into_any()
                } else {
                    row_tuple(py, &row)?.into_any()
                }));
            }
            let Some(rx) = lock(&self.rx).take() else {
                return Ok(None);
            };
            let (rx, msg) = py.detach(move || {
                let msg = rx.recv();
                (rx, msg)
            });
            *lock(&self.rx) = Some(rx);
            match msg {
                Ok(Msg::Columns(c)) => {
                    self.names = Some(c.iter().map(|s| PyString::new(py, s).unbind()).collect());
                }
                Ok(Msg::Rows(rows)) => self.buf.extend(rows),
                Ok(Msg::Failed(e)) => {
                    lock(&self.rx).take();
                    return Err(crate::errors::engine(py, e));
                }
                Err(_) => {
                    lock(&self.rx).take();
                    return Ok(None);
                }
            }
        }
    }

    /// Result column names (available once the first row, or the end, was read).
    #[getter]
    fn columns(&self, py: Python<'_>) -> Option<Vec<Py<PyString>>> {
        self.names
            .as_ref()
            .map(|v| v.iter().map(|n| n.clone_ref(py)).collect())
    }

    /// Stops the stream and frees the reader.
    fn close(&mut self) {
        lock(&self.rx).take();
        self.buf.clear();
    }
}
