#!/usr/bin/env python3
"""The kill -9 phase of scripts/lane-fairness: runs with LD_LIBRARY_PATH at a
lane SQLite build, asks `PRAGMA lane` who holds the write turn ("turn held
by process N, <label>") about every half millisecond, and SIGKILLs the
holder when it is one of the candidate writers (pid:kind, one kill per kind
and round, at least --gap seconds apart). One line per kill on stdout:

    KILL pid kind kill_ns pragma_line
"""
import argparse
import os
import re
import signal
import sqlite3
import sys
import time


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--db", required=True)
    ap.add_argument("--candidates", required=True, help="pid:kind,pid:kind,...")
    ap.add_argument("--per-kind", type=int, default=1)
    ap.add_argument("--start-at", type=int, default=0)
    ap.add_argument("--seconds", type=float, required=True)
    ap.add_argument("--gap", type=float, default=1.0)
    a = ap.parse_args()
    cands = {}
    for item in a.candidates.split(","):
        pid, kind = item.split(":", 1)
        cands[int(pid)] = kind
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
                if kind is not None and kills.get(kind, 0) < a.per_kind:
                    t = time.time_ns()
                    os.kill(pid, signal.SIGKILL)
                    print(f"KILL\t{pid}\t{kind}\t{t}\t{line}", flush=True)
                    kills[kind] = kills.get(kind, 0) + 1
                    del cands[pid]
                    next_ok = time.monotonic() + a.gap
                    if all(kills.get(k, 0) >= a.per_kind for k in kinds):
                        break
        time.sleep(0.0005)
    return 0


if __name__ == "__main__":
    sys.exit(main())
