"""The web-app shape: P single-threaded worker processes, each running short
write transactions (a key lookup, then a one-row insert, then commit)
through a module written for the standard library's ``sqlite3``. Not a test:
run it by hand and read the medians and ratios.

    python benchmarks/python/bench_workers.py [--processes 1,4,8] [--txns 5000] [--runs 3]
        [--shape transaction|autocommit|immediate] [--work-us 0]

``--shape autocommit``: each worker connects with ``isolation_level=None``
and each transaction is one ``INSERT`` on its own (no lookup, no
``commit()``): the one-statement writes that litelane can commit for other
processes under ``safe`` (combined commits, docs/concurrency.md).

``--shape immediate``: the explicit transactions that today's advice for web
apps gives (Django 5.1's ``transaction_mode="IMMEDIATE"``, or
``isolation_level=None`` with ``BEGIN IMMEDIATE … COMMIT``): each worker
connects with ``isolation_level=None`` and each transaction is ``BEGIN
IMMEDIATE``, a one-row ``INSERT``, a ``SELECT`` of that row by its key, and
``COMMIT``.

Each cell runs the standard library (WAL, ``synchronous`` NORMAL for
``balanced`` and FULL for ``safe``, ``timeout=30``) and ``litelane.dbapi``
with that profile, on the same SQL, in the same invocation. Printed per
variant: one JSON line with the median transactions per second, the runs,
the errors the workers saw ("database is locked" and others) and the rows
lost (acknowledged by ``commit()`` but not in the database afterwards: must
be 0); then per cell the median of the ratios litelane / sqlite3 of runs
made in pairs (the drivers alternate, so the machine's drift falls on both),
and the lowest and highest of those ratios.

``--txns`` is per process, 5,000 by default: one process runs 2,000 in about
0.1 s, where start-up and the machine's noise swamp the difference between
the drivers (an A/B of two builds at 2,000 gave pair ratios from 0.59 to
1.03 in one cell); the tables in docs/performance.md use 10,000.

Each JSON line also has the workers' CPU time per transaction and their
voluntary context switches per transaction (medians over the runs, from
``getrusage(RUSAGE_CHILDREN)`` around each run: the workers' start-up and
``close()`` included, so compare them between builds, not as absolutes).

``--work-us N``: before each transaction a worker spends N µs of CPU (a
busy loop), as a web request does rendering and validating: with more
workers than cores the machine is then busy with work other than the
database's, the shape where a waiter that spins for the turn could take
CPU from it.

``LLBENCH_OPTIONS`` (a JSON object) is passed to ``litelane.dbapi.connect``
as keyword arguments, to measure an option's effect, e.g.
``LLBENCH_OPTIONS='{"mmap_size": 0}'``.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import resource
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from typing import Dict, List, NamedTuple, Tuple

SYNC = {"balanced": "NORMAL", "safe": "FULL"}


def _connect(driver: str, path: str, profile: str, autocommit: bool):
    level = {"isolation_level": None} if autocommit else {}
    if driver == "sqlite3":
        con = sqlite3.connect(path, timeout=30, **level)
        con.execute("PRAGMA journal_mode=WAL")
        con.execute(f"PRAGMA synchronous={SYNC[profile]}")
        return con
    import litelane.dbapi

    extra = json.loads(os.environ.get("LLBENCH_OPTIONS", "{}"))
    return litelane.dbapi.connect(path, timeout=30, profile=profile, **level, **extra)


def _busy(us: int) -> None:
    """Spends about ``us`` µs of CPU."""
    end = time.perf_counter() + us / 1e6
    while time.perf_counter() < end:
        pass


def _worker(driver: str, path: str, profile: str, shape: str, work_us: int, me: int, txns: int, start, out) -> None:
    """Runs ``txns`` transactions, each after ``work_us`` µs of CPU;
    reports (acknowledged seqs, errors)."""
    autocommit = shape in ("autocommit", "immediate")
    con = _connect(driver, path, profile, autocommit)
    start.wait()
    acked: List[int] = []
    errors: Dict[str, int] = {}
    for seq in range(txns):
        if work_us:
            _busy(work_us)
        try:
            if shape == "autocommit":
                con.execute("INSERT INTO log(worker, seq, v) VALUES (?, ?, ?)", (me, seq, seq))
            elif shape == "immediate":
                con.execute("BEGIN IMMEDIATE")
                con.execute("INSERT INTO log(worker, seq, v) VALUES (?, ?, ?)", (me, seq, seq))
                row = con.execute("SELECT v FROM log WHERE worker = ? AND seq = ?", (me, seq)).fetchone()
                if row is None or row[0] != seq:
                    raise AssertionError(f"own insert not seen: {row!r}")
                con.execute("COMMIT")
            else:
                row = con.execute("SELECT v FROM kv WHERE k = ?", (seq % 100,)).fetchone()
                con.execute(
                    "INSERT INTO log(worker, seq, v) VALUES (?, ?, ?)",
                    (me, seq, row[0] if row else 0),
                )
                con.commit()
            acked.append(seq)
        except Exception as e:  # counted, as a web app's error page would be
            key = f"{type(e).__name__}: {str(e)[:60]}"
            errors[key] = errors.get(key, 0) + 1
            try:
                con.rollback()
            except Exception:
                pass
    con.close()
    out.put((me, acked, errors))


def fresh_app_db(prefix: str) -> Tuple[str, str]:
    """A new directory holding the workload's database in WAL mode, with
    its tables and 100 keys: (directory, database path)."""
    d = tempfile.mkdtemp(prefix=prefix)
    path = os.path.join(d, "app.db")
    setup = sqlite3.connect(path)
    setup.execute("PRAGMA journal_mode=WAL")
    setup.execute("CREATE TABLE kv(k INTEGER PRIMARY KEY, v INTEGER)")
    setup.execute("CREATE TABLE log(worker INTEGER, seq INTEGER, v INTEGER, PRIMARY KEY(worker, seq))")
    setup.executemany("INSERT INTO kv VALUES (?, ?)", [(i, i * 7) for i in range(100)])
    setup.commit()
    setup.close()
    return d, path


class Cell(NamedTuple):
    """One run of a cell."""

    tx_per_s: float
    errors: Dict[str, int]
    lost: int
    #: The workers' CPU time (user + system) per acknowledged transaction, µs.
    cpu_us_per_tx: float
    #: The workers' voluntary context switches per acknowledged transaction.
    switches_per_tx: float


def run_cell(driver: str, profile: str, shape: str, processes: int, txns: int, work_us: int = 0) -> Cell:
    """One run of ``processes`` workers of ``txns`` transactions each, each
    transaction after ``work_us`` µs of CPU."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    d, path = fresh_app_db("llworkers-")
    ctx = mp.get_context("spawn")
    start, out = ctx.Event(), ctx.Queue()
    procs = [
        ctx.Process(target=_worker, args=(driver, path, profile, shape, work_us, i, txns, start, out))
        for i in range(processes)
    ]
    for p in procs:
        p.start()
    time.sleep(1.0)  # every worker connected and waiting
    t0 = time.perf_counter()
    start.set()
    results = [out.get(timeout=600) for _ in procs]
    elapsed = time.perf_counter() - t0
    for p in procs:
        p.join()
    errors: Dict[str, int] = {}
    acked = 0
    check = sqlite3.connect(path)
    lost = 0
    for me, seqs, errs in results:
        acked += len(seqs)
        for k, n in errs.items():
            errors[k] = errors.get(k, 0) + n
        stored = {s for (s,) in check.execute("SELECT seq FROM log WHERE worker = ?", (me,))}
        lost += sum(1 for s in seqs if s not in stored)
    check.close()
    shutil.rmtree(d, ignore_errors=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    n = max(acked, 1)
    return Cell(acked / elapsed, errors, lost, cpu / n * 1e6, (after.ru_nvcsw - before.ru_nvcsw) / n)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--processes", default="1,4,8")
    ap.add_argument("--txns", type=int, default=5000, help="transactions per process")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--profiles", default="balanced,safe")
    ap.add_argument("--shape", default="transaction", choices=["transaction", "autocommit", "immediate"])
    ap.add_argument("--work-us", type=int, default=0, help="µs of CPU before each transaction")
    a = ap.parse_args()
    import litelane

    print(
        json.dumps(
            {
                "python": sys.version.split()[0],
                "sqlite3_lib": sqlite3.sqlite_version,
                "litelane_sqlite": litelane.sqlite_version(),
                "cpus": os.cpu_count(),
                "loadavg": os.getloadavg(),
            }
        ),
        flush=True,
    )
    table = []
    drivers = ("sqlite3", "litelane.dbapi")
    for profile in a.profiles.split(","):
        for processes in (int(x) for x in a.processes.split(",")):
            # Runs alternate between the drivers (and which goes first), so
            # that the machine's drift over a cell falls on both alike; each
            # pair of runs gives one ratio.
            runs: Dict[str, List[Cell]] = {d: [] for d in drivers}
            for r in range(a.runs):
                for driver in drivers if r % 2 == 0 else drivers[::-1]:
                    runs[driver].append(run_cell(driver, profile, a.shape, processes, a.txns, a.work_us))
            medians = {}
            for driver in drivers:
                rates = [r.tx_per_s for r in runs[driver]]
                errors: Dict[str, int] = {}
                for run in runs[driver]:
                    for k, n in run.errors.items():
                        errors[k] = errors.get(k, 0) + n
                medians[driver] = statistics.median(rates)
                print(
                    json.dumps(
                        {
                            "scenario": "workers",
                            "shape": a.shape,
                            "profile": profile,
                            "processes": processes,
                            "work_us": a.work_us,
                            "driver": driver,
                            "txns_per_process": a.txns,
                            "median_tx_per_s": round(medians[driver], 1),
                            "runs_tx_per_s": [round(r, 1) for r in rates],
                            "errors": errors,
                            "lost": sum(r.lost for r in runs[driver]),
                            "cpu_us_per_tx": round(statistics.median(r.cpu_us_per_tx for r in runs[driver]), 1),
                            "switches_per_tx": round(statistics.median(r.switches_per_tx for r in runs[driver]), 2),
                        }
                    ),
                    flush=True,
                )
            pairs = [
                ours.tx_per_s / base.tx_per_s
                for base, ours in zip(runs["sqlite3"], runs["litelane.dbapi"], strict=True)
            ]
            table.append(
                (
                    profile,
                    processes,
                    medians["sqlite3"],
                    medians["litelane.dbapi"],
                    statistics.median(pairs),
                    min(pairs),
                    max(pairs),
                )
            )
    print(f"\n{'profile':9} {'procs':>5} {'sqlite3 tx/s':>13} {'litelane tx/s':>14} {'ratio':>6} {'pair ratios':>12}")
    for profile, processes, base, ours, ratio, low, high in table:
        print(f"{profile:9} {processes:5} {base:13.0f} {ours:14.0f} {ratio:6.2f}   {low:.2f}-{high:.2f}")


if __name__ == "__main__":
    main()
