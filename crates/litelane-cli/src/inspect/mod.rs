//! `litelane stats`, `doctor` and `checkpoint`: look at a database file
//! without running anything stored in it.
//!
//! A database file can carry code: triggers, views, generated columns,
//! default expressions. These commands open the file read-only (`checkpoint`
//! excepted, which needs the writer), with defensive mode on, triggers and
//! views disabled, `trusted_schema=OFF` and `query_only`, count rows of real
//! tables only, and quote every name with [`litelane::quote_ident`].

mod backup;
mod checkpoint;
mod doctor;
mod integrity;
mod recover;
mod stats;

use std::path::{Path, PathBuf};

use litelane::rusqlite::config::DbConfig;
use litelane::rusqlite::{Connection, OpenFlags};

use crate::error::CliError;

pub use backup::backup;
pub use checkpoint::checkpoint;
pub use doctor::doctor;
pub use recover::recover;
pub use stats::stats;

/// Arguments of `litelane stats`.
#[derive(clap::Args, Debug)]
pub struct StatsArgs {
    /// The database file.
    pub db: PathBuf,
    /// Print one JSON object on stdout.
    #[arg(long)]
    pub json: bool,
}

/// Arguments of `litelane doctor`.
#[derive(clap::Args, Debug)]
pub struct DoctorArgs {
    /// The database file.
    pub db: PathBuf,
    /// Also check the file for damage (`PRAGMA integrity_check`), one table
    /// at a time so a live database is never held for the whole check.
    #[arg(long)]
    pub integrity: bool,
    /// With --integrity: `quick_check` instead (skips comparing index
    /// contents with their tables; faster).
    #[arg(long, requires = "integrity")]
    pub quick: bool,
    /// Print one JSON object on stdout.
    #[arg(long)]
    pub json: bool,
}

/// Arguments of `litelane backup`.
#[derive(clap::Args, Debug)]
pub struct BackupArgs {
    /// The database to copy (it may be in use).
    pub db: PathBuf,
    /// The file to write. Refused if it is the database itself, or exists
    /// and is not empty (unless --force).
    pub out: PathBuf,
    /// Pages copied per step (progress is reported between steps).
    #[arg(long, default_value_t = 1024)]
    pub pages_per_step: u32,
    /// Replace OUT if it exists and is not empty (never the database itself).
    #[arg(long)]
    pub force: bool,
    /// Print one JSON object on stdout.
    #[arg(long)]
    pub json: bool,
}

/// Arguments of `litelane recover`.
#[derive(clap::Args, Debug)]
pub struct RecoverArgs {
    /// The damaged database (only read, never written).
    pub db: PathBuf,
    /// The new database to write what can be read into. Refused if it
    /// exists (unless --force) or is the database itself.
    pub out: PathBuf,
    /// Replace OUT if it exists (never the database itself).
    #[arg(long)]
    pub force: bool,
    /// Print one JSON object on stdout.
    #[arg(long)]
    pub json: bool,
}

/// Arguments of `litelane checkpoint`.
#[derive(clap::Args, Debug)]
pub struct CheckpointArgs {
    /// The database file.
    pub db: PathBuf,
    /// passive (never waits), full, restart, or truncate (also empties the
    /// WAL file).
    #[arg(long, default_value = "passive", value_parser = parse_mode)]
    pub mode: litelane::CheckpointMode,
    /// Print one JSON object on stdout.
    #[arg(long)]
    pub json: bool,
}

fn parse_mode(s: &str) -> Result<litelane::CheckpointMode, String> {
    s.parse().map_err(|e: litelane::Error| e.to_string())
}

/// Refuses an output path `out` of `command` (`backup`, `recover`) that would
/// harm a database, whether or not the file exists yet:
///
/// * `out` named as one of `db`'s side files (`-wal`, `-shm`, `-journal`):
///   SQLite takes such a file for part of `db`, and the next open of `db`
///   rolls it in or deletes it (the copy would be reported good, then lost);
/// * `out` with a `-wal` or `-journal` of its own beside it: the copy would
///   be read through that stale file (its pages laid over the copy), or the
///   file deleted;
/// * `db` named as one of `out`'s side files.
///
/// Paths are compared by device and inode after following links, or by
/// canonical directory and name for files that do not exist.
fn check_side_files(command: &str, db: &Path, out: &Path) -> Result<(), CliError> {
    // An OUT that cannot be resolved (its directory is missing) is named as such.
    litelane_import::read::guard::check_output("OUT", out, &[])?;
    let mut files = litelane_import::read::guard::database_files(db).into_iter();
    if let Some(me) = files.next() {
        if litelane_import::read::guard::check_output("OUT", out, std::slice::from_ref(&me))
            .is_err()
        {
            return Err(CliError::Input(format!(
                "refusing {command} OUT {}: it is the database {} itself; give another path",
                out.display(),
                db.display()
            )));
        }
    }
    for side in files {
        if litelane_import::read::guard::check_output("OUT", out, std::slice::from_ref(&side))
            .is_err()
        {
            return Err(CliError::Input(format!(
                "refusing {command} OUT {}: it is {} ({}), whether or not that file exists now: \
                 SQLite takes it for part of {} and deletes it or rolls it into the database \
                 when the database is next opened; give another path",
                out.display(),
                side.0,
                side.1.display(),
                db.display()
            )));
        }
    }
    for side in ["-wal", "-journal"] {
        let mut name = out.as_os_str().to_owned();
        name.push(side);
        let s = PathBuf::from(name);
        if std::fs::symlink_metadata(&s).is_ok() {
            return Err(CliError::Input(format!(
                "refusing {command} OUT {}: {} exists beside it, and SQLite would read the new \
                 database through that stale {side} file (or delete it); move it away or give \
                 another path",
                out.display(),
                s.display()
            )));
        }
    }
    let theirs = litelane_import::read::guard::database_files(out);
    litelane_import::read::guard::check_output("DB", db, &theirs[1..]).map_err(|_| {
        CliError::Input(format!(
            "refusing {command} {} {}: DB is a side file of OUT, not a database",
            db.display(),
            out.display()
        ))
    })?;
    Ok(())
}

/// Fails unless `path` is an existing regular file (opening would create
/// one).
fn require_file(path: &Path) -> Result<(), CliError> {
    match std::fs::metadata(path) {
        Ok(m) if m.is_file() => Ok(()),
        Ok(_) => Err(CliError::Input(format!(
            "{} is not a regular file",
            path.display()
        ))),
        Err(e) => Err(CliError::io(format!("opening {}", path.display()), e)),
    }
}

/// Opens `path` with `flags` and nothing stored in the file able to run:
/// triggers, views and the trusted schema off, double-quoted strings
/// refused; `defensive` turns on SQLite's defensive mode. `name`: the file
/// in messages.
pub fn open_inert(
    path: &Path,
    flags: OpenFlags,
    defensive: bool,
    name: &str,
) -> Result<Connection, CliError> {
    let ctx = |what: &str| format!("{what} {name}");
    let conn = Connection::open_with_flags(path, flags)
        .map_err(|e| litelane::Error::from_sqlite(e, ctx("opening")))?;
    for (cfg, on) in [
        (DbConfig::SQLITE_DBCONFIG_DEFENSIVE, defensive),
        (DbConfig::SQLITE_DBCONFIG_TRUSTED_SCHEMA, false),
        (DbConfig::SQLITE_DBCONFIG_ENABLE_TRIGGER, false),
        (DbConfig::SQLITE_DBCONFIG_ENABLE_VIEW, false),
        (DbConfig::SQLITE_DBCONFIG_DQS_DML, false),
        (DbConfig::SQLITE_DBCONFIG_DQS_DDL, false),
    ] {
        conn.set_db_config(cfg, on)
            .map_err(|e| litelane::Error::from_sqlite(e, ctx("configuring")))?;
    }
    Ok(conn)
}

/// Opens `path` read-only with everything that could run stored code turned
/// off, and checks that it is a database.
pub fn open_untrusted(path: &Path) -> Result<Connection, CliError> {
    require_file(path)?;
    let ctx = |what: &str| format!("{what} {}", path.display());
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn = open_inert(path, flags, true, &path.display().to_string())?;
    conn.execute_batch("PRAGMA query_only = ON; PRAGMA trusted_schema = OFF;")
        .map_err(|e| litelane::Error::from_sqlite(e, ctx("configuring")))?;
    // The first read of the file: fails here for a file that is not a
    // database.
    conn.query_row("SELECT count(*) FROM sqlite_schema", [], |r| {
        r.get::<_, i64>(0)
    })
    .map_err(|e| litelane::Error::from_sqlite(e, ctx("reading the schema of")))?;
    Ok(conn)
}

/// The `-wal` file beside `db`.
fn wal_path(db: &Path) -> PathBuf {
    let mut s = db.as_os_str().to_owned();
    s.push("-wal");
    PathBuf::from(s)
}

/// Size of a file, 0 when it does not exist.
fn file_len(p: &Path) -> u64 {
    std::fs::metadata(p).map_or(0, |m| m.len())
}

/// A pragma's single value.
fn pragma<T: litelane::rusqlite::types::FromSql>(
    conn: &Connection,
    name: &str,
) -> Result<T, CliError> {
    conn.query_row(&format!("PRAGMA {name}"), [], |r| r.get(0))
        .map_err(|e| CliError::Engine(litelane::Error::from_sqlite(e, format!("PRAGMA {name}"))))
}

/// `1536000` → `1.5 MiB`.
fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n as f64;
    let mut u = 0;
    while v >= 1024.0 && u < UNITS.len() - 1 {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{n} B")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

/// Quotes a word for a POSIX shell.
fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn helpers_format_sizes_and_quote_for_the_shell() {
        assert_eq!(human_bytes(512), "512 B");
        assert_eq!(human_bytes(1536), "1.5 KiB");
        assert_eq!(shell_quote("it's"), "'it'\\''s'");
    }

    #[test]
    fn a_file_that_is_not_a_database_is_a_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.db");
        std::fs::write(&p, vec![b'x'; 4096]).unwrap();
        let e = open_untrusted(&p).unwrap_err().to_string();
        assert!(e.contains("not a database"), "{e}");
        let e = open_untrusted(&dir.path().join("missing.db")).unwrap_err();
        assert!(e.to_string().contains("missing.db"));
    }
}
