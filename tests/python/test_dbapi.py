"""litelane.dbapi against the standard library's sqlite3 semantics."""

import datetime
import decimal
import sqlite3
import threading

import litelane.dbapi as dbapi
import pytest


def make_table(path, sql="CREATE TABLE t(id INTEGER PRIMARY KEY, name TEXT UNIQUE, n INTEGER)"):
    con = dbapi.connect(path)
    con.execute(sql)
    con.close()


# --- module attributes ------------------------------------------------------


def test_module_attributes_that_sqlalchemy_and_programs_probe():
    assert dbapi.apilevel == "2.0"
    assert dbapi.paramstyle == "qmark"
    assert dbapi.threadsafety in (1, 2, 3)
    assert dbapi.sqlite_version_info >= (3, 35, 0)
    assert ".".join(map(str, dbapi.sqlite_version_info)) == dbapi.sqlite_version
    assert dbapi.version_info == (2, 6, 0)
    assert callable(dbapi.register_adapter) and callable(dbapi.register_converter)
    assert dbapi.complete_statement("select 1;")
    assert not dbapi.complete_statement("select ';'")
    assert not dbapi.complete_statement("select 1 /* ; */")
    for name in (
        "Warning",
        "Error",
        "InterfaceError",
        "DatabaseError",
        "DataError",
        "OperationalError",
        "IntegrityError",
        "InternalError",
        "ProgrammingError",
        "NotSupportedError",
    ):
        assert issubclass(getattr(dbapi, name), Exception)
    assert issubclass(dbapi.IntegrityError, dbapi.DatabaseError)
    assert issubclass(dbapi.DatabaseError, dbapi.Error)


# --- basic statements -------------------------------------------------------


def test_roundtrip_of_every_type(db_path):
    con = dbapi.connect(db_path)
    con.execute("CREATE TABLE v(a, b, c, d, e)")
    values = (None, 2**63 - 1, 1.5, "héllo \u0000 nul", b"\x00\xffbytes")
    con.execute("INSERT INTO v VALUES (?,?,?,?,?)", values)
    con.execute("INSERT INTO v VALUES (?,?,?,?,?)", (True, -(2**63), float("inf"), "", bytearray(b"ba")))
    con.execute("INSERT INTO v VALUES (?,?,?,?,?)", (None, 0, 0.0, "x", memoryview(b"mv")))
    rows = con.execute("SELECT * FROM v ORDER BY rowid").fetchall()
    assert rows[0] == values
    assert rows[1] == (1, -(2**63), float("inf"), "", b"ba")
    assert rows[2][4] == b"mv"
    con.close()


def test_named_and_qmark_parameters(db_path):
    make_table(db_path)
    con = dbapi.connect(db_path)
    con.execute("INSERT INTO t(name, n) VALUES (:name, :n)", {"name": "a", "n": 1})
    con.execute("INSERT INTO t(name, n) VALUES (@name, $n)", {"name": "b", "n": 2})
    con.execute("INSERT INTO t(name, n) VALUES (?2, ?1)", (3, "c"))
    assert con.execute("SELECT name, n FROM t ORDER BY n").fetchall() == [("a", 1), ("b", 2), ("c", 3)]
    con.commit()


def test_description_rowcount_lastrowid(db_path):
    make_table(db_path)
    con = dbapi.connect(db_path)
    cur = con.cursor()
    cur.execute("INSERT INTO t(name, n) VALUES ('a', 1)")
    assert cur.rowcount == 1 and cur.lastrowid == 1 and cur.description is None
    cur.execute("INSERT INTO t(name, n) VALUES ('b', 2)")
    assert cur.lastrowid == 2
    cur.execute("UPDATE t SET n = n + 1")
    assert cur.rowcount == 2
    cur.execute("SELECT id AS ident, name FROM t")
    assert [d[0] for d in cur.description] == ["ident", "name"]
    assert cur.rowcount == -1
    assert cur.fetchone() == (1, "a")
    assert cur.fetchmany(5) == [(2, "b")]
    assert cur.fetchall() == []
    assert cur.fetchone() is None
    cur.executemany("INSERT INTO t(name, n) VALUES (?, ?)", [("c", 3), ("d", 4), ("e", 5)])
    assert cur.rowcount == 3
    assert con.total_changes == 2 + 2 + 3
    con.commit()


def test_iteration_and_row_factory(db_path):
    make_table(db_path)
    con = dbapi.connect(db_path)
    con.executemany("INSERT INTO t(name, n) VALUES (?, ?)", [(f"n{i}", i) for i in range(5)])
    con.commit()
    assert [r[0] for r in con.execute("SELECT n FROM t ORDER BY n")] == [0, 1, 2, 3, 4]
    con.row_factory = dbapi.Row
    row = con.execute("SELECT name, n FROM t WHERE n = 3").fetchone()
    assert row["NAME"] == "n3" and row[1] == 3 and row.keys() == ["name", "n"]
    con.row_factory = lambda cur, r: {d[0]: v for d, v in zip(cur.description, r, strict=True)}
    assert con.execute("SELECT n FROM t WHERE n = 4").fetchone() == {"n": 4}
    con.row_factory = None
    con.text_factory = bytes
    assert con.execute("SELECT name FROM t WHERE n = 1").fetchone() == (b"n1",)


def test_adapters_and_default_datetime_adapters(db_path):
    con = dbapi.connect(db_path)
    con.execute("CREATE TABLE d(x)")

    class Point:
        def __init__(self, x, y):
            self.x, self.y = x, y

    dbapi.register_adapter(Point, lambda p: f"{p.x};{p.y}")
    con.execute("INSERT INTO d VALUES (?)", (Point(1, 2),))
    con.execute("INSERT INTO d VALUES (?)", (datetime.date(2024, 1, 2),))
    con.execute("INSERT INTO d VALUES (?)", (datetime.datetime(2024, 1, 2, 3, 4, 5),))
    assert [r[0] for r in con.execute("SELECT x FROM d ORDER BY rowid")] == ["1;2", "2024-01-02", "2024-01-02 03:04:05"]
    con.commit()


# --- transactions: the standard library's rules -----------------------------


def test_legacy_implicit_begin_before_dml_and_rollback(db_path):
    make_table(db_path)
    con = dbapi.connect(db_path)
    other = dbapi.connect(db_path)
    assert not con.in_transaction
    con.execute("INSERT INTO t(name, n) VALUES ('a', 1)")
    assert con.in_transaction
    # the transaction reads its own write; another connection does not see it
    assert con.execute("SELECT count(*) FROM t").fetchone() == (1,)
    assert other.execute("SELECT count(*) FROM t").fetchone() == (0,)
    con.rollback()
    assert not con.in_transaction
    assert con.execute("SELECT count(*) FROM t").fetchone() == (0,)
    con.execute("INSERT INTO t(name, n) VALUES ('b', 2)")
    con.commit()
    assert other.execute("SELECT name FROM t").fetchall() == [("b",)]


def test_select_and_ddl_do_not_open_a_transaction(db_path):
    con = dbapi.connect(db_path)
    con.execute("CREATE TABLE x(a)")
    assert not con.in_transaction
    con.execute("SELECT * FROM x").fetchall()
    assert not con.in_transaction


def test_close_without_commit_loses_the_transaction(db_path):
    make_table(db_path)
    con = dbapi.connect(db_path)
    con.execute("INSERT INTO t(name, n) VALUES ('a', 1)")
    con.close()
    con = dbapi.connect(db_path)
    assert con.execute("SELECT count(*) FROM t").fetchone() == (0,)


def test_context_manager_commits_or_rolls_back(db_path):
    make_table(db_path)
    con = dbapi.connect(db_path)
    with con:
        con.execute("INSERT INTO t(name, n) VALUES ('a', 1)")
    with pytest.raises(ZeroDivisionError):
        with con:
            con.execute("INSERT INTO t(name, n) VALUES ('b', 2)")
            raise ZeroDivisionError("rolls the transaction back")
    assert con.execute("SELECT name FROM t").fetchall() == [("a",)]


def test_isolation_level_none_is_autocommit(db_path):
    make_table(db_path)
    con = dbapi.connect(db_path, isolation_level=None)
    other = dbapi.connect(db_path)
    con.execute("INSERT INTO t(name, n) VALUES ('a', 1)")
    assert not con.in_transaction
    assert other.execute("SELECT count(*) FROM t").fetchone() == (1,)
    con.execute("BEGIN")
    assert con.in_transaction
    con.execute("INSERT INTO t(name, n) VALUES ('b', 2)")
    assert other.execute("SELECT count(*) FROM t").fetchone() == (1,)
    con.execute("COMMIT")
    assert other.execute("SELECT count(*) FROM t").fetchone() == (2,)
    with pytest.raises(dbapi.OperationalError, match="no transaction is active"):
        con.execute("COMMIT")


def test_autocommit_attribute_as_in_python_312(db_path):
    make_table(db_path)
    con = dbapi.connect(db_path, autocommit=True)
    other = dbapi.connect(db_path)
    con.execute("INSERT INTO t(name, n) VALUES ('a', 1)")
    assert other.execute("SELECT count(*) FROM t").fetchone() == (1,)
    con.autocommit = False
    assert con.in_transaction
    con.execute("INSERT INTO t(name, n) VALUES ('b', 2)")
    assert other.execute("SELECT count(*) FROM t").fetchone() == (1,)
    con.commit()
    assert other.execute("SELECT count(*) FROM t").fetchone() == (2,)
    con.execute("DELETE FROM t")
    con.close()  # autocommit=False: close rolls back
    assert other.execute("SELECT count(*) FROM t").fetchone() == (2,)
    with pytest.raises(ValueError):
        dbapi.connect(db_path, autocommit="yes")


def test_explicit_begin_twice_is_an_error_and_savepoints_work(db_path):
    make_table(db_path)
    con = dbapi.connect(db_path, isolation_level=None)
    con.execute("BEGIN")
    with pytest.raises(dbapi.OperationalError, match="within a transaction"):
        con.execute("BEGIN")
    con.execute("INSERT INTO t(name, n) VALUES ('a', 1)")
    con.execute("SAVEPOINT sp")
    con.execute("INSERT INTO t(name, n) VALUES ('b', 2)")
    con.execute("ROLLBACK TO sp")
    con.execute("RELEASE sp")
    con.execute("COMMIT")
    assert con.execute("SELECT name FROM t").fetchall() == [("a",)]
    # a savepoint outside a transaction opens one; releasing it commits
    con.execute("SAVEPOINT outer_sp")
    assert con.in_transaction
    con.execute("INSERT INTO t(name, n) VALUES ('c', 3)")
    con.execute("RELEASE SAVEPOINT outer_sp")
    assert not con.in_transaction
    assert dbapi.connect(db_path).execute("SELECT count(*) FROM t").fetchone() == (2,)


def test_executescript_commits_first_and_runs_everything(db_path):
    con = dbapi.connect(db_path)
    con.execute("CREATE TABLE a(x)")
    con.execute("INSERT INTO a VALUES (1)")
    con.executescript("""
        BEGIN;
        CREATE TABLE b(y);
        INSERT INTO b VALUES ('it''s; fine');
        INSERT INTO a VALUES (2);
        COMMIT;
    """)
    assert not con.in_transaction
    other = dbapi.connect(db_path)
    assert other.execute("SELECT count(*) FROM a").fetchone() == (2,)
    assert other.execute("SELECT y FROM b").fetchone() == ("it's; fine",)


def test_connections_to_one_file_share_one_engine(db_path, tmp_path):
    a = dbapi.connect(db_path)
    b = dbapi.connect(str(tmp_path / "." / "test.db"))
    c = dbapi.connect(str(tmp_path / "other.db"))
    assert a.engine.same_engine(b.engine)
    assert not a.engine.same_engine(c.engine)
    m1 = dbapi.connect(":memory:")
    m2 = dbapi.connect(":memory:")
    assert not m1.engine.same_engine(m2.engine)
    with pytest.raises(dbapi.ProgrammingError, match="other options"):
        dbapi.connect(db_path, profile="balanced")


def test_check_same_thread(db_path):
    con = dbapi.connect(db_path)
    errors = []

    def use():
        try:
            con.execute("SELECT 1")
        except dbapi.ProgrammingError as e:
            errors.append(e)

    t = threading.Thread(target=use)
    t.start()
    t.join()
    assert len(errors) == 1 and "same thread" in str(errors[0])
    shared = dbapi.connect(db_path, check_same_thread=False)
    out = []
    t = threading.Thread(target=lambda: out.append(shared.execute("SELECT 7").fetchone()))
    t.start()
    t.join()
    assert out == [(7,)]


def test_same_thread_second_connection_write_fails_fast_instead_of_hanging(db_path):
    make_table(db_path)
    a = dbapi.connect(db_path)
    b = dbapi.connect(db_path)
    a.execute("INSERT INTO t(name, n) VALUES ('a', 1)")  # a holds the writer
    with pytest.raises(dbapi.OperationalError, match="database is locked"):
        b.execute("INSERT INTO t(name, n) VALUES ('b', 2)")
    a.commit()
    b.execute("INSERT INTO t(name, n) VALUES ('b', 2)")
    b.commit()
    assert a.execute("SELECT count(*) FROM t").fetchone() == (2,)


def test_timeout_waiting_for_a_writer_held_by_another_thread(db_path):
    make_table(db_path)
    holder = dbapi.connect(db_path, check_same_thread=False)
    holder.execute("INSERT INTO t(name, n) VALUES ('a', 1)")
    result = []

    def waiter():
        con = dbapi.connect(db_path, timeout=0.2)
        try:
            con.execute("INSERT INTO t(name, n) VALUES ('b', 2)")
            result.append("inserted")
        except dbapi.OperationalError as e:
            result.append(str(e))
        # the failed transaction is gone: the connection works again later
        assert not con.in_transaction

    t = threading.Thread(target=waiter)
    t.start()
    t.join()
    assert len(result) == 1 and "database is locked" in result[0]
    holder.commit()
    assert holder.execute("SELECT count(*) FROM t").fetchone() == (1,)


# --- errors: hostile inputs and the PEP 249 class each maps to --------------

ERROR_CASES = [
    ("SELECT * FROM missing", (), dbapi.OperationalError, "no such table"),
    ("SELEC 1", (), dbapi.OperationalError, "syntax error"),
    ("INSERT INTO t(id, name) VALUES (1, 'dup')", (), dbapi.IntegrityError, "UNIQUE"),
    ("INSERT INTO t(id, name) VALUES (NULL, NULL); SELECT 1", (), dbapi.ProgrammingError, "one statement"),
    ("SELECT ?", (), dbapi.ProgrammingError, "Incorrect number of bindings"),
    ("SELECT ?", (1, 2), dbapi.ProgrammingError, "Incorrect number of bindings"),
    ("SELECT :a", {"b": 1}, dbapi.ProgrammingError, "binding parameter :a"),
    ("SELECT ?", {"a": 1}, dbapi.ProgrammingError, "has no name"),
    ("SELECT ?", (decimal.Decimal("1.5"),), dbapi.ProgrammingError, "not supported"),
    ("SELECT ?", ({"nested": 1},), dbapi.ProgrammingError, "not supported"),
    ("SELECT ?", (2**64,), OverflowError, "too large"),
    ("SELECT ?", 5, dbapi.ProgrammingError, "unsupported type"),
    ("SELECT ?", {1, 2}, dbapi.ProgrammingError, "unsupported type"),
    ("INSERT INTO t(id, name) VALUES ('x', 'y')", (), dbapi.IntegrityError, "datatype mismatch"),
]


@pytest.mark.parametrize("sql,params,exc,text", ERROR_CASES)
def test_errors_map_to_pep249_classes(db_path, sql, params, exc, text):
    con = dbapi.connect(db_path, isolation_level=None)
    con.execute("CREATE TABLE IF NOT EXISTS t(id INTEGER PRIMARY KEY, name TEXT UNIQUE)")
    con.execute("INSERT OR IGNORE INTO t VALUES (1, 'dup')")
    with pytest.raises(exc) as info:
        con.execute(sql, params)
    assert text.lower() in str(info.value).lower()
    # The connection stays usable after every error.
    assert con.execute("SELECT count(*) FROM t").fetchone() == (1,)


def test_sqlite_errors_carry_codes_like_sqlite3(db_path):
    def duplicate_insert(con, error):
        """The `error` that inserting a UNIQUE value twice raises on `con`."""
        con.execute("CREATE TABLE u(x UNIQUE)")
        con.execute("INSERT INTO u VALUES (1)")
        with pytest.raises(error) as info:
            con.execute("INSERT INTO u VALUES (1)")
        return info.value

    ours = duplicate_insert(dbapi.connect(db_path), dbapi.IntegrityError)
    theirs = duplicate_insert(sqlite3.connect(":memory:"), sqlite3.IntegrityError)
    assert str(ours) == str(theirs)
    if hasattr(theirs, "sqlite_errorcode"):
        assert ours.sqlite_errorcode == theirs.sqlite_errorcode
        assert ours.sqlite_errorname == theirs.sqlite_errorname


def test_error_inside_a_transaction_keeps_the_transaction(db_path):
    make_table(db_path)
    con = dbapi.connect(db_path)
    con.execute("INSERT INTO t(name, n) VALUES ('a', 1)")
    with pytest.raises(dbapi.IntegrityError):
        con.execute("INSERT INTO t(name, n) VALUES ('a', 2)")
    assert con.in_transaction
    con.execute("INSERT INTO t(name, n) VALUES ('b', 2)")
    con.commit()
    assert con.execute("SELECT name FROM t ORDER BY n").fetchall() == [("a",), ("b",)]


def test_closed_objects_and_bad_arguments(db_path):
    con = dbapi.connect(db_path)
    cur = con.cursor()
    cur.close()
    with pytest.raises(dbapi.ProgrammingError, match="closed cursor"):
        cur.execute("SELECT 1")
    con.close()
    con.close()  # a second close is fine
    for call in (lambda: con.execute("SELECT 1"), con.commit, con.cursor):
        with pytest.raises(dbapi.ProgrammingError, match="closed database"):
            call()
    with pytest.raises(ValueError):
        dbapi.connect(db_path, isolation_level="SERIALIZABLE")
    with pytest.raises(dbapi.ProgrammingError, match="unknown option"):
        dbapi.connect(db_path, no_such_option=1)
    with pytest.raises(dbapi.ProgrammingError, match="unknown profile|expected safe"):
        dbapi.connect(db_path + "2", profile="durable")
    with pytest.raises(TypeError, match="detect_types"):
        dbapi.connect(db_path, detect_types="yes")
    with pytest.raises(dbapi.DatabaseError):
        dbapi.connect("/nonexistent-dir/x/y.db")


def test_not_a_database_is_an_error_and_the_file_is_untouched(tmp_path):
    path = tmp_path / "junk.db"
    data = b"this is not an sqlite database at all" * 100
    path.write_bytes(data)
    with pytest.raises(dbapi.DatabaseError):
        dbapi.connect(str(path))
    assert path.read_bytes() == data


STOCK_CASES = [
    (
        "foreign keys",
        "CREATE TABLE p(id INTEGER PRIMARY KEY); CREATE TABLE c(id INTEGER PRIMARY KEY, p INTEGER REFERENCES p(id));",
        "INSERT INTO c(p) VALUES (42)",
    ),
    ("double-quoted literal", "", 'SELECT "hello"'),
    (
        "double-quoted literal in a view",
        'CREATE TABLE t(a); CREATE VIEW v AS SELECT a, "x" AS tag FROM t;',
        "SELECT * FROM v",
    ),
    (
        "trigger on an FTS shadow table (defensive off)",
        "CREATE VIRTUAL TABLE f USING fts5(x);",
        "CREATE TRIGGER tr AFTER INSERT ON f_data BEGIN SELECT 1; END",
    ),
]


@pytest.mark.parametrize("what,schema,sql", STOCK_CASES, ids=[c[0] for c in STOCK_CASES])
def test_the_drop_in_has_sqlite_stock_settings_and_strict_has_litelanes(tmp_path, what, schema, sql):
    """By default the drop-in accepts what sqlite3 on a stock SQLite accepts;
    `strict=True` turns on litelane's stricter settings, which refuse each."""

    def run(con):
        if schema:
            con.executescript(schema)
        try:
            con.execute(sql)
            con.commit()
            return "ok"
        except dbapi.Error as e:  # both modules' errors are sqlite3.Error
            return type(e).__name__
        except sqlite3.Error as e:
            return type(e).__name__

    stock = sqlite3.connect(str(tmp_path / "stock.db"))
    assert run(stock) == "ok"
    stock.close()
    assert run(dbapi.connect(str(tmp_path / "lane.db"))) == "ok"
    assert run(dbapi.connect(str(tmp_path / "strict.db"), strict=True)) != "ok"


def test_pragmas_reads_on_readers_writes_on_the_writer(db_path):
    con = dbapi.connect(db_path)
    assert con.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    assert con.execute("PRAGMA journal_mode=WAL").fetchone() == ("wal",)
    con.execute("CREATE TABLE t(a, b)")
    assert [r[1] for r in con.execute("PRAGMA table_info(t)")] == ["a", "b"]
    # Refused, saying why (SQLite's own error named a transaction).
    with pytest.raises(dbapi.OperationalError, match="litelane keeps the database in WAL mode"):
        con.execute("PRAGMA journal_mode=DELETE")
    with pytest.raises(dbapi.OperationalError, match="journal_mode = memory"):
        con.execute("PRAGMA main.journal_mode('memory')")
    assert con.execute("PRAGMA journal_mode").fetchone() == ("wal",)
