//! Counters and latency samples, and the snapshot [`Metrics`] a user reads.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::unpoisoned::lock;
use hdrhistogram::Histogram;

/// The longest wait the histogram tells apart: one hour, in nanoseconds
/// (longer waits count as one hour; `queue_wait_max` keeps the exact value).
const WAIT_HIGHEST_NANOS: u64 = 3_600 * 1_000_000_000;
/// Significant decimal digits kept by the wait histogram (0.1% error).
const WAIT_SIGNIFICANT_DIGITS: u8 = 3;
/// How many slow statements / long waits are kept (the most recent).
const KEPT_EVENTS: usize = 100;

/// A statement that ran longer than `Options::slow_statement`.
#[derive(Debug, Clone, PartialEq)]
pub struct SlowStatement {
    /// The statement's SQL text.
    pub sql: String,
    /// How long it ran.
    pub duration: Duration,
}

/// A wait for the writer longer than `Options::long_wait`, with who held it.
#[derive(Debug, Clone, PartialEq)]
pub struct LongWait {
    /// How long the waiter waited.
    pub waited: Duration,
    /// Label of the waiter's own transaction (`""` if unlabelled).
    pub waiter_label: String,
    /// Label of the transaction that held the writer just before the waiter's
    /// turn came (`""` if unlabelled).
    pub holder_label: String,
    /// The last statement that transaction ran.
    pub holder_sql: String,
}

/// The WAL is over its limit (`Checkpoints::limit_pages`): since when,
/// by how much, and why (see [`Metrics::wal_over_limit`]).
#[derive(Debug, Clone, PartialEq)]
pub struct WalOverLimit {
    /// How long the WAL has been over its limit: since the commit that
    /// took it past `limit_pages`. It ends with the first commit that
    /// starts the WAL over (or leaves it under the limit).
    pub duration: Duration,
    /// WAL size in pages after the last commit.
    pub wal_pages: u64,
    /// `Checkpoints::limit_pages`.
    pub limit_pages: u64,
    /// Why the checkpointer has not brought it back.
    pub reason: OverLimitReason,
}

/// Why the WAL is over its limit (see [`WalOverLimit`]).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum OverLimitReason {
    /// A read of this process holds a snapshot older than the WAL's end:
    /// the oldest one that was open when the last checkpoint could not copy
    /// the whole WAL (its label, age and first statement). It pins the WAL
    /// until it ends (or `Checkpoints::max_read_age` interrupts it).
    PinnedByRead(crate::PinnedRead),
    /// The last checkpoint could not copy the whole WAL and no read of this
    /// process is old enough to be the cause: a reader (or a checkpoint, or
    /// a write lock) of another process.
    PinnedElsewhere,
    /// The last checkpoint copied every frame it found: the WAL starts over
    /// at the next write that finds no reader on it, once the checkpointer
    /// has copied what was written meanwhile.
    CatchingUp,
    /// The last checkpoint failed with this error (a full disk, an I/O
    /// error).
    CheckpointFailed(String),
}

/// A point-in-time copy of the engine's metrics (see [`Database::metrics`](crate::Database::metrics)).
///
/// Durations are wall-clock; percentiles are over every writer-queue wait
/// since the database was opened, from a histogram with 0.1% resolution.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Metrics {
    /// Median wait for the writer's turn.
    pub queue_wait_p50: Duration,
    /// 95th percentile wait for the writer's turn.
    pub queue_wait_p95: Duration,
    /// 99th percentile wait for the writer's turn.
    pub queue_wait_p99: Duration,
    /// Longest wait for the writer's turn since open.
    pub queue_wait_max: Duration,
    /// Writers waiting for their turn right now.
    pub queue_depth: usize,
    /// Write transactions (jobs) committed.
    pub transactions: u64,
    /// Write transactions that rolled back (error or panic in the closure, or a
    /// failed commit).
    pub rollbacks: u64,
    /// Write transactions whose commit ended in
    /// [`Error::OutcomeUnknown`](crate::Error::OutcomeUnknown): visible, of
    /// unknown durability (a failed fsync); neither committed nor rolled back
    /// as far as this count goes.
    pub outcomes_unknown: u64,
    /// Rows changed by committed write transactions.
    pub rows_written: u64,
    /// SQLite commits run by the writer (one per group).
    pub commits: u64,
    /// `group_sizes[i]` = commits that contained jobs in bucket `i`:
    /// 1, 2, 3–4, 5–8, 9–16, 17–32, 33–64, 65+.
    pub group_sizes: [u64; 8],
    /// `SQLITE_BUSY` results seen by any connection of this database. Stays 0
    /// unless another process holds a lock past `busy_timeout`.
    pub busy_errors: u64,
    /// Checkpoints run by the background checkpointer.
    pub checkpoints: u64,
    /// Checkpoints that escalated to RESTART because the WAL passed its limit.
    pub checkpoints_escalated: u64,
    /// WAL frames copied back into the database by those checkpoints, each
    /// counted at most once (a frame copied by one checkpoint is not counted
    /// again by the next one on the same WAL). A checkpoint whose WAL a
    /// commit restarted between the checkpointer's look and the checkpoint
    /// itself may leave its frames uncounted.
    pub checkpoint_pages: u64,
    /// Total time spent in checkpoints.
    pub checkpoint_time: Duration,
    /// WAL size in pages after the last commit (0 after a checkpoint reset
    /// it, until the next commit).
    pub wal_pages: u64,
    /// Size of the `-wal` file on disk in bytes (stays allocated after a
    /// checkpoint, up to `Options::journal_size_limit`).
    pub wal_file_bytes: u64,
    /// `Some` while the WAL is over `Checkpoints::limit_pages`: since when,
    /// and why (the read that pins it, when it is one of this process's).
    /// Under the default `OverLimit::Grow` writers do not wait meanwhile;
    /// the WAL is copied back and starts over at the first moment no read
    /// pins it. `None` while it is under its limit, and without background
    /// checkpoints.
    pub wal_over_limit: Option<WalOverLimit>,
    /// Times the WAL went over its limit since the database was opened.
    pub wal_over_limit_count: u64,
    /// Total time the WAL spent over its limit since the database was
    /// opened (the current stretch included).
    pub wal_over_limit_time: Duration,
    /// The longest time a checkpoint held every writer of this process
    /// back, since the database was opened: a turn of the writer that a
    /// checkpoint took (the checkpointer's catch-up, an escalation under
    /// `OverLimit::HoldWriters`, [`Database::checkpoint`](crate::Database::checkpoint)),
    /// from the moment it had the turn to the moment it handed it on, or
    /// the writer queue's gate closed over the WAL limit (`HoldWriters`).
    /// No write waited on a checkpoint longer than this.
    pub checkpoint_hold_max: Duration,
    /// Total time checkpoints held writers back, as in
    /// [`checkpoint_hold_max`](Metrics::checkpoint_hold_max).
    pub checkpoint_hold_time: Duration,
    /// Times checkpoints held writers back (turns taken, gate closings).
    pub checkpoint_holds: u64,
    /// Recent statements slower than `Options::slow_statement` (newest last).
    pub slow_statements: Vec<SlowStatement>,
    /// Recent waits longer than `Options::long_wait` (newest last).
    pub long_waits: Vec<LongWait>,
    /// When the last checkpoint could not copy the whole WAL: the oldest read
    /// of this process that was already open then (its label, age and first
    /// statement), which is what holds the WAL back. `None` when the last
    /// checkpoint finished, or when only other processes' readers were in
    /// the way.
    pub wal_pinned_by: Option<crate::PinnedRead>,
    /// Why the cross-process writer queue is off (`None` while it is on, or
    /// when `Options::process_queue` turned it off): writers of other
    /// processes then meet through SQLite's busy timeout.
    pub process_queue_off: Option<String>,
    /// Why combined commits (docs/concurrency.md, "Combined commits") are
    /// off while the cross-process queue is on: the lock file could not
    /// grow to hold the job slots (a full disk). `None` while they are
    /// available, or when the queue itself is off.
    pub combined_commits_off: Option<String>,
    /// Under `safe` with the cross-process queue: fsyncs of the WAL that this
    /// process ran after its commits' turns (see docs/concurrency.md, "One
    /// fsync for many processes").
    pub wal_syncs: u64,
    /// Under `safe` with the cross-process queue: commits of this process
    /// made durable by an fsync that another commit (of any process) ran
    /// after them, with no fsync of their own.
    pub syncs_shared: u64,
    /// One-statement writes of this process
    /// ([`Database::execute`](crate::Database::execute)) that another
    /// process committed in its transaction (docs/concurrency.md, "Combined
    /// commits").
    pub combined_elsewhere: u64,
    /// One-statement writes of other processes that this process committed
    /// in its transactions.
    pub combined_here: u64,
    /// Turns this process's writer took in the cross-process queue.
    pub process_turns: u64,
    /// Of [`process_turns`](Metrics::process_turns), those taken out of
    /// ticket order, the moment the turn was free (bounded barging,
    /// docs/concurrency.md).
    pub turns_out_of_order: u64,
}

/// Upper bounds of the group-size buckets.
pub const GROUP_BUCKETS: [u64; 8] = [1, 2, 4, 8, 16, 32, 64, u64::MAX];

#[derive(Default)]
pub(crate) struct Recorder {
    pub transactions: AtomicU64,
    pub rollbacks: AtomicU64,
    pub outcomes_unknown: AtomicU64,
    pub rows_written: AtomicU64,
    pub commits: AtomicU64,
    pub busy_errors: AtomicU64,
    pub checkpoints: AtomicU64,
    pub checkpoints_escalated: AtomicU64,
    pub checkpoint_pages: AtomicU64,
    pub checkpoint_nanos: AtomicU64,
    pub wal_pages: AtomicU64,
    pub wal_syncs: AtomicU64,
    pub syncs_shared: AtomicU64,
    pub combined_elsewhere: AtomicU64,
    pub combined_here: AtomicU64,
    pub process_turns: AtomicU64,
    pub turns_out_of_order: AtomicU64,
    pub checkpoint_holds: AtomicU64,
    checkpoint_hold_nanos: AtomicU64,
    checkpoint_hold_max_nanos: AtomicU64,
    group_sizes: [AtomicU64; 8],
    waits: Mutex<Waits>,
    /// The WAL is over its limit (changed only with `over_limit` locked).
    over: AtomicBool,
    over_limit: Mutex<OverLimitTimes>,
    /// The error of the last checkpoint of the checkpointer, if it failed.
    checkpoint_error: Mutex<Option<String>>,
    events: Mutex<Events>,
    /// When the last checkpoint ran, if it could not copy the whole WAL.
    incomplete_checkpoint: Mutex<Option<Instant>>,
    /// Why the cross-process queue is off, if it is.
    process_queue_off: Mutex<Option<String>>,
    combined_commits_off: Mutex<Option<String>>,
}

/// When the WAL went over its limit, and the stretches before.
#[derive(Default)]
struct OverLimitTimes {
    /// Since when the WAL is over its limit (`None`: it is not).
    since: Option<Instant>,
    /// The limit, in pages.
    limit: u64,
    /// Stretches over the limit so far, the current one included.
    count: u64,
    /// Total length of the stretches that ended.
    ended: Duration,
}

/// What [`Recorder::over_limit`] tells about the WAL's limit.
pub(crate) struct OverLimitNow {
    /// Since when, and the limit, while over it.
    pub current: Option<(Instant, u64)>,
    pub count: u64,
    pub total: Duration,
}

struct Waits {
    histogram: Histogram<u64>,
    max: u64,
}

impl Default for Waits {
    fn default() -> Self {
        Waits {
            histogram: Histogram::new_with_bounds(1, WAIT_HIGHEST_NANOS, WAIT_SIGNIFICANT_DIGITS)
                .expect("valid histogram bounds"),
            max: 0,
        }
    }
}

#[derive(Default)]
struct Events {
    slow: VecDeque<SlowStatement>,
    long: VecDeque<LongWait>,
}

fn push_bounded<T>(q: &mut VecDeque<T>, item: T, cap: usize) {
    if q.len() == cap {
        q.pop_front();
    }
    q.push_back(item);
}

impl Recorder {
    pub fn record_wait(&self, wait: Duration) {
        let nanos = wait.as_nanos().min(u64::MAX as u128) as u64;
        let mut w = lock(&self.waits);
        w.max = w.max.max(nanos);
        w.histogram.saturating_record(nanos.max(1));
    }

    pub fn record_group(&self, size: usize) {
        let i = GROUP_BUCKETS
            .iter()
            .position(|&b| size as u64 <= b)
            .unwrap_or(7);
        self.group_sizes[i].fetch_add(1, Relaxed);
        self.commits.fetch_add(1, Relaxed);
    }

    pub fn record_slow(&self, sql: &str, duration: Duration) {
        let mut e = lock(&self.events);
        let item = SlowStatement {
            sql: sql.to_string(),
            duration,
        };
        push_bounded(&mut e.slow, item, KEPT_EVENTS);
    }

    pub fn record_long_wait(&self, wait: LongWait) {
        let mut e = lock(&self.events);
        push_bounded(&mut e.long, wait, KEPT_EVENTS);
    }

    /// Records that a checkpoint held every writer back for `held`.
    pub fn record_checkpoint_hold(&self, held: Duration) {
        let nanos = held.as_nanos().min(u64::MAX as u128) as u64;
        self.checkpoint_holds.fetch_add(1, Relaxed);
        self.checkpoint_hold_nanos.fetch_add(nanos, Relaxed);
        self.checkpoint_hold_max_nanos.fetch_max(nanos, Relaxed);
    }

    /// After a commit: the WAL holds `pages` pages, its limit is `limit`.
    /// Locks only when the WAL crosses the limit one way or the other.
    pub fn note_wal_size(&self, pages: u64, limit: u64) {
        let over = pages >= limit;
        if over == self.over.load(Relaxed) {
            return;
        }
        let mut o = lock(&self.over_limit);
        self.over.store(over, Relaxed);
        match (over, o.since) {
            (true, None) => {
                o.since = Some(Instant::now());
                o.limit = limit;
                o.count += 1;
            }
            (false, Some(since)) => {
                o.ended += since.elapsed();
                o.since = None;
            }
            _ => {}
        }
    }

    /// The WAL's time over its limit.
    pub fn over_limit(&self) -> OverLimitNow {
        let o = lock(&self.over_limit);
        OverLimitNow {
            current: o.since.map(|s| (s, o.limit)),
            count: o.count,
            total: o.ended + o.since.map_or(Duration::ZERO, |s| s.elapsed()),
        }
    }

    /// Notes the checkpointer's last checkpoint failed with `err`, or
    /// (`None`) that it ran.
    pub fn note_checkpoint_error(&self, err: Option<String>) {
        *lock(&self.checkpoint_error) = err;
    }

    /// The error of the checkpointer's last checkpoint, if it failed.
    pub fn checkpoint_error(&self) -> Option<String> {
        lock(&self.checkpoint_error).clone()
    }

    /// Notes whether the checkpoint that just ran copied the whole WAL.
    pub fn note_checkpoint_complete(&self, complete: bool) {
        *lock(&self.incomplete_checkpoint) = (!complete).then(Instant::now);
    }

    /// When the last checkpoint ran, if it could not copy the whole WAL.
    pub fn last_incomplete_checkpoint(&self) -> Option<Instant> {
        *lock(&self.incomplete_checkpoint)
    }

    /// Notes that the cross-process queue is off, and why.
    pub fn note_process_queue_off(&self, why: String) {
        *lock(&self.process_queue_off) = Some(why);
    }

    pub fn note_combined_commits_off(&self, why: String) {
        *lock(&self.combined_commits_off) = Some(why);
    }

    pub fn note_error(&self, err: &crate::Error) {
        if err.is_busy() {
            self.busy_errors.fetch_add(1, Relaxed);
        }
    }

    /// Counts `jobs` write transactions whose commit failed with `err`: as
    /// rollbacks, or as outcomes unknown when that is what `err` says.
    pub fn record_failed_commit(&self, err: &crate::Error, jobs: u64) {
        match err {
            crate::Error::OutcomeUnknown { .. } => &self.outcomes_unknown,
            _ => &self.rollbacks,
        }
        .fetch_add(jobs, Relaxed);
    }

    pub fn snapshot(&self, queue_depth: usize) -> Metrics {
        let ([p50, p95, p99], max) = {
            let w = lock(&self.waits);
            let pct = |q: f64| -> Duration {
                if w.histogram.is_empty() {
                    Duration::ZERO
                } else {
                    // Never above the exact maximum (the histogram rounds up
                    // to its bucket's edge).
                    Duration::from_nanos(w.histogram.value_at_quantile(q).min(w.max))
                }
            };
            ([pct(0.50), pct(0.95), pct(0.99)], w.max)
        };
        let events = lock(&self.events);
        Metrics {
            queue_wait_p50: p50,
            queue_wait_p95: p95,
            queue_wait_p99: p99,
            queue_wait_max: Duration::from_nanos(max),
            queue_depth,
            transactions: self.transactions.load(Relaxed),
            rollbacks: self.rollbacks.load(Relaxed),
            outcomes_unknown: self.outcomes_unknown.load(Relaxed),
            rows_written: self.rows_written.load(Relaxed),
            commits: self.commits.load(Relaxed),
            group_sizes: std::array::from_fn(|i| self.group_sizes[i].load(Relaxed)),
            busy_errors: self.busy_errors.load(Relaxed),
            checkpoints: self.checkpoints.load(Relaxed),
            checkpoints_escalated: self.checkpoints_escalated.load(Relaxed),
            checkpoint_pages: self.checkpoint_pages.load(Relaxed),
            checkpoint_time: Duration::from_nanos(self.checkpoint_nanos.load(Relaxed)),
            wal_pages: self.wal_pages.load(Relaxed),
            wal_syncs: self.wal_syncs.load(Relaxed),
            syncs_shared: self.syncs_shared.load(Relaxed),
            combined_elsewhere: self.combined_elsewhere.load(Relaxed),
            combined_here: self.combined_here.load(Relaxed),
            process_turns: self.process_turns.load(Relaxed),
            turns_out_of_order: self.turns_out_of_order.load(Relaxed),
            wal_file_bytes: 0,
            wal_over_limit: None,
            wal_over_limit_count: 0,
            wal_over_limit_time: Duration::ZERO,
            checkpoint_hold_max: Duration::from_nanos(self.checkpoint_hold_max_nanos.load(Relaxed)),
            checkpoint_hold_time: Duration::from_nanos(self.checkpoint_hold_nanos.load(Relaxed)),
            checkpoint_holds: self.checkpoint_holds.load(Relaxed),
            slow_statements: events.slow.iter().cloned().collect(),
            long_waits: events.long.iter().cloned().collect(),
            wal_pinned_by: None,
            process_queue_off: lock(&self.process_queue_off).clone(),
            combined_commits_off: lock(&self.combined_commits_off).clone(),
        }
    }
}

impl Metrics {
    /// Mean jobs per commit (1.0 when nothing was grouped).
    pub fn mean_group_size(&self) -> f64 {
        if self.commits == 0 {
            0.0
        } else {
            self.transactions as f64 / self.commits as f64
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_come_from_recorded_waits() {
        let r = Recorder::default();
        for ms in 1..=100 {
            r.record_wait(Duration::from_millis(ms));
        }
        let m = r.snapshot(3);
        let near = |d: Duration, ms: u64| {
            let want = Duration::from_millis(ms).as_nanos() as f64;
            (d.as_nanos() as f64 - want).abs() / want < 0.002
        };
        assert!(near(m.queue_wait_p50, 50), "{:?}", m.queue_wait_p50);
        assert!(near(m.queue_wait_p99, 99), "{:?}", m.queue_wait_p99);
        assert_eq!(m.queue_wait_max, Duration::from_millis(100));
        assert_eq!(m.queue_depth, 3);
    }

    #[test]
    fn group_sizes_fall_into_power_of_two_buckets() {
        let r = Recorder::default();
        for size in [1, 2, 3, 4, 5, 64, 65, 1000] {
            r.record_group(size);
        }
        let m = r.snapshot(0);
        assert_eq!(m.group_sizes, [1, 1, 2, 1, 0, 0, 1, 2]);
        assert_eq!(m.commits, 8);
    }

    #[test]
    fn time_over_the_wal_limit_is_counted_from_crossing_to_crossing_back() {
        let r = Recorder::default();
        r.note_wal_size(10, 100);
        let now = r.over_limit();
        assert!(now.current.is_none());
        assert_eq!((now.count, now.total), (0, Duration::ZERO));
        r.note_wal_size(100, 100);
        r.note_wal_size(150, 100);
        std::thread::sleep(Duration::from_millis(20));
        let now = r.over_limit();
        let (since, limit) = now.current.expect("over the limit");
        assert_eq!(limit, 100);
        assert!(since.elapsed() >= Duration::from_millis(20));
        assert_eq!(now.count, 1, "one stretch, however many commits");
        r.note_wal_size(3, 100);
        let now = r.over_limit();
        assert!(now.current.is_none());
        assert!(now.total >= Duration::from_millis(20), "{:?}", now.total);
        r.note_wal_size(200, 100);
        assert_eq!(r.over_limit().count, 2);
    }

    #[test]
    fn checkpoint_holds_keep_their_longest_and_their_total() {
        let r = Recorder::default();
        for ms in [3, 40, 7] {
            r.record_checkpoint_hold(Duration::from_millis(ms));
        }
        let m = r.snapshot(0);
        assert_eq!(m.checkpoint_hold_max, Duration::from_millis(40));
        assert_eq!(m.checkpoint_hold_time, Duration::from_millis(50));
        assert_eq!(m.checkpoint_holds, 3);
    }

    #[test]
    fn only_the_newest_events_are_kept() {
        let r = Recorder::default();
        for i in 0..(KEPT_EVENTS + 5) {
            r.record_slow(&format!("SELECT {i}"), Duration::from_secs(1));
        }
        let m = r.snapshot(0);
        assert_eq!(m.slow_statements.len(), KEPT_EVENTS);
        assert_eq!(
            m.slow_statements.last().unwrap().sql,
            format!("SELECT {}", KEPT_EVENTS + 4)
        );
    }
}
