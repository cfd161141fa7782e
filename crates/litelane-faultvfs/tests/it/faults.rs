//! Injected faults under litelane: disk full (mid-transaction, mid-group,
//! mid-checkpoint, mid-import), I/O errors on write, fsync and read, short
//! writes and reads, corrupt pages, the database file deleted or replaced.
//!
//! For each: the caller gets a clear error, the transaction rolls back,
//! every caller of a group is told its exact outcome (told Ok ⇔ its row is
//! stored, checked by reading back once the fault is cleared), nothing
//! committed is lost, and the next write succeeds without reopening;
//! except a failed fsync at COMMIT, whose outcome is unknown: every caller
//! of that commit is told `Error::OutcomeUnknown` and the handle refuses
//! writes (`Error::WritesStopped`) until reopened (issue 18).

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::mpsc;
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

use litelane::{CheckpointMode, Database, Error, Options, Profile, Value};
use litelane_faultvfs::{CutReport, Effect, Fault, FaultVfs, FileKind, Op};

use crate::common::stored_ids;

const SQLITE_IOERR: i32 = 10;
const SQLITE_FULL: i32 = 13;
const SQLITE_SCHEMA: i32 = 17;
const SQLITE_IOERR_READ: i32 = 266;
const SQLITE_IOERR_WRITE: i32 = 778;
const SQLITE_IOERR_FSYNC: i32 = 1034;

fn open(
    vfs: &FaultVfs,
    profile: Profile,
    tweak: impl FnOnce(&mut Options),
) -> (tempfile::TempDir, Database) {
    let dir = tempfile::tempdir().unwrap();
    let mut o = Options::with_profile(profile);
    o.vfs = Some(vfs.name().to_string());
    o.readers = 2;
    o.async_threads = 1;
    tweak(&mut o);
    let db = Database::open(dir.path().join("db"), o).unwrap();
    db.write(|tx| Ok(tx.execute_batch("CREATE TABLE t(id INTEGER PRIMARY KEY, pad BLOB)")?))
        .unwrap();
    (dir, db)
}

fn insert(db: &Database, id: i64, pad: i64) -> litelane::Result<usize> {
    db.write(|tx| Ok(tx.execute("INSERT INTO t VALUES (?, randomblob(?))", [id, pad])?))
}

fn ids(db: &Database) -> BTreeSet<i64> {
    db.read(|c| {
        let mut st = c.prepare("SELECT id FROM t")?;
        let v = st
            .query_map([], |r| r.get(0))?
            .collect::<Result<BTreeSet<i64>, _>>()?;
        Ok(v)
    })
    .unwrap()
}

fn integrity_ok(db: &Database) {
    let s: String = db
        .read(|c| Ok(c.query_row("PRAGMA integrity_check", [], |r| r.get(0))?))
        .unwrap();
    assert_eq!(s, "ok");
}

/// A clear error: SQLite's code, and words a user can act on.
fn assert_clear(err: &Error, code: i32, words: &[&str]) {
    assert_eq!(err.sqlite_code(), Some(code), "wrong code: {err}");
    let text = err.to_string().to_lowercase();
    assert!(
        words.iter().any(|w| text.contains(w)),
        "error {text:?} says none of {words:?}"
    );
}

/// Cuts the power now (seed `seed`), then opens the image the cut left in
/// `dir/cut`: asserts it passes `integrity_check` and returns the cut's
/// report and the ids stored in `t`.
fn cut_image(vfs: &FaultVfs, seed: u64, dir: &Path) -> (CutReport, BTreeSet<i64>) {
    let out = dir.join("cut");
    let report = vfs.cut_now(seed, &out);
    let c = rusqlite::Connection::open(out.join("db")).unwrap();
    let ok: String = c
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap();
    assert_eq!(ok, "ok", "seed {seed}: {report:?}");
    let stored: BTreeSet<i64> = stored_ids(&c);
    (report, stored)
}

/// Commits `n` rows, ids `from..from+n`, one transaction each.
fn committed(db: &Database, from: i64, n: i64) -> BTreeSet<i64> {
    (from..from + n)
        .inspect(|&i| {
            insert(db, i, 500).unwrap();
        })
        .collect()
}

#[test]
fn disk_full_mid_transaction_rolls_back_and_the_next_write_succeeds() {
    let vfs = FaultVfs::register().unwrap();
    let (_dir, db) = open(&vfs, Profile::Safe, |_| {});
    let mut want = committed(&db, 0, 10);
    vfs.set_disk_space(Some(40_000));
    let err = db
        .write(|tx| {
            for i in 100..300 {
                tx.execute("INSERT INTO t VALUES (?, randomblob(2000))", [i])?;
            }
            Ok(())
        })
        .unwrap_err();
    assert_clear(&err, SQLITE_FULL, &["full"]);
    // The chain ends in SQLite's code, by name.
    let code = std::error::Error::source(&err)
        .and_then(|c| c.downcast_ref::<litelane::SqliteCode>())
        .unwrap_or_else(|| panic!("no SQLite code under {err:?}"));
    assert_eq!((code.name(), code.code()), ("SQLITE_FULL", SQLITE_FULL));
    assert!(vfs.faults_fired() == 0, "disk full is not an armed fault");
    vfs.set_disk_space(None);
    insert(&db, 1000, 500).expect("the next write succeeds without reopening");
    want.insert(1000);
    assert_eq!(ids(&db), want);
    integrity_ok(&db);
}

/// Holds the writer until the returned sender is dropped or sent to; the
/// blocker's own row (id `id`) is written in the same group as the queue.
fn hold_writer(
    db: &Database,
    id: i64,
) -> (
    mpsc::Sender<()>,
    thread::JoinHandle<litelane::Result<usize>>,
) {
    let (go, wait) = mpsc::channel::<()>();
    let started = Arc::new(Barrier::new(2));
    let s2 = Arc::clone(&started);
    let db2 = db.clone();
    let h = thread::spawn(move || {
        db2.write(move |tx| {
            s2.wait();
            let _ = wait.recv();
            Ok(tx.execute("INSERT INTO t VALUES (?, randomblob(3000))", [id])?)
        })
    });
    started.wait();
    (go, h)
}

fn wait_for_queue(db: &Database, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while db.metrics().queue_depth < n {
        assert!(Instant::now() < deadline, "the queue never reached {n}");
        thread::sleep(Duration::from_millis(2));
    }
}

/// Runs a group of `n` writers behind a held writer with `fault` applied
/// just before the group runs; returns (id, told ok) for every member.
fn group_under_fault(
    db: &Database,
    n: i64,
    pad: i64,
    apply: impl FnOnce(),
) -> Vec<(i64, Result<usize, Error>)> {
    let (go, blocker) = hold_writer(db, 500);
    let members: Vec<_> = (0..n)
        .map(|i| {
            let db = db.clone();
            let id = 501 + i;
            (id, thread::spawn(move || insert(&db, id, pad)))
        })
        .collect();
    wait_for_queue(db, n as usize);
    apply();
    go.send(()).unwrap();
    let mut out = vec![(500, blocker.join().unwrap())];
    for (id, h) in members {
        out.push((id, h.join().unwrap()));
    }
    out
}

/// Told Ok ⇔ stored, for every member of the group.
fn assert_exact_outcomes(db: &Database, outcomes: &[(i64, Result<usize, Error>)]) -> usize {
    let stored = ids(db);
    let mut failed = 0;
    for (id, r) in outcomes {
        match r {
            Ok(_) => assert!(
                stored.contains(id),
                "write {id} was told Ok but is not stored"
            ),
            Err(e) => {
                failed += 1;
                assert!(
                    !stored.contains(id),
                    "write {id} was told {e} but is stored"
                );
            }
        }
    }
    failed
}

#[test]
fn disk_full_at_a_group_commit_fails_every_member_and_stores_none() {
    let vfs = FaultVfs::register().unwrap();
    let (_dir, db) = open(&vfs, Profile::Safe, |o| {
        o.group_commit.max_wait = Duration::from_secs(5);
    });
    let before = committed(&db, 0, 5);
    // The group's pages stay in the cache until COMMIT, which fails.
    let outcomes = group_under_fault(&db, 6, 3000, || vfs.set_disk_space(Some(6_000)));
    vfs.set_disk_space(None);
    let failed = assert_exact_outcomes(&db, &outcomes);
    assert_eq!(
        failed,
        outcomes.len(),
        "a member escaped the failed COMMIT: {outcomes:?}"
    );
    for (_, r) in &outcomes {
        let e = r.as_ref().unwrap_err();
        assert_clear(e, SQLITE_FULL, &["full"]);
        // The error names the group, so the writes really shared a COMMIT.
        let text = e.to_string();
        let n: usize = text
            .split("group of ")
            .nth(1)
            .and_then(|rest| rest.split(' ').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no group size in {text:?}"));
        assert!(n > 1, "no group formed: {text}");
    }
    assert!(ids(&db).is_superset(&before), "a committed row was lost");
    insert(&db, 2000, 10).expect("the next write succeeds");
    integrity_ok(&db);
}

/// A group whose COMMIT's fsync fails: every member, the leader and the
/// writers whose closures it ran, is told OutcomeUnknown naming the group,
/// with the queue on and off.
#[test]
fn an_fsync_error_at_a_group_commit_tells_every_member_unknown() {
    for queue in [true, false] {
        let vfs = FaultVfs::register().unwrap();
        let (_dir, db) = open(&vfs, Profile::Safe, |o| {
            o.group_commit.max_wait = Duration::from_secs(5);
            o.process_queue = queue;
        });
        let before = committed(&db, 0, 5);
        let rollbacks = db.metrics().rollbacks;
        let outcomes = group_under_fault(&db, 6, 100, || {
            vfs.arm(Fault::new(Op::Sync, Effect::IoError).file(FileKind::Wal))
                .unwrap()
        });
        assert_eq!(vfs.faults_fired(), 1);
        assert_eq!(outcomes.len(), 7);
        // Counted as what they are: not rolled back, of unknown outcome.
        let m = db.metrics();
        assert_eq!(m.outcomes_unknown, 7, "queue {queue}");
        assert_eq!(m.rollbacks, rollbacks, "queue {queue}");
        for (id, r) in &outcomes {
            let e = r.as_ref().err().unwrap_or_else(|| panic!("{id} told Ok"));
            assert_unknown(e);
            assert!(e.to_string().contains("group of 7"), "queue {queue}: {e}");
        }
        assert!(ids(&db).is_superset(&before), "a committed row was lost");
        assert_stopped(&insert(&db, 2000, 10).unwrap_err(), &[]);
    }
}

#[test]
fn disk_full_inside_one_job_of_a_group_tells_each_member_its_own_outcome() {
    // A tiny page cache makes each job's pages spill to the WAL as it runs,
    // so the disk fills inside a job's statement, in the middle of a group.
    let vfs = FaultVfs::register().unwrap();
    let (_dir, db) = open(&vfs, Profile::Safe, |o| {
        o.group_commit.max_wait = Duration::from_secs(5);
        o.cache_size_kib = 16;
    });
    let before = committed(&db, 0, 5);
    let outcomes = group_under_fault(&db, 6, 20_000, || vfs.set_disk_space(Some(60_000)));
    vfs.set_disk_space(None);
    let failed = assert_exact_outcomes(&db, &outcomes);
    assert!(failed > 0, "the disk never filled: {outcomes:?}");
    assert!(ids(&db).is_superset(&before), "a committed row was lost");
    insert(&db, 2000, 10).expect("the next write succeeds");
    assert!(ids(&db).contains(&2000));
    integrity_ok(&db);
}

#[test]
fn disk_full_mid_checkpoint_loses_nothing_and_the_next_checkpoint_completes() {
    let vfs = FaultVfs::register().unwrap();
    let (_dir, db) = open(&vfs, Profile::Balanced, |o| {
        o.checkpoints.background = false;
    });
    let want: BTreeSet<i64> = (0..60)
        .inspect(|&i| {
            insert(&db, i, 3000).unwrap();
        })
        .collect();
    // The WAL is written; the database file must grow to take the pages.
    vfs.set_disk_space(Some(8_192));
    let err = db.checkpoint(CheckpointMode::Truncate).unwrap_err();
    assert_clear(&err, SQLITE_FULL, &["full"]);
    assert_eq!(ids(&db), want, "rows lost after a failed checkpoint");
    vfs.set_disk_space(None);
    insert(&db, 100, 10).expect("the next write succeeds");
    let rep = db.checkpoint(CheckpointMode::Truncate).unwrap();
    assert!(!rep.busy);
    let mut want = want;
    want.insert(100);
    assert_eq!(ids(&db), want);
    integrity_ok(&db);
}

#[test]
fn disk_full_mid_import_keeps_whole_batches_and_a_rerun_finishes() {
    let vfs = FaultVfs::register().unwrap();
    let (_dir, db) = open(&vfs, Profile::Balanced, |_| {});
    let rows =
        |from: i64, to: i64| (from..to).map(|i| vec![Value::Integer(i), Value::Blob(vec![1; 400])]);
    vfs.set_disk_space(Some(200_000));
    let err = db
        .inserter("t", &["id", "pad"])
        .unwrap()
        .commit_every(100)
        .insert(rows(0, 3000))
        .unwrap_err();
    assert_clear(&err, SQLITE_FULL, &["full"]);
    vfs.set_disk_space(None);
    let got = ids(&db);
    let n = got.len() as i64;
    assert!(n < 3000, "the disk never filled");
    assert_eq!(n % 100, 0, "a batch was half-committed: {n} rows");
    assert_eq!(
        got,
        (0..n).collect(),
        "the committed rows are not the first batches"
    );
    db.inserter("t", &["id", "pad"])
        .unwrap()
        .commit_every(100)
        .insert(rows(n, 3000))
        .expect("the rerun finishes once space is back");
    assert_eq!(ids(&db).len(), 3000);
    integrity_ok(&db);
}

/// One row's write fails with the armed fault, the row is not stored, and
/// the next write succeeds.
fn one_failed_write(profile: Profile, fault: Fault, code: i32, ext: i32, words: &[&str]) {
    one_failed_write_with(profile, |_| {}, fault, code, ext, words);
}

/// [`one_failed_write`] with `tweak` applied to the options: the shim.
fn one_failed_write_with(
    profile: Profile,
    tweak: impl FnOnce(&mut Options),
    fault: Fault,
    code: i32,
    ext: i32,
    words: &[&str],
) -> FaultVfs {
    let vfs = FaultVfs::register().unwrap();
    let (_dir, db) = open(&vfs, profile, tweak);
    let mut want = committed(&db, 0, 5);
    vfs.arm(fault.clone()).unwrap();
    let err = insert(&db, 100, 3000).unwrap_err();
    assert_eq!(vfs.faults_fired(), 1, "{fault:?} never fired");
    assert_clear(&err, code, words);
    assert_eq!(err.sqlite_extended_code(), Some(ext), "{err}");
    vfs.clear_faults();
    assert_eq!(
        ids(&db),
        want,
        "{fault:?}: the failed row is stored, or a committed one lost"
    );
    insert(&db, 101, 3000).expect("the next write succeeds without reopening");
    want.insert(101);
    assert_eq!(ids(&db), want);
    integrity_ok(&db);
    vfs
}

#[test]
fn a_failed_gathered_wal_write_fails_its_commit_alone() {
    // The writer's WAL frames written in one call over the shim, as over
    // SQLite's own VFS: a row of 3,000 bytes is two frames or more, so only
    // a write of more than one frame (over 4,096 bytes) fails.
    let gather = |o: &mut Options| o.gather_over_vfs = true;
    for profile in [Profile::Safe, Profile::Balanced] {
        let vfs = one_failed_write_with(
            profile,
            gather,
            Fault::new(Op::Write, Effect::IoError)
                .file(FileKind::Wal)
                .min_len(4097),
            SQLITE_IOERR,
            SQLITE_IOERR_WRITE,
            &["i/o"],
        );
        assert!(
            vfs.largest_write(FileKind::Wal) > 4096,
            "{profile}: nothing gathered"
        );
    }
    one_failed_write_with(
        Profile::Safe,
        gather,
        Fault::new(Op::Write, Effect::ShortWrite)
            .file(FileKind::Wal)
            .min_len(4097),
        SQLITE_FULL,
        SQLITE_FULL,
        &["full"],
    );
}

#[test]
fn an_io_error_on_write_fails_that_write_alone() {
    for profile in [Profile::Safe, Profile::Balanced] {
        one_failed_write(
            profile,
            Fault::new(Op::Write, Effect::IoError).file(FileKind::Wal),
            SQLITE_IOERR,
            SQLITE_IOERR_WRITE,
            &["i/o"],
        );
    }
}

/// An [`Error::OutcomeUnknown`] of a failed WAL fsync: SQLite's codes, the
/// database named, words a user can act on.
fn assert_unknown(err: &Error) {
    assert!(err.is_outcome_unknown(), "not OutcomeUnknown: {err}");
    assert_eq!(err.sqlite_code(), Some(SQLITE_IOERR), "{err}");
    assert_eq!(
        err.sqlite_extended_code(),
        Some(SQLITE_IOERR_FSYNC),
        "{err}"
    );
    let text = err.to_string();
    for words in [
        "may or may not be durable",
        "reopen",
        "-wal",
        "check the disk",
    ] {
        assert!(text.contains(words), "{text:?} does not say {words:?}");
    }
}

/// A refused write: [`Error::WritesStopped`] naming the database and
/// saying to reopen.
fn assert_stopped(err: &Error, words: &[&str]) {
    assert!(
        matches!(err, Error::WritesStopped { .. }),
        "not WritesStopped: {err}"
    );
    let text = err.to_string();
    for w in ["takes no more writes", "reopen"].iter().chain(words) {
        assert!(text.contains(w), "{text:?} does not say {w:?}");
    }
}

/// Without the cross-process queue, `safe` commits with
/// `synchronous=FULL`: SQLite syncs inside `COMMIT`. A failed sync leaves
/// the commit invisible to this process, but its frames (commit marker
/// included) stay in the WAL file and can come back after a crash: the
/// caller is told the outcome is unknown (issue 18), the handle takes no
/// more writes, reads go on, and a reopened handle writes again.
#[test]
fn an_fsync_error_under_safe_without_the_process_queue_is_an_unknown_outcome() {
    let vfs = FaultVfs::register().unwrap();
    let (dir, db) = open(&vfs, Profile::Safe, |o| o.process_queue = false);
    let mut want = committed(&db, 0, 5);
    vfs.arm(Fault::new(Op::Sync, Effect::IoError).file(FileKind::Wal))
        .unwrap();
    let err = insert(&db, 100, 3000).unwrap_err();
    assert_eq!(vfs.faults_fired(), 1);
    assert_unknown(&err);
    vfs.clear_faults();
    let later = insert(&db, 101, 10).unwrap_err();
    assert_stopped(&later, &[&dir.path().join("db").display().to_string()]);
    let held = db
        .try_hold_writer("held")
        .err()
        .expect("a held write is refused too");
    assert_stopped(&held, &[]);
    let vacuum = db
        .write_outside_transaction("vacuum", |c| Ok(c.execute_batch("VACUUM")?))
        .unwrap_err();
    assert_stopped(&vacuum, &[]);
    let bulk = db
        .inserter("t", &["id", "pad"])
        .unwrap()
        .insert((200..210).map(|i| vec![Value::Integer(i), Value::Null]))
        .unwrap_err();
    assert_stopped(&bulk, &[]);
    assert_eq!(
        ids(&db),
        want,
        "reads go on; the unknown row is not visible here"
    );
    // Reopening runs WAL recovery, which finds the frames of the commit
    // whose fsync failed, commit marker included: the row SQLite called
    // failed can be there now. Either way is allowed; "failed" was wrong.
    drop(db);
    let mut o = Options::with_profile(Profile::Safe);
    o.vfs = Some(vfs.name().to_string());
    o.process_queue = false;
    let db = Database::open(dir.path().join("db"), o).unwrap();
    let back = ids(&db).contains(&100);
    eprintln!("after reopening, the row whose fsync failed is there: {back}");
    insert(&db, 102, 10).expect("a reopened handle writes again");
    want.insert(102);
    if back {
        want.insert(100);
    }
    assert_eq!(ids(&db), want);
    integrity_ok(&db);
}

/// With the queue (the default), `safe` makes a commit durable after its
/// turn (xproc/durable.rs): the commit is visible when its fsync fails, so
/// the caller is told the outcome is unknown, not that it failed; the
/// handle takes no more writes, and neither does any other handle on the
/// file while the lock file carries the failure (no later commit could be
/// confirmed: its frames chain on the lost ones); reads go on.
#[test]
fn an_fsync_error_under_safe_says_the_outcome_is_unknown_and_confirms_nothing_after() {
    let vfs = FaultVfs::register().unwrap();
    let (dir, db) = open(&vfs, Profile::Safe, |_| {});
    let want = committed(&db, 0, 5);
    vfs.arm(Fault::new(Op::Sync, Effect::IoError).file(FileKind::Wal))
        .unwrap();
    let path = dir.path().join("db");
    assert_eq!(litelane::xproc::recorded_sync_failure(&path), None);
    let err = insert(&db, 100, 3000).unwrap_err();
    assert_eq!(vfs.faults_fired(), 1);
    assert_unknown(&err);
    let (lock, at) = litelane::xproc::recorded_sync_failure(&path).expect("recorded");
    assert!(
        lock.to_string_lossy().ends_with("db-lane") && at > 0,
        "{lock:?} {at}"
    );
    vfs.clear_faults();
    let later = insert(&db, 101, 10).unwrap_err();
    assert_stopped(&later, &["-lane"]);
    let seen = ids(&db);
    assert!(seen.is_superset(&want), "reads go on and lose nothing");
    assert!(seen.contains(&100), "the unknown commit is visible");
    assert!(!seen.contains(&101), "the refused write did nothing");
    // Another handle on the file (as another process would be) refuses
    // too, before doing anything: the lock file carries the failure.
    let mut o = Options::with_profile(Profile::Safe);
    o.vfs = Some(vfs.name().to_string());
    let other = Database::open(dir.path().join("db"), o).unwrap();
    let refused = insert(&other, 102, 10).unwrap_err();
    assert_stopped(&refused, &["-lane", "remove"]);
    assert!(!ids(&other).contains(&102));
    integrity_ok(&db);
}

#[test]
fn a_short_write_is_reported_as_disk_full_and_rolled_back() {
    one_failed_write(
        Profile::Safe,
        Fault::new(Op::Write, Effect::ShortWrite)
            .file(FileKind::Wal)
            .min_len(4096),
        SQLITE_FULL,
        SQLITE_FULL,
        &["full"],
    );
}

/// A read on this thread hits `fault`: the reader gets an error (never a
/// wrong answer), and once the fault is cleared reads are right again.
fn one_failed_read(fault: Fault, words: &[&str]) {
    let vfs = FaultVfs::register().unwrap();
    let (_dir, db) = open(&vfs, Profile::Balanced, |o| o.readers = 1);
    let want = committed(&db, 0, 40);
    // Move the pages into the database file, let the reader load the schema,
    // then change the file so the reader's page cache is stale and it must
    // read pages again.
    db.checkpoint(CheckpointMode::Truncate).unwrap();
    assert_eq!(ids(&db), want);
    insert(&db, 1000, 10).unwrap();
    vfs.arm(fault.this_thread().min_len(4096)).unwrap();
    let r = db.read(|c| {
        Ok(
            c.query_row("SELECT count(*), sum(length(pad)) FROM t", [], |r| {
                Ok((r.get::<_, i64>(0)?, r.get::<_, i64>(1)?))
            })?,
        )
    });
    assert!(vfs.faults_fired() > 0, "the read never reached the disk");
    match r {
        Ok(v) => panic!("a damaged read returned an answer: {v:?}"),
        Err(e) => {
            let text = e.to_string().to_lowercase();
            assert!(words.iter().any(|w| text.contains(w)), "{text}");
        }
    }
    vfs.clear_faults();
    insert(&db, 1001, 10).expect("writes still work");
    let mut want = want;
    want.extend([1000, 1001]);
    assert_eq!(ids(&db), want, "the reader is not right again");
    integrity_ok(&db);
}

#[test]
fn an_io_error_on_read_is_an_error_and_passes() {
    one_failed_read(Fault::new(Op::Read, Effect::IoError), &["i/o"]);
}

#[test]
fn a_short_read_is_an_error_not_a_wrong_answer() {
    one_failed_read(
        Fault::new(Op::Read, Effect::ShortRead),
        &["malformed", "i/o", "corrupt"],
    );
}

#[test]
fn a_corrupt_page_on_read_is_an_error_not_a_wrong_answer() {
    one_failed_read(
        Fault::new(Op::Read, Effect::CorruptRead),
        &["malformed", "corrupt", "not a database"],
    );
}

#[test]
fn a_reader_is_right_again_as_soon_as_a_corrupt_read_clears() {
    let vfs = FaultVfs::register().unwrap();
    let (_dir, db) = open(&vfs, Profile::Balanced, |o| o.readers = 1);
    let mut want = committed(&db, 0, 40);
    db.checkpoint(CheckpointMode::Truncate).unwrap();
    assert_eq!(ids(&db), want);
    insert(&db, 1000, 10).unwrap();
    want.insert(1000);
    vfs.arm(
        Fault::new(Op::Read, Effect::CorruptRead)
            .this_thread()
            .min_len(4096),
    )
    .unwrap();
    assert!(db
        .read(|c| Ok(c.query_row("SELECT count(*) FROM t", [], |r| r.get::<_, i64>(0))?))
        .is_err());
    vfs.clear_faults();
    assert_eq!(ids(&db), want);
}

#[test]
fn a_read_error_is_reported_with_sqlites_code() {
    let vfs = FaultVfs::register().unwrap();
    let (_dir, db) = open(&vfs, Profile::Balanced, |o| o.readers = 1);
    let want = committed(&db, 0, 40);
    db.checkpoint(CheckpointMode::Truncate).unwrap();
    assert_eq!(ids(&db), want);
    insert(&db, 1000, 10).unwrap();
    vfs.arm(
        Fault::new(Op::Read, Effect::IoError)
            .this_thread()
            .min_len(4096),
    )
    .unwrap();
    let err = db
        .read(|c| Ok(c.query_row("SELECT count(*) FROM t", [], |r| r.get::<_, i64>(0))?))
        .unwrap_err();
    assert_eq!(err.sqlite_extended_code(), Some(SQLITE_IOERR_READ), "{err}");
}

/// A reader whose cached schema predates table `s`, made by another
/// connection (the engine's writer would have had the reader catch up: see
/// the next test), whose page reads fail (`times` of them): SQLite answers
/// from its cached schema ("no such table: s") and drops the error of
/// re-reading the schema; litelane reports the I/O error instead.
fn schema_read_fails(times: u64) -> (Error, u64) {
    let vfs = FaultVfs::register().unwrap();
    let (dir, db) = open(&vfs, Profile::Balanced, |o| {
        o.readers = 1;
        // No checkpoint turn of the writer that could notice s meanwhile.
        o.checkpoints.background = false;
    });
    let count = |table: &str| {
        let sql = format!("SELECT count(*) FROM {table}");
        db.read(|c| Ok(c.query_row(&sql, [], |r| r.get::<_, i64>(0))?))
    };
    assert_eq!(count("t").unwrap(), 0, "the reader has caught up with t");
    let other = rusqlite::Connection::open(dir.path().join("db")).unwrap();
    other
        .execute_batch("CREATE TABLE s(x); INSERT INTO s VALUES (1), (2), (3), (4), (5)")
        .unwrap();
    drop(other);
    vfs.arm(
        Fault::new(Op::Read, Effect::IoError)
            .this_thread()
            .min_len(4096)
            .times(times),
    )
    .unwrap();
    let err = count("s").unwrap_err();
    let fired = vfs.faults_fired();
    vfs.clear_faults();
    let n = count("s").expect("the next read succeeds once the medium reads right");
    assert_eq!(n, 5);
    (err, fired)
}

#[test]
fn a_read_error_while_catching_up_with_the_writers_schema_is_retried_by_the_read() {
    // The writer made t: the reader re-reads its schema before its next
    // read; one failed page read there is noted, and the read itself
    // re-reads the schema and answers.
    let vfs = FaultVfs::register().unwrap();
    let (_dir, db) = open(&vfs, Profile::Balanced, |o| o.readers = 1);
    committed(&db, 0, 5);
    vfs.arm(
        Fault::new(Op::Read, Effect::IoError)
            .this_thread()
            .min_len(4096)
            .times(1),
    )
    .unwrap();
    let n = db
        .read(|c| Ok(c.query_row("SELECT count(*) FROM t", [], |r| r.get::<_, i64>(0))?))
        .unwrap();
    assert_eq!((n, vfs.faults_fired()), (5, 1));
}

#[test]
fn a_read_error_while_loading_the_schema_is_reported_as_an_io_error() {
    // A medium that keeps failing: the error of litelane's own re-read of
    // the schema, with SQLite's codes.
    let (err, fired) = schema_read_fails(u64::MAX);
    assert!(fired >= 1);
    assert_eq!(err.sqlite_code(), Some(SQLITE_IOERR), "{err}");
    assert_eq!(err.sqlite_extended_code(), Some(SQLITE_IOERR_READ), "{err}");
    let text = err.to_string();
    assert!(text.contains("reading the database schema"), "{text}");
    assert!(
        text.contains("no such table: s"),
        "says what SQLite answered: {text}"
    );
}

#[test]
fn a_read_error_while_loading_the_schema_that_clears_is_not_no_such_table() {
    // One failed read: its error is gone (SQLite dropped it) by the time
    // litelane looks, but the table is in the file: SQLITE_SCHEMA saying
    // the cached schema was stale and its re-read may have failed, not
    // "no such table" (SQLITE_ERROR).
    let (err, fired) = schema_read_fails(1);
    assert_eq!(fired, 1);
    assert_eq!(err.sqlite_code(), Some(SQLITE_SCHEMA), "{err}");
    let text = err.to_string();
    assert!(text.contains("could not be re-read"), "{text}");
    assert!(text.contains("run the read again"), "{text}");
}

/// A table that really is missing is still "no such table".
#[test]
fn a_missing_table_is_still_no_such_table() {
    let vfs = FaultVfs::register().unwrap();
    let (_dir, db) = open(&vfs, Profile::Balanced, |o| o.readers = 1);
    let err = db
        .read(|c| Ok(c.query_row("SELECT count(*) FROM nope", [], |r| r.get::<_, i64>(0))?))
        .unwrap_err();
    assert_eq!(err.sqlite_code(), Some(1), "{err}");
    assert!(err.to_string().contains("no such table: nope"), "{err}");
}

#[test]
fn a_crash_after_disk_full_in_a_group_keeps_every_commit_told_ok() {
    // Disk full inside a group, then the power goes: under `safe` whatever
    // was told Ok is in the image, and the image is sound.
    for seed in 0..4u64 {
        let vfs = FaultVfs::register().unwrap();
        let (dir, db) = open(&vfs, Profile::Safe, |o| {
            o.group_commit.max_wait = Duration::from_secs(5);
            o.cache_size_kib = 16;
        });
        let before = committed(&db, 0, 5);
        let outcomes = group_under_fault(&db, 6, 20_000, || vfs.set_disk_space(Some(60_000)));
        drop(db);
        let (report, stored) = cut_image(&vfs, seed, dir.path());
        assert!(stored.is_superset(&before), "seed {seed}: {report:?}");
        for (id, r) in &outcomes {
            if r.is_ok() {
                assert!(
                    stored.contains(id),
                    "seed {seed}: {id} told Ok, lost in the cut"
                );
            }
        }
    }
}

#[test]
fn the_database_file_deleted_underneath_fails_writes_clearly() {
    // No shim needed: the file is unlinked while open. Writes must not be
    // acknowledged into a file nobody can open again.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let _db = write_after_the_file_changed(&path, "deleted", || {
        std::fs::remove_file(&path).unwrap();
        let _ = std::fs::remove_file(dir.path().join("db-wal"));
    });
}

/// Opens a `safe` database at `path` with one row, runs `change` on its
/// file (`what`: deleted, replaced), and checks that the next write is
/// refused with an error that says why. Returns the database, still open.
fn write_after_the_file_changed(path: &Path, what: &str, change: impl FnOnce()) -> Database {
    let db = Database::open(path, Options::with_profile(Profile::Safe)).unwrap();
    db.write(|tx| Ok(tx.execute_batch("CREATE TABLE t(id INTEGER PRIMARY KEY, pad BLOB)")?))
        .unwrap();
    insert(&db, 1, 10).unwrap();
    change();
    // Past the writer's 1 ms recheck of the file's identity
    // (docs/durability.md, "Faults").
    std::thread::sleep(std::time::Duration::from_millis(5));
    let r = insert(&db, 2, 10);
    let Err(err) = r else {
        panic!("a write into a {what} database was acknowledged");
    };
    let text = err.to_string().to_lowercase();
    assert!(
        text.contains("moved")
            || text.contains("readonly")
            || text.contains("read-only")
            || text.contains("i/o"),
        "{text}"
    );
    db
}

#[test]
#[ignore = "finding (SQLite's WAL design, half fixed): litelane now refuses the write into the replaced \
            file (SQLITE_FCNTL_HAS_MOVED), but the old database's `-wal` and `-shm` stay beside the \
            new file under the same name, and SQLite applies that WAL to the new file when it is \
            opened (it cannot tell whose WAL it is): the replacement reads back the old rows. \
            Documented in durability.md: never replace a database file that a process has open"]
fn the_database_file_replaced_underneath_fails_writes_clearly() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let other = dir.path().join("other");
    {
        let c = rusqlite::Connection::open(&other).unwrap();
        c.execute_batch(
            "CREATE TABLE t(id INTEGER PRIMARY KEY, pad BLOB); INSERT INTO t VALUES (99, 1);",
        )
        .unwrap();
    }
    let _db = write_after_the_file_changed(&path, "replaced", || {
        std::fs::rename(&other, &path).unwrap();
    });
    // The file now at the path is the replacement, untouched.
    let c = rusqlite::Connection::open(&path).unwrap();
    let ids: Vec<i64> = stored_ids(&c);
    assert_eq!(ids, vec![99]);
}

#[test]
fn explicit_checkpoint_queued_behind_a_group_strands_it() {
    // Writer bug, no shim involved: `next_can_join_group` lets a group stay
    // open when the next waiter is a non-priority turn, but an explicit
    // `Database::checkpoint` is such a turn and `with_turn` refuses an open
    // group without committing it. If no writer comes after the checkpoint,
    // the group's members wait for their outcome forever.
    let dir = tempfile::tempdir().unwrap();
    let mut o = Options::default();
    o.group_commit.max_wait = Duration::from_secs(5);
    let db = Database::open(dir.path().join("db"), o).unwrap();
    db.write(|tx| Ok(tx.execute_batch("CREATE TABLE t(id INTEGER PRIMARY KEY, pad BLOB)")?))
        .unwrap();
    let (go, blocker) = hold_writer(&db, 1);
    let db2 = db.clone();
    let member = thread::spawn(move || insert(&db2, 2, 10));
    wait_for_queue(&db, 1);
    let db3 = db.clone();
    // A mode that takes a writer turn (a PASSIVE one runs on a side
    // connection, beside the writers, since issue 39).
    let ckpt = thread::spawn(move || db3.checkpoint(CheckpointMode::Full));
    wait_for_queue(&db, 2);
    go.send(()).unwrap();
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let a = blocker.join().unwrap().is_ok();
        let b = member.join().unwrap().is_ok();
        let _ = tx.send((a, b));
    });
    let done = rx.recv_timeout(Duration::from_secs(10));
    let _ = ckpt.join();
    assert!(
        done.is_ok(),
        "the group's writers never returned: the group was handed to the checkpoint's turn and left open"
    );
}

/// Issue 18's finding: with `synchronous=FULL` a caller was told "failed"
/// when the WAL fsync of its COMMIT failed, yet its frames could come back
/// after a crash (11 of 60 cuts). With the queue on (the default), the
/// caller is told the outcome is unknown: no caller is told "failed" whose
/// row survives, and nothing committed before is lost.
#[test]
fn a_commit_whose_fsync_failed_is_reported_unknown_and_nothing_before_is_lost() {
    // The WAL frames of a commit whose fsync failed are in the OS cache with
    // a valid commit marker; a crash may keep them or not. Whichever the cut
    // image holds, the caller must have been told "unknown".
    let mut came_back = 0;
    for seed in 0..60u64 {
        let vfs = FaultVfs::register().unwrap();
        let (dir, db) = open(&vfs, Profile::Safe, |_| {});
        let before = committed(&db, 0, 3);
        vfs.arm(Fault::new(Op::Sync, Effect::IoError).file(FileKind::Wal))
            .unwrap();
        let err = insert(&db, 100, 10).unwrap_err();
        assert_unknown(&err);
        // The failed fsync's error is the error's source.
        let os = std::error::Error::source(&err)
            .and_then(|s| s.downcast_ref::<std::io::Error>())
            .unwrap_or_else(|| panic!("no OS error under {err:?}"));
        assert!(!os.to_string().is_empty());
        drop(db);
        let (report, stored) = cut_image(&vfs, seed, dir.path());
        assert!(stored.is_superset(&before), "seed {seed}: {report:?}");
        if stored.contains(&100) {
            came_back += 1;
        }
    }
    // Either outcome may happen across the seeds (11 of 60 came back in
    // issue 18's run), which is why "unknown" is the only true answer.
    eprintln!("the write whose fsync failed came back in {came_back} of 60 cuts");
}

/// What the callers of an fsync-failure campaign were told, and what a
/// power cut right after kept of their rows.
#[derive(Debug, Default)]
struct FsyncTally {
    /// Rounds run (one database each).
    rounds: u64,
    /// Injected fsync failures that fired.
    injected: u64,
    /// Callers told Ok, and of them lost in the cut (must be 0).
    ok: u64,
    ok_lost: u64,
    /// Callers told OutcomeUnknown, and of them whose row is in the image
    /// (either is allowed).
    unknown: u64,
    unknown_back: u64,
    /// Callers refused by WritesStopped, and of them whose row is in the
    /// image (must be 0: nothing was done).
    stopped: u64,
    stopped_back: u64,
    /// Callers told any other error (a plain failure), and of them whose
    /// row is in the image (must be 0: issue 18).
    failed: u64,
    failed_back: u64,
    /// Rows committed before the fault lost in the cut (must be 0).
    before_lost: u64,
}

/// One round: a fresh `safe` database, 3 rows committed, then the
/// (`seed % 3` + 1)-th WAL fsync from now fails while `writers` threads
/// write `rows` rows each (through `Database::write`, and every other row
/// through a held write when the writer is free); then the power is cut
/// and the image is checked against what each caller was told. In half
/// the rounds a lone writer's failed commit is its last write (nothing
/// after it overwrites its frames before the cut).
fn fsync_round(seed: u64, queue: bool, writers: i64, t: &mut FsyncTally) {
    let vfs = FaultVfs::register().unwrap();
    let (dir, db) = open(&vfs, Profile::Safe, |o| {
        o.process_queue = queue;
        o.group_commit.max_wait = Duration::from_millis(2);
    });
    let before = committed(&db, 0, 3);
    let after = seed % 3;
    let rows = after as i64 + 1 + (seed / 3 % 2) as i64;
    vfs.arm(
        Fault::new(Op::Sync, Effect::IoError)
            .file(FileKind::Wal)
            .after(after),
    )
    .unwrap();
    let start = Arc::new(Barrier::new(writers as usize));
    let handles: Vec<_> = (0..writers)
        .map(|w| {
            let db = db.clone();
            let start = Arc::clone(&start);
            thread::spawn(move || {
                start.wait();
                (0..rows)
                    .map(|k| {
                        let id = 1000 * (w + 1) + k;
                        let held = if k % 2 == 1 {
                            db.try_hold_writer("held")
                        } else {
                            Ok(None)
                        };
                        let r = match held {
                            Err(e) => Err(e),
                            Ok(None) => insert(&db, id, 100),
                            Ok(Some(mut h)) => h
                                .run(|tx| {
                                    Ok(tx.execute(
                                        "INSERT INTO t VALUES (?, randomblob(100))",
                                        [id],
                                    )?)
                                })
                                .and_then(|n| h.commit().map(|()| n)),
                        };
                        (id, r)
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let outcomes: Vec<(i64, litelane::Result<usize>)> = handles
        .into_iter()
        .flat_map(|h| h.join().unwrap())
        .collect();
    t.rounds += 1;
    t.injected += vfs.faults_fired();
    drop(db);
    let (_, stored) = cut_image(&vfs, seed, dir.path());
    t.before_lost += before.difference(&stored).count() as u64;
    for (id, r) in &outcomes {
        let back = stored.contains(id) as u64;
        match r {
            Ok(_) => {
                t.ok += 1;
                t.ok_lost += 1 - back;
            }
            Err(e) if e.is_outcome_unknown() => {
                assert_unknown(e);
                t.unknown += 1;
                t.unknown_back += back;
            }
            Err(e @ Error::WritesStopped { .. }) => {
                assert_stopped(e, &[]);
                t.stopped += 1;
                t.stopped_back += back;
            }
            Err(e) => {
                if back == 1 {
                    eprintln!("seed {seed}: row {id} told {e} is in the image");
                }
                t.failed += 1;
                t.failed_back += back;
            }
        }
    }
}

/// Issue 18's test: over many injected WAL fsync failures under `safe`
/// (the cross-process queue on and off, one writer and a group of four),
/// no caller is told a plain failure whose row survives a power cut right
/// after; a refused write is never stored; nothing told Ok and nothing
/// committed before is lost. `LITELANE_FSYNC_FAULTS` sets the rounds per
/// configuration (default 50, 200 failures in all; issue 18 asks for at least
/// 500: `LITELANE_FSYNC_FAULTS=125` or more).
#[test]
fn no_caller_is_told_failed_whose_row_survives_an_fsync_failure() {
    let rounds: u64 = std::env::var("LITELANE_FSYNC_FAULTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(50);
    let mut all = FsyncTally::default();
    for queue in [true, false] {
        for writers in [1, 4] {
            let mut t = FsyncTally::default();
            for seed in 0..rounds {
                fsync_round(seed, queue, writers, &mut t);
            }
            eprintln!("queue {queue}, {writers} writer(s): {t:?}");
            assert_eq!(t.injected, rounds, "one fsync failure per round");
            assert!(t.unknown > 0, "no caller was told OutcomeUnknown: {t:?}");
            assert_eq!(t.failed_back, 0, "told failed, yet stored: {t:?}");
            assert_eq!(t.stopped_back, 0, "refused, yet stored: {t:?}");
            assert_eq!(t.ok_lost, 0, "told Ok, lost: {t:?}");
            assert_eq!(t.before_lost, 0, "committed before, lost: {t:?}");
            for (sum, part) in [
                (&mut all.rounds, t.rounds),
                (&mut all.injected, t.injected),
                (&mut all.ok, t.ok),
                (&mut all.unknown, t.unknown),
                (&mut all.unknown_back, t.unknown_back),
                (&mut all.stopped, t.stopped),
                (&mut all.failed, t.failed),
            ] {
                *sum += part;
            }
        }
    }
    eprintln!("all: {all:?}");
}

/// Under `balanced` a COMMIT does not fsync; a checkpoint does (the WAL,
/// then the database file). When the database file's fsync fails, SQLite
/// does not record the checkpoint as done (the WAL keeps every frame): the
/// checkpoint fails with the I/O error, no commit is in doubt (its outcome
/// is not OutcomeUnknown), nothing is lost, writes go on, and the next
/// checkpoint copies the pages again and completes.
#[test]
fn a_checkpoint_fsync_error_under_balanced_fails_the_checkpoint_alone() {
    let vfs = FaultVfs::register().unwrap();
    let (dir, db) = open(&vfs, Profile::Balanced, |o| {
        o.checkpoints.background = false;
    });
    let mut want = committed(&db, 0, 20);
    vfs.arm(Fault::new(Op::Sync, Effect::IoError).file(FileKind::MainDb))
        .unwrap();
    let err = db.checkpoint(CheckpointMode::Truncate).unwrap_err();
    assert_eq!(vfs.faults_fired(), 1);
    assert!(!err.is_outcome_unknown(), "{err}");
    assert_eq!(
        err.sqlite_extended_code(),
        Some(SQLITE_IOERR_FSYNC),
        "{err}"
    );
    assert_eq!(ids(&db), want, "rows lost after a failed checkpoint");
    insert(&db, 100, 10).expect("writes go on");
    want.insert(100);
    let rep = db.checkpoint(CheckpointMode::Truncate).unwrap();
    assert!(!rep.busy);
    // Cut the power now: the completed checkpoint made every row durable.
    let out = dir.path().join("cut");
    let report = vfs.cut_now(7, &out);
    drop(db);
    let c = rusqlite::Connection::open(out.join("db")).unwrap();
    let stored: BTreeSet<i64> = stored_ids(&c);
    assert_eq!(stored, want, "{report:?}");
}

/// An import (`commit_every`) whose batch's fsync fails under `safe`
/// without the queue: the error is OutcomeUnknown and says the last batch
/// may or may not be stored, not "rolled back"; after reopening, `--resume`
/// continues from whatever is stored and the table ends with every row
/// exactly once.
#[test]
fn an_import_whose_batch_fsync_failed_says_so_and_resume_finishes_it() {
    let vfs = FaultVfs::register().unwrap();
    let (dir, db) = open(&vfs, Profile::Safe, |o| o.process_queue = false);
    let csv = dir.path().join("rows.csv");
    let mut text = String::from("id,v\n");
    for i in 0..1000 {
        text.push_str(&format!("{i},value {i}\n"));
    }
    std::fs::write(&csv, text).unwrap();
    let args = || {
        let mut a =
            litelane_import::ImportOptions::new(csv.to_str().unwrap(), dir.path().join("db"));
        a.table = Some("imp".into());
        a.commit_every = Some(100);
        a
    };
    vfs.arm(
        Fault::new(Op::Sync, Effect::IoError)
            .file(FileKind::Wal)
            .after(4),
    )
    .unwrap();
    let err = litelane_import::run_into(&db, args(), &mut litelane_import::Silent).unwrap_err();
    assert_eq!(vfs.faults_fired(), 1);
    let engine = err.engine().expect("an engine error");
    assert!(engine.is_outcome_unknown(), "{err}");
    let text = err.to_string();
    eprintln!("the import said: {text}");
    assert!(text.contains("may or may not be stored"), "{text}");
    assert!(text.contains("--resume"), "{text}");
    assert!(!text.contains("rolled back"), "{text}");
    vfs.clear_faults();
    drop(db);
    let mut o = Options::with_profile(Profile::Safe);
    o.vfs = Some(vfs.name().to_string());
    o.process_queue = false;
    let db = Database::open(dir.path().join("db"), o).unwrap();
    let mut again = args();
    again.resume = true;
    litelane_import::run_into(&db, again, &mut litelane_import::Silent)
        .expect("the resumed import finishes");
    let (n, distinct, lo, hi): (i64, i64, i64, i64) = db
        .read(|c| {
            Ok(c.query_row(
                "SELECT count(*), count(DISTINCT \"id\"), min(\"id\"), max(\"id\") FROM \"imp\"",
                [],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
            )?)
        })
        .unwrap();
    assert_eq!((n, distinct, lo, hi), (1000, 1000, 0, 999));
}

/// A `VACUUM` (run outside the writer's transactions) whose WAL fsync
/// fails under `safe` without the queue is an unknown outcome too, and
/// stops the handle's writes.
#[test]
fn a_vacuum_whose_fsync_failed_is_an_unknown_outcome() {
    let err = vacuum_with_a_failing_wal_sync(false);
    assert_eq!(err.sqlite_extended_code(), Some(SQLITE_IOERR_FSYNC));
}

/// With the cross-process queue, `safe` shares one fsync among processes
/// (the writer commits with `synchronous=NORMAL`): a `VACUUM` run outside a
/// transaction must still be synced before it returns (it commits below
/// SQLite's commit hook), and a failed sync is an unknown outcome that stops
/// the handle's writes, as for any commit.
#[test]
fn a_vacuum_under_the_shared_fsync_is_synced_before_it_returns() {
    vacuum_with_a_failing_wal_sync(true);
}

/// Runs a `VACUUM` under `safe` (with the cross-process queue or not)
/// whose WAL sync fails; checks that it is an unknown outcome, that it
/// stops the handle's writes and that reads go on; returns its error.
fn vacuum_with_a_failing_wal_sync(queue: bool) -> Error {
    let vfs = FaultVfs::register().unwrap();
    let (_dir, db) = open(&vfs, Profile::Safe, |o| o.process_queue = queue);
    let want = committed(&db, 0, 20);
    db.write(|tx| Ok(tx.execute("DELETE FROM t WHERE id >= 10", [])?))
        .unwrap();
    vfs.arm(Fault::new(Op::Sync, Effect::IoError).file(FileKind::Wal))
        .unwrap();
    let err = db
        .write_outside_transaction("vacuum", |c| Ok(c.execute_batch("VACUUM")?))
        .unwrap_err();
    assert_eq!(vfs.faults_fired(), 1);
    assert!(err.is_outcome_unknown(), "{err}");
    vfs.clear_faults();
    assert_stopped(&insert(&db, 100, 10).unwrap_err(), &[]);
    let left: BTreeSet<i64> = want.into_iter().filter(|&i| i < 10).collect();
    assert_eq!(ids(&db), left, "reads go on");
    err
}

/// `restore_from` under the shared fsync is synced before it returns too
/// (the backup API commits below the commit hook, as `VACUUM` does): a
/// failed sync is an unknown outcome that stops the handle's writes.
#[test]
fn a_restore_under_the_shared_fsync_is_synced_before_it_returns() {
    let vfs = FaultVfs::register().unwrap();
    let (dir, db) = open(&vfs, Profile::Safe, |_| {});
    committed(&db, 0, 5);
    let src = dir.path().join("src.db");
    {
        let c = rusqlite::Connection::open(&src).unwrap();
        c.execute_batch(
            "CREATE TABLE t(id INTEGER PRIMARY KEY, pad BLOB);
             INSERT INTO t VALUES (100, x'00'), (101, x'01');",
        )
        .unwrap();
    }
    vfs.arm(Fault::new(Op::Sync, Effect::IoError).file(FileKind::Wal))
        .unwrap();
    let err = db.restore_from(&src, 8, &mut |_| {}).unwrap_err();
    assert_eq!(vfs.faults_fired(), 1);
    assert!(err.is_outcome_unknown(), "{err}");
    vfs.clear_faults();
    assert_stopped(&insert(&db, 200, 10).unwrap_err(), &[]);
}
