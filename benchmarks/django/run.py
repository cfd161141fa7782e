"""A Django app under gunicorn, stock SQLite backend vs litelane.django, same run.

The app (benchapp/) has one model and one view that, per request, runs a
transaction (a lookup, then an insert) and a read. For each backend and each
number of gunicorn sync workers, a fresh database is created, gunicorn is
started, and CLIENTS threads send requests (a new HTTP connection each: sync
workers close it after each response) for SECONDS after a short warm-up.
Reported per cell: requests/s (HTTP 200 only), p50/p99 latency (every
request), HTTP 500s, other failures (refused or reset connections) and rows
lost (acknowledged with a 200 but absent from the database once gunicorn has
stopped). Then litelane's ratios against the stock backend of the same run.

    python benchmarks/django/run.py [--workers 4,8] [--seconds 20] [--runs 2] [--clients 32]

Needs Django and gunicorn in the interpreter running it (pip install Django
gunicorn) and litelane installed. This is a benchmark, not a test.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import signal
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from typing import Dict, List

HERE = os.path.dirname(os.path.abspath(__file__))
BACKENDS = ("stock", "litelane")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def env_for(backend: str, db: str) -> Dict[str, str]:
    env = dict(os.environ)
    env.update(BENCH_BACKEND=backend, BENCH_DB=db, DJANGO_SETTINGS_MODULE="benchapp.settings")
    env["PYTHONPATH"] = HERE + os.pathsep + env.get("PYTHONPATH", "")
    return env


def wait_up(port: int, proc: subprocess.Popen, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"gunicorn exited with {proc.returncode}")
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            c.request("GET", "/hit?client=-1&seq=0")
            r = c.getresponse()
            r.read()
            c.close()
            if r.status == 200:
                return
        except OSError:
            pass
        time.sleep(0.2)
    raise RuntimeError("gunicorn did not answer in time")


class Load:
    """CLIENTS threads sending requests until told to stop."""

    def __init__(self, port: int, clients: int) -> None:
        self.port = port
        self.clients = clients
        self.measuring = False
        self.stop = False
        self.lock = threading.Lock()
        self.latencies: List[float] = []
        self.ok = 0
        self.e500 = 0
        self.other = 0
        self.acked: List[tuple] = []
        self.errors: Dict[str, int] = {}
        self.max_gap = 0.0

    def ticker(self) -> None:
        """The longest this process went without running a 10 ms tick: a
        large gap means the load driver itself (or the machine) stalled."""
        last = time.perf_counter()
        while not self.stop:
            time.sleep(0.01)
            now = time.perf_counter()
            if self.measuring:
                self.max_gap = max(self.max_gap, now - last)
            last = now

    def client(self, cid: int) -> None:
        seq = 0
        lat, acked = [], []
        ok = e500 = other = 0
        while not self.stop:
            seq += 1
            measuring = self.measuring
            t0 = time.perf_counter()
            status, body = None, b""
            try:
                c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
                c.request("GET", f"/hit?client={cid}&seq={seq}")
                r = c.getresponse()
                body = r.read()
                status = r.status
                c.close()
            except OSError as e:
                with self.lock:
                    key = type(e).__name__
                    self.errors[key] = self.errors.get(key, 0) + 1
            dt = time.perf_counter() - t0
            if status == 200:
                acked.append((cid, seq))
                json.loads(body)
            if measuring:
                lat.append(dt)
                if status == 200:
                    ok += 1
                elif status == 500:
                    e500 += 1
                else:
                    other += 1
        with self.lock:
            self.latencies.extend(lat)
            self.acked.extend(acked)
            self.ok += ok
            self.e500 += e500
            self.other += other


def cell(backend: str, workers: int, seconds: float, clients: int, warmup: float, tmp: str) -> dict:
    db = os.path.join(tmp, f"{backend}-{workers}-{time.monotonic_ns()}.db")
    env = env_for(backend, db)
    subprocess.run(
        [sys.executable, "-m", "django", "migrate", "--run-syncdb", "-v", "0"],
        env=env,
        cwd=HERE,
        check=True,
    )
    port = free_port()
    log = open(os.path.join(tmp, f"gunicorn-{backend}-{workers}.log"), "w")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gunicorn",
            "--workers",
            str(workers),
            "--worker-class",
            "sync",
            "--bind",
            f"127.0.0.1:{port}",
            "--timeout",
            "120",
            "--backlog",
            "2048",
            "benchapp.wsgi",
        ],
        env=env,
        cwd=HERE,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        wait_up(port, proc)
        load = Load(port, clients)
        threads = [threading.Thread(target=load.client, args=(i,)) for i in range(clients)]
        threads.append(threading.Thread(target=load.ticker))
        for t in threads:
            t.start()
        time.sleep(warmup)
        load.measuring = True
        start = time.perf_counter()
        time.sleep(seconds)
        load.measuring = False
        elapsed = time.perf_counter() - start
        load.stop = True
        for t in threads:
            t.join()
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
    con = sqlite3.connect(db)
    present = set(con.execute('SELECT "client", "seq" FROM "benchapp_hit"'))
    con.close()
    lost = sum(1 for a in load.acked if a not in present)
    lat = sorted(load.latencies)

    def p(q: float) -> float:
        return lat[min(len(lat) - 1, int(q * len(lat)))] * 1000 if lat else float("nan")

    return {
        "backend": backend,
        "workers": workers,
        "clients": clients,
        "seconds": round(elapsed, 2),
        "rps": load.ok / elapsed,
        "p50_ms": p(0.50),
        "p99_ms": p(0.99),
        "http_500": load.e500,
        "other_failures": load.other + sum(load.errors.values()),
        "acknowledged": len(load.acked),
        "lost": lost,
        "driver_max_gap_ms": round(load.max_gap * 1000, 1),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", default="4,8", help="gunicorn sync workers, comma-separated (default 4,8)")
    ap.add_argument("--seconds", type=float, default=20.0, help="measured seconds per cell (default 20)")
    ap.add_argument("--warmup", type=float, default=2.0, help="seconds of load before measuring (default 2)")
    ap.add_argument("--runs", type=int, default=2, help="runs per cell; medians are reported (default 2)")
    ap.add_argument("--clients", type=int, default=32, help="concurrent client threads (default 32)")
    ap.add_argument("--json", help="append one JSON line per cell and run to this file")
    ap.add_argument("--backends", default=",".join(BACKENDS), help="default: stock,litelane")
    ap.add_argument("--keep", help="keep the databases and gunicorn logs in this directory")
    args = ap.parse_args()
    workers = [int(w) for w in args.workers.split(",")]
    results: Dict[tuple, List[dict]] = {}
    backends = tuple(args.backends.split(","))
    with tempfile.TemporaryDirectory(prefix="litelane-django-bench-") as tmp:
        if args.keep:
            os.makedirs(args.keep, exist_ok=True)
            tmp = args.keep
        for run in range(args.runs):
            for w in workers:
                # Alternate the order per run so neither side always goes first.
                order = backends if (run + w) % 2 == 0 else backends[::-1]
                for backend in order:
                    r = cell(backend, w, args.seconds, args.clients, args.warmup, tmp)
                    r["run"] = run + 1
                    print(json.dumps(r), flush=True)
                    if args.json:
                        with open(args.json, "a") as f:
                            f.write(json.dumps(r) + "\n")
                    results.setdefault((backend, w), []).append(r)
    med = statistics.median
    print(f"\nmedians of {args.runs} runs, {args.clients} clients, {args.seconds:g} s per cell")
    head = ("workers", "backend", "req/s", "p50 ms", "p99 ms", "500s", "other", "lost")
    print(" ".join(f"{h:>{n}}" for h, n in zip(head, (7, 9, 8, 8, 8, 6, 6, 5), strict=True)))
    for w in workers:
        for b in backends:
            rs = results[(b, w)]
            print(
                f"{w:>7} {b:>9} {med(r['rps'] for r in rs):>8.0f} {med(r['p50_ms'] for r in rs):>8.1f} "
                f"{med(r['p99_ms'] for r in rs):>8.1f} {sum(r['http_500'] for r in rs):>6} "
                f"{sum(r['other_failures'] for r in rs):>6} {sum(r['lost'] for r in rs):>5}"
            )
        if len(backends) < 2:
            continue
        s, lt = results[("stock", w)], results[("litelane", w)]
        print(
            f"{w:>7} {'ratio':>9} {med(r['rps'] for r in lt) / med(r['rps'] for r in s):>8.2f}x"
            f" {'':>8} {med(r['p99_ms'] for r in lt) / med(r['p99_ms'] for r in s):>8.2f}x (litelane / stock)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
