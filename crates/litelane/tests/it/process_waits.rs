//! Every wait for another process's write turn ends by the caller's
//! timeout with `SQLITE_BUSY` naming what held it: a holder that is stopped
//! (SIGSTOP), and a lock on the lock file taken by a process that is not a
//! litelane writer (an unprivileged user with read access to the database
//! can take a read lock on the header mutex, byte 0, or the turn byte, 1).
//!
//! The holder is this test binary, re-run with the ignored test
//! `process_waits_child` selected; the foreign lock is taken by `python3`
//! (as user `nobody` through `setpriv` when the tests run as root).

use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use litelane::xproc::Wait;
use litelane::{Database, Error, Options, Profile};

const DB: &str = "LITELANE_WAITS_DB";
const PROFILE: &str = "LITELANE_WAITS_PROFILE";

/// The bounds a wait of a 1 s timeout must end within: not before it, and
/// well before anything that looks like a hang.
const LOW: Duration = Duration::from_millis(900);
const HIGH: Duration = Duration::from_secs(4);

fn profile(name: &str) -> Profile {
    match name {
        "safe" => Profile::Safe,
        _ => Profile::Balanced,
    }
}

/// The child: holds the writer of every process in one transaction, prints
/// `HOLDING`, and sleeps (the parent stops it, then kills it).
#[test]
#[ignore = "run only as a child of the process_waits tests"]
fn process_waits_child() {
    let path = std::env::var(DB).expect("run by the process_waits tests");
    let p = std::env::var(PROFILE).unwrap_or_default();
    let db = Database::open(&path, Options::with_profile(profile(&p))).unwrap();
    db.write_labeled("stopped holder", |tx| {
        tx.execute("INSERT INTO t(x) VALUES (0)", [])?;
        println!("\nHOLDING");
        std::thread::sleep(Duration::from_secs(120));
        Ok(())
    })
    .unwrap();
}

/// Kills (SIGKILL) the child on drop, continuing it first if stopped.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let pid = self.0.id().to_string();
        let _ = Command::new("kill").args(["-CONT", &pid]).status();
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A database with table `t`, in a directory any user may read (for the
/// foreign locker), created with its lock file.
fn create(dir: &Path, p: Profile) -> std::path::PathBuf {
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = dir.join("w.db");
    let db = Database::open(&path, Options::with_profile(p)).unwrap();
    db.write(|tx| Ok(tx.execute_batch("CREATE TABLE t(x)")?))
        .unwrap();
    path
}

/// Waits for `child` to print `line`.
fn wait_for(child: &mut Child, line: &str) {
    let out = child.stdout.take().unwrap();
    let mut lines = BufReader::new(out).lines();
    loop {
        let got = lines
            .next()
            .unwrap_or_else(|| panic!("the child ended before printing {line}"))
            .unwrap();
        if got == line {
            break;
        }
    }
    // Keep draining its output, so it never blocks on a full pipe.
    std::thread::spawn(move || lines.for_each(drop));
}

fn options(p: Profile, busy_timeout: Duration) -> Options {
    let mut o = Options::with_profile(p);
    o.busy_timeout = busy_timeout;
    o
}

/// Runs `write` and checks it failed with `SQLITE_BUSY` in `[LOW, HIGH)`,
/// its message saying `names` and that another process held the turn.
fn ends_busy(what: &str, names: &str, write: impl FnOnce() -> litelane::Result<()>) {
    let start = Instant::now();
    let r = write();
    let took = start.elapsed();
    let e = r
        .err()
        .unwrap_or_else(|| panic!("{what}: the write succeeded"));
    assert!(e.is_busy(), "{what}: not SQLITE_BUSY: {e}");
    assert!(
        (LOW..HIGH).contains(&took),
        "{what}: ended after {took:?}: {e}"
    );
    let Error::Sqlite { message, .. } = &e else {
        panic!("{what}: {e:?}");
    };
    // The message alone is what Python shows.
    assert!(
        message.starts_with("database is locked"),
        "{what}: {message}"
    );
    assert!(message.contains("another process"), "{what}: {message}");
    assert!(
        message.contains(names),
        "{what}: {names:?} not in {message}"
    );
    eprintln!("{what}: {took:?}: {e}");
}

fn insert(db: &Database) -> impl FnOnce() -> litelane::Result<()> + '_ {
    || db.execute("INSERT INTO t(x) VALUES (1)", &[]).map(drop)
}

fn transaction(db: &Database) -> impl FnOnce() -> litelane::Result<()> + '_ {
    || db.write(|tx| Ok(tx.execute("INSERT INTO t(x) VALUES (2)", []).map(drop)?))
}

/// A holder stopped with SIGSTOP inside its transaction: writers of other
/// processes, autocommit and transaction, fail at their timeout (1 s) with
/// the holder's pid and label, under both profiles; the timeout is the
/// `Options::busy_timeout` or, given one, the caller's
/// (`litelane::with_process_wait`).
#[test]
fn a_stopped_holder_ends_the_waits_of_other_processes_at_their_timeout() {
    for p in ["balanced", "safe"] {
        let dir = tempfile::tempdir().unwrap();
        let path = create(dir.path(), profile(p));
        let exe = std::env::current_exe().unwrap();
        let mut child = Command::new(exe)
            .args([
                "--ignored",
                "--exact",
                "process_waits::process_waits_child",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(DB, &path)
            .env(PROFILE, p)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        wait_for(&mut child, "HOLDING");
        let pid = child.id();
        let child = Killed(child);
        assert!(Command::new("kill")
            .args(["-STOP", &pid.to_string()])
            .status()
            .unwrap()
            .success());
        let names = format!("process {pid} (stopped holder)");
        let db = Database::open(&path, options(profile(p), Duration::from_secs(1))).unwrap();
        ends_busy(&format!("{p} autocommit"), &names, insert(&db));
        ends_busy(&format!("{p} transaction"), &names, transaction(&db));
        drop(db);
        // The caller's timeout, not the engine's (30 s), bounds the wait.
        let db = Database::open(&path, options(profile(p), Duration::from_secs(30))).unwrap();
        let one = Some(Duration::from_secs(1));
        ends_busy(&format!("{p} autocommit, caller's timeout"), &names, || {
            litelane::with_process_wait(one, None, insert(&db))
        });
        ends_busy(
            &format!("{p} transaction, caller's timeout"),
            &names,
            || litelane::with_process_wait(one, None, transaction(&db)),
        );
        drop(child);
    }
}

/// Takes an open-file-description read lock on `byte` of `lock_file`
/// through a descriptor opened read-only, as user `nobody` when root (a user
/// with read access to the database); `None` (the test is skipped) without
/// `python3` or `setpriv`.
fn foreign_read_lock(lock_file: &Path, byte: u64) -> Option<Killed> {
    const SCRIPT: &str = "import fcntl, os, struct, sys, time\n\
        fd = os.open(sys.argv[1], os.O_RDONLY)\n\
        fcntl.fcntl(fd, fcntl.F_OFD_SETLK, struct.pack('hh4xqqi4x', fcntl.F_RDLCK, 0, int(sys.argv[2]), 1, 0))\n\
        print('LOCKED', flush=True)\n\
        time.sleep(120)\n";
    // A new lock file is readable only by those who may write the database
    // (xproc/trust.rs), so a reader cannot open it at all. One made by an
    // older version kept the database's read bits: the case tested here.
    std::fs::set_permissions(lock_file, std::fs::Permissions::from_mode(0o644))
        .expect("chmod the lock file");
    let root = Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| o.stdout.starts_with(b"0\n"));
    // The system's interpreter: one under root's home (pyenv) is not
    // reachable by nobody.
    let python = ["/usr/bin/python3", "/usr/local/bin/python3"]
        .into_iter()
        .find(|p| Path::new(p).exists())
        .unwrap_or("python3");
    let mut c = if root {
        let mut c = Command::new("setpriv");
        c.args(["--reuid=65534", "--regid=65534", "--clear-groups", python]);
        c
    } else {
        eprintln!("not root: the foreign lock is taken by this user, not by nobody");
        Command::new(python)
    };
    let spawned = c
        .args(["-c", SCRIPT])
        .arg(lock_file)
        .arg(byte.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn();
    let mut child = match spawned {
        Ok(c) => c,
        Err(e) => {
            eprintln!("skipped: cannot run python3 (through setpriv when root): {e}");
            return None;
        }
    };
    wait_for(&mut child, "LOCKED");
    Some(Killed(child))
}

/// A process that is not a litelane writer read-locks `byte` of the lock
/// file. On the turn byte (1), writers, autocommit and transaction, opened
/// before the lock or while it is held, fail at their timeout (1 s) with an
/// error that says so, instead of waiting for as long as the lock is held.
/// On the header mutex (0), a writer that must queue by ticket (another
/// writer holds the turn) fails the same way; a database opened while it is
/// held goes on without the queue (SQLite's own locks still order the
/// writes), after at most its timeout.
fn a_foreign_lock_ends_writers_at_their_timeout(byte: u64) {
    let dir = tempfile::tempdir().unwrap();
    let path = create(dir.path(), Profile::Balanced);
    let one = Duration::from_secs(1);
    let before = Database::open(&path, options(Profile::Balanced, one)).unwrap();
    let q = litelane::xproc::ProcessQueue::open(&path).unwrap();
    let held = (byte == 0).then(|| q.acquire("other writer", Wait::Forever).unwrap().unwrap());
    let Some(locker) = foreign_read_lock(q.lock_path(), byte) else {
        return;
    };
    let names = "not a litelane writer";
    ends_busy(&format!("byte {byte}: autocommit"), names, insert(&before));
    ends_busy(
        &format!("byte {byte}: transaction"),
        names,
        transaction(&before),
    );
    let opening = Instant::now();
    let after = Database::open(&path, options(Profile::Balanced, one)).unwrap();
    assert!(
        opening.elapsed() < HIGH,
        "open took {:?}",
        opening.elapsed()
    );
    if byte == 0 {
        let off = after.metrics().process_queue_off;
        assert!(
            off.as_deref().is_some_and(|why| why.contains(names)),
            "{off:?}"
        );
        drop(held);
        insert(&after)().unwrap();
    } else {
        ends_busy(
            &format!("byte {byte}: autocommit, opened after"),
            names,
            insert(&after),
        );
        ends_busy(
            &format!("byte {byte}: transaction, opened after"),
            names,
            transaction(&after),
        );
    }
    drop(locker);
    // Once the lock is gone, writes go through again.
    insert(&after)().unwrap();
    transaction(&before)().unwrap();
}

#[test]
fn a_foreign_read_lock_on_the_header_mutex_ends_writers_at_their_timeout() {
    a_foreign_lock_ends_writers_at_their_timeout(0);
}

#[test]
fn a_foreign_read_lock_on_the_turn_byte_ends_writers_at_their_timeout() {
    a_foreign_lock_ends_writers_at_their_timeout(1);
}
