//! Group commit: queued writes share one commit, fail alone, and are
//! acknowledged only after the commit that holds them.

use crate::common;

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::mpsc;
use std::thread::{self, JoinHandle};
use std::time::Duration;

use common::{exec, query_i64, temp_db, wait_for_queue_depth};
use litelane::{Database, Error, Options, Profile};

/// Holds the writer until the returned sender is used; returns once it holds it.
fn hold_writer(db: &Database) -> (mpsc::Sender<()>, JoinHandle<()>) {
    let (started_tx, started_rx) = mpsc::channel();
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let db = db.clone();
    let h = thread::spawn(move || {
        db.write(move |tx| {
            tx.execute("INSERT INTO t(who) VALUES ('holder')", [])?;
            started_tx.send(()).unwrap();
            go_rx.recv().unwrap();
            Ok(())
        })
        .unwrap()
    });
    started_rx.recv().unwrap();
    (go_tx, h)
}

type Job = Box<dyn FnOnce(&litelane::Tx<'_>) -> litelane::Result<()> + Send>;

/// Queues `jobs` behind a held writer, in order, then lets them all run.
/// Returns each job's result (Err(None) = it panicked) and whether its row
/// was visible to a reader the moment its `write` returned Ok.
fn run_queued(
    db: &Database,
    jobs: Vec<(&'static str, Job)>,
) -> Vec<(Result<(), Option<Error>>, bool)> {
    let (go, holder) = hold_writer(db);
    let mut handles = Vec::new();
    for (i, (who, job)) in jobs.into_iter().enumerate() {
        let db2 = db.clone();
        handles.push(thread::spawn(move || {
            let r = catch_unwind(AssertUnwindSafe(|| {
                db2.write(|tx| {
                    tx.execute("INSERT INTO t(who) VALUES (?)", [who])?;
                    job(tx)
                })
            }));
            let visible = || {
                db2.read(|c| {
                    Ok(
                        c.query_row("SELECT count(*) FROM t WHERE who = ?", [who], |r| {
                            r.get::<_, i64>(0)
                        })?,
                    )
                })
                .unwrap()
                    == 1
            };
            match r {
                Ok(Ok(())) => (Ok(()), visible()),
                Ok(Err(e)) => (Err(Some(e)), visible()),
                Err(_) => (Err(None), visible()),
            }
        }));
        wait_for_queue_depth(db, i + 1);
    }
    go.send(()).unwrap();
    holder.join().unwrap();
    handles.into_iter().map(|h| h.join().unwrap()).collect()
}

fn setup(opts: Options) -> (tempfile::TempDir, Database) {
    let (dir, db) = temp_db(opts);
    exec(
        &db,
        "CREATE TABLE t(id INTEGER PRIMARY KEY, who TEXT);
         CREATE TABLE parent(id INTEGER PRIMARY KEY);
         CREATE TABLE child(pid INTEGER REFERENCES parent(id) DEFERRABLE INITIALLY DEFERRED);",
    );
    (dir, db)
}

fn ok() -> Job {
    Box::new(|_| Ok(()))
}

fn grouped_opts() -> Options {
    let mut o = Options::with_profile(Profile::Safe);
    // The jobs are released together; give the group room to form on a slow machine.
    o.group_commit.max_wait = Duration::from_secs(5);
    o
}

#[test]
fn queued_writes_share_one_commit_and_each_is_visible_when_acknowledged() {
    let (_dir, db) = setup(grouped_opts());
    let before = db.metrics();
    let results = run_queued(
        &db,
        vec![("a", ok()), ("b", ok()), ("c", ok()), ("d", ok())],
    );
    for (r, visible) in &results {
        assert!(r.is_ok());
        assert!(visible, "a write returned before its commit was visible");
    }
    let m = db.metrics();
    assert_eq!(m.transactions - before.transactions, 5, "holder + 4 jobs");
    assert_eq!(
        m.commits - before.commits,
        1,
        "one commit for the whole group"
    );
    assert_eq!(
        m.group_sizes[3] - before.group_sizes[3],
        1,
        "a group of 5..=8 jobs"
    );
    assert_eq!(query_i64(&db, "SELECT count(*) FROM t"), 5);
}

#[test]
fn a_failing_job_in_a_group_rolls_back_alone_and_only_its_caller_sees_the_error() {
    let (_dir, db) = setup(grouped_opts());
    let results = run_queued(
        &db,
        vec![
            ("a", ok()),
            ("b", Box::new(|_| Err(Error::user("b fails")))),
            (
                "c",
                Box::new(|tx| {
                    tx.execute("INSERT INTO t(who) VALUES ('c2')", [])?;
                    Ok(())
                }),
            ),
            (
                "d",
                Box::new(|tx| {
                    Ok(tx
                        .execute("INSERT INTO nowhere VALUES (1)", [])
                        .map(|_| ())?)
                }),
            ),
            ("e", ok()),
        ],
    );
    assert_eq!(results[0], (Ok(()), true));
    assert_eq!(results[1], (Err(Some(Error::user("b fails"))), false));
    assert_eq!(results[2], (Ok(()), true));
    let (d, d_visible) = &results[3];
    assert!(d
        .as_ref()
        .unwrap_err()
        .as_ref()
        .unwrap()
        .to_string()
        .contains("nowhere"));
    assert!(!d_visible);
    assert_eq!(results[4], (Ok(()), true));
    assert_eq!(
        query_i64(
            &db,
            "SELECT count(*) FROM t WHERE who IN ('a','c','c2','e','holder')"
        ),
        5
    );
    assert_eq!(
        query_i64(&db, "SELECT count(*) FROM t WHERE who IN ('b','d')"),
        0
    );
    assert_eq!(db.metrics().rollbacks, 2);
}

#[test]
fn a_panicking_job_in_a_group_rolls_back_alone() {
    let (_dir, db) = setup(grouped_opts());
    let results = run_queued(
        &db,
        vec![
            ("a", ok()),
            ("p", Box::new(|_| panic!("job panics"))),
            ("c", ok()),
        ],
    );
    assert_eq!(results[0], (Ok(()), true));
    assert_eq!(results[1], (Err(None), false));
    assert_eq!(results[2], (Ok(()), true));
    assert_eq!(query_i64(&db, "SELECT count(*) FROM t"), 3);
}

#[test]
fn a_deferred_foreign_key_violation_fails_its_own_job_not_the_group() {
    let (_dir, db) = setup(grouped_opts());
    let results = run_queued(
        &db,
        vec![
            ("a", ok()),
            (
                "orphan",
                Box::new(|tx| {
                    Ok(tx
                        .execute("INSERT INTO child VALUES (999)", [])
                        .map(|_| ())?)
                }),
            ),
            ("c", ok()),
        ],
    );
    assert_eq!(results[0], (Ok(()), true));
    let (err, visible) = &results[1];
    assert_eq!(
        err.as_ref()
            .unwrap_err()
            .as_ref()
            .unwrap()
            .sqlite_extended_code(),
        Some(787)
    );
    assert!(!visible);
    assert_eq!(results[2], (Ok(()), true));
    assert_eq!(query_i64(&db, "SELECT count(*) FROM child"), 0);
}

#[test]
fn with_group_commit_off_every_write_commits_on_its_own() {
    let mut opts = grouped_opts();
    opts.group_commit.enabled = false;
    let (_dir, db) = setup(opts);
    let before = db.metrics();
    let results = run_queued(&db, vec![("a", ok()), ("b", ok()), ("c", ok())]);
    assert!(results.iter().all(|(r, v)| r.is_ok() && *v));
    let m = db.metrics();
    assert_eq!(m.commits - before.commits, 4);
    assert_eq!(m.group_sizes[0] - before.group_sizes[0], 4);
}

#[test]
fn a_group_never_grows_past_its_maximum_size() {
    let mut opts = grouped_opts();
    opts.group_commit.max_jobs = 2;
    let (_dir, db) = setup(opts);
    let before = db.metrics();
    run_queued(
        &db,
        vec![
            ("a", ok()),
            ("b", ok()),
            ("c", ok()),
            ("d", ok()),
            ("e", ok()),
        ],
    );
    let m = db.metrics();
    assert_eq!(m.transactions - before.transactions, 6);
    assert_eq!(m.commits - before.commits, 3, "six jobs in groups of two");
}

#[test]
fn a_lone_writer_commits_alone_every_time() {
    let (_dir, db) = setup(Options::default());
    let before = db.metrics();
    for i in 0..50 {
        db.write(|tx| Ok(tx.execute("INSERT INTO t(who) VALUES (?)", [i])?))
            .unwrap();
    }
    let m = db.metrics();
    assert_eq!(m.commits - before.commits, 50);
    assert_eq!(m.group_sizes[0] - before.group_sizes[0], 50);
}

#[test]
fn alone_on_the_file_each_group_is_made_durable_before_the_next_commits() {
    // `safe`, with no other process on the file: a leader syncs its group
    // before it hands the turn on, so no commit is ever covered by an
    // fsync that another group ran (handing the turn on first let the next
    // leader commit during the sync: many commits were covered so).
    let (_dir, db) = setup(Options::with_profile(Profile::Safe));
    if db.metrics().process_queue_off.is_some() {
        return; // no cross-process queue here: SQLite syncs in `COMMIT`
    }
    let before = db.metrics();
    let (threads, writes) = (8, 60);
    thread::scope(|s| {
        for t in 0..threads {
            let db = &db;
            s.spawn(move || {
                for i in 0..writes {
                    db.write(|tx| Ok(tx.execute("INSERT INTO t(who) VALUES (?)", [t * 1000 + i])?))
                        .unwrap();
                }
            });
        }
    });
    let m = db.metrics();
    let commits = m.commits - before.commits;
    assert_eq!(
        m.syncs_shared - before.syncs_shared,
        0,
        "a commit was covered by another group's fsync ({commits} commits)"
    );
    assert!(
        m.wal_syncs - before.wal_syncs >= commits,
        "every commit synced: {} fsyncs for {commits} commits",
        m.wal_syncs - before.wal_syncs
    );
    assert_eq!(
        query_i64(&db, "SELECT count(*) FROM t"),
        (threads * writes) as i64
    );
}
