//! Opening a connection and configuring it the same way every time.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use rusqlite::config::DbConfig;
use rusqlite::trace::{TraceEvent, TraceEventCodes};
use rusqlite::{Connection, OpenFlags};

use crate::configure::Registry;
use crate::durability_plan::{
    DurabilityPlan, JournalMode, OtherSettings, RestoreOnClose, Synchronous, TargetKind,
    WriterSettings,
};
use crate::error::{Context, Error, Result};
use crate::ffi;
use crate::metrics::Recorder;
use crate::options::Options;
use crate::pool::ReaderTrace;
use crate::unpoisoned::lock;

/// Which job a connection does; decides the few settings that differ.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Role {
    Writer,
    Reader,
    Checkpointer,
}

/// Where the database lives.
#[derive(Debug, Clone)]
pub(crate) struct Target {
    /// What is passed to `sqlite3_open_v2`.
    pub open_name: String,
    /// The file path (None for in-memory).
    pub path: Option<PathBuf>,
    /// Opened read-only (a `file:` URI with `mode=ro` or `immutable=1`): the
    /// writer does not change the journal mode and there are no checkpoints;
    /// a write fails with SQLite's own "attempt to write a readonly database".
    pub read_only: bool,
    /// A shared in-memory database by URI (`cache=shared`): the name in the
    /// URI and the URI. [`Database::open`](crate::Database::open) keeps it
    /// in a file (`shared_memory.rs`) and points `open_name` and `path` at
    /// it with [`Target::in_file`].
    pub shared_memory: Option<(String, String)>,
}

/// The process-wide counter behind the names of private in-memory databases.
fn next_memory_name() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    format!("{}-{n}", std::process::id())
}

/// The VFS of in-memory databases: `litelane-memdb` (`ffi::memory_vfs`:
/// files they attach are files), or SQLite's `memdb` itself without it.
fn memory_vfs() -> &'static str {
    ffi::memory_vfs().unwrap_or("memdb")
}

/// The query parameters of a `file:` URI (`file:x.db?mode=ro&cache=shared`),
/// as `(key, value)` pairs, and its file name.
fn uri_parts(uri: &str) -> (&str, Vec<(&str, &str)>) {
    let rest = uri.strip_prefix("file:").unwrap_or(uri);
    let (name, query) = rest.split_once('?').unwrap_or((rest, ""));
    let name = name.split('#').next().unwrap_or(name);
    let params = query
        .split('#')
        .next()
        .unwrap_or("")
        .split('&')
        .filter(|kv| !kv.is_empty())
        .map(|kv| kv.split_once('=').unwrap_or((kv, "")))
        .collect();
    (name, params)
}

/// The file a `file:` URI names, as SQLite reads it
/// (<https://www.sqlite.org/uri.html>): after `file:`, an optional
/// authority (`//` and then nothing or `localhost`), then the path up to
/// `?` or `#`, with each `%HH` decoded and a `%00` ending it. `None` when
/// the URI names no file here: an empty path (SQLite's private temporary
/// database) or another host (which SQLite refuses itself).
fn uri_file(uri: &str) -> Option<PathBuf> {
    use std::os::unix::ffi::OsStringExt;
    let rest = uri.strip_prefix("file:")?;
    let rest = match rest.strip_prefix("//") {
        Some(after) => {
            let end = after.find('/').unwrap_or(after.len());
            if !matches!(&after[..end], "" | "localhost") {
                return None;
            }
            &after[end..]
        }
        None => rest,
    };
    let raw = rest.split(['?', '#']).next().unwrap_or("").as_bytes();
    let hex = |b: u8| (b as char).to_digit(16);
    let mut path = Vec::with_capacity(raw.len());
    let mut i = 0;
    while i < raw.len() {
        let decoded = match (raw[i], raw.get(i + 1), raw.get(i + 2)) {
            (b'%', Some(&h), Some(&l)) => hex(h).zip(hex(l)).map(|(h, l)| (h * 16 + l) as u8),
            _ => None,
        };
        match decoded {
            Some(0) => break,
            Some(byte) => {
                path.push(byte);
                i += 3;
            }
            None => {
                path.push(raw[i]);
                i += 1;
            }
        }
    }
    (!path.is_empty()).then(|| PathBuf::from(std::ffi::OsString::from_vec(path)))
}

impl Target {
    pub fn new(path: &Path) -> Target {
        let s = path.to_string_lossy();
        if s == ":memory:" || s.is_empty() {
            // The memdb VFS shares a database between connections of one
            // process when its name starts with '/'; each open gets a new name.
            return Target {
                open_name: format!(
                    "file:/litelane-mem-{}?vfs={}",
                    next_memory_name(),
                    memory_vfs()
                ),
                path: None,
                read_only: false,
                shared_memory: None,
            };
        }
        if s.starts_with("file:") {
            let (name, params) = uri_parts(&s);
            let has = |k: &str, v: &str| params.iter().any(|(pk, pv)| *pk == k && *pv == v);
            if name == ":memory:" || has("mode", "memory") {
                // An in-memory database by URI. Every connection of the
                // engine (writer, readers) must reach the same one. With
                // `cache=shared` every engine of the process that opens the
                // same name shares it, as in SQLite, in a file in WAL mode
                // (`shared_memory.rs`), so that reads run beside an open
                // write transaction; a private one is in the memdb VFS.
                if has("cache", "shared") {
                    return Target {
                        open_name: String::new(),
                        path: None,
                        read_only: false,
                        shared_memory: Some((hex_name(name), s.to_string())),
                    };
                }
                return Target {
                    open_name: format!(
                        "file:/litelane-uri-{}?vfs={}",
                        next_memory_name(),
                        memory_vfs()
                    ),
                    path: None,
                    read_only: has("mode", "ro"),
                    shared_memory: None,
                };
            }
            // A file by URI: SQLite opens the URI; the engine's own files
            // beside it (`-wal`, `-lane`) are named after the file it names.
            let file = uri_file(&s);
            if file.is_none() {
                // No file of its own (an empty path: SQLite's temporary
                // database): private to the connection, as `:memory:`.
                return Target::new(Path::new(":memory:"));
            }
            return Target {
                open_name: s.to_string(),
                path: file,
                read_only: has("mode", "ro") || has("immutable", "1"),
                shared_memory: None,
            };
        }
        Target {
            open_name: s.into_owned(),
            path: Some(path.to_path_buf()),
            read_only: false,
            shared_memory: None,
        }
    }

    /// A shared in-memory database's target once its file is known.
    pub fn in_file(mut self, file: &Path) -> Target {
        self.open_name = file.to_string_lossy().into_owned();
        self.path = Some(file.to_path_buf());
        self
    }

    pub fn is_memory(&self) -> bool {
        self.path.is_none()
    }

    /// What a durability plan needs to know of this target.
    pub fn kind(&self) -> TargetKind {
        TargetKind {
            read_only: self.read_only,
            in_memory: self.is_memory(),
        }
    }

    pub fn display(&self) -> String {
        if let Some((_, uri)) = &self.shared_memory {
            return uri.clone();
        }
        match &self.path {
            Some(p) => p.display().to_string(),
            None => ":memory:".to_string(),
        }
    }

    /// The `-wal` file next to the database.
    pub fn wal_path(&self) -> Option<PathBuf> {
        self.path.as_ref().map(|p| {
            let mut s = p.as_os_str().to_owned();
            s.push("-wal");
            PathBuf::from(s)
        })
    }
}

/// A memdb name made of any URI file name: its bytes in hex.
fn hex_name(name: &str) -> String {
    name.bytes().map(|b| format!("{b:02x}")).collect()
}

/// Shared by the trace callbacks of a database's connections: slow statements
/// go to the metrics; the writer's last statement names the holder of a long
/// wait.
pub(crate) struct Tracer {
    pub recorder: Arc<Recorder>,
    pub slow_nanos: u64,
    /// The writer's recent statement, shown as the holder's SQL in a long
    /// wait. Copying every statement's text costs a few percent of a bulk
    /// insert, so only these are copied: the first statement of each job
    /// (`writer_capture`, set when a job starts) and then one statement per
    /// [`WRITER_SQL_EVERY_NANOS`] of statement time.
    pub writer_last_sql: Mutex<String>,
    pub writer_capture: AtomicBool,
    pub writer_nanos_since_capture: AtomicU64,
}

/// Statement time (1 ms, in nanoseconds) between two copies of the writer's
/// SQL text after the first statement of a job.
pub(crate) const WRITER_SQL_EVERY_NANOS: u64 = 1_000_000;

/// Opens and configures one connection, with the settings `plan` gives
/// its role (journal mode, `synchronous`). A reader passes the trace slot in
/// which the first statement of each read is kept. With `config`, the
/// database's recorded setups ([`Registry`]) run first thing, before any
/// statement reads the schema (which may use the functions they install),
/// and the generation applied is stored in its `u64`.
pub(crate) fn open(
    target: &Target,
    role: Role,
    opts: &Options,
    plan: &DurabilityPlan,
    tracer: &Arc<Tracer>,
    reader_trace: Option<&Arc<ReaderTrace>>,
    config: Option<(&Registry, &mut u64)>,
) -> Result<Connection> {
    open_role(target, role, opts, plan, tracer, reader_trace, config).map(|(conn, _)| conn)
}

/// Opens and configures the writer ([`open`] with [`Role::Writer`]), and
/// returns with it the journal mode the file had before the writer set the
/// plan's, when the plan says it is to be restored on close
/// ([`RestoreOnClose::FileJournalMode`]; `None` otherwise).
pub(crate) fn open_writer(
    target: &Target,
    opts: &Options,
    plan: &DurabilityPlan,
    tracer: &Arc<Tracer>,
    config: Option<(&Registry, &mut u64)>,
) -> Result<(Connection, Option<String>)> {
    open_role(target, Role::Writer, opts, plan, tracer, None, config)
}

/// [`open`], with what [`open_writer`] returns beside the connection.
fn open_role(
    target: &Target,
    role: Role,
    opts: &Options,
    plan: &DurabilityPlan,
    tracer: &Arc<Tracer>,
    reader_trace: Option<&Arc<ReaderTrace>>,
    config: Option<(&Registry, &mut u64)>,
) -> Result<(Connection, Option<String>)> {
    ffi::disable_memstatus();
    ffi::capture_os_errors();
    let name = target.display();
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
        | OpenFlags::SQLITE_OPEN_CREATE
        | OpenFlags::SQLITE_OPEN_URI
        | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let opened = match vfs_for(role, plan, opts, target) {
        Some(vfs) => Connection::open_with_flags_and_vfs(&target.open_name, flags, vfs),
        None => Connection::open_with_flags(&target.open_name, flags),
    };
    let mut conn = opened.context(|| format!("opening {name}"))?;
    let ctx = |what: &str| format!("configuring {name}: {what}");

    conn.busy_timeout(opts.busy_timeout)
        .context(|| ctx("busy_timeout"))?;
    // litelane's settings, or SQLite's stock ones (`Options::stock_settings`).
    let stock = opts.stock_settings;
    for (cfg, on) in [
        (DbConfig::SQLITE_DBCONFIG_DEFENSIVE, !stock),
        (DbConfig::SQLITE_DBCONFIG_TRUSTED_SCHEMA, stock),
        (DbConfig::SQLITE_DBCONFIG_DQS_DML, stock),
        (DbConfig::SQLITE_DBCONFIG_DQS_DDL, stock),
        (DbConfig::SQLITE_DBCONFIG_ENABLE_FKEY, !stock),
    ] {
        conn.set_db_config(cfg, on)
            .context(|| ctx(&format!("{cfg:?}")))?;
    }
    conn.set_prepared_statement_cache_capacity(opts.statement_cache);
    if let Some((registry, seen)) = config {
        registry.sync(&mut conn, seen, &|e| tracer.recorder.note_error(&e));
    }

    // The first statement that reads the file: a file that is not a database
    // fails here with SQLITE_NOTADB.
    let mut pragmas = format!(
        "PRAGMA cache_size = -{}; PRAGMA temp_store = MEMORY; PRAGMA foreign_keys = {}; \
         PRAGMA trusted_schema = {};",
        opts.cache_size_kib,
        if stock { "OFF" } else { "ON" },
        if stock { "ON" } else { "OFF" },
    );
    // Only readers map the database. A connection that maps it looks each
    // page up in the WAL index before its own page cache (SQLite's
    // `getPageMMap`) and never caches a mapped page; the writer's cache
    // survives its own commits, so the map would only add those lookups
    // (docs/performance.md, "The memory map").
    if !target.is_memory() && role == Role::Reader {
        pragmas.push_str(&format!(" PRAGMA mmap_size = {};", opts.mmap_size));
    }
    conn.execute_batch(&pragmas)
        .context(|| ctx("cache_size, temp_store, foreign_keys, mmap_size"))?;

    let mut found = None;
    match (role, plan.writer) {
        // Read-only by request: leave the file as it is.
        (Role::Writer, None) => {}
        (Role::Writer, Some(settings)) => {
            found = configure_writer(&conn, settings, plan.restore_on_close, opts, &name)?
        }
        (Role::Reader, _) => configure_other(&conn, role, plan.reader, target, opts, &name)?,
        (Role::Checkpointer, _) => {
            configure_other(&conn, role, plan.checkpointer, target, opts, &name)?
        }
    }

    install_tracer(&mut conn, role, tracer, reader_trace.cloned())?;
    Ok((conn, found))
}

/// The VFS a connection of `role` opens its file with: the one asked for
/// (`Options::vfs`); otherwise, for the checkpointer of a file whose
/// checkpoints sync, the paced VFS (`ffi/paced_vfs.rs`: the database file
/// synced every MiB a checkpoint copies, so that the commits' syncs beside
/// it never wait for a whole checkpoint's writes); for the writer, the
/// gathering VFS (the same file: the WAL's appends of a transaction written
/// with one system call); otherwise the default (`None`). In-memory databases open as `connection.rs` names them.
fn vfs_for<'o>(
    role: Role,
    plan: &DurabilityPlan,
    opts: &'o Options,
    target: &Target,
) -> Option<&'o str> {
    if target.is_memory() {
        return None;
    }
    let syncs = plan.checkpointer.synchronous != Synchronous::Off;
    match opts.vfs.as_deref() {
        Some(vfs) if role == Role::Writer && opts.gather_over_vfs => {
            Some(ffi::gathering_vfs_over(vfs).unwrap_or(vfs))
        }
        Some(vfs) => Some(vfs),
        None if role == Role::Checkpointer && syncs => ffi::paced_vfs(),
        None if role == Role::Writer => ffi::gathering_vfs(),
        None => None,
    }
}

/// Pause between two tries of a journal mode switch another connection
/// was in the way of: 1 ms (such a switch takes about that long).
const JOURNAL_MODE_RETRY: std::time::Duration = std::time::Duration::from_millis(1);

/// `PRAGMA journal_mode = want` on `conn`: what SQLite answers. Switching
/// a file to WAL needs it alone for an instant, and SQLite answers "database
/// is locked" at once, without the busy handler, to a connection that finds
/// another one doing the same (two engines opening one new database at
/// once): the switch is tried again every [`JOURNAL_MODE_RETRY`] until
/// `patience` (the busy timeout) has passed.
fn set_journal_mode(
    conn: &Connection,
    want: &str,
    patience: std::time::Duration,
) -> rusqlite::Result<String> {
    let until = std::time::Instant::now() + patience;
    loop {
        match conn.query_row(&format!("PRAGMA journal_mode = {want}"), [], |r| r.get(0)) {
            Err(rusqlite::Error::SqliteFailure(e, _))
                if e.code == rusqlite::ErrorCode::DatabaseBusy
                    && std::time::Instant::now() < until =>
            {
                std::thread::sleep(JOURNAL_MODE_RETRY);
            }
            answer => return answer,
        }
    }
}

/// The writer's journal mode (the plan's, refused as [`Error::ReadOnly`]
/// when the file cannot be written), `synchronous`, the journal's size
/// limit and, in WAL mode, no automatic checkpoints when litelane runs them.
/// Returns the journal mode the file had before, when `restore` says it is
/// to be restored on close.
fn configure_writer(
    conn: &Connection,
    settings: WriterSettings,
    restore: RestoreOnClose,
    opts: &Options,
    name: &str,
) -> Result<Option<String>> {
    let ctx = |what: &str| format!("configuring {name}: {what}");
    if conn.is_readonly("main").unwrap_or(false) {
        return Err(Error::ReadOnly {
            path: name.to_string(),
        });
    }
    let before = match restore {
        RestoreOnClose::Nothing => None,
        RestoreOnClose::FileJournalMode => Some(
            conn.query_row("PRAGMA journal_mode", [], |r| r.get::<_, String>(0))
                .context(|| ctx("reading the journal mode to restore on close"))?,
        ),
    };
    let want = settings.journal_mode.as_sql();
    let got = set_journal_mode(conn, want, opts.busy_timeout).context(|| ctx("journal_mode"))?;
    if !got.eq_ignore_ascii_case(want) {
        return Err(Error::Sqlite {
            code: rusqlite::ffi::SQLITE_ERROR,
            os: None,
            extended_code: rusqlite::ffi::SQLITE_ERROR,
            message: format!("journal_mode is {got}, wanted {want}"),
            context: ctx("journal_mode"),
        });
    }
    conn.execute_batch(&format!(
        "PRAGMA synchronous = {}; PRAGMA journal_size_limit = {};",
        settings.synchronous.level(),
        opts.journal_size_limit
    ))
    .context(|| ctx("synchronous, journal_size_limit"))?;
    if settings.journal_mode == JournalMode::Wal {
        // Checkpoints run on their own thread, never inside a commit.
        let cp = &opts.checkpoints;
        let auto = if cp.background || cp.external {
            0
        } else {
            1000
        };
        conn.execute_batch(&format!("PRAGMA wal_autocheckpoint = {auto};"))
            .context(|| ctx("wal_autocheckpoint"))?;
        ffi::set_persistent_wal(conn, opts.persistent_wal)?;
    }
    Ok(before)
}

/// A reader's or the checkpointer's settings: the rollback journal mode
/// (per connection), `synchronous`, no automatic checkpoints, and
/// `query_only` for a reader.
fn configure_other(
    conn: &Connection,
    role: Role,
    settings: OtherSettings,
    target: &Target,
    opts: &Options,
    name: &str,
) -> Result<()> {
    let ctx = |what: &str| format!("configuring {name}: {what}");
    if let Some(journal) = settings.journal_mode {
        // Rollback journal modes are per connection (WAL is per file).
        conn.query_row(
            &format!("PRAGMA journal_mode = {}", journal.as_sql()),
            [],
            |_| Ok(()),
        )
        .context(|| ctx("journal_mode"))?;
    }
    conn.execute_batch(&format!(
        "PRAGMA synchronous = {}; PRAGMA wal_autocheckpoint = 0;",
        settings.synchronous.level()
    ))
    .context(|| ctx("synchronous"))?;
    if role == Role::Reader {
        conn.execute_batch("PRAGMA query_only = ON;")
            .context(|| ctx("query_only"))?;
    }
    if !target.is_memory() {
        ffi::set_persistent_wal(conn, opts.persistent_wal)?;
    }
    Ok(())
}

/// BEGIN, COMMIT, SAVEPOINT...: not what a transaction "was doing".
fn is_transaction_control(sql: &str) -> bool {
    let head = sql.trim_start().as_bytes();
    ["BEGIN", "COMMIT", "END", "ROLLBACK", "SAVEPOINT", "RELEASE"]
        .iter()
        .any(|kw| head.len() >= kw.len() && head[..kw.len()].eq_ignore_ascii_case(kw.as_bytes()))
}

fn install_tracer(
    conn: &mut Connection,
    role: Role,
    tracer: &Arc<Tracer>,
    reader: Option<Arc<ReaderTrace>>,
) -> Result<()> {
    let t = Arc::clone(tracer);
    let is_writer = role == Role::Writer;
    let mut events = TraceEventCodes::SQLITE_TRACE_PROFILE;
    if reader.is_some() {
        // Statement starts, to name the first statement of each read.
        events |= TraceEventCodes::SQLITE_TRACE_STMT;
    }
    conn.trace_v2(
        events,
        Some(move |ev: TraceEvent<'_>| match ev {
            TraceEvent::Profile(stmt, took) => {
                let nanos = took.as_nanos().min(u64::MAX as u128) as u64;
                let slow = nanos >= t.slow_nanos;
                let capture = is_writer
                    && (t.writer_capture.load(Ordering::Relaxed)
                        || t.writer_nanos_since_capture
                            .fetch_add(nanos, Ordering::Relaxed)
                            .saturating_add(nanos)
                            >= WRITER_SQL_EVERY_NANOS);
                if capture || slow {
                    let sql = stmt.sql();
                    if slow {
                        t.recorder.record_slow(&sql, took);
                    }
                    if capture && !is_transaction_control(&sql) {
                        t.writer_capture.store(false, Ordering::Relaxed);
                        t.writer_nanos_since_capture.store(0, Ordering::Relaxed);
                        let mut last = lock(&t.writer_last_sql);
                        last.clear();
                        last.push_str(&sql);
                    }
                }
            }
            TraceEvent::Stmt(_, sql) => {
                if let Some(r) = reader.as_ref() {
                    if r.capture.load(Ordering::Relaxed) && !is_transaction_control(sql) {
                        r.capture.store(false, Ordering::Relaxed);
                        let mut first = lock(&r.first_sql);
                        first.clear();
                        first.push_str(sql);
                    }
                }
            }
            _ => {}
        }),
    )
    .context(|| "installing the trace callback".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::options::Profile;

    /// Only the checkpointer of a file whose checkpoints sync is paced,
    /// the writer of a file gathers its WAL appends, and a VFS the caller
    /// names always wins (the writer gathers over it when asked to).
    #[test]
    fn the_checkpointer_of_a_synced_file_opens_in_the_paced_vfs() {
        let paced = ffi::paced_vfs().expect("registered");
        let gathering = ffi::gathering_vfs().expect("registered");
        let file = Target::new(Path::new("app.db"));
        let memory = Target::new(Path::new(":memory:"));
        let asked = Options {
            vfs: Some("unix-none".into()),
            ..Options::default()
        };
        let plain = Options::default();
        for profile in Profile::ALL {
            let plan = DurabilityPlan::new(profile, file.kind(), true);
            let syncs = plan.checkpointer.synchronous != Synchronous::Off;
            let want = syncs.then_some(paced);
            assert_eq!(
                vfs_for(Role::Checkpointer, &plan, &plain, &file),
                want,
                "{profile}"
            );
            assert_eq!(
                vfs_for(Role::Writer, &plan, &plain, &file),
                Some(gathering),
                "{profile}"
            );
            assert_eq!(
                vfs_for(Role::Reader, &plan, &plain, &file),
                None,
                "{profile}"
            );
            let gather_over = Options {
                gather_over_vfs: true,
                ..asked.clone()
            };
            assert_eq!(
                vfs_for(Role::Writer, &plan, &gather_over, &file),
                Some("litelane-gather+unix-none"),
                "{profile}"
            );
            for role in [Role::Reader, Role::Checkpointer] {
                assert_eq!(vfs_for(role, &plan, &gather_over, &file), Some("unix-none"));
            }
            // Gathering over a gathering VFS is that VFS.
            for own in ["litelane-gather", "litelane-gather+unix-none"] {
                let named = Options {
                    vfs: Some(own.into()),
                    ..gather_over.clone()
                };
                assert_eq!(vfs_for(Role::Writer, &plan, &named, &file), Some(own));
            }
            // A VFS nobody registered is left for SQLite to refuse by name.
            let unknown = Options {
                vfs: Some("no-such-vfs".into()),
                ..gather_over.clone()
            };
            assert_eq!(
                vfs_for(Role::Writer, &plan, &unknown, &file),
                Some("no-such-vfs")
            );
            for role in [Role::Writer, Role::Reader, Role::Checkpointer] {
                assert_eq!(vfs_for(role, &plan, &asked, &file), Some("unix-none"));
                let in_memory = DurabilityPlan::new(profile, memory.kind(), true);
                assert_eq!(vfs_for(role, &in_memory, &plain, &memory), None);
            }
        }
        let mut off = DurabilityPlan::new(Profile::Balanced, file.kind(), true);
        off.checkpointer.synchronous = Synchronous::Off;
        assert_eq!(vfs_for(Role::Checkpointer, &off, &plain, &file), None);
    }

    #[test]
    fn uri_targets() {
        // (name given, in memory, read-only)
        let cases = [
            ("app.db", false, false),
            ("file:app.db?mode=ro", false, true),
            ("file:app.db?immutable=1", false, true),
            ("file:app.db?mode=rwc", false, false),
            ("file::memory:", true, false),
            ("file:mem1?mode=memory", true, false),
            (":memory:", true, false),
        ];
        for (name, memory, read_only) in cases {
            let t = Target::new(Path::new(name));
            assert_eq!(t.is_memory(), memory, "{name}");
            assert_eq!(t.read_only, read_only, "{name}");
            assert!(t.shared_memory.is_none(), "{name}");
            if memory {
                assert!(
                    t.open_name.ends_with("?vfs=litelane-memdb"),
                    "{name}: {}",
                    t.open_name
                );
            } else {
                assert_eq!(t.open_name, name);
            }
        }
        // cache=shared: one name per URI's file name (a file, see
        // shared_memory.rs); otherwise a new database each time.
        let shared = |uri: &str| Target::new(Path::new(uri)).shared_memory.map(|(n, _)| n);
        let a = shared("file:mem1?mode=memory&cache=shared");
        assert!(a.is_some());
        assert_eq!(a, shared("file:mem1?cache=shared&mode=memory"));
        assert_ne!(a, shared("file:mem2?mode=memory&cache=shared"));
        assert!(shared("file::memory:?cache=shared").is_some());
        let t = Target::new(Path::new("file:mem1?mode=memory&cache=shared"));
        assert_eq!(t.display(), "file:mem1?mode=memory&cache=shared");
        let d = Target::new(Path::new("file:mem1?mode=memory"));
        assert_eq!(
            Target::new(Path::new("file:app.db?mode=ro")).path,
            Some(PathBuf::from("app.db"))
        );
        let e = Target::new(Path::new("file:mem1?mode=memory"));
        assert_ne!(d.open_name, e.open_name);
    }

    #[test]
    fn the_file_a_uri_names() {
        // (URI, the file SQLite opens for it)
        let cases: [(&str, Option<&str>); 14] = [
            ("file:app.db", Some("app.db")),
            ("file:app.db?mode=ro&cache=private", Some("app.db")),
            ("file:data/app.db#section", Some("data/app.db")),
            ("file:/srv/app.db", Some("/srv/app.db")),
            ("file:///srv/app.db?immutable=1", Some("/srv/app.db")),
            ("file://localhost/srv/app.db", Some("/srv/app.db")),
            ("file://otherhost/srv/app.db", None),
            ("file:my%20app.db", Some("my app.db")),
            ("file:%41%62%63.db", Some("Abc.db")),
            ("file:50%.db", Some("50%.db")),
            ("file:bad%zzhex%4", Some("bad%zzhex%4")),
            ("file:cut%00here.db", Some("cut")),
            ("file:", None),
            ("file:?mode=rwc", None),
        ];
        for (uri, want) in cases {
            assert_eq!(uri_file(uri), want.map(PathBuf::from), "{uri}");
        }
        // Bytes that are not UTF-8 name the file they spell.
        use std::os::unix::ffi::OsStrExt;
        let latin1 = uri_file("file:caf%E9.db").unwrap();
        assert_eq!(latin1.as_os_str().as_bytes(), b"caf\xe9.db");
        // The engine's files go beside the file, not beside the URI's text.
        let t = Target::new(Path::new("file:///srv/app.db?mode=rwc"));
        assert_eq!(t.wal_path(), Some(PathBuf::from("/srv/app.db-wal")));
        assert_eq!(t.open_name, "file:///srv/app.db?mode=rwc");
        assert!(Target::new(Path::new("file:")).is_memory());
    }

    #[test]
    fn a_connection_opened_later_gets_every_setup_before_its_first_statement() {
        use crate::configure::tests::{call, constant};
        use crate::configure::Registry;
        use crate::metrics::Recorder;
        use crate::options::Options;
        use crate::pool::ReaderTrace;
        use std::sync::Arc;

        let dir = tempfile::tempdir().unwrap();
        let target = Target::new(&dir.path().join("t.db"));
        let opts = Options::default();
        let plan = DurabilityPlan::new(opts.profile, target.kind(), opts.process_queue);
        let tracer = Arc::new(Tracer {
            recorder: Arc::new(Recorder::default()),
            slow_nanos: u64::MAX,
            writer_last_sql: Default::default(),
            writer_capture: Default::default(),
            writer_nanos_since_capture: Default::default(),
        });
        let reg = Registry::default();
        reg.set("f", constant("f", 7)).unwrap();
        reg.set("g", constant("g", 8)).unwrap();
        let mut seen = 0;
        let writer = open(
            &target,
            Role::Writer,
            &opts,
            &plan,
            &tracer,
            None,
            Some((&reg, &mut seen)),
        )
        .unwrap();
        assert_eq!(seen, 2);
        assert_eq!(call(&writer, "SELECT f() * 10 + g()").unwrap(), 78);
        // A reader opened after more setups were recorded gets all of them.
        reg.set("f", constant("f", 1)).unwrap();
        let trace = Arc::new(ReaderTrace::default());
        let mut reader_seen = 0;
        let reader = open(
            &target,
            Role::Reader,
            &opts,
            &plan,
            &tracer,
            Some(&trace),
            Some((&reg, &mut reader_seen)),
        )
        .unwrap();
        assert_eq!(reader_seen, 3);
        assert_eq!(call(&reader, "SELECT f() * 10 + g()").unwrap(), 18);
    }
}
