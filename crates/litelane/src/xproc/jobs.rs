//! Job slots: one-statement writes that a process posts for whichever
//! process holds the turn to run in its own transaction (cross-process
//! group commit, docs/concurrency.md "Combined commits").
//!
//! [`SLOTS`] slots of [`SLOT_LEN`] bytes each sit in the lock file from
//! [`JOBS_AT`], mapped shared by every process. A slot's first word is its
//! state and a generation; a state is taken over by compare-and-swap, and
//! changed by its owner only (who holds the state's lock byte); what else a
//! slot holds is written by the state's owner before the state is
//! published and read after it is seen (sequentially consistent atomics):
//!
//! | state | owner | next |
//! |---|---|---|
//! | `FREE` | nobody | `CLAIMED` by a poster |
//! | `CLAIMED` | its poster, writing the statement | `POSTED` |
//! | `POSTED` | nobody: waiting | `TAKEN` by a turn holder, or `FREE` (withdrawn by its poster) |
//! | `TAKEN` | the turn holder (the *leader*), running it before its `COMMIT` | `COMMITTING`, `DONE`, `REFUSED`, or back to `POSTED` |
//! | `COMMITTING` | the leader, in its `COMMIT` | `COMMITTED` or `DONE` |
//! | `COMMITTED` | the leader, making the commit durable (outcome written) | `DONE` |
//! | `DONE` / `REFUSED` | its poster, reading the outcome | `FREE` |
//!
//! **Deaths.** Each slot has two lock bytes (open-file-description locks,
//! dropped by the kernel when a process dies): the poster's, held from
//! `CLAIMED` until it has read the outcome, and the leader's, held from
//! `TAKEN` until the outcome is written. A `TAKEN` job whose leader is dead
//! was never committed (its transaction died with it): it goes back to
//! `POSTED` and runs again, exactly once. A `COMMITTED` job whose leader is
//! dead was committed: its poster makes it durable itself. A `COMMITTING`
//! job whose leader is dead (it died inside `COMMIT`) may or may not be
//! committed: its poster is told the outcome is unknown. A slot whose
//! poster is dead is freed by the next poster that finds no free slot.

use std::fs::File;
use std::sync::atomic::Ordering::{Relaxed, SeqCst};
use std::sync::atomic::{AtomicU32, AtomicU64};
use std::sync::Arc;

use super::doorbell::Doorbells;
use super::{clip, lock_file};
use crate::ffi::SharedPage;
use crate::Value;

/// Where the slots begin in the lock file: 64 KiB, past the ticket records.
pub const JOBS_AT: usize = 64 << 10;
/// How many slots: as many as doorbells, one per process waiting at once.
pub const SLOTS: usize = 64;
/// Bytes per slot: 4 KiB, of which [`PAYLOAD_AT`] onwards hold the
/// statement and its parameters (a longer one is not posted).
pub const SLOT_LEN: usize = 4096;
/// A counter that every post raises and wakes (a shared futex): a turn
/// holder gathering posts sleeps on it. Just before the slots.
const POSTED_BELL: usize = JOBS_AT - 64;
/// The ticket (plus one) of the turn being held, 0 when none: a hint for
/// posters (a holder that died leaves it set; posters wait for a taker only
/// [`UNTAKEN_WAIT`] on it).
const TURN_HINT: usize = JOBS_AT - 56;
/// How long a poster waits for a turn holder to take its job before it
/// queues for the turn itself: 1 ms.
pub const UNTAKEN_WAIT: std::time::Duration = std::time::Duration::from_millis(1);
/// The lock bytes of slot `i`: `JOB_LOCKS + 2i` (poster), `+ 1` (leader).
const JOB_LOCKS: u64 = 1 << 39;

const FREE: u32 = 0;
const CLAIMED: u32 = 1;
const POSTED: u32 = 2;
const TAKEN: u32 = 3;
const COMMITTING: u32 = 4;
const DONE: u32 = 5;
const REFUSED: u32 = 6;
/// Committed, not yet durable: the outcome is written (with the commit's
/// place in the shared fsync count); the leader is making it durable.
const COMMITTED: u32 = 7;

/// A state word: the state in its low byte, and above it a generation that
/// every take advances, so that a compare-and-swap made on an old view
/// (a poster reposting the job of a leader it thought dead) fails once
/// another leader took the job since.
const fn kind(word: u32) -> u32 {
    word & 0xff
}

const fn with_state(word: u32, state: u32) -> u32 {
    (word & !0xff) | state
}

// Offsets inside a slot.
const STATE: usize = 0;
/// The doorbell its poster sleeps on, plus one (0: none).
const BELL: usize = 4;
/// The poster's format: a leader takes only jobs of its own.
const FORMAT: usize = 8;
const SQL_LEN: usize = 12;
const PARAMS_LEN: usize = 16;
/// The outcome's kind ([`Outcome`]), its codes and message length.
const KIND: usize = 20;
const CODE: usize = 24;
const EXTENDED: usize = 28;
const CHANGES: usize = 32;
const ROWID: usize = 40;
const MESSAGE_LEN: usize = 48;
/// The leader's process id (for messages).
const LEADER_PID: usize = 52;
const DURABLE_AT: usize = 56;
const PAYLOAD_AT: usize = 64;
const PAYLOAD_MAX: usize = SLOT_LEN - PAYLOAD_AT;

/// The encoding of jobs and outcomes; a leader takes only jobs posted in
/// its own.
const FORMAT_VERSION: u32 = 1;

/// How many job slots are in each state ([`ProcessQueue::job_states`](super::ProcessQueue::job_states)).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct JobStates {
    /// Being written by their posters.
    pub claimed: usize,
    /// Posted, waiting for a turn holder to take them.
    pub posted: usize,
    /// Taken by a turn holder, run before its commit.
    pub taken: usize,
    /// In a turn holder's `COMMIT`.
    pub committing: usize,
    /// Committed by a turn holder, which is making the commit durable.
    pub committed: usize,
    /// With an outcome their posters have not read yet.
    pub ended: usize,
}

/// How a job ended, as its poster reads it.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// Committed (and durable as the profile promises): rows changed and
    /// the last rowid inserted, on the leader's connection.
    Done {
        /// `sqlite3_changes` of the statement.
        changes: u64,
        /// `sqlite3_last_insert_rowid` right after it.
        last_insert_rowid: i64,
        /// The commit's place in the shared fsync count when it still has
        /// to be made durable (`safe`): the poster waits for a WAL sync
        /// that covers it ([`super::ProcessQueue::make_durable`]); 0 when
        /// nothing is left to wait for.
        durable_at: u64,
    },
    /// Not committed: the statement failed (its SQLite codes and message),
    /// or the commit did.
    Failed {
        /// Primary and extended SQLite result code (0 when not SQLite's).
        code: i32,
        /// Extended result code.
        extended_code: i32,
        /// What went wrong, as the leader saw it.
        message: String,
    },
    /// Committed or not, nobody can say: the leader died in its commit, or
    /// the commit's fsync failed.
    Unknown {
        /// Why.
        message: String,
    },
}

const KIND_DONE: u32 = 1;
const KIND_FAILED: u32 = 2;
const KIND_UNKNOWN: u32 = 3;

/// The job slots of one lock file.
pub struct Jobs {
    page: Arc<SharedPage>,
    /// Rung when an outcome is written, on the poster's doorbell.
    bells: Doorbells,
    /// The open file description the slots' lock bytes are taken through
    /// (not the mapped one: see `durable.rs`).
    locks: File,
    pid: u32,
    /// The slot format word this process posts and takes: the layout
    /// version, and in bit 16 whether its connections run with SQLite's
    /// stock settings (`Options::stock_settings`: foreign keys off), so a
    /// statement only ever runs on a connection with its poster's settings.
    format: AtomicU32,
}

/// Bit of the format word: the poster's connections have SQLite's stock
/// settings (see [`Jobs::set_stock_settings`]).
const STOCK_SETTINGS: u32 = 1 << 16;

impl Jobs {
    /// The slots in `page` (the lock file mapped by [`SharedPage::map`]),
    /// with `locks`, an open file description of the lock file of their own.
    pub fn on(page: Arc<SharedPage>, locks: File) -> Jobs {
        Jobs {
            bells: Doorbells::on(Arc::clone(&page)),
            page,
            locks,
            pid: std::process::id(),
            format: AtomicU32::new(FORMAT_VERSION),
        }
    }

    /// Says whether this process's connections run with SQLite's stock
    /// settings: it then posts, and takes, only jobs of processes that do
    /// the same (a statement's foreign keys are checked, or not, as its
    /// poster's own connection would check them).
    pub fn set_stock_settings(&self, on: bool) {
        let format = if on {
            FORMAT_VERSION | STOCK_SETTINGS
        } else {
            FORMAT_VERSION
        };
        self.format.store(format, Relaxed);
    }

    /// What [`set_stock_settings`](Jobs::set_stock_settings) last said.
    pub fn stock_settings(&self) -> bool {
        self.format.load(Relaxed) & STOCK_SETTINGS != 0
    }

    fn at(i: usize, field: usize) -> usize {
        JOBS_AT + i * SLOT_LEN + field
    }

    fn word(&self, i: usize, field: usize) -> &AtomicU32 {
        self.page.word32(Self::at(i, field))
    }

    fn word64(&self, i: usize, field: usize) -> &AtomicU64 {
        self.page.word(Self::at(i, field))
    }

    fn state(&self, i: usize) -> &AtomicU32 {
        self.word(i, STATE)
    }

    /// Moves slot `i` from exactly the word `from` to the state `to`
    /// (same generation).
    fn cas(&self, i: usize, from: u32, to: u32) -> bool {
        self.state(i)
            .compare_exchange(from, with_state(from, to), SeqCst, SeqCst)
            .is_ok()
    }

    /// Sets the state of slot `i`, keeping its generation: only by the
    /// state's owner (the poster of a `CLAIMED` or ended slot, the leader
    /// of a `TAKEN` or `COMMITTING` one, who holds its lock byte).
    fn set(&self, i: usize, state: u32) {
        let w = self.state(i).load(SeqCst);
        self.state(i).store(with_state(w, state), SeqCst);
    }

    fn poster_byte(i: usize) -> u64 {
        JOB_LOCKS + 2 * i as u64
    }

    fn leader_byte(i: usize) -> u64 {
        JOB_LOCKS + 2 * i as u64 + 1
    }

    /// True when another process (or queue) holds `byte`; an error counts
    /// as held (nothing is taken from a holder that might be alive).
    fn held(&self, byte: u64) -> bool {
        lock_file::byte_locked(&self.locks, byte).unwrap_or(true)
    }

    /// Posts `sql` with `params`: `None` when it does not fit a slot or no
    /// slot is free (the caller then waits for its own turn).
    pub fn post(self: &Arc<Self>, sql: &str, params: &[Value]) -> Option<Posted> {
        let encoded = encode_params(params)?;
        if sql.len() + encoded.len() > PAYLOAD_MAX {
            return None;
        }
        let i = self.claim()?;
        self.page
            .write_bytes(Self::at(i, PAYLOAD_AT), sql.as_bytes());
        self.page
            .write_bytes(Self::at(i, PAYLOAD_AT + sql.len()), &encoded);
        self.word(i, FORMAT)
            .store(self.format.load(Relaxed), Relaxed);
        self.word(i, SQL_LEN).store(sql.len() as u32, Relaxed);
        self.word(i, PARAMS_LEN)
            .store(encoded.len() as u32, Relaxed);
        self.word(i, BELL).store(0, Relaxed);
        self.set(i, POSTED);
        let bell = self.page.word32(POSTED_BELL);
        bell.fetch_add(1, SeqCst);
        crate::ffi::futex_wake_all(bell);
        Some(Posted {
            jobs: Arc::clone(self),
            slot: i,
            done: false,
        })
    }

    /// A free slot, now `CLAIMED` with its poster byte locked by us; slots
    /// of dead posters are freed on the way when none is free.
    fn claim(&self) -> Option<usize> {
        for reclaim in [false, true] {
            for i in 0..SLOTS {
                if reclaim {
                    self.reclaim(i);
                }
                if kind(self.state(i).load(SeqCst)) != FREE {
                    continue;
                }
                // The poster byte first: a slot is never CLAIMED without it
                // held, so one whose byte is free has no live poster.
                if !matches!(
                    lock_file::lock_byte_now(&self.locks, Self::poster_byte(i)),
                    Ok(true)
                ) {
                    continue; // its last poster is just letting go
                }
                let w = self.state(i).load(SeqCst);
                if kind(w) == FREE && self.cas(i, w, CLAIMED) {
                    return Some(i);
                }
                let _ = lock_file::unlock_byte(&self.locks, Self::poster_byte(i));
            }
        }
        None
    }

    /// Frees slot `i` if its poster is dead and no live leader has it.
    fn reclaim(&self, i: usize) {
        let w = self.state(i).load(SeqCst);
        if kind(w) == FREE || self.held(Self::poster_byte(i)) {
            return;
        }
        if matches!(kind(w), TAKEN | COMMITTING | COMMITTED) && self.held(Self::leader_byte(i)) {
            return;
        }
        self.cas(i, w, FREE);
    }

    /// How many slots are in each state now (a snapshot; for metrics and
    /// tests).
    pub fn states(&self) -> JobStates {
        let mut out = JobStates::default();
        for i in 0..SLOTS {
            match kind(self.state(i).load(SeqCst)) {
                POSTED => out.posted += 1,
                TAKEN => out.taken += 1,
                COMMITTING => out.committing += 1,
                COMMITTED => out.committed += 1,
                DONE | REFUSED => out.ended += 1,
                CLAIMED => out.claimed += 1,
                _ => {}
            }
        }
        out
    }

    /// Notes that the turn of `ticket` is held (a hint for posters).
    pub fn turn_taken(&self, ticket: u64) {
        self.page.word(TURN_HINT).store(ticket + 1, SeqCst);
    }

    /// Notes that the turn of `ticket` ended, unless a later one began.
    pub fn turn_ended(&self, ticket: u64) {
        let _ = self
            .page
            .word(TURN_HINT)
            .compare_exchange(ticket + 1, 0, SeqCst, SeqCst);
    }

    /// True when some process seems to hold the turn (see [`TURN_HINT`]).
    pub fn turn_held(&self) -> bool {
        self.page.word(TURN_HINT).load(SeqCst) != 0
    }

    /// The count of posts so far: read it before looking for posted jobs,
    /// and pass it to [`wait_for_posts`](Jobs::wait_for_posts).
    pub fn posts_seen(&self) -> u32 {
        self.page.word32(POSTED_BELL).load(SeqCst)
    }

    /// Sleeps until a job is posted after `seen` was read, for at most
    /// `timeout`; may return early.
    pub fn wait_for_posts(&self, seen: u32, timeout: std::time::Duration) {
        crate::ffi::futex_wait(self.page.word32(POSTED_BELL), seen, timeout);
    }

    /// True when some slot holds a posted job.
    pub fn any_posted(&self) -> bool {
        (0..SLOTS).any(|i| kind(self.state(i).load(Relaxed)) == POSTED)
    }

    /// Takes up to `max` posted jobs, for the caller (holding the turn) to
    /// run before its `COMMIT`.
    pub fn take(self: &Arc<Self>, max: usize) -> Vec<Taken> {
        let mut out = Vec::new();
        for i in 0..SLOTS {
            if out.len() >= max {
                break;
            }
            let w = self.state(i).load(SeqCst);
            let format = self.format.load(Relaxed);
            if kind(w) != POSTED || self.word(i, FORMAT).load(Relaxed) != format {
                continue;
            }
            // The leader byte first: a job is never TAKEN without it held,
            // so a poster that finds it free knows the leader is gone.
            if !matches!(
                lock_file::lock_byte_now(&self.locks, Self::leader_byte(i)),
                Ok(true)
            ) {
                continue;
            }
            let taken_word = with_state(w.wrapping_add(0x100), TAKEN);
            if self
                .state(i)
                .compare_exchange(w, taken_word, SeqCst, SeqCst)
                .is_err()
            {
                let _ = lock_file::unlock_byte(&self.locks, Self::leader_byte(i));
                continue;
            }
            let mut taken = Taken {
                jobs: Arc::clone(self),
                slot: i,
                sql: String::new(),
                params: Vec::new(),
                state: TAKEN,
            };
            // Whatever a slot holds, a writer of the lock file wrote it,
            // and so could a writer of the database (`trust.rs`); still,
            // a slot that does not decode is refused, never run: its
            // poster, if there is one, runs the statement itself.
            match self.read_job(i) {
                Ok((sql, params)) => {
                    taken.sql = sql;
                    taken.params = params;
                    out.push(taken);
                }
                Err(_) => taken.refuse(),
            }
        }
        out
    }

    /// The statement and parameters of slot `i` (taken), or why they do
    /// not decode (a foreign, damaged or hostile slot: see
    /// [`payload_len`] and [`decode_job`]).
    fn read_job(&self, i: usize) -> Result<(String, Vec<Value>), String> {
        let sql_len = self.word(i, SQL_LEN).load(Relaxed);
        let params_len = self.word(i, PARAMS_LEN).load(Relaxed);
        let mut buf = vec![0u8; payload_len(sql_len, params_len)?];
        self.page.read_bytes(Self::at(i, PAYLOAD_AT), &mut buf);
        decode_job(buf, sql_len as usize)
    }

    /// Writes the outcome into slot `i` and publishes `state` (`DONE` or
    /// `COMMITTED`).
    fn write_outcome(&self, i: usize, outcome: &Outcome, state: u32) {
        let mut durable = 0;
        let (kind, code, ext, changes, rowid, message) = match outcome {
            Outcome::Done {
                changes,
                last_insert_rowid,
                durable_at,
            } => {
                durable = *durable_at;
                (KIND_DONE, 0, 0, *changes, *last_insert_rowid, "")
            }
            Outcome::Failed {
                code,
                extended_code,
                message,
            } => (KIND_FAILED, *code, *extended_code, 0, 0, message.as_str()),
            Outcome::Unknown { message } => (KIND_UNKNOWN, 0, 0, 0, 0, message.as_str()),
        };
        let message = clip(message, PAYLOAD_MAX);
        self.page
            .write_bytes(Self::at(i, PAYLOAD_AT), message.as_bytes());
        self.word(i, MESSAGE_LEN)
            .store(message.len() as u32, Relaxed);
        self.word(i, KIND).store(kind, Relaxed);
        self.word(i, CODE).store(code as u32, Relaxed);
        self.word(i, EXTENDED).store(ext as u32, Relaxed);
        self.word64(i, CHANGES).store(changes, Relaxed);
        self.word64(i, ROWID).store(rowid as u64, Relaxed);
        self.word64(i, DURABLE_AT).store(durable, Relaxed);
        self.word(i, LEADER_PID).store(self.pid, Relaxed);
        self.set(i, state);
    }

    fn read_outcome(&self, i: usize) -> Outcome {
        let len = (self.word(i, MESSAGE_LEN).load(Relaxed) as usize).min(PAYLOAD_MAX);
        let mut buf = vec![0u8; len];
        self.page.read_bytes(Self::at(i, PAYLOAD_AT), &mut buf);
        let message = String::from_utf8_lossy(&buf).into_owned();
        let pid = self.word(i, LEADER_PID).load(Relaxed);
        match self.word(i, KIND).load(Relaxed) {
            KIND_DONE => Outcome::Done {
                changes: self.word64(i, CHANGES).load(Relaxed),
                last_insert_rowid: self.word64(i, ROWID).load(Relaxed) as i64,
                durable_at: self.word64(i, DURABLE_AT).load(Relaxed),
            },
            KIND_FAILED => Outcome::Failed {
                code: self.word(i, CODE).load(Relaxed) as i32,
                extended_code: self.word(i, EXTENDED).load(Relaxed) as i32,
                message,
            },
            _ => Outcome::Unknown {
                message: format!("{message} (in the combined commit of process {pid})"),
            },
        }
    }

    /// Rings the doorbell slot `i`'s poster sleeps on.
    fn ring_poster(&self, i: usize) {
        let bell = self.word(i, BELL).load(SeqCst);
        if let Some(t) = bell.checked_sub(1) {
            self.bells.ring(u64::from(t));
        }
    }
}

/// Where a posted job stands, for its poster.
#[derive(Debug, PartialEq)]
pub enum Progress {
    /// Nobody has it yet.
    Waiting,
    /// A live leader is running or committing it.
    InFlight,
    /// A leader could not run it (not a statement it may run): the poster
    /// runs it in its own turn. The slot is freed.
    Refused,
    /// Its outcome; the slot is freed.
    Ended(Outcome),
}

/// A job this process posted, until its outcome is read. Dropping it
/// withdraws a job nobody took; a job a leader has keeps running, and its
/// slot is freed by the next poster short of slots once its outcome is in.
pub struct Posted {
    jobs: Arc<Jobs>,
    slot: usize,
    /// The outcome was read (or the job withdrawn) and the slot freed.
    done: bool,
}

impl Posted {
    /// Says which doorbell (ticket) this poster sleeps on next, so that the
    /// leader that ends the job rings it.
    pub fn sleeping_on(&self, ticket: u64) {
        let bell = (ticket % super::doorbell::BELLS) as u32 + 1;
        self.jobs.word(self.slot, BELL).store(bell, SeqCst);
    }

    /// Looks at the job: its outcome once a leader wrote it (or died in its
    /// commit), [`Progress::Refused`] when a leader could not run it,
    /// [`Progress::Waiting`] otherwise (a job whose leader died before its
    /// commit is posted again).
    pub fn progress(&mut self) -> Progress {
        if self.done {
            return Progress::Refused;
        }
        let (jobs, i) = (&self.jobs, self.slot);
        let w = jobs.state(i).load(SeqCst);
        match kind(w) {
            DONE => {
                let outcome = jobs.read_outcome(i);
                self.free();
                Progress::Ended(outcome)
            }
            REFUSED => {
                self.free();
                Progress::Refused
            }
            TAKEN if !jobs.held(Jobs::leader_byte(i)) => {
                // Its leader died before its COMMIT: nothing of it stayed.
                // (Fails if another leader took it since: a new generation.)
                jobs.cas(i, w, POSTED);
                Progress::Waiting
            }
            TAKEN => Progress::InFlight,
            COMMITTING if !jobs.held(Jobs::leader_byte(i)) => {
                // Read again: a leader writes DONE before it unlocks.
                if jobs.state(i).load(SeqCst) != w {
                    return self.progress();
                }
                self.free();
                Progress::Ended(Outcome::Unknown {
                    message: "the process that was committing this statement with its own \
                              transaction died during the commit; whether it committed is \
                              not known"
                        .into(),
                })
            }
            COMMITTED if !jobs.held(Jobs::leader_byte(i)) => {
                // Committed; its leader died making it durable: the outcome
                // (with the commit's place in the fsync count) is ours.
                if jobs.state(i).load(SeqCst) != w {
                    return self.progress();
                }
                let outcome = jobs.read_outcome(i);
                self.free();
                Progress::Ended(outcome)
            }
            COMMITTING | COMMITTED => Progress::InFlight,
            _ => Progress::Waiting,
        }
    }

    /// Takes the job back if nobody has it: true when it is withdrawn (the
    /// caller runs it), false when a leader has it (wait for [`progress`](Posted::progress)).
    pub fn withdraw(&mut self) -> bool {
        if self.done {
            return true;
        }
        let w = self.jobs.state(self.slot).load(SeqCst);
        if kind(w) == POSTED && self.jobs.cas(self.slot, w, FREE) {
            self.release_poster_byte();
            return true;
        }
        false
    }

    fn free(&mut self) {
        self.jobs.set(self.slot, FREE);
        self.release_poster_byte();
    }

    fn release_poster_byte(&mut self) {
        self.done = true;
        let _ = lock_file::unlock_byte(&self.jobs.locks, Jobs::poster_byte(self.slot));
    }
}

impl Drop for Posted {
    fn drop(&mut self) {
        if !self.done && !self.withdraw() {
            // A leader has it: the slot is freed by a later poster once the
            // outcome is in (our poster byte goes now).
            self.release_poster_byte();
        }
    }
}

/// A job taken by the turn holder, until its outcome is written. Dropped
/// without one, it goes back to `POSTED` if its commit had not begun, and
/// otherwise is left to its poster, who finds the leader gone.
pub struct Taken {
    jobs: Arc<Jobs>,
    slot: usize,
    /// The statement, one.
    pub sql: String,
    /// Its parameters, bound by position.
    pub params: Vec<Value>,
    state: u32,
}

impl Taken {
    /// The leader is about to `COMMIT` the transaction this job ran in.
    pub fn committing(&mut self) {
        if self.state == TAKEN {
            self.jobs.set(self.slot, COMMITTING);
            self.state = COMMITTING;
        }
    }

    /// True once [`committing`](Taken::committing) was called.
    pub fn is_committing(&self) -> bool {
        matches!(self.state, COMMITTING | COMMITTED)
    }

    /// Writes the outcome and rings the poster.
    pub fn finish(mut self, outcome: &Outcome) {
        self.jobs.write_outcome(self.slot, outcome, DONE);
        self.end();
    }

    /// The leader's transaction committed (not durable yet): writes the
    /// outcome the poster gets if the leader dies before
    /// [`finish`](Taken::finish) (a `Done` with `durable_at` set: the
    /// poster then makes the commit durable itself).
    pub fn committed(&mut self, outcome: &Outcome) {
        self.jobs.write_outcome(self.slot, outcome, COMMITTED);
        self.state = COMMITTED;
    }

    /// Gives the job back for another turn (its transaction was rolled back
    /// before its commit began).
    pub fn give_back(mut self) {
        debug_assert!(self.state == TAKEN, "given back after its commit began");
        self.jobs.set(self.slot, POSTED);
        self.end();
    }

    /// Marks the job as one this leader may not run: its poster runs it.
    pub fn refuse(mut self) {
        self.jobs.set(self.slot, REFUSED);
        self.end();
    }

    fn end(&mut self) {
        self.state = DONE;
        let _ = lock_file::unlock_byte(&self.jobs.locks, Jobs::leader_byte(self.slot));
        self.jobs.ring_poster(self.slot);
    }
}

impl Drop for Taken {
    fn drop(&mut self) {
        match self.state {
            TAKEN => {
                self.jobs.set(self.slot, POSTED);
                self.end();
            }
            // Left COMMITTING or COMMITTED: the poster sees the leader byte
            // free (and is told the outcome is unknown, or makes the
            // commit durable itself).
            COMMITTING | COMMITTED => self.end(),
            _ => {}
        }
    }
}

const TAG_NULL: u8 = 0;
const TAG_INTEGER: u8 = 1;
const TAG_REAL: u8 = 2;
const TAG_TEXT: u8 = 3;
const TAG_BLOB: u8 = 4;

/// Parameters as bytes: a tag per value, then 8 bytes (integer, real) or a
/// 4-byte length and the bytes (text, blob), little-endian. `None` when one
/// is too long to post.
fn encode_params(params: &[Value]) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    for v in params {
        match v {
            Value::Null => out.push(TAG_NULL),
            Value::Integer(i) => {
                out.push(TAG_INTEGER);
                out.extend_from_slice(&i.to_le_bytes());
            }
            Value::Real(f) => {
                out.push(TAG_REAL);
                out.extend_from_slice(&f.to_bits().to_le_bytes());
            }
            Value::Text(s) => {
                out.push(TAG_TEXT);
                out.extend_from_slice(&u32::try_from(s.len()).ok()?.to_le_bytes());
                out.extend_from_slice(s.as_bytes());
            }
            Value::Blob(b) => {
                out.push(TAG_BLOB);
                out.extend_from_slice(&u32::try_from(b.len()).ok()?.to_le_bytes());
                out.extend_from_slice(b);
            }
        }
        if out.len() > PAYLOAD_MAX {
            return None;
        }
    }
    Some(out)
}

/// The bytes a slot's payload holds, from its `SQL_LEN` and `PARAMS_LEN`
/// words: refused when they do not fit the payload (at most
/// [`PAYLOAD_MAX`] bytes together).
fn payload_len(sql_len: u32, params_len: u32) -> Result<usize, String> {
    let total = u64::from(sql_len) + u64::from(params_len);
    if total > PAYLOAD_MAX as u64 {
        return Err(format!(
            "a statement of {sql_len} bytes with {params_len} bytes of parameters does not \
             fit the {PAYLOAD_MAX} bytes of a slot"
        ));
    }
    Ok(total as usize)
}

/// A job from its payload: `sql_len` bytes of SQL (UTF-8, not empty, no
/// NUL byte), then the parameters ([`decode_params`]). Refused with what
/// is wrong and where, never a panic, whatever the bytes.
fn decode_job(mut payload: Vec<u8>, sql_len: usize) -> Result<(String, Vec<Value>), String> {
    if sql_len > payload.len() {
        return Err(format!(
            "a statement of {sql_len} bytes in a payload of {}",
            payload.len()
        ));
    }
    let params = decode_params(&payload[sql_len..])?;
    payload.truncate(sql_len);
    let sql = String::from_utf8(payload)
        .map_err(|e| format!("the statement is not UTF-8 ({})", e.utf8_error()))?;
    if sql.trim().is_empty() {
        return Err("the statement is empty".into());
    }
    if let Some(at) = sql.find('\0') {
        return Err(format!("the statement has a NUL byte at byte {at}"));
    }
    Ok((sql, params))
}

/// The inverse of [`encode_params`]: refused (which parameter, at which
/// byte, what is wrong) for bytes it did not make.
fn decode_params(bytes: &[u8]) -> Result<Vec<Value>, String> {
    /// The next `n` bytes after `at`, moving `at` past them.
    fn take<'a>(b: &'a [u8], at: &mut usize, n: usize) -> Result<&'a [u8], String> {
        let end = at
            .checked_add(n)
            .filter(|&end| end <= b.len())
            .ok_or_else(|| format!("{n} bytes needed at byte {at} of {}", b.len()))?;
        let out = &b[*at..end];
        *at = end;
        Ok(out)
    }
    fn eight(b: &[u8], at: &mut usize) -> Result<[u8; 8], String> {
        let mut out = [0u8; 8];
        out.copy_from_slice(take(b, at, 8)?);
        Ok(out)
    }
    fn sized<'a>(b: &'a [u8], at: &mut usize) -> Result<&'a [u8], String> {
        let mut n = [0u8; 4];
        n.copy_from_slice(take(b, at, 4)?);
        take(b, at, u32::from_le_bytes(n) as usize)
    }
    let mut out = Vec::new();
    let mut at = 0;
    while let Some(&tag) = bytes.get(at) {
        let (number, start) = (out.len() + 1, at);
        at += 1;
        let value = match tag {
            TAG_NULL => Ok(Value::Null),
            TAG_INTEGER => eight(bytes, &mut at).map(|b| Value::Integer(i64::from_le_bytes(b))),
            TAG_REAL => {
                eight(bytes, &mut at).map(|b| Value::Real(f64::from_bits(u64::from_le_bytes(b))))
            }
            TAG_TEXT => sized(bytes, &mut at).and_then(|b| {
                String::from_utf8(b.to_vec())
                    .map(Value::Text)
                    .map_err(|e| format!("text that is not UTF-8 ({})", e.utf8_error()))
            }),
            TAG_BLOB => sized(bytes, &mut at).map(|b| Value::Blob(b.to_vec())),
            _ => Err(format!("unknown type tag {tag}")),
        };
        out.push(value.map_err(|why| format!("parameter {number} (at byte {start}): {why}"))?);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn value() -> impl Strategy<Value = Value> {
        prop_oneof![
            Just(Value::Null),
            any::<i64>().prop_map(Value::Integer),
            any::<f64>().prop_map(Value::Real),
            ".{0,40}".prop_map(Value::Text),
            proptest::collection::vec(any::<u8>(), 0..40).prop_map(Value::Blob),
        ]
    }

    proptest! {
        #[test]
        fn parameters_round_trip(params in proptest::collection::vec(value(), 0..20)) {
            let bytes = encode_params(&params).unwrap();
            let back = decode_params(&bytes).unwrap();
            // NaN != NaN: compare the bits of reals.
            let key = |v: &Value| match v {
                Value::Real(f) => format!("real {}", f.to_bits()),
                v => format!("{v:?}"),
            };
            prop_assert_eq!(
                back.iter().map(key).collect::<Vec<_>>(),
                params.iter().map(key).collect::<Vec<_>>()
            );
        }

        #[test]
        fn foreign_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = decode_params(&bytes);
        }
    }

    /// Puts hostile bytes in a slot that `poster` posted: its `SQL_LEN`
    /// and `PARAMS_LEN` words, and its payload (`payload`, then zeros).
    fn forge(posted: &Posted, sql_len: u32, params_len: u32, payload: &[u8]) {
        let (jobs, i) = (&posted.jobs, posted.slot);
        jobs.word(i, SQL_LEN).store(sql_len, SeqCst);
        jobs.word(i, PARAMS_LEN).store(params_len, SeqCst);
        jobs.page
            .write_bytes(Jobs::at(i, PAYLOAD_AT), &padded(payload.to_vec()));
    }

    /// `payload` cut or filled with zeros to the whole payload of a slot.
    fn padded(mut payload: Vec<u8>) -> Vec<u8> {
        payload.resize(PAYLOAD_MAX, 0);
        payload
    }

    /// A forged slot is taken by a leader: what it takes (the job, or
    /// nothing when it refused the slot), and what the poster then sees.
    fn take_forged(sql_len: u32, params_len: u32, payload: &[u8]) -> (Vec<Taken>, Progress) {
        let (_d, poster, leader) = two_views();
        let mut p = poster.post("INSERT INTO t VALUES (1)", &[]).unwrap();
        forge(&p, sql_len, params_len, payload);
        let taken = leader.take(SLOTS);
        let seen = p.progress();
        (taken, seen)
    }

    proptest! {
        /// Slots near a valid job (a statement and its encoded parameters,
        /// with lengths off by a little or by anything, bytes flipped,
        /// noise behind) and slots of random bytes: taking one never
        /// panics, and a job comes out only if the slot decodes, exactly
        /// as decoded; otherwise the slot is refused back to its poster.
        #[test]
        fn random_slot_bytes_are_taken_as_decoded_or_refused(
            sql in "[ -~]{0,40}",
            params in proptest::collection::vec(value(), 0..4),
            sql_off in prop_oneof![3 => Just(0i64), 1 => -3i64..4, 1 => any::<u32>().prop_map(i64::from)],
            params_off in prop_oneof![3 => Just(0i64), 1 => -3i64..4, 1 => any::<u32>().prop_map(i64::from)],
            flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..3),
            noise in proptest::collection::vec(any::<u8>(), 0..64),
            random in any::<bool>(),
        ) {
            let encoded = encode_params(&params).unwrap();
            let mut payload = [sql.as_bytes(), &encoded, &noise].concat();
            for (at, byte) in flips {
                let at = at.index(payload.len().max(1));
                if let Some(b) = payload.get_mut(at) {
                    *b ^= byte;
                }
            }
            // Lengths: the right ones moved by the offsets (small ones
            // near the truth, large ones anywhere), wrapping at 32 bits.
            let len = |n: usize, off: i64| (n as i64).wrapping_add(off) as u32;
            let (sql_len, params_len) = if random {
                (len(0, sql_off), len(0, params_off))
            } else {
                (len(sql.len(), sql_off), len(encoded.len(), params_off))
            };
            let (mut taken, seen) = take_forged(sql_len, params_len, &payload);
            let decoded = payload_len(sql_len, params_len).and_then(|n| {
                let mut slot = padded(payload.clone());
                slot.truncate(n);
                decode_job(slot, sql_len as usize)
            });
            match decoded {
                Ok((sql, params)) => {
                    prop_assert_eq!(taken.len(), 1);
                    let t = taken.pop().unwrap();
                    prop_assert_eq!(&t.sql, &sql);
                    prop_assert_eq!(format!("{:?}", t.params), format!("{params:?}"));
                    prop_assert_eq!(seen, Progress::InFlight);
                }
                Err(_) => {
                    prop_assert!(taken.is_empty(), "a slot that does not decode was taken");
                    prop_assert_eq!(seen, Progress::Refused);
                }
            }
        }
    }

    /// Hostile slot bytes, one rule each: refused with words that say what
    /// is wrong, never taken (so never run), and never a panic.
    #[test]
    fn hostile_slots_are_refused_and_never_taken() {
        let max = PAYLOAD_MAX as u32;
        let insert = b"INSERT INTO t VALUES (?1)";
        let with = |params: &[u8]| [&insert[..], params].concat();
        let n = insert.len() as u32;
        // (what, SQL_LEN, PARAMS_LEN, payload, words of the refusal)
        #[rustfmt::skip]
        let cases: Vec<(&str, u32, u32, Vec<u8>, &str)> = vec![
            ("SQL length past the slot", u32::MAX, 0, vec![], "does not fit"),
            ("parameter length past the slot", 4, u32::MAX, vec![], "does not fit"),
            ("lengths that overflow 32 bits", u32::MAX, u32::MAX, vec![], "does not fit"),
            ("one byte too many", max - 3, 4, vec![], "does not fit"),
            ("SQL longer than the payload alone", max + 1, 0, vec![], "does not fit"),
            ("SQL that is not UTF-8", 3, 0, vec![b'I', 0xff, 0xfe], "not UTF-8"),
            ("SQL cut inside a character", 3, 0, "é".repeat(2).into_bytes(), "not UTF-8"),
            ("empty SQL", 0, 0, vec![], "empty"),
            ("blank SQL", 3, 0, b"  \n".to_vec(), "empty"),
            ("SQL with a NUL byte", 8, 0, b"INSERT\0X".to_vec(), "NUL byte at byte 6"),
            ("unknown parameter tag", n, 1, with(&[9]), "parameter 1 (at byte 0): unknown type tag 9"),
            ("integer cut short", n, 3, with(&[TAG_INTEGER, 1, 2]), "8 bytes needed at byte 1"),
            ("real cut short", n, 1, with(&[TAG_REAL]), "8 bytes needed"),
            ("text length past the end", n, 7, with(&[TAG_TEXT, 9, 0, 0, 0, b'a', b'b']), "9 bytes needed"),
            ("text length of 4 GiB", n, 5, with(&[TAG_TEXT, 255, 255, 255, 255]), "4294967295 bytes needed"),
            ("text length cut short", n, 3, with(&[TAG_TEXT, 1, 0]), "4 bytes needed"),
            ("text that is not UTF-8", n, 7, with(&[TAG_TEXT, 2, 0, 0, 0, 0xc3, 0x28]), "not UTF-8"),
            ("blob length past the end", n, 6, with(&[TAG_BLOB, 2, 0, 0, 0, 1]), "2 bytes needed"),
            ("a good parameter, then a bad one", n, 2, with(&[TAG_NULL, 0xee]), "parameter 2 (at byte 1)"),
        ];
        for (what, sql_len, params_len, payload, words) in cases {
            let why = payload_len(sql_len, params_len)
                .and_then(|len| {
                    let mut slot = padded(payload.clone());
                    slot.truncate(len);
                    decode_job(slot, sql_len as usize)
                })
                .expect_err(what);
            assert!(why.contains(words), "{what}: {why}");
            let (taken, seen) = take_forged(sql_len, params_len, &payload);
            assert!(taken.is_empty(), "{what}: taken");
            assert_eq!(seen, Progress::Refused, "{what}");
        }
        // The control: the same forging, with good bytes, is taken.
        let good = with(&[TAG_INTEGER, 7, 0, 0, 0, 0, 0, 0, 0]);
        let (taken, _) = take_forged(n, 9, &good);
        assert_eq!(taken.len(), 1);
        assert_eq!(taken[0].sql, "INSERT INTO t VALUES (?1)");
        assert_eq!(taken[0].params, vec![Value::Integer(7)]);
    }

    /// Two queues' views of one lock file: separate open file descriptions
    /// (as two processes have), one mapping.
    fn two_views() -> (tempfile::TempDir, Arc<Jobs>, Arc<Jobs>) {
        let (dir, path, _) = super::super::scratch_lock_file();
        let page = Arc::new(SharedPage::map(&lock_file::reopen(&path).unwrap()).unwrap());
        let view = || {
            Arc::new(Jobs::on(
                Arc::clone(&page),
                lock_file::reopen(&path).unwrap(),
            ))
        };
        (dir, view(), view())
    }

    /// What a process's death does to the lock bytes of `jobs`: the kernel
    /// drops every lock of its open file descriptions.
    fn die(jobs: &Jobs) {
        lock_file::unlock(&jobs.locks, JOB_LOCKS, 2 * SLOTS as u64).unwrap();
    }

    /// The outcome of a one-row insert.
    fn inserted() -> Outcome {
        Outcome::Done {
            changes: 1,
            last_insert_rowid: 9,
            durable_at: 0,
        }
    }

    #[test]
    fn a_job_is_taken_only_by_a_leader_with_its_posters_connection_settings() {
        for (poster_stock, leader_stock) in [(true, false), (false, true)] {
            let (_d, poster, leader) = two_views();
            poster.set_stock_settings(poster_stock);
            leader.set_stock_settings(leader_stock);
            assert_eq!(leader.stock_settings(), leader_stock);
            let p = poster.post("INSERT INTO t VALUES (1)", &[]).unwrap();
            assert!(
                leader.take(10).is_empty(),
                "a stock={poster_stock} job taken by a stock={leader_stock} leader"
            );
            leader.set_stock_settings(poster_stock);
            assert_eq!(leader.take(10).len(), 1, "the same settings take it");
            drop(p);
        }
    }

    #[test]
    fn a_job_runs_once_and_its_poster_reads_the_outcome() {
        let (_d, poster, leader) = two_views();
        let mut p = poster
            .post("INSERT INTO t VALUES (?1)", &[Value::Integer(5)])
            .unwrap();
        assert_eq!(poster.states().posted, 1);
        assert_eq!(p.progress(), Progress::Waiting);
        let mut taken = leader.take(10);
        assert_eq!(taken.len(), 1);
        assert!(leader.take(10).is_empty(), "taken twice");
        let t = taken.pop().unwrap();
        assert_eq!(
            (t.sql.as_str(), t.params.as_slice()),
            ("INSERT INTO t VALUES (?1)", &[Value::Integer(5)][..])
        );
        assert!(!p.withdraw(), "withdrawn from a leader");
        assert_eq!(p.progress(), Progress::InFlight);
        t.finish(&inserted());
        assert_eq!(p.progress(), Progress::Ended(inserted()));
        assert_eq!(
            poster.states(),
            JobStates::default(),
            "the slot is free again"
        );
    }

    #[test]
    fn a_job_whose_leader_died_before_its_commit_is_posted_again_and_runs_once() {
        let (_d, poster, leader) = two_views();
        let mut p = poster.post("INSERT INTO t VALUES (1)", &[]).unwrap();
        let t = leader.take(1).pop().unwrap();
        // The leader dies: its Taken never ends, its lock bytes go.
        std::mem::forget(t);
        die(&leader);
        assert_eq!(p.progress(), Progress::Waiting, "posted again");
        assert_eq!(poster.states().posted, 1);
        // Whoever holds the turn next takes it, once; the dead leader's
        // view of the old generation cannot change it any more.
        let second = leader.take(5);
        assert_eq!(second.len(), 1);
        assert!(!p.withdraw() && p.progress() == Progress::InFlight);
        second.into_iter().next().unwrap().finish(&inserted());
        assert!(matches!(
            p.progress(),
            Progress::Ended(Outcome::Done { .. })
        ));
    }

    #[test]
    fn a_poster_whose_leader_died_in_its_commit_is_told_the_outcome_is_unknown() {
        let (_d, poster, leader) = two_views();
        let mut p = poster.post("INSERT INTO t VALUES (1)", &[]).unwrap();
        let mut t = leader.take(1).pop().unwrap();
        t.committing();
        assert_eq!(p.progress(), Progress::InFlight);
        std::mem::forget(t);
        die(&leader);
        match p.progress() {
            Progress::Ended(Outcome::Unknown { message }) => {
                assert!(message.contains("died during the commit"), "{message}")
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(poster.states(), JobStates::default());
    }

    #[test]
    fn a_poster_whose_leader_died_after_its_commit_gets_the_outcome_to_make_durable() {
        let (_d, poster, leader) = two_views();
        let mut p = poster.post("INSERT INTO t VALUES (1)", &[]).unwrap();
        let mut t = leader.take(1).pop().unwrap();
        t.committing();
        let committed = Outcome::Done {
            changes: 1,
            last_insert_rowid: 4,
            durable_at: 77,
        };
        t.committed(&committed);
        assert_eq!(
            p.progress(),
            Progress::InFlight,
            "the leader is making it durable"
        );
        std::mem::forget(t);
        die(&leader);
        assert_eq!(p.progress(), Progress::Ended(committed));
    }

    #[test]
    fn a_full_table_refuses_posts_and_frees_the_slots_of_dead_posters() {
        let (_d, poster, other) = two_views();
        let posted: Vec<_> = (0..SLOTS)
            .map(|i| {
                poster
                    .post(&format!("INSERT INTO t VALUES ({i})"), &[])
                    .unwrap()
            })
            .collect();
        assert!(
            other.post("INSERT INTO t VALUES (0)", &[]).is_none(),
            "no slot left"
        );
        // Too long for a slot: never posted.
        assert!(other.post(&"x".repeat(SLOT_LEN), &[]).is_none());
        // The poster dies with its jobs posted: the next poster reclaims.
        std::mem::forget(posted);
        die(&poster);
        let p = other.post("INSERT INTO t VALUES (0)", &[]);
        assert!(p.is_some(), "a dead poster's slot was not reclaimed");
    }

    #[test]
    fn a_withdrawn_job_is_never_taken_and_a_refused_one_comes_back() {
        let (_d, poster, leader) = two_views();
        let mut p = poster.post("INSERT INTO t VALUES (1)", &[]).unwrap();
        assert!(p.withdraw());
        assert!(leader.take(1).is_empty());
        let mut p = poster.post("SELECT 1", &[]).unwrap();
        leader.take(1).pop().unwrap().refuse();
        assert_eq!(p.progress(), Progress::Refused);
        assert_eq!(poster.states(), JobStates::default());
    }

    #[test]
    fn truncated_or_unknown_bytes_do_not_decode() {
        let bytes = encode_params(&[Value::Text("hello".into()), Value::Integer(7)]).unwrap();
        for cut in 1..bytes.len() {
            if cut == 10 {
                continue; // a whole first value: a valid, shorter list
            }
            assert!(decode_params(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        assert!(decode_params(&[9]).is_err());
        assert!(decode_params(&[TAG_TEXT, 2, 0, 0, 0, 0xff, 0xfe]).is_err());
    }
}
