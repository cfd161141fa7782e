//! Guards around an import: an output file (`--rejects`) may never be the
//! input, the database or one of its `-wal`/`-shm`/`-journal` files; one
//! import per table at a time (a lock held for the import's duration);
//! internal table names are not import targets; and a directory the
//! database's journal cannot be created in is named before SQLite fails.

use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};

use crate::error::Error;
use crate::read::source::meta_id;

/// Where a path leads: the device and inode of the file it names (after
/// following symbolic links), or, for a file that does not exist yet, its
/// canonical parent directory joined with its name.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Identity {
    File(u64, u64),
    Path(PathBuf),
}

fn identity(p: &Path, what: &str) -> Result<Identity, Error> {
    match std::fs::metadata(p) {
        Ok(meta) => match meta_id(&meta) {
            Some((dev, ino)) => Ok(Identity::File(dev, ino)),
            None => Ok(Identity::Path(std::fs::canonicalize(p).map_err(|e| {
                Error::io(format!("resolving {what} {}", p.display()), e)
            })?)),
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            if std::fs::symlink_metadata(p).is_ok() {
                return Err(Error::Input(format!(
                    "{what} {} is a symbolic link to a file that does not exist; give the \
                     path of the file itself",
                    p.display()
                )));
            }
            let name = p.file_name().ok_or_else(|| {
                Error::Input(format!("{what} {} does not name a file", p.display()))
            })?;
            let parent = match p.parent() {
                Some(d) if !d.as_os_str().is_empty() => d,
                _ => Path::new("."),
            };
            let dir = std::fs::canonicalize(parent).map_err(|e| {
                Error::io(
                    format!("{what} {}: its directory {}", p.display(), parent.display()),
                    e,
                )
            })?;
            Ok(Identity::Path(dir.join(name)))
        }
        Err(e) => Err(Error::io(format!("examining {what} {}", p.display()), e)),
    }
}

/// Where a symbolic link that leads to no file yet would create one (the
/// database through such a link, created by SQLite); other paths as they are.
fn follow_dangling(p: &Path) -> PathBuf {
    let mut target = p.to_path_buf();
    for _ in 0..40 {
        match std::fs::read_link(&target) {
            Ok(next) if !target.exists() => {
                target = match target.parent() {
                    Some(dir) => dir.join(next),
                    None => next,
                }
            }
            _ => break,
        }
    }
    target
}

/// Both identities of a path that may exist: the file's, and, when it
/// exists, also its canonical path (so that a file created later under the
/// same name is recognised).
fn identities(p: &Path, what: &str) -> Result<Vec<Identity>, Error> {
    let mut out = vec![identity(p, what)?];
    if let Ok(c) = std::fs::canonicalize(p) {
        out.push(Identity::Path(c));
    }
    Ok(out)
}

/// The database file and the files SQLite keeps beside it.
pub fn database_files(db: &Path) -> Vec<(String, PathBuf)> {
    let mut out = vec![("the database".to_string(), db.to_path_buf())];
    for suffix in ["-wal", "-shm", "-journal"] {
        let mut name = db.as_os_str().to_owned();
        name.push(suffix);
        out.push((format!("the database's {suffix} file"), PathBuf::from(name)));
    }
    out
}

/// Refuses `out` (given with `flag`) when it is the same file as any of
/// `protected` (`(what, path)`), compared by device and inode after
/// following links, or by canonical directory and name for files that do
/// not exist yet.
pub fn check_output(flag: &str, out: &Path, protected: &[(String, PathBuf)]) -> Result<(), Error> {
    let what = flag.to_string();
    let mine = identities(out, &what)?;
    for (name, p) in protected {
        let theirs = match identities(&follow_dangling(p), name) {
            Ok(t) => t,
            // A protected path that cannot even be resolved (its directory
            // is missing) cannot be where `out` leads.
            Err(_) => continue,
        };
        if mine.iter().any(|m| theirs.contains(m)) {
            return Err(Error::Input(format!(
                "refusing {flag} {}: it is {name} ({}); writing it would destroy that file. \
                 Give another path",
                out.display(),
                p.display()
            )));
        }
    }
    Ok(())
}

/// Refuses an input that is the database or one of its files.
pub fn check_input(source: &str, id: Option<(u64, u64)>, db: &Path) -> Result<(), Error> {
    let Some((dev, ino)) = id else { return Ok(()) };
    for (name, p) in database_files(db) {
        if let Ok(Identity::File(d, i)) = identity(&p, &name) {
            if (d, i) == (dev, ino) {
                return Err(Error::Input(format!(
                    "refusing to import {source}: it is {name} ({}), which the import writes to",
                    p.display()
                )));
            }
        }
    }
    Ok(())
}

/// Checks a run over several files before anything is opened for writing
/// or imported: no file of the expanded list may be the database or one of
/// its `-wal`/`-shm`/`-journal` files (a glob such as `data/*` can match the
/// database itself), and `--rejects` may be none of them, nor the `--plan`
/// file, either (writing it while an earlier file imports would truncate a
/// later input).
pub fn check_run(
    files: &[String],
    db: &Path,
    rejects: Option<&Path>,
    plan: Option<&Path>,
) -> Result<(), Error> {
    for f in files {
        let id = std::fs::metadata(f).ok().as_ref().and_then(meta_id);
        check_input(f, id, db).map_err(|e| {
            Error::Input(format!(
                "{e}; nothing was imported (leave it out of the file list or pattern)"
            ))
        })?;
    }
    if let Some(r) = rejects {
        let mut protected = database_files(db);
        let n = files.len();
        for (i, f) in files.iter().enumerate() {
            protected.push((format!("input file {} of {n}", i + 1), PathBuf::from(f)));
        }
        if let Some(p) = plan {
            protected.push(("the --plan file".to_string(), p.to_path_buf()));
        }
        check_output("--rejects", r, &protected)?;
    }
    Ok(())
}

/// The table a `--table` (or `--rejects-table`) value names, in the main
/// schema. A name without a dot that does not start with a quote character
/// is taken as written (quotes inside included). Otherwise the value is read as SQL writes a name: one identifier, bare
/// or quoted (`"a.b"`, `[a.b]`, `` `a.b` ``, with a doubled quote inside
/// standing for one), or two separated by a dot, `schema.table`. Schema
/// `main` is the database itself; `temp` (whose tables vanish when the
/// import's connection closes) and any other schema (an attached database:
/// the import's own connection has none) are refused, as is anything else
/// that is not a name, with what to write instead.
pub fn parse_table_flag(flag: &str, value: &str) -> Result<String, Error> {
    if !value.contains('.') && !value.trim_start().starts_with(['"', '`', '[']) {
        return Ok(value.to_string());
    }
    let bad = |why: &str| {
        Error::Input(format!(
            "{flag} {value:?}: {why}; write a table of the database as NAME or main.NAME, and a \
             name holding a dot or a quote in double quotes, with quotes inside doubled \
             (--table '\"my.table\"')"
        ))
    };
    let parts = split_identifiers(value).map_err(|e| bad(&e))?;
    match parts.as_slice() {
        [name] => Ok(name.clone()),
        [schema, name] if schema.eq_ignore_ascii_case("main") => Ok(name.clone()),
        [schema, _]
            if schema.eq_ignore_ascii_case("temp") || schema.eq_ignore_ascii_case("temporary") =>
        {
            Err(bad(
                "a temp table would vanish when the import ends (its connection closes)",
            ))
        }
        [schema, _] => Err(bad(&format!(
            "schema {} is not attached: litelane imports into the database given by --db \
             (schema main); to import into another database file, give it as --db",
            litelane::quote_ident(schema)
        ))),
        _ => Err(bad("more than two dot-separated parts")),
    }
}

/// Splits `s` into SQL identifiers separated by dots: bare (up to the next
/// dot, surrounding spaces trimmed) or quoted with `"`, `` ` `` (a doubled
/// quote inside is one) or `[...]`.
fn split_identifiers(s: &str) -> Result<Vec<String>, String> {
    let mut parts = Vec::new();
    let mut chars = s.trim().chars().peekable();
    loop {
        while chars.peek() == Some(&' ') {
            chars.next();
        }
        let mut part = String::new();
        match chars.peek().copied() {
            Some(q @ ('"' | '`' | '[')) => {
                chars.next();
                let close = if q == '[' { ']' } else { q };
                loop {
                    match chars.next() {
                        None => return Err(format!("the quote {q} is never closed")),
                        Some(c) if c == close => {
                            if close != ']' && chars.peek() == Some(&close) {
                                chars.next();
                                part.push(c);
                            } else {
                                break;
                            }
                        }
                        Some(c) => part.push(c),
                    }
                }
                while chars.peek() == Some(&' ') {
                    chars.next();
                }
            }
            _ => {
                while let Some(&c) = chars.peek() {
                    if c == '.' {
                        break;
                    }
                    if matches!(c, '"' | '`' | '[') {
                        return Err(format!("a quote {c} inside a bare name"));
                    }
                    part.push(c);
                    chars.next();
                }
                part = part.trim_end().to_string();
            }
        }
        if part.is_empty() {
            return Err("an empty name".into());
        }
        parts.push(part);
        match chars.next() {
            None => return Ok(parts),
            Some('.') => {}
            Some(c) => return Err(format!("{c:?} after a quoted name")),
        }
    }
}

/// Table names litelane keeps for itself (compared ignoring ASCII case):
/// `_litelane…` (the progress table) and SQLite's `sqlite_…`.
pub fn check_table_name(table: &str) -> Result<(), Error> {
    let lower = table.to_ascii_lowercase();
    if lower.starts_with("_litelane") || lower.starts_with("sqlite_") {
        return Err(Error::Input(format!(
            "--table {}: names starting with _litelane or sqlite_ are reserved for litelane's \
             and SQLite's own tables; choose another name",
            litelane::quote_ident(table)
        )));
    }
    Ok(())
}

/// Fails with a clear message when nothing can be created in the directory
/// of `db`: SQLite must create the `-wal` and `-shm` files (or the
/// `-journal`) there to write, and would only say "readonly database".
pub fn check_directory(db: &Path) -> Result<(), Error> {
    let dir = match db.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    if !dir.is_dir() {
        return Err(Error::Input(format!(
            "the directory {} of the database {} does not exist",
            dir.display(),
            db.display()
        )));
    }
    match tempfile::Builder::new()
        .prefix(".litelane-probe-")
        .tempfile_in(&dir)
    {
        Ok(_) => Ok(()),
        Err(e) => Err(Error::Input(format!(
            "cannot create files in the directory {} ({e}): SQLite must create the database's \
             -wal and -shm files (or its -journal) beside {} to write to it; make the directory \
             writable or put the database elsewhere",
            dir.display(),
            db.display()
        ))),
    }
}

/// A lock held for an import's duration: one import into a table of a
/// database at a time. It is an advisory lock (`flock`) on a sidecar file
/// `DB.litelane-import-HASH.lock`, released by the operating system when the
/// process ends however it ends, so a killed import never blocks the next.
/// The file is removed when the lock is dropped (the import ends), while it
/// is still held; an import that locked the file just before it was
/// removed sees that the path no longer leads to the file it locked, and
/// starts over with a new file, so two imports never both hold the lock.
pub struct ImportLock {
    file: File,
    path: PathBuf,
}

impl Drop for ImportLock {
    fn drop(&mut self) {
        // Only when the path is still this file (always, unless the user
        // replaced it): a file another import locked is never removed.
        if let (Ok(held), Ok(now)) = (self.file.metadata(), std::fs::metadata(&self.path)) {
            if meta_id(&held).is_some() && meta_id(&held) == meta_id(&now) {
                let _ = std::fs::remove_file(&self.path);
            }
        }
    }
}

/// Attempts at taking the lock when its file is removed under us each time.
const LOCK_ATTEMPTS: usize = 100;

/// The path of the lock file of `table` in `db`: beside the real database
/// file, however it is named (a symbolic link, `./`), so that every path to
/// it shares one lock.
pub fn lock_path(db: &Path, table: &str) -> Result<PathBuf, Error> {
    let hash =
        crate::read::source::fnv1a(0xcbf2_9ce4_8422_2325, table.to_ascii_lowercase().as_bytes());
    // A link to a database not created yet: SQLite will create its target.
    let target = follow_dangling(db);
    let real = match identity(&target, "the database")? {
        Identity::Path(p) => p,
        Identity::File(..) => std::fs::canonicalize(&target)
            .map_err(|e| Error::io(format!("resolving {}", db.display()), e))?,
    };
    let mut name = real.into_os_string();
    name.push(format!(".litelane-import-{hash:016x}.lock"));
    Ok(PathBuf::from(name))
}

/// Takes the lock of `table` in `db`, or explains who holds it.
pub fn lock(db: &Path, table: &str) -> Result<ImportLock, Error> {
    let path = lock_path(db, table)?;
    for _ in 0..LOCK_ATTEMPTS {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(|e| {
                Error::io(
                    format!("creating the import lock file {}", path.display()),
                    e,
                )
            })?;
        match fs4::fs_std::FileExt::try_lock_exclusive(&file) {
            Ok(true) => {}
            Ok(false) => {
                return Err(Error::Input(format!(
                    "another litelane import into table {} of {} is running (it holds {}); \
                     wait for it to finish (a killed import releases the lock by itself)",
                    litelane::quote_ident(table),
                    db.display(),
                    path.display()
                )))
            }
            Err(e) => return Err(Error::io(format!("locking {}", path.display()), e)),
        }
        // Locked: is the path still this file? (The import that held it may
        // have removed it between our open and our lock.)
        let held = file
            .metadata()
            .map_err(|e| Error::io(format!("examining {}", path.display()), e))?;
        match std::fs::metadata(&path) {
            Ok(now) if meta_id(&now) == meta_id(&held) => {
                return Ok(ImportLock { file, path });
            }
            Ok(_) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(Error::io(format!("examining {}", path.display()), e)),
        }
    }
    Err(Error::Input(format!(
        "could not take the import lock {}: it was removed and created again {LOCK_ATTEMPTS} \
         times while being taken",
        path.display()
    )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    #[test]
    fn the_lock_file_is_removed_when_the_import_ends() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("t.db");
        let held = lock(&db, "t").unwrap();
        let path = lock_path(&db, "t").unwrap();
        assert!(path.exists());
        assert!(lock(&db, "T").is_err(), "the same table, another case");
        drop(held);
        assert!(!path.exists(), "{} left behind", path.display());
        // A stale file (a killed import) is taken and removed too.
        std::fs::write(&path, b"").unwrap();
        drop(lock(&db, "t").unwrap());
        assert!(!path.exists());
    }

    /// Imports that take and drop the lock over and over, as fast as they
    /// can: never two at once, although each removes the file it held
    /// (one that locked the file just before its removal starts over).
    #[test]
    fn removing_the_lock_file_never_lets_two_imports_in() {
        let dir = tempfile::tempdir().unwrap();
        let db = Arc::new(dir.path().join("t.db"));
        let inside = Arc::new(AtomicUsize::new(0));
        let taken = Arc::new(AtomicUsize::new(0));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let (db, inside, taken) =
                    (Arc::clone(&db), Arc::clone(&inside), Arc::clone(&taken));
                std::thread::spawn(move || {
                    for _ in 0..200 {
                        loop {
                            if let Ok(l) = lock(&db, "t") {
                                assert_eq!(inside.fetch_add(1, Ordering::SeqCst), 0, "two holders");
                                std::thread::yield_now();
                                inside.fetch_sub(1, Ordering::SeqCst);
                                taken.fetch_add(1, Ordering::SeqCst);
                                drop(l);
                                break;
                            }
                            std::thread::yield_now();
                        }
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(taken.load(Ordering::SeqCst), 800);
        assert!(!lock_path(&db, "t").unwrap().exists());
    }
}
