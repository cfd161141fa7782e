//! Several processes write to one file through litelane: with the
//! cross-process queue (on by default) none of them sees `SQLITE_BUSY`,
//! every acknowledged row is stored, and a process killed while it holds the
//! writer does not stall the others.
//!
//! The writing processes are this test binary itself, re-run with the
//! ignored test `processes_child` selected and its role in the environment.
//! `LITELANE_PROCESSES_LONG=1` runs the long forms.

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use litelane::{Database, Options, Profile};

const DB: &str = "LITELANE_PROCESSES_DB";
const ROLE: &str = "LITELANE_PROCESSES_ROLE";
const PROC: &str = "LITELANE_PROCESSES_ID";
/// The child's profile (`safe`; default `balanced`) and writer threads.
const PROFILE: &str = "LITELANE_PROCESSES_PROFILE";
const THREADS: &str = "LITELANE_PROCESSES_THREADS";
/// `execute`: each write is `Database::execute` (a statement that another
/// process may commit); default a `write` closure.
const API: &str = "LITELANE_PROCESSES_API";
/// Role `holder`: how long each transaction holds the writer (ms, default 50).
const HOLD_MS: &str = "LITELANE_PROCESSES_HOLD_MS";
/// Role `poster`: `slow` makes its one statement take about a second.
const POSTER_SQL: &str = "LITELANE_PROCESSES_POSTER_SQL";
/// Role `writer`: rows per thread (default 150, 2,000 in the long forms).
const ROWS: &str = "LITELANE_PROCESSES_ROWS";

/// A one-row insert that takes about a second, all of it plain SQL (no
/// application function), so another process may run it.
const SLOW_INSERT: &str = "INSERT INTO acked(id) SELECT ?1 WHERE (WITH RECURSIVE c(x) AS \
     (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 3000000) SELECT count(*) FROM c) > 0";

fn long() -> bool {
    std::env::var("LITELANE_PROCESSES_LONG").is_ok_and(|v| v == "1")
}

fn options() -> Options {
    let profile = match std::env::var(PROFILE).as_deref() {
        Ok("safe") => Profile::Safe,
        _ => Profile::Balanced,
    };
    let mut o = Options::with_profile(profile);
    // A writer waiting longer than this for another process fails: the
    // queue must keep every wait far below it.
    o.busy_timeout = Duration::from_secs(10);
    o
}

/// The child. Role `writer`: 4 threads (or `THREADS`) × N single-row
/// transactions; prints
/// each acknowledged id. Role `holder`: holds the writer for 50 ms per
/// transaction, forever, printing `HOLDING` inside each one (the parent
/// kills it).
#[test]
#[ignore = "run only as a child of the processes tests"]
fn processes_child() {
    let path = std::env::var(DB).expect("run by the processes tests");
    let role = std::env::var(ROLE).unwrap();
    let me: i64 = std::env::var(PROC).unwrap().parse().unwrap();
    let db = Database::open(&path, options()).unwrap();
    let per_thread: i64 = match std::env::var(ROWS) {
        Ok(n) => n.parse().unwrap(),
        Err(_) if long() => 2_000,
        Err(_) => 150,
    };
    if role == "holder" {
        let hold: u64 = std::env::var(HOLD_MS).map_or(50, |t| t.parse().unwrap());
        loop {
            db.write_labeled("holder", |tx| {
                tx.execute("INSERT INTO held(x) VALUES (1)", [])?;
                println!("\nHOLDING");
                std::io::stdout().flush().unwrap();
                thread::sleep(Duration::from_millis(hold));
                Ok(())
            })
            .unwrap();
        }
    }
    if role == "poster" {
        let sql = match std::env::var(POSTER_SQL).as_deref() {
            Ok("slow") => SLOW_INSERT,
            _ => "INSERT INTO acked(id) VALUES (?1)",
        };
        match db.execute(sql, &[litelane::Value::Integer(me)]) {
            Ok(_) => println!("\nACK {me}"),
            Err(e @ litelane::Error::OutcomeUnknown { .. }) => println!("\nUNKNOWN {e}"),
            Err(e) => println!("\nERROR {e}"),
        }
        let m = db.metrics();
        println!("COMBINED {} {}", m.combined_elsewhere, m.combined_here);
        return;
    }
    let threads: i64 = std::env::var(THREADS).map_or(4, |t| t.parse().unwrap());
    let statements = std::env::var(API).is_ok_and(|a| a == "execute");
    let threads: Vec<_> = (0..threads)
        .map(|t| {
            let db = db.clone();
            thread::spawn(move || {
                let mut out = std::io::stdout();
                for i in 0..per_thread {
                    let id = (me * 10 + t) * 1_000_000 + i;
                    let sql = "INSERT INTO acked(id) VALUES (?)";
                    let r = if statements {
                        db.execute(sql, &[litelane::Value::Integer(id)])
                            .map(|done| assert_eq!(done.changes, 1))
                    } else {
                        db.write(move |tx| Ok(tx.execute(sql, [id]).map(drop)?))
                    };
                    match r {
                        Ok(()) => writeln!(out, "\nACK {id}").unwrap(),
                        Err(e) => writeln!(out, "\nERROR {e}").unwrap(),
                    }
                }
            })
        })
        .collect();
    for h in threads {
        h.join().unwrap();
    }
    let m = db.metrics();
    println!("\nBUSY {}", m.busy_errors);
    println!("MAXWAIT_MS {}", m.queue_wait_max.as_millis());
    println!("QUEUE_OFF {}", m.process_queue_off.is_some());
    println!("SYNCS {} {}", m.wal_syncs, m.syncs_shared);
    println!("COMBINED {} {}", m.combined_elsewhere, m.combined_here);
    println!("TURNS {} {}", m.process_turns, m.turns_out_of_order);
    if let Some(why) = m.combined_commits_off {
        println!("COMBINED_OFF {why}");
    }
    // While the database is open (the last close removes the lock file).
    if let Ok(md) = std::fs::metadata(litelane::xproc::lock_path_for(Path::new(&path))) {
        println!("LANE_BYTES {}", md.len());
    }
}

fn spawn(db: &Path, role: &str, id: usize) -> Child {
    spawn_with(db, role, id, &[])
}

fn spawn_with(db: &Path, role: &str, id: usize, env: &[(&str, &str)]) -> Child {
    child(db, role, id, env, None)
        .spawn()
        .expect("spawn a child process")
}

/// The command that runs this test binary as the child in `role`: at once,
/// or through `bash -c script`, a script that ends with `exec "$0" "$@"`.
fn child(db: &Path, role: &str, id: usize, env: &[(&str, &str)], shell: Option<&str>) -> Command {
    let exe = std::env::current_exe().unwrap();
    let mut c = match shell {
        Some(script) => {
            let mut c = Command::new("bash");
            c.arg("-c").arg(script).arg(exe);
            c
        }
        None => Command::new(exe),
    };
    c.args([
        "--ignored",
        "--exact",
        "processes::processes_child",
        "--nocapture",
        "--test-threads=1",
    ])
    .env(DB, db)
    .env(ROLE, role)
    .env(PROC, id.to_string())
    .envs(env.iter().copied())
    .stdout(Stdio::piped())
    .stderr(Stdio::null());
    c
}

struct Outcome {
    acked: Vec<i64>,
    errors: Vec<String>,
    busy: u64,
    max_wait_ms: u64,
    queue_off: bool,
    /// WAL fsyncs this process ran, and commits another's fsync covered.
    syncs: (u64, u64),
    /// Statements of this process another committed, and of others this one.
    combined: (u64, u64),
    /// Writes told their outcome is unknown.
    unknown: Vec<String>,
    /// Why combined commits were off (`Metrics::combined_commits_off`).
    combined_off: Option<String>,
    /// Turns taken in the cross-process queue, and of those out of order.
    turns: (u64, u64),
    /// The size of the lock file at the end, while the database was open.
    lane_bytes: Option<u64>,
}

fn collect(child: Child) -> Outcome {
    let mut out = Outcome {
        acked: Vec::new(),
        errors: Vec::new(),
        busy: 0,
        max_wait_ms: 0,
        queue_off: true,
        syncs: (0, 0),
        combined: (0, 0),
        unknown: Vec::new(),
        combined_off: None,
        turns: (0, 0),
        lane_bytes: None,
    };
    let mut child = child;
    for line in BufReader::new(child.stdout.take().unwrap()).lines() {
        let line = line.unwrap();
        if let Some(e) = line.strip_prefix("ERROR ") {
            out.errors.push(e.to_string());
        } else if let Some(why) = line.strip_prefix("COMBINED_OFF ") {
            out.combined_off = Some(why.to_string());
        } else if let Some(e) = line.strip_prefix("UNKNOWN ") {
            out.unknown.push(e.to_string());
        } else if let Some(n) = line.strip_prefix("BUSY ") {
            out.busy = n.parse().unwrap();
        } else if let Some(n) = line.strip_prefix("MAXWAIT_MS ") {
            out.max_wait_ms = n.parse().unwrap();
        } else if let Some(s) = line.strip_prefix("SYNCS ") {
            let (own, shared) = s.split_once(' ').unwrap();
            out.syncs = (own.parse().unwrap(), shared.parse().unwrap());
        } else if let Some(s) = line.strip_prefix("COMBINED ") {
            let (elsewhere, here) = s.split_once(' ').unwrap();
            out.combined = (elsewhere.parse().unwrap(), here.parse().unwrap());
        } else if let Some(s) = line.strip_prefix("TURNS ") {
            let (all, out_of_order) = s.split_once(' ').unwrap();
            out.turns = (all.parse().unwrap(), out_of_order.parse().unwrap());
        } else if let Some(n) = line.strip_prefix("LANE_BYTES ") {
            out.lane_bytes = Some(n.parse().unwrap());
        } else if let Some(b) = line.strip_prefix("QUEUE_OFF ") {
            out.queue_off = b == "true";
        } else if let Some(id) = line.strip_prefix("ACK ") {
            out.acked.push(id.parse().unwrap());
        }
    }
    assert!(child.wait().unwrap().success());
    out
}

fn create(path: &Path) {
    let db = Database::open(path, options()).unwrap();
    db.write(|tx| {
        Ok(tx.execute_batch("CREATE TABLE acked(id INTEGER PRIMARY KEY); CREATE TABLE held(x)")?)
    })
    .unwrap();
}

fn stored(path: &Path) -> BTreeSet<i64> {
    let c = rusqlite::Connection::open(path).unwrap();
    let ok: String = c
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap();
    assert_eq!(ok, "ok");
    let mut st = c.prepare("SELECT id FROM acked").unwrap();
    st.query_map([], |r| r.get(0))
        .unwrap()
        .collect::<rusqlite::Result<_>>()
        .unwrap()
}

/// A free turn is taken at once, out of ticket order (one `fcntl`), and
/// the metrics count it.
#[test]
fn a_free_turn_is_taken_out_of_order_and_counted() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("f.db");
    create(&path);
    let db = Database::open(&path, options()).unwrap();
    let before = db.metrics();
    db.write(|tx| Ok(tx.execute("INSERT INTO held(x) VALUES (1)", []).map(drop)?))
        .unwrap();
    let m = db.metrics();
    assert!(m.process_queue_off.is_none(), "{:?}", m.process_queue_off);
    assert!(m.process_turns > before.process_turns, "no turn taken");
    assert_eq!(
        m.turns_out_of_order - before.turns_out_of_order,
        m.process_turns - before.process_turns,
        "a free turn is taken without a ticket"
    );
}

#[test]
fn processes_writing_at_once_never_see_busy_and_lose_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("p.db");
    create(&path);
    let processes = if long() { 8 } else { 4 };
    let children: Vec<_> = (0..processes).map(|i| spawn(&path, "writer", i)).collect();
    let outcomes: Vec<_> = children.into_iter().map(collect).collect();
    let stored = stored(&path);
    for (i, o) in outcomes.iter().enumerate() {
        assert!(!o.queue_off, "process {i}: the cross-process queue was off");
        assert!(
            o.errors.is_empty(),
            "process {i}: {:?}",
            &o.errors[..o.errors.len().min(3)]
        );
        assert_eq!(o.busy, 0, "process {i} saw SQLITE_BUSY");
        for id in &o.acked {
            assert!(
                stored.contains(id),
                "process {i}: acknowledged {id} is not stored"
            );
        }
    }
    let acked: usize = outcomes.iter().map(|o| o.acked.len()).sum();
    assert_eq!(acked, stored.len(), "every stored row was acknowledged");
    let max = outcomes.iter().map(|o| o.max_wait_ms).max().unwrap();
    // Every process took turns in the queue; some of them out of order
    // (bounded barging), never more than it took.
    let (turns, out_of_order) = outcomes
        .iter()
        .fold((0, 0), |(a, b), o| (a + o.turns.0, b + o.turns.1));
    for (i, o) in outcomes.iter().enumerate() {
        assert!(o.turns.0 > 0, "process {i} took no turn: {:?}", o.turns);
        assert!(o.turns.1 <= o.turns.0, "process {i}: {:?}", o.turns);
    }
    eprintln!(
        "{processes} processes × 4 threads: {acked} rows, 0 errors, longest wait {max} ms; \
         {turns} turns, {out_of_order} out of order"
    );
}

/// The worker-processes shape under `safe`: single-threaded processes, each
/// commit its own transaction. Every commit is made durable after its turn
/// by one WAL fsync shared with the commits other processes made meanwhile;
/// nothing acknowledged is lost, nobody sees `SQLITE_BUSY`, and the fsyncs
/// are fewer than the commits.
#[test]
fn safe_single_threaded_processes_share_fsyncs_and_lose_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.db");
    let outcomes = single_threaded_writers(&path, &[(PROFILE, "safe")]);
    let (mut own, mut shared) = (0, 0);
    for (i, o) in outcomes.iter().enumerate() {
        assert_eq!(
            o.syncs.0 + o.syncs.1,
            o.acked.len() as u64,
            "process {i}: every acknowledged commit was made durable after its turn"
        );
        own += o.syncs.0;
        shared += o.syncs.1;
    }
    let acked: usize = outcomes.iter().map(|o| o.acked.len()).sum();
    assert!(
        shared > 0,
        "no commit was covered by another process's fsync ({own} fsyncs for {acked} commits)"
    );
    eprintln!("single-threaded processes, safe: {acked} commits, {own} WAL fsyncs");
}

/// Runs 4 (8 in the long form) single-threaded `writer` processes on a new
/// database at `path` with `env`, and checks what every run of them must
/// hold: the queue was on, no error and no `SQLITE_BUSY`, every
/// acknowledged row stored and every stored row acknowledged once.
fn single_threaded_writers(path: &Path, env: &[(&str, &str)]) -> Vec<Outcome> {
    create(path);
    let processes = if long() { 8 } else { 4 };
    let env: Vec<_> = env.iter().copied().chain([(THREADS, "1")]).collect();
    let children: Vec<_> = (0..processes)
        .map(|i| spawn_with(path, "writer", i, &env))
        .collect();
    let outcomes: Vec<_> = children.into_iter().map(collect).collect();
    let stored = stored(path);
    for (i, o) in outcomes.iter().enumerate() {
        assert!(!o.queue_off, "process {i}: the cross-process queue was off");
        assert!(o.errors.is_empty(), "process {i}: {:?}", &o.errors[..1]);
        assert_eq!(o.busy, 0, "process {i} saw SQLITE_BUSY");
        assert!(
            o.acked.iter().all(|id| stored.contains(id)),
            "process {i} lost a row"
        );
    }
    let acked: usize = outcomes.iter().map(|o| o.acked.len()).sum();
    assert_eq!(
        acked,
        stored.len(),
        "every stored row was acknowledged once"
    );
    outcomes
}

/// The same shape with one-statement writes (`Database::execute`): under
/// `safe`, a process waiting for the turn posts its statement, and the
/// process holding the turn commits it in its own transaction. Nothing acknowledged
/// is lost or stored twice, nobody sees an error, and statements were
/// committed by other processes.
#[test]
fn single_threaded_processes_combine_their_statements_and_lose_nothing() {
    for profile in ["safe", "balanced"] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.db");
        let outcomes = single_threaded_writers(&path, &[(PROFILE, profile), (API, "execute")]);
        let elsewhere: u64 = outcomes.iter().map(|o| o.combined.0).sum();
        let here: u64 = outcomes.iter().map(|o| o.combined.1).sum();
        assert_eq!(
            elsewhere, here,
            "every statement committed elsewhere was committed here"
        );
        if profile == "safe" {
            assert!(
                elsewhere > 0,
                "no statement was committed by another process"
            );
        } else {
            // Combined only where commits are synced (docs/concurrency.md).
            assert_eq!(elsewhere, 0, "balanced combined statements");
        }
        eprintln!(
            "single-threaded processes, {profile}: {elsewhere} statements committed by another"
        );
    }
}

/// Waits (up to 20 s) until the job slots of the database at `path` are
/// in a state `want` accepts.
fn wait_for_jobs(path: &Path, want: impl Fn(litelane::xproc::JobStates) -> bool) {
    let q = litelane::xproc::ProcessQueue::open(path).unwrap();
    let start = Instant::now();
    while !want(q.job_states()) {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "{:?}",
            q.job_states()
        );
        thread::sleep(Duration::from_millis(1));
    }
}

/// Starts a `holder` (each transaction holding the writer `hold_ms`) and
/// returns once it is inside its first transaction.
fn holding(path: &Path, hold_ms: &str) -> Child {
    let mut holder = spawn_with(
        path,
        "holder",
        100,
        &[(PROFILE, "safe"), (HOLD_MS, hold_ms)],
    );
    let mut lines = BufReader::new(holder.stdout.take().unwrap()).lines();
    while lines.next().expect("the holder runs").unwrap() != "HOLDING" {}
    // Keep draining its output, so it never blocks on a full pipe.
    thread::spawn(move || lines.for_each(drop));
    holder
}

/// A process that holds the turn takes another's posted statement and is
/// killed while running it, before its commit: the statement is posted
/// again, its poster runs it itself, and it is stored once and
/// acknowledged.
#[test]
fn a_statement_whose_leader_dies_before_committing_it_runs_again_once() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("b.db");
    create(&path);
    let mut holder = holding(&path, "400");
    let poster = spawn_with(
        &path,
        "poster",
        7,
        &[(PROFILE, "safe"), (POSTER_SQL, "slow")],
    );
    wait_for_jobs(&path, |s| s.taken == 1);
    holder.kill().unwrap();
    holder.wait().unwrap();
    // It ran in its own process after the leader died.
    acknowledged_once(&path, collect(poster), 7, (0, 0));
}

/// The poster of `id` was acknowledged, with no error and no unknown
/// outcome, its row is the only one stored, and `combined` is its count of
/// statements committed by another process and for another.
fn acknowledged_once(path: &Path, o: Outcome, id: i64, combined: (u64, u64)) {
    assert!(
        o.errors.is_empty() && o.unknown.is_empty(),
        "{:?} {:?}",
        o.errors,
        o.unknown
    );
    assert_eq!(o.acked, [id]);
    assert_eq!(o.combined, combined);
    assert_eq!(stored(path), BTreeSet::from([id]));
}

/// The leader is killed after its `COMMIT`, while its commit is being made
/// durable (a syncer of this test holds the shared fsync, so the leader
/// waits in it): the poster was told the commit happened, makes it durable
/// itself once the fsync is free, and is acknowledged: an exact outcome,
/// not an unknown one.
#[test]
fn a_poster_whose_leader_dies_making_its_commit_durable_is_acknowledged_once_durable() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("d.db");
    create(&path);
    let mut holder = holding(&path, "400");
    let poster = spawn_with(&path, "poster", 8, &[(PROFILE, "safe")]);
    wait_for_jobs(&path, |s| s.posted == 1);
    // Hold the shared fsync: the leader will wait for it after its COMMIT.
    let q = litelane::xproc::ProcessQueue::open(&path).unwrap();
    let (release, released) = std::sync::mpsc::channel::<()>();
    let (holding_sync, syncing) = std::sync::mpsc::channel::<()>();
    let syncer = thread::spawn(move || {
        let counted = q.count_commit();
        let _ = q.make_durable(counted, false, &mut || {
            holding_sync.send(()).unwrap();
            released.recv().unwrap();
            Ok(())
        });
    });
    syncing.recv().unwrap();
    wait_for_jobs(&path, |s| s.committed == 1);
    holder.kill().unwrap();
    holder.wait().unwrap();
    // The poster cannot be acknowledged before a sync covers its commit.
    thread::sleep(Duration::from_millis(50));
    release.send(()).unwrap();
    syncer.join().unwrap();
    // Committed by the leader that died.
    acknowledged_once(&path, collect(poster), 8, (1, 0));
}

#[test]
fn a_holder_killed_mid_transaction_does_not_stall_the_others() {
    holders_killed(&[]);
}

/// The same with the worker-processes shape: single-threaded writers under
/// `safe`, whose commits are made durable after their turns.
#[test]
fn a_holder_killed_does_not_stall_single_threaded_safe_writers() {
    holders_killed(&[(PROFILE, "safe"), (THREADS, "1")]);
}

fn holders_killed(env: &[(&str, &str)]) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("k.db");
    create(&path);
    let kills = if long() { 20 } else { 3 };
    let writers: Vec<_> = (0..2)
        .map(|i| spawn_with(&path, "writer", i, env))
        .collect();
    let mut killed_at = Vec::new();
    for k in 0..kills {
        let mut holder = spawn_with(&path, "holder", 100 + k, env);
        let mut lines = BufReader::new(holder.stdout.take().unwrap()).lines();
        // Kill it inside one of its transactions (it holds the writer of
        // every process then).
        let skip = 1 + k % 3;
        let mut seen = 0;
        while seen < skip {
            let line = lines.next().expect("the holder runs").unwrap();
            seen += usize::from(line == "HOLDING");
        }
        holder.kill().unwrap();
        killed_at.push(Instant::now());
        holder.wait().unwrap();
    }
    let outcomes: Vec<_> = writers.into_iter().map(collect).collect();
    let stored = stored(&path);
    for (i, o) in outcomes.iter().enumerate() {
        assert!(
            o.errors.is_empty(),
            "writer {i}: {:?}",
            &o.errors[..o.errors.len().min(3)]
        );
        assert_eq!(o.busy, 0);
        for id in &o.acked {
            assert!(
                stored.contains(id),
                "writer {i}: acknowledged {id} is not stored"
            );
        }
        // A dead holder must not cost anyone the busy timeout (10 s).
        assert!(
            o.max_wait_ms < 5_000,
            "writer {i} waited {} ms",
            o.max_wait_ms
        );
    }
    eprintln!(
        "{kills} holders killed; longest writer wait {} ms",
        outcomes.iter().map(|o| o.max_wait_ms).max().unwrap()
    );
}

/// What the cross-process queue costs one process: single-row writes from
/// one thread and from 16, with the queue and without. A measurement, not
/// a check: `cargo test --release -p litelane --test it processes::
/// process_queue_cost -- --ignored --nocapture`.
#[test]
#[ignore = "measurement, prints figures"]
fn process_queue_cost() {
    for (threads, profile) in [(1usize, Profile::Balanced), (16, Profile::Safe)] {
        for on in [true, false, true, false] {
            let dir = tempfile::tempdir().unwrap();
            let mut o = Options::with_profile(profile);
            o.process_queue = on;
            let db = Database::open(dir.path().join("c.db"), o).unwrap();
            db.write(|tx| Ok(tx.execute_batch("CREATE TABLE t(x)")?))
                .unwrap();
            let per = if threads == 1 { 5000 } else { 300 };
            let start = Instant::now();
            thread::scope(|s| {
                for _ in 0..threads {
                    s.spawn(|| {
                        for i in 0..per {
                            db.write(move |tx| Ok(tx.execute("INSERT INTO t VALUES (?)", [i])?))
                                .unwrap();
                        }
                    });
                }
            });
            let el = start.elapsed();
            let m = db.metrics();
            eprintln!(
                "{threads} threads {profile}: queue {}: {:.0} writes/s, {:.1} µs per write, {:.1} per commit",
                if on { "on " } else { "off" },
                (threads * per as usize) as f64 / el.as_secs_f64(),
                el.as_secs_f64() * 1e6 / (threads * per as usize) as f64,
                m.mean_group_size()
            );
        }
    }
}

/// A process that dies while it runs the shared fsync of `safe` (it holds
/// the syncer lock, byte 2 of the lock file) holds nobody up: the kernel
/// drops its lock with its descriptors, and the next commit runs the fsync
/// itself. The "other process" here is an open file description of the lock
/// file holding that byte and the presence byte (3) of every open queue,
/// closed to simulate the death.
#[test]
fn a_syncer_that_dies_holds_nobody_up() {
    use nix::fcntl::{fcntl, FcntlArg};
    use nix::libc;
    use std::sync::mpsc;

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("d.db");
    let db = Database::open(&path, Options::with_profile(Profile::Safe)).unwrap();
    db.write(|tx| Ok(tx.execute_batch("CREATE TABLE acked(id INTEGER PRIMARY KEY)")?))
        .unwrap();
    let before = db.metrics();
    let lane = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(litelane::xproc::lock_path_for(&path))
        .unwrap();
    let syncer = libc::flock {
        l_type: libc::F_WRLCK as libc::c_short,
        l_whence: libc::SEEK_SET as libc::c_short,
        l_start: 2,
        l_len: 1,
        l_pid: 0,
    };
    fcntl(&lane, FcntlArg::F_OFD_SETLK(&syncer)).unwrap();
    let present = libc::flock {
        l_type: libc::F_RDLCK as libc::c_short,
        l_start: 3,
        ..syncer
    };
    fcntl(&lane, FcntlArg::F_OFD_SETLK(&present)).unwrap();
    // Past the 10 ms for which the writer trusts its last look that found
    // it alone (it would sync by itself, sharing nothing).
    thread::sleep(Duration::from_millis(50));
    let (tx, rx) = mpsc::channel();
    let writer = db.clone();
    let h = thread::spawn(move || {
        let r = writer.write(|t| Ok(t.execute("INSERT INTO acked VALUES (1)", [])?));
        tx.send(r.map_err(|e| e.to_string())).unwrap();
    });
    assert!(
        rx.recv_timeout(Duration::from_millis(300)).is_err(),
        "the commit waits for the fsync running in the other process"
    );
    drop(lane); // the syncer dies
    let out = rx
        .recv_timeout(Duration::from_secs(5))
        .expect("a dead syncer releases the others at once");
    assert_eq!(out, Ok(1));
    h.join().unwrap();
    let after = db.metrics();
    assert_eq!(
        after.wal_syncs,
        before.wal_syncs + 1,
        "it ran the fsync itself"
    );
    assert_eq!(stored(&path), BTreeSet::from([1]));
}

/// A disk too full for the lock file to grow to its 320 KiB (simulated with
/// a file-size limit of 256 KiB on the writing process, `ulimit -f`, its
/// `SIGXFSZ` ignored so that a write past it fails with `EFBIG`): the queue
/// still works on the lock file's first page, combined commits are off and
/// the metrics say why, and every acknowledged row is stored.
#[test]
fn a_lock_file_that_cannot_grow_keeps_the_queue_and_turns_combining_off() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("full.db");
    {
        // Created without litelane: the limited process makes the lock file.
        let c = rusqlite::Connection::open(&path).unwrap();
        c.execute_batch("PRAGMA journal_mode=WAL; CREATE TABLE acked(id INTEGER PRIMARY KEY)")
            .unwrap();
    }
    let env = [
        (PROFILE, "safe"),
        (THREADS, "1"),
        (API, "execute"),
        (ROWS, "20"),
    ];
    let script = "trap '' XFSZ; ulimit -f 256; exec \"$0\" \"$@\"";
    let writer = child(&path, "writer", 3, &env, Some(script))
        .spawn()
        .expect("bash runs the child");
    let o = collect(writer);
    assert!(o.errors.is_empty(), "{:?}", o.errors);
    assert_eq!(o.acked.len(), 20);
    assert!(!o.queue_off, "the queue stays on");
    let why = o
        .combined_off
        .expect("the metrics say combined commits are off");
    assert!(
        why.contains("could not grow") && why.contains("-lane"),
        "{why}"
    );
    let lane = o
        .lane_bytes
        .expect("the lock file, while the database was open");
    assert!(
        (4096..320 * 1024).contains(&lane),
        "the lock file stopped at the limit: {lane} bytes"
    );
    assert!(
        !litelane::xproc::lock_path_for(&path).exists(),
        "the last close removed it"
    );
    assert_eq!(stored(&path), o.acked.iter().copied().collect());
}

/// Only readers map the database (`Options::mmap_size`): a mapping
/// connection looks every page up in the WAL index before its page cache,
/// which the writer's cache makes a pure cost (docs/performance.md, "The
/// memory map"). So the writer never maps, in any profile, alone or with
/// another process on the file, and the readers map what is configured.
#[test]
fn only_readers_map_the_database() {
    let dir = tempfile::tempdir().unwrap();
    let mapped = |db: &Database| {
        let writer = db
            .write(|tx| Ok(tx.query_row("PRAGMA mmap_size", [], |r| r.get::<_, i64>(0))?))
            .unwrap();
        let reader = db
            .read(|c| Ok(c.query_row("PRAGMA mmap_size", [], |r| r.get::<_, i64>(0))?))
            .unwrap();
        (writer, reader)
    };
    for profile in [Profile::Safe, Profile::Balanced, Profile::Fast] {
        let opts = Options::with_profile(profile);
        let configured = opts.mmap_size as i64;
        assert!(configured > 0);
        let path = dir.path().join(format!("{profile:?}.db"));
        let db = Database::open(&path, opts.clone()).unwrap();
        db.write(|tx| Ok(tx.execute_batch("CREATE TABLE t(x)")?))
            .unwrap();
        assert_eq!(mapped(&db), (0, configured), "{profile:?}, alone");
        let other = Database::open(&path, opts.clone()).unwrap();
        assert_eq!(mapped(&db), (0, configured), "{profile:?}, with another");
        assert_eq!(mapped(&other), (0, configured), "{profile:?}, the other");
    }
    let unmapped = Options {
        mmap_size: 0,
        ..Options::default()
    };
    let never = Database::open(dir.path().join("never.db"), unmapped).unwrap();
    assert_eq!(mapped(&never), (0, 0), "mmap_size 0: nobody maps");
}
