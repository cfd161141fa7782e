//! write_async / read_async: one hop per transaction, one wake-up.

use crate::common;

use std::future::Future;
use std::pin::pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use common::{exec, query_i64, temp_db};
use litelane::{Error, Options};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_tasks_write_and_read_asynchronously() {
    let (_dir, db) = temp_db(Options::default());
    exec(&db, "CREATE TABLE t(task INTEGER, i INTEGER)");
    let mut tasks = Vec::new();
    for task in 0..16i64 {
        let db = db.clone();
        tasks.push(tokio::spawn(async move {
            for i in 0..20i64 {
                db.write_async(move |tx| Ok(tx.execute("INSERT INTO t VALUES (?, ?)", [task, i])?))
                    .await
                    .unwrap();
            }
            db.read_async(move |c| {
                Ok(
                    c.query_row("SELECT count(*) FROM t WHERE task = ?", [task], |r| {
                        r.get::<_, i64>(0)
                    })?,
                )
            })
            .await
            .unwrap()
        }));
    }
    for t in tasks {
        assert_eq!(t.await.unwrap(), 20);
    }
    assert_eq!(query_i64(&db, "SELECT count(*) FROM t"), 320);
    assert_eq!(db.metrics().busy_errors, 0);
}

#[tokio::test]
async fn an_async_error_rolls_back_and_reaches_the_caller() {
    let (_dir, db) = temp_db(Options::default());
    exec(&db, "CREATE TABLE t(x)");
    let r = db
        .write_async(|tx| {
            tx.execute("INSERT INTO t VALUES (1)", [])?;
            Err::<(), _>(Error::user("async nope"))
        })
        .await;
    assert_eq!(r.unwrap_err(), Error::user("async nope"));
    assert_eq!(query_i64(&db, "SELECT count(*) FROM t"), 0);
}

#[tokio::test]
async fn an_async_panic_is_raised_in_the_awaiting_task() {
    let (_dir, db) = temp_db(Options::default());
    let db2 = db.clone();
    let joined = tokio::spawn(async move {
        db2.write_async(|_| -> litelane::Result<()> { panic!("async boom") })
            .await
    })
    .await;
    assert!(joined.unwrap_err().is_panic());
    // The engine still works.
    exec(&db, "CREATE TABLE after_panic(x)");
}

struct CountingWaker(AtomicUsize);

impl Wake for CountingWaker {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

#[test]
fn the_caller_is_woken_exactly_once_per_transaction() {
    let (_dir, db) = temp_db(Options::default());
    exec(&db, "CREATE TABLE t(x)");
    let counter = Arc::new(CountingWaker(AtomicUsize::new(0)));
    let waker = Waker::from(Arc::clone(&counter));
    let mut cx = Context::from_waker(&waker);
    let mut fut = pin!(db.write_async(|tx| {
        for i in 0..1000 {
            tx.execute("INSERT INTO t VALUES (?)", [i])?;
        }
        std::thread::sleep(Duration::from_millis(50));
        Ok(1000)
    }));
    assert!(
        fut.as_mut().poll(&mut cx).is_pending(),
        "the work runs elsewhere"
    );
    let out = loop {
        if let Poll::Ready(v) = fut.as_mut().poll(&mut cx) {
            break v;
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    assert_eq!(out.unwrap(), 1000);
    assert_eq!(
        counter.0.load(Ordering::SeqCst),
        1,
        "one wake-up for 1000 rows"
    );
}
