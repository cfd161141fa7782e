"""executemany of many parameter sets inside a transaction: litelane.dbapi
converts the sets a chunk at a time while another thread inserts the chunk
before (a pipeline). What a program sees must be what sqlite3 shows: rows in
the order given, a failing set stopping the run with the sets before it
applied in the open transaction, rowcount the sum, lastrowid unchanged,
Python callables (the sets' generator, adapters, SQL functions) run as
usual. Each test runs on the standard library's sqlite3 and on
litelane.dbapi, with more sets than one chunk (4,096)."""

import sqlite3 as std

import litelane.dbapi as dbapi
import pytest

N = 10_000  # more than two chunks


@pytest.fixture(params=["sqlite3", "litelane"])
def mod(request):
    return std if request.param == "sqlite3" else dbapi


def connect(mod, path):
    if mod is std:
        con = std.connect(path)
        con.execute("PRAGMA journal_mode=WAL")
        return con
    return dbapi.connect(path, profile="balanced")


def table(con):
    con.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT NOT NULL)")
    con.commit()


def test_every_row_is_stored_in_order_and_counted(mod, db_path):
    con = connect(mod, db_path)
    table(con)
    cur = con.executemany("INSERT INTO t VALUES (?, ?)", ((i, f"v{i}") for i in range(N)))
    assert cur.rowcount == N
    assert con.in_transaction
    con.commit()
    rows = con.execute("SELECT id, v FROM t ORDER BY rowid").fetchall()
    assert rows == [(i, f"v{i}") for i in range(N)]


@pytest.mark.parametrize("bad_at", [5, 4_095, 4_096, 9_000, N - 1])
def test_a_set_that_cannot_be_bound_stops_it_with_the_sets_before_applied(mod, db_path, bad_at):
    con = connect(mod, db_path)
    table(con)
    sets = [(i, f"v{i}") for i in range(N)]
    sets[bad_at] = (bad_at, object())  # no adapter: cannot be bound
    with pytest.raises(mod.ProgrammingError):
        con.executemany("INSERT INTO t VALUES (?, ?)", sets)
    # Still in the transaction, with exactly the sets before the bad one.
    assert con.in_transaction
    assert con.execute("SELECT count(*), coalesce(max(id), -1) FROM t").fetchone() == (bad_at, bad_at - 1)
    con.rollback()
    assert con.execute("SELECT count(*) FROM t").fetchone() == (0,)


@pytest.mark.parametrize("dup_at", [3, 4_096, 9_999])
def test_a_constraint_failure_stops_it_with_the_sets_before_applied(mod, db_path, dup_at):
    con = connect(mod, db_path)
    table(con)
    sets = [(i, f"v{i}") for i in range(N)]
    sets[dup_at] = (0, "again")  # the primary key of the first set
    with pytest.raises(mod.IntegrityError):
        con.executemany("INSERT INTO t VALUES (?, ?)", sets)
    assert con.execute("SELECT count(*) FROM t").fetchone() == (dup_at,)
    con.commit()
    assert con.execute("SELECT count(*) FROM t").fetchone() == (dup_at,)


def test_a_generator_that_raises_stops_it_with_the_sets_before_applied(mod, db_path):
    con = connect(mod, db_path)
    table(con)

    def sets():
        for i in range(N):
            if i == 7_000:
                raise KeyError("from the generator")
            yield (i, f"v{i}")

    with pytest.raises(KeyError):
        con.executemany("INSERT INTO t VALUES (?, ?)", sets())
    assert con.execute("SELECT count(*) FROM t").fetchone() == (7_000,)


def test_sql_functions_and_adapters_run_while_the_sets_are_inserted(mod, db_path):
    con = connect(mod, db_path)
    table(con)
    calls = []

    def tag(v):
        calls.append(v)
        return f"<{v}>"

    class Point:
        def __init__(self, x):
            self.x = x

    mod.register_adapter(Point, lambda p: f"p{p.x}")
    try:
        con.create_function("tag", 1, tag)
        con.executemany("INSERT INTO t VALUES (?, tag(?))", ((i, Point(i)) for i in range(N)))
    finally:
        mod.adapters.pop((Point, mod.PrepareProtocol), None)
    con.commit()
    assert len(calls) == N
    assert con.execute("SELECT v FROM t WHERE id = 9999").fetchone() == ("<p9999>",)


def test_an_sql_function_that_raises_stops_it_with_the_sets_before_applied(mod, db_path):
    """The function runs where the rows are inserted (litelane: the
    pipeline's other thread); its exception still reaches the caller, and
    the sets before the failing one stay in the open transaction."""
    con = connect(mod, db_path)
    table(con)

    def check(i):
        if i == 6_000:
            raise ValueError("no 6000")
        return f"v{i}"

    con.create_function("guard", 1, check)
    with pytest.raises(mod.OperationalError):
        con.executemany("INSERT INTO t VALUES (?, guard(?))", ((i, i) for i in range(N)))
    assert con.in_transaction
    assert con.execute("SELECT count(*), max(id) FROM t").fetchone() == (6_000, 5_999)
