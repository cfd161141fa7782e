"""CPython's own test_sqlite3 suite against litelane.dbapi (issue 19's proof),
and the harness that runs it (tests/python/cpython_sqlite3.py).

The suite is not in the repository. It is the interpreter's own
``test.test_sqlite3`` when it has one, or the directory named by
``LITELANE_CPYTHON_SUITE`` (``scripts/cpython-sqlite3 --fetch-only`` prints
it; ``scripts/test`` sets it and ``LITELANE_REQUIRE_CPYTHON_SUITE``).
"""

import os
import platform
import re
import sys
import textwrap

import cpython_sqlite3 as harness
import pytest

#: The least share of the tests passing on the standard library that must
#: also pass on litelane, per CPython version (each has its own suite).
#: Measured 2026-11-25 (before -> after the drop-in round of issue 19):
#: 3.11.7 30 -> 415 of 430 (96.5 %); 3.12.1 30 -> 420 of 461 (91.1 %);
#: 3.13.0 12 -> 423 of 477 (88.7 %). Issue 19 asks 92 % on the tested one.
FLOORS = {(3, 11): 0.955, (3, 12): 0.90, (3, 13): 0.88}
#: For other versions: the lowest of the measured floors.
FLOOR = FLOORS.get(sys.version_info[:2], min(FLOORS.values()))


def _suite_dir():
    """(directory to pass as suite_dir or None, description), or skips."""
    env = os.environ.get("LITELANE_CPYTHON_SUITE")
    if env:
        if not os.path.isfile(os.path.join(env, "test_sqlite3", "__init__.py")):
            pytest.fail(f"LITELANE_CPYTHON_SUITE={env} holds no test_sqlite3/__init__.py")
        # scripts/cpython-sqlite3 records the suite's CPython version.
        source = os.path.join(env, "SOURCE")
        if os.path.isfile(source):
            with open(source) as f:
                recorded = re.match(r"CPython (\S+) source", f.read())
            if recorded and recorded.group(1) != platform.python_version():
                pytest.fail(f"{env} is CPython {recorded.group(1)}'s suite, this is {platform.python_version()}")
        return env, f"{env} (LITELANE_CPYTHON_SUITE)"
    own = harness._own_suite_dir()
    if own:
        return None, own
    message = (
        f"CPython's test_sqlite3 is not available for {sys.executable} (Python {sys.version.split()[0]}); "
        "`PYTHON=<interpreter> scripts/cpython-sqlite3 --fetch-only` obtains it and prints the directory "
        "to put in LITELANE_CPYTHON_SUITE"
    )
    if os.environ.get("LITELANE_REQUIRE_CPYTHON_SUITE"):
        pytest.fail(message)
    pytest.skip(message)


def test_cpython_suite_pass_ratio_does_not_fall(tmp_path):
    suite_dir, where = _suite_dir()
    report = harness.compare_runs(
        sys.executable, suite_dir, where, per_test_timeout=60, timeout=600, workdir=str(tmp_path)
    )
    # The harness really ran the suite on both modules.
    assert report["stock_module"]["module"] == "sqlite3"
    assert report["module"]["module"] == "litelane.dbapi"
    assert report["total"] >= 300, report["total"]
    assert report["stock_pass"] >= 0.95 * report["total"], (report["stock_pass"], report["incidents"])
    summary = harness.render(report, list_limit=0)
    assert report["ratio"] >= FLOOR, (
        f"{report['litelane_pass']} of {report['stock_pass']} ({report['ratio']:.3f}) "
        f"is below the floor {FLOOR}:\n{summary}"
    )


# A stand-in for test_sqlite3 with every case the harness must handle: a
# test that hangs, one that kills its process, failures only under the
# aliases (a test, a subtest, a Python subprocess, a module import, a
# setUpClass), a skip.
FAKE = {
    "__init__.py": """
        import os
        from test.support import load_package_tests

        def load_tests(*args):
            return load_package_tests(os.path.dirname(__file__), *args)
    """,
    "test_a.py": """
        import os, sqlite3, subprocess, sys, time, unittest

        class A(unittest.TestCase):
            def test_1_pass(self):
                pass
            def test_2_alias(self):
                self.assertEqual(sqlite3.__name__, "sqlite3")
            def test_3_hang(self):
                time.sleep(3600)
            def test_4_after_hang(self):
                pass
            def test_5_crash(self):
                os._exit(3)
            def test_6_after_crash(self):
                pass
            def test_7_skip(self):
                self.skipTest("not here")
            def test_8_subtest(self):
                with self.subTest(i=1):
                    self.assertEqual(sqlite3.__name__, "sqlite3")
            def test_9_subprocess(self):
                out = subprocess.check_output([sys.executable, "-c", "import sqlite3; print(sqlite3.__name__)"])
                self.assertEqual(out.strip(), b"sqlite3")
    """,
    "test_b.py": """
        import sqlite3, unittest

        if sqlite3.__name__ != "sqlite3":
            raise AttributeError(f"module {sqlite3.__name__!r} has no attribute 'FAKE_CONSTANT'")

        class B(unittest.TestCase):
            def test_b(self):
                pass
    """,
    "test_c.py": """
        import sqlite3, unittest

        class C(unittest.TestCase):
            @classmethod
            def setUpClass(cls):
                if sqlite3.__name__ != "sqlite3":
                    raise RuntimeError("no fixture on " + sqlite3.__name__)
            def test_c1(self):
                pass
            def test_c2(self):
                pass
    """,
}


def test_harness_survives_hangs_crashes_and_import_errors(tmp_path):
    pytest.importorskip("test.support")
    suite = tmp_path / "suite"
    (suite / "test_sqlite3").mkdir(parents=True)
    for name, text in FAKE.items():
        (suite / "test_sqlite3" / name).write_text(textwrap.dedent(text))
    report = harness.compare_runs(
        sys.executable, str(suite), "fake", per_test_timeout=3, timeout=120, workdir=str(tmp_path / "work")
    )
    rows = {r["id"].replace("test.test_sqlite3.", ""): r for r in report["tests"]}
    a = "test_a.A."
    expected_stock = {
        a + "test_1_pass": "pass",
        a + "test_2_alias": "pass",
        a + "test_3_hang": "timeout",
        a + "test_4_after_hang": "pass",
        a + "test_5_crash": "crash",
        a + "test_6_after_crash": "pass",
        a + "test_7_skip": "skip",
        a + "test_8_subtest": "pass",
        a + "test_9_subprocess": "pass",
        "test_b.B.test_b": "pass",
        "test_c.C.test_c1": "pass",
        "test_c.C.test_c2": "pass",
    }
    assert {k: r["stock"] for k, r in rows.items()} == expected_stock
    expected_litelane = {
        a + "test_1_pass": "pass",
        a + "test_2_alias": "fail",
        a + "test_4_after_hang": "pass",
        a + "test_6_after_crash": "pass",
        a + "test_8_subtest": "fail",
        a + "test_9_subprocess": "fail",
        "test_b.B.test_b": "not run",
        "test_c.C.test_c1": "not run",
        "test_c.C.test_c2": "not run",
    }
    assert {k: rows[k]["litelane"] for k in expected_litelane} == expected_litelane
    assert rows[a + "test_3_hang"]["litelane"] == "timeout"
    assert rows[a + "test_5_crash"]["litelane"] == "crash"
    assert (report["total"], report["stock_pass"], report["litelane_pass"]) == (12, 9, 3)
    causes = {g["cause"]: sorted(t["id"].rsplit(".", 1)[1] for t in g["tests"]) for g in report["groups"]}
    assert causes["test module fails at import: missing module attribute FAKE_CONSTANT"] == ["test_b"]
    assert causes["setUpClass fails: RuntimeError: no fixture on litelane.dbapi"] == ["test_c1", "test_c2"]
    assert causes["AssertionError: a different value than sqlite3's"] == [
        "test_2_alias",
        "test_8_subtest",
        "test_9_subprocess",
    ]
    where = {t["id"].rsplit(".", 1)[1]: t["where"] for g in report["groups"] for t in g["tests"]}
    assert where["test_2_alias"].startswith("test_a.py:")
    assert where["test_b"].startswith("test_b.py:")


@pytest.mark.parametrize(
    "msg, cause",
    [
        (
            "AttributeError: module 'litelane.dbapi' has no attribute 'SQLITE_LIMIT_SQL_LENGTH'",
            "missing module attribute SQLITE_LIMIT_SQL_LENGTH",
        ),
        ("AttributeError: 'Connection' object has no attribute 'blobopen'", "missing attribute Connection.blobopen"),
        ("AttributeError: type object 'Row' has no attribute 'keys'", "missing attribute Row.keys"),
        ("ImportError: cannot import name 'Blob' from 'litelane.dbapi' (/x/dbapi.py)", "missing module attribute Blob"),
        (
            "TypeError: connect() got an unexpected keyword argument 'uri'",
            "TypeError: connect() does not take keyword argument 'uri'",
        ),
        ("AssertionError: OperationalError not raised", "AssertionError: OperationalError not raised"),
        ("AssertionError: OperationalError not raised by execute", "AssertionError: OperationalError not raised"),
        (
            'AssertionError: "no such table" does not match "missing table t"',
            "AssertionError: a different error message than sqlite3's",
        ),
        ("AssertionError: 1 != 2", "AssertionError: a different value than sqlite3's"),
        (
            "OperationalError: no such function: returnint",
            "OperationalError: no such function: … (a function the test registered)",
        ),
        (
            "OperationalError: database is locked: waited 5.0 s for the writer of '/tmp/x y.db'",
            "OperationalError: database is locked: waited N.N s for the writer of '…'",
        ),
        ("NotSupportedError: backup is not supported", "NotSupportedError: backup is not supported"),
        (
            "ModuleNotFoundError: No module named 'sqlite3.__main__'; 'sqlite3' is not a package",
            "ModuleNotFoundError: No module named 'sqlite3.__main__'; 'sqlite3' is not a package",
        ),
        (
            "ProgrammingError: invalid utf-8 sequence of 2 bytes from index 10",
            "ProgrammingError: invalid utf-N sequence of N bytes from index N",
        ),
        ("KeyboardInterrupt", "KeyboardInterrupt"),
        ("", ""),
        ("ValueError: " + "x" * 500, "ValueError: " + "x" * 160),
    ],
)
def test_cause_groups_the_same_cause_together(msg, cause):
    assert harness.cause_of(msg) == cause
