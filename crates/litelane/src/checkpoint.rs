//! Checkpoints off the write path.
//!
//! SQLite's automatic checkpoint runs inside the commit that crosses the
//! threshold, so one unlucky writer stalls. litelane sets
//! `wal_autocheckpoint=0` on the writer and installs a WAL hook instead: after
//! each commit the hook only records the WAL's size and, past
//! `passive_after_pages`, wakes the checkpointer thread, which runs a PASSIVE
//! checkpoint on its own connection. When the writer has been idle for
//! `idle_after`, it checkpoints what is left.
//!
//! A PASSIVE checkpoint cannot copy frames that a reader on an old snapshot
//! still needs, and the WAL cannot restart while such a reader lives, so
//! past `limit_pages` the WAL is *over its limit*, and `over_limit` decides:
//!
//! - [`OverLimit::Grow`] (the default): writers never wait. The WAL grows
//!   while the read pins it; the checkpointer retries a PASSIVE checkpoint
//!   every [`OVER_LIMIT_RETRY`] (10 ms), so it copies the WAL back, and the
//!   next write starts it over, at the first moment no read pins it. Reads of
//!   this process older than `max_read_age` (if set) are interrupted: the
//!   hard bound.
//! - [`OverLimit::HoldWriters`]: the checkpointer *escalates*: the WAL hook
//!   closes the writer queue's gate, the checkpointer takes the writer's next
//!   turn (ahead of queued writers, which then wait) and runs a RESTART
//!   checkpoint that waits up to `escalation_wait` for old readers to finish.
//!
//! Every stretch in which a checkpoint holds the writers back (a turn of the
//! writer, a closed gate) is recorded (`Metrics::checkpoint_hold_max`). The
//! WAL file itself stays allocated after a restart (`journal_size_limit`), so
//! it is not shrunk and re-grown.

use std::fmt;
use std::str::FromStr;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{mpsc, Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rusqlite::wal::CheckpointMode as RawMode;
use rusqlite::Connection;

use crate::error::{Context, Error, Result};
use crate::metrics::Recorder;
use crate::options::{Checkpoints, OverLimit, OVER_LIMIT_RETRY};
use crate::pool::Pool;
use crate::unpoisoned::{lock, wait_timeout};
use crate::writer::{Writer, WriterQueue, PROCESS_TURN_BUDGET};

/// A checkpoint mode (see <https://sqlite.org/c3ref/wal_checkpoint_v2.html>).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CheckpointMode {
    /// Copy what can be copied without waiting for anyone.
    Passive,
    /// Wait for the writer, then copy everything and sync the database.
    Full,
    /// Like `Full`, then wait for readers so the next writer restarts the WAL.
    Restart,
    /// Like `Restart`, then truncate the WAL file to zero bytes.
    Truncate,
}

impl CheckpointMode {
    fn to_rusqlite(self) -> RawMode {
        match self {
            CheckpointMode::Passive => RawMode::PASSIVE,
            CheckpointMode::Full => RawMode::FULL,
            CheckpointMode::Restart => RawMode::RESTART,
            CheckpointMode::Truncate => RawMode::TRUNCATE,
        }
    }

    /// The mode's lowercase name.
    pub fn name(self) -> &'static str {
        match self {
            CheckpointMode::Passive => "passive",
            CheckpointMode::Full => "full",
            CheckpointMode::Restart => "restart",
            CheckpointMode::Truncate => "truncate",
        }
    }
}

impl fmt::Display for CheckpointMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for CheckpointMode {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s.to_ascii_lowercase().as_str() {
            "passive" => Ok(CheckpointMode::Passive),
            "full" => Ok(CheckpointMode::Full),
            "restart" => Ok(CheckpointMode::Restart),
            "truncate" => Ok(CheckpointMode::Truncate),
            _ => Err(Error::invalid(format!(
                "unknown checkpoint mode {s:?}: expected passive, full, restart or truncate"
            ))),
        }
    }
}

/// What one checkpoint did.
#[derive(Debug, Clone, PartialEq)]
pub struct CheckpointReport {
    /// The mode that ran.
    pub mode: CheckpointMode,
    /// Frames in the WAL when it ran.
    pub wal_frames: u64,
    /// Frames copied into the database (including ones copied before).
    pub checkpointed_frames: u64,
    /// True when it could not finish (readers or another checkpoint in the way).
    pub busy: bool,
    /// How long it took.
    pub elapsed: Duration,
}

/// Runs one checkpoint on `conn`.
pub(crate) fn run(conn: &Connection, mode: CheckpointMode) -> Result<CheckpointReport> {
    let start = Instant::now();
    let (busy, log, done) = match conn.wal_checkpoint_v2(Some("main"), mode.to_rusqlite()) {
        Ok((log, done)) => (false, log, done),
        Err(e) if e.sqlite_error_code() == Some(rusqlite::ErrorCode::DatabaseBusy) => (true, 0, 0),
        Err(e) => {
            return Err(Error::from_sqlite(
                e,
                format!("running a {mode} checkpoint"),
            ))
        }
    };
    Ok(CheckpointReport {
        mode,
        wal_frames: log.max(0) as u64,
        checkpointed_frames: done.max(0) as u64,
        busy: busy || done < log,
        elapsed: start.elapsed(),
    })
}

#[derive(Default)]
struct State {
    /// WAL pages after the last commit.
    pages: u64,
    /// Frames of the current WAL already copied by a checkpoint.
    backfilled: u64,
    /// Commits seen by the WAL hook.
    commits: u64,
    /// The hook asked for a checkpoint.
    requested: bool,
    stop: bool,
    /// When the hook closed the writer queue's gate, while it is closed.
    gate_closed_at: Option<Instant>,
}

/// Shared between the writer's WAL hook, the writer and the checkpointer.
pub(crate) struct Signal {
    state: Mutex<State>,
    wake: Condvar,
    /// The writer's queue, whose gate the hook closes when the WAL passes
    /// `gate_at`.
    queue: Arc<WriterQueue>,
    /// WAL pages at which the gate closes: the limit, or more after an
    /// escalation that old readers held back.
    gate_at: AtomicU64,
}

impl Signal {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        lock(&self.state)
    }

    /// Opens the writer queue's gate. The writers were held back from the
    /// moment it closed, or from `held_since` (a turn the checkpointer took
    /// while it was open) if that was earlier: recorded as one hold.
    fn open_gate(&self, recorder: &Recorder, held_since: Option<Instant>) {
        let mut st = self.lock();
        let closed = st.gate_closed_at.take();
        self.queue.open_gate();
        drop(st);
        let from = match (closed, held_since) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        if let Some(from) = from {
            recorder.record_checkpoint_hold(from.elapsed());
        }
    }
}

/// Installs the WAL hook on the writer when background checkpoints are on
/// (the hook replaces SQLite's automatic checkpoint, which is off anyway)
/// and the writer writes a WAL (`wal`: the durability plan's
/// [`checkpoints`](crate::durability_plan::DurabilityPlan::checkpoints)).
pub(crate) fn install_wal_hook(
    conn: &mut Connection,
    wal: bool,
    queue: &Arc<WriterQueue>,
    recorder: &Arc<Recorder>,
    cfg: &Checkpoints,
) -> Result<Arc<Signal>> {
    let signal = Arc::new(Signal {
        state: Mutex::default(),
        wake: Condvar::new(),
        queue: Arc::clone(queue),
        gate_at: AtomicU64::new(u64::from(cfg.limit_pages)),
    });
    // Without background checkpoints SQLite's automatic checkpoint is the
    // WAL hook: replacing it would turn it off.
    if !(cfg.background || cfg.external) || !wal {
        return Ok(signal);
    }
    if cfg.external {
        // Another process checkpoints: only keep the WAL's size for metrics.
        let r = Arc::clone(recorder);
        conn.wal_hook(Some(
            move |_: &mut rusqlite::hooks::Wal, pages: std::ffi::c_int| {
                r.wal_pages.store(pages.max(0) as u64, Relaxed);
                Ok(())
            },
        ))
        .context(|| "installing the WAL hook".into())?;
        return Ok(signal);
    }
    let s = Arc::clone(&signal);
    let r = Arc::clone(recorder);
    let threshold = u64::from(cfg.passive_after_pages);
    let limit = u64::from(cfg.limit_pages);
    let hold_writers = cfg.over_limit == OverLimit::HoldWriters;
    conn.wal_hook(Some(
        move |_: &mut rusqlite::hooks::Wal, pages: std::ffi::c_int| {
            let pages = pages.max(0) as u64;
            r.wal_pages.store(pages, Relaxed);
            r.note_wal_size(pages, limit);
            let mut st = s.lock();
            st.pages = pages;
            st.commits += 1;
            if pages < st.backfilled {
                st.backfilled = 0; // the WAL was restarted from its beginning
            }
            // Under `Grow` the gate never closes: `gate_at` stays at the
            // limit and only asks for a checkpoint.
            let over_limit = pages >= s.gate_at.load(Relaxed);
            if over_limit && hold_writers {
                st.gate_closed_at.get_or_insert_with(Instant::now);
                s.queue.close_gate();
            }
            // Only frames no checkpoint has copied yet count towards the next
            // one: otherwise, under a steady stream of commits, every commit
            // would ask for a checkpoint once the WAL passed the threshold.
            // A request already pending is seen by the checkpointer before
            // it sleeps: waking it again would only cost a system call on
            // every commit while a checkpoint runs.
            if (over_limit || pages - st.backfilled >= threshold)
                && !std::mem::replace(&mut st.requested, true)
            {
                s.wake.notify_one();
            }
            Ok(())
        },
    ))
    .context(|| "installing the WAL hook".into())?;
    Ok(signal)
}

/// The background checkpoint thread; stops when dropped.
pub(crate) struct Checkpointer {
    signal: Arc<Signal>,
    thread: Option<JoinHandle<()>>,
}

impl Checkpointer {
    pub fn start(
        conn: Connection,
        writer: Arc<Writer>,
        pool: Arc<Pool>,
        signal: Arc<Signal>,
        recorder: Arc<Recorder>,
        cfg: Checkpoints,
    ) -> Result<Checkpointer> {
        let last_active = Arc::new(Mutex::new(Instant::now()));
        let la = Arc::clone(&last_active);
        writer.set_idle_hook(Box::new(move || {
            *lock(&la) = Instant::now();
        }));
        let s = Arc::clone(&signal);
        let thread = std::thread::Builder::new()
            .name("litelane-checkpoint".into())
            .spawn(move || checkpoint_loop(conn, writer, pool, s, recorder, cfg, last_active))
            .map_err(|e| Error::os("starting the checkpoint thread", e))?;
        Ok(Checkpointer {
            signal,
            thread: Some(thread),
        })
    }
}

impl Drop for Checkpointer {
    fn drop(&mut self) {
        self.signal.lock().stop = true;
        self.signal.wake.notify_all();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        self.signal.lock().gate_closed_at = None;
        self.signal.queue.open_gate();
    }
}

fn checkpoint_loop(
    mut conn: Connection,
    writer: Arc<Writer>,
    pool: Arc<Pool>,
    signal: Arc<Signal>,
    recorder: Arc<Recorder>,
    cfg: Checkpoints,
    last_active: Arc<Mutex<Instant>>,
) {
    // However this thread ends, writers must not stay behind a closed gate.
    struct OpenGateOnExit<'w>(&'w Recorder, &'w Signal);
    impl Drop for OpenGateOnExit<'_> {
        fn drop(&mut self) {
            self.1.gate_at.store(u64::MAX, Relaxed);
            self.1.open_gate(self.0, None);
        }
    }
    let _guard = OpenGateOnExit(&recorder, &signal);
    let mut l = Loop {
        limit: u64::from(cfg.limit_pages),
        conn: &mut conn,
        writer: &writer,
        pool: &pool,
        signal: &signal,
        recorder: &recorder,
        cfg: &cfg,
        settled_at: u64::MAX,
        failed_at: None,
        failures: 0,
        retry_at: None,
    };
    let hold_writers = cfg.over_limit == OverLimit::HoldWriters;
    while let Some((pages, commits)) = l.next_request(&last_active) {
        // What earlier checkpoints had copied of the WAL this one runs on,
        // read before it runs: a commit that restarts the WAL meanwhile
        // resets the shared count, and reading it afterwards counted this
        // WAL's copied frames a second time.
        let before = l.signal.lock().backfilled;
        let report = if pages >= l.limit && hold_writers {
            l.escalate_when_useful(pages)
        } else {
            run(l.conn, CheckpointMode::Passive)
        };
        match report {
            Ok(report) => {
                recorder.note_checkpoint_error(None);
                l.settle(&report, pages, commits, before);
            }
            Err(e) => {
                recorder.note_error(&e);
                recorder.note_checkpoint_error(Some(e.to_string()));
                // Not again at once: a full disk fails the same way.
                l.retry_at = Some(Instant::now() + OVER_LIMIT_RETRY);
            }
        }
    }
}

/// The checkpoint thread's state between two checkpoints.
struct Loop<'a> {
    /// `Checkpoints::limit_pages`, in pages.
    limit: u64,
    /// Mutable only to lend it to the catch-up's thread.
    conn: &'a mut Connection,
    writer: &'a Writer,
    pool: &'a Pool,
    signal: &'a Signal,
    recorder: &'a Recorder,
    cfg: &'a Checkpoints,
    /// Commit count at the last checkpoint that copied everything.
    settled_at: u64,
    /// When the last escalation that readers outlasted ended.
    failed_at: Option<Instant>,
    /// Escalations in a row that readers outlasted.
    failures: u32,
    /// Under [`OverLimit::Grow`], after a checkpoint that a read kept from
    /// copying the whole WAL over its limit (or one that failed): no
    /// checkpoint before this.
    retry_at: Option<Instant>,
}

impl Loop<'_> {
    /// Waits until a checkpoint is requested, or is due because the writer
    /// has been idle for `idle_after` with frames not copied yet: the WAL's
    /// pages and the commit count then. `None`: the thread is to stop.
    fn next_request(&mut self, last_active: &Mutex<Instant>) -> Option<(u64, u64)> {
        // A pinned WAL asks for a checkpoint after every commit: one every
        // `OVER_LIMIT_RETRY` is enough to see the read end.
        if let Some(at) = self.retry_at.take() {
            loop {
                let now = Instant::now();
                if now >= at {
                    break;
                }
                let st = self.signal.lock();
                if st.stop {
                    return None;
                }
                drop(wait_timeout(&self.signal.wake, st, at - now));
            }
        }
        loop {
            let mut st = self.signal.lock();
            if !st.requested && !st.stop {
                st = wait_timeout(&self.signal.wake, st, self.cfg.idle_after);
            }
            if st.stop {
                return None;
            }
            let requested = std::mem::take(&mut st.requested);
            let idle = lock(last_active).elapsed() >= self.cfg.idle_after;
            let idle_work = idle && st.pages > 0 && st.commits != self.settled_at;
            if requested || idle_work {
                return Some((st.pages, st.commits));
            }
        }
    }

    /// Escalates past the WAL limit, but only when it is likely to succeed
    /// quickly: an escalation blocks writers while it waits for the reads
    /// that began before it, so while a read of this process has been open
    /// for `escalation_wait / 4` or more the checkpointer only moves the gate
    /// on a little (and looks again after `limit / 16` more pages) instead
    /// of stalling writers for a read that is not about to end. After
    /// escalations that readers outlasted anyway (another process's, or ones
    /// that had just begun), the next one waits longer and longer
    /// (`MAX_BACKOFF_DOUBLINGS`).
    fn escalate_when_useful(&mut self, pages: u64) -> Result<CheckpointReport> {
        let cfg = self.cfg;
        let local_long_read = self
            .pool
            .oldest_start()
            .is_some_and(|t| t.elapsed() >= cfg.escalation_wait / 4);
        let backoff = cfg.escalation_wait * (1u32 << self.failures.min(MAX_BACKOFF_DOUBLINGS));
        let backing_off = self.failed_at.is_some_and(|t| t.elapsed() < backoff);
        if local_long_read || backing_off {
            if let (true, Some(age)) = (local_long_read, cfg.max_read_age) {
                self.pool.interrupt_older_than(age);
            }
            let recheck = (self.limit / 16).max(1);
            self.signal.gate_at.store(pages + recheck, Relaxed);
            self.signal.open_gate(self.recorder, None);
            return run(self.conn, CheckpointMode::Passive);
        }
        let r = escalate(self.conn, self.writer, self.signal, cfg, self.recorder);
        let failed = matches!(&r, Ok(rep) if rep.busy);
        self.failed_at = failed.then(Instant::now);
        self.failures = if failed { self.failures + 1 } else { 0 };
        if let (true, Some(age)) = (failed, cfg.max_read_age) {
            self.pool.interrupt_older_than(age);
        }
        r
    }

    /// Records a checkpoint that ran on a request for `pages` pages at
    /// `commits` commits, `before` of its WAL's frames copied by earlier
    /// ones (read before it ran), and follows it up: a complete one by
    /// copying what was committed meanwhile ([`catch_up`]), an incomplete
    /// one past the limit by escalating.
    fn settle(&mut self, report: &CheckpointReport, pages: u64, commits: u64, before: u64) {
        {
            let mut st = self.signal.lock();
            // A checkpoint that could not start at all (another one held the
            // lock) backs off as if it had copied everything.
            let copied = if report.wal_frames == 0 && report.busy {
                pages
            } else {
                report.checkpointed_frames
            };
            st.backfilled = copied;
        }
        record(self.recorder, report, before);
        if !report.busy {
            self.settled_at = commits;
            self.converge(report);
        } else if report.wal_frames >= self.limit {
            match self.cfg.over_limit {
                OverLimit::HoldWriters => {
                    if let Ok(r) = self.escalate_when_useful(report.wal_frames) {
                        record(self.recorder, &r, report.checkpointed_frames);
                    }
                }
                OverLimit::Grow => {
                    // Writers go on; the hard bound, if asked for, is
                    // ending the reads that pin the WAL for too long.
                    if let Some(age) = self.cfg.max_read_age {
                        self.pool.interrupt_older_than(age);
                    }
                    self.retry_at = Some(Instant::now() + OVER_LIMIT_RETRY);
                }
            }
        }
    }
}

impl Loop<'_> {
    /// Follows a complete PASSIVE checkpoint up: what was committed while it
    /// ran is copied by more PASSIVE checkpoints beside the writers (at most
    /// [`CONVERGE_PASSES`], each shorter than the one before, while each
    /// completes), until at most [`CATCH_UP_FRAMES`] are left, which
    /// [`catch_up`] copies with the writers held back, so that the next
    /// write restarts the WAL. The writers then wait for the copy of a few
    /// frames and the syncs, not for the copy of everything committed
    /// during a long checkpoint.
    fn converge(&mut self, first: &CheckpointReport) {
        let mut last = first.checkpointed_frames;
        for pass in 0..=CONVERGE_PASSES {
            let behind = self.signal.lock().pages.saturating_sub(last);
            if behind == 0 {
                return;
            }
            if behind <= CATCH_UP_FRAMES {
                let (conn, writer, signal, recorder) =
                    (&mut *self.conn, self.writer, self.signal, self.recorder);
                if let Some(r) = catch_up(conn, writer, signal, recorder, last) {
                    record(self.recorder, &r, last);
                }
                return;
            }
            if pass == CONVERGE_PASSES {
                return;
            }
            let before = self.signal.lock().backfilled;
            let Ok(r) = run(self.conn, CheckpointMode::Passive) else {
                return;
            };
            self.signal.lock().backfilled = r.checkpointed_frames;
            record(self.recorder, &r, before);
            if r.busy {
                return;
            }
            last = r.checkpointed_frames;
        }
    }
}

/// The most frames [`catch_up`] copies with the writers held back: 128
/// (512 KiB of 4 KiB pages). The writers wait for that copy and the
/// checkpoint's syncs (of the WAL, then of the database file).
const CATCH_UP_FRAMES: u64 = 128;

/// The most PASSIVE checkpoints [`Loop::converge`] runs beside the writers
/// after a complete one before giving up until the next request: 4.
const CONVERGE_PASSES: u32 = 4;

/// The longest the checkpointer's catch-up holds the writers back: 10 ms
/// (plus at most [`PROCESS_TURN_BUDGET`], 5 ms, waiting for the turn among
/// processes). A catch-up whose checkpoint (its copy and syncs) takes
/// longer lets the writers go on at this point, and the WAL then starts
/// over at a later catch-up instead. With 20 ms, a 15-minute soak on the
/// loaded 2-core machine saw holds up to 82 ms when the whole machine
/// paused; with 10 ms, up to 76 ms in I/O storms (docs/durability.md).
pub(crate) const CATCH_UP_BUDGET: Duration = Duration::from_millis(10);

/// Lets the next write start the WAL over from its beginning. SQLite
/// restarts the WAL only in a write transaction that began with every frame
/// copied, which a checkpoint running beside the writers almost never
/// leaves: the WAL then grows to `limit_pages` and new space is written
/// (and, under `safe`, synced) for every commit. SQLite's own
/// autocheckpoint runs inside a commit and leaves it every time. So when a
/// complete PASSIVE checkpoint that copied `copied` frames ends with a few
/// frames committed meanwhile (at most [`CATCH_UP_FRAMES`]), this copies
/// them with another PASSIVE checkpoint while holding the writer's turn
/// (ahead of queued writers) and the turn among processes (waiting for it
/// at most [`PROCESS_TURN_BUDGET`], the longest a process keeps it), so no
/// litelane writer commits meanwhile.
///
/// The checkpoint's two syncs (WAL, then database file) take what the disk
/// takes: 4 to 430 ms on the loaded 2-core machine where this was measured.
/// So the checkpoint runs on a thread of its own, and the turns are held
/// for at most [`CATCH_UP_BUDGET`]: when it takes longer, the writers go on
/// while it finishes (and the next write does not restart the WAL). `None`
/// when there was nothing to do, the turns did not come in time, or the
/// thread could not start.
fn catch_up(
    conn: &mut Connection,
    writer: &Writer,
    signal: &Signal,
    recorder: &Recorder,
    copied: u64,
) -> Option<CheckpointReport> {
    let behind = signal.lock().pages.saturating_sub(copied);
    if behind == 0 || behind > CATCH_UP_FRAMES {
        return None;
    }
    let r = std::thread::scope(|s| {
        let (go_tx, go_rx) = mpsc::channel::<()>();
        let (done_tx, done_rx) = mpsc::channel::<()>();
        let helper = std::thread::Builder::new()
            .name("litelane-catch-up".into())
            .spawn_scoped(s, move || {
                // No go: the turns did not come.
                go_rx.recv().ok()?;
                let r = run(conn, CheckpointMode::Passive);
                let _ = done_tx.send(());
                Some(r)
            })
            .ok()?;
        let turns = writer.with_every_turn(
            "checkpoint (catching up, so the next write restarts the WAL)",
            PROCESS_TURN_BUDGET,
            |_| {
                let _ = go_tx.send(());
                let _ = done_rx.recv_timeout(CATCH_UP_BUDGET);
            },
        );
        drop(go_tx);
        if let Ok((_, held)) = turns {
            recorder.record_checkpoint_hold(held);
        }
        // The writers are free again; the checkpoint may still be running.
        helper.join().ok()?
    })?;
    let r = r.ok()?;
    signal.lock().backfilled = r.checkpointed_frames;
    Some(r)
}

/// Counts a checkpoint of the background checkpointer. `before`: the
/// frames of the same WAL that earlier checkpoints had copied (SQLite's
/// count of checkpointed frames includes them; only the rest were copied by
/// this one).
fn record(recorder: &Recorder, report: &CheckpointReport, before: u64) {
    recorder.note_checkpoint_complete(!report.busy);
    recorder.checkpoints.fetch_add(1, Relaxed);
    recorder
        .checkpoint_pages
        .fetch_add(report.checkpointed_frames.saturating_sub(before), Relaxed);
    recorder
        .checkpoint_nanos
        .fetch_add(report.elapsed.as_nanos() as u64, Relaxed);
}

/// After n escalations in a row that readers outlasted, the next one waits
/// `escalation_wait` × 2^n, n at most this (64 ×): while reads keep the WAL
/// pinned, writers stall less and less often; one escalation that succeeds
/// resets it.
const MAX_BACKOFF_DOUBLINGS: u32 = 6;

/// Takes the writer's next turn (writers wait behind the closed gate) and
/// runs RESTART, waiting up to `escalation_wait` for readers on old
/// snapshots. If they outlast it, the WAL may grow by another `limit_pages`
/// before writers are held back again.
fn escalate(
    conn: &Connection,
    writer: &Writer,
    signal: &Signal,
    cfg: &Checkpoints,
    recorder: &Recorder,
) -> Result<CheckpointReport> {
    recorder.checkpoints_escalated.fetch_add(1, Relaxed);
    let limit = u64::from(cfg.limit_pages);
    let mut granted = None;
    let result = writer.with_turn("checkpoint (escalated: WAL over its limit)", true, |_| {
        granted = Some(Instant::now());
        let r = conn
            .busy_timeout(cfg.escalation_wait)
            .context(|| "setting the checkpoint's wait".into())
            .and_then(|()| run(conn, CheckpointMode::Restart));
        let _ = conn.busy_timeout(Duration::ZERO);
        match &r {
            Ok(rep) if !rep.busy => {
                recorder.wal_pages.store(0, Relaxed);
                signal.gate_at.store(limit, Relaxed);
            }
            _ => {
                let pages = recorder.wal_pages.load(Relaxed);
                signal.gate_at.store(pages + limit, Relaxed);
            }
        }
        r
    });
    signal.open_gate(recorder, granted);
    result?
}
