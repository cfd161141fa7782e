#!/usr/bin/env python3
"""The kill -9 phase of scripts/lane-fairness: runs with LD_LIBRARY_PATH at a
lane SQLite build, asks `PRAGMA lane` who holds the write turn ("turn held
by process N, <label>") about every half millisecond, and SIGKILLs the
holder when it is one of the candidate writers (pid:kind:log, one kill per
kind, at least --gap seconds apart) and its log (written line by line, the
writers' --flush) ends with a B line: it is inside a transaction it began
(holding the turn between two transactions, or while it polls SQLite's own
lock held by a process outside the queue, does not count). One line per
kill on stdout:

    KILL pid kind kill_ns pragma_line dead_ns released_ns

dead_ns: when every thread in /proc/<pid>/task was first seen a zombie (or
gone): the kernel has closed its files, and with them dropped its locks;
released_ns: when PRAGMA lane first named another holder or none (0: not
seen within 2 s).
"""
import argparse
import os
import re
import signal
import sqlite3
import sys
import time


def in_transaction(path: str) -> bool:
    """The log's last complete line is a B line (BEGIN returned, no end yet)."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 300))
            lines = f.read().split(b"\n")
    except OSError:
        return False
    return len(lines) >= 2 and lines[-1] == b"" and lines[-2].startswith(b"B\t")


def all_threads_exited(pid):
    """Every thread of the process is a zombie or gone: each has closed its
    files (exit_files comes before exit_notify), the last one the process's
    file table, and with it the locks of its open file descriptions."""
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return True
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/stat", "rb") as f:
                state = f.read().rsplit(b")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if state not in (b"Z", b"X"):
            return False
    return True


def watch(con, pid, held):
    """After the kill: (dead_ns, released_ns), polled every 0.1 ms for 2 s."""
    dead = released = 0
    stop = time.monotonic() + 2.0
    while time.monotonic() < stop and not (dead and released):
        if not dead and all_threads_exited(pid):
            dead = time.time_ns()
        if not released:
            m = held.search(con.execute("PRAGMA lane").fetchone()[0])
            if not m or int(m.group(1)) != pid:
                released = time.time_ns()
        time.sleep(0.0001)
    return dead, released


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--db", required=True)
    ap.add_argument("--candidates", required=True, help="pid:kind:log,pid:kind:log,...")
    ap.add_argument("--per-kind", type=int, default=1)
    ap.add_argument("--start-at", type=int, default=0)
    ap.add_argument("--seconds", type=float, required=True)
    ap.add_argument("--gap", type=float, default=1.0)
    a = ap.parse_args()
    cands, logs = {}, {}
    for item in a.candidates.split(","):
        pid, kind, logp = item.split(":", 2)
        cands[int(pid)] = kind
        logs[int(pid)] = logp
    con = sqlite3.connect(a.db)
    first = con.execute("PRAGMA lane").fetchall()
    if not first or not str(first[0][0]).startswith("on:"):
        print(f"killer.py: PRAGMA lane says {first!r}: not a lane SQLite with a queue", file=sys.stderr)
        return 2
    kinds = set(cands.values())
    held = re.compile(r"turn held by process (\d+)")
    kills = {}
    if a.start_at:
        time.sleep(max(0.0, (a.start_at - time.time_ns()) / 1e9))
    deadline = time.monotonic() + a.seconds
    next_ok = time.monotonic() + a.gap
    while time.monotonic() < deadline:
        if time.monotonic() >= next_ok:
            line = con.execute("PRAGMA lane").fetchone()[0]
            m = held.search(line)
            if m:
                pid = int(m.group(1))
                kind = cands.get(pid)
                if kind is not None and kills.get(kind, 0) < a.per_kind and in_transaction(logs[pid]):
                    t = time.time_ns()
                    os.kill(pid, signal.SIGKILL)
                    dead, released = watch(con, pid, held)
                    print(f"KILL\t{pid}\t{kind}\t{t}\t{line}\t{dead}\t{released}", flush=True)
                    kills[kind] = kills.get(kind, 0) + 1
                    del cands[pid]
                    next_ok = time.monotonic() + a.gap
                    if all(kills.get(k, 0) >= a.per_kind for k in kinds):
                        break
        time.sleep(0.0005)
    return 0


if __name__ == "__main__":
    sys.exit(main())
