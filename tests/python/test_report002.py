"""Report 002's published benchmark script runs unchanged (but for its
`import sqlite3` line) on litelane.dbapi: no errors, every row written."""

import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RUNNER = os.path.join(ROOT, "benchmarks", "python", "run_report002.py")


def test_report002_script_on_litelane_dbapi(tmp_path):
    proc = subprocess.run(
        [sys.executable, RUNNER, "--driver", "litelane.dbapi", "--dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout.strip().splitlines()
    summary = json.loads(out[-1])
    assert summary["errors"] == 0, summary
    assert summary["rows"] == {"test_no_wal.db": 12 * 2000, "test_wal.db": 12 * 2000}
    assert any("Writes per second" in line for line in out)


def test_the_script_is_the_published_one():
    with open(os.path.join(ROOT, "benchmarks", "python", "report002_wal.py")) as f:
        src = f.read()
    assert "\nimport sqlite3\n" in src
    assert "num_writers = 12" in src and "num_readers = 40" in src
