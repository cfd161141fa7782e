"""Waits for another process's write turn end as sqlite3's busy wait does:
by the connection's ``timeout`` with OperationalError("database is locked
...") naming the process that held the turn, whatever the path (autocommit
statement, transaction) and profile; and Ctrl-C (SIGINT) ends such a wait
with KeyboardInterrupt long before the timeout. The holder is a child
process stopped with SIGSTOP inside its transaction (it neither ends nor
dies: the kernel keeps its locks)."""

import os
import signal
import subprocess
import sys
import time

import litelane.dbapi as dbapi
import pytest

pytestmark = pytest.mark.skipif(not hasattr(signal, "SIGSTOP"), reason="needs SIGSTOP")

HOLDER = r"""
import sys, time
import litelane.dbapi as dbapi
con = dbapi.connect(sys.argv[1], profile=sys.argv[2])
con.execute("INSERT INTO t(x) VALUES ('holder')")  # opens the transaction
print("HOLDING", flush=True)
time.sleep(300)
"""

# Waits in an autocommit INSERT (timeout=30) behind the stopped holder;
# prints how long after WAITING the KeyboardInterrupt came. It installs
# Python's own Ctrl-C handler first, whatever it inherited: a shell's
# background job starts with SIGINT ignored, and Python then keeps it
# ignored (the three clean-clone CI runs of session 19, started from such a
# job, failed here).
WAITER = r"""
import signal, sys, time
import litelane.dbapi as dbapi
signal.signal(signal.SIGINT, signal.default_int_handler)
con = dbapi.connect(sys.argv[1], timeout=30, isolation_level=None, profile=sys.argv[2])
print("WAITING", flush=True)
start = time.monotonic()
try:
    con.execute("INSERT INTO t(x) VALUES ('waiter')")
    print("WROTE", flush=True)
except KeyboardInterrupt:
    print(f"INTERRUPTED {time.monotonic() - start:.3f}", flush=True)
except Exception as e:
    print(f"FAILED {time.monotonic() - start:.3f} {type(e).__name__} {e}", flush=True)
"""


@pytest.fixture
def stopped_holder(request, db_path):
    """A child process holding the write turn in a transaction, stopped.
    Yields its pid; continues and kills it afterwards."""
    profile = getattr(request, "param", "safe")
    con = dbapi.connect(db_path)
    con.execute("CREATE TABLE t(x)")
    con.commit()
    con.close()
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, db_path, profile], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "HOLDING"
        os.kill(holder.pid, signal.SIGSTOP)
        yield holder.pid
    finally:
        os.kill(holder.pid, signal.SIGCONT)
        holder.kill()
        holder.wait()


def _fails_locked_in(seconds, pid, write):
    start = time.monotonic()
    with pytest.raises(dbapi.OperationalError) as info:
        write()
    took = time.monotonic() - start
    message = str(info.value)
    assert message.startswith("database is locked"), message
    assert f"process {pid}" in message, message
    assert "another process" in message, message
    assert seconds * 0.9 <= took < seconds + 3, f"{took:.2f} s: {message}"


@pytest.mark.parametrize("stopped_holder", ["safe", "balanced"], indirect=True)
@pytest.mark.parametrize("timeout", [1, 3])
@pytest.mark.parametrize("mode", ["autocommit", "transaction"])
def test_the_connections_timeout_bounds_a_wait_for_a_stopped_process(db_path, stopped_holder, timeout, mode):
    con = dbapi.connect(db_path, timeout=timeout, isolation_level=None if mode == "autocommit" else "")
    try:
        _fails_locked_in(timeout, stopped_holder, lambda: con.execute("INSERT INTO t(x) VALUES ('me')"))
        if mode == "transaction":
            con.rollback()
        # The native API of the same handle (an execute of its own).
        _fails_locked_in(timeout, stopped_holder, lambda: con.engine.execute("INSERT INTO t(x) VALUES ('me')"))
    finally:
        con.close()


@pytest.mark.parametrize("stopped_holder", ["safe", "balanced"], indirect=True)
def test_ctrl_c_ends_an_autocommit_write_waiting_for_another_process(db_path, stopped_holder):
    profile = "safe"
    waiter = subprocess.Popen([sys.executable, "-c", WAITER, db_path, profile], stdout=subprocess.PIPE, text=True)
    try:
        assert waiter.stdout.readline().strip() == "WAITING"
        time.sleep(0.5)  # inside the wait by now
        sent = time.monotonic()
        waiter.send_signal(signal.SIGINT)
        out, _ = waiter.communicate(timeout=25)
        after = time.monotonic() - sent
    finally:
        waiter.kill()
        waiter.wait()
    assert out.startswith("INTERRUPTED"), out
    assert after < 3, f"KeyboardInterrupt {after:.2f} s after SIGINT"


def test_a_forked_child_waiting_for_its_parents_transaction_names_the_parent(db_path):
    """The parent holds a write transaction across fork(); the child's new
    connection (timeout=1) fails in about a second, naming the parent."""
    script = r"""
import os, sys, time
import litelane.dbapi as dbapi
con = dbapi.connect(sys.argv[1])
con.execute("CREATE TABLE t(x)")
con.commit()
con.execute("INSERT INTO t(x) VALUES ('parent')")  # held across the fork
pid = os.fork()
if pid == 0:
    child = dbapi.connect(sys.argv[1], timeout=1)
    start = time.monotonic()
    try:
        child.execute("INSERT INTO t(x) VALUES ('child')")
        child.commit()
        print("WROTE", flush=True)
    except dbapi.OperationalError as e:
        print(f"{time.monotonic() - start:.3f} {os.getppid()} {e}", flush=True)
    os._exit(0)
os.waitpid(pid, 0)
con.rollback()
"""
    out = subprocess.run(
        [sys.executable, "-c", script, db_path], capture_output=True, text=True, timeout=60
    ).stdout.strip()
    took, parent, message = out.split(" ", 2)
    assert message.startswith("database is locked"), out
    assert f"process {parent}" in message, out
    assert 0.9 <= float(took) < 4, out
