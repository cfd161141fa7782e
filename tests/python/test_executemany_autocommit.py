"""executemany with no transaction of the caller's (``isolation_level=None``):
``sqlite3`` commits each parameter set on its own, so a failing set leaves
the sets before it stored and committed. litelane.dbapi runs the sets in one
transaction of its own and must store the same rows: each case runs on the
standard library's sqlite3 and on litelane.dbapi in the same test, and the
rows another connection sees afterwards, the exception class and
``in_transaction`` are compared."""

import sqlite3 as std

import litelane.dbapi as dbapi
import pytest


def _sets(n, bad_at, bad):
    sets = [(i, f"v{i}") for i in range(n)]
    if bad_at is not None:
        sets[bad_at] = bad
    return sets


def _raising(n, at):
    for i in range(n):
        if i == at:
            raise KeyError("the generator failed")
        yield (i, f"v{i}")


# (name, SQL, sets factory, trigger SQL or None)
CASES = [
    ("all good", "INSERT INTO t VALUES (?, ?)", lambda: _sets(50, None, None), None),
    ("duplicate key at 0", "INSERT INTO t VALUES (?, ?)", lambda: _sets(50, 0, (7, "x")), "dup"),
    ("duplicate key at 30", "INSERT INTO t VALUES (?, ?)", lambda: _sets(50, 30, (3, "x")), None),
    ("NOT NULL at 49", "INSERT INTO t VALUES (?, ?)", lambda: _sets(50, 49, (49, None)), None),
    ("unbindable at 20", "INSERT INTO t VALUES (?, ?)", lambda: _sets(50, 20, (20, object())), None),
    ("wrong count at 10", "INSERT INTO t VALUES (?, ?)", lambda: _sets(50, 10, (10,)), None),
    ("generator raises at 25", "INSERT INTO t VALUES (?, ?)", lambda: _raising(50, 25), None),
    ("OR ROLLBACK at 30 (list)", "INSERT OR ROLLBACK INTO t VALUES (?, ?)", lambda: _sets(50, 30, (3, "x")), None),
    ("OR ABORT at 30", "INSERT OR ABORT INTO t VALUES (?, ?)", lambda: _sets(50, 30, (3, "x")), None),
    ("OR FAIL at 30", "INSERT OR FAIL INTO t VALUES (?, ?)", lambda: _sets(50, 30, (3, "x")), None),
    ("OR IGNORE", "INSERT OR IGNORE INTO t VALUES (?, ?)", lambda: _sets(50, 30, (3, "x")), None),
    (
        "trigger RAISE(ROLLBACK) at 40 (tuple)",
        "INSERT INTO t VALUES (?, ?)",
        lambda: tuple(_sets(50, 40, (40, "boom"))),
        "CREATE TRIGGER r BEFORE INSERT ON t WHEN new.v = 'boom' BEGIN SELECT RAISE(ROLLBACK, 'no'); END",
    ),
    (
        "trigger RAISE(ABORT) at 40",
        "INSERT INTO t VALUES (?, ?)",
        lambda: _sets(50, 40, (40, "boom")),
        "CREATE TRIGGER r BEFORE INSERT ON t WHEN new.v = 'boom' BEGIN SELECT RAISE(ABORT, 'no'); END",
    ),
    (
        "UPDATE failing at the last set",
        "UPDATE t SET id = ? WHERE v = ?",
        lambda: [(100 + i, f"v{i}") for i in range(20, 25)] + [(100, "v22")],
        None,
    ),
]


def _run(mod, path, sql, sets, trigger):
    extra = {} if mod is std else {"profile": "balanced"}
    con = mod.connect(path, isolation_level=None, **extra)
    con.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT NOT NULL)")
    if sql.startswith("UPDATE"):
        con.executemany("INSERT INTO t VALUES (?, ?)", [(i, f"v{i}") for i in range(20, 25)])
    if trigger and trigger != "dup":
        con.execute(trigger)
    if trigger == "dup":
        con.execute("INSERT INTO t VALUES (7, 'stored before')")
    error = None
    rowcount = None
    try:
        rowcount = con.executemany(sql, sets).rowcount
    except Exception as e:  # compared by class name
        error = type(e).__name__
    in_txn = con.in_transaction
    con.close()
    check = std.connect(path)
    rows = check.execute("SELECT id, v FROM t ORDER BY id").fetchall()
    check.close()
    return error, in_txn, rows, rowcount


@pytest.mark.parametrize("name,sql,make,trigger", CASES, ids=[c[0] for c in CASES])
def test_the_same_rows_as_sqlite3(tmp_path, name, sql, make, trigger):
    want = _run(std, str(tmp_path / "std.db"), sql, make(), trigger)
    got = _run(dbapi, str(tmp_path / "ll.db"), sql, make(), trigger)
    assert got == want, name


def test_a_failure_that_ends_the_transaction_with_a_one_shot_iterator_says_nothing_was_stored(tmp_path):
    """The one case litelane cannot rebuild: the sets of a generator are
    gone once run, and ``OR ROLLBACK`` undid them. The error says so
    (``sqlite3`` would have kept the sets before the failing one)."""
    con = dbapi.connect(str(tmp_path / "g.db"), isolation_level=None, profile="balanced")
    con.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT NOT NULL)")
    sets = ((i % 30, f"v{i}") for i in range(50))  # set 30 repeats key 0
    with pytest.raises(dbapi.IntegrityError) as e:
        con.executemany("INSERT OR ROLLBACK INTO t VALUES (?, ?)", sets)
    assert any("none of its parameter sets were stored" in n for n in e.value.__notes__)
    assert con.execute("SELECT count(*) FROM t").fetchone() == (0,)
    assert not con.in_transaction
    con.close()
