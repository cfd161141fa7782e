"""What the suites of real programs written for ``sqlite3`` needed
(scripts/real-clients, issue 40), each case run on ``sqlite3`` and on
``litelane.dbapi`` in the same run; both must give the same answers.

- A database file deleted, renamed or replaced while a connection to it is
  still open (peewee's tests delete their database between tests while a
  connection of an earlier test is garbage not yet collected, or sits in a
  thread that never closes it): a new connection opens the file now at the
  path, as with ``sqlite3``. Before, it joined the engine still open on the
  old file, and every commit failed ("the database file ... was moved,
  deleted or replaced while open").
- ``PRAGMA busy_timeout`` is the connection's ``timeout`` (peewee reads it
  back after ``connect(timeout=...)``).
- Datasette: a shared in-memory database read beside an open write
  transaction, files attached to an in-memory connection, and a file
  opened ``immutable=1`` after writes."""

import os
import sqlite3 as std
import threading

import litelane.dbapi as dbapi
from two_modules import both, outcome


def fresh(tmp_path, module, name="app.db"):
    d = tmp_path / module.__name__
    d.mkdir(exist_ok=True)
    return str(d / name)


def test_a_new_connection_opens_the_file_now_at_a_deleted_path(tmp_path):
    def run(m, tmp):
        path = fresh(tmp, m)
        old = m.connect(path)
        old.execute("CREATE TABLE t(x)")
        old.execute("INSERT INTO t VALUES (1)")
        old.commit()
        os.remove(path)
        new = m.connect(path)
        new.execute("CREATE TABLE u(y)")
        new.execute("INSERT INTO u VALUES (2)")
        new.commit()
        out = (
            outcome(new, "SELECT name FROM sqlite_master"),
            outcome(new, "SELECT * FROM u"),
            # The old connection still reads the file it has open.
            outcome(old, "SELECT * FROM t"),
        )
        old.close()
        new.close()
        again = m.connect(path)
        out += (
            outcome(again, "SELECT name FROM sqlite_master"),
            outcome(again, "PRAGMA integrity_check"),
        )
        again.close()
        return out

    assert both(run, tmp_path) == (
        [("u",)],
        [(2,)],
        [(1,)],
        [("u",)],
        [("ok",)],
    )


def test_a_connection_left_open_in_a_thread_does_not_hold_the_path(tmp_path):
    """peewee's SqliteQueueDatabase tests leave a writer thread with its
    connection open, then delete the file; the next test's connections
    must write to the new one."""

    def run(m, tmp):
        path = fresh(tmp, m)
        ready, stop = threading.Event(), threading.Event()

        def writer():
            con = m.connect(path)
            con.execute("CREATE TABLE t(x)")
            con.commit()
            ready.set()
            stop.wait()
            con.close()

        t = threading.Thread(target=writer)
        t.start()
        ready.wait()
        os.remove(path)
        try:
            new = m.connect(path, isolation_level=None)
            out = (
                outcome(new, "CREATE TABLE t(x)"),
                outcome(new, "INSERT INTO t VALUES (7)"),
                outcome(new, "SELECT * FROM t"),
            )
            new.close()
        finally:
            stop.set()
            t.join()
        return out

    assert both(run, tmp_path) == ([], [], [(7,)])


def test_a_file_replaced_while_open_is_not_given_the_old_files_wal(tmp_path):
    """The old engine's WAL must not be applied to the file that replaced
    its own, once it closes or when a new connection opens."""

    def run(m, tmp):
        path = fresh(tmp, m)
        other = fresh(tmp, m, "other.db")
        old = m.connect(path)
        old.execute("CREATE TABLE old(x)")
        old.execute("INSERT INTO old VALUES (1)")
        old.commit()
        o = std.connect(other)
        o.execute("CREATE TABLE other(y)")
        o.execute("INSERT INTO other VALUES (2)")
        o.commit()
        o.close()
        os.replace(other, path)
        old.close()
        new = m.connect(path)
        out = (
            outcome(new, "SELECT name FROM sqlite_master"),
            outcome(new, "SELECT * FROM other"),
            outcome(new, "PRAGMA integrity_check"),
        )
        new.close()
        return out

    assert both(run, tmp_path) == ([("other",)], [(2,)], [("ok",)])


def test_a_file_renamed_while_open_keeps_its_commits(tmp_path):
    def run(m, tmp):
        path = fresh(tmp, m)
        moved = fresh(tmp, m, "moved.db")
        old = m.connect(path)
        old.execute("CREATE TABLE t(x)")
        old.execute("INSERT INTO t VALUES (1)")
        old.commit()
        os.rename(path, moved)
        new = m.connect(path)  # a new, empty file at the old name
        out = (outcome(new, "SELECT name FROM sqlite_master"),)
        new.close()
        old.close()
        again = m.connect(moved)
        out += (outcome(again, "SELECT * FROM t"), outcome(again, "PRAGMA integrity_check"))
        again.close()
        return out

    assert both(run, tmp_path) == ([], [(1,)], [("ok",)])


def test_busy_timeout_is_the_connections_timeout(tmp_path):
    def run(m, tmp):
        path = fresh(tmp, m)
        a = m.connect(path, timeout=2.5)
        b = m.connect(path)
        out = [outcome(a, "PRAGMA busy_timeout"), outcome(b, "PRAGMA busy_timeout")]
        for sql in (
            "PRAGMA busy_timeout = 700",
            "PRAGMA busy_timeout",
            "PRAGMA main.busy_timeout(300)",
            "PRAGMA busy_timeout = -5",
            "PRAGMA busy_timeout = '1200';",
            "PRAGMA busy_timeout = 1e3",
        ):
            out.append(outcome(a, sql))
        # The other connection keeps its own.
        out.append(outcome(b, "PRAGMA busy_timeout"))
        out.append(a.execute("PRAGMA busy_timeout").description[0][0])
        a.close()
        b.close()
        return out

    assert both(run, tmp_path) == [
        [(2500,)],
        [(5000,)],
        [(700,)],
        [(700,)],
        [(300,)],
        [(0,)],
        [(1200,)],
        [(1,)],
        [(5000,)],
        "timeout",
    ]


def test_a_shared_memory_database_reads_beside_an_open_write(tmp_path):
    """Datasette's internal database (``file:x?mode=memory&cache=shared``):
    its write thread leaves a transaction open between writes while other
    connections read. SQLite's shared cache locks only the tables written;
    litelane kept the database in ``memdb``, one lock for all, so every
    read waited 5 s and failed with "database is locked"."""

    def run(m, tmp):
        uri = f"file:{m.__name__}-internal?mode=memory&cache=shared"
        w = m.connect(uri, uri=True, check_same_thread=False)
        r = m.connect(uri, uri=True, check_same_thread=False)
        r.execute("PRAGMA query_only = 1")
        w.execute("CREATE TABLE a(x)")
        w.execute("CREATE TABLE b(y)")
        w.execute("INSERT INTO b VALUES (1)")
        w.commit()
        w.execute("INSERT INTO a VALUES (2)")  # left open
        out = (outcome(r, "SELECT name FROM sqlite_master"), outcome(r, "SELECT * FROM b"))
        w.commit()
        out += (outcome(r, "SELECT * FROM a"),)
        w.close()
        r.close()
        # Gone with its last connection.
        again = m.connect(uri, uri=True)
        out += (outcome(again, "SELECT name FROM sqlite_master"),)
        again.close()
        return out

    assert both(run, tmp_path) == ([("a",), ("b",)], [(1,)], [(2,)], [])


def test_an_in_memory_connection_attaches_files(tmp_path):
    """Datasette's ``--crossdb``: ``ATTACH 'file:...?mode=ro'`` from a
    ``:memory:`` connection. litelane's in-memory connections used SQLite's
    ``memdb`` VFS, which SQLite also used for the attached name: an empty
    in-memory database instead of the file."""

    def run(m, tmp):
        path = fresh(tmp, m)
        w = m.connect(path)
        w.executescript("CREATE TABLE s(x); INSERT INTO s VALUES (1);")
        out = ()
        for target, how in ((f"file:{path}?mode=ro", "uri"), (path, "path"), (path + "2", "param")):
            mem = m.connect(":memory:", uri=True)
            if how == "param":
                mem.execute("ATTACH ? AS f", (target,))
                mem.execute("CREATE TABLE f.t(y)")
                mem.execute("INSERT INTO f.t VALUES (2)")
                mem.commit()
                out += (outcome(mem, "SELECT * FROM f.t"),)
            else:
                mem.execute(f"ATTACH DATABASE '{target}' AS f")
                out += (outcome(mem, "SELECT * FROM f.s"),)
            mem.close()
        w.close()
        check = std.connect(path + "2")
        out += (outcome(check, "SELECT * FROM t"),)
        check.close()
        return out

    assert both(run, tmp_path) == ([(1,)], [(1,)], [(2,)], [(2,)])


def test_an_immutable_reader_sees_what_was_committed(tmp_path):
    """Datasette ``-i``: a file opened ``immutable=1`` is read alone, never
    its WAL. With ``sqlite3`` every commit is in the file when it returns;
    litelane's commits sit in the WAL until a checkpoint copies them."""

    def run(m, tmp):
        path = fresh(tmp, m, "x y.db")
        w = m.connect(path)
        w.executescript("CREATE TABLE s(x); INSERT INTO s VALUES (1);")
        direct = m.connect(f"file:{path.replace(' ', '%20')}?immutable=1", uri=True)
        mem = m.connect(":memory:")
        mem.execute(f"ATTACH DATABASE 'file:{path}?immutable=1' AS f")
        out = (outcome(direct, "SELECT * FROM s"), outcome(mem, "SELECT * FROM f.s"))
        for c in (direct, mem, w):
            c.close()
        return out

    assert both(run, tmp_path) == ([(1,)], [(1,)])


def test_a_shared_memory_database_leaves_no_file_after_its_process_exits(tmp_path):
    """litelane keeps a shared in-memory database in a file in /dev/shm
    (above). A process that exits with its connection still open (never
    closed, never collected) left the file there for good: 688 files,
    610 MB of memory, after one run of Datasette's suite. Now they go at
    exit, as the database goes with the process in SQLite."""
    import subprocess
    import sys

    shm = "/dev/shm" if os.path.isdir("/dev/shm") else None

    def run(m, tmp):
        code = (
            f"import os, {m.__name__} as m\n"
            "c = m.connect('file:leftover?mode=memory&cache=shared', uri=True)\n"
            "c.execute('CREATE TABLE t(x)')\n"
            "c.execute('INSERT INTO t VALUES (1)')\n"
            "c.commit()\n"
            "KEEP = [c, c.execute('SELECT * FROM t')]\n"
            "print(os.getpid(), c.execute('SELECT count(*) FROM t').fetchone()[0])\n"
        )
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
        pid, count = done.stdout.split()
        left = [f for f in os.listdir(shm or tmp) if f"-{pid}-" in f] if shm else []
        return count, left

    assert both(run, tmp_path) == ("1", [])


def test_the_sql_functions_and_modules_of_a_stock_build(tmp_path):
    """SQLite's math functions and the FTS4 compile option, which the
    standard library's SQLite has (built by its ``configure``) and the
    amalgamation litelane compiles lacked: ``SELECT sqrt(4)`` failed with
    "no such function", and peewee skipped its FTS4 tests
    (``compile_option('enable_fts4')``)."""
    import pytest

    probe = std.connect(":memory:")
    options = {r[0] for r in probe.execute("PRAGMA compile_options")}
    probe.close()
    if "ENABLE_MATH_FUNCTIONS" not in options or "ENABLE_FTS4" not in options:
        pytest.skip("the standard library's SQLite is built without them")

    def run(m, tmp):
        c = m.connect(":memory:")
        out = (
            outcome(
                c,
                "SELECT sqrt(16), pow(2, 10), floor(-1.5), ceil(1.2), ln(1), "
                "round(log10(1000), 9), round(pi(), 6), mod(7, 3)",
            ),
            outcome(c, "SELECT sqrt(-1)"),
            outcome(
                c, "SELECT sqlite_compileoption_used('ENABLE_FTS4'), sqlite_compileoption_used('ENABLE_MATH_FUNCTIONS')"
            ),
            outcome(c, "CREATE VIRTUAL TABLE f USING fts4(a, b)"),
            outcome(c, "INSERT INTO f VALUES ('alpha beta', 'gamma')"),
            outcome(c, "SELECT a FROM f WHERE f MATCH 'b:gamma'"),
        )
        c.close()
        return out

    assert both(run, tmp_path) == (
        [(4.0, 1024.0, -2.0, 2.0, 0.0, 3.0, 3.141593, 1.0)],
        [(None,)],
        [(1, 1)],
        [],
        [],
        [("alpha beta",)],
    )


def test_the_files_of_a_killed_process_go_with_the_next_one(tmp_path):
    """A process killed with SIGTERM (Datasette's tests stop their server
    so) runs no exit handler: its shared in-memory database's files stay
    until the next process that makes one, or exits having made one,
    removes them."""
    import signal
    import subprocess
    import sys

    shm = "/dev/shm" if os.path.isdir("/dev/shm") else None

    def run(m, tmp):
        opens = (
            f"import os, sys, {m.__name__} as m\n"
            "c = m.connect('file:killed?mode=memory&cache=shared', uri=True)\n"
            "c.execute('CREATE TABLE t(x)')\n"
            "print(os.getpid(), flush=True)\n"
            "sys.stdin.read()\n"
        )
        child = subprocess.Popen(
            [sys.executable, "-c", opens], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        pid = child.stdout.readline().split()[0]
        child.send_signal(signal.SIGTERM)
        child.wait()
        child.stdin.close()
        child.stdout.close()
        where = shm or str(tmp)
        left_after_kill = bool([f for f in os.listdir(where) if f"-{pid}-" in f])
        nxt = subprocess.run(
            [sys.executable, "-c", opens.replace("killed", "next")],
            input="",
            capture_output=True,
            text=True,
            check=True,
        )
        left = [f for f in os.listdir(where) if f"-{pid}-" in f or f"-{nxt.stdout.split()[0]}-" in f]
        # The kill did leave them (else this test would show nothing).
        assert left_after_kill == (m is dbapi and shm is not None)
        return left

    assert both(run, tmp_path) == []


def test_a_new_connection_by_uri_opens_the_file_now_at_a_deleted_path(tmp_path):
    """As by path, for a file opened by ``file:`` URI (Datasette opens its
    files so): the URI names the file, decoded as SQLite decodes it."""

    def run(m, tmp):
        path = fresh(tmp, m, "my app.db")
        uri = "file:" + path.replace(" ", "%20") + "?mode=rwc"
        old = m.connect(uri, uri=True)
        old.execute("CREATE TABLE t(x)")
        old.execute("INSERT INTO t VALUES (1)")
        old.commit()
        os.remove(path)
        new = m.connect(uri, uri=True)
        new.execute("CREATE TABLE u(y)")
        new.commit()
        out = (
            outcome(new, "SELECT name FROM sqlite_master"),
            outcome(old, "SELECT * FROM t"),
            os.path.exists(path),
        )
        old.close()
        new.close()
        return out

    assert both(run, tmp_path) == ([("u",)], [(1,)], True)
