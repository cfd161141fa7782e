"""CPU per transaction of bench_workers.py's transaction (a key lookup
``execute().fetchone()``, a one-row insert, ``commit()``) in one process,
for the standard library's ``sqlite3`` (WAL, ``synchronous=NORMAL``) and
``litelane.dbapi`` (``profile="balanced"``). Not a test: run it by hand.

    python benchmarks/python/bench_txn_cpu.py [--txns 20000] [--runs 11] [--calls]
        [--shape transaction|immediate]

``LLBENCH_OPTIONS`` (JSON, as for bench_workers.py): more keyword
arguments for ``litelane.dbapi.connect``.

``--shape immediate``: bench_workers.py's explicit transaction instead
(``isolation_level=None``; ``BEGIN IMMEDIATE``, a one-row insert, a
``SELECT`` of it by key, ``COMMIT``).

Each run is a fresh interpreter (the drivers alternate, run after run). CPU
time comes from ``/proc/self/task/*/schedstat`` (nanoseconds each thread
spent on a CPU; Linux only), so it is exact per thread where ``getrusage``
splits user and system time by sampling. Printed per driver: the medians
of the main thread's and of all threads' CPU per transaction, the wall
time, and the per-thread medians by thread name. ``--calls`` also counts
the Python-level calls of one transaction (``sys.setprofile``: Python
functions and calls into C).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import time
from typing import Dict, List

from bench_workers import fresh_app_db


def _threads() -> Dict[str, int]:
    """Nanoseconds on a CPU so far, per thread name (summed over threads of
    one name); the main thread as "main"."""
    out: Dict[str, int] = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/comm") as f:
                name = "main" if int(tid) == os.getpid() else f.read().strip()
            with open(f"/proc/self/task/{tid}/schedstat") as f:
                ns = int(f.read().split()[0])
        except OSError:  # the thread ended meanwhile
            continue
        out[name] = out.get(name, 0) + ns
    return out


def _child(driver: str, txns: int, calls: bool, shape: str) -> None:
    d, path = fresh_app_db("lltxncpu-")
    level = {"isolation_level": None} if shape == "immediate" else {}
    if driver == "sqlite3":
        con = sqlite3.connect(path, timeout=30, **level)
        con.execute("PRAGMA journal_mode=WAL")
        con.execute("PRAGMA synchronous=NORMAL")
    else:
        import litelane.dbapi

        extra = json.loads(os.environ.get("LLBENCH_OPTIONS", "{}"))
        con = litelane.dbapi.connect(path, timeout=30, profile="balanced", **level, **extra)

    def run(lo: int, hi: int) -> None:
        if shape == "immediate":
            for seq in range(lo, hi):
                con.execute("BEGIN IMMEDIATE")
                con.execute("INSERT INTO log(worker, seq, v) VALUES (?, ?, ?)", (0, seq, seq))
                con.execute("SELECT v FROM log WHERE worker = ? AND seq = ?", (0, seq)).fetchone()
                con.execute("COMMIT")
            return
        for seq in range(lo, hi):
            row = con.execute("SELECT v FROM kv WHERE k = ?", (seq % 100,)).fetchone()
            con.execute("INSERT INTO log(worker, seq, v) VALUES (?, ?, ?)", (0, seq, row[0] if row else 0))
            con.commit()

    run(0, 300)  # warm: statement caches, the engine's threads
    before = _threads()
    t0 = time.perf_counter()
    run(300, 300 + txns)
    wall = time.perf_counter() - t0
    after = _threads()
    result = {
        "main_us": (after["main"] - before["main"]) / txns / 1e3,
        "all_us": sum(after[k] - before.get(k, 0) for k in after) / txns / 1e3,
        "wall_us": wall / txns * 1e6,
        "threads_us": {k: (after[k] - before.get(k, 0)) / txns / 1e3 for k in after if k != "main"},
    }
    if calls:
        seen: Dict[str, int] = {}

        def prof(frame, event, arg):  # noqa: ANN001 (sys.setprofile's signature)
            if event in ("call", "c_call"):
                key = arg.__qualname__ if event == "c_call" else frame.f_code.co_name
                seen[key] = seen.get(key, 0) + 1

        sys.setprofile(prof)
        run(300 + txns, 400 + txns)
        sys.setprofile(None)
        seen.pop("run", None)
        seen.pop("setprofile", None)
        result["calls_per_txn"] = sum(seen.values()) / 100
    con.close()
    shutil.rmtree(d, ignore_errors=True)
    print(json.dumps(result))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--txns", type=int, default=20000)
    ap.add_argument("--runs", type=int, default=11)
    ap.add_argument("--calls", action="store_true", help="count the Python-level calls of a transaction")
    ap.add_argument("--shape", default="transaction", choices=["transaction", "immediate"])
    ap.add_argument("--child", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        _child(a.child, a.txns, a.calls, a.shape)
        return
    drivers = ("sqlite3", "litelane.dbapi")
    runs: Dict[str, List[dict]] = {d: [] for d in drivers}
    for _ in range(a.runs):
        for d in drivers:
            cmd = [sys.executable, __file__, "--child", d, "--txns", str(a.txns), "--shape", a.shape]
            cmd += ["--calls"] if a.calls else []
            out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
            runs[d].append(json.loads(out.strip().splitlines()[-1]))
    print(
        json.dumps(
            {
                "python": sys.version.split()[0],
                "cpus": os.cpu_count(),
                "loadavg": os.getloadavg(),
                "txns": a.txns,
                "runs": a.runs,
                "shape": a.shape,
            }
        )
    )
    for d in drivers:
        rs = runs[d]
        names = sorted({k for r in rs for k in r["threads_us"]})
        line = {
            "driver": d,
            "main_us": round(statistics.median(r["main_us"] for r in rs), 2),
            "all_us": round(statistics.median(r["all_us"] for r in rs), 2),
            "wall_us": round(statistics.median(r["wall_us"] for r in rs), 2),
            "other_threads_us": {
                n: round(statistics.median(r["threads_us"].get(n, 0.0) for r in rs), 2) for n in names
            },
        }
        if a.calls:
            line["calls_per_txn"] = statistics.median(r["calls_per_txn"] for r in rs)
        print(json.dumps(line))


if __name__ == "__main__":
    main()
