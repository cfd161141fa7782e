"""Transaction control is found where SQLite finds it (issue 40): behind
whitespace, comments, empty statements and a byte-order mark. Each hostile
statement runs on ``sqlite3`` and on ``litelane.dbapi`` in the same run and
must leave the same state: in a transaction or not, and the same rows after
a following insert and ``rollback()`` (before, ``"; begin"`` opened no
transaction under litelane and the insert survived the rollback)."""

import sqlite3

import litelane.dbapi as dbapi
import pytest

STATEMENTS = [
    "begin",
    "; begin",
    ";;/* x */ ; begin",
    "\ufeffbegin",
    "\ufeff;begin",
    "\ufeff \t-- c\n begin immediate",
    " -- c\n begin",
    "/* a */ /* b */BEGIN DEFERRED",
    "\t\f\r\nBEGIN EXCLUSIVE;",
    "; savepoint s",
    "\ufeffsavepoint s",
    "; insert into t values (5)",
    "\ufeffinsert into t values (5)",
    "-- c\ninsert into t values (5)",
    "/* c */ replace into t values (6)",
    ";",
    "; ;",
    "-- only a comment",
    "select 1",
    "; select 1",
]

MODES = [("legacy", {}), ("autocommit", {"isolation_level": None})]


def _run(module, path, stmt, kwargs):
    """What running ``stmt`` leaves: in_transaction after it, and the rows
    after one more insert and a rollback; or the error's class name."""
    con = module.connect(path, **kwargs)
    try:
        con.execute("CREATE TABLE IF NOT EXISTS t(x)")
        con.execute("DELETE FROM t")
        if con.in_transaction:
            con.commit()
        try:
            con.execute(stmt)
        except module.Error as e:
            return ("error", type(e).__name__)
        began = con.in_transaction
        con.execute("INSERT INTO t VALUES (1)")
        con.rollback()
        rows = sorted(r[0] for r in con.execute("SELECT x FROM t"))
        return (began, rows)
    finally:
        con.close()


@pytest.mark.parametrize("mode,kwargs", MODES, ids=[m[0] for m in MODES])
@pytest.mark.parametrize("stmt", STATEMENTS)
def test_a_statement_leaves_the_transaction_state_sqlite3_leaves(tmp_path, stmt, mode, kwargs):
    want = _run(sqlite3, str(tmp_path / "stock.db"), stmt, kwargs)
    got = _run(dbapi, str(tmp_path / "lane.db"), stmt, kwargs)
    assert got == want
