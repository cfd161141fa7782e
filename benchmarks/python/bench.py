"""Python benchmarks: litelane against the standard library and the
libraries the field reports name. Not tests: run them by hand and read the
medians (docs/python.md has figures and how they were taken).

    python benchmarks/python/bench.py insert   [--rows 100000] [--runs 5]
    python benchmarks/python/bench.py threads  [--threads 16] [--per-thread 100] [--runs 3]
    python benchmarks/python/bench.py report002 [--runs 3]
    python benchmarks/python/bench.py async    [--rows 20000] [--runs 3]
    python benchmarks/python/bench.py all

Every scenario prints one JSON line per variant: median seconds, the runs,
errors, and ratios against the baseline measured in the same invocation.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any, Callable, Dict, List

import litelane
import litelane.dbapi

HERE = os.path.dirname(os.path.abspath(__file__))

RECORD_SCHEMA = (
    "CREATE TABLE record(id INTEGER PRIMARY KEY, code TEXT NOT NULL, "
    "name TEXT NOT NULL, amount REAL NOT NULL, flag INTEGER NOT NULL)"
)
RECORD_INSERT = "INSERT INTO record(id, code, name, amount, flag) VALUES (?, ?, ?, ?, ?)"
PLACES = ["Oslo", "Lima", "Pune", "Kyiv", "Perth", "Quito", "Turin", "Dakar"]


def records(n: int, seed: int = 42) -> List[tuple]:
    """Report 000's workload: n start-up records (the shape of the Rust
    bench's ladder rows)."""
    rng = random.Random(seed)
    return [
        (
            i,
            f"C{rng.randrange(1_000_000):06}",
            f"{rng.choice(PLACES)} {i}",
            rng.randrange(10_000_000) / 100.0,
            rng.randrange(2),
        )
        for i in range(1, n + 1)
    ]


def fresh(tag: str) -> str:
    d = tempfile.mkdtemp(prefix=f"llbench-{tag}-")
    return os.path.join(d, "bench.db")


def cleanup(path: str) -> None:
    shutil.rmtree(os.path.dirname(path), ignore_errors=True)


def std_connect(path: str, synchronous: str, **kw: Any) -> sqlite3.Connection:
    con = sqlite3.connect(path, **kw)
    con.execute("PRAGMA journal_mode=WAL")
    con.execute(f"PRAGMA synchronous={synchronous}")
    return con


def emit(scenario: str, variant: str, runs: List[float], errors: int = 0, **extra: Any) -> Dict[str, Any]:
    row = {
        "scenario": scenario,
        "variant": variant,
        "median_s": round(statistics.median(runs), 4),
        "runs_s": [round(r, 4) for r in runs],
        "errors": errors,
        **extra,
    }
    print(json.dumps(row), flush=True)
    return row


def ratios(scenario: str, results: Dict[str, Dict[str, Any]], base: str) -> None:
    b = results[base]["median_s"]
    out = {k: round(b / v["median_s"], 2) for k, v in results.items() if k != base}
    print(json.dumps({"scenario": scenario, "speedup_vs": base, "ratios": out}), flush=True)


# --- insert: 100k rows in one transaction ------------------------------------


def bench_insert(rows_n: int, runs: int) -> None:
    rows = records(rows_n)
    dict_rows = [dict(zip(("id", "code", "name", "amount", "flag"), r, strict=True)) for r in rows]

    def executemany(connect: Callable[[str], Any]) -> Callable[[], float]:
        def run() -> float:
            p = fresh("ins")
            con = connect(p)
            con.execute(RECORD_SCHEMA)
            t = time.perf_counter()
            with con:
                con.executemany(RECORD_INSERT, rows)
            dt = time.perf_counter() - t
            assert con.execute("SELECT count(*) FROM record").fetchone()[0] == rows_n
            con.close()
            cleanup(p)
            return dt

        return run

    std_executemany = executemany(lambda p: std_connect(p, "NORMAL"))
    dbapi_executemany = executemany(lambda p: litelane.dbapi.connect(p, profile="balanced"))

    def native(data: List[Any]) -> Callable[[], float]:
        def run() -> float:
            p = fresh("ins")
            db = litelane.open(p)
            db.execute(RECORD_SCHEMA)
            t = time.perf_counter()
            rep = db.insert_many("record", data, columns=["id", "code", "name", "amount", "flag"])
            dt = time.perf_counter() - t
            assert rep["rows"] == rows_n and rep["commits"] == 1
            assert db.query("SELECT count(*) FROM record")[0][0] == rows_n
            db.close()
            cleanup(p)
            return dt

        return run

    variants: Dict[str, Callable[[], float]] = {
        "sqlite3 executemany (WAL, NORMAL, one tx)": std_executemany,
        "litelane.dbapi executemany (balanced, one tx)": dbapi_executemany,
        "litelane insert_many tuples (balanced)": native(rows),
        "litelane insert_many dicts (balanced)": native(dict_rows),
    }
    try:
        import sqlite_utils  # type: ignore

        def su_insert_all() -> float:
            p = fresh("ins")
            con = std_connect(p, "NORMAL")
            con.execute(RECORD_SCHEMA)
            db = sqlite_utils.Database(con)
            t = time.perf_counter()
            db["record"].insert_all(dict_rows)
            dt = time.perf_counter() - t
            assert con.execute("SELECT count(*) FROM record").fetchone()[0] == rows_n
            con.close()
            cleanup(p)
            return dt

        variants["sqlite-utils insert_all dicts (WAL, NORMAL)"] = su_insert_all
    except ImportError:
        print(json.dumps({"scenario": "insert", "note": "sqlite-utils not installed: skipped"}))

    results = {}
    for name, fn in variants.items():
        fn()  # warm-up (page cache, imports)
        wall, cpu = [], []
        for _ in range(runs):
            c0 = time.process_time()
            wall.append(fn())
            cpu.append(time.process_time() - c0)
        # process CPU seconds (every thread; includes the untimed set-up and
        # checks of each run, the same for every variant): less sensitive
        # than wall time to a machine shared with other work
        results[name] = emit("insert", name, wall, rows=rows_n, cpu_median_s=round(statistics.median(cpu), 4))
    ratios("insert", results, "sqlite3 executemany (WAL, NORMAL, one tx)")
    if "sqlite-utils insert_all dicts (WAL, NORMAL)" in results:
        ratios("insert", results, "sqlite-utils insert_all dicts (WAL, NORMAL)")


# --- threads: single-row transactions under safe -------------------------------


def threaded(connect: Callable[[str], Any], path: str, threads: int, per_thread: int) -> tuple:
    errors: List[str] = []
    barrier = threading.Barrier(threads)

    def work(i: int) -> None:
        con = connect(path)
        barrier.wait()
        for k in range(per_thread):
            try:
                con.execute("INSERT INTO t(who, k) VALUES (?, ?)", (i, k))
                con.commit()
            except Exception as e:  # noqa: BLE001 - counted
                errors.append(repr(e))
                try:
                    con.rollback()
                except Exception:  # noqa: BLE001
                    pass
        con.close()

    ts = [threading.Thread(target=work, args=(i,)) for i in range(threads)]
    t0 = time.perf_counter()
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return time.perf_counter() - t0, errors


def bench_threads(threads: int, per_thread: int, runs: int) -> None:
    schema = "CREATE TABLE t(id INTEGER PRIMARY KEY, who INTEGER, k INTEGER)"

    def std_run() -> tuple:
        p = fresh("thr")
        c = std_connect(p, "FULL")
        c.execute(schema)
        c.commit()
        c.close()
        dt, errs = threaded(
            lambda path: std_connect(path, "FULL", timeout=30, check_same_thread=False), p, threads, per_thread
        )
        n = sqlite3.connect(p).execute("SELECT count(*) FROM t").fetchone()[0]
        cleanup(p)
        return dt, errs, n

    def ll_run() -> tuple:
        p = fresh("thr")
        c = litelane.dbapi.connect(p, profile="safe")
        c.execute(schema)
        dt, errs = threaded(
            lambda path: litelane.dbapi.connect(path, profile="safe", timeout=30), p, threads, per_thread
        )
        n = c.execute("SELECT count(*) FROM t").fetchone()[0]
        m = c.engine.metrics()
        c.close()
        cleanup(p)
        return dt, errs, n, m["mean_group_size"]

    results = {}
    for name, fn in (("sqlite3 (WAL, synchronous=FULL, timeout=30)", std_run), ("litelane.dbapi (safe)", ll_run)):
        times, errors, extra = [], 0, {}
        for _ in range(runs):
            out = fn()
            times.append(out[0])
            errors += len(out[1])
            extra["rows_last_run"] = out[2]
            if len(out) > 3:
                extra["mean_group_size_last_run"] = round(out[3], 2)
            if out[1]:
                extra["first_error"] = out[1][0]
        results[name] = emit(
            "threads", name, times, errors, threads=threads, transactions=threads * per_thread, **extra
        )
    ratios("threads", results, "sqlite3 (WAL, synchronous=FULL, timeout=30)")


# --- report 002's script, as published ---------------------------------------


def bench_report002(runs: int) -> None:
    results = {}
    for driver in ("sqlite3", "litelane.dbapi"):
        times, errors = [], 0
        for _ in range(runs):
            d = tempfile.mkdtemp(prefix="llbench-002-")
            proc = subprocess.run(
                [sys.executable, os.path.join(HERE, "run_report002.py"), "--driver", driver, "--dir", d],
                capture_output=True,
                text=True,
            )
            summary = json.loads(proc.stdout.strip().splitlines()[-1])
            times.append(summary["seconds"])
            errors += summary["errors"]
            shutil.rmtree(d, ignore_errors=True)
        results[driver] = emit(
            "report002", driver, times, errors, note="seconds = the script's main(): both of its runs"
        )
    ratios("report002", results, "sqlite3")


# --- asyncio: aiosqlite vs litelane ------------------------------------------


def bench_async(rows_n: int, runs: int) -> None:
    schema = "CREATE TABLE t(id INTEGER PRIMARY KEY, v INTEGER)"
    results = {}

    try:
        import aiosqlite  # type: ignore

        async def aio() -> float:
            p = fresh("aio")
            async with aiosqlite.connect(p) as db:
                await db.execute("PRAGMA journal_mode=WAL")
                await db.execute("PRAGMA synchronous=NORMAL")
                await db.execute(schema)
                await db.commit()
                t = time.perf_counter()
                for i in range(rows_n):
                    await db.execute("INSERT INTO t(v) VALUES (?)", (i,))
                await db.commit()
                dt = time.perf_counter() - t
            cleanup(p)
            return dt

        results["aiosqlite: await execute per row, one tx"] = emit(
            "async", "aiosqlite: await execute per row, one tx", [asyncio.run(aio()) for _ in range(runs)], rows=rows_n
        )
    except ImportError:
        print(json.dumps({"scenario": "async", "note": "aiosqlite not installed: skipped"}))

    def ll(kind: str) -> float:
        async def main() -> float:
            p = fresh("aio")
            db = litelane.open(p)
            await db.aexecute(schema)
            t = time.perf_counter()
            if kind == "tx":
                async with db.atransaction() as tx:
                    for i in range(rows_n):
                        await tx.execute("INSERT INTO t(v) VALUES (?)", (i,))
            elif kind == "awrite":

                def fill(tx: Any) -> None:
                    for i in range(rows_n):
                        tx.execute("INSERT INTO t(v) VALUES (?)", (i,))

                await db.awrite(fill)
            elif kind == "ainsert_many":
                await db.ainsert_many("t", ((None, i) for i in range(rows_n)))
            dt = time.perf_counter() - t
            assert (await db.aquery("SELECT count(*) FROM t"))[0][0] == rows_n
            db.close()
            cleanup(p)
            return dt

        return asyncio.run(main())

    for kind, name in (
        ("tx", "litelane: await tx.execute per row, one tx"),
        ("awrite", "litelane: await db.awrite(fn), one hop"),
        ("ainsert_many", "litelane: await db.ainsert_many, one hop"),
    ):
        results[name] = emit("async", name, [ll(kind) for _ in range(runs)], rows=rows_n)
    base = "aiosqlite: await execute per row, one tx"
    if base in results:
        ratios("async", results, base)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("scenario", choices=["insert", "threads", "report002", "async", "all"])
    ap.add_argument("--rows", type=int, default=None)
    ap.add_argument("--runs", type=int, default=None)
    ap.add_argument("--threads", type=int, default=16)
    ap.add_argument("--per-thread", type=int, default=100)
    a = ap.parse_args()
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
    if a.scenario in ("insert", "all"):
        bench_insert(a.rows or 100_000, a.runs or 5)
    if a.scenario in ("threads", "all"):
        bench_threads(a.threads, a.per_thread, a.runs or 3)
    if a.scenario in ("report002", "all"):
        bench_report002(a.runs or 3)
    if a.scenario in ("async", "all"):
        bench_async(a.rows or 20_000, a.runs or 3)


if __name__ == "__main__":
    main()
