"""The per-statement fast path of litelane.dbapi (Connection.execute making
the default cursor inline, Cursor.execute running the common cases of
Connection._run and Cursor._set in one call, fetchone and commit checking the
connection inline, cursor.description built and cached by the extension):
what it skips must not change what a program sees. Each test that can runs
on the standard library's sqlite3 and on litelane.dbapi alike."""

import sqlite3 as std
import threading
import time

import litelane.dbapi as dbapi
import pytest


@pytest.fixture(params=["sqlite3", "litelane"])
def mod(request):
    return std if request.param == "sqlite3" else dbapi


def connect(mod, path, **kw):
    if mod is std:
        con = std.connect(path, **kw)
        con.execute("PRAGMA journal_mode=WAL")
        return con
    return dbapi.connect(path, profile="balanced", **kw)


def state(cur):
    """What a program reads off a cursor after a statement (the column
    names only: litelane.dbapi gives the declared type as type_code)."""
    names = None if cur.description is None else [d[0] for d in cur.description]
    return names, cur.rowcount, cur.lastrowid


def test_description_rowcount_lastrowid_after_each_kind_of_statement(mod, db_path):
    con = connect(mod, db_path)
    seen = []
    for sql, params in [
        ("CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT)", ()),
        ("INSERT INTO t(v) VALUES (?)", ("a",)),  # the implicit BEGIN
        ("INSERT INTO t(v) VALUES (?)", ("b",)),  # in the open transaction
        ("SELECT id, v AS value FROM t ORDER BY id", ()),  # in it too
        ("UPDATE t SET v = v || '!'", ()),
        ("DELETE FROM t WHERE id = ?", (1,)),
    ]:
        seen.append(state(con.execute(sql, params)))
    con.commit()
    cur = con.execute("SELECT v FROM t WHERE id = ?", (2,))  # outside a transaction
    seen.append(state(cur))
    assert cur.fetchone() == ("b!",)
    con.close()
    assert seen == [
        (None, -1, 0),
        (None, 1, 1),
        (None, 1, 2),
        (["id", "value"], -1, 2),
        (None, 2, 2),
        (None, 1, 2),
        (["v"], -1, 2),
    ]


def test_autocommit_statements_and_total_changes(mod, db_path):
    con = connect(mod, db_path, isolation_level=None)
    con.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, v)")
    assert state(con.execute("INSERT INTO t(v) VALUES (1), (2), (3)")) == (None, 3, 3)
    assert not con.in_transaction
    assert state(con.execute("UPDATE t SET v = 0 WHERE id > 1")) == (None, 2, 3)
    assert con.total_changes == 5
    con.close()


def test_fetchone_after_the_last_row_keeps_returning_none(mod, db_path):
    con = connect(mod, db_path)
    cur = con.execute("SELECT 1 UNION ALL SELECT 2")
    assert [cur.fetchone(), cur.fetchone(), cur.fetchone(), cur.fetchone()] == [(1,), (2,), None, None]
    assert cur.fetchall() == []
    cur.execute("SELECT 3")
    assert cur.fetchone() == (3,)
    assert cur.fetchone() is None
    con.close()


def test_a_failed_statement_leaves_no_rows_and_keeps_the_transaction(mod, db_path):
    con = connect(mod, db_path)
    con.execute("CREATE TABLE t(id INTEGER PRIMARY KEY)")
    con.execute("INSERT INTO t VALUES (1)")
    cur = con.cursor()
    cur.execute("SELECT id FROM t")
    with pytest.raises(mod.IntegrityError):
        cur.execute("INSERT INTO t VALUES (1)")
    assert cur.description is None
    assert con.in_transaction  # the implicit BEGIN stays open, as in sqlite3
    con.commit()
    assert con.execute("SELECT count(*) FROM t").fetchone() == (1,)
    con.close()


def test_the_first_statement_of_a_transaction_failing_keeps_it_open(mod, db_path):
    con = connect(mod, db_path)
    con.execute("CREATE TABLE t(id INTEGER PRIMARY KEY)")
    con.execute("INSERT INTO t VALUES (1)")
    con.commit()
    with pytest.raises(mod.IntegrityError):
        con.execute("INSERT INTO t VALUES (1)")
    assert con.in_transaction
    con.rollback()
    assert not con.in_transaction
    con.close()


def test_fetchone_where_no_statement_returned_rows(mod, db_path):
    con = connect(mod, db_path)
    cur = con.execute("CREATE TABLE t(a)")
    # As sqlite3: None, not the error PEP 249 asks for (docs/python.md).
    assert cur.fetchone() is None
    assert cur.fetchall() == []
    con.close()


def test_closed_cursor_and_connection_refuse_the_fast_path(mod, db_path):
    con = connect(mod, db_path)
    cur = con.execute("SELECT 1")
    cur.close()
    with pytest.raises(mod.ProgrammingError, match="closed cursor"):
        cur.fetchone()
    with pytest.raises(mod.ProgrammingError, match="closed cursor"):
        cur.execute("SELECT 1")
    cur = con.execute("SELECT 1")
    con.close()
    for call in (cur.fetchone, lambda: con.execute("SELECT 1"), con.commit):
        with pytest.raises(mod.ProgrammingError, match="closed database"):
            call()


def test_objects_whose_init_never_ran(mod):
    con = mod.Connection.__new__(mod.Connection)
    for call in (lambda: con.execute("SELECT 1"), con.commit):
        with pytest.raises(mod.ProgrammingError, match="Base Connection.__init__ not called"):
            call()
    cur = mod.Cursor.__new__(mod.Cursor)
    with pytest.raises(mod.ProgrammingError, match="Base Cursor.__init__ not called"):
        cur.execute("SELECT 1")
    with pytest.raises(mod.ProgrammingError, match="Base Cursor.__init__ not called"):
        cur.fetchone()


def test_another_thread_is_refused_by_execute_fetchone_and_commit(mod, db_path):
    con = connect(mod, db_path)
    cur = con.execute("SELECT 1")
    errors = []

    def use():
        for call in (cur.fetchone, lambda: con.execute("SELECT 1"), con.commit):
            try:
                call()
                errors.append(None)
            except mod.ProgrammingError as e:
                errors.append(str(e))

    t = threading.Thread(target=use)
    t.start()
    t.join()
    assert len(errors) == 3
    assert all(e and "same thread" in e for e in errors)
    assert cur.fetchone() == (1,)
    con.close()


def test_subclasses_overriding_cursor_execute_and_fetchone_are_called(mod, db_path):
    calls = []

    class MyCursor(mod.Cursor):
        def execute(self, sql, parameters=(), /):
            calls.append(("execute", sql))
            return super().execute(sql, parameters)

        def fetchone(self):
            calls.append(("fetchone",))
            row = super().fetchone()
            return None if row is None else ("mine",) + row

    class MyConnection(mod.Connection):
        def cursor(self, factory=MyCursor):
            calls.append(("cursor",))
            return super().cursor(factory)

    con = mod.connect(db_path, factory=MyConnection)
    # Connection.execute/executemany/executescript make a plain Cursor, not
    # self.cursor(), as sqlite3 does.
    cur = con.execute("SELECT ?", (5,))
    assert type(cur) is mod.Cursor
    assert cur.fetchone() == (5,)
    assert type(con.executescript("CREATE TABLE t(a);")) is mod.Cursor
    assert type(con.executemany("INSERT INTO t VALUES (?)", [(1,), (2,)])) is mod.Cursor
    assert calls == []
    cur = con.cursor()
    assert type(cur) is MyCursor
    assert cur.execute("SELECT ?", (6,)) is cur
    assert cur.fetchone() == ("mine", 6)
    assert calls == [("cursor",), ("execute", "SELECT ?"), ("fetchone",)]
    con.close()


def test_row_factory_text_factory_and_converters_still_apply(mod, db_path):
    con = connect(mod, db_path, detect_types=mod.PARSE_DECLTYPES | mod.PARSE_COLNAMES)
    con.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, name TEXT, pt POINT)")
    con.execute("INSERT INTO t(name, pt) VALUES ('x', '1;2')")
    con.commit()
    mod.register_converter("POINT", lambda b: tuple(int(v) for v in b.split(b";")))
    try:
        assert con.execute("SELECT pt FROM t").fetchone() == ((1, 2),)
        assert con.execute('SELECT name AS "n [point]" FROM t').description[0][0] == "n"
    finally:
        del mod.converters["POINT"]
    con.text_factory = bytes
    assert con.execute("SELECT name FROM t").fetchone() == (b"x",)
    con.text_factory = str
    con.row_factory = mod.Row
    row = con.execute("SELECT id, name FROM t").fetchone()
    assert (row["name"], row[0], row.keys()) == ("x", 1, ["id", "name"])
    cur = con.cursor()
    cur.row_factory = lambda c, r: {d[0]: v for d, v in zip(c.description, r, strict=True)}
    assert cur.execute("SELECT name FROM t").fetchone() == {"name": "x"}
    con.close()


def test_trace_callback_sees_the_implicit_begin(mod, db_path):
    con = connect(mod, db_path)
    con.execute("CREATE TABLE t(a)")
    seen = []
    con.set_trace_callback(seen.append)
    con.execute("INSERT INTO t VALUES (1)")
    con.commit()
    assert [s for s in seen if s.split()[0] in ("BEGIN", "INSERT", "COMMIT")] == [
        "BEGIN ",
        "INSERT INTO t VALUES (1)",
        "COMMIT",
    ]
    con.close()


def test_description_follows_the_shape_after_a_schema_change(db_path):
    con = dbapi.connect(db_path, profile="balanced")
    con.execute("CREATE TABLE t(a INTEGER)")
    first = con.execute("SELECT * FROM t").description
    again = con.execute("SELECT * FROM t").description
    assert first == (("a", "INTEGER", None, None, None, None, None),)
    assert again is first  # built once per shape by the extension
    con.execute("ALTER TABLE t ADD COLUMN b TEXT")
    assert [d[:2] for d in con.execute("SELECT * FROM t").description] == [("a", "INTEGER"), ("b", "TEXT")]
    con.close()


def test_native_api_returns_one_named_outcome(db_path):
    con = dbapi.connect(db_path, profile="balanced")
    con.execute("CREATE TABLE t(a INTEGER)")
    out = con.engine.execute("SELECT a FROM t")
    assert (out.columns, out.rows, out.rowcount, out.wrote, out.decltypes) == (("a",), [], -1, False, ("INTEGER",))
    assert out.description == (("a", "INTEGER", None, None, None, None, None),)
    assert con.engine.execute("SELECT a FROM t").description is out.description  # cached per shape
    wrote = con.engine.execute("INSERT INTO t VALUES (1)")
    assert (wrote.description, wrote.columns, wrote.decltypes, wrote.rows) == (None, None, None, [])
    assert (wrote.rowcount, wrote.wrote) == (1, True) and wrote.lastrowid == 1
    con.close()


def test_connection_and_cursor_in_reference_cycles_are_collected(db_path):
    # (sqlite3's connections take no weak references: litelane.dbapi only.)
    import gc
    import weakref

    def make_cycles():
        con = connect(dbapi, db_path)
        box = [con]
        con.set_trace_callback(lambda sql: box)  # connection -> callback -> connection
        cur = con.cursor()
        box.append(cur)
        cur.row_factory = lambda c, r: (box, r)  # cursor -> factory -> cursor
        cur.execute("SELECT 1").fetchone()
        con.close()
        return weakref.ref(con), weakref.ref(cur)

    refs = make_cycles()
    gc.collect()
    assert [r() for r in refs] == [None, None]


@pytest.mark.parametrize("hook", ["trace", "authorizer", "progress"])
def test_an_open_connection_whose_callback_refers_to_it_is_collected(db_path, hook):
    """The engine holds the trace callback, authorizer and progress handler
    for SQLite; the garbage collector must see those references, or a
    connection never closed whose callback refers back to it (a bound method
    of an object holding the connection) is never freed, with its engine."""
    import gc
    import weakref

    def make_cycle():
        con = connect(dbapi, db_path)
        box = [con]
        if hook == "trace":
            con.set_trace_callback(lambda sql: box)
        elif hook == "authorizer":
            con.set_authorizer(lambda *a: 0 if box else 1)
        else:
            con.set_progress_handler(lambda: 0 if box else 1, 1)
        con.execute("SELECT 1").fetchone()
        return weakref.ref(con)

    ref = make_cycle()
    gc.collect()
    assert ref() is None


def test_a_connection_shared_across_threads_when_allowed(mod, db_path):
    con = connect(mod, db_path, check_same_thread=False)
    con.execute("CREATE TABLE t(a)")
    out = []

    def work():
        con.execute("INSERT INTO t VALUES (?)", (1,))
        con.commit()
        out.append(con.execute("SELECT count(*) FROM t").fetchone())

    t = threading.Thread(target=work)
    t.start()
    t.join()
    assert out == [(1,)]
    assert not con.in_transaction
    con.close()


def test_state_set_from_python_is_what_the_fast_path_uses(db_path):
    con = dbapi.connect(db_path, profile="balanced")
    con.execute("CREATE TABLE t(a)")
    con.isolation_level = None  # autocommit: no implicit BEGIN
    con.execute("INSERT INTO t VALUES (1)")
    assert not con.in_transaction and con.total_changes == 1
    con.isolation_level = "DEFERRED"
    cur = con.execute("INSERT INTO t VALUES (2)")
    assert con.in_transaction and cur.lastrowid == 2 and con.total_changes == 2
    con.rollback()
    con.text_factory = lambda b: b.decode().upper()
    con.execute("CREATE TABLE s(v TEXT)")
    con.execute("INSERT INTO s VALUES ('x')")
    assert con.execute("SELECT v FROM s").fetchone() == ("X",)
    con.close()


def test_sql_longer_than_the_limit_is_refused_by_every_entry(mod):
    """SQLITE_LIMIT_SQL_LENGTH, checked before a statement is prepared, on
    the fast path and the others alike (SQLite's own check passed the
    statement: the statement cache trims trailing blanks)."""
    con = mod.connect(":memory:")
    lim = 1000
    con.setlimit(mod.SQLITE_LIMIT_SQL_LENGTH, lim)
    con.execute("CREATE TABLE t(a)")
    cur = con.cursor()
    cur.execute("select 2".ljust(lim))  # at the limit: runs
    too_long = "select 3".ljust(lim + 1)
    for call, args in [
        (con, (too_long,)),
        (cur.execute, (too_long,)),
        (cur.execute, (too_long, ())),
        (con.execute, (too_long,)),
        (cur.executemany, ("insert into t values (?)".ljust(lim + 1), [(1,)])),
        (con.executescript, (too_long,)),
    ]:
        with pytest.raises(mod.DataError, match="query string is too large"):
            call(*args)
    assert con.execute("select count(*) from t").fetchone() == (0,)
    con.setlimit(mod.SQLITE_LIMIT_SQL_LENGTH, lim + 1)
    assert cur.execute(too_long).fetchone() == (3,)
    con.close()


def test_mapping_parameters_are_looked_up_name_by_name(mod):
    """A dict subclass is read through its own `__getitem__`/`__missing__`
    for each name the statement uses (sqlite3: PyObject_GetItem), on the
    fast path and in executemany; an exact dict binds from its items."""
    import collections

    class Missing(dict):
        def __missing__(self, key):
            return "foo"

    class Upper(dict):
        def __getitem__(self, key):
            return key.upper()

    con = mod.connect(":memory:")
    con.execute("CREATE TABLE t(a, b)")
    cases = [
        ("SELECT :a, :b", Missing(a=1), (1, "foo")),
        ("SELECT :x", collections.defaultdict(lambda: 7), (7,)),
        ("SELECT :name", Upper(name="ignored"), ("NAME",)),
        ("SELECT @a, $b", {"a": 1, "b": 2}, (1, 2)),
    ]
    for sql, params, row in cases:
        assert con.execute(sql, params).fetchone() == row, sql
        assert con.cursor().execute(sql, params).fetchone() == row, sql
    with pytest.raises(mod.ProgrammingError, match="binding parameter :zz"):
        con.execute("SELECT :zz", collections.OrderedDict(a=1))
    con.executemany("INSERT INTO t VALUES (:a, :b)", [Missing(a=1), Missing(b=2)])
    assert con.execute("SELECT * FROM t").fetchall() == [(1, "foo"), ("foo", 2)]
    con.close()


def test_a_mapping_that_raises_other_than_lookup_error_is_reported():
    """litelane only: the exception comes back as ProgrammingError naming
    it (sqlite3 raises it as it is); the statement does not run."""

    class Broken(dict):
        def __getitem__(self, key):
            raise ValueError("nope")

    con = dbapi.connect(":memory:")
    with pytest.raises(dbapi.ProgrammingError, match="ValueError: nope"):
        con.execute("SELECT :a", Broken())
    con.close()


def test_a_function_that_writes_through_its_own_connection_is_told_why():
    """litelane only (sqlite3 nests both on its one SQLite connection): the
    write would wait for the statement that called it, so it is refused
    at once, with an error that names the situation in Python's terms."""
    con = dbapi.connect(":memory:")
    con.execute("CREATE TABLE t(a)")
    con.execute("INSERT INTO t VALUES (1)")
    con.commit()
    seen = []

    def dup(v):
        try:
            con.execute("INSERT INTO t VALUES (?)", (v,))
        except dbapi.ProgrammingError as e:
            seen.append(str(e))
        return v

    con.create_function("dup", 1, dup)
    assert con.execute("SELECT dup(a) FROM t").fetchall() == [(1,)]
    assert len(seen) == 1 and "function or callback that writes" in seen[0], seen
    con.close()


@pytest.mark.parametrize("how", ["execute", "cursor", "executemany"])
def test_a_statement_that_does_not_prepare_leaves_no_implicit_transaction(mod, db_path, how):
    """sqlite3 prepares a statement before its implicit BEGIN: a mistyped
    one leaves no transaction open and holds no lock; one that fails while
    it runs (a constraint) leaves the transaction open, as before."""
    con = connect(mod, db_path)
    con.execute("CREATE TABLE t(a UNIQUE)")
    con.commit()

    def run(sql, params):
        if how == "execute":
            return con.execute(sql, params)
        if how == "cursor":
            return con.cursor().execute(sql, params)
        return con.executemany(sql, [params])

    with pytest.raises(mod.OperationalError, match="no such table"):
        run("INSERT INTO nope VALUES (?)", (1,))
    assert not con.in_transaction
    # Nothing held: another connection writes at once, on this thread too.
    other = connect(mod, db_path, timeout=0)
    other.execute("INSERT INTO t VALUES (1)")
    other.commit()
    other.close()
    with pytest.raises(mod.IntegrityError):
        run("INSERT INTO t VALUES (?)", (1,))
    assert con.in_transaction, "a statement that ran and failed keeps it open"
    con.rollback()
    con.close()


@pytest.mark.parametrize("how", ["execute", "executemany"])
def test_a_mistyped_statement_queued_behind_another_thread_leaves_no_transaction(mod, db_path, how):
    """The same when the implicit transaction had to queue for the writer
    (another thread's transaction held it): once its turn came and the
    statement failed to prepare, nothing stays open."""
    con = connect(mod, db_path)
    con.execute("CREATE TABLE t(a)")
    con.commit()
    holder = connect(mod, db_path, check_same_thread=False)
    holding = threading.Event()

    def hold():
        holder.execute("INSERT INTO t VALUES (1)")  # holds the writer
        holding.set()
        time.sleep(0.2)
        holder.commit()

    other_thread = threading.Thread(target=hold)
    other_thread.start()
    holding.wait()
    try:
        with pytest.raises(mod.OperationalError, match="no such table"):
            if how == "execute":
                con.execute("INSERT INTO nope VALUES (?)", (1,))
            else:
                con.executemany("INSERT INTO nope VALUES (?)", [(1,)])
    finally:
        other_thread.join()
    assert not con.in_transaction
    other = connect(mod, db_path, timeout=0)
    other.execute("INSERT INTO t VALUES (2)")
    other.commit()
    assert [r[0] for r in other.execute("SELECT a FROM t ORDER BY a")] == [1, 2]
    for c in (other, holder, con):
        c.close()


@pytest.mark.parametrize("begin", ["BEGIN", "BEGIN IMMEDIATE", "begin deferred", "  BEGIN EXCLUSIVE TRANSACTION"])
@pytest.mark.parametrize(
    "end,kept",
    [
        ("COMMIT", True),
        ("END", True),
        ("commit transaction", True),
        ("ROLLBACK", False),
        ("rollback transaction", False),
    ],
)
def test_explicit_begin_commit_rollback_as_sqlite3(mod, db_path, begin, end, kept):
    """BEGIN, COMMIT and ROLLBACK run through execute with
    isolation_level=None (the natively run control statements): what the
    cursor shows after each, in_transaction, lastrowid kept, and the data."""
    con = connect(mod, db_path, isolation_level=None)
    con.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, v)")
    con.execute("INSERT INTO t(v) VALUES ('before')")
    cur = con.cursor()
    seen = [state(cur.execute(begin)), con.in_transaction, cur.fetchall()]
    seen.append(state(cur.execute("INSERT INTO t(v) VALUES ('in')")))
    seen += [state(cur.execute(end)), con.in_transaction, cur.fetchone(), cur.description]
    assert seen == [(None, -1, 1), True, [], (None, 1, 2), (None, -1, 2), False, None, None]
    rows = [v for (v,) in con.execute("SELECT v FROM t ORDER BY id")]
    assert rows == (["before", "in"] if kept else ["before"])
    con.close()


def test_explicit_control_statements_out_of_place_raise_as_sqlite3(mod, db_path):
    con = connect(mod, db_path, isolation_level=None)
    with pytest.raises(mod.OperationalError, match="no transaction is active"):
        con.execute("COMMIT")
    with pytest.raises(mod.OperationalError, match="no transaction is active"):
        con.execute("ROLLBACK")
    con.execute("BEGIN IMMEDIATE")
    with pytest.raises(mod.OperationalError, match="within a transaction"):
        con.execute("BEGIN")
    assert con.in_transaction  # the failed BEGIN left it open
    con.execute("ROLLBACK")
    assert not con.in_transaction
    con.close()


def test_explicit_begin_waits_for_another_connections_transaction(mod, db_path):
    """A second connection's BEGIN IMMEDIATE waits for the first's COMMIT
    (its timeout), then goes on: the native BEGIN queues as the Python one
    did."""
    a = connect(mod, db_path, isolation_level=None, timeout=10)
    a.execute("CREATE TABLE t(x)")
    a.execute("BEGIN IMMEDIATE")
    a.execute("INSERT INTO t VALUES (1)")
    done = []

    def other():
        b = connect(mod, db_path, isolation_level=None, timeout=10)
        b.execute("BEGIN IMMEDIATE")
        done.append(b.execute("SELECT count(*) FROM t").fetchone()[0])
        b.execute("COMMIT")
        b.close()

    t = threading.Thread(target=other)
    t.start()
    time.sleep(0.3)
    assert done == []  # still waiting for a's turn
    a.execute("COMMIT")
    t.join(10)
    assert done == [1]
    a.close()
