//! Whose `<db>-lane` lock file the cross-process queue uses, and what a new
//! one looks like (docs/concurrency.md, "Who can do what: the lock file's
//! trust"). Changing owners needs root: the tests that do say so and skip
//! when not run as root (CI runs them as root). The unprivileged user is
//! `nobody` (uid and gid 65534), run through `setpriv`.

use std::os::unix::fs::{chown, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::SystemTime;

use litelane::xproc::{lock_path_for, ProcessQueue, Wait};
use litelane::{Database, Options};

const NOBODY: u32 = 65534;

/// True when running as root; otherwise prints why `test` is skipped.
fn root(test: &str) -> bool {
    let uid = std::fs::metadata("/proc/self").map(|m| m.uid()).ok();
    if uid == Some(0) {
        return true;
    }
    eprintln!("{test}: skipped, needs root to change owners (uid {uid:?})");
    false
}

/// A shared directory (mode 1777, like /tmp) holding `app.db`, an empty
/// file (a valid, empty SQLite database) owned by root, mode 0644.
fn shared_dir() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    set_mode(dir.path(), 0o1777);
    let db = dir.path().join("app.db");
    std::fs::write(&db, b"").unwrap();
    set_mode(&db, 0o644);
    (dir, db)
}

fn set_mode(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// The bytes of a valid lock file, made by the queue for another database.
fn valid_lane_bytes() -> Vec<u8> {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("model.db");
    let q = ProcessQueue::open(&db).unwrap();
    drop(q.acquire("model", Wait::Forever).unwrap().unwrap());
    std::fs::read(lock_path_for(&db)).unwrap()
}

/// Runs `script` under `sh -c` as `nobody` (no supplementary groups), with
/// `$1`… = `args` and `stdin` on its standard input.
fn as_nobody(script: &str, args: &[&Path], stdin: &[u8]) -> Output {
    use std::io::Write;
    let mut child = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .args(["sh", "-c", script, "sh"])
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("setpriv");
    child.stdin.take().unwrap().write_all(stdin).unwrap();
    child.wait_with_output().unwrap()
}

/// What must not change about a file the queue refused: its bytes, owner,
/// group, mode, and modification time.
fn snapshot(path: &Path) -> (Vec<u8>, u32, u32, u32, SystemTime) {
    let md = std::fs::symlink_metadata(path).unwrap();
    (
        std::fs::read(path).unwrap(),
        md.uid(),
        md.gid(),
        md.mode(),
        md.modified().unwrap(),
    )
}

/// Finding 1: in a shared directory, a user who can only read `app.db`
/// plants a valid `app.db-lane` (theirs, mode 0666) before root opens the
/// database. Root's queue refuses it, names the owner, the mode and the
/// rule, and leaves it byte for byte as it was; the engine opens the
/// database without the queue and says why in its metrics.
#[test]
fn a_lock_file_planted_by_another_user_is_refused_and_left_untouched() {
    if !root("a_lock_file_planted_by_another_user_is_refused_and_left_untouched") {
        return;
    }
    let (_dir, db) = shared_dir();
    let lane = lock_path_for(&db);
    let planted = as_nobody(r#"umask 0 && cat > "$1""#, &[&lane], &valid_lane_bytes());
    assert!(planted.status.success(), "plant: {planted:?}");
    let md = std::fs::metadata(&lane).unwrap();
    assert_eq!((md.uid(), md.mode() & 0o777), (NOBODY, 0o666), "planted");
    let before = snapshot(&lane);

    let err = ProcessQueue::open(&db).expect_err("a planted lock file is used");
    assert_eq!(err.lock_path, lane);
    for words in [
        "owned by uid 65534 gid 65534, mode 0666",
        "belongs to the database's owner (uid 0)",
        "left untouched",
    ] {
        assert!(err.reason.contains(words), "{words:?} not in: {err}");
    }

    let opened = Database::open(&db, Options::default()).unwrap();
    let off = opened
        .metrics()
        .process_queue_off
        .expect("the queue is off");
    assert!(off.contains("owned by uid 65534"), "{off}");
    assert!(off.contains(&*lane.to_string_lossy()), "{off}");
    opened
        .write(|tx| Ok(tx.execute_batch("CREATE TABLE t(x); INSERT INTO t VALUES (1)")?))
        .expect("writes go on without the queue");
    drop(opened);

    assert!(before == snapshot(&lane), "the planted file was changed");
}

/// Finding 1, the mode: a lock file whose group or other write bits are
/// wider than the database's (or group-writable by another group) could be
/// written by someone who cannot write the database: refused, untouched.
/// The same file narrowed to what the database allows is used.
#[test]
fn a_lock_file_writable_by_more_than_the_database_is_refused() {
    if !root("a_lock_file_writable_by_more_than_the_database_is_refused") {
        return;
    }
    let bytes = valid_lane_bytes();
    // (what, database mode and gid, lock file mode and gid, words)
    let cases = [
        (
            "world-writable, db 0644",
            (0o644, 0),
            (0o666, 0),
            Some("wider"),
        ),
        (
            "other-writable, db 0664",
            (0o664, 0),
            (0o662, 0),
            Some("wider"),
        ),
        (
            "group-writable, db 0644",
            (0o644, 0),
            (0o660, 0),
            Some("wider"),
        ),
        (
            "group-writable by another group",
            (0o664, 0),
            (0o660, NOBODY),
            Some("group is not the database's (gid 0)"),
        ),
        ("0600 beside a 0644 db", (0o644, 0), (0o600, 0), None),
        ("0644 beside a 0644 db", (0o644, 0), (0o644, 0), None),
        ("0660 beside a 0664 db", (0o664, 0), (0o660, 0), None),
    ];
    for (what, (db_mode, db_gid), (lane_mode, lane_gid), words) in cases {
        let (_dir, db) = shared_dir();
        set_mode(&db, db_mode);
        chown(&db, None, Some(db_gid)).unwrap();
        let lane = lock_path_for(&db);
        std::fs::write(&lane, &bytes).unwrap();
        set_mode(&lane, lane_mode);
        chown(&lane, Some(0), Some(lane_gid)).unwrap();
        let before = snapshot(&lane);
        match (ProcessQueue::open(&db), words) {
            (Err(err), Some(words)) => {
                assert!(err.reason.contains(words), "{what}: {err}");
                assert!(
                    err.reason.contains(&format!("mode {lane_mode:04o}")),
                    "{what}: {err}"
                );
                assert!(before == snapshot(&lane), "{what}: the file was changed");
            }
            (Ok(q), None) => drop(q.acquire(what, Wait::Forever).unwrap().unwrap()),
            (Ok(_), Some(_)) => panic!("{what}: used"),
            (Err(err), None) => panic!("{what}: refused: {err}"),
        }
    }
}

/// Finding 2: root is the first to open a database that belongs to the
/// application's user (`nobody` here, mode 0664): the lock file it creates
/// belongs to that user and group, as SQLite's `-wal` and `-shm` do, so
/// the application's own processes can open it for writing afterwards.
#[test]
fn root_gives_a_new_lock_file_to_the_databases_owner() {
    if !root("root_gives_a_new_lock_file_to_the_databases_owner") {
        return;
    }
    let (_dir, db) = shared_dir();
    set_mode(&db, 0o664);
    chown(&db, Some(NOBODY), Some(NOBODY)).unwrap();
    let q = ProcessQueue::open(&db).unwrap();
    drop(q.acquire("root", Wait::Forever).unwrap().unwrap());
    let lane = lock_path_for(&db);
    let md = std::fs::metadata(&lane).unwrap();
    assert_eq!(
        (md.uid(), md.gid()),
        (NOBODY, NOBODY),
        "owner and group of the new lock file"
    );
    let opened = as_nobody(r#"exec 3<>"$1""#, &[&lane], b"");
    assert!(
        opened.status.success(),
        "the database's owner cannot open the lock file for writing: {}",
        String::from_utf8_lossy(&opened.stderr)
    );
    // Root goes on using the file it gave away (it is the database owner's).
    drop(
        ProcessQueue::open(&db)
            .unwrap()
            .acquire("root again", Wait::Forever)
            .unwrap()
            .unwrap(),
    );
}

/// Finding 3: a new lock file gives read and write to exactly the classes
/// that may write the database, whatever the umask: a user who may only
/// read a 0644 database cannot even open its lock file (no read locks to
/// take); group writers of a 0664 database can.
#[test]
fn a_new_lock_files_mode_follows_the_databases_write_classes() {
    for (db_mode, lane_mode) in [
        (Some(0o644), 0o600),
        (Some(0o664), 0o660),
        (Some(0o666), 0o666),
        (Some(0o600), 0o600),
        (Some(0o640), 0o600),
        // A database that does not exist yet is created 0644 by SQLite.
        (None, 0o600),
    ] {
        let (_dir, db) = shared_dir();
        match db_mode {
            Some(m) => set_mode(&db, m),
            None => std::fs::remove_file(&db).unwrap(),
        }
        let q = ProcessQueue::open(&db).unwrap();
        drop(q.acquire("mode", Wait::Forever).unwrap().unwrap());
        let lane = lock_path_for(&db);
        let md = std::fs::metadata(&lane).unwrap();
        let what = db_mode.map_or("a new database".into(), |m| format!("a {m:04o} database"));
        assert_eq!(
            md.mode() & 0o7777,
            lane_mode,
            "{what}: lock file mode {:04o}",
            md.mode() & 0o7777
        );
        if db_mode == Some(0o644) && root("the reader part of the mode test") {
            let read = as_nobody(r#"exec 3<"$1""#, &[&lane], b"");
            assert!(
                !read.status.success(),
                "a reader of the database opened its lock file"
            );
        }
    }
}
