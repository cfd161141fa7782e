"""Opening a database another user owns (issue 35): a user who may read the
file but not write it reads where ``sqlite3`` reads, and a database in a
directory its user may not write fails at open with the file and the cause
named. Each case runs the child as ``nobody`` (setpriv) beside ``sqlite3``
in the same run, so the tests need root (CI runs as root) and skip
otherwise."""

import os
import shutil
import subprocess
import sys
import tempfile

import litelane.dbapi as dbapi
import pytest

NOBODY = 65534

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("setpriv") is None,
    reason="needs root and setpriv to run a child as another user",
)

CHILD = r"""
import sys
if sys.argv[1] == "litelane":
    import litelane.dbapi as sqlite3
else:
    import sqlite3
try:
    con = sqlite3.connect(sys.argv[2])
    rows = con.execute("SELECT count(*) FROM t").fetchone()[0]
except sqlite3.Error as e:
    print("open-or-read-error", e)
    sys.exit(0)
try:
    con.execute("INSERT INTO t VALUES (99)")
    con.commit()
    print("rows", rows, "write-ok")
except sqlite3.Error as e:
    print("rows", rows, "write-error", e)
"""


def _as_nobody(module, path):
    out = subprocess.run(
        [
            "setpriv",
            f"--reuid={NOBODY}",
            f"--regid={NOBODY}",
            "--clear-groups",
            sys.executable,
            "-c",
            CHILD,
            module,
            path,
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


@pytest.fixture
def folder():
    d = tempfile.mkdtemp(prefix="litelane-ro-")
    os.chmod(d, 0o755)
    yield d
    shutil.rmtree(d, ignore_errors=True)


def test_a_reader_who_cannot_write_the_file_reads_as_with_sqlite3(folder):
    path = os.path.join(folder, "app.db")
    owner = dbapi.connect(path)  # root's, kept open: -wal and -shm exist
    owner.execute("CREATE TABLE t(x)")
    owner.executemany("INSERT INTO t VALUES (?)", [(1,), (2,), (3,)])
    owner.commit()
    assert os.path.exists(path + "-wal") and os.path.exists(path + "-shm")
    try:
        stock = _as_nobody("sqlite3", path)
        lane = _as_nobody("litelane", path)
    finally:
        owner.close()
    assert stock == "rows 3 write-error attempt to write a readonly database"
    assert lane == stock


def test_a_database_in_a_directory_its_user_cannot_write_names_the_cause(folder):
    path = os.path.join(folder, "app.db")
    con = dbapi.connect(path)
    con.execute("CREATE TABLE t(x)")
    con.commit()
    con.close()  # the last connection: -wal and -shm are gone
    os.chown(path, NOBODY, NOBODY)  # nobody's file in root's directory
    stock = _as_nobody("sqlite3", path)
    lane = _as_nobody("litelane", path)
    assert stock == "open-or-read-error attempt to write a readonly database"
    assert lane.startswith("open-or-read-error attempt to write a readonly database")
    assert f"opening {path}" in lane
    assert f"its directory {folder} is not writable" in lane
