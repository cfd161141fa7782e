"""Runs report 002's benchmark script (report002_wal.py, as published)
through a DB-API driver, counting the errors the script itself never looks
at (its futures' exceptions) and checking that every row it wrote is there.

    python benchmarks/python/run_report002.py --driver litelane.dbapi
    python benchmarks/python/run_report002.py --driver sqlite3

The only change to the script is its `import sqlite3` line, which becomes
`import <driver> as sqlite3`. Prints the script's own output, then one JSON
line: {"driver", "errors", "rows": {file: count}, "seconds"}.
"""

import argparse
import concurrent.futures
import json
import os
import sys
import tempfile
import time
import types

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "report002_wal.py")


def load(driver: str) -> types.ModuleType:
    with open(SCRIPT) as f:
        source = f.read()
    if driver != "sqlite3":
        assert "\nimport sqlite3\n" in source
        source = source.replace("\nimport sqlite3\n", f"\nimport {driver} as sqlite3\n", 1)
    mod = types.ModuleType("report002_wal")
    mod.__file__ = SCRIPT
    exec(compile(source, SCRIPT, "exec"), mod.__dict__)
    return mod


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--driver", default="litelane.dbapi")
    ap.add_argument("--dir", default=None, help="working directory (default: a new temp dir)")
    args = ap.parse_args()

    futures = []
    original_submit = concurrent.futures.ThreadPoolExecutor.submit

    def submit(self, fn, *a, **kw):
        fut = original_submit(self, fn, *a, **kw)
        futures.append(fut)
        return fut

    concurrent.futures.ThreadPoolExecutor.submit = submit
    workdir = args.dir or tempfile.mkdtemp(prefix="report002-")
    os.chdir(workdir)
    mod = load(args.driver)
    t0 = time.perf_counter()
    mod.main()
    seconds = time.perf_counter() - t0
    errors = [repr(f.exception()) for f in futures if f.exception() is not None]

    import sqlite3 as std

    rows = {}
    for name in ("test_no_wal.db", "test_wal.db"):
        con = std.connect(name)
        rows[name] = con.execute("SELECT count(*) FROM test_table").fetchone()[0]
        con.close()
    print(
        json.dumps(
            {
                "driver": args.driver,
                "errors": len(errors),
                "first_errors": errors[:3],
                "rows": rows,
                "seconds": round(seconds, 3),
            }
        )
    )
    return 0 if not errors else 1


if __name__ == "__main__":
    sys.exit(main())
