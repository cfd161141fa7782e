//! A new database written aside: an import that creates its database in
//! one transaction writes it under another name in the same directory,
//! without a WAL, and links it into place once it is complete and durable
//! (see `docs/import.md`, "A new database is written once").
//!
//! Through the WAL, every page of an import is written twice (into the
//! WAL, then by the closing checkpoint into the database) and read once
//! more, and the disk holds the data twice at the end. Written aside, each
//! page is written once. Nobody sees the database before it is complete:
//! until the link, the name does not exist, as before the import; a crash
//! or Ctrl-C leaves it so, and the file aside is removed (by the next
//! import of the same table when the process was killed).

use std::path::{Path, PathBuf};

use litelane::{quote_ident, Profile, DATABASE_FILE_SUFFIXES};

use crate::error::Error;
use crate::plan::options::FileArgs;
use crate::read::guard;

/// Hidden test hook: when set to a table name, a table of that name is
/// created in the database just before the import links its own into
/// place, as another program creating the database meanwhile would.
const CREATE_BEFORE_PUBLISH_HOOK: &str = "LITELANE_TEST_CREATE_BEFORE_PUBLISH";

/// Hidden hook: when set, an import never writes its database aside (to
/// time both ways of writing a new database against each other).
pub(super) const NO_ASIDE_HOOK: &str = "LITELANE_IMPORT_NO_ASIDE";

/// The database of an import, being written aside; dropping it removes
/// the file aside (after [`publish`](Aside::publish), only that name).
pub(super) struct Aside {
    path: PathBuf,
}

fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

fn remove_files(path: &Path) {
    for suffix in DATABASE_FILE_SUFFIXES {
        let _ = std::fs::remove_file(with_suffix(path, suffix));
    }
}

impl Aside {
    /// The file aside for an import of `table` into `args.db`, when the
    /// import writes its database aside: `args.db` names a file (not
    /// `:memory:` or a URI), nothing is at it (not even
    /// a link) nor any of its `-wal`, `-shm`, `-journal` or `-lane` files,
    /// the import is one transaction (no `--commit-every`, no `--resume`),
    /// and its profile keeps a WAL (`safe`, `balanced`: `fast` writes each
    /// page once already). A file left aside by a killed import of the
    /// same table is removed first: the caller holds the table's import
    /// lock, so no running import owns it.
    pub(super) fn for_import(args: &FileArgs, table: &str) -> Result<Option<Aside>, Error> {
        let one_transaction = args.commit_every.is_none() && !args.resume;
        // Names the engine does not open as a file (`Database::open`): an
        // in-memory database, SQLite's temporary one, a URI.
        let name = args.db.to_string_lossy();
        let a_file = !(name.is_empty() || name == ":memory:" || name.starts_with("file:"));
        if !a_file
            || !one_transaction
            || args.profile == Profile::Fast
            || std::env::var_os(NO_ASIDE_HOOK).is_some()
            || DATABASE_FILE_SUFFIXES
                .iter()
                .any(|s| std::fs::symlink_metadata(with_suffix(&args.db, s)).is_ok())
        {
            return Ok(None);
        }
        let lock = guard::lock_path(&args.db, table)?;
        let path = lock.with_extension("importing");
        remove_files(&path);
        Ok(Some(Aside { path }))
    }

    /// Where the database is written until it is complete.
    pub(super) fn path(&self) -> &Path {
        &self.path
    }

    /// Puts the complete database into WAL mode (as the engine's profile
    /// would have made it), makes it durable and links it into place at
    /// `args.db`. When something is there by now (another program created
    /// the database meanwhile) or the file system has no links, its tables
    /// are copied into the database at `args.db` in one transaction through
    /// the engine instead (a table of the same name there fails the import,
    /// with nothing written). Returns whether the database was copied.
    pub(super) fn publish(&self, args: &FileArgs) -> Result<bool, Error> {
        let ctx = |what: &str| format!("{what} {}", self.path.display());
        {
            let c = rusqlite::Connection::open(&self.path)
                .map_err(|e| Error::Input(format!("{}: {e}", ctx("opening the new database"))))?;
            let mode: String = c
                .query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))
                .map_err(|e| Error::Input(format!("{}: {e}", ctx("setting WAL mode on"))))?;
            if !mode.eq_ignore_ascii_case("wal") {
                return Err(Error::Input(format!(
                    "{}: its journal mode stayed {mode}",
                    ctx("setting WAL mode on")
                )));
            }
        }
        std::fs::File::open(&self.path)
            .and_then(|f| f.sync_all())
            .map_err(|e| Error::io(ctx("syncing the new database"), e))?;
        if let Some(table) = std::env::var_os(CREATE_BEFORE_PUBLISH_HOOK) {
            let sql = format!("CREATE TABLE {}(x)", quote_ident(&table.to_string_lossy()));
            rusqlite::Connection::open(&args.db)
                .and_then(|c| c.execute_batch(&sql))
                .map_err(|e| Error::Input(format!("test hook: {e}")))?;
        }
        match std::fs::hard_link(&self.path, &args.db) {
            Ok(()) => {
                sync_directory(&args.db)?;
                Ok(false)
            }
            Err(_) => {
                copy_tables(&self.path, args)?;
                Ok(true)
            }
        }
    }
}

impl Drop for Aside {
    fn drop(&mut self) {
        remove_files(&self.path);
    }
}

/// Syncs the directory of `db`, so that the name just linked survives a
/// power cut.
fn sync_directory(db: &Path) -> Result<(), Error> {
    let dir = match db.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    std::fs::File::open(&dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| Error::io(format!("syncing the directory {}", dir.display()), e))
}

/// Copies every table and index of the database at `aside` into the
/// database at `args.db`, created or opened through the engine with the
/// import's profile, in one transaction. A name taken there fails it.
fn copy_tables(aside: &Path, args: &FileArgs) -> Result<(), Error> {
    let db = super::open_db(&args.db, args.profile)?;
    let name = aside.to_string_lossy().into_owned();
    db.read_on_writer(|c| Ok(c.execute("ATTACH ?1 AS litelane_aside", [&name])?))?;
    let copied = copy_attached(&db, args);
    let detached = db.read_on_writer(|c| Ok(c.execute_batch("DETACH litelane_aside")?));
    copied?;
    detached?;
    Ok(())
}

/// [`copy_tables`] once the database aside is attached as `litelane_aside`.
fn copy_attached(db: &litelane::Database, args: &FileArgs) -> Result<(), Error> {
    let objects = db.read_on_writer(|c| {
        Ok(c.prepare(
            "SELECT type, name, sql, EXISTS (SELECT 1 FROM main.sqlite_schema m \
                 WHERE m.name = a.name COLLATE NOCASE) \
             FROM litelane_aside.sqlite_schema a \
             WHERE sql IS NOT NULL AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' \
             ORDER BY type = 'index', rowid",
        )?
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))?
        .collect::<rusqlite::Result<Vec<(String, String, String, bool)>>>()?)
    })?;
    if let Some((kind, name, ..)) = objects.iter().find(|o| o.3) {
        return Err(Error::Input(format!(
            "{} was created by another program while the import ran, and it has a {kind} named \
             {} too; nothing was imported (run the import again, with --mode append to add to it)",
            args.db.display(),
            quote_ident(name)
        )));
    }
    db.write(|tx| {
        for (kind, name, sql, _) in &objects {
            // Unqualified, each makes its table or index in `main`.
            tx.execute_batch(sql)?;
            if kind == "table" {
                let q = quote_ident(name);
                tx.execute(
                    &format!("INSERT INTO main.{q} SELECT * FROM litelane_aside.{q}"),
                    [],
                )?;
            }
        }
        Ok(())
    })?;
    Ok(())
}
