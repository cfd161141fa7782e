"""Several single-threaded worker processes writing one file with the
drop-in in autocommit mode (isolation_level=None), under its default
durability (safe): each INSERT is a one-statement write that the process
holding the write turn may commit for the others (combined commits,
docs/concurrency.md). What each program sees must be what sqlite3 shows:
every acknowledged row stored once, cursor.lastrowid the rowid of the row
it inserted, a duplicate key raising IntegrityError with sqlite3's message,
and statements really committed by other processes."""

import json
import os
import sqlite3 as std
import subprocess
import sys

import litelane.dbapi as dbapi
import pytest

WORKERS = 4
ROWS = 300
DUP_AT = 150  # each worker inserts a key it already inserted, once

CHILD = r"""
import json, sys
import litelane.dbapi as dbapi
path, me, rows, dup_at = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
con = dbapi.connect(path, isolation_level=None)
if sys.argv[5] == "function":
    con.create_function("twice", 1, lambda x: 2 * x)
sys.stdout.write("READY\n"); sys.stdout.flush()
sys.stdin.readline()
acked, rowids, errors = [], {}, []
for i in range(rows):
    k = me * 1_000_000 + (i if i != dup_at else 0)
    try:
        cur = con.execute("INSERT INTO t(k, v) VALUES (?, ?)", (k, f"w{me}-{i}"))
        acked.append(k)
        rowids[k] = cur.lastrowid
    except dbapi.IntegrityError as e:
        errors.append([type(e).__name__, str(e), isinstance(e, __import__("sqlite3").IntegrityError)])
m = con._engine.metrics()
print(json.dumps({"acked": acked, "rowids": rowids, "errors": errors,
                  "elsewhere": m["combined_elsewhere"], "here": m["combined_here"]}))
"""


@pytest.mark.parametrize("setup", ["plain", "function"])
def test_worker_processes_in_autocommit_combine_and_see_sqlite3_outcomes(db_path, setup):
    """With a Python function on the connections ("function"), nothing is
    combined: the function exists only in its own process."""
    con = dbapi.connect(db_path)
    con.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, k INTEGER NOT NULL UNIQUE, v TEXT)")
    con.commit()
    con.close()
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", CHILD, db_path, str(w), str(ROWS), str(DUP_AT), setup],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=dict(os.environ),
        )
        for w in range(WORKERS)
    ]
    for p in procs:
        assert p.stdout.readline().strip() == "READY"
    for p in procs:
        p.stdin.write("GO\n")
        p.stdin.flush()
    reports = [json.loads(p.communicate(timeout=120)[0].strip().splitlines()[-1]) for p in procs]
    stored = dict(std.connect(db_path).execute("SELECT k, id FROM t").fetchall())
    acked = [k for r in reports for k in r["acked"]]
    assert sorted(acked) == sorted(stored), "every acknowledged row stored, and only those"
    for r in reports:
        assert len(r["acked"]) == ROWS - 1
        # lastrowid: the rowid of the row this cursor inserted.
        assert all(stored[int(k)] == rowid for k, rowid in r["rowids"].items())
        assert r["errors"] == [["IntegrityError", "UNIQUE constraint failed: t.k", True]]
    elsewhere = sum(r["elsewhere"] for r in reports)
    assert elsewhere == sum(r["here"] for r in reports)
    if setup == "plain":
        assert elsewhere > 0, "no statement was committed by another process"
    else:
        assert elsewhere == 0, "a connection with a function was combined"
