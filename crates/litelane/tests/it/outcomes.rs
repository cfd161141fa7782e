//! Every caller is told exactly its outcome: `Ok` ⇔ its rows are stored.
//!
//! The matrix: every way a write job can end, at every position of a group
//! (leader, middle, last, alone), with group commit on and with the WAL gate
//! closing after every commit. For each caller the test checks the promise
//! (told Ok ⇔ its row is stored) and the exact kind of error it was told.

use crate::common;

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use common::{query_i64, temp_db, wait_for_queue_depth};
use litelane::{Checkpoints, Database, Error, GroupCommit, Options, OverLimit, Profile, Tx};

/// How a job ends, after inserting its own row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum End {
    Ok,
    /// Returns a user error.
    Err,
    Panic,
    /// Leaves a deferred foreign-key violation.
    DeferredFk,
    /// `INSERT OR ROLLBACK` hits a UNIQUE constraint; the error propagates.
    OrRollback,
    /// The same, but the closure swallows the error and returns Ok.
    OrRollbackSwallowed,
    /// A trigger runs `RAISE(ROLLBACK)`; the error propagates.
    TriggerRollback,
    /// The closure runs `ROLLBACK` itself and returns Ok.
    UserRollback,
    /// The closure runs `COMMIT` itself (refused) and returns Ok.
    UserCommit,
    /// The closure releases the writer's savepoint itself, so the writer's
    /// own `RELEASE` fails.
    ReleaseSabotage,
}

const ENDS: [End; 10] = [
    End::Ok,
    End::Err,
    End::Panic,
    End::DeferredFk,
    End::OrRollback,
    End::OrRollbackSwallowed,
    End::TriggerRollback,
    End::UserRollback,
    End::UserCommit,
    End::ReleaseSabotage,
];

/// What a caller must be told.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Told {
    Ok,
    /// Its own failure (an error that is not `RolledBack`, or a panic).
    Failed,
    /// `Error::RolledBack`, with `retryable`.
    RolledBack(bool),
}

const SCHEMA: &str = "
    CREATE TABLE t(who TEXT NOT NULL);
    CREATE TABLE u(k INTEGER UNIQUE);
    INSERT INTO u VALUES (1);
    CREATE TABLE parent(id INTEGER PRIMARY KEY);
    CREATE TABLE child(pid INTEGER REFERENCES parent(id) DEFERRABLE INITIALLY DEFERRED);
    CREATE TABLE boom(x);
    CREATE TRIGGER boom_t BEFORE INSERT ON boom BEGIN SELECT RAISE(ROLLBACK, 'boom'); END;
";

fn behave(tx: &Tx<'_>, end: End) -> litelane::Result<()> {
    match end {
        End::Ok => Ok(()),
        End::Err => Err(Error::user("the job changed its mind")),
        End::Panic => panic!("the job panicked"),
        End::DeferredFk => {
            tx.execute("INSERT INTO child VALUES (999)", [])?;
            Ok(())
        }
        End::OrRollback => {
            tx.execute("INSERT OR ROLLBACK INTO u VALUES (1)", [])?;
            Ok(())
        }
        End::OrRollbackSwallowed => {
            let _ = tx.execute("INSERT OR ROLLBACK INTO u VALUES (1)", []);
            Ok(())
        }
        End::TriggerRollback => {
            tx.execute("INSERT INTO boom VALUES (1)", [])?;
            Ok(())
        }
        End::UserRollback => {
            tx.execute_batch("ROLLBACK")?;
            Ok(())
        }
        End::UserCommit => {
            let _ = tx.execute_batch("COMMIT");
            Ok(())
        }
        End::ReleaseSabotage => {
            let _ = tx.execute_batch("RELEASE litelane_job");
            Ok(())
        }
    }
}

/// True for the ends that take the whole transaction down with them.
fn ends_transaction(end: End) -> bool {
    matches!(
        end,
        End::OrRollback
            | End::OrRollbackSwallowed
            | End::TriggerRollback
            | End::UserRollback
            | End::UserCommit
    )
}

/// What the job with `end` is told, and what the jobs before it in its
/// transaction are told, when it runs at `position` of a group.
fn expected(end: End, leader: bool) -> (Told, Option<Told>) {
    match end {
        End::Ok => (Told::Ok, None),
        End::Err | End::Panic | End::DeferredFk => (Told::Failed, None),
        // The error propagates: the caller gets its own error.
        End::OrRollback | End::TriggerRollback => (Told::Failed, Some(Told::RolledBack(true))),
        End::OrRollbackSwallowed | End::UserRollback | End::UserCommit => {
            (Told::RolledBack(false), Some(Told::RolledBack(true)))
        }
        // The leader has no savepoint to sabotage: its RELEASE fails inside
        // the closure, which ignores it.
        End::ReleaseSabotage if leader => (Told::Ok, None),
        End::ReleaseSabotage => (Told::Failed, Some(Told::RolledBack(true))),
    }
}

fn classify(r: &Result<litelane::Result<()>, ()>) -> Told {
    match r {
        Ok(Ok(())) => Told::Ok,
        Ok(Err(Error::RolledBack { retryable, .. })) => Told::RolledBack(*retryable),
        Ok(Err(_)) | Err(()) => Told::Failed,
    }
}

fn stored(db: &Database, who: &str) -> bool {
    let n = db
        .read(|c| {
            Ok(
                c.query_row("SELECT count(*) FROM t WHERE who = ?", [who], |r| {
                    r.get::<_, i64>(0)
                })?,
            )
        })
        .unwrap();
    assert!(n <= 1, "{who} stored {n} times");
    n == 1
}

fn options(gate_closes: bool) -> Options {
    let mut o = Options::with_profile(Profile::Safe);
    o.group_commit = GroupCommit {
        enabled: true,
        max_jobs: 64,
        // Long enough that the held leader's group stays open for the
        // queued jobs: positions are then exact.
        max_wait: Duration::from_secs(30),
    };
    if gate_closes {
        o.checkpoints = Checkpoints {
            passive_after_pages: 1,
            limit_pages: 1,
            // The gate closes only when the WAL is bounded by holding writers.
            over_limit: OverLimit::HoldWriters,
            ..Checkpoints::default()
        };
    }
    o
}

/// Runs `ends` as one group: the first holds the writer until the others
/// are queued behind it. Returns what each caller was told.
fn run_group(db: &Database, ends: &[End]) -> Vec<Told> {
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let (held_tx, held_rx) = mpsc::channel::<()>();
    let mut hold = Some((held_tx, go_rx));
    let mut handles = Vec::new();
    for (i, &end) in ends.iter().enumerate() {
        let db2 = db.clone();
        let who = format!("job{i}");
        let hold = if i == 0 { hold.take() } else { None };
        handles.push(thread::spawn(move || {
            let r = catch_unwind(AssertUnwindSafe(|| {
                db2.write_labeled(&who.clone(), move |tx| {
                    tx.execute("INSERT INTO t(who) VALUES (?)", [&who])?;
                    if let Some((held, go)) = hold {
                        held.send(()).unwrap();
                        go.recv().unwrap();
                    }
                    behave(tx, end)
                })
            }))
            .map_err(|_| ());
            classify(&r)
        }));
        if i == 0 {
            held_rx.recv().unwrap();
        } else {
            wait_for_queue_depth(db, i);
        }
    }
    go_tx.send(()).unwrap();
    handles.into_iter().map(|h| h.join().unwrap()).collect()
}

fn fresh(gate_closes: bool) -> (tempfile::TempDir, Database) {
    let (dir, db) = temp_db(options(gate_closes));
    db.write(|tx| Ok(tx.execute_batch(SCHEMA)?)).unwrap();
    (dir, db)
}

/// (position of the job under test, size of the group): leader, middle,
/// last, alone.
const POSITIONS: [(usize, usize); 4] = [(0, 4), (1, 4), (3, 4), (0, 1)];

fn check_matrix(gate_closes: bool) {
    for end in ENDS {
        for (position, size) in POSITIONS {
            let (_dir, db) = fresh(gate_closes);
            let mut ends = vec![End::Ok; size];
            ends[position] = end;
            let told = run_group(&db, &ends);
            let case = format!("{end:?} at {position} of {size}, gate closes: {gate_closes}");
            for (i, t) in told.iter().enumerate() {
                let who = format!("job{i}");
                assert_eq!(
                    *t == Told::Ok,
                    stored(&db, &who),
                    "{case}: {who} was told {t:?}"
                );
            }
            if gate_closes {
                // Groups may break up at any commit: the job under test is
                // still never told Ok unless its end commits.
                if !matches!(end, End::Ok | End::ReleaseSabotage) {
                    assert_ne!(told[position], Told::Ok, "{case}");
                }
                continue;
            }
            let (own, before) = expected(end, position == 0);
            assert_eq!(told[position], own, "{case}: the job itself");
            for (i, t) in told.iter().enumerate().take(position) {
                assert_eq!(*t, before.unwrap_or(Told::Ok), "{case}: job{i} before it");
            }
            for (i, t) in told.iter().enumerate().skip(position + 1) {
                assert_eq!(*t, Told::Ok, "{case}: job{i} after it starts afresh");
            }
            // The writer is still usable, without reopening.
            db.write(|tx| Ok(tx.execute("INSERT INTO t(who) VALUES ('after')", [])?))
                .unwrap();
            assert!(stored(&db, "after"), "{case}");
            assert!(ends_transaction(end) || before.is_none() || end == End::ReleaseSabotage);
        }
    }
}

#[test]
fn every_end_at_every_position_is_told_exactly() {
    check_matrix(false);
}

#[test]
fn every_end_is_told_exactly_while_the_wal_gate_keeps_closing() {
    check_matrix(true);
}

#[test]
fn rolled_back_errors_name_the_write_and_the_cause() {
    let (_dir, db) = fresh(false);
    let told = run_group_errors(&db);
    let Error::RolledBack {
        by,
        cause,
        retryable,
    } = &told
    else {
        panic!("expected RolledBack, got {told:?}");
    };
    assert_eq!(by, "job1");
    assert!(*retryable);
    assert_eq!(cause.sqlite_code(), Some(19), "{cause}");
    assert!(told.is_retryable());
    let text = told.to_string();
    assert!(text.contains("job1") && text.contains("retry"), "{text}");
    assert!(std::error::Error::source(&told).is_some());
}

/// Leader job0 is Ok, job1 runs INSERT OR ROLLBACK: returns job0's error.
fn run_group_errors(db: &Database) -> Error {
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let (held_tx, held_rx) = mpsc::channel::<()>();
    let db0 = db.clone();
    let leader = thread::spawn(move || {
        db0.write_labeled("job0", move |tx| {
            tx.execute("INSERT INTO t(who) VALUES ('job0')", [])?;
            held_tx.send(()).unwrap();
            go_rx.recv().unwrap();
            Ok(())
        })
    });
    held_rx.recv().unwrap();
    let db1 = db.clone();
    let culprit =
        thread::spawn(move || db1.write_labeled("job1", |tx| behave(tx, End::OrRollback)));
    wait_for_queue_depth(db, 1);
    go_tx.send(()).unwrap();
    assert!(culprit.join().unwrap().is_err());
    leader.join().unwrap().unwrap_err()
}

#[test]
fn a_failed_commit_fails_every_member_and_the_writer_recovers() {
    // A rollback journal (the fast profile) needs an exclusive lock to
    // commit; another connection's open read transaction refuses it.
    let mut opts = options(false);
    opts.profile = Profile::Fast;
    opts.busy_timeout = Duration::from_millis(50);
    let (dir, db) = temp_db(opts);
    db.write(|tx| Ok(tx.execute_batch(SCHEMA)?)).unwrap();
    let other = rusqlite::Connection::open(dir.path().join("test.db")).unwrap();
    other.execute_batch("BEGIN").unwrap();
    let n: i64 = other
        .query_row("SELECT count(*) FROM t", [], |r| r.get(0))
        .unwrap();
    assert_eq!(n, 0);
    let told = run_group(&db, &[End::Ok, End::Ok, End::Ok]);
    other.execute_batch("COMMIT").unwrap();
    for (i, t) in told.iter().enumerate() {
        assert_eq!(*t, Told::Failed, "job{i} must be told its commit failed");
        assert!(!stored(&db, &format!("job{i}")), "job{i}");
    }
    assert_eq!(query_i64(&db, "SELECT count(*) FROM t"), 0);
    db.write(|tx| Ok(tx.execute("INSERT INTO t(who) VALUES ('after')", [])?))
        .unwrap();
    assert!(stored(&db, "after"));
}

#[test]
fn a_commit_failure_is_reported_as_busy_and_retryable() {
    let mut opts = options(false);
    opts.profile = Profile::Fast;
    opts.busy_timeout = Duration::from_millis(20);
    let (dir, db) = temp_db(opts);
    db.write(|tx| Ok(tx.execute_batch(SCHEMA)?)).unwrap();
    let other = rusqlite::Connection::open(dir.path().join("test.db")).unwrap();
    other.execute_batch("BEGIN").unwrap();
    other
        .query_row("SELECT count(*) FROM t", [], |r| r.get::<_, i64>(0))
        .unwrap();
    let err = db
        .write(|tx| Ok(tx.execute("INSERT INTO t(who) VALUES ('x')", [])?))
        .unwrap_err();
    assert!(err.is_busy() && err.is_retryable(), "{err}");
    assert!(err.to_string().contains("COMMIT"), "{err}");
}

#[test]
fn a_checkpoint_queued_behind_a_writer_runs_and_the_writer_returns() {
    let (_dir, db) = fresh(false);
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let (held_tx, held_rx) = mpsc::channel::<()>();
    let db0 = db.clone();
    let holder = thread::spawn(move || {
        db0.write(move |tx| {
            tx.execute("INSERT INTO t(who) VALUES ('holder')", [])?;
            held_tx.send(()).unwrap();
            go_rx.recv().unwrap();
            Ok(())
        })
    });
    held_rx.recv().unwrap();
    let db1 = db.clone();
    // FULL takes a turn on the writer (a PASSIVE one runs beside it since
    // issue 39, and queues behind nobody).
    let checkpoint = thread::spawn(move || db1.checkpoint(litelane::CheckpointMode::Full));
    wait_for_queue_depth(&db, 1);
    go_tx.send(()).unwrap();
    // No other write arrives: the holder must return on its own.
    let (done_tx, done_rx) = mpsc::channel();
    thread::spawn(move || done_tx.send(holder.join().unwrap()).unwrap());
    let held = done_rx
        .recv_timeout(Duration::from_secs(10))
        .expect("the writer ahead of a checkpoint returned");
    held.unwrap();
    let report = checkpoint.join().unwrap().expect("the checkpoint ran");
    assert!(!report.busy, "{report:?}");
    assert!(stored(&db, "holder"));
}
