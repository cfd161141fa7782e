"""A connection's state is its own (issue 40): two connections to one file,
one setting a connection pragma, attaching a database, creating a TEMP
table or registering a function, each run on ``sqlite3`` and on
``litelane.dbapi`` in the same run; both must give the same answers.

Before, every ``litelane.dbapi`` connection to a file shared one SQLite
writer: ``PRAGMA foreign_keys=OFF`` on one connection let another's orphan
insert through, ``query_only`` on a read connection failed the write
connection, a second ``ATTACH`` of one alias failed, and a function
registered on one connection replaced another's of the same name."""

import os
import threading

import litelane.dbapi as dbapi
import pytest
from two_modules import both, outcome


def fresh(tmp_path, module, name="app.db"):
    path = str(tmp_path / f"{module.__name__}-{name}")
    for suffix in ("", "-wal", "-shm", "-lane"):
        if os.path.exists(path + suffix):
            os.remove(path + suffix)
    return path


def test_foreign_keys_stay_per_connection(tmp_path):
    def run(m, tmp):
        path = fresh(tmp, m)
        a = m.connect(path, isolation_level=None)
        a.execute("PRAGMA foreign_keys = ON")
        a.execute("CREATE TABLE p(id INTEGER PRIMARY KEY)")
        a.execute("CREATE TABLE c(pid REFERENCES p(id))")
        b = m.connect(path, isolation_level=None)
        b.execute("PRAGMA foreign_keys = OFF")
        out = (
            outcome(a, "PRAGMA foreign_keys"),
            outcome(b, "PRAGMA foreign_keys"),
            outcome(a, "INSERT INTO c VALUES (5)"),
            outcome(b, "INSERT INTO c VALUES (6)"),
            outcome(a, "SELECT pid FROM c"),
        )
        a.close()
        b.close()
        return out

    out = both(run, tmp_path)
    assert out[2] == ("IntegrityError", "FOREIGN KEY constraint failed")  # A still enforces


def test_query_only_on_a_read_connection_leaves_the_write_connection_writing(tmp_path):
    def run(m, tmp):
        path = fresh(tmp, m)
        w = m.connect(path, isolation_level=None)
        w.execute("CREATE TABLE t(x)")
        r = m.connect(path, isolation_level=None)
        r.execute("PRAGMA query_only = 1")
        out = (
            outcome(w, "INSERT INTO t VALUES (1)"),
            outcome(r, "INSERT INTO t VALUES (2)"),
            outcome(r, "SELECT x FROM t"),
        )
        w.close()
        r.close()
        return out

    out = both(run, tmp_path)
    assert out[0] == [] and out[1][0] == "OperationalError"


def test_each_connection_attaches_its_own_database_under_one_alias(tmp_path):
    def run(m, tmp):
        path = fresh(tmp, m)
        extras = []
        for n in (1, 2):
            extra = fresh(tmp, m, f"extra{n}.db")
            e = m.connect(extra)
            e.execute("CREATE TABLE t(v)")
            e.execute("INSERT INTO t VALUES (?)", (n,))
            e.commit()
            e.close()
            extras.append(extra)
        x = m.connect(path)
        y = m.connect(path)
        out = [
            outcome(x, "ATTACH DATABASE ? AS aux", (extras[0],)),
            outcome(y, "ATTACH DATABASE ? AS aux", (extras[1],)),
            outcome(x, "SELECT v FROM aux.t"),
            outcome(y, "SELECT v FROM aux.t"),
            outcome(x, "DETACH DATABASE aux"),
            outcome(x, "SELECT name FROM pragma_database_list ORDER BY seq"),
            outcome(y, "SELECT name FROM pragma_database_list ORDER BY seq"),
        ]
        x.close()
        y.close()
        return out

    out = both(run, tmp_path)
    assert out[2] == [(1,)] and out[3] == [(2,)]


def test_a_temp_table_is_seen_by_its_connection_alone_in_and_out_of_transactions(tmp_path):
    def run(m, tmp):
        path = fresh(tmp, m)
        a = m.connect(path)
        b = m.connect(path)
        a.execute("CREATE TEMP TABLE scratch(x)")
        a.execute("INSERT INTO scratch VALUES (1)")
        a.commit()
        out = (outcome(a, "SELECT x FROM scratch"), outcome(b, "SELECT x FROM scratch"))
        a.close()
        b.close()
        return out

    out = both(run, tmp_path)
    assert out[0] == [(1,)] and out[1][0] == "OperationalError"


def test_a_pragma_holds_for_every_read_of_its_connection_while_others_write(tmp_path):
    """case_sensitive_like set on one connection: the same SELECT gives the
    same answer every time, wherever the read runs (before: 1 or 2 rows,
    depending on which reader it landed on)."""

    def run(m, tmp):
        path = fresh(tmp, m)
        a = m.connect(path, check_same_thread=False)
        a.execute("PRAGMA journal_mode = WAL")  # readers beside a writer, for both
        a.execute("CREATE TABLE t(s)")
        a.executemany("INSERT INTO t VALUES (?)", [("abc",), ("ABC",)])
        a.commit()
        a.execute("PRAGMA case_sensitive_like = 1")
        stop = threading.Event()

        def write():
            w = m.connect(path, timeout=30)
            while not stop.is_set():
                w.execute("INSERT INTO t VALUES ('zzz')")
                w.commit()
            w.close()

        t = threading.Thread(target=write)
        t.start()
        try:
            counts = {len(a.execute("SELECT s FROM t WHERE s LIKE 'a%'").fetchall()) for _ in range(300)}
        finally:
            stop.set()
            t.join()
        a.close()
        return counts

    assert both(run, tmp_path) == {1}


def test_a_function_name_registered_on_two_connections_keeps_each_ones_function(tmp_path):
    def run(m, tmp):
        path = fresh(tmp, m)
        a = m.connect(path)
        b = m.connect(path)
        a.create_function("f", 1, lambda x: x + 1)
        b.create_function("f", 1, lambda x: x * 100)
        out = (outcome(a, "SELECT f(2)"), outcome(b, "SELECT f(2)"))
        a.close()
        b.close()
        return out

    assert both(run, tmp_path) == ([(3,)], [(200,)])


def test_foreign_keys_inside_a_transaction_is_a_no_op_as_in_sqlite(tmp_path):
    def run(m, tmp):
        path = fresh(tmp, m)
        a = m.connect(path)
        a.execute("CREATE TABLE t(x)")
        before = a.execute("PRAGMA foreign_keys").fetchone()[0]
        a.execute("INSERT INTO t VALUES (1)")  # opens the transaction
        out = (outcome(a, f"PRAGMA foreign_keys = {1 - before}"), a.in_transaction)
        a.commit()
        out += (a.execute("PRAGMA foreign_keys").fetchone()[0] == before,)
        a.close()
        return out

    assert both(run, tmp_path) == ([], True, True)


def test_other_connection_state_inside_a_transaction_of_a_shared_connection_is_refused(db_path):
    """The one deliberate difference: a connection still sharing its engine
    cannot move to its own inside a transaction, so it says so (sqlite3
    applies it)."""
    con = dbapi.connect(db_path)
    con.execute("CREATE TABLE t(x)")
    con.execute("INSERT INTO t VALUES (1)")
    with pytest.raises(dbapi.OperationalError, match="inside a transaction"):
        con.execute("PRAGMA query_only = 1")
    assert con.in_transaction  # the transaction is untouched
    con.commit()
    con.execute("PRAGMA query_only = 1")  # outside one it works
    with pytest.raises(dbapi.OperationalError, match="readonly"):
        con.execute("INSERT INTO t VALUES (2)")
    con.close()


def test_a_connection_that_parts_keeps_its_functions_and_writes_in_the_queue(db_path):
    """Moving to an engine of its own takes the connection's functions and
    trace along, and its writes still take the file's turn with the others'
    (no "database is locked" between them)."""
    a = dbapi.connect(db_path, check_same_thread=False, timeout=30)
    traced = []
    a.create_function("twice", 1, lambda x: 2 * x)
    a.set_trace_callback(traced.append)
    a.execute("CREATE TABLE t(x)")
    a.commit()
    assert not a.engine.private
    a.execute("PRAGMA recursive_triggers = ON")
    assert a.engine.private
    assert a.execute("SELECT twice(21)").fetchone() == (42,)
    assert "SELECT twice(21)" in traced
    b = dbapi.connect(db_path, check_same_thread=False, timeout=30)
    errors = []

    def write(con, base):
        try:
            for i in range(200):
                con.execute("INSERT INTO t VALUES (?)", (base + i,))
                con.commit()
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=write, args=(c, k * 1000)) for k, c in enumerate((a, b))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert b.execute("SELECT count(*) FROM t").fetchone() == (400,)
    a.close()
    b.close()


@pytest.mark.parametrize("target", [":memory:", "file:state-mem?mode=memory&cache=shared"])
def test_in_memory_connections_set_their_own_state(target):
    """A private in-memory database is its connection's alone already, and
    a shared one by URI parts onto the same database (sqlite-utils' suite
    set a pragma on ':memory:' and failed with 'cannot part')."""
    uri = target.startswith("file:")
    a = dbapi.connect(target, uri=uri)
    b = dbapi.connect(target, uri=uri)
    a.execute("CREATE TABLE t(x)")
    a.execute("INSERT INTO t VALUES (1)")
    a.commit()
    a.execute("PRAGMA case_sensitive_like = 1")
    assert a.execute("SELECT count(*) FROM t").fetchone() == (1,)
    assert a.execute("SELECT 'a' LIKE 'A'").fetchone() == (0,)
    assert b.execute("SELECT 'a' LIKE 'A'").fetchone() == (1,)
    if uri:  # one database: b sees a's rows
        assert b.execute("SELECT count(*) FROM t").fetchone() == (1,)
    a.close()
    b.close()
