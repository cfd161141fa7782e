//! One profile's in-process workload: single-row writers, a bulk inserter
//! that trims old rows, readers (one holding its snapshot for 3 s), the
//! thread that runs the writer process, and an explicit checkpoint every
//! 5 s, all on one database, until stopped.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use litelane::{CheckpointMode, Database, Profile, Value};

use super::args::Args;
use super::counters::{new_histogram, Counters, Shared};
use super::process::{self, ChildPlan};

/// How long the workers may take to stop before the writer counts as stuck.
const STOP_WAIT: Duration = Duration::from_secs(30);

/// The threads of one profile's workload, running.
pub struct Workload {
    pub db: Database,
    pub counters: Arc<Counters>,
    /// The single-row writers' commit latencies (µs) since the last sample.
    pub latency: Arc<Mutex<Histogram<u64>>>,
    stop: Arc<AtomicBool>,
    stop_checkpoints: Arc<AtomicBool>,
    workers: Vec<JoinHandle<()>>,
    checkpointer: JoinHandle<()>,
    /// Why the writer process's thread gave up, if it did.
    child_failed: Arc<Mutex<Option<String>>>,
}

/// What one thread of the workload holds: the database, the counters, the
/// stop flag it obeys and the run's shared state.
#[derive(Clone)]
struct Worker {
    db: Database,
    c: Arc<Counters>,
    shared: Arc<Shared>,
    stop: Arc<AtomicBool>,
    latency: Arc<Mutex<Histogram<u64>>>,
}

impl Workload {
    /// Starts every thread on `db` (the file at `path`).
    pub fn start(
        db: Database,
        profile: Profile,
        path: &Path,
        args: &Args,
        shared: &Arc<Shared>,
    ) -> Workload {
        let stop = Arc::new(AtomicBool::new(false));
        let stop_checkpoints = Arc::new(AtomicBool::new(false));
        let worker = Worker {
            db: db.clone(),
            c: Arc::default(),
            shared: Arc::clone(shared),
            stop: Arc::clone(&stop),
            latency: Arc::new(Mutex::new(new_histogram())),
        };
        let spawn = |body: Box<dyn FnOnce(Worker) + Send>| {
            let w = worker.clone();
            thread::spawn(move || body(w))
        };
        let mut workers = Vec::new();
        for _ in 0..4 {
            workers.push(spawn(Box::new(Worker::single_row_writes)));
        }
        workers.push(spawn(Box::new(Worker::bulk_inserts)));
        for long in [false, false, true] {
            workers.push(spawn(Box::new(move |w| w.reads(long))));
        }
        let child_failed: Arc<Mutex<Option<String>>> = Arc::default();
        if args.kill_every > 0 {
            let plan = ChildPlan {
                path: path.to_path_buf(),
                profile,
                kill_every: args.kill_every,
                over_limit: args.over_limit,
            };
            let failed = Arc::clone(&child_failed);
            workers.push(spawn(Box::new(move |w| w.writer_process(&plan, &failed))));
        }
        let checkpointer = {
            let w = Worker {
                stop: Arc::clone(&stop_checkpoints),
                ..worker.clone()
            };
            let explicit = args.explicit_checkpoints;
            thread::spawn(move || {
                if explicit {
                    w.explicit_checkpoints();
                }
            })
        };
        Workload {
            db,
            counters: worker.c,
            latency: worker.latency,
            stop,
            stop_checkpoints,
            workers,
            checkpointer,
            child_failed,
        }
    }

    /// Stops the checkpoints, then every other thread, and waits up to
    /// 30 s for them. `None`: some are still blocked (the writer is stuck;
    /// they keep their clones of the database and are left behind).
    pub fn stop(self) -> Option<Stopped> {
        self.stop_checkpoints.store(true, Ordering::Relaxed);
        let _ = self.checkpointer.join();
        self.stop.store(true, Ordering::Relaxed);
        let deadline = Instant::now() + STOP_WAIT;
        while self.workers.iter().any(|w| !w.is_finished()) {
            if Instant::now() > deadline {
                return None;
            }
            thread::sleep(Duration::from_millis(50));
        }
        for w in self.workers {
            let _ = w.join();
        }
        let child_failed = self.child_failed.lock().unwrap().take();
        Some(Stopped {
            db: self.db,
            counters: self.counters,
            child_failed,
        })
    }
}

/// A workload whose threads have all ended.
pub struct Stopped {
    pub db: Database,
    pub counters: Arc<Counters>,
    /// Why the writer process's thread gave up, if it did.
    pub child_failed: Option<String>,
}

impl Worker {
    fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    /// Sleeps `tenths` tenths of a second, or less when stopped; false when
    /// stopped.
    fn pause(&self, tenths: u32) -> bool {
        for _ in 0..tenths {
            if self.stopped() {
                return false;
            }
            thread::sleep(Duration::from_millis(100));
        }
        !self.stopped()
    }

    /// One small row per transaction, with a 1 ms pause; each write's
    /// latency recorded.
    fn single_row_writes(self) {
        let c = &self.c;
        while !self.stopped() {
            let id = c.next_id.fetch_add(1, Ordering::Relaxed) as i64;
            let t = Instant::now();
            let r = self.db.write(|tx| {
                Ok(tx.execute(
                    "INSERT INTO ev VALUES (?, unixepoch(), randomblob(200))",
                    [id],
                )?)
            });
            let us = t.elapsed().as_micros() as u64;
            c.max_stall_us.fetch_max(us, Ordering::Relaxed);
            match r {
                Ok(_) => {
                    self.latency.lock().unwrap().saturating_record(us.max(1));
                    c.writes.fetch_add(1, Ordering::Relaxed);
                }
                Err(e) => c.error(&self.shared, "write", &e),
            }
            thread::sleep(Duration::from_millis(1));
        }
    }

    /// 5,000 rows every 2 s, committing every 1,000; then trims old rows
    /// so the file stays a fixed size.
    fn bulk_inserts(self) {
        let c = &self.c;
        while !self.stopped() {
            let first = c.next_id.fetch_add(5000, Ordering::Relaxed) as i64;
            let rows = (first..first + 5000).map(|i| {
                vec![
                    Value::Integer(i),
                    Value::Integer(0),
                    Value::Blob(vec![3; 100]),
                ]
            });
            match self
                .db
                .inserter("ev", &["id", "at", "body"])
                .map(|i| i.commit_every(1000))
                .and_then(|i| i.insert(rows))
            {
                Ok(r) => {
                    c.bulk_rows.fetch_add(r.rows, Ordering::Relaxed);
                }
                Err(e) => c.error(&self.shared, "bulk insert", &e),
            }
            let keep_from = c.next_id.load(Ordering::Relaxed) as i64 - 100_000;
            if let Err(e) = self
                .db
                .write(|tx| Ok(tx.execute("DELETE FROM ev WHERE id < ?", [keep_from])?))
            {
                c.error(&self.shared, "trim", &e);
            }
            self.pause(20);
        }
    }

    /// Short queries every 5 ms, or (`long`) one that holds its snapshot
    /// for 3 s, every second.
    fn reads(self, long: bool) {
        let label = if long { "soak: 3-s read" } else { "" };
        while !self.stopped() {
            let r = self.db.read_labeled(label, |conn| {
                let n: i64 = conn.query_row(
                    "SELECT count(*) FROM ev WHERE id > (SELECT max(id) FROM ev) - 1000",
                    [],
                    |r| r.get(0),
                )?;
                if long {
                    thread::sleep(Duration::from_secs(3));
                }
                Ok(n)
            });
            match r {
                Ok(_) => {
                    self.c.reads.fetch_add(1, Ordering::Relaxed);
                }
                Err(e) => self.c.error(&self.shared, "read", &e),
            }
            thread::sleep(Duration::from_millis(if long { 1000 } else { 5 }));
        }
    }

    /// The writer process, killed every `kill_every` seconds and restarted;
    /// why it gave up goes to `failed`.
    fn writer_process(self, plan: &ChildPlan, failed: &Mutex<Option<String>>) {
        let run = process::run_generations(&self.db, plan, &self.stop, &self.c, &self.shared);
        if let Err(e) = run {
            eprintln!("{}: {e}", plan.profile);
            *failed.lock().unwrap() = Some(e);
        }
    }

    /// A passive checkpoint every 5 s besides the background ones.
    fn explicit_checkpoints(self) {
        while self.pause(50) {
            if let Err(e) = self.db.checkpoint(CheckpointMode::Passive) {
                self.c.error(&self.shared, "checkpoint", &e);
            }
        }
    }
}
