//! `write_async` / `read_async`: one hop per transaction.
//!
//! The whole closure goes to one of litelane's own threads in a single hop,
//! runs there (queueing for the writer like any other write), and the
//! caller's task is woken once with the result. No async runtime is assumed:
//! [`Pending`] is a plain `Future` that any executor (tokio, async-std,
//! smol, `futures::executor::block_on`) can await.

use std::future::Future;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex, OnceLock};
use std::task::{Context, Poll, Waker};
use std::thread::JoinHandle;

use crate::error::{Error, Result};
use crate::tx::Tx;
use crate::unpoisoned::lock;
use crate::Database;

type Job = Box<dyn FnOnce() + Send>;
type Panic = Box<dyn std::any::Any + Send>;

struct Slot<T> {
    value: Option<std::result::Result<T, Panic>>,
    waker: Option<Waker>,
}

/// The future returned by [`Database::write_async`] and
/// [`Database::read_async`]. Resolves to the closure's result; a panic in the
/// closure is re-raised in the awaiting task.
#[must_use = "futures do nothing unless awaited"]
pub struct Pending<T> {
    slot: Arc<Mutex<Slot<T>>>,
}

impl<T> Future for Pending<T> {
    type Output = T;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<T> {
        let mut slot = lock(&self.slot);
        match slot.value.take() {
            Some(Ok(v)) => Poll::Ready(v),
            Some(Err(panic)) => {
                drop(slot);
                resume_unwind(panic)
            }
            None => {
                if !slot.waker.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
                    slot.waker = Some(cx.waker().clone());
                }
                Poll::Pending
            }
        }
    }
}

/// The threads that run async closures; started on first use.
pub(crate) struct Executor {
    threads: usize,
    sender: OnceLock<Mutex<Option<Sender<Job>>>>,
    handles: Mutex<Vec<JoinHandle<()>>>,
}

impl Executor {
    pub fn new(threads: usize) -> Executor {
        Executor {
            threads: threads.max(1),
            sender: OnceLock::new(),
            handles: Mutex::new(Vec::new()),
        }
    }

    fn start(&self) -> Mutex<Option<Sender<Job>>> {
        let (tx, rx) = mpsc::channel::<Job>();
        let rx = Arc::new(Mutex::new(rx));
        let mut handles = lock(&self.handles);
        for i in 0..self.threads {
            let rx: Arc<Mutex<Receiver<Job>>> = Arc::clone(&rx);
            let spawned = std::thread::Builder::new()
                .name(format!("litelane-async-{i}"))
                .spawn(move || loop {
                    let job = lock(&rx).recv();
                    match job {
                        Ok(job) => job(),
                        Err(_) => return,
                    }
                });
            if let Ok(h) = spawned {
                handles.push(h);
            }
        }
        Mutex::new(Some(tx))
    }

    /// Runs `f` on an executor thread; the returned future resolves to its value.
    pub fn spawn<T: Send + 'static>(
        &self,
        f: impl FnOnce() -> Result<T> + Send + 'static,
    ) -> Pending<Result<T>> {
        let slot = Arc::new(Mutex::new(Slot {
            value: None,
            waker: None,
        }));
        let out = Arc::clone(&slot);
        let job: Job = Box::new(move || {
            let value = catch_unwind(AssertUnwindSafe(f));
            let waker = {
                let mut s = lock(&out);
                s.value = Some(value);
                s.waker.take()
            };
            if let Some(w) = waker {
                w.wake();
            }
        });
        let sender = self.sender.get_or_init(|| self.start());
        let sent = match lock(sender).as_ref() {
            Some(tx) => tx.send(job).map_err(|e| e.0),
            None => Err(job),
        };
        if sent.is_err() {
            lock(&slot).value = Some(Ok(Err(Error::Io {
                context: "running an async job".into(),
                message: "the database's async threads are gone".into(),
                os: None,
            })));
        }
        Pending { slot }
    }
}

impl Drop for Executor {
    fn drop(&mut self) {
        if let Some(sender) = self.sender.get() {
            lock(sender).take();
        }
        let handles = std::mem::take(&mut *lock(&self.handles));
        let me = std::thread::current().id();
        for h in handles {
            if h.thread().id() != me {
                let _ = h.join();
            }
        }
    }
}

impl Database {
    /// [`write`](Database::write) as a future: the closure is handed to one of
    /// litelane's threads in one hop, queues for the writer there, and the
    /// awaiting task is woken once, after the commit. Runtime-agnostic.
    ///
    /// ```
    /// # let db = litelane::Database::open_in_memory(Default::default()).unwrap();
    /// let fut = db.write_async(|tx| Ok(tx.execute("CREATE TABLE t(x)", [])?));
    /// # let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
    /// # rt.block_on(async { fut.await.unwrap(); });
    /// ```
    pub fn write_async<T, F>(&self, f: F) -> Pending<Result<T>>
    where
        T: Send + 'static,
        F: FnOnce(&Tx<'_>) -> Result<T> + Send + 'static,
    {
        let writer = Arc::clone(self.writer());
        self.executor().spawn(move || writer.write("", f))
    }

    /// [`read`](Database::read) as a future, with the same one-hop contract
    /// as [`write_async`](Database::write_async).
    pub fn read_async<T, F>(&self, f: F) -> Pending<Result<T>>
    where
        T: Send + 'static,
        F: FnOnce(&rusqlite::Connection) -> Result<T> + Send + 'static,
    {
        let pool = Arc::clone(self.pool());
        self.executor().spawn(move || pool.read("", f))
    }
}
