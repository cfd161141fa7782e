"""The native API: import litelane."""

import json
import os
import subprocess
import sys
import threading
import time

import litelane
import litelane.dbapi as dbapi
import pytest


@pytest.fixture
def db(db_path):
    with litelane.open(db_path) as d:
        d.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, name TEXT UNIQUE, n INTEGER)")
        yield d


def test_open_execute_query_tuples_and_dicts(db):
    assert db.profile == "balanced"
    r = db.execute("INSERT INTO t(name, n) VALUES (?, ?)", ("a", 1))
    assert r == litelane.Executed(rowcount=1, lastrowid=1)
    db.execute("INSERT INTO t(name, n) VALUES (:name, :n)", {"name": "b", "n": 2})
    assert db.query("SELECT name, n FROM t ORDER BY n") == [("a", 1), ("b", 2)]
    assert db.query("SELECT name, n FROM t ORDER BY n", dicts=True) == [{"name": "a", "n": 1}, {"name": "b", "n": 2}]
    assert db.query_one("SELECT n FROM t WHERE name = ?", ("b",)) == (2,)
    assert db.query_one("SELECT n FROM t WHERE name = 'zz'") is None
    # a write through query (RETURNING) runs on the writer
    assert db.query("INSERT INTO t(name, n) VALUES ('c', 3) RETURNING id") == [(3,)]


def test_profiles_and_options(tmp_path):
    for profile in ("safe", "balanced", "fast"):
        with litelane.open(
            str(tmp_path / f"{profile}.db"),
            profile=profile,
            readers=3,
            busy_timeout=1.5,
            group_commit=False,
            cache_size_kib=2048,
        ) as d:
            assert d.profile == profile
            assert d._engine.readers == 3
            mode = d.query("PRAGMA journal_mode")[0][0]
            assert mode == ("memory" if profile == "fast" else "wal")
    with pytest.raises(litelane.ProgrammingError, match="unknown option"):
        litelane.open(str(tmp_path / "x.db"), cache_size=1)
    with pytest.raises(litelane.ProgrammingError, match="busy_timeout"):
        litelane.open(str(tmp_path / "x.db"), busy_timeout="soon")
    with pytest.raises(litelane.ProgrammingError, match="readers"):
        litelane.open(str(tmp_path / "x.db"), readers=0)


def test_transaction_commits_rolls_back_and_reads_its_own_writes(db):
    with db.transaction() as tx:
        tx.execute("INSERT INTO t(name, n) VALUES ('a', 1)")
        assert tx.query("SELECT count(*) FROM t") == [(1,)]
        assert db.query("SELECT count(*) FROM t") == [(0,)]  # not yet committed
    assert db.query("SELECT count(*) FROM t") == [(1,)]
    with pytest.raises(RuntimeError):
        with db.transaction() as tx:
            tx.execute("INSERT INTO t(name, n) VALUES ('b', 2)")
            raise RuntimeError("boom")
    assert db.query("SELECT name FROM t") == [("a",)]
    # statements that would end litelane's transaction are refused
    with db.transaction() as tx:
        for sql in ("COMMIT", "ROLLBACK", "BEGIN", "END"):
            with pytest.raises(litelane.ProgrammingError, match="owns the transaction"):
                tx.execute(sql)
        tx.execute("SAVEPOINT s")
        tx.execute("INSERT INTO t(name, n) VALUES ('x', 9)")
        tx.execute("ROLLBACK TO s")
        tx.execute("RELEASE s")
    assert db.query("SELECT count(*) FROM t") == [(1,)]


def test_write_returns_the_functions_value_and_rolls_back_on_error(db):
    def add(tx):
        tx.executemany("INSERT INTO t(name, n) VALUES (?, ?)", [("a", 1), ("b", 2)])
        return tx.query("SELECT sum(n) FROM t")[0][0]

    assert db.write(add) == 3

    def fail(tx):
        tx.execute("INSERT INTO t(name, n) VALUES ('c', 3)")
        tx.execute("INSERT INTO t(name, n) VALUES ('a', 4)")  # unique violation

    with pytest.raises(litelane.IntegrityError):
        db.write(fail)
    assert db.query("SELECT count(*) FROM t") == [(2,)]


def test_finished_transaction_refuses_statements(db):
    tx = db.transaction()
    tx.execute("INSERT INTO t(name, n) VALUES ('a', 1)")
    tx.commit()
    assert not tx.active
    tx.commit()  # no-op
    with pytest.raises(litelane.ProgrammingError, match="finished"):
        tx.execute("SELECT 1")


def test_abandoned_transaction_rolls_back_when_collected(db):
    tx = db.transaction()
    tx.execute("INSERT INTO t(name, n) VALUES ('a', 1)")
    del tx
    import gc

    gc.collect()
    # the writer is free again and nothing was committed
    db.execute("INSERT INTO t(name, n) VALUES ('b', 2)")
    assert db.query("SELECT name FROM t") == [("b",)]


def test_iterate_streams_rows(db):
    db.insert_many("t", ((None, f"n{i}", i) for i in range(5000)))
    it = db.iterate("SELECT n FROM t ORDER BY n", batch=100)
    assert sum(r[0] for r in it) == sum(range(5000))
    first = next(iter(db.iterate("SELECT name, n FROM t ORDER BY n", dicts=True)))
    assert first == {"name": "n0", "n": 0}
    with pytest.raises(litelane.ProgrammingError, match="read-only"):
        list(db.iterate("DELETE FROM t"))
    assert db.query("SELECT count(*) FROM t") == [(5000,)]
    with pytest.raises(litelane.OperationalError, match="no such table"):
        list(db.iterate("SELECT * FROM nope"))


def test_insert_many_tuples_dicts_and_generators(db):
    rep = db.insert_many("t", [(None, "a", 1), (None, "b", 2)])
    assert rep["rows"] == 2 and rep["commits"] == 1
    rep = db.insert_many("t", ({"name": f"d{i}", "n": i} for i in range(10_000)))
    assert rep["rows"] == 10_000 and rep["commits"] == 1 and rep["statements"] > 1
    rep = db.insert_many("t", [("x", 7), ("y", 8)], columns=["name", "n"])
    assert rep["rows"] == 2
    # a dict missing a column inserts NULL there
    db.insert_many("t", [{"name": "nulln"}])
    assert db.query("SELECT n FROM t WHERE name = 'nulln'") == [(None,)]
    rep = db.insert_many("t", [], columns=["name"])
    assert rep["rows"] == 0
    assert db.query("SELECT count(*) FROM t") == [(10_005,)]
    rep = db.insert_many("t", ((None, f"c{i}", i) for i in range(1000)), commit_every=300)
    assert rep["commits"] == 4


INSERT_MANY_BAD = [
    ([(None, "a", 1), (None, "b")], litelane.ProgrammingError, "row 5002 has 2 values"),
    ([{"name": "a", "bogus": 1}], litelane.ProgrammingError, "bogus"),
    ([(None, "a", 1), "abc"], litelane.ProgrammingError, "row 5002: a string"),
    ([(None, "a", 1), 42], litelane.ProgrammingError, "row 5002: expected a tuple"),
    ([(None, "a", object())], litelane.ProgrammingError, "not supported"),
    ([(None, "a", 1), (None, "a", 2)], litelane.IntegrityError, "UNIQUE"),
]


@pytest.mark.parametrize("rows,exc,text", INSERT_MANY_BAD)
def test_insert_many_bad_rows_roll_back_everything(db, rows, exc, text):
    # many good rows first, so the failure comes after batches were handed over
    good = [(None, f"g{i}", i) for i in range(5000)]
    with pytest.raises(exc, match=text):
        db.insert_many("t", good + rows, batch=512)
    assert db.query("SELECT count(*) FROM t") == [(0,)]
    db.execute("INSERT INTO t(name, n) VALUES ('after', 1)")  # writer free again


def test_insert_many_failing_generator_rolls_back(db):
    def rows():
        for i in range(3000):
            yield (None, f"r{i}", i)
        raise ValueError("source broke")

    with pytest.raises(ValueError, match="source broke"):
        db.insert_many("t", rows(), batch=256)
    assert db.query("SELECT count(*) FROM t") == [(0,)]


def test_insert_many_hostile_table_and_column_names(db_path):
    with litelane.open(db_path) as d:
        name = 'we"ird; DROP TABLE x; --'
        d.execute('CREATE TABLE "we""ird; DROP TABLE x; --"("co""l" TEXT, "sp ace" INT)')
        d.insert_many(name, [("a", 1), ("b", 2)], columns=['co"l', "sp ace"])
        assert d.query('SELECT * FROM "we""ird; DROP TABLE x; --"') == [("a", 1), ("b", 2)]
        with pytest.raises(litelane.OperationalError, match="no such table"):
            d.insert_many("missing", [(1,)])


def test_metrics_and_checkpoint(db):
    for i in range(20):
        db.execute("INSERT INTO t(name, n) VALUES (?, ?)", (f"m{i}", i))
    m = db.metrics()
    assert m["transactions"] >= 21  # the CREATE TABLE and 20 inserts
    assert m["busy_errors"] == 0
    assert m["rows_written"] >= 20
    assert sum(m["group_sizes"]) == m["commits"]
    assert isinstance(m["queue_wait_p99"], float)
    r = db.checkpoint("truncate")
    assert r["mode"] == "truncate" and not r["busy"]
    assert os.path.getsize(db.path + "-wal") == 0
    with pytest.raises(litelane.ProgrammingError, match="checkpoint mode"):
        db.checkpoint("sometimes")


def test_close_and_use_after_close(db_path):
    d = litelane.open(db_path)
    d.close()
    assert d.closed
    with pytest.raises(litelane.ProgrammingError, match="closed"):
        d.query("SELECT 1")


def test_same_thread_nested_write_fails_fast(db):
    with db.transaction() as tx:
        tx.execute("INSERT INTO t(name, n) VALUES ('a', 1)")
        with pytest.raises(litelane.OperationalError, match="database is locked"):
            db.execute("INSERT INTO t(name, n) VALUES ('b', 2)")
        with pytest.raises(litelane.OperationalError, match="database is locked"):
            db.insert_many("t", [(None, "c", 3)])
        # reads are fine: they go to a reader
        assert db.query("SELECT count(*) FROM t") == [(0,)]
    assert db.query("SELECT count(*) FROM t") == [(1,)]


def test_readers_run_while_a_transaction_holds_the_writer(db):
    db.execute("INSERT INTO t(name, n) VALUES ('a', 1)")
    tx = db.transaction()
    tx.execute("UPDATE t SET n = 2")
    seen = []
    t = threading.Thread(target=lambda: seen.append(db.query("SELECT n FROM t")))
    t.start()
    t.join(5)
    assert seen == [[(1,)]]
    tx.commit()
    assert db.query("SELECT n FROM t") == [(2,)]


def test_import_file_through_the_shipped_command(db_path, tmp_path, monkeypatch):
    # The package's own command, not a binary found on PATH.
    monkeypatch.delenv("LITELANE_BIN", raising=False)
    monkeypatch.setenv("PATH", "/nonexistent")
    csv = tmp_path / "in.csv"
    csv.write_text("a,b\n1,x\n2,y\n3,z\n")
    with litelane.open(db_path) as d:
        summary = d.import_file(str(csv), "imported")
        assert summary["rows_inserted"] == 3, summary
        assert d.query("SELECT count(*) FROM imported") == [(3,)]
        with pytest.raises(litelane.OperationalError, match="failed"):
            d.import_file(str(tmp_path / "missing.csv"), "x")


def test_the_litelane_console_script_is_the_command(tmp_path):
    script = os.path.join(os.path.dirname(sys.executable), "litelane")
    assert os.path.exists(script), "pip install . installs the `litelane` command"
    out = subprocess.run([script, "--help"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    for command in ("import", "sniff", "stats", "doctor", "checkpoint", "backup", "recover"):
        assert command in out.stdout, command
    bad = subprocess.run([script, "no-such-command"], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "no-such-command" in bad.stderr
    csv = tmp_path / "t.csv"
    csv.write_text("n\n1\n2\n")
    db = tmp_path / "t.db"
    run = subprocess.run(
        [script, "import", str(csv), "--db", str(db), "--json"], capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["rows_inserted"] == 2


def test_executemany_executescript_and_explicit_transaction_calls(db):
    r = db.executemany("INSERT INTO t(name, n) VALUES (?, ?)", [("a", 1), ("b", 2), ("c", 3)])
    assert r.rowcount == 3
    db.executescript("""
        INSERT INTO t(name, n) VALUES ('d', 4);
        BEGIN; UPDATE t SET n = n * 10 WHERE name = 'a'; COMMIT;
    """)
    assert db.query("SELECT n FROM t ORDER BY name") == [(10,), (2,), (3,), (4,)]
    with pytest.raises(litelane.OperationalError, match="no such table"):
        db.executescript("INSERT INTO t(name, n) VALUES ('e', 5); INSERT INTO nope VALUES (1);")
    assert db.query("SELECT count(*) FROM t WHERE name = 'e'") == [(0,)]  # all or nothing

    tx = db.transaction()
    tx.execute("INSERT INTO t(name, n) VALUES ('f', 6)")
    # a failing script inside a transaction undoes only its own statements
    with pytest.raises(litelane.IntegrityError):
        tx.executescript("INSERT INTO t(name, n) VALUES ('g', 7); INSERT INTO t(name, n) VALUES ('a', 0);")
    assert tx.query("SELECT name FROM t WHERE name IN ('f', 'g')") == [("f",)]
    tx.rollback()
    assert not tx.active
    assert db.query("SELECT count(*) FROM t WHERE name = 'f'") == [(0,)]


EXIT_SCRIPT = r"""
import asyncio, sys, threading
import litelane, litelane.dbapi as sq
p = sys.argv[1]
c = sq.connect(p)
c.execute("CREATE TABLE t(x)")
c.execute("INSERT INTO t VALUES (1)")            # legacy transaction, never committed
db = litelane.open(p)
box = []
th = threading.Thread(target=lambda: box.append(db.transaction()))
th.start(); th.join()                             # a native transaction on another thread
it = db.iterate("SELECT 1 UNION ALL SELECT 2", batch=1)
next(it)                                          # a half-read stream

async def main():
    tx = await db.atransaction().__aenter__()     # an async transaction left open
    await asyncio.sleep(0)

asyncio.run(main())
print("done", flush=True)
"""


def test_process_exits_cleanly_with_everything_left_open(tmp_path):
    path = str(tmp_path / "exit.db")
    proc = subprocess.run([sys.executable, "-c", EXIT_SCRIPT, path], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "done"
    with litelane.open(path) as d:
        # the table was created in autocommit; the uncommitted row is gone
        assert d.query("SELECT count(*) FROM t") == [(0,)]


def test_the_process_queue_option(tmp_path):
    with litelane.open(str(tmp_path / "solo.db"), process_queue=False) as d:
        d.execute("CREATE TABLE t(x)")
        d.execute("INSERT INTO t VALUES (1)")
        assert not os.path.exists(str(tmp_path / "solo.db-lane"))
    with litelane.open(str(tmp_path / "shared.db")) as d:
        d.execute("CREATE TABLE t(x)")
        assert os.path.exists(str(tmp_path / "shared.db-lane"))
    with pytest.raises(litelane.ProgrammingError, match="process_queue"):
        litelane.open(str(tmp_path / "x.db"), process_queue="yes please")


def test_metrics_say_whether_the_queue_and_combined_commits_are_on(tmp_path):
    with litelane.open(str(tmp_path / "q.db"), profile="safe") as d:
        d.execute("CREATE TABLE t(x)")
        m = d.metrics()
        assert m["process_queue_off"] is None
        assert m["combined_commits_off"] is None
    # Opened by URI: in the queue as by path, its -lane file beside the
    # file the URI names (percent-decoded).
    uri = "file:" + str(tmp_path / "my%20u.db") + "?mode=rwc"
    con = dbapi.connect(uri, uri=True)
    con.execute("CREATE TABLE t(x)")
    con.commit()
    assert con.engine.metrics()["process_queue_off"] is None
    names = set(os.listdir(tmp_path))
    assert {"my u.db", "my u.db-lane", "my u.db-wal"} <= names
    assert not [n for n in names if "%" in n or n.startswith("file:")]
    con.close()
    # Opened read-only: nothing to queue, no -lane file made, and the
    # metrics say why.
    ro = dbapi.connect("file:" + str(tmp_path / "q.db") + "?mode=ro", uri=True)
    assert ro.execute("SELECT count(*) FROM t").fetchone() == (0,)
    why = ro.engine.metrics()["process_queue_off"]
    assert why is not None and "read-only" in why
    ro.close()
    imm = dbapi.connect("file:" + str(tmp_path / "my%20u.db") + "?immutable=1", uri=True)
    assert "read-only" in imm.engine.metrics()["process_queue_off"]
    imm.close()


def test_the_process_turn_linger_option(tmp_path):
    path = str(tmp_path / "l.db")
    with litelane.open(path, process_turn_linger=0.001) as d:
        d.execute("CREATE TABLE t(x)")
        # Applied: a second open asking for another linger is refused.
        with pytest.raises(litelane.ProgrammingError, match="other options"):
            litelane.open(path, process_turn_linger=0.002)
    with pytest.raises(litelane.ProgrammingError, match="process_turn_linger"):
        litelane.open(str(tmp_path / "x.db"), process_turn_linger="long")


def test_a_backup_restored_by_rename_while_closed_is_what_reopens(tmp_path):
    """`mv backup.db app.db` with nothing open: the next open must read the
    backup, not the old database's WAL applied to it (a WAL kept across
    close did that before persistent_wal became opt-in)."""
    import sqlite3

    app, backup = tmp_path / "app.db", tmp_path / "backup.db"
    with sqlite3.connect(backup) as b:
        b.execute("CREATE TABLE t(x)")
        b.execute("INSERT INTO t VALUES ('from the backup')")
    b.close()
    db = litelane.open(str(app))
    db.execute("CREATE TABLE t(x)")
    for i in range(50):
        db.execute("INSERT INTO t VALUES (?)", (f"old {i}",))
    db.close()
    os.replace(backup, app)
    db = litelane.open(str(app))
    assert db.query("SELECT x FROM t") == [("from the backup",)]
    db.close()


def test_a_read_that_pins_the_wal_shows_in_the_metrics_and_writers_never_wait(tmp_path):
    path = str(tmp_path / "pin.db")
    with litelane.open(path, checkpoint_after_pages=5, wal_limit_pages=20, over_limit="grow", max_read_age=None) as d:
        d.execute("CREATE TABLE t(pad BLOB)")
        d.insert_many("t", [(b"x",)] * 10)
        rows = d.iterate("SELECT pad FROM t", batch=1)
        next(rows)  # the read's snapshot stays open while rows is not done
        for _ in range(60):
            d.execute("INSERT INTO t VALUES (zeroblob(8000))")
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            over = d.metrics()["wal_over_limit"]
            if over is not None and over["reason"] == "pinned_by_read":
                break
            d.execute("INSERT INTO t VALUES (zeroblob(8000))")
            time.sleep(0.05)
        m = d.metrics()
        over = m["wal_over_limit"]
        assert over is not None and over["reason"] == "pinned_by_read", over
        assert over["wal_pages"] > over["limit_pages"] == 20
        assert over["pinned_by"]["sql"] == "SELECT pad FROM t" and over["pinned_by"]["age"] > 0
        assert m["wal_pinned_by"]["sql"] == "SELECT pad FROM t"
        assert m["wal_over_limit_count"] >= 1
        # Grow: no checkpoint held the writers.
        assert m["checkpoint_holds"] == 0 and m["checkpoint_hold_max"] == 0.0
        del rows  # the read ends: the WAL starts over at a later write
        deadline = time.monotonic() + 20
        while d.metrics()["wal_over_limit"] is not None and time.monotonic() < deadline:
            d.execute("INSERT INTO t VALUES (zeroblob(10))")
            time.sleep(0.05)
        assert d.metrics()["wal_over_limit"] is None


@pytest.mark.parametrize(
    "option,value,message",
    [
        ("over_limit", "sometimes", 'expected "grow" or "hold_writers"'),
        ("wal_limit_pages", -1, "expected pages"),
        ("checkpoint_after_pages", 2**40, "pages below 2"),
        ("max_read_age", "old", "expected seconds"),
        ("escalation_wait", -1.0, "not a duration"),
    ],
)
def test_checkpoint_options_refuse_bad_values_by_name(tmp_path, option, value, message):
    with pytest.raises(litelane.ProgrammingError, match=f"option {option}: .*{message}"):
        litelane.open(str(tmp_path / "x.db"), **{option: value})
