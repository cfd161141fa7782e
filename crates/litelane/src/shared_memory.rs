//! Shared in-memory databases by URI (`file:name?mode=memory&cache=shared`,
//! `file::memory:?cache=shared`), kept in a file of the process's own.
//!
//! SQLite shares such a database between the connections of a process
//! through its shared cache, where a write transaction locks only the tables
//! it writes: readers go on reading the others. litelane is built without the
//! shared cache, and its engine reads on connections beside the writer's. An
//! in-memory database of SQLite's `memdb` VFS has one lock for the whole
//! database, so an open write transaction (Datasette's write thread leaves
//! one open between its writes) made every read wait, then fail with
//! "database is locked". Kept in a file in WAL mode instead, readers read the
//! last committed state beside an open write transaction, as they do for a
//! file database.
//!
//! The file is made in `/dev/shm` (a memory file system) where there is one,
//! else in the temporary directory, under a name no other database uses,
//! readable by this user alone (SQLite gives the `-wal` and `-shm` files the
//! database file's permissions). Every engine of the process that opens the
//! same name shares it; it is removed, with the files beside it, when the
//! last of them closes, as SQLite frees the database when its last
//! connection closes. A process that exits with engines still open (Python
//! rarely collects every object at exit) removes them at exit instead
//! ([`remove_open_files`], which the Python package calls from `atexit`),
//! and the files of a process that died without either (killed) are removed
//! by the next process that makes one ([`remove_files_of_dead_processes`]).

use std::collections::HashMap;
use std::fs::OpenOptions;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{LazyLock, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::error::{Error, Result};
use crate::unpoisoned::lock;

/// The files of the shared in-memory databases open in this process: by the
/// name in the URI, the file and how many engines have it open.
static OPEN: LazyLock<Mutex<HashMap<String, (PathBuf, usize)>>> = LazyLock::new(Default::default);

/// One engine's hold on the file of a shared in-memory database: the last
/// one dropped removes it.
pub(crate) struct SharedMemoryFile {
    name: String,
    path: PathBuf,
}

impl SharedMemoryFile {
    /// The file of the shared in-memory database `name` (the URI's file
    /// name), made empty for the first engine of the process that opens it.
    pub fn acquire(name: &str) -> Result<SharedMemoryFile> {
        let mut open = lock(&OPEN);
        if let Some((path, engines)) = open.get_mut(name) {
            *engines += 1;
            return Ok(SharedMemoryFile {
                name: name.to_string(),
                path: path.clone(),
            });
        }
        let path = new_file()?;
        open.insert(name.to_string(), (path.clone(), 1));
        Ok(SharedMemoryFile {
            name: name.to_string(),
            path,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for SharedMemoryFile {
    fn drop(&mut self) {
        let mut open = lock(&OPEN);
        let last = match open.get_mut(&self.name) {
            Some((_, engines)) => {
                *engines -= 1;
                *engines == 0
            }
            None => false,
        };
        if last {
            open.remove(&self.name);
            remove_with_beside(&self.path);
        }
    }
}

/// The start of the names of the files made here.
const PREFIX: &str = "litelane-memory-";

/// Removes the files of every shared in-memory database this process made
/// and still has open (they are dropped from the registry: the engines' own
/// drops then leave the files alone). For a process's exit: the databases
/// die with the process, as SQLite's do, and their files would otherwise
/// stay in `/dev/shm`. A forked child, whose files are its parent's, removes
/// nothing.
pub(crate) fn remove_open_files() {
    if MADE.load(Ordering::Acquire) {
        // Those of processes killed meanwhile too (a child that got
        // SIGTERM runs no exit handler): the next run would find them.
        remove_files_of_dead_processes(&files_dir());
    }
    let mut open = lock(&OPEN);
    let own = format!("{PREFIX}{}-", std::process::id());
    for (path, _) in open.values() {
        let ours = path
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with(&own));
        if ours {
            remove_with_beside(path);
        }
    }
    open.clear();
}

/// Removes the database file at `path` and the files beside it.
fn remove_with_beside(path: &Path) {
    for suffix in crate::DATABASE_FILE_SUFFIXES {
        let mut name = path.to_path_buf().into_os_string();
        name.push(suffix);
        let _ = std::fs::remove_file(name);
    }
}

/// Removes from `dir` the files of shared in-memory databases made by
/// processes that no longer run (killed before they could remove them),
/// where `/proc` says which processes run. Returns how many were removed.
fn remove_files_of_dead_processes(dir: &Path) -> usize {
    if !Path::new("/proc/self").exists() {
        return 0;
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    let mut removed = 0;
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(rest) = name.to_str().and_then(|n| n.strip_prefix(PREFIX)) else {
            continue;
        };
        let Some(pid) = rest.split('-').next().and_then(|p| p.parse::<u32>().ok()) else {
            continue;
        };
        if pid != std::process::id()
            && !process_runs(pid)
            && std::fs::remove_file(entry.path()).is_ok()
        {
            removed += 1;
        }
    }
    removed
}

/// Whether this process made a file here (then its exit looks for the files
/// of dead processes too).
static MADE: AtomicBool = AtomicBool::new(false);

/// Where the files go: `/dev/shm`, or else the temporary directory.
fn files_dir() -> PathBuf {
    let shm = Path::new("/dev/shm");
    if shm.is_dir() {
        shm.to_path_buf()
    } else {
        std::env::temp_dir()
    }
}

/// Whether process `pid` runs, as `/proc` says: a zombie (exited, not yet
/// reaped: a child stopped with `terminate()` and never waited for) does not.
fn process_runs(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // "pid (command) state ...": the command may hold spaces and ')'.
        Ok(stat) => stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.trim_start().chars().next())
            .is_some_and(|state| state != 'Z' && state != 'X'),
        Err(_) => false,
    }
}

/// A new empty file, readable and writable by this user alone, in
/// [`files_dir`].
fn new_file() -> Result<PathBuf> {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let dir = files_dir();
    remove_files_of_dead_processes(&dir);
    MADE.store(true, Ordering::Release);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let mut last = None;
    for _ in 0..100 {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let path = dir.join(format!("{PREFIX}{}-{nanos:08x}-{n}.db", std::process::id()));
        match OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)
        {
            Ok(_) => return Ok(path),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => last = Some(e),
            Err(e) => {
                return Err(Error::os(
                    format!(
                        "creating the file of a shared in-memory database in {}",
                        dir.display()
                    ),
                    e,
                ))
            }
        }
    }
    Err(Error::os(
        format!(
            "creating the file of a shared in-memory database in {}",
            dir.display()
        ),
        last.unwrap_or_else(|| std::io::Error::other("no free name")),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_file_per_name_removed_with_the_last_hold() {
        let a = SharedMemoryFile::acquire("shared-memory-test-a").unwrap();
        let b = SharedMemoryFile::acquire("shared-memory-test-a").unwrap();
        let c = SharedMemoryFile::acquire("shared-memory-test-c").unwrap();
        assert_eq!(a.path(), b.path());
        assert_ne!(a.path(), c.path());
        let path = a.path().to_path_buf();
        std::fs::write(format!("{}-wal", path.display()), b"x").unwrap();
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        drop(a);
        assert!(path.exists());
        drop(b);
        assert!(!path.exists());
        assert!(!Path::new(&format!("{}-wal", path.display())).exists());
        // A name opened again after its last close is a new, empty database.
        let d = SharedMemoryFile::acquire("shared-memory-test-a").unwrap();
        assert_ne!(d.path(), path);
        assert_eq!(std::fs::metadata(d.path()).unwrap().len(), 0);
        drop((c, d));
    }

    #[test]
    fn files_of_dead_processes_are_removed_and_of_live_ones_kept() {
        let dir = std::env::temp_dir().join(format!("litelane-shm-sweep-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        // A pid above the kernel's pid_max (4,194,304) never runs.
        let dead = dir.join(format!("{PREFIX}4294967295-0-0.db-wal"));
        let live = dir.join(format!("{PREFIX}{}-0-0.db", std::process::id()));
        let parent = dir.join(format!("{PREFIX}1-0-0.db")); // init runs
        let other = dir.join("unrelated-4294967295.db");
        for f in [&dead, &live, &parent, &other] {
            std::fs::write(f, b"x").unwrap();
        }
        // An exited child not yet waited for (a zombie) runs no more.
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let zombie_pid = child.id();
        let zombie = dir.join(format!("{PREFIX}{zombie_pid}-0-0.db"));
        std::fs::write(&zombie, b"x").unwrap();
        let waited = std::time::Instant::now();
        while process_runs(zombie_pid) {
            assert!(waited.elapsed().as_secs() < 10, "`true` never exited");
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert!(Path::new(&format!("/proc/{zombie_pid}")).exists());
        assert_eq!(remove_files_of_dead_processes(&dir), 2);
        child.wait().unwrap();
        assert!(!dead.exists() && !zombie.exists());
        assert!(live.exists() && parent.exists() && other.exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
