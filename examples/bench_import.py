#!/usr/bin/env python3
"""Import benchmark: `litelane import` beside the sqlite3 shell's `.import`
and beside SQLite copying the same rows table to table (INSERT ... SELECT
from an attached database). Wall-clock time of each whole process, median of
--runs runs, variants interleaved so that machine noise hits them alike.

    cargo build --release -p litelane-cli
    python3 examples/make_wide_csv.py --rows 300000 > /tmp/wide.csv
    python3 examples/bench_import.py /tmp/wide.csv

NDJSON mode: the same rows as NDJSON (examples/csv_to_ndjson.py) beside the
CSV and the copy floor, the floor copied from the table the NDJSON import made:

    python3 examples/csv_to_ndjson.py /tmp/wide.csv > /tmp/wide.ndjson
    python3 examples/bench_import.py /tmp/wide.csv 5 --ndjson /tmp/wide.ndjson

Peers:
  shell .import            sqlite3 defaults; every column TEXT, '' not NULL
  shell .import typed+null typed table (same as litelane's), .import into it,
                           then one UPDATE turning '' into NULL: the same
                           result as litelane's
  INSERT...SELECT          from the table litelane made, into an empty table
                           of the same schema, same journal/synchronous as the
                           profile; SQLite copies records as they are (the
                           "xfer" optimisation)
  INSERT...SELECT WHERE 1  the same, but decoding and re-encoding every row
  floor: text -> typed     the floor of a typed import (issue 12): the CSV's
                           text, in a table of TEXT columns of another
                           database (made once by the shell's .import, not
                           timed), copied by INSERT ... SELECT NULLIF(c, '')
                           into the typed table litelane made, same journal
                           and synchronous as the profile
"""
import os
import statistics
import subprocess
import sys
import tempfile
import time

LITELANE = os.environ.get("LITELANE", "target/release/litelane")
# NDJSON mode: another build (say, before a change) timed in the same run.
LITELANE_BASE = os.environ.get("LITELANE_BASE")
SQLITE3 = os.environ.get("SQLITE3", "sqlite3")
TEXT_FLOOR = "floor: text -> typed copy, WAL, NORMAL"
TEXT_FLOOR_FAST = "floor: text -> typed copy, memory, OFF"


def timed(cmd, **kw):
    t = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, **kw)
    return time.perf_counter() - t


def rm(db):
    for suffix in ("", "-wal", "-shm", "-journal"):
        try:
            os.remove(db + suffix)
        except FileNotFoundError:
            pass


def main():
    args = sys.argv[1:]
    ndjson = None
    if "--ndjson" in args:
        i = args.index("--ndjson")
        ndjson = args[i + 1]
        del args[i:i + 2]
    src = args[0]
    runs = int(args[1]) if len(args) > 1 else 3
    tmp = tempfile.mkdtemp(prefix="litelane-bench-")
    rows = sum(1 for _ in open(src, "rb")) - 1
    ref = os.path.join(tmp, "ref.db")
    # The floor copies the rows litelane made from the input timed against it.
    subprocess.run([LITELANE, "import", ndjson or src, "--db", ref, "--table", "t", "--quiet"],
                   check=True)
    schema = subprocess.run([SQLITE3, ref, ".schema t"], check=True, capture_output=True,
                            text=True).stdout.replace("IF NOT EXISTS ", "")
    cols = subprocess.run([SQLITE3, ref, "SELECT name FROM pragma_table_info('t')"],
                          check=True, capture_output=True, text=True).stdout.split()
    nullify = "UPDATE t SET " + ", ".join(f'"{c}" = NULLIF("{c}", \'\')' for c in cols) + ";"
    db = os.path.join(tmp, "out.db")
    # The CSV's text in a table of TEXT columns (what the shell's .import
    # makes), in a database of its own, made once: the source of the floor.
    text = os.path.join(tmp, "text.db")
    subprocess.run([SQLITE3, text, ".import --csv " + src + " t"], check=True)
    text_cols = subprocess.run([SQLITE3, text, "SELECT name FROM pragma_table_info('t')"],
                               check=True, capture_output=True, text=True).stdout.split("\n")
    text_cols = [c for c in text_cols if c]
    names = ", ".join(f'"{c}"' for c in text_cols)
    nullifs = ", ".join(f'NULLIF("{c}", \'\')' for c in text_cols)

    def litelane(profile, path=src, exe=LITELANE):
        def run():
            rm(db)
            return timed([exe, "import", path, "--db", db, "--table", "t", "--quiet",
                          "--profile", profile])
        return run

    def shell_import():
        rm(db)
        return timed([SQLITE3, db, ".mode csv", ".import " + src + " t"])

    def shell_typed():
        rm(db)
        subprocess.run([SQLITE3, db, schema], check=True)
        return timed([SQLITE3, db, ".import --csv --skip 1 " + src + " t", "BEGIN", nullify,
                      "COMMIT"])

    def attached_copy(journal, sync, source, insert):
        """A fresh typed table (litelane's schema), then `insert` from the
        database `source` attached as `s`, timed, in one transaction."""
        def run():
            rm(db)
            subprocess.run([SQLITE3, db, f"PRAGMA journal_mode={journal};", schema], check=True,
                           stdout=subprocess.DEVNULL)
            return timed([SQLITE3, db, f"PRAGMA journal_mode={journal}; PRAGMA synchronous={sync};"
                          f" ATTACH '{source}' AS s; BEGIN; {insert}; COMMIT;"])
        return run

    def copy(journal, sync, where=""):
        return attached_copy(journal, sync, ref, f"INSERT INTO t SELECT * FROM s.t {where}")

    def text_copy(journal, sync):
        """The floor of a typed import: the CSV's text copied into the typed
        table litelane made, '' turned into NULL as litelane does."""
        return attached_copy(journal, sync, text,
                             f"INSERT INTO t({names}) SELECT {nullifs} FROM s.t")

    variants = [
        ("litelane import (balanced: WAL, NORMAL)", litelane("balanced")),
        ("litelane import (fast: memory journal, OFF)", litelane("fast")),
        ("sqlite3 .import (all TEXT, '' kept)", shell_import),
        ("sqlite3 .import typed + NULL update", shell_typed),
        ("INSERT...SELECT, WAL, NORMAL", copy("wal", "NORMAL")),
        ("INSERT...SELECT WHERE 1, WAL, NORMAL", copy("wal", "NORMAL", "WHERE 1")),
        ("INSERT...SELECT, memory journal, OFF", copy("memory", "OFF")),
        ("INSERT...SELECT WHERE 1, memory journal, OFF", copy("memory", "OFF", "WHERE 1")),
        (TEXT_FLOOR, text_copy("wal", "NORMAL")),
        (TEXT_FLOOR_FAST, text_copy("memory", "OFF")),
    ]
    if ndjson:
        variants = [
            ("litelane import NDJSON (balanced)", litelane("balanced", ndjson)),
            ("litelane import CSV (balanced)", litelane("balanced")),
            ("INSERT...SELECT, WAL, NORMAL", copy("wal", "NORMAL")),
            ("INSERT...SELECT WHERE 1, WAL, NORMAL", copy("wal", "NORMAL", "WHERE 1")),
            (TEXT_FLOOR, text_copy("wal", "NORMAL")),
        ]
        if LITELANE_BASE:
            variants.insert(1, ("LITELANE_BASE import NDJSON (balanced)",
                                litelane("balanced", ndjson, LITELANE_BASE)))
    times = {name: [] for name, _ in variants}
    for _ in range(runs):
        for name, run in variants:
            times[name].append(run())
    med = {name: statistics.median(t) for name, t in times.items()}
    print(f"{rows} rows from {src} ({os.path.getsize(src) / 1e6:.1f} MB), "
          f"median of {runs} runs, wall clock per process")
    print(f"{'variant':46} {'seconds':>8} {'rows/s':>10}")
    for name, _ in variants:
        print(f"{name:46} {med[name]:8.3f} {rows / med[name]:10,.0f}")
    if ndjson:
        print(f"NDJSON: {ndjson} ({os.path.getsize(ndjson) / 1e6:.1f} MB), the floor copies "
              "the table its import made")
        print()
        for mine in [n for n, _ in variants if n.startswith(("litelane", "LITELANE_BASE"))]:
            for peer in (TEXT_FLOOR, "INSERT...SELECT, WAL, NORMAL",
                         "INSERT...SELECT WHERE 1, WAL, NORMAL"):
                print(f"{mine} / {peer}: {med[mine] / med[peer]:.2f}x the time")
        return
    bal = med["litelane import (balanced: WAL, NORMAL)"]
    fast = med["litelane import (fast: memory journal, OFF)"]
    print()
    for peer in ("sqlite3 .import (all TEXT, '' kept)", "sqlite3 .import typed + NULL update"):
        print(f"{peer}: litelane balanced {med[peer] / bal:.2f}x faster, "
              f"fast {med[peer] / fast:.2f}x faster")
    for peer, mine in ((TEXT_FLOOR, bal),
                       (TEXT_FLOOR_FAST, fast),
                       ("INSERT...SELECT, WAL, NORMAL", bal),
                       ("INSERT...SELECT WHERE 1, WAL, NORMAL", bal),
                       ("INSERT...SELECT, memory journal, OFF", fast),
                       ("INSERT...SELECT WHERE 1, memory journal, OFF", fast)):
        print(f"litelane / {peer}: {mine / med[peer]:.2f}x the time")


if __name__ == "__main__":
    main()
