"""The drop-in surface of litelane.dbapi, each test run on the standard
library's sqlite3 and on litelane.dbapi alike: what a program written for
sqlite3 does must give the same result on both."""

import collections.abc
import datetime
import os
import re
import sqlite3 as std
import subprocess
import sys
import threading

import litelane
import litelane.dbapi as dbapi
import pytest


@pytest.fixture(params=["sqlite3", "litelane"])
def mod(request):
    return std if request.param == "sqlite3" else dbapi


def test_every_constant_of_the_standard_library_is_there_with_its_value():
    names = [n for n in dir(std) if n.startswith(("SQLITE_", "PARSE_"))]
    assert len(names) > 100
    for n in names:
        assert getattr(dbapi, n) == getattr(std, n), n
    assert "SQLITE_CONSTRAINT_UNIQUE" in dbapi.__all__


@pytest.mark.parametrize(
    "name",
    [
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
    ],
)
def test_exceptions_are_the_standard_librarys_too(name):
    ours = getattr(dbapi, name)
    assert issubclass(ours, getattr(std, name))
    assert ours is getattr(litelane, name)


def test_code_that_catches_sqlite3_errors_catches_litelanes(db_path):
    con = dbapi.connect(db_path)
    con.execute("CREATE TABLE t(k PRIMARY KEY)")
    con.execute("INSERT INTO t VALUES (1)")
    with pytest.raises(std.IntegrityError) as e:
        con.execute("INSERT INTO t VALUES (1)")
    assert e.value.sqlite_errorcode == std.SQLITE_CONSTRAINT_PRIMARYKEY
    assert e.value.sqlite_errorname == "SQLITE_CONSTRAINT_PRIMARYKEY"
    with pytest.raises(std.OperationalError) as e:
        con.execute("SELECT * FROM missing")
    assert (e.value.sqlite_errorcode, e.value.sqlite_errorname) == (std.SQLITE_ERROR, "SQLITE_ERROR")
    assert str(e.value) == "no such table: missing"
    con.close()


def test_detect_types_decltypes_and_colnames(mod, db_path):
    seen = []

    def point(b):
        seen.append(b)
        x, y = b.split(b";")
        return (float(x), float(y))

    mod.register_converter("point", point)
    try:
        con = mod.connect(db_path, detect_types=mod.PARSE_DECLTYPES | mod.PARSE_COLNAMES)
        con.execute("CREATE TABLE t(p point, n NUMBER(10), d date, ts timestamp, plain)")
        con.execute("INSERT INTO t VALUES ('1;2', 3, '2024-01-05', '2024-01-05 10:20:30', 'x')")
        cur = con.execute("SELECT p, n, d, ts, plain FROM t")
        row = cur.fetchone()
        assert row[0] == (1.0, 2.0)
        assert row[1] == 3
        assert row[4] == "x"
        assert [d[0] for d in cur.description] == ["p", "n", "d", "ts", "plain"]
        # Column names name the converter ("x [type]"); the description drops it.
        seen.clear()
        cur = con.execute('SELECT \'5;6\' AS "v [point]", NULL AS "w [point]", 7 AS "i [POINT]"')
        with pytest.raises(ValueError):
            cur.fetchone()  # 7 has no ';': the converter ran, on b"7"
        assert seen == [b"5;6", b"7"]  # NULL never reaches a converter
        assert [d[0] for d in cur.description] == ["v", "w", "i"]
        con.close()
    finally:
        del mod.converters["POINT"]


def test_without_detect_types_no_converter_runs(mod, db_path):
    mod.register_converter("boom", lambda b: 1 / 0)
    try:
        con = mod.connect(db_path)
        con.execute("CREATE TABLE t(x boom)")
        con.execute("INSERT INTO t VALUES ('a')")
        assert con.execute('SELECT x, x AS "y [boom]" FROM t').fetchall() == [("a", "a")]
        con.close()
    finally:
        del mod.converters["BOOM"]


def test_factory_subclass_with_extra_keyword_arguments(mod, db_path):
    class Conn(mod.Connection):
        def __init__(self, *args, label=None, **kwargs):
            super().__init__(*args, **kwargs)
            self.label = label

    con = mod.connect(db_path, factory=Conn, label="mine")
    assert isinstance(con, Conn) and con.label == "mine"
    assert con.execute("SELECT 1").fetchone() == (1,)
    con.close()
    # the factory given by position, sqlite3's sixth argument
    con = mod.connect(db_path, 5.0, 0, "", True, Conn)
    assert isinstance(con, Conn) and con.label is None
    con.close()


def test_a_drop_in_connection_is_safe_by_default_and_mixes_with_the_native_api(db_path):
    con = dbapi.connect(db_path)
    # the native API without options joins the engine as it is
    with litelane.open(db_path) as db:
        assert db.profile == "safe"
        # safe: every commit is made durable by a WAL fsync, its own or one
        # shared with other processes' commits (the writer connection itself
        # reads synchronous=NORMAL: it syncs after its turn)
        before = db.metrics()
        con.execute("CREATE TABLE durable(x)")
        for i in range(3):
            con.execute("INSERT INTO durable VALUES (?)", (i,))
            con.commit()
        after = db.metrics()
        synced = lambda m: m["wal_syncs"] + m["syncs_shared"]  # noqa: E731
        assert synced(after) - synced(before) == after["commits"] - before["commits"] >= 3
    with pytest.raises(dbapi.ProgrammingError, match="other options"):
        litelane.open(db_path, profile="balanced")
    con.close()
    with litelane.open(db_path + "2") as db:
        assert db.profile == "balanced"  # the native API's own default


def test_default_date_and_timestamp_converters(mod, db_path):
    con = mod.connect(db_path, detect_types=mod.PARSE_DECLTYPES)
    con.execute("CREATE TABLE t(d date, ts timestamp, ts0 timestamp)")
    day = datetime.date(2024, 1, 5)
    at = datetime.datetime(2024, 1, 5, 10, 20, 30, 123456)
    con.execute(
        "INSERT INTO t VALUES (?, ?, ?)",
        (day.isoformat(), at.isoformat(" "), "2024-01-05 10:20:30"),
    )
    assert con.execute("SELECT d, ts, ts0 FROM t").fetchone() == (day, at, datetime.datetime(2024, 1, 5, 10, 20, 30))
    con.close()


def test_an_empty_statement_runs_nothing(mod, db_path):
    con = mod.connect(db_path)
    for sql in ("", "   ", "-- only a comment", "/* a comment */"):
        cur = con.execute(sql)
        assert cur.description is None and cur.rowcount == -1
    con.close()


@pytest.mark.parametrize("autocommit", [False, True])
def test_on_conflict_rollback_ends_the_transaction_with_an_integrity_error(mod, db_path, autocommit):
    con = mod.connect(db_path, isolation_level=None if autocommit else "")
    con.execute("CREATE TABLE t(a UNIQUE ON CONFLICT ROLLBACK)")
    if not autocommit:
        con.execute("INSERT INTO t VALUES (1)")  # opens the transaction
        con.execute("INSERT INTO t VALUES (2)")
        with pytest.raises(mod.IntegrityError, match="UNIQUE constraint failed"):
            con.execute("INSERT INTO t VALUES (1)")
        assert not con.in_transaction  # rolled back, both rows with it
        con.commit()  # nothing to commit: no error
        assert con.execute("SELECT count(*) FROM t").fetchone() == (0,)
    con.execute("INSERT INTO t VALUES (5)")
    with pytest.raises(mod.IntegrityError):
        con.execute("INSERT INTO t VALUES (5)")
    con.execute("INSERT INTO t VALUES (6)")
    con.commit()
    # In a transaction the conflict rolled back the 5 with it.
    kept = [(5,), (6,)] if autocommit else [(6,)]
    assert con.execute("SELECT a FROM t ORDER BY a").fetchall() == kept
    con.close()


def test_a_single_thread_never_sees_database_is_locked_even_with_timeout_zero(db_path):
    # LITELANE_TXN_YIELDS=0: the caller does not spin while the transaction's
    # thread gets going, so each commit's hand-over outlasts a zero timeout.
    code = (
        "import litelane.dbapi as s, sys\n"
        "c = s.connect(sys.argv[1], timeout=0)\n"
        "c.execute('CREATE TABLE t(a)')\n"
        "for i in range(300):\n"
        "    c.execute('INSERT INTO t VALUES (?)', (i,))\n"
        "    c.commit()\n"
        "print(c.execute('SELECT count(*) FROM t').fetchone()[0])\n"
    )
    env = dict(os.environ, LITELANE_TXN_YIELDS="0")
    out = subprocess.run([sys.executable, "-c", code, db_path], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "300"


def test_adapt(mod):
    class P:
        def __conform__(self, proto):
            return "conformed" if proto is mod.PrepareProtocol else None

    assert mod.adapt(P()) == "conformed"
    assert mod.adapt(object(), mod.PrepareProtocol, "alt") == "alt"
    with pytest.raises(mod.ProgrammingError, match="can't adapt"):
        mod.adapt(object())
    mod.register_adapter(complex, lambda c: f"{c.real};{c.imag}")
    try:
        assert mod.adapt(1 + 2j) == "1.0;2.0"
    finally:
        del mod.adapters[(complex, mod.PrepareProtocol)]


DUMP_SCHEMA = """
CREATE TABLE t(a INTEGER PRIMARY KEY AUTOINCREMENT, b TEXT, c BLOB, d REAL);
INSERT INTO t(b, c, d) VALUES ('x''y', x'0102', 1.5), (NULL, NULL, 1e300), ('é', x'', -0.0);
CREATE INDEX i ON t(b);
CREATE VIEW v AS SELECT * FROM t;
CREATE TRIGGER tr AFTER INSERT ON t BEGIN SELECT 1; END;
CREATE TABLE "we""ird"("co""l" TEXT);
INSERT INTO "we""ird" VALUES ('"; DROP TABLE t; --');
ANALYZE;
CREATE VIRTUAL TABLE ft USING fts5(x);
"""


def test_iterdump_gives_what_sqlite3_gives_and_restores(tmp_path):
    dumps = {}
    for mod in (std, dbapi):
        con = mod.connect(str(tmp_path / f"{mod.__name__}.db"))
        con.executescript(DUMP_SCHEMA)
        dumps[mod] = list(con.iterdump())
        con.close()
    assert dumps[dbapi] == dumps[std]
    assert 'INSERT INTO "we""ird" VALUES(\'"; DROP TABLE t; --\');' in dumps[dbapi]
    copy = std.connect(":memory:")
    copy.executescript("\n".join(dumps[dbapi]))
    assert copy.execute("SELECT * FROM t ORDER BY a").fetchall() == [
        (1, "x'y", b"\x01\x02", 1.5),
        (2, None, None, 1e300),
        (3, "é", b"", -0.0),
    ]


def test_uri_read_only_reads_and_refuses_writes_leaving_the_file_as_it_was(mod, db_path):
    seed = std.connect(db_path)  # a rollback-journal file made by sqlite3
    seed.execute("CREATE TABLE t(a)")
    seed.execute("INSERT INTO t VALUES (1)")
    seed.commit()
    seed.close()
    before = open(db_path, "rb").read()
    con = mod.connect(f"file:{db_path}?mode=ro", uri=True)
    assert con.execute("SELECT a FROM t").fetchall() == [(1,)]
    with pytest.raises(mod.OperationalError, match="attempt to write a readonly database"):
        con.execute("INSERT INTO t VALUES (2)")
        con.commit()
    con.close()
    assert open(db_path, "rb").read() == before
    assert not os.path.exists(db_path + "-wal")


def test_uri_in_memory_shared_by_name_private_without_cache_shared(mod):
    a = mod.connect("file:shared_mem?mode=memory&cache=shared", uri=True)
    b = mod.connect("file:shared_mem?mode=memory&cache=shared", uri=True)
    a.execute("CREATE TABLE t(a)")
    a.execute("INSERT INTO t VALUES (1)")
    a.commit()
    assert b.execute("SELECT a FROM t").fetchall() == [(1,)]
    p = mod.connect("file:private_mem?mode=memory", uri=True)
    q = mod.connect("file:private_mem?mode=memory", uri=True)
    p.execute("CREATE TABLE t(a)")
    p.commit()
    with pytest.raises(mod.OperationalError, match="no such table"):
        q.execute("SELECT * FROM t")
    for c in (a, b, p, q):
        c.close()


def test_executescript_runs_statement_by_statement_as_sqlite3(mod, db_path):
    con = mod.connect(db_path)
    con.execute("CREATE TABLE log(x)")
    con.execute("INSERT INTO log VALUES ('pending')")  # legacy: committed first
    with pytest.raises(mod.OperationalError, match="no such table: nope"):
        con.executescript(
            "CREATE TABLE t(a); INSERT INTO t VALUES (1);"
            "CREATE TRIGGER tr AFTER INSERT ON t BEGIN INSERT INTO log VALUES ('a;b'); END;"
            "INSERT INTO t VALUES (2); INSERT INTO nope VALUES (3); INSERT INTO t VALUES (4);"
        )
    assert not con.in_transaction
    assert con.execute("SELECT a FROM t ORDER BY a").fetchall() == [(1,), (2,)]
    assert con.execute("SELECT x FROM log").fetchall() == [("pending",), ("a;b",)]
    # A script may open a transaction and leave it open for the caller.
    con.executescript("BEGIN; INSERT INTO t VALUES (5);")
    assert con.in_transaction
    con.rollback()
    con.executescript("BEGIN; INSERT INTO t VALUES (6); ROLLBACK; INSERT INTO t VALUES (7);")
    assert con.execute("SELECT a FROM t ORDER BY a").fetchall() == [(1,), (2,), (7,)]
    with pytest.raises(ValueError):
        con.executescript("SELECT 1;\0SELECT 2;")
    assert mod.complete_statement("CREATE TRIGGER tr AFTER INSERT ON t BEGIN SELECT 1;") is False
    assert mod.complete_statement("CREATE TRIGGER tr AFTER INSERT ON t BEGIN SELECT 1; END;")
    con.close()


@pytest.mark.parametrize("target_kind", ["litelane-file", "litelane-memory", "sqlite3-file", "sqlite3-memory"])
def test_backup_into_a_connection_replaces_its_content(tmp_path, target_kind):
    src = dbapi.connect(str(tmp_path / "src.db"))
    src.execute("CREATE TABLE t(a, b)")
    src.executemany("INSERT INTO t VALUES (?, ?)", [(i, "x" * 500) for i in range(200)])
    src.commit()
    mod = dbapi if target_kind.startswith("litelane") else std
    where = ":memory:" if target_kind.endswith("memory") else str(tmp_path / "dst.db")
    dst = mod.connect(where, check_same_thread=False)
    dst.execute("CREATE TABLE old(z)")
    dst.commit()
    # a reader of the target caches the old schema first
    assert dst.execute("SELECT count(*) FROM sqlite_master").fetchone() == (1,)
    calls = []
    src.backup(dst, pages=5, progress=lambda *a: calls.append(a))
    assert dst.execute("SELECT count(*), sum(a) FROM t").fetchone() == (200, sum(range(200)))
    assert [r[0] for r in dst.execute("SELECT name FROM sqlite_master")] == ["t"]
    assert len(calls) > 2 and calls[-1][1] == 0 and all(c[2] == calls[-1][2] for c in calls)
    if target_kind == "litelane-file":
        other = dbapi.connect(where)  # shares the target's engine
        assert other.execute("SELECT count(*) FROM t").fetchone() == (200,)
        other.close()
        fresh = std.connect(where)
        assert fresh.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        assert fresh.execute("SELECT count(*) FROM t").fetchone() == (200,)
        fresh.close()
    src.close()
    dst.close()


def test_backup_refusals_as_in_sqlite3(db_path, tmp_path):
    src = dbapi.connect(db_path)
    dst = dbapi.connect(str(tmp_path / "dst.db"))
    with pytest.raises(ValueError, match="same connection"):
        src.backup(src)
    with pytest.raises(TypeError):
        src.backup("not a connection")
    dst.execute("CREATE TABLE t(a)")
    dst.execute("INSERT INTO t VALUES (1)")  # opens a transaction
    with pytest.raises(dbapi.OperationalError, match="target is in transaction"):
        src.backup(dst)
    dst.commit()

    def boom(*_):
        raise ZeroDivisionError

    with pytest.raises(ZeroDivisionError):
        src.backup(dst, progress=boom)


def test_blobopen_reads_writes_and_refuses_as_sqlite3(mod, db_path):
    con = mod.connect(db_path)
    con.execute("CREATE TABLE t(b, s TEXT)")
    con.execute("INSERT INTO t VALUES (zeroblob(10), 'héllo'), (NULL, NULL)")
    con.commit()
    blob = con.blobopen("t", "b", 1)
    refusals = [
        (lambda: blob.write(b"x" * 11), ValueError, "data longer than blob length"),
        (lambda: blob.seek(11), ValueError, "offset out of blob range"),
        (lambda: blob.seek(-1), ValueError, "offset out of blob range"),
        (lambda: blob[10], IndexError, "Blob index out of range"),
        (lambda: blob.__setitem__(0, 256), ValueError, "byte must be in range"),
        (lambda: blob.__setitem__(slice(0, 2), b"a"), IndexError, "wrong size"),
        (lambda: con.blobopen("t", "b", 99), mod.OperationalError, "no such rowid: 99"),
        (lambda: con.blobopen("t", "b", 2), mod.OperationalError, "cannot open value of type null"),
        (lambda: con.blobopen("nope", "b", 1), mod.OperationalError, "no such table: main.nope"),
        (lambda: con.blobopen("t", "b", 1, readonly=True).write(b"a"), mod.OperationalError, "readonly"),
    ]
    for call, exc, text in refusals:
        with pytest.raises(exc, match=text):
            call()
    assert (len(blob), blob.read(3), blob.tell(), blob[0], blob[1:3], blob[-1]) == (10, b"\0\0\0", 3, 0, b"\0\0", 0)
    blob.seek(0)
    blob.write(b"ab")
    blob[5] = ord("z")
    blob[6:8] = b"QR"
    blob[::4] = b"123"
    assert not con.in_transaction  # blob writes begin no transaction
    assert con.execute("SELECT b FROM t WHERE rowid = 1").fetchone() == (b"1b\0\x002zQR3\0",)
    blob.close()
    with pytest.raises(mod.ProgrammingError, match="closed blob"):
        blob.read()
    with con.blobopen("t", "s", 1) as text:
        assert (len(text), text.read()) == (6, "héllo".encode())
    con.close()


def test_vacuum_runs_outside_a_transaction_and_fails_inside_one(mod, db_path, tmp_path):
    con = mod.connect(db_path)
    con.execute("CREATE TABLE t(a)")
    con.executemany("INSERT INTO t VALUES (?)", [(str(i) * 100,) for i in range(500)])
    con.commit()
    con.execute("DELETE FROM t")
    con.commit()
    cur = con.execute("VACUUM")
    assert cur.rowcount == -1 and not con.in_transaction
    con.execute(f"VACUUM INTO '{tmp_path / 'copy.db'}'")
    assert std.connect(str(tmp_path / "copy.db")).execute("SELECT count(*) FROM t").fetchone() == (0,)
    con.execute("INSERT INTO t VALUES (1)")  # opens a transaction
    with pytest.raises(mod.OperationalError, match="cannot VACUUM from within a transaction"):
        con.execute("VACUUM")
    con.commit()
    con.close()


def _fake_cursor(mod):
    class FakeCursor(str):
        __class__ = mod.Cursor

    return FakeCursor()


def _row(mod, con, sql):
    con.row_factory = mod.Row
    return con.execute(sql).fetchone()


class _L:
    def __len__(self):
        return 1

    def __getitem__(self, i):
        assert i == 0
        return "x"


# (name, call(mod, con), expected result or (exception class name, message regex))
PARITY = [
    ("cursor factory None", lambda m, c: c.cursor(None), ("TypeError", "")),
    ("cursor factory returns no cursor", lambda m, c: c.cursor(lambda con: None), ("TypeError", "")),
    ("Row of a fake cursor", lambda m, c: m.Row(_fake_cursor(m), ()), ("TypeError", "")),
    ("Row index of another type", lambda m, c: _row(m, c, "SELECT 1 AS a")[1j], ("IndexError", "")),
    ("Row names fold ASCII case only", lambda m, c: _row(m, c, "SELECT 1 AS \xff")["\u0178"], ("IndexError", "")),
    ("Row is a Sequence", lambda m, c: isinstance(_row(m, c, "SELECT 1"), collections.abc.Sequence), True),
    (
        "isolation_level of any case",
        lambda m, c: setattr(c, "isolation_level", "deferred") or c.isolation_level,
        "DEFERRED",
    ),
    ("isolation_level not a str", lambda m, c: setattr(c, "isolation_level", 1), ("TypeError", "")),
    ("parameters of a plain sequence", lambda m, c: c.execute("SELECT ?", _L()).fetchall(), [("x",)]),
    (
        "parameters of no sequence",
        lambda m, c: c.execute("SELECT ?", 5),
        ("ProgrammingError", "^parameters are of unsupported type$"),
    ),
    ("a statement and comments", lambda m, c: c.execute("SELECT 1; -- c\n /* d").fetchall(), [(1,)]),
    ("two statements", lambda m, c: c.execute("SELECT 1; SELECT 2"), ("ProgrammingError", "one statement at a time")),
    ("a NUL in SQL", lambda m, c: c.execute("SELECT 1\0"), ("ProgrammingError", "null character")),
    ("a lone surrogate in SQL", lambda m, c: c.execute("SELECT '\ud8ff'"), ("UnicodeEncodeError", "")),
    ("executescript of bytes", lambda m, c: c.executescript(b"SELECT 1;"), ("TypeError", "")),
    (
        "Connection without __init__",
        lambda m, c: m.Connection.__new__(m.Connection).cursor(),
        ("ProgrammingError", "Base Connection.__init__ not called"),
    ),
    (
        "Cursor without __init__",
        lambda m, c: m.Cursor.__new__(m.Cursor).close(),
        ("ProgrammingError", "Base Cursor.__init__ not called"),
    ),
    (
        "a script over the SQL length limit",
        lambda m, c: (c.setlimit(m.SQLITE_LIMIT_SQL_LENGTH, 50), c.executescript("SELECT 1;" + " " * 60)),
        ("DataError", "query string is too large"),
    ),
    (
        "closing a cursor of a closed connection",
        lambda m, c: (lambda cur: (c.close(), cur.close()))(c.cursor()),
        ("ProgrammingError", "closed database"),
    ),
    (
        "a TypeError in __conform__",
        lambda m, c: c.execute("SELECT ?", (type("Bad", (), {"__conform__": lambda s, p: 1 + ""})(),)),
        ("ProgrammingError", ""),
    ),
    (
        "another exception in __conform__",
        lambda m, c: c.execute("SELECT ?", (type("Bad", (), {"__conform__": lambda s, p: 1 / 0})(),)),
        ("ZeroDivisionError", ""),
    ),
    (
        "text that is not UTF-8",
        lambda m, c: c.execute("SELECT 'xxx' || ? || 'yyy' AS colname", (bytes([250]),)).fetchone(),
        ("OperationalError", "Could not decode to UTF-8 column 'colname' with text 'xxx"),
    ),
]


@pytest.mark.parametrize("name,call,expected", PARITY, ids=[p[0] for p in PARITY])
def test_parity_with_sqlite3(name, call, expected, db_path):
    for mod in (std, dbapi):
        con = mod.connect(db_path if mod is dbapi else ":memory:")
        try:
            if isinstance(expected, tuple) and len(expected) == 2 and isinstance(expected[0], str):
                exc_name, message = expected
                with pytest.raises(Exception) as e:
                    call(mod, con)
                assert type(e.value).__name__ == exc_name, (mod.__name__, e.value)
                assert re.search(message, str(e.value)), (mod.__name__, str(e.value))
            else:
                assert call(mod, con) == expected, mod.__name__
        finally:
            con.close()


def test_an_adapter_for_a_base_type_applies(mod):
    mod.register_adapter(int, float)
    try:
        con = mod.connect(":memory:")
        assert type(con.execute("SELECT ?", (4,)).fetchone()[0]) is float
    finally:
        del mod.adapters[(int, mod.PrepareProtocol)]


def test_recursive_use_of_a_cursor_from_its_converter(mod):
    con = mod.connect(":memory:", detect_types=mod.PARSE_COLNAMES)
    cur = con.cursor()
    mod.converters["CLOSE"] = lambda b: cur.close()
    try:
        cur.execute('SELECT 1 AS "x [CLOSE]"')
        with pytest.raises(mod.ProgrammingError, match="Recursive use of cursors"):
            cur.fetchall()
    finally:
        del mod.converters["CLOSE"]


def test_limits_are_set_on_every_connection_and_refused_out_of_bounds(mod, db_path):
    con = mod.connect(db_path, check_same_thread=False)
    length = mod.SQLITE_LIMIT_SQL_LENGTH
    saved = con.getlimit(length)
    assert con.setlimit(length, 20) == saved
    assert con.getlimit(length) == 20
    assert con.setlimit(length, -1) == 20  # a negative limit changes nothing
    errors = []

    def too_long():  # from another thread: another reader of the engine
        try:
            con.execute("SELECT 1 AS 'a long enough name'")
        except mod.DataError as e:
            errors.append(str(e))

    for _ in range(4):
        t = threading.Thread(target=too_long)
        t.start()
        t.join()
    assert errors == ["query string is too large"] * 4
    with pytest.raises(mod.DataError, match="query string is too large"):
        con.execute("CREATE TABLE a_table_name_too_long(x)")
    con.setlimit(length, saved)
    assert con.execute("SELECT 1 AS 'a long enough name'").fetchone() == (1,)
    for call in (lambda: con.getlimit(1111), lambda: con.setlimit(1111, 0)):
        with pytest.raises(mod.ProgrammingError, match="'category' is out of bounds"):
            call()
    con.close()


@pytest.mark.parametrize("level", ["", "DEFERRED", "IMMEDIATE", "EXCLUSIVE", None])
def test_the_trace_callback_sees_the_transaction_statements_sqlite3_runs(mod, level):
    con = mod.connect(":memory:", isolation_level=level)
    con.execute("CREATE TABLE t(t)")
    traced = []
    con.set_trace_callback(traced.append)
    with con:
        con.execute("INSERT INTO t VALUES (1)")
    con.execute("BEGIN")
    con.execute("INSERT INTO t VALUES (2)")
    con.rollback()
    con.set_trace_callback(None)
    con.execute("SELECT 1")
    implicit = [] if level is None else [f"BEGIN {level}"]
    commit = [] if level is None else ["COMMIT"]
    assert traced == [*implicit, "INSERT INTO t VALUES (1)", *commit, "BEGIN", "INSERT INTO t VALUES (2)", "ROLLBACK"]


def test_dbapi2_is_the_module_itself_as_in_sqlite3():
    from sqlite3 import dbapi2 as stock

    from litelane.dbapi import dbapi2

    assert dbapi2 is dbapi
    assert stock.connect is std.connect  # what the alias means in sqlite3
    assert dbapi2.connect is dbapi.connect


@pytest.mark.parametrize("kwargs", [{}, {"isolation_level": None}], ids=["legacy", "autocommit"])
def test_counters_after_a_failing_executemany_and_a_script_match_sqlite3(tmp_path, kwargs):
    """rowcount is -1 after an executemany that failed (it kept the count
    of the statement before), the sets it ran before the failing one count
    in total_changes, and so do the rows a script changes (they counted 0),
    each beside sqlite3 in the same run."""

    def run(module, path):
        con = module.connect(path, **kwargs)
        con.execute("CREATE TABLE t(x UNIQUE)")
        cur = con.cursor()
        cur.execute("INSERT INTO t VALUES (100)")
        with pytest.raises(module.IntegrityError):
            cur.executemany("INSERT INTO t VALUES (?)", [(1,), (2,), (1,), (3,)])
        after_many = (cur.rowcount, con.total_changes)
        # Many sets (several chunks of the pipelined path), failing late.
        with pytest.raises(module.IntegrityError):
            cur.executemany("INSERT INTO t VALUES (?)", [(i,) for i in range(1000, 6000)] + [(1,)])
        after_big = con.total_changes
        con.commit()
        before = con.total_changes
        script = "INSERT INTO t VALUES (10); INSERT INTO t VALUES (11); UPDATE t SET x = x + 1000000;"
        cur = con.executescript(script)
        out = (after_many, after_big, con.total_changes - before, cur.rowcount)
        con.close()
        return out

    want = run(std, str(tmp_path / "stock.db"))
    # What sqlite3 does, so the check can fail: 1 + 2 stored before the
    # failing set, then 5,000, then the script's 2 inserts and 5,005 updates.
    assert want == ((-1, 3), 5003, 2 + 5005, -1)
    assert run(dbapi, str(tmp_path / "lane.db")) == want
