#!/usr/bin/env python3
"""Recurring-load benchmark: what `--pk --on-conflict` and several files
cost beside a plain import of the same rows. Wall-clock time of each whole
`litelane import` process into a new database, median of RUNS runs, the
variants interleaved so that machine noise hits them alike; prints rows/s
and each variant's ratio to plain import's rows/s.

    cargo build --release -p litelane-cli
    python3 examples/make_wide_csv.py --rows 300000 > /tmp/wide.csv
    python3 examples/bench_recurring.py /tmp/wide.csv 5

Variants:
  plain                  litelane import FILE
  pk id (fail)           --pk id (an INTEGER PRIMARY KEY: each row's key is
                         checked), the default --on-conflict fail
  pk id, upsert          --pk id --on-conflict upsert, into an empty table
  pk id, ignore          --pk id --on-conflict ignore, into an empty table
  2 files                the same rows split in two files (same header),
                         one command
  2 files + source col   the same, with --source-column src
  upsert, all present    --on-conflict upsert into a table already holding
                         every row (every row becomes an UPDATE); for
                         information, not a target
"""
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from bench_import import rm  # the script's folder is on sys.path

LITELANE = os.environ.get("LITELANE", "target/release/litelane")


def cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def run(args):
    """Wall-clock and CPU (user + system) seconds of one import."""
    t, c = time.perf_counter(), cpu()
    subprocess.run([LITELANE, "import", *args, "--quiet"], check=True,
                   stdout=subprocess.DEVNULL)
    return time.perf_counter() - t, cpu() - c


def main():
    src = sys.argv[1]
    runs = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    tmp = tempfile.mkdtemp(prefix="litelane-recurring-")
    with open(src, "rb") as f:
        lines = f.readlines()
    header, body = lines[0], lines[1:]
    rows = len(body)  # the file has no multi-line records
    half = rows // 2
    parts = []
    for i, chunk in enumerate((body[:half], body[half:])):
        p = os.path.join(tmp, f"part{i}.csv")
        with open(p, "wb") as f:
            f.write(header)
            f.writelines(chunk)
        parts.append(p)
    db = os.path.join(tmp, "out.db")
    full = os.path.join(tmp, "full.db")
    rm(full)
    run([src, "--db", full, "--table", "t", "--pk", "id"])

    def fresh(args):
        def go():
            rm(db)
            return run([*args, "--db", db, "--table", "t"])
        return go

    def all_present():
        rm(db)
        for s in ("", "-wal"):
            if os.path.exists(full + s):
                shutil.copy(full + s, db + s)
        return run([src, "--db", db, "--table", "t", "--mode", "append", "--pk", "id",
                    "--on-conflict", "upsert"])

    variants = [
        ("plain", fresh([src])),
        ("pk id (fail)", fresh([src, "--pk", "id"])),
        ("pk id, upsert", fresh([src, "--pk", "id", "--on-conflict", "upsert"])),
        ("pk id, ignore", fresh([src, "--pk", "id", "--on-conflict", "ignore"])),
        ("2 files", fresh(parts)),
        ("2 files + source col", fresh([*parts, "--source-column", "src"])),
        ("upsert, all present", all_present),
    ]
    wall = {name: [] for name, _ in variants}
    cpus = {name: [] for name, _ in variants}
    for _ in range(runs):
        for name, go in variants:
            w, c = go()
            wall[name].append(w)
            cpus[name].append(c)
    base = rows / statistics.median(wall["plain"])
    base_cpu = rows / statistics.median(cpus["plain"])
    print(f"{rows} rows, median of {runs} runs (interleaved); 'vs plain' is the ratio of "
          "rows/s to plain import's (wall clock, and per CPU second: user + system)")
    print(f"{'variant':24} {'wall s':>8} {'rows/s':>10} {'vs plain':>9} {'cpu s':>8} "
          f"{'vs plain':>9}")
    for name, _ in variants:
        med = statistics.median(wall[name])
        cmed = statistics.median(cpus[name])
        rate = rows / med
        print(f"{name:24} {med:8.3f} {rate:10.0f} {rate / base:9.3f} {cmed:8.3f} "
              f"{rows / cmed / base_cpu:9.3f}")
    shutil.rmtree(tmp)


if __name__ == "__main__":
    main()
