"""Microseconds per statement of a transaction that runs on its worker
thread (docs/python.md, "Report 002's script"): another connection holds
the writer when the transaction begins, so litelane.dbapi queues it on a
worker, and each of its 5,000 inserts is one round trip to that thread.

    python benchmarks/python/txn_handover.py [--runs 5] [--rows 5000]

Prints the median and every run. LITELANE_TXN_SPIN_US and
LITELANE_TXN_YIELDS set how the two threads wait for each other.
"""

import argparse
import os
import statistics
import tempfile
import threading
import time

import litelane.dbapi as dbapi


def one_run(con, other, rows):
    held = threading.Event()

    def hold():
        other.execute("INSERT INTO t(x) VALUES (-1)")  # holds the writer
        held.set()
        time.sleep(0.005)
        other.commit()

    holder = threading.Thread(target=hold)
    holder.start()
    held.wait()
    con.execute("INSERT INTO t(x) VALUES (0)")  # queued: runs on a worker
    holder.join()
    start = time.perf_counter()
    for i in range(rows):
        con.execute("INSERT INTO t(x) VALUES (?)", (i,))
    took = time.perf_counter() - start
    con.commit()
    return took / rows * 1e6


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--rows", type=int, default=5000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "t.db")
        con = dbapi.connect(path)
        con.execute("CREATE TABLE t(x)")
        con.commit()
        other = dbapi.connect(path, check_same_thread=False)
        runs = [one_run(con, other, args.rows) for _ in range(args.runs)]
        other.close()
        con.close()
    print(f"{statistics.median(runs):.1f} us per statement (runs: {', '.join(f'{r:.1f}' for r in runs)})")


if __name__ == "__main__":
    main()
