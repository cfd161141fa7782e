//! A small pool of threads that run transaction workers, so a transaction
//! does not pay for a new thread. A thread waits up to `IDLE_EXIT` for its
//! next job, then exits; there is no fixed size (one thread per transaction
//! open at the same time).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::Mutex;
use std::time::Duration;

use crate::sync::lock;

type Job = Box<dyn FnOnce() + Send>;

/// How long an idle worker thread waits for another job before it exits.
const IDLE_EXIT: Duration = Duration::from_secs(10);

/// Idle threads (id, sender), most recently idle last.
static IDLE: Mutex<Vec<(u64, Sender<Job>)>> = Mutex::new(Vec::new());
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

fn idle() -> std::sync::MutexGuard<'static, Vec<(u64, Sender<Job>)>> {
    lock(&IDLE)
}

/// In a child process after `fork()`: the idle threads of the parent do not
/// exist here; forget them, so the next job starts a thread of its own.
/// (Only the forking thread exists in the child; the list's lock was free
/// unless another thread was between two lines of `run`/`serve`.)
pub fn forget_after_fork() {
    if let Ok(mut list) = IDLE.try_lock() {
        std::mem::forget(std::mem::take(&mut *list));
    }
}

/// Runs `job` on an idle pool thread, or on a new one.
pub fn run(job: impl FnOnce() + Send + 'static) -> std::io::Result<()> {
    let mut job: Job = Box::new(job);
    loop {
        let Some((_, tx)) = idle().pop() else { break };
        match tx.send(job) {
            Ok(()) => return Ok(()),
            // That thread timed out and exited meanwhile: try the next one.
            Err(mpsc::SendError(j)) => job = j,
        }
    }
    let (tx, rx) = mpsc::channel::<Job>();
    let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
    std::thread::Builder::new()
        .name("litelane-txn".into())
        .spawn(move || serve(id, tx, rx, job))
        .map(|_| ())
}

fn serve(id: u64, tx: Sender<Job>, rx: Receiver<Job>, first: Job) {
    first();
    loop {
        idle().push((id, tx.clone()));
        match rx.recv_timeout(IDLE_EXIT) {
            Ok(job) => job(),
            Err(_) => break,
        }
    }
    // Timed out: leave the idle list. A job sent in the instant between the
    // timeout and this line stays in the channel; the sender then sees the
    // channel close when `rx` drops below and `run` retries elsewhere only if
    // the send itself failed, so drain what arrived first.
    idle().retain(|(i, _)| *i != id);
    while let Ok(job) = rx.try_recv() {
        job();
    }
}
