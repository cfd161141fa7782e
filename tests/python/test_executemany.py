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


# A plain `INSERT ... VALUES (?, ...)` runs as multi-row statements in
# litelane (many sets bound to one statement), undone and run again one set
# at a time when one fails. Each case runs on both modules in one test and
# must leave the same rows, error, rowcount and lastrowid.

SCHEMAS = {
    "unique": "CREATE TABLE t(id INTEGER PRIMARY KEY, k INT UNIQUE, v TEXT NOT NULL)",
    "unique on conflict fail": (
        "CREATE TABLE t(id INTEGER PRIMARY KEY, k INT UNIQUE ON CONFLICT FAIL, v TEXT NOT NULL)"
    ),
    "triggers": (
        "CREATE TABLE t(id INTEGER PRIMARY KEY, k INT UNIQUE, v TEXT);"
        "CREATE TABLE log(k);"
        "CREATE TRIGGER fail BEFORE INSERT ON t WHEN NEW.v = 'boom'"
        " BEGIN SELECT RAISE(FAIL, 'boom'); END;"
        "CREATE TRIGGER skip BEFORE INSERT ON t WHEN NEW.v = 'bad'"
        " BEGIN SELECT RAISE(IGNORE); END;"
        "CREATE TRIGGER logged AFTER INSERT ON t BEGIN INSERT INTO log VALUES (NEW.k); END"
    ),
    "strict check": ("CREATE TABLE t(id INTEGER PRIMARY KEY, k INT UNIQUE, v TEXT NOT NULL CHECK (v <> 'bad')) STRICT"),
}
VERBS = ["INSERT", "INSERT OR IGNORE", "INSERT OR REPLACE", "INSERT OR FAIL", "INSERT OR ROLLBACK", "REPLACE"]
BREAKS = {
    "none": None,
    "stored key": (7, "dup"),
    "earlier key": (1003, "dup"),
    "null key": (None, "x"),
    "text key": ("x", "x"),
    "boom": (-1, "boom"),
    "bad": (-1, "bad"),
    "null value": (-1, None),
    "short set": (-1,),
}
M = 1000


def run_case(mod, path, schema, verb, brk, at):
    con = connect(mod, path)
    con.executescript(SCHEMAS[schema])
    con.execute("INSERT INTO t(k, v) VALUES (7, 'old'), (500, 'old')")
    con.commit()
    sets = [(1000 + i, f"v{i}") for i in range(M)]
    if BREAKS[brk] is not None:
        sets[at] = BREAKS[brk]
    error = rowcount = lastrowid = None
    cur = con.cursor()
    try:
        cur.executemany(f"{verb} INTO t(k, v) VALUES (?, ?)", sets)
        rowcount, lastrowid = cur.rowcount, cur.lastrowid
    except mod.Error as e:
        error = (type(e).__name__, str(e))
    state = [con.in_transaction, con.execute("SELECT * FROM t ORDER BY id").fetchall()]
    if schema == "triggers":
        state.append(con.execute("SELECT * FROM log").fetchall())
    con.rollback()
    con.close()
    return error, rowcount, lastrowid, state


@pytest.mark.parametrize("schema", list(SCHEMAS))
@pytest.mark.parametrize("verb", VERBS)
@pytest.mark.parametrize("brk,at", [("none", 0)] + [(b, at) for b in list(BREAKS)[1:] for at in (0, 128, 999)])
def test_multirow_inserts_leave_what_sqlite3_leaves(tmp_path, schema, verb, brk, at):
    want = run_case(std, str(tmp_path / "std.db"), schema, verb, brk, at)
    got = run_case(dbapi, str(tmp_path / "ll.db"), schema, verb, brk, at)
    assert got == want


def test_a_python_function_in_a_trigger_runs_once_per_set_even_when_a_set_fails(tmp_path):
    """Sets run twice only where no Python code can see it: with a function
    installed, a failing executemany calls it exactly as sqlite3 does."""
    calls = {}
    for mod in (std, dbapi):
        con = connect(mod, str(tmp_path / f"{mod.__name__}.db"))
        seen = []
        con.create_function("seen", 1, seen.append)
        con.executescript(
            "CREATE TABLE t(k INT UNIQUE);CREATE TRIGGER tr AFTER INSERT ON t BEGIN SELECT seen(NEW.k); END;"
        )
        with pytest.raises(mod.IntegrityError):
            con.executemany("INSERT INTO t VALUES (?)", [(i,) for i in range(M)] + [(5,)])
        calls[mod] = seen
        con.close()
    assert calls[dbapi] == calls[std] == list(range(M))


@pytest.mark.parametrize("brk", ["none", "earlier key", "boom", "short set"])
def test_native_executemany_of_a_plain_insert_is_all_or_nothing(tmp_path, brk):
    import litelane

    db = litelane.open(str(tmp_path / "n.db"), profile="balanced")
    db.executescript(SCHEMAS["triggers"])
    sets = [(1000 + i, f"v{i}") for i in range(M)]
    if BREAKS[brk] is not None:
        sets[500] = BREAKS[brk]
    if brk == "none":
        assert db.executemany("INSERT INTO t(k, v) VALUES (?, ?)", sets).rowcount == M
        assert db.query("SELECT count(*) FROM t")[0][0] == M
        assert db.query("SELECT count(*) FROM log")[0][0] == M
    else:
        with pytest.raises(litelane.Error):
            db.executemany("INSERT INTO t(k, v) VALUES (?, ?)", sets)
        assert db.query("SELECT count(*) FROM t")[0][0] == 0
    db.close()


@pytest.mark.parametrize(
    "sql,sets",
    [
        ("INSERT INTO missing VALUES (?)", [(1,)]),  # does not compile: no BEGIN
        ("INSRT INTO t VALUES (?)", [(1,)]),
        ("INSERT INTO t(nope) VALUES (?)", [(1,)]),
        ("INSERT INTO t VALUES (?)", [(1, 2)]),  # compiles, first set fails: BEGIN ran
        ("INSERT INTO t VALUES (?)", [(object(),)]),
        ("INSERT INTO t VALUES (?)", []),
        ("UPDATE t SET x = ?", [(1,)]),
    ],
)
def test_in_transaction_after_executemany_is_sqlite3s(tmp_path, sql, sets):
    """In the legacy mode sqlite3 prepares the statement before its
    implicit BEGIN: a statement that does not compile leaves no transaction
    open, one whose first set fails does."""
    seen = []
    for m in (std, dbapi):
        con = m.connect(str(tmp_path / f"{m.__name__}.db"))
        con.execute("CREATE TABLE t(x)")
        con.commit()
        try:
            con.executemany(sql, sets)
            outcome = "ok"
        except Exception as e:
            outcome = type(e).__name__
        seen.append((outcome, con.in_transaction))
        con.close()
    assert seen[1] == seen[0]
