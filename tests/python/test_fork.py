"""A process that forks (gunicorn's pre-fork workers, multiprocessing's
"fork" start method, Django's parallel test runner): the child gets working
engines of its own, and a connection opened before the fork says to
reconnect instead of using (or waiting on) the parent's engine."""

import os
import threading
import time

import litelane.dbapi as dbapi
import pytest

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork()")


def _in_child(fn, timeout=30.0):
    """Runs fn() in a forked child; returns (exit code, seconds). The child
    exits 0 when fn returns True."""
    r, w = os.pipe()
    start = time.monotonic()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        code = 1
        try:
            code = 0 if fn() else 3
        except BaseException as e:
            os.write(w, repr(e).encode()[:4000])
            code = 2
        finally:
            os._exit(code)
    os.close(w)
    deadline = start + timeout
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > deadline:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            pytest.fail("the child hung")
        time.sleep(0.01)
    message = os.read(r, 4000).decode()
    os.close(r)
    return os.waitstatus_to_exitcode(status), time.monotonic() - start, message


@pytest.mark.parametrize("state", ["idle", "transaction open", "closed mid-transaction by another thread"])
def test_a_forked_child_writes_through_a_new_connection_and_the_old_one_says_to_reconnect(db_path, state):
    con = dbapi.connect(db_path, check_same_thread=False)
    con.execute("CREATE TABLE t(who, n)")
    con.commit()
    if state == "transaction open":
        con.execute("INSERT INTO t VALUES ('parent', 0)")  # held across the fork
    elif state.startswith("closed"):
        other = dbapi.connect(db_path, check_same_thread=False)
        other.execute("INSERT INTO t VALUES ('other', 0)")
        t = threading.Thread(target=other.close)
        t.start()
        t.join()

    def child():
        try:
            con.execute("INSERT INTO t VALUES ('child-old', 1)")
            return False  # the parent's connection must not run
        except dbapi.ProgrammingError as e:
            assert "forked" in str(e) and "new" in str(e), e
        fresh = dbapi.connect(db_path, timeout=0)
        for i in range(20):
            fresh.execute("INSERT INTO t VALUES ('child', ?)", (i,))
            fresh.commit()
        fresh.close()
        con.close()  # lets go of the parent's handle quietly
        return True

    if state == "transaction open":
        con.commit()  # the parent ends its transaction; the child forks after
        con.execute("INSERT INTO t VALUES ('parent', 1)")
        con.rollback()
    code, seconds, message = _in_child(child)
    assert code == 0, message
    assert seconds < 10, f"the child took {seconds:.1f} s"
    rows = con.execute("SELECT count(*) FROM t WHERE who = 'child'").fetchone()
    assert rows == (20,)
    # the parent's engine goes on working
    con.execute("INSERT INTO t VALUES ('parent', 2)")
    con.commit()
    con.close()
