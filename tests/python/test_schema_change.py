"""A cached statement follows schema changes exactly as SQLite does: after
ALTER TABLE (or DROP/CREATE), `SELECT *` returns the new columns on the
writer, on every reader, through another connection and from another process.
Each test caches the statement first, so a stale cached shape would show."""

import subprocess
import sys
import threading

import litelane
import litelane.dbapi as dbapi
import pytest


def _cache_on_every_reader(run, threads=6, times=20):
    """Runs `run` from several threads at once so that several readers of
    the pool prepare (and cache) the statement."""
    barrier = threading.Barrier(threads)
    errors = []

    def work():
        try:
            barrier.wait()
            for _ in range(times):
                run()
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    ts = [threading.Thread(target=work) for _ in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors, errors


def _one_row_cached_on_every_reader(db_path):
    """An autocommit connection, usable from any thread, to a new table t(a)
    holding the row (1,), whose `SELECT * FROM t` every reader has cached."""
    con = dbapi.connect(db_path, isolation_level=None, check_same_thread=False)
    con.execute("CREATE TABLE t(a)")
    con.execute("INSERT INTO t VALUES (1)")
    _cache_on_every_reader(lambda: con.execute("SELECT * FROM t").fetchall())
    return con


@pytest.mark.parametrize("profile", ["safe", "balanced"])
def test_dbapi_select_star_after_add_column_one_connection(db_path, profile):
    con = dbapi.connect(db_path, profile=profile, isolation_level=None)
    con.execute("CREATE TABLE t(a)")
    con.execute("INSERT INTO t VALUES (1)")
    assert con.execute("SELECT * FROM t").fetchall() == [(1,)]
    con.execute("ALTER TABLE t ADD COLUMN b DEFAULT 'x'")
    cur = con.execute("SELECT * FROM t")
    assert cur.fetchall() == [(1, "x")]
    assert [d[0] for d in cur.description] == ["a", "b"]
    con.close()


def test_dbapi_select_star_inside_a_transaction_runs_on_the_writer(db_path):
    con = dbapi.connect(db_path)
    con.execute("CREATE TABLE t(a)")
    con.execute("INSERT INTO t VALUES (1)")  # legacy mode: opens a transaction
    assert con.in_transaction
    assert con.execute("SELECT * FROM t").fetchall() == [(1,)]
    con.execute("ALTER TABLE t ADD COLUMN b DEFAULT 2")
    cur = con.execute("SELECT * FROM t")
    assert [d[0] for d in cur.description] == ["a", "b"]
    assert cur.fetchall() == [(1, 2)]
    con.commit()
    con.close()


def test_dbapi_every_reader_sees_the_new_shape(db_path):
    con = _one_row_cached_on_every_reader(db_path)
    con.execute("ALTER TABLE t ADD COLUMN b DEFAULT 2")
    seen = set()

    def check():
        cur = con.execute("SELECT * FROM t")
        seen.add((tuple(d[0] for d in cur.description), tuple(cur.fetchall())))

    _cache_on_every_reader(check)
    assert seen == {(("a", "b"), ((1, 2),))}
    con.close()


def test_dbapi_drop_and_recreate_with_other_columns_from_another_connection(db_path):
    a = dbapi.connect(db_path, isolation_level=None)
    b = dbapi.connect(db_path, isolation_level=None)
    a.execute("CREATE TABLE t(x, y)")
    a.execute("INSERT INTO t VALUES (1, 2)")
    assert b.execute("SELECT * FROM t").fetchall() == [(1, 2)]
    a.execute("DROP TABLE t")
    a.execute("CREATE TABLE t(p, q, r)")
    a.execute("INSERT INTO t VALUES ('p', 'q', 'r')")
    cur = b.execute("SELECT * FROM t")
    assert [d[0] for d in cur.description] == ["p", "q", "r"]
    assert cur.fetchall() == [("p", "q", "r")]
    a.close()
    b.close()


def test_dbapi_schema_changed_by_another_process(db_path):
    con = _one_row_cached_on_every_reader(db_path)
    code = (
        "import litelane.dbapi as s, sys\n"
        "c = s.connect(sys.argv[1], isolation_level=None)\n"
        "c.execute('ALTER TABLE t ADD COLUMN b DEFAULT 7')\n"
        "c.close()\n"
    )
    subprocess.run([sys.executable, "-c", code, db_path], check=True, timeout=60)
    rows = set()
    _cache_on_every_reader(lambda: rows.add(tuple(con.execute("SELECT * FROM t").fetchall())))
    assert rows == {((1, 7),)}
    con.close()


def test_native_query_and_iterate_after_add_column(db_path):
    with litelane.open(db_path) as db:
        db.execute("CREATE TABLE t(a)")
        db.execute("INSERT INTO t VALUES (1)")
        _cache_on_every_reader(lambda: db.query("SELECT * FROM t", dicts=True))
        with db.transaction() as tx:
            assert tx.query("SELECT * FROM t") == [(1,)]
            tx.execute("ALTER TABLE t ADD COLUMN b DEFAULT 'new'")
            assert tx.query("SELECT * FROM t", dicts=True) == [{"a": 1, "b": "new"}]
        results = []
        _cache_on_every_reader(lambda: results.append(db.query("SELECT * FROM t", dicts=True)))
        assert all(r == [{"a": 1, "b": "new"}] for r in results)
        it = db.iterate("SELECT * FROM t", dicts=True)
        assert list(it) == [{"a": 1, "b": "new"}]
        assert list(it.columns) == ["a", "b"]


# PRAGMAs that look a table or index up by name when the statement is
# prepared: on a connection whose schema predates the change, SQLite finds
# nothing and compiles a statement that returns no rows without checking the
# schema (one `sqlite3` connection never sees this for its own changes).
INTROSPECTION = [
    ("PRAGMA index_list(u)", [(0, "ui", 0, "c", 0)]),
    ("PRAGMA index_info(ui)", [(0, 1, "b")]),
    ("PRAGMA index_xinfo(ui)", [(0, 1, "b", 0, "BINARY", 1), (1, -1, None, 0, "BINARY", 0)]),
    ("PRAGMA table_info(u)", [(0, "a", "", 0, None, 0), (1, "b", "", 0, None, 0)]),
    ("PRAGMA table_xinfo(u)", [(0, "a", "", 0, None, 0, 0), (1, "b", "", 0, None, 0, 0)]),
    ("PRAGMA foreign_key_list(u)", [(0, 0, "t", "a", "x", "NO ACTION", "NO ACTION", "NONE")]),
]


@pytest.mark.parametrize("pragma,after", INTROSPECTION, ids=[p for p, _ in INTROSPECTION])
def test_dbapi_introspection_pragmas_see_the_connections_own_schema_change_on_every_reader(db_path, pragma, after):
    con = dbapi.connect(db_path, isolation_level=None, check_same_thread=False)
    holder = dbapi.connect(db_path, isolation_level=None)
    con.execute("CREATE TABLE t(x PRIMARY KEY)")
    # While another connection holds the writer, con's reads run on the
    # pool's readers; every reader caches the pragma while u does not exist.
    holder.execute("BEGIN IMMEDIATE")
    _cache_on_every_reader(lambda: con.execute(pragma).fetchall())
    assert con.execute(pragma).fetchall() == []
    holder.execute("COMMIT")
    con.execute("CREATE TABLE u(a REFERENCES t(x), b)")
    con.execute("CREATE INDEX ui ON u(b)")
    holder.execute("BEGIN IMMEDIATE")
    seen = []
    _cache_on_every_reader(lambda: seen.append(con.execute(pragma).fetchall()))
    holder.execute("COMMIT")
    assert seen and all(rows == after for rows in seen), {repr(r) for r in seen}
    holder.close()
    con.close()
