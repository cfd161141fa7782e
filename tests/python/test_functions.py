"""User-defined functions, aggregates, window functions, collations, and the
authorizer, progress handler and trace callback of litelane.dbapi, against
the standard library's sqlite3 where both can run the same code.

Every SQLite connection of an engine (the writer, each reader) must have
what a dbapi connection registered, so several tests run reads from several
threads at once, each holding its own reader."""

import sqlite3
import sys
import threading

import litelane.dbapi as dbapi
import pytest
from two_modules import outcome

C = dbapi  # the SQLITE_* constants


def both(tmp_path, **kw):
    """A stdlib connection and a litelane one, on files of their own."""
    std = sqlite3.connect(str(tmp_path / "std.db"), **kw)
    ll = dbapi.connect(str(tmp_path / "ll.db"), **kw)
    return std, ll


# --- scalar functions -------------------------------------------------------

RETURNS = [
    # (name, narg, python function, SQL)
    ("one", 0, lambda: 1, "SELECT one()"),
    ("boom", 0, lambda: 1 / 0, "SELECT boom()"),
    ("huge", 0, lambda: 2**70, "SELECT huge()"),
    ("adict", 0, lambda: {}, "SELECT adict()"),
    ("alist", 0, lambda: [1], "SELECT alist()"),
    ("yes", 0, lambda: True, "SELECT yes()"),
    ("view", 0, lambda: memoryview(b"ab"), "SELECT view()"),
    ("barr", 0, lambda: bytearray(b"\x00\xff"), "SELECT barr()"),
    ("none", 0, lambda: None, "SELECT none()"),
    ("flt", 0, lambda: 2.5, "SELECT flt()"),
    ("text", 0, lambda: "héllo \U0001f600", "SELECT text()"),
    ("strsub", 0, lambda: type("S", (str,), {})("sub"), "SELECT strsub()"),
    ("intsub", 0, lambda: type("I", (int,), {})(3), "SELECT intsub()"),
    ("maxint", 0, lambda: 2**63 - 1, "SELECT maxint()"),
    ("minint", 0, lambda: -(2**63), "SELECT minint()"),
    ("over", 0, lambda: 2**63, "SELECT over()"),
    ("args", -1, lambda *a: repr(a), "SELECT args(1, 2.5, 'x', x'00ff', NULL, 9223372036854775807)"),
    ("nargs", -1, lambda *a: len(a), "SELECT nargs(), nargs(1), nargs(1, 2, 3)"),
    ("wrongn", 1, lambda a: a, "SELECT wrongn(1, 2)"),
    ("raises_type", 1, lambda a: a + 1, "SELECT raises_type('x')"),
    ("echo", 1, lambda a: a, "SELECT echo(x'') , echo(''), echo(-0.0)"),
]


def test_function_results_and_errors_match_sqlite3(tmp_path):
    std, ll = both(tmp_path)
    for name, narg, fn, _ in RETURNS:
        std.create_function(name, narg, fn)
        ll.create_function(name, narg, fn)
    for name, _, _, sql in RETURNS:
        assert outcome(ll, sql) == outcome(std, sql), name
    # The classes and messages, spelled out for the ones programs match on.
    assert outcome(ll, "SELECT boom()") == ("OperationalError", "user-defined function raised exception")
    assert outcome(ll, "SELECT huge()") == ("DataError", "string or blob too big")


def test_function_arguments_are_converted_as_sqlite3_does(tmp_path):
    std, ll = both(tmp_path)
    seen = {"std": [], "ll": []}
    std.create_function("keep", -1, lambda *a: seen["std"].append(a))
    ll.create_function("keep", -1, lambda *a: seen["ll"].append(a))
    for con in (std, ll):
        con.execute("CREATE TABLE t(i INTEGER, r REAL, s TEXT, b BLOB, n)")
        con.execute("INSERT INTO t VALUES (?, ?, ?, ?, ?)", (-5, 1e300, "é\x00z", b"\x00\x01", None))
        con.commit()
        con.execute("SELECT keep(i, r, s, b, n) FROM t").fetchall()
    assert seen["ll"] == seen["std"]
    assert seen["ll"] == [(-5, 1e300, "é\x00z", b"\x00\x01", None)]


def test_removing_and_replacing_a_function(tmp_path):
    std, ll = both(tmp_path)
    for con in (std, ll):
        con.create_function("f", 1, lambda x: x * 2)
        assert con.execute("SELECT f(2)").fetchone() == (4,)
        con.create_function("F", 1, lambda x: x * 3)  # names ignore case
        assert con.execute("SELECT f(2)").fetchone() == (6,)
        con.create_function("f", 2, lambda x, y: x * y)  # another arity: kept apart
        assert con.execute("SELECT f(2), f(2, 5)").fetchone() == (6, 10)
    # None removes the function (the documented sqlite3 behaviour; Python
    # 3.11's module still calls None and fails).
    ll.create_function("f", 1, None)
    assert outcome(ll, "SELECT f(2)") == ("OperationalError", "wrong number of arguments to function f()")
    assert outcome(ll, "SELECT f(2, 5)") == [(10,)]
    ll.create_function("f", 2, None)
    assert outcome(ll, "SELECT f(2, 5)") == ("OperationalError", "no such function: f")


@pytest.mark.parametrize("name,narg", [("x" * 300, 0), ("f", -5), ("f", -2)])
def test_a_function_sqlite_refuses_is_an_error_at_creation(tmp_path, name, narg):
    std, ll = both(tmp_path)
    with pytest.raises(sqlite3.OperationalError) as want:
        std.create_function(name, narg, lambda *a: 1)
    with pytest.raises(dbapi.OperationalError) as got:
        ll.create_function(name, narg, lambda *a: 1)
    assert str(got.value) == str(want.value) == "Error creating function"


def test_functions_on_a_closed_connection_are_refused(db_path):
    con = dbapi.connect(db_path)
    con.close()
    for call in (
        lambda: con.create_function("f", 0, lambda: 1),
        lambda: con.create_aggregate("a", 0, object),
        lambda: con.create_window_function("w", 0, object),
        lambda: con.create_collation("c", lambda a, b: 0),
        lambda: con.set_authorizer(None),
        lambda: con.set_progress_handler(None, 1),
        lambda: con.set_trace_callback(None),
    ):
        with pytest.raises(dbapi.ProgrammingError):
            call()


def run_on_readers(db_path, n, sql, prepare=None):
    """Runs `sql` from `n` threads, each on its own connection, all inside
    their statement at once (the function `meet()` waits for all `n`), so
    they hold `n` different readers. Returns each thread's rows or error."""
    results = [None] * n
    cons = [dbapi.connect(db_path, check_same_thread=False, readers=n) for _ in range(n)]

    def work(i):
        try:
            results[i] = cons[i].execute(sql).fetchall()
        except Exception as e:  # noqa: BLE001 - reported to the test
            results[i] = e

    threads = [threading.Thread(target=work, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
        assert not t.is_alive(), "a read is stuck"
    for c in cons:
        c.close()
    return results


def test_a_function_works_on_the_writer_and_on_every_reader(db_path):
    n = 4
    con = dbapi.connect(db_path, readers=n, isolation_level=None)
    meeting = threading.Barrier(n, timeout=20)
    threads_seen = set()

    def meet(x):
        threads_seen.add(threading.get_ident())
        meeting.wait()  # all n reads are inside their snapshot now
        return x * 10

    con.create_function("meet", 1, meet)
    con.create_function("tag", 1, lambda x: f"<{x}>", deterministic=True)
    con.execute("CREATE TABLE t(x)")
    # On the writer: an INSERT that calls the function.
    con.execute("INSERT INTO t VALUES (tag(1))")
    assert con.execute("SELECT x FROM t").fetchall() == [("<1>",)]
    # On n readers at once: every one of them has both functions.
    results = run_on_readers(db_path, n, "SELECT meet(7), tag(2) FROM t")
    assert results == [[(70, "<2>")]] * n
    assert len(threads_seen) == n
    con.close()


def test_functions_are_engine_wide_and_not_kept_after_the_engine_closes(db_path):
    a = dbapi.connect(db_path)
    b = dbapi.connect(db_path)
    a.create_function("f", 0, lambda: 42)
    # A documented difference: sqlite3's functions are per connection.
    assert b.execute("SELECT f()").fetchone() == (42,)
    a.close()
    b.close()
    c = dbapi.connect(db_path)
    with pytest.raises(dbapi.OperationalError, match="no such function: f"):
        c.execute("SELECT f()")
    c.close()


def test_a_function_created_inside_an_open_transaction_works_in_it(tmp_path):
    std, ll = both(tmp_path)
    for con in (std, ll):
        con.execute("CREATE TABLE t(x)")
        con.commit()
        con.execute("INSERT INTO t VALUES (1)")  # opens the transaction
        assert con.in_transaction
        con.create_function("inc", 1, lambda x: x + 1)
        con.execute("UPDATE t SET x = inc(x)")
        assert con.execute("SELECT inc(x) FROM t").fetchall() == [(3,)]
        con.commit()
        assert con.execute("SELECT x FROM t").fetchall() == [(2,)]


def test_a_function_created_by_another_connection_during_a_transaction(db_path):
    a = dbapi.connect(db_path)
    b = dbapi.connect(db_path)
    a.execute("CREATE TABLE t(x)")
    a.commit()
    a.execute("INSERT INTO t VALUES (1)")  # a's transaction holds the writer
    b.create_function("twice", 1, lambda x: 2 * x)  # never waits for it
    a.execute("UPDATE t SET x = twice(x)")
    a.commit()
    assert b.execute("SELECT twice(x) FROM t").fetchone() == (4,)


# --- deterministic functions in the schema ------------------------------------


def test_a_deterministic_function_in_an_index_and_a_generated_column(tmp_path):
    std, ll = both(tmp_path)
    for con in (std, ll):
        con.create_function("norm", 1, lambda s: s.strip().lower(), deterministic=True)
        con.executescript(
            """
            CREATE TABLE people(name TEXT, key TEXT GENERATED ALWAYS AS (norm(name)) STORED);
            CREATE INDEX people_norm ON people(norm(name));
            INSERT INTO people(name) VALUES ('  Ada '), ('GRACE'), ('alan');
            """
        )
        plan = con.execute("EXPLAIN QUERY PLAN SELECT name FROM people WHERE norm(name) = 'grace'").fetchall()
        assert any("people_norm" in row[3] for row in plan), plan
    q = "SELECT name, key FROM people WHERE norm(name) = 'grace'"
    assert ll.execute(q).fetchall() == std.execute(q).fetchall() == [("GRACE", "grace")]
    assert ll.execute("SELECT key FROM people ORDER BY 1").fetchall() == [("ada",), ("alan",), ("grace",)]


def test_a_non_deterministic_function_is_refused_in_an_index_as_by_sqlite3(tmp_path):
    std, ll = both(tmp_path)
    for con in (std, ll):
        con.create_function("nd", 1, lambda s: s)
        con.execute("CREATE TABLE t(x)")
    sql = "CREATE INDEX t_nd ON t(nd(x))"
    assert outcome(ll, sql) == outcome(std, sql)
    assert "non-deterministic functions prohibited" in outcome(ll, sql)[1]


def test_an_engine_opened_later_parses_a_schema_that_uses_the_function(db_path):
    con = dbapi.connect(db_path)
    con.create_function("rev", 1, lambda s: s[::-1], deterministic=True)
    con.executescript(
        """
        CREATE TABLE w(word TEXT, back TEXT AS (rev(word)));
        CREATE INDEX w_rev ON w(rev(word));
        INSERT INTO w(word) VALUES ('abc'), ('level'), ('xyz');
        """
    )
    con.close()  # the engine closes with its last connection
    n = 3
    later = dbapi.connect(db_path, readers=n)
    later.create_function("rev", 1, lambda s: s[::-1], deterministic=True)
    later.execute("INSERT INTO w(word) VALUES ('pots')")
    later.commit()
    assert later.execute("SELECT word FROM w WHERE rev(word) = 'stop'").fetchall() == [("pots",)]
    assert later.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    # Every reader of the new engine parses the schema with it.
    later.create_function("meet", 0, _barrier_fn(n))
    results = run_on_readers(db_path, n, "SELECT meet(), back FROM w WHERE rev(word) = 'cba'")
    assert results == [[(1, "cba")]] * n
    later.close()


def _barrier_fn(n):
    b = threading.Barrier(n, timeout=20)

    def meet():
        b.wait()
        return 1

    return meet


# --- aggregates and window functions --------------------------------------------


class Sum:
    def __init__(self):
        self.n = 0

    def step(self, x):
        self.n += x

    def inverse(self, x):
        self.n -= x

    def value(self):
        return self.n

    def finalize(self):
        return self.n


class BadInit(Sum):
    def __init__(self):
        raise ValueError("init")


class BadStep(Sum):
    def step(self, x):
        raise ValueError("step")


class BadFinalize(Sum):
    def finalize(self):
        raise ValueError("finalize")


class NoStep:
    def finalize(self):
        return 1


class BadValue(Sum):
    def value(self):
        raise ValueError("value")


class BadInverse(Sum):
    def inverse(self, x):
        raise ValueError("inverse")


class NoInverse:
    def __init__(self):
        self.n = 0

    def step(self, x):
        self.n += x

    def value(self):
        return self.n

    def finalize(self):
        return self.n


class Concat:
    def __init__(self):
        self.parts = []

    def step(self, *args):
        self.parts.append("|".join(map(str, args)))

    def finalize(self):
        return ",".join(self.parts)


AGGREGATES = [
    ("agg_sum", 1, Sum),
    ("agg_bad_init", 1, BadInit),
    ("agg_bad_step", 1, BadStep),
    ("agg_bad_final", 1, BadFinalize),
    ("agg_no_step", 1, NoStep),
    ("agg_cat", -1, Concat),
]
AGG_SQL = [
    "SELECT agg_sum(x) FROM t",
    "SELECT agg_sum(x) FROM t WHERE x > 100",  # no row: NULL, finalize not called
    "SELECT agg_sum(x) FROM t GROUP BY x % 2 ORDER BY 1",
    "SELECT agg_bad_init(x) FROM t",
    "SELECT agg_bad_init(x) FROM t WHERE x > 100",
    "SELECT agg_bad_step(x) FROM t",
    "SELECT agg_bad_final(x) FROM t",
    "SELECT agg_no_step(x) FROM t",
    "SELECT agg_cat(x, 'a') FROM t",
    "SELECT agg_cat() FROM t",
]

WINDOWS = [
    ("w_sum", 1, Sum),
    ("w_bad_value", 1, BadValue),
    ("w_bad_inverse", 1, BadInverse),
    ("w_no_inverse", 1, NoInverse),
]
WINDOW_SQL = [
    "SELECT x, w_sum(x) OVER (ORDER BY x ROWS BETWEEN 1 PRECEDING AND 1 FOLLOWING) FROM t",
    "SELECT x, w_sum(x) OVER (ORDER BY x) FROM t",
    "SELECT w_sum(x) FROM t",
    "SELECT x, w_bad_value(x) OVER (ORDER BY x ROWS BETWEEN 1 PRECEDING AND 1 FOLLOWING) FROM t",
    "SELECT x, w_bad_inverse(x) OVER (ORDER BY x ROWS BETWEEN 1 PRECEDING AND 1 FOLLOWING) FROM t",
    "SELECT x, w_no_inverse(x) OVER (ORDER BY x ROWS BETWEEN 1 PRECEDING AND 1 FOLLOWING) FROM t",
]


def test_aggregates_and_window_functions_match_sqlite3(tmp_path):
    std, ll = both(tmp_path)
    for con in (std, ll):
        con.execute("CREATE TABLE t(x)")
        con.executemany("INSERT INTO t VALUES (?)", [(i,) for i in range(1, 6)])
        con.commit()
        for name, n, cls in AGGREGATES:
            con.create_aggregate(name, n, cls)
        for name, n, cls in WINDOWS:
            con.create_window_function(name, n, cls)
    for sql in AGG_SQL + WINDOW_SQL:
        assert outcome(ll, sql) == outcome(std, sql), sql
    assert outcome(ll, AGG_SQL[0]) == [(15,)]
    assert outcome(ll, WINDOW_SQL[0]) == [(1, 3), (2, 6), (3, 9), (4, 12), (5, 9)]
    assert outcome(ll, "SELECT agg_bad_step(x) FROM t") == (
        "OperationalError",
        "user-defined aggregate's 'step' method raised error",
    )
    assert outcome(ll, WINDOW_SQL[-1]) == ("OperationalError", "user-defined aggregate's 'inverse' method not defined")
    # None removes them.
    ll.create_aggregate("agg_sum", 1, None)
    ll.create_window_function("w_sum", 1, None)
    for sql in ("SELECT agg_sum(x) FROM t", WINDOW_SQL[0]):
        assert outcome(ll, sql)[1] in ("no such function: agg_sum", "no such function: w_sum")


def test_an_aggregate_runs_on_every_reader(db_path):
    n = 3
    con = dbapi.connect(db_path, readers=n)
    con.execute("CREATE TABLE t(x)")
    con.executemany("INSERT INTO t VALUES (?)", [(1,), (2,)])
    con.commit()
    con.create_aggregate("agg_sum", 1, Sum)
    con.create_function("meet", 0, _barrier_fn(n))
    assert run_on_readers(db_path, n, "SELECT agg_sum(x) + meet() FROM t") == [[(4,)]] * n
    con.close()


# --- collations -------------------------------------------------------------------


def reverse_order(a, b):
    return (a < b) - (a > b)


def test_a_collation_in_order_by_matches_sqlite3(tmp_path):
    std, ll = both(tmp_path)
    for con in (std, ll):
        con.execute("CREATE TABLE t(s TEXT)")
        con.executemany("INSERT INTO t VALUES (?)", [("b",), ("a",), ("C",), ("é",)])
        con.commit()
        con.create_collation("rev", reverse_order)
        con.create_collation("weird", lambda a, b: "not an int")
        con.create_collation("huge", lambda a, b: (2**80) * ((a > b) - (a < b)))
    for sql in (
        "SELECT s FROM t ORDER BY s COLLATE rev",
        "SELECT s FROM t ORDER BY s COLLATE REV",  # collation names ignore case
        "SELECT s FROM t WHERE s = 'B' COLLATE rev",
        "SELECT s FROM t ORDER BY s COLLATE huge",
        "SELECT count(*) FROM t WHERE s = 'zzz' COLLATE weird",
    ):
        assert outcome(ll, sql) == outcome(std, sql), sql
    assert outcome(ll, "SELECT s FROM t ORDER BY s COLLATE rev") == [("é",), ("b",), ("a",), ("C",)]
    for con in (std, ll):
        con.create_collation("rev", None)
    sql = "SELECT s FROM t ORDER BY s COLLATE rev"
    assert outcome(ll, sql) == outcome(std, sql) == ("OperationalError", "no such collation sequence: rev")
    with pytest.raises(TypeError, match="parameter must be callable"):
        ll.create_collation("x", 42)


def test_a_collation_in_the_schema_works_on_every_reader(db_path):
    n = 3
    con = dbapi.connect(db_path, readers=n)
    con.create_collation("rev", reverse_order)
    con.create_function("meet", 0, _barrier_fn(n))
    con.executescript(
        "CREATE TABLE t(s TEXT COLLATE rev); CREATE INDEX t_s ON t(s);INSERT INTO t VALUES ('a'), ('c'), ('b');"
    )
    got = run_on_readers(db_path, n, "SELECT group_concat(s, '') || meet() FROM (SELECT s FROM t ORDER BY s)")
    assert got == [[("cba1",)]] * n
    con.close()


# --- authorizer -------------------------------------------------------------------


def deny_reading_secret(action, arg1, arg2, dbname, source):
    if action == C.SQLITE_READ and arg1 == "secret":
        return C.SQLITE_DENY
    return C.SQLITE_OK


def test_an_authorizer_denying_a_read_matches_sqlite3(tmp_path):
    std, ll = both(tmp_path)
    for con in (std, ll):
        con.executescript(
            "CREATE TABLE secret(x); INSERT INTO secret VALUES (1);CREATE TABLE open(y); INSERT INTO open VALUES (2);"
        )
        con.set_authorizer(deny_reading_secret)
    for sql in ("SELECT x FROM secret", "SELECT y FROM open", "SELECT * FROM open, secret"):
        assert outcome(ll, sql) == outcome(std, sql), sql
    assert outcome(ll, "SELECT x FROM secret") == ("DatabaseError", "access to secret.x is prohibited")
    # The writer too: an UPDATE that reads the column.
    sql = "UPDATE open SET y = (SELECT x FROM secret)"
    assert outcome(ll, sql) == outcome(std, sql)
    # IGNORE reads NULL; an exception or another value denies.
    for cb in (
        lambda *a: C.SQLITE_IGNORE if a[0] == C.SQLITE_READ else C.SQLITE_OK,
        lambda *a: 1 / 0,
        lambda *a: "yes",
        lambda *a: None,
    ):
        std.set_authorizer(cb)
        ll.set_authorizer(cb)
        assert outcome(ll, "SELECT x FROM secret") == outcome(std, "SELECT x FROM secret")
    ll.set_authorizer(None)
    std.set_authorizer(None)
    assert outcome(ll, "SELECT x FROM secret") == outcome(std, "SELECT x FROM secret") == [(1,)]


def test_the_authorizer_gets_the_arguments_sqlite3_gives(tmp_path):
    std = sqlite3.connect(str(tmp_path / "std.db"))
    ll = dbapi.connect(str(tmp_path / "ll.db"), readers=1)
    calls = {"std": [], "ll": []}
    for key, con in (("std", std), ("ll", ll)):
        con.execute("CREATE TABLE t(a, b)")
        con.execute("CREATE VIEW v AS SELECT a FROM t")
        con.commit()
        # The reader loads the new schema now, not while preparing below
        # (SQLite would prepare twice, and authorize twice).
        con.execute("SELECT * FROM v").fetchall()
        con.set_authorizer(lambda *args, key=key: calls[key].append(args) or C.SQLITE_OK)
    for sql in (
        "SELECT a, b FROM t",
        "SELECT * FROM v",
        "SELECT abs(a) FROM t",
        "PRAGMA user_version",
        "WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c WHERE n < 2) SELECT n FROM c",
    ):
        calls["std"].clear()
        calls["ll"].clear()
        std.execute(sql).fetchall()
        ll.execute(sql).fetchall()
        assert calls["ll"] == calls["std"], sql
        assert calls["ll"], sql


def test_an_authorizer_applies_only_to_its_own_connection(db_path):
    # One reader: every statement of both connections runs on it, and the
    # same SQL text is reused from its statement cache.
    a = dbapi.connect(db_path, readers=1)
    b = dbapi.connect(db_path, readers=1)
    a.executescript("CREATE TABLE secret(x); INSERT INTO secret VALUES (1);")
    sql = "SELECT x FROM secret"
    assert a.execute(sql).fetchall() == [(1,)]  # prepared and cached, no authorizer
    b.set_authorizer(deny_reading_secret)
    with pytest.raises(dbapi.DatabaseError, match="prohibited"):
        b.execute(sql)  # not served from the cache prepared without it
    assert a.execute(sql).fetchall() == [(1,)]
    ignore = lambda *args: C.SQLITE_IGNORE if args[0] == C.SQLITE_READ else C.SQLITE_OK  # noqa: E731
    b.set_authorizer(ignore)
    assert b.execute(sql).fetchall() == [(None,)]
    assert a.execute(sql).fetchall() == [(1,)], "a statement prepared under b's authorizer was reused"
    # In b's transaction on the writer, too.
    b.execute("INSERT INTO secret VALUES (2)")
    assert b.execute(sql).fetchall() == [(None,), (None,)]
    b.commit()
    assert sorted(a.execute(sql).fetchall()) == [(1,), (2,)]


# --- progress handler ---------------------------------------------------------------


def test_a_progress_handler_matches_sqlite3(tmp_path):
    std, ll = both(tmp_path)
    sql = "WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c WHERE n < 1000) SELECT sum(n) FROM c"
    for con in (std, ll):
        calls = []
        con.set_progress_handler(lambda calls=calls: calls.append(1), 100)
        assert con.execute(sql).fetchall() == [(500500,)]
        assert calls, "the handler was called"
        con.set_progress_handler(lambda: 1, 1)
        with pytest.raises(con.OperationalError, match="interrupted"):
            con.execute(sql)
        con.set_progress_handler(lambda: 1 / 0, 1)
        assert outcome(con, sql) == ("OperationalError", "interrupted")
        con.set_progress_handler(None, 1)
        assert con.execute(sql).fetchall() == [(500500,)]
        con.set_progress_handler(lambda: 1, 0)  # n < 1: no handler
        assert con.execute(sql).fetchall() == [(500500,)]


def test_a_progress_handler_counts_opcodes_and_applies_only_to_its_connection(db_path):
    a = dbapi.connect(db_path, readers=1)
    b = dbapi.connect(db_path, readers=1)
    sql = "WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c WHERE n < 2000) SELECT count(*) FROM c"
    every1, every50 = [], []
    a.set_progress_handler(lambda: every1.append(1), 1)
    b.set_progress_handler(lambda: every50.append(1), 50)
    a.execute(sql).fetchall()
    b.execute(sql).fetchall()
    assert len(every1) > 10 * len(every50) > 0
    a.set_progress_handler(lambda: 1, 1)
    with pytest.raises(dbapi.OperationalError, match="interrupted"):
        a.execute(sql)
    assert b.execute(sql).fetchall() == [(2000,)]  # b is not aborted by a's handler
    a.set_progress_handler(None, 1)
    assert a.execute(sql).fetchall() == [(2000,)]


# --- trace callback -------------------------------------------------------------------


def test_a_trace_callback_sees_each_statement_with_its_values(tmp_path):
    std, ll = both(tmp_path, isolation_level=None)
    traced = {"std": [], "ll": []}
    std.set_trace_callback(traced["std"].append)
    ll.set_trace_callback(traced["ll"].append)
    for con in (std, ll):
        con.execute("CREATE TABLE t(a, b)")
        con.execute("INSERT INTO t VALUES (?, ?)", (1, "it's"))
        con.executemany("INSERT INTO t VALUES (?, ?)", [(2, None), (3, b"\x01")])
        con.execute("SELECT a FROM t WHERE a > :lo", {"lo": 1}).fetchall()
        con.executescript("UPDATE t SET a = a + 1; DELETE FROM t WHERE a > 3;")
    # A script's statement after the first is traced with the blanks before
    # it by sqlite3 (it prepares the rest of the script); litelane prepares
    # each statement alone, as rusqlite's statement cache trims it.
    assert traced["ll"] == [s.lstrip() for s in traced["std"]]
    assert "INSERT INTO t VALUES (1, 'it''s')" in traced["ll"]
    for con in (std, ll):
        con.set_trace_callback(None)
        con.execute("SELECT 1")
    assert traced["ll"] == [s.lstrip() for s in traced["std"]]
    assert "SELECT 1" not in traced["ll"]


def test_a_trace_callback_applies_only_to_its_connection_and_its_errors_are_ignored(db_path):
    a = dbapi.connect(db_path, isolation_level=None)
    b = dbapi.connect(db_path, isolation_level=None)
    traced = []
    a.set_trace_callback(traced.append)
    a.execute("CREATE TABLE foo(x)")
    b.execute("CREATE TABLE bar(x)")
    a.execute("INSERT INTO foo VALUES (1)")
    assert traced == ["CREATE TABLE foo(x)", "INSERT INTO foo VALUES (1)"]
    b.set_trace_callback(lambda s: 1 / 0)
    assert b.execute("SELECT count(*) FROM bar").fetchone() == (0,)


# --- exceptions in callbacks --------------------------------------------------------


def test_callback_tracebacks_go_to_the_unraisable_hook_when_enabled(tmp_path, monkeypatch):
    caught = []
    monkeypatch.setattr(sys, "unraisablehook", lambda u: caught.append(u.exc_type))
    std, ll = both(tmp_path)
    for con in (std, ll):
        con.create_function("boom", 0, lambda: 1 / 0)
        con.create_collation("bad", lambda a, b: 1 / 0)
    sql = "SELECT boom()"
    try:
        for module in (sqlite3, dbapi):
            module.enable_callback_tracebacks(True)
        caught.clear()
        assert outcome(std, sql) == ("OperationalError", "user-defined function raised exception")
        from_std = list(caught)
        caught.clear()
        assert outcome(ll, sql) == ("OperationalError", "user-defined function raised exception")
        assert caught == from_std == [ZeroDivisionError]
        caught.clear()
        assert ll.execute("SELECT 'b' UNION SELECT 'a' ORDER BY 1 COLLATE bad").fetchall()
        assert caught and set(caught) == {ZeroDivisionError}
    finally:
        for module in (sqlite3, dbapi):
            module.enable_callback_tracebacks(False)
    caught.clear()
    assert outcome(ll, sql) == ("OperationalError", "user-defined function raised exception")
    assert caught == []


def test_a_callback_that_runs_sql_on_another_connection_does_not_deadlock(db_path):
    a = dbapi.connect(db_path, check_same_thread=False, readers=2)
    b = dbapi.connect(db_path, check_same_thread=False, readers=2)
    a.execute("CREATE TABLE t(x)")
    a.execute("INSERT INTO t VALUES (5)")
    a.commit()
    b.create_function("lookup", 0, lambda: b.execute("SELECT x FROM t").fetchone()[0])
    assert a.execute("SELECT lookup() + 1").fetchone() == (6,)
    # From the writer (an INSERT computed by a read on a reader).
    a.execute("INSERT INTO t SELECT lookup() * 2")
    a.commit()
    assert sorted(a.execute("SELECT x FROM t").fetchall()) == [(5,), (10,)]


class _BadBool:
    def __bool__(self):
        raise ZeroDivisionError("bool")


def _returns_dict():
    return {}


def _returns_huge():
    return 2**64


def _returns_noncontiguous():
    return memoryview(b"blob")[::2]


def _raises_memory():
    raise MemoryError


def _bad_progress():
    return _BadBool()


class _FinalDict:
    def step(self, x):
        pass

    def finalize(self):
        return {}


UNRAISABLE = [
    # (setup on a connection, SQL)
    (lambda c: c.create_function("d", 0, _returns_dict), "SELECT d()"),
    (lambda c: c.create_function("h", 0, _returns_huge), "SELECT h()"),
    (lambda c: c.create_function("nc", 0, _returns_noncontiguous), "SELECT nc()"),
    (lambda c: c.create_function("sur", 1, chr), "SELECT sur(56575)"),
    (lambda c: c.create_aggregate("fd", 1, _FinalDict), "SELECT fd(1)"),
    (lambda c: c.set_progress_handler(_bad_progress, 1), "SELECT 1"),
]


@pytest.mark.parametrize("setup,sql", UNRAISABLE)
def test_what_a_failing_callback_raises_and_reports_matches_sqlite3(tmp_path, monkeypatch, setup, sql):
    seen = []

    def hook(u):
        seen.append((u.exc_type.__name__, str(u.exc_value), getattr(u.object, "__name__", None)))

    monkeypatch.setattr(sys, "unraisablehook", hook)
    std, ll = both(tmp_path)
    setup(std)
    setup(ll)
    results = {}
    for name, module, con in (("std", sqlite3, std), ("ll", dbapi, ll)):
        module.enable_callback_tracebacks(True)
        try:
            seen.clear()
            results[name] = (outcome(con, sql), list(seen))
        finally:
            module.enable_callback_tracebacks(False)
    assert results["ll"] == results["std"]
    assert results["ll"][1], "the exception was reported"


def test_memory_error_in_a_function_is_a_memory_error(tmp_path):
    std, ll = both(tmp_path)
    for con in (std, ll):
        con.create_function("oom", 0, _raises_memory)
        with pytest.raises(MemoryError):
            con.execute("SELECT oom()")


def test_a_non_contiguous_buffer_parameter_is_refused_as_by_sqlite3(tmp_path):
    std, ll = both(tmp_path)
    for con in (std, ll):
        with pytest.raises(BufferError, match="^memoryview: underlying buffer is not C-contiguous$"):
            con.execute("SELECT ?", (memoryview(b"blob")[::2],))


def test_errors_creating_aggregates_and_window_functions_match_sqlite3(tmp_path):
    std, ll = both(tmp_path)
    for method in ("create_aggregate", "create_window_function"):
        want = got = None
        try:
            getattr(std, method)("bad", -100, Sum)
        except Exception as e:  # noqa: BLE001 - compared below
            want = (type(e).__name__, str(e))
        try:
            getattr(ll, method)("bad", -100, Sum)
        except Exception as e:  # noqa: BLE001 - compared below
            got = (type(e).__name__, str(e))
        assert got == want and got is not None, method


def test_registering_the_same_function_again_keeps_it_and_a_new_flag_counts(db_path):
    def double(x):
        return 2 * x

    cons = [dbapi.connect(db_path) for _ in range(20)]
    for con in cons:  # as programs do: the same functions on every connection
        con.create_function("double", 1, double)
    con = cons[0]
    con.execute("CREATE TABLE t(x)")
    assert "non-deterministic" in outcome(con, "CREATE INDEX t_d ON t(double(x))")[1]
    # The same object, now deterministic: installed again, with the flag.
    cons[-1].create_function("double", 1, double, deterministic=True)
    con.execute("CREATE INDEX t_d ON t(double(x))")
    con.execute("INSERT INTO t VALUES (21)")
    con.commit()
    assert con.execute("SELECT double(x) FROM t WHERE double(x) = 42").fetchall() == [(42,)]
    for c in cons:
        c.close()


def test_a_statement_too_long_to_expand_is_traced_as_written_and_reported(tmp_path, monkeypatch):
    """When the expanded SQL would pass SQLITE_LIMIT_LENGTH, the trace
    callback gets the statement as written, and a DataError is reported
    as unraisable (with callback tracebacks on), as in sqlite3."""
    seen = []
    monkeypatch.setattr(sys, "unraisablehook", lambda u: seen.append((u.exc_type.__name__, str(u.exc_value))))
    std, ll = both(tmp_path)
    results = {}
    for name, module, con in (("std", sqlite3, std), ("ll", dbapi, ll)):
        traced = []
        con.set_trace_callback(traced.append)
        limit = con.getlimit(sqlite3.SQLITE_LIMIT_LENGTH)
        con.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, 100)
        module.enable_callback_tracebacks(True)
        seen.clear()
        try:
            con.execute("SELECT 1 AS a WHERE a = ?", ("x" * 100,)).fetchall()
            con.execute("SELECT 1 AS a WHERE a = ?", ("x",)).fetchall()
        finally:
            module.enable_callback_tracebacks(False)
            con.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, limit)
            con.set_trace_callback(None)
        results[name] = (traced, list(seen))
    assert results["ll"] == results["std"]
    assert results["std"] == (
        ["SELECT 1 AS a WHERE a = ?", "SELECT 1 AS a WHERE a = 'x'"],
        [("DataError", "Expanded SQL string exceeds the maximum string length")],
    )
