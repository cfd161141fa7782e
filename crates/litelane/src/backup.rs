//! Online backup: a consistent copy of a live database, written beside the
//! destination and moved into place only when it is complete.
//!
//! **Where the copy reads from.** In WAL mode (the `safe` and `balanced`
//! profiles) the backup runs on a reader connection that holds one read
//! snapshot from its first page to its last: SQLite's online backup
//! (`sqlite3_backup_step`, N pages per step) copies exactly the database as
//! of that snapshot, and the writer never waits for it, not even for a step.
//! The price is the one every long reader has: while the backup runs,
//! checkpoints cannot move the WAL past the snapshot, so the WAL grows by
//! what is written meanwhile (see docs/durability.md).
//!
//! The other design, one step per writer turn, was rejected: a backup object
//! must stay attached to its source connection between steps, and a writer
//! turn lends the writer connection only for the turn; with any other source
//! connection, every commit between two steps makes SQLite restart the copy
//! from page 1, so under a steady write load it would never finish.
//!
//! Without WAL (the `fast` profile's rollback journal, in-memory databases),
//! a reader holding a snapshot would block the writer's commit until the
//! busy timeout and then fail it; there the backup takes one turn on the
//! writer and copies from the writer connection itself, so writers queue
//! (asleep) for the whole copy, not only a step.

use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use rusqlite::backup::{Backup, StepResult};
use rusqlite::{Connection, OpenFlags};

use crate::error::{Context, Error, Result};
use crate::Database;

/// Options of [`Database::backup_with`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackupOptions {
    /// Pages copied per `sqlite3_backup_step` call: the progress callback
    /// runs after each step. Default 1024 (4 MiB with 4 KiB pages). Must be
    /// at least 1.
    pub pages_per_step: u32,
    /// Replace a destination file that exists and is not empty. Default
    /// `false`: such a file is refused. A destination that is the source
    /// database itself (or its `-wal`, `-shm` or `-journal` file) is refused
    /// even with `overwrite`.
    pub overwrite: bool,
}

impl Default for BackupOptions {
    fn default() -> Self {
        BackupOptions {
            pages_per_step: 1024,
            overwrite: false,
        }
    }
}

/// How far a backup has come, passed to the progress callback after each
/// step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BackupProgress {
    /// Pages copied so far.
    pub pages_done: u64,
    /// Pages in the source database (as of the backup's snapshot).
    pub pages_total: u64,
}

/// Which connection a backup read from (see [`Database::backup`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackupSource {
    /// A reader holding one snapshot (WAL mode): writers never waited.
    ReaderSnapshot,
    /// The writer, in one turn of its own taken ahead of queued writers
    /// (rollback journal or in-memory): writers waited for the whole copy.
    WriterTurn,
    /// A connection of another process, with a rollback journal
    /// ([`backup_connection`]): each step held the shared lock only for
    /// itself, and the copy started over when the database changed.
    StepLocks,
}

/// What a finished backup did.
#[derive(Debug, Clone, PartialEq)]
pub struct BackupReport {
    /// The file written.
    pub path: PathBuf,
    /// Pages copied.
    pub pages: u64,
    /// Page size in bytes.
    pub page_size: u64,
    /// Size of the backup file in bytes.
    pub bytes: u64,
    /// `sqlite3_backup_step` calls made (including retries after `BUSY`).
    pub steps: u64,
    /// Wall time of the whole backup, checks and rename included.
    pub elapsed: Duration,
    /// Which connection the pages were read from.
    pub source: BackupSource,
}

/// How long a step that meets `SQLITE_BUSY`/`SQLITE_LOCKED` (another
/// process holding a lock) is retried before the backup fails.
const BUSY_RETRY_FOR: Duration = Duration::from_secs(5);

/// Identity of a file on disk, for "is this the same file" checks.
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
struct FileId {
    dev: u64,
    ino: u64,
}

#[cfg(unix)]
fn file_id(md: &std::fs::Metadata) -> Option<FileId> {
    use std::os::unix::fs::MetadataExt;
    Some(FileId {
        dev: md.dev(),
        ino: md.ino(),
    })
}

#[cfg(not(unix))]
fn file_id(_md: &std::fs::Metadata) -> Option<FileId> {
    None
}

/// True when `a` and `b` name the same existing file (same device and
/// inode on Unix; same canonical path elsewhere).
pub fn same_file(a: &Path, b: &Path) -> bool {
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(ma), Ok(mb)) => match (file_id(&ma), file_id(&mb)) {
            (Some(x), Some(y)) => x == y,
            _ => match (a.canonicalize(), b.canonicalize()) {
                (Ok(x), Ok(y)) => x == y,
                _ => false,
            },
        },
        _ => false,
    }
}

fn with_suffix(p: &Path, suffix: &str) -> PathBuf {
    let mut s = p.as_os_str().to_owned();
    s.push(suffix);
    PathBuf::from(s)
}

/// Refuses a destination that would destroy something: the source database
/// or one of its side files (always), or a non-empty file (unless
/// `overwrite`). Returns whether the destination exists (empty, or allowed).
pub(crate) fn check_destination(
    source: Option<&Path>,
    dest: &Path,
    overwrite: bool,
) -> Result<bool> {
    if let Some(src) = source {
        for side in ["", "-wal", "-shm", "-journal"] {
            let s = with_suffix(src, side);
            if same_file(&s, dest) {
                return Err(Error::invalid(format!(
                    "backup destination {} is the database {} itself{}: refusing to overwrite it",
                    dest.display(),
                    src.display(),
                    if side.is_empty() {
                        String::new()
                    } else {
                        format!(" (its {side} file)")
                    }
                )));
            }
        }
    }
    match std::fs::symlink_metadata(dest) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(Error::os(
            format!("checking the backup destination {}", dest.display()),
            e,
        )),
        Ok(md) if !md.is_file() => Err(Error::invalid(format!(
            "backup destination {} exists and is not a regular file",
            dest.display()
        ))),
        Ok(md) if md.len() > 0 && !overwrite => Err(Error::invalid(format!(
            "backup destination {} exists and is not empty ({} bytes): refusing to overwrite it \
             (choose another path, or allow overwriting)",
            dest.display(),
            md.len()
        ))),
        Ok(_) => Ok(true),
    }
}

/// A new file beside `dest`, created exclusively, removed on drop unless
/// kept.
struct TempBeside {
    path: PathBuf,
    keep: bool,
}

impl TempBeside {
    fn create(dest: &Path) -> Result<TempBeside> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let dir = match dest.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let name = dest
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "backup".into());
        for _ in 0..100 {
            let n = NEXT.fetch_add(1, Ordering::Relaxed);
            let path = dir.join(format!(".{name}.litelane-tmp-{}-{n}", std::process::id()));
            match OpenOptions::new().write(true).create_new(true).open(&path) {
                Ok(_) => return Ok(TempBeside { path, keep: false }),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => {
                    return Err(Error::os(
                        format!("creating a temporary file in {}", dir.display()),
                        e,
                    ))
                }
            }
        }
        Err(Error::Io {
            context: format!("creating a temporary file in {}", dir.display()),
            message: "100 names taken".into(),
            os: None,
        })
    }
}

impl Drop for TempBeside {
    fn drop(&mut self) {
        if !self.keep {
            let _ = std::fs::remove_file(&self.path);
            let _ = std::fs::remove_file(with_suffix(&self.path, "-journal"));
        }
    }
}

/// Moves the finished file to `dest`: without `replace`, atomically refuses
/// a file that appeared at `dest` meanwhile (a hard link fails if the name
/// exists). Then syncs the directory so the new name survives a power cut.
pub(crate) fn move_into_place(tmp: &Path, dest: &Path, replace: bool) -> Result<()> {
    let io = |what: &str, e: std::io::Error| Error::os(format!("{what} {}", dest.display()), e);
    if replace {
        std::fs::rename(tmp, dest).map_err(|e| io("moving the finished copy to", e))?;
    } else {
        match std::fs::hard_link(tmp, dest) {
            Ok(()) => {
                std::fs::remove_file(tmp).map_err(|e| io("removing the temporary copy of", e))?
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                return Err(Error::invalid(format!(
                    "backup destination {} appeared while the backup ran: refusing to overwrite it",
                    dest.display()
                )))
            }
            // File systems without hard links: the check at the start stands.
            Err(_) => {
                std::fs::rename(tmp, dest).map_err(|e| io("moving the finished copy to", e))?
            }
        }
    }
    if let Some(dir) = dest.parent() {
        let dir = if dir.as_os_str().is_empty() {
            Path::new(".")
        } else {
            dir
        };
        // Directories cannot be opened for sync everywhere; best effort.
        if let Ok(d) = File::open(dir) {
            let _ = d.sync_all();
        }
    }
    Ok(())
}

/// How many times a copy that holds no snapshot may be restarted by
/// commits of other connections before it gives up.
const MAX_RESTARTS: u32 = 10;

/// Runs the backup steps from `src` into `dst` until done. Without a
/// snapshot held on `src` (`restarts_allowed`), SQLite restarts the copy
/// when another connection commits between two steps; past
/// [`MAX_RESTARTS`] the copy fails instead of running forever.
fn copy_pages(
    src: &Connection,
    dst: &mut Connection,
    pages_per_step: u32,
    restarts_allowed: bool,
    progress: &mut dyn FnMut(BackupProgress),
) -> Result<(u64, u64)> {
    let backup = Backup::new(src, dst).context(|| "starting the backup".to_string())?;
    let per_step = pages_per_step.clamp(1, i32::MAX as u32) as i32;
    let mut steps = 0u64;
    let mut busy_since: Option<Instant> = None;
    let mut prev_done = 0u64;
    let mut restarts = 0u32;
    loop {
        let r = backup
            .step(per_step)
            .context(|| format!("copying pages (step {})", steps + 1))?;
        steps += 1;
        let p = backup.progress();
        let total = p.pagecount.max(0) as u64;
        let done = total.saturating_sub(p.remaining.max(0) as u64);
        match r {
            StepResult::Done => {
                progress(BackupProgress {
                    pages_done: total,
                    pages_total: total,
                });
                return Ok((total, steps));
            }
            StepResult::More => {
                busy_since = None;
                if done < prev_done && restarts_allowed {
                    restarts += 1;
                    if restarts > MAX_RESTARTS {
                        return Err(Error::Sqlite {
                            code: crate::SQLITE_BUSY,
                            os: None,
                            extended_code: crate::SQLITE_BUSY,
                            message: format!(
                                "the database changed under the copy {restarts} times"
                            ),
                            context: "copying pages without holding a snapshot (rollback \
                                      journal): run the backup when writes pause, or from the \
                                      application with Database::backup"
                                .into(),
                        });
                    }
                }
                prev_done = done;
                progress(BackupProgress {
                    pages_done: done,
                    pages_total: total,
                });
            }
            // Busy, Locked, or a future variant: another process holds a lock.
            _ => {
                let since = *busy_since.get_or_insert_with(Instant::now);
                if since.elapsed() > BUSY_RETRY_FOR {
                    return Err(Error::Sqlite {
                        code: crate::SQLITE_BUSY,
                        os: None,
                        extended_code: crate::SQLITE_BUSY,
                        message: "database is locked".into(),
                        context: format!(
                            "copying pages: another connection held a lock for {BUSY_RETRY_FOR:?}"
                        ),
                    });
                }
                std::thread::sleep(Duration::from_millis(10));
            }
        }
    }
}

/// Online backup from any open connection `src` (for tools that are not
/// the database's own process, e.g. `litelane backup`): the same checks,
/// temporary file and move into place as [`Database::backup_with`].
///
/// If `src` is already in a transaction, the copy is of what that
/// transaction sees. Otherwise, in WAL mode, the copy runs inside one read
/// transaction on `src` (one snapshot; writers of every process go on).
/// With a rollback journal a held snapshot would block every writer's
/// commit, so each step takes the shared lock only for itself; SQLite
/// restarts the copy when another connection commits between two steps
/// (the result is still one consistent moment), and after 10 restarts the
/// backup fails with `SQLITE_BUSY` rather than run forever.
pub fn backup_connection(
    src: &Connection,
    dest: &Path,
    opts: &BackupOptions,
    progress: &mut dyn FnMut(BackupProgress),
) -> Result<BackupReport> {
    let source_path = src.path().filter(|p| !p.is_empty()).map(PathBuf::from);
    write_copy(source_path.as_deref(), dest, opts, |dst| {
        if !src.is_autocommit() {
            let (pages, steps) = copy_pages(src, dst, opts.pages_per_step, false, progress)?;
            return Ok((pages, steps, BackupSource::ReaderSnapshot));
        }
        let journal: String = src
            .query_row("PRAGMA journal_mode", [], |r| r.get(0))
            .context(|| "reading the journal mode".to_string())?;
        if !journal.eq_ignore_ascii_case("wal") {
            let (pages, steps) = copy_pages(src, dst, opts.pages_per_step, true, progress)?;
            return Ok((pages, steps, BackupSource::StepLocks));
        }
        src.execute_batch("BEGIN")
            .context(|| "BEGIN (backup snapshot)".to_string())?;
        let out = src
            .query_row("SELECT count(*) FROM sqlite_schema", [], |_| Ok(()))
            .context(|| "opening the backup's read snapshot".to_string())
            .and_then(|()| copy_pages(src, dst, opts.pages_per_step, false, progress));
        let _ = src.execute_batch("COMMIT");
        let (pages, steps) = out?;
        Ok((pages, steps, BackupSource::ReaderSnapshot))
    })
}

pub(crate) fn run(
    db: &Database,
    wal: bool,
    dest: &Path,
    opts: &BackupOptions,
    progress: &mut dyn FnMut(BackupProgress),
) -> Result<BackupReport> {
    write_copy(db.path(), dest, opts, |dst| {
        if wal {
            let (pages, steps) = db.read(|conn| {
                // Take the snapshot now: sqlite3_backup_step would otherwise
                // open and close a read transaction per step, and a commit
                // between two steps would restart the copy.
                conn.query_row("SELECT count(*) FROM sqlite_schema", [], |_| Ok(()))
                    .context(|| "opening the backup's read snapshot".to_string())?;
                copy_pages(conn, dst, opts.pages_per_step, false, progress)
            })?;
            Ok((pages, steps, BackupSource::ReaderSnapshot))
        } else {
            // A priority turn: an ordinary turn can be handed the open group
            // of the writers queued before it (writer.rs
            // `next_can_join_group` only keeps groups from priority turns),
            // and `with_turn` then refuses to run. A priority turn goes ahead
            // of queued writers instead; without WAL there is no WAL gate for
            // it to bypass.
            let (pages, steps) = db.writer().with_turn("backup", true, |conn| {
                copy_pages(conn, dst, opts.pages_per_step, false, progress)
            })??;
            Ok((pages, steps, BackupSource::WriterTurn))
        }
    })
}

/// Replaces the content of `db` with the database in the file `src`
/// (SQLite's backup API, `pages_per_step` pages per step, into the writer's
/// connection in one turn of its own, taken ahead of queued writers). Each
/// later read and write sees the new content; a transaction of another
/// process in progress makes the copy fail with `SQLITE_BUSY`.
pub(crate) fn restore(
    db: &Database,
    src: &Path,
    pages_per_step: u32,
    progress: &mut dyn FnMut(BackupProgress),
) -> Result<u64> {
    if pages_per_step == 0 {
        return Err(Error::invalid("restore: pages_per_step must be at least 1"));
    }
    let from = Connection::open_with_flags(
        src,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .context(|| format!("opening {} to restore from", src.display()))?;
    // Made durable before it returns, as any commit (the backup API commits
    // below the writer's commit hook: `outside_transaction` sees the file
    // change).
    let (pages, _steps) = db.writer().outside_transaction("restore", true, |conn| {
        copy_pages(&from, conn, pages_per_step, false, progress)
    })?;
    Ok(pages)
}

/// Checks the destination, copies into a temporary file beside it with
/// `copy`, syncs, checks again and moves the file into place.
fn write_copy(
    source: Option<&Path>,
    dest: &Path,
    opts: &BackupOptions,
    copy: impl FnOnce(&mut Connection) -> Result<(u64, u64, BackupSource)>,
) -> Result<BackupReport> {
    let start = Instant::now();
    if opts.pages_per_step == 0 {
        return Err(Error::invalid("backup: pages_per_step must be at least 1"));
    }
    let existed = check_destination(source, dest, opts.overwrite)?;
    let mut tmp = TempBeside::create(dest)?;
    let mut dst = Connection::open(&tmp.path)
        .context(|| format!("opening the backup file {}", tmp.path.display()))?;
    let (pages, steps, source_kind) = copy(&mut dst)?;
    let page_size: i64 = dst
        .query_row("PRAGMA page_size", [], |r| r.get(0))
        .context(|| "reading the backup's page size".to_string())?;
    dst.close()
        .map_err(|(_, e)| Error::from_sqlite(e, "closing the backup file"))?;
    // SQLite synced the file when the backup committed; sync again in case
    // it ran with synchronous=OFF.
    File::open(&tmp.path)
        .and_then(|f| f.sync_all())
        .map_err(|e| Error::os(format!("syncing the backup file {}", tmp.path.display()), e))?;
    let bytes = std::fs::metadata(&tmp.path).map_or(0, |m| m.len());
    // Check again right before the move: the destination may have been
    // created while the pages were copied.
    check_destination(source, dest, opts.overwrite)?;
    move_into_place(&tmp.path, dest, existed || opts.overwrite)?;
    tmp.keep = true;
    Ok(BackupReport {
        path: dest.to_path_buf(),
        pages,
        page_size: page_size.max(0) as u64,
        bytes,
        steps,
        elapsed: start.elapsed(),
        source: source_kind,
    })
}
