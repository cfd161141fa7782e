"""Lane SQLite as a C program sees it (scripts/build-lane-sqlite,
docs/lane-sqlite.md): every SQLite call runs in a child process through
ctypes (tests/lane/lanelib.py), on the built libsqlite3.so.0, beside the
stock build of the same SQLite where the behaviour must be the same.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

LANELIB = str(Path(__file__).with_name("lanelib.py"))


class Child:
    """A process running lanelib.py's steps; reads its JSON lines."""

    def __init__(self, lib: str, steps: list, env: dict | None = None):
        self.proc = subprocess.Popen(
            [sys.executable, LANELIB, lib, json.dumps(steps)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, **(env or {})},
        )
        # Lines arrive through a thread: a timed read of a pipe must not
        # lose lines a buffered reader took ahead.
        self.lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(None)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def read(self, timeout: float = 30.0) -> dict:
        try:
            line = self.lines.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"child {self.pid} said nothing for {timeout} s") from None
        if line is None:
            raise AssertionError(f"child {self.pid} ended: {self.proc.stderr.read()}")
        return json.loads(line)

    def go(self) -> None:
        self.proc.stdin.write("\n")
        self.proc.stdin.flush()

    def finish(self, timeout: float = 60.0) -> list[dict]:
        """The lines not read yet, once the child has ended."""
        self.proc.stdin.close()
        self.proc.wait(timeout=timeout)
        assert self.proc.returncode == 0, f"child {self.pid} failed: {self.proc.stderr.read()}"
        out = []
        while (line := self.lines.get(timeout=timeout)) is not None:
            out.append(json.loads(line))
        return out

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


def run(lib: str, steps: list, env: dict | None = None) -> list[dict]:
    return Child(lib, steps, env).finish()


def make_db(lib: str, path: Path, journal: str = "wal") -> str:
    out = run(
        lib,
        [
            ["open", str(path), 0],
            ["exec", f"PRAGMA journal_mode={journal}"],
            ["exec", "CREATE TABLE t(v)"],
        ],
    )
    assert out[0]["rows"] == [[journal]], out
    return str(path)


def holder(lib: str, db: str, vfs: str | None = None) -> Child:
    """A child holding the write lock (BEGIN IMMEDIATE, one row) until go()."""
    c = Child(
        lib,
        [
            ["open", db, 5000, vfs],
            ["exec", "BEGIN IMMEDIATE"],
            ["exec", "INSERT INTO t VALUES('held')"],
            ["say", "holding"],
            ["wait"],
            ["exec", "COMMIT"],
        ],
    )
    assert c.read()["rc"] == 0
    assert c.read()["rc"] == 0
    assert c.read() == {"say": "holding"}
    return c


def rows(lib: str, db: str) -> list:
    return [r[0] for r in run(lib, [["open", db, 5000], ["exec", "SELECT v FROM t ORDER BY rowid"]])[0]["rows"]]


def lane_status(lib: str, db: str) -> str:
    return run(lib, [["open", db, 0], ["exec", "PRAGMA lane"]])[0]["rows"][0][0]


def test_the_library_is_sqlite_with_the_lane_vfs_as_default(lane_lib, stock_lib, tmp_path):
    code = (
        "import sys; sys.path.insert(0, {d!r}); import lanelib; l = lanelib.Lib(sys.argv[1]); "
        "c = l.open(sys.argv[2]); "
        "print(l.version(), l.default_vfs(), 'ENABLE_SETLK_TIMEOUT' in "
        "[r[0] for r in c.exec('PRAGMA compile_options')['rows']])"
    ).format(d=str(Path(LANELIB).parent))
    db = str(tmp_path / "id.db")
    lane = subprocess.check_output([sys.executable, "-c", code, lane_lib, db], text=True).split()
    stock = subprocess.check_output([sys.executable, "-c", code, stock_lib, db], text=True).split()
    assert lane[0] == stock[0], "the lane and stock builds must be the same SQLite"
    assert lane[1:] == ["lane", "True"]
    assert stock[1:] == ["unix", "False"]
    # Off by environment: registered, not the default.
    off = subprocess.check_output(
        [sys.executable, "-c", code, lane_lib, db], text=True, env={**os.environ, "LITELANE_LANE": "off"}
    ).split()
    assert off[1] == "unix"


def test_pragma_lane_names_the_lock_file_and_the_holder(lane_lib, tmp_path):
    db = make_db(lane_lib, tmp_path / "p.db")
    assert lane_status(lane_lib, db) == f"on: {db}-lane"
    h = holder(lane_lib, db)
    try:
        status = lane_status(lane_lib, db)
        assert status.startswith(f"on: {db}-lane; turn held by process {h.pid} (lane SQLite: "), status
    finally:
        h.go()
        h.finish()


def test_waiters_are_granted_the_write_lock_in_arrival_order(lane_lib, tmp_path):
    db = make_db(lane_lib, tmp_path / "order.db")
    h = holder(lane_lib, db)
    waiters = []
    try:
        for i in range(4):
            waiters.append(
                Child(
                    lane_lib,
                    [["open", db, 30000], ["exec", f"INSERT INTO t VALUES('w{i}')"]],
                )
            )
            deadline = time.monotonic() + 20
            while not lane_status(lane_lib, db).endswith(f"; {i + 1} waiting"):
                assert time.monotonic() < deadline, f"waiter {i} never queued: {lane_status(lane_lib, db)}"
                time.sleep(0.01)
    finally:
        h.go()
        h.finish()
    for w in waiters:
        assert w.finish()[0]["rc"] == 0
    assert rows(lane_lib, db) == ["held", "w0", "w1", "w2", "w3"]


def test_a_timeout_is_sqlite_busy_and_the_log_names_the_holder(lane_lib, tmp_path):
    db = make_db(lane_lib, tmp_path / "busy.db")
    h = holder(lane_lib, db)
    try:
        out = run(lane_lib, [["open", db, 300], ["exec", "INSERT INTO t VALUES('late')"]])
    finally:
        h.go()
        h.finish()
    result, log = out[0], out[-1]["log"]
    assert result["rc"] == 5, result
    assert "database is locked" in result["msg"]
    assert 250 <= result["ms"] < 5000, result
    assert any(f"held by process {h.pid} (lane SQLite: " in m for m in log), log
    assert rows(lane_lib, db) == ["held"]


@pytest.mark.parametrize("which", ["lane", "stock"])
def test_busy_timeout_zero_fails_at_once_as_stock(which, lane_lib, stock_lib, tmp_path):
    lib = lane_lib if which == "lane" else stock_lib
    db = make_db(lib, tmp_path / "zero.db")
    h = holder(lib, db)
    try:
        outs = run(lib, [["open", db, 0], ["exec", "INSERT INTO t VALUES('now')"]])
    finally:
        h.go()
        h.finish()
    out = outs[0]
    assert out["rc"] == 5, out
    assert out["ms"] < 200, out
    # A try without a timeout fails quietly, as stock SQLite's does.
    assert outs[-1]["log"] == [], outs[-1]


def test_a_killed_holder_passes_the_turn_at_once_and_nothing_committed_is_lost(lane_lib, tmp_path):
    db = make_db(lane_lib, tmp_path / "kill.db")
    run(lane_lib, [["open", db, 5000], ["exec", "INSERT INTO t VALUES('before')"]])
    h = Child(
        lane_lib,
        [
            ["open", db, 5000],
            ["exec", "BEGIN IMMEDIATE"],
            ["exec", "INSERT INTO t VALUES('doomed')"],
            ["say", "holding"],
            ["wait"],
        ],
    )
    for _ in range(2):
        assert h.read()["rc"] == 0
    assert h.read() == {"say": "holding"}
    w = Child(lane_lib, [["open", db, 60000], ["exec", "INSERT INTO t VALUES('after')"]])
    try:
        deadline = time.monotonic() + 20
        while not lane_status(lane_lib, db).endswith("; 1 waiting"):
            assert time.monotonic() < deadline, "the waiter never queued"
            time.sleep(0.01)
        killed = time.monotonic()
        os.kill(h.pid, signal.SIGKILL)
        result = w.read()
        handoff = time.monotonic() - killed
    finally:
        h.kill()
        w.kill()
    assert result["rc"] == 0, result
    assert handoff < 2.0, f"the turn took {handoff:.3f} s to pass after the kill"
    assert rows(lane_lib, db) == ["before", "after"]
    check = run(lane_lib, [["open", db, 0], ["exec", "PRAGMA integrity_check"]])[0]
    assert check["rows"] == [["ok"]]


def test_a_writer_outside_the_queue_is_waited_for_until_the_timeout(lane_lib, tmp_path):
    db = make_db(lane_lib, tmp_path / "outside.db")
    # vfs=unix bypasses the queue: its lock is SQLite's own only.
    h = holder(lane_lib, db, vfs="unix")
    w = Child(lane_lib, [["open", db, 10000], ["exec", "INSERT INTO t VALUES('patient')"]])
    time.sleep(0.5)
    h.go()
    h.finish()
    out = w.finish()
    assert out[0]["rc"] == 0, out
    assert out[0]["ms"] >= 300, out
    # Held past the timeout: SQLITE_BUSY, and the log says by whom.
    h = holder(lane_lib, db, vfs="unix")
    try:
        out = run(lane_lib, [["open", db, 300], ["exec", "INSERT INTO t VALUES('late')"]])
    finally:
        h.go()
        h.finish()
    assert out[0]["rc"] == 5, out
    assert any("outside the queue" in m for m in out[-1]["log"]), out[-1]
    assert rows(lane_lib, db) == ["held", "patient", "held"]


def test_rollback_journal_databases_lock_as_stock_and_get_no_lock_file(lane_lib, tmp_path):
    db = make_db(lane_lib, tmp_path / "journal.db", journal="delete")
    out = run(lane_lib, [["open", db, 1000], ["exec", "INSERT INTO t VALUES(1)"]])
    assert out[0]["rc"] == 0
    assert not os.path.exists(db + "-lane")


def test_the_lock_file_goes_with_the_last_connection_as_wal_and_shm_do(lane_lib, tmp_path):
    db = make_db(lane_lib, tmp_path / "gone.db")
    lane = db + "-lane"
    first = Child(
        lane_lib,
        [
            ["open", db, 1000],
            ["exec", "INSERT INTO t VALUES(1)"],
            ["say", "open"],
            ["wait"],
            ["close"],
            ["exists", lane],
        ],
    )
    assert first.read()["rc"] == 0
    assert first.read() == {"say": "open"}
    second = run(
        lane_lib,
        [["open", db, 1000], ["exec", "INSERT INTO t VALUES(2)"], ["close"], ["exists", lane], ["exists", db + "-wal"]],
    )
    # The other program still has the database open: both stay.
    assert second[0]["rc"] == 0 and second[1:3] == [{"exists": True}, {"exists": True}], second
    first.go()
    out = first.finish()
    assert out[0] == {"exists": False}, out
    assert not os.path.exists(db + "-wal") and not os.path.exists(db + "-shm")
    assert rows(lane_lib, db) == ["1", "2"]


def test_a_lock_file_it_may_not_trust_leaves_stock_locking_and_says_why(lane_lib, tmp_path):
    db = make_db(lane_lib, tmp_path / "trust.db")
    lane = Path(db + "-lane")
    lane.write_bytes(b"someone else's")
    os.link(lane, tmp_path / "second-link")
    out = run(
        lane_lib,
        [
            ["open", db, 1000],
            ["exec", "INSERT INTO t VALUES(1)"],
            ["exec", "INSERT INTO t VALUES(2)"],
            ["exec", "PRAGMA lane"],
        ],
    )
    assert [o["rc"] for o in out[:3]] == [0, 0, 0]
    assert out[2]["rows"][0][0].startswith("off: "), out[2]
    warnings = [m for m in out[-1]["log"] if "cross-process writer queue off" in m]
    assert len(warnings) == 1, out[-1]
    assert lane.read_bytes() == b"someone else's"


def test_a_forked_child_queues_behind_its_parent(lane_lib, tmp_path):
    db = make_db(lane_lib, tmp_path / "fork.db")
    # The parent's first write leaves an open file description of the lock
    # file idle in its queue; the child inherits it. The parent then takes
    # the turn through it: a child that used it too would find the turn
    # "free" (a lock its description already holds) and only meet SQLite's
    # own lock, as a writer outside the queue.
    out = run(
        lane_lib,
        [
            ["open", db, 400],
            ["exec", "INSERT INTO t VALUES('parent')"],
            ["fork_exec", "INSERT INTO t VALUES('child')", "BEGIN IMMEDIATE"],
            ["exec", "COMMIT"],
        ],
    )
    assert out[1]["rc"] == 0, out
    child = next(o for o in out if "log" in o and "rc" in o)
    assert child["rc"] == 5, child
    assert any("held by process" in m for m in child["log"]), child
    assert not any("outside the queue" in m for m in child["log"]), child


def test_a_process_alone_keeps_the_turn_and_gives_it_up_when_another_wants_it(lane_lib, stock_lib, tmp_path):
    db = make_db(lane_lib, tmp_path / "keep.db")
    a = Child(
        lane_lib,
        [
            ["open", db, 5000],
            ["exec", "INSERT INTO t VALUES('a1')"],
            ["exec", "PRAGMA lane"],
            ["say", "wrote"],
            ["wait"],
            ["exec", "INSERT INTO t VALUES('a2')"],
            ["exec", "PRAGMA lane"],
        ],
    )
    try:
        assert a.read()["rc"] == 0
        # Alone on the file, it kept the turn after its write, and says so...
        kept = a.read()["rows"][0][0]
        assert f"turn held by process {a.pid}" in kept, kept
        assert ", kept between its writes)" in kept, kept
        assert a.read() == {"say": "wrote"}
        # ...but not SQLite's own lock: a stock process writes at once.
        stock = run(stock_lib, [["open", db, 0], ["exec", "INSERT INTO t VALUES('stock')"]])[0]
        assert stock["rc"] == 0, stock
        # A lane writer of another process rings for it and gets it long
        # before its timeout, while the keeper's process sits idle.
        b = run(lane_lib, [["open", db, 20000], ["exec", "INSERT INTO t VALUES('b1')"]])[0]
        assert b["rc"] == 0, b
        assert b["ms"] < 10000, b
        a.go()
        assert a.read()["rc"] == 0
        assert f"turn held by process {a.pid}" in a.read()["rows"][0][0]
    finally:
        a.finish()
    assert rows(lane_lib, db) == ["a1", "stock", "b1", "a2"]


def test_a_turn_kept_by_a_parent_that_exits_does_not_stay_with_its_forked_child(lane_lib, tmp_path):
    db = make_db(lane_lib, tmp_path / "forkkeep.db")
    # The parent keeps the turn (alone), forks a child that lives on and
    # exits: the child's copy of the turn's descriptor must not keep the
    # lock (an OFD lock lives as long as any descriptor of it).
    out = run(
        lane_lib,
        [
            ["open", db, 5000],
            ["exec", "INSERT INTO t VALUES('parent')"],
            ["exec", "PRAGMA lane"],
            ["fork_sleep", 30],
        ],
    )
    assert "turn held by process" in out[1]["rows"][0][0], out
    child = out[2]["forked"]
    try:
        b = run(lane_lib, [["open", db, 3000], ["exec", "INSERT INTO t VALUES('next')"]])[0]
        assert b["rc"] == 0, b
    finally:
        os.kill(child, signal.SIGKILL)
    assert rows(lane_lib, db) == ["parent", "next"]


def test_many_writer_processes_meet_no_busy_error(lane_lib, tmp_path):
    db = make_db(lane_lib, tmp_path / "many.db")
    steps = [["open", db, 10000]] + [["exec", "INSERT INTO t VALUES(1)"]] * 100
    children = [Child(lane_lib, steps) for _ in range(4)]
    results = [r for c in children for r in c.finish()[:-1]]
    assert [r["rc"] for r in results] == [0] * 400
    assert len(rows(lane_lib, db)) == 400


ENGINE_HOLDER = """
import sys, litelane.dbapi as d
c = d.connect(sys.argv[1], isolation_level=None)
c.execute("BEGIN IMMEDIATE")
c.execute("INSERT INTO t VALUES('engine')")
print("holding", flush=True)
sys.stdin.readline()
c.execute("COMMIT")
c.close()
"""

ENGINE_WRITER = """
import sys, time, litelane.dbapi as d
c = d.connect(sys.argv[1], timeout=float(sys.argv[2]), isolation_level=None)
start = time.monotonic()
try:
    c.execute("INSERT INTO t VALUES('engine late')")
    print("ok", flush=True)
except d.OperationalError as e:
    print("error", round((time.monotonic() - start) * 1000), e, flush=True)
"""


def test_lane_programs_and_litelane_engines_share_one_queue(lane_lib, tmp_path):
    pytest.importorskip("litelane.dbapi")
    db = make_db(lane_lib, tmp_path / "mixed.db")
    # An engine process holds the turn: a lane writer waits for it, and its
    # timeout names the engine's process.
    engine = subprocess.Popen(
        [sys.executable, "-c", ENGINE_HOLDER, db], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert engine.stdout.readline().strip() == "holding"
        out = run(lane_lib, [["open", db, 300], ["exec", "INSERT INTO t VALUES('lane late')"]])
        assert out[0]["rc"] == 5, out
        assert any(f"held by process {engine.pid}" in m for m in out[-1]["log"]), out[-1]
        w = Child(lane_lib, [["open", db, 30000], ["exec", "INSERT INTO t VALUES('lane')"]])
        deadline = time.monotonic() + 20
        while not lane_status(lane_lib, db).endswith("; 1 waiting"):
            assert time.monotonic() < deadline, "the lane writer never queued behind the engine"
            time.sleep(0.01)
    finally:
        engine.communicate("\n", timeout=60)
    assert engine.returncode == 0
    assert w.finish()[0]["rc"] == 0
    # A lane program holds the turn: an engine writer waits for it and its
    # error names the lane process.
    h = holder(lane_lib, db)
    try:
        said = subprocess.run(
            [sys.executable, "-c", ENGINE_WRITER, db, "0.3"], capture_output=True, text=True, timeout=60
        ).stdout
    finally:
        h.go()
        h.finish()
    assert said.startswith("error "), said
    assert f"held by process {h.pid} (lane SQLite: " in said, said
    assert rows(lane_lib, db) == ["engine", "lane", "held"]


def test_lane_stays_the_default_after_sqlite_is_shut_down_and_initialized_again(lane_lib):
    # SQLite's own test harness does this; on the way the unix VFS makes
    # itself the default again, and the lane VFS must take it back.
    code = (
        "import sys; sys.path.insert(0, {d!r}); import lanelib; l = lanelib.Lib(sys.argv[1]); "
        "before = l.default_vfs(); l.dll.sqlite3_shutdown(); l.dll.sqlite3_initialize(); "
        "print(before, l.default_vfs())"
    ).format(d=str(Path(LANELIB).parent))
    out = subprocess.check_output([sys.executable, "-c", code, lane_lib], text=True).split()
    assert out == ["lane", "lane"], out
