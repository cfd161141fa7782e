"""Many threads at once: no "database is locked", nothing lost."""

import random
import threading

import litelane
import litelane.dbapi as dbapi

THREADS = 24


def run_threads(n, target):
    errors = []
    barrier = threading.Barrier(n)

    def wrap(i):
        try:
            barrier.wait()
            target(i)
        except BaseException as e:  # noqa: BLE001 - every failure is a finding
            errors.append(repr(e))

    threads = [threading.Thread(target=wrap, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not any(t.is_alive() for t in threads), "a thread hung"
    return errors


def test_dbapi_threads_each_with_their_own_connection(db_path):
    con = dbapi.connect(db_path)
    con.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, who INTEGER, v TEXT)")
    con.close()
    per_thread = 200

    def work(i):
        c = dbapi.connect(db_path)
        for k in range(per_thread):
            if k % 3 == 0:
                c.execute("SELECT count(*) FROM t WHERE who = ?", (i,)).fetchone()
            c.execute("INSERT INTO t(who, v) VALUES (?, ?)", (i, f"{i}-{k}"))
            if k % 10 == 9:
                c.commit()  # transactions of 10 inserts
        c.commit()
        c.close()

    errors = run_threads(THREADS, work)
    assert errors == []
    c = dbapi.connect(db_path)
    assert c.execute("SELECT count(*) FROM t").fetchone() == (THREADS * per_thread,)
    rows = c.execute("SELECT who, count(*) FROM t GROUP BY who").fetchall()
    assert sorted(rows) == [(i, per_thread) for i in range(THREADS)]
    m = c.engine.metrics()
    assert m["busy_errors"] == 0


def test_dbapi_autocommit_single_row_writes_share_commits(db_path):
    con = dbapi.connect(db_path, isolation_level=None)
    con.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, who INTEGER)")
    before = con.engine.metrics()

    def work(i):
        c = dbapi.connect(db_path, isolation_level=None)
        for _ in range(100):
            c.execute("INSERT INTO t(who) VALUES (?)", (i,))

    errors = run_threads(16, work)
    assert errors == []
    assert con.execute("SELECT count(*) FROM t").fetchone() == (1600,)
    m = con.engine.metrics()
    assert m["transactions"] - before["transactions"] == 1600
    assert m["busy_errors"] == 0
    # group commit: fewer SQLite commits than transactions
    assert m["commits"] - before["commits"] <= 1600


def test_native_threads_mixed_reads_writes_transactions_and_bulk(db_path):
    db = litelane.open(db_path)
    db.execute("CREATE TABLE acct(id INTEGER PRIMARY KEY, bal INTEGER NOT NULL)")
    db.insert_many("acct", [(i, 1000) for i in range(50)])
    db.execute("CREATE TABLE bulk(x)")

    def work(i):
        rnd = random.Random(i)
        for k in range(60):
            op = k % 4
            if op == 0:
                a, b = rnd.sample(range(50), 2)
                with db.transaction() as tx:
                    tx.execute("UPDATE acct SET bal = bal - 1 WHERE id = ?", (a,))
                    tx.execute("UPDATE acct SET bal = bal + 1 WHERE id = ?", (b,))
            elif op == 1:
                total = db.query("SELECT sum(bal) FROM acct")[0][0]
                assert total == 50 * 1000, total  # every snapshot is consistent
            elif op == 2:
                db.insert_many("bulk", [(i,)] * 20)
            else:
                db.execute("UPDATE acct SET bal = bal WHERE id = ?", (rnd.randrange(50),))

    errors = run_threads(THREADS, work)
    assert errors == []
    assert db.query("SELECT sum(bal) FROM acct") == [(50_000,)]
    assert db.query("SELECT count(*) FROM bulk") == [(THREADS * 15 * 20,)]
    assert db.metrics()["busy_errors"] == 0


def test_readers_work_in_parallel_with_the_gil_released(db_path):
    """A long read in one thread does not stop other threads' reads."""
    db = litelane.open(db_path, readers=4)
    db.execute("CREATE TABLE n(x)")
    db.insert_many("n", [(i,) for i in range(2000)])
    import time

    done = []

    def slow():
        # a deliberately slow read: a cross join counted in SQLite
        db.query("SELECT count(*) FROM n a, n b WHERE a.x + b.x < 10")
        done.append(("slow", time.perf_counter()))

    def fast():
        for _ in range(50):
            db.query("SELECT count(*) FROM n")
        done.append(("fast", time.perf_counter()))

    t1 = threading.Thread(target=slow)
    t1.start()
    time.sleep(0.01)
    t2 = threading.Thread(target=fast)
    t2.start()
    t1.join()
    t2.join()
    # the fast reader finished first: it was not blocked behind the slow one
    assert [name for name, _ in sorted(done, key=lambda x: x[1])] == ["fast", "slow"]
