"""Runs CPython's own ``test_sqlite3`` suite twice, on the standard library's
``sqlite3`` and with ``sqlite3``/``_sqlite3`` aliased to ``litelane.dbapi``,
and compares the two test by test.

The suite is not part of this repository: ``scripts/cpython-sqlite3`` finds it
(the interpreter's own ``Lib/test``, or the matching CPython source from
Debian) and calls this module; ``tests/python/test_cpython_suite.py`` calls
:func:`compare_runs` directly.

Each run is a child process (``python cpython_sqlite3.py child ...``) that
loads ``test.test_sqlite3`` as ``python -m test`` does (``support.verbose``
off), runs it with a result object that appends one JSON line per event to a
file, and exits. The parent watches that file: a test that has run longer than
the per-test timeout (seconds, default 60), or a child that dies inside a test,
gets that test recorded as ``timeout``/``crash`` and a new child resumes after
it. The whole comparison also has a deadline (seconds, default 900), after
which the remaining tests are recorded as ``not run``.

Command line (the parent)::

    python tests/python/cpython_sqlite3.py [--suite-dir DIR] [--suite-source TEXT]
        [--json OUT.json] [--text OUT.txt] [--per-test-timeout S] [--timeout S]

``--suite-dir`` is a directory holding ``test_sqlite3/`` (a CPython ``Lib/test``);
without it the interpreter's own ``test.test_sqlite3`` is used.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback
import unittest
from collections import defaultdict
from typing import Any, Dict, List, Optional, Tuple

#: The package name of the suite inside CPython's ``Lib/test``.
SUITE = "test.test_sqlite3"

#: The modules that the litelane run replaces with ``litelane.dbapi``.
ALIASED = ("sqlite3", "_sqlite3")

#: Outcomes a test can have in one run.
PASS, FAIL, SKIP, TIMEOUT, CRASH, NOT_RUN = "pass", "fail", "skip", "timeout", "crash", "not run"


# --------------------------------------------------------------------------
# The child: runs the suite and reports events.


def install_aliases() -> None:
    """Makes ``import sqlite3`` and ``import _sqlite3`` return ``litelane.dbapi``
    in this process (call before anything imports the suite)."""
    import litelane.dbapi

    for name in ALIASED:
        sys.modules[name] = litelane.dbapi


def fill_constants() -> List[str]:
    """For the diagnostic probe run only: copies onto ``litelane.dbapi`` every
    int, str or tuple attribute of the standard library's ``sqlite3`` that it
    lacks (``SQLITE_*`` codes, ``PARSE_*``, versions). Returns their names."""
    import sqlite3 as stdlib_sqlite3

    import litelane.dbapi

    filled = []
    for name in dir(stdlib_sqlite3):
        value = getattr(stdlib_sqlite3, name)
        if name.startswith("_") or hasattr(litelane.dbapi, name):
            continue
        if isinstance(value, (int, str, tuple)):
            setattr(litelane.dbapi, name, value)
            filled.append(name)
    del sys.modules["sqlite3"]
    return filled


def _first_line(err: Tuple[Any, BaseException, Any]) -> str:
    exc_type, value, _tb = err
    text = str(value).strip()
    line = text.splitlines()[0] if text else ""
    name = exc_type.__name__
    return f"{name}: {line}" if line else name


def _locations(err: Tuple[Any, BaseException, Any]) -> Tuple[str, str]:
    """(the last line of the suite's own code in the traceback, the frame that
    raised), each as ``file:line``."""
    frames = traceback.extract_tb(err[2])
    where = raised = ""
    for frame in frames:
        if f"{os.sep}test_sqlite3{os.sep}" in frame.filename:
            where = f"{os.path.basename(frame.filename)}:{frame.lineno}"
    if frames:
        last = frames[-1]
        parts = last.filename.split(os.sep)
        raised = f"{'/'.join(parts[-2:])}:{last.lineno}"
    return where, raised


class _EventResult(unittest.TestResult):
    """A TestResult that appends one JSON object per event to a file and
    flushes it, so the parent sees every finished test even if the child
    hangs or dies later."""

    def __init__(self, out: Any) -> None:
        super().__init__()
        self._out = out

    def emit(self, **event: Any) -> None:
        self._out.write(json.dumps(event) + "\n")
        self._out.flush()

    def _error(self, test: Any, kind: str, err: Any) -> None:
        where, raised = _locations(err)
        msg = _first_line(err)
        if isinstance(test, unittest.suite._ErrorHolder):
            # setUpModule/setUpClass/tearDownClass failed: names a group.
            self.emit(ev="group_error", desc=test.description, msg=msg, where=where, raised=raised)
        elif type(test).__name__ == "_FailedTest":
            # A module of the suite failed to import: unittest's ImportError
            # carries the import's traceback as text; its last line is the
            # error, its last frame in the suite the place.
            lines = [line for line in str(err[1]).splitlines() if line.strip()]
            if len(lines) > 1:
                msg = lines[-1].strip()
                for line in lines:
                    frame = re.match(r'\s*File "([^"]+)", line (\d+)', line)
                    if frame and f"{os.sep}test_sqlite3{os.sep}" in frame.group(1):
                        where = f"{os.path.basename(frame.group(1))}:{frame.group(2)}"
            name = test._testMethodName.rsplit(".", 1)[-1]
            self.emit(ev="load_error", name=name, msg=msg, where=where, raised=raised)
        else:
            self.emit(ev="outcome", id=test.id(), outcome=FAIL, kind=kind, msg=msg, where=where, raised=raised)

    @staticmethod
    def _real(test: Any) -> bool:
        # Not a stand-in for a module that failed to import.
        return type(test).__name__ != "_FailedTest"

    def startTest(self, test: Any) -> None:
        super().startTest(test)
        if self._real(test):
            self.emit(ev="start", id=test.id())

    def stopTest(self, test: Any) -> None:
        super().stopTest(test)
        if self._real(test):
            self.emit(ev="end", id=test.id())

    def addSuccess(self, test: Any) -> None:
        super().addSuccess(test)
        self.emit(ev="outcome", id=test.id(), outcome=PASS)

    def addExpectedFailure(self, test: Any, err: Any) -> None:
        super().addExpectedFailure(test, err)
        self.emit(ev="outcome", id=test.id(), outcome=PASS, kind="expected failure")

    def addUnexpectedSuccess(self, test: Any) -> None:
        super().addUnexpectedSuccess(test)
        self.emit(ev="outcome", id=test.id(), outcome=FAIL, kind="unexpected success", msg="unexpected success")

    def addFailure(self, test: Any, err: Any) -> None:
        super().addFailure(test, err)
        self._error(test, "failure", err)

    def addError(self, test: Any, err: Any) -> None:
        super().addError(test, err)
        self._error(test, "error", err)

    def addSkip(self, test: Any, reason: str) -> None:
        super().addSkip(test, reason)
        if isinstance(test, unittest.suite._ErrorHolder):
            self.emit(ev="group_skip", desc=test.description, msg=reason)
        else:
            self.emit(ev="outcome", id=test.id(), outcome=SKIP, msg=reason)

    def addSubTest(self, test: Any, subtest: Any, err: Any) -> None:
        super().addSubTest(test, subtest, err)
        if err is not None:
            kind = "failure" if issubclass(err[0], test.failureException) else "error"
            self._error(test, kind, err)


def _prune(suite: unittest.TestSuite, skip: set) -> unittest.TestSuite:
    kept = []
    for item in suite:
        if isinstance(item, unittest.TestSuite):
            kept.append(_prune(item, skip))
        elif item.id() not in skip:
            kept.append(item)
    pruned = type(suite)()
    pruned.addTests(kept)
    return pruned


def _overlay(root: str, suite_dir: str) -> str:
    """Makes ``root/overlay/test``, a ``test`` package holding this
    interpreter's own ``test.support`` and the suite from ``suite_dir``
    (both as symbolic links), and returns ``root/overlay`` for sys.path.
    The suite's ``load_tests`` only finds test modules under the directory
    above ``test.support``, so the suite cannot simply be added to the
    installed ``test`` package's path."""
    import test.support

    support_dir = os.path.dirname(test.support.__file__)
    for name in [m for m in sys.modules if m == "test" or m.startswith("test.")]:
        del sys.modules[name]
    base = os.path.join(root, "overlay")
    pkg = os.path.join(base, "test")
    if not os.path.isdir(pkg):
        os.makedirs(pkg)
        open(os.path.join(pkg, "__init__.py"), "w").close()
        os.symlink(support_dir, os.path.join(pkg, "support"))
        os.symlink(os.path.join(os.path.abspath(suite_dir), "test_sqlite3"), os.path.join(pkg, "test_sqlite3"))
    return base


def child_main(mode: str, suite_dir: Optional[str], events: str, skip_file: Optional[str]) -> None:
    """Runs the suite once in this process, appending events to ``events``.
    Exits the process (``os._exit``) so that threads a test left behind
    cannot keep it alive."""
    import faulthandler

    faulthandler.enable()
    # The alias modules on PYTHONPATH are for the suite's subprocesses; here
    # the aliases go straight into sys.modules (and the probe needs the
    # standard library's module first).
    sys.path[:] = [p for p in sys.path if os.path.basename(p) != "litelane-alias"]
    skip = set()
    if skip_file:
        with open(skip_file) as f:
            skip = set(json.load(f))
    with open(events, "a", encoding="utf-8") as out:
        result = _EventResult(out)
        try:
            filled: List[str] = []
            if mode == "probe":
                filled = fill_constants()
            if mode in ("litelane", "probe"):
                install_aliases()
            if suite_dir:
                sys.path.insert(0, _overlay(os.path.dirname(os.path.abspath(events)), suite_dir))
            from test import support

            support.verbose = 0  # as `python -m test` without -v
            sqlite3 = importlib.import_module("sqlite3")
            result.emit(
                ev="module",
                module=getattr(sqlite3, "__name__", "?"),
                file=getattr(sqlite3, "__file__", "?"),
                sqlite_version=str(getattr(sqlite3, "sqlite_version", "?")),
                filled=filled,
            )
            suite = unittest.defaultTestLoader.loadTestsFromName(SUITE)
        except BaseException as e:  # the whole package failed to load
            err = (type(e), e, e.__traceback__)
            where, raised = _locations(err)
            result.emit(ev="load_error", name="test_sqlite3", msg=_first_line(err), where=where, raised=raised)
            result.emit(ev="done")
            os._exit(0)
        suite = _prune(suite, skip)
        suite.run(result)
        result.emit(ev="done")
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


# --------------------------------------------------------------------------
# The parent: runs children, resumes after hangs and crashes.


def _shim_dir(root: str) -> str:
    """A directory of one-line modules ``sqlite3.py``/``_sqlite3.py`` that
    replace themselves with ``litelane.dbapi``: put on PYTHONPATH so that
    Python subprocesses started by the suite see the same aliases."""
    path = os.path.join(root, "litelane-alias")
    os.makedirs(path, exist_ok=True)
    for name in ALIASED:
        with open(os.path.join(path, f"{name}.py"), "w") as f:
            f.write("import sys\nimport litelane.dbapi\n\nsys.modules[__name__] = litelane.dbapi\n")
    return path


def run_suite(
    python: str,
    mode: str,
    suite_dir: Optional[str],
    workdir: str,
    per_test_timeout: float,
    deadline: float,
) -> Dict[str, Any]:
    """Runs the suite in child processes of ``python`` (``mode`` is "stock"
    or "litelane") until it is done or ``deadline`` (a ``time.monotonic()``
    value) passes. Returns ``{"tests": {id: record}, "load_errors": [...],
    "group_errors": [...], "module": {...}, "incidents": [...]}``."""
    tests: Dict[str, Dict[str, Any]] = {}
    order: List[str] = []
    load_errors: List[Dict[str, Any]] = []
    group_errors: List[Dict[str, Any]] = []
    incidents: List[str] = []
    module: Dict[str, Any] = {}
    skip: set = set()
    env = dict(os.environ)
    env.pop("PYTHONSTARTUP", None)
    if mode in ("litelane", "probe"):
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [_shim_dir(workdir), env.get("PYTHONPATH")]))
    for attempt in range(1, 51):
        events = os.path.join(workdir, f"{mode}-{attempt}.jsonl")
        skip_file = os.path.join(workdir, f"{mode}-{attempt}-skip.json")
        log_path = os.path.join(workdir, f"{mode}-{attempt}.log")
        with open(skip_file, "w") as f:
            json.dump(sorted(skip), f)
        open(events, "w").close()
        cwd = tempfile.mkdtemp(prefix=f"{mode}-cwd-", dir=workdir)
        cmd = [python, os.path.abspath(__file__), "child", mode, events, "--skip-file", skip_file]
        if suite_dir:
            cmd += ["--suite-dir", suite_dir]
        with open(log_path, "w") as log:
            proc = subprocess.Popen(
                cmd,
                cwd=cwd,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        current: Optional[str] = None
        last_event = time.monotonic()
        done = False
        stopped = ""
        pending = ""
        with open(events, encoding="utf-8") as feed:
            while True:
                exited = proc.poll() is not None
                chunk = feed.read()
                if chunk:
                    last_event = time.monotonic()
                    pending += chunk
                    *lines, pending = pending.split("\n")
                    for line in lines:
                        ev = json.loads(line)
                        kind = ev["ev"]
                        if kind == "start":
                            current = ev["id"]
                            if current not in tests:
                                order.append(current)
                                tests[current] = {"outcome": PASS, "events": []}
                        elif kind == "end":
                            current = None
                        elif kind == "outcome":
                            tests.setdefault(ev["id"], {"outcome": PASS, "events": []})["events"].append(ev)
                        elif kind == "load_error":
                            load_errors.append(ev)
                        elif kind in ("group_error", "group_skip"):
                            group_errors.append(ev)
                        elif kind == "module":
                            module = ev
                        elif kind == "done":
                            done = True
                if exited and not chunk:
                    break
                now = time.monotonic()
                if now - last_event > per_test_timeout or now > deadline:
                    stopped = "whole-run timeout" if now > deadline else f"no progress for {per_test_timeout:g} s"
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
                    break
                time.sleep(0.02)
        shutil.rmtree(cwd, ignore_errors=True)
        if done:
            break
        with open(log_path, errors="replace") as f:
            tail = [line for line in f.read().splitlines() if line.strip()][-3:]
        if current is None:
            incidents.append(
                f"{mode} run stopped outside any test ({stopped or f'exit status {proc.returncode}'}): "
                + " | ".join(tail)
            )
            break
        outcome = TIMEOUT if stopped else CRASH
        msg = stopped or f"the process died (exit status {proc.returncode}): " + " | ".join(tail)
        tests[current]["events"].append({"outcome": outcome, "msg": msg})
        incidents.append(f"{mode}: {current}: {outcome}: {msg}")
        skip.update(tests)
        if stopped.startswith("whole-run"):
            break
    for record in tests.values():
        outcomes = [ev["outcome"] for ev in record["events"]]
        for candidate in (CRASH, TIMEOUT, FAIL, SKIP):
            if candidate in outcomes:
                record["outcome"] = candidate
                break
        failing = [ev for ev in record["events"] if ev["outcome"] != PASS]
        if failing:
            record["msg"] = failing[0].get("msg", "")
            record["where"] = failing[0].get("where", "")
            record["raised"] = failing[0].get("raised", "")
        del record["events"]
    return {
        "tests": {name: tests[name] for name in order},
        "load_errors": load_errors,
        "group_errors": group_errors,
        "module": module,
        "incidents": incidents,
    }


# --------------------------------------------------------------------------
# The comparison.

_DESC = re.compile(r"^\w+ \((?P<name>[\w.]+)\)$")


def _missing_cause(test_id: str, run: Dict[str, Any]) -> Dict[str, str]:
    """Why a test that ran on the standard library never ran on litelane."""
    module = test_id.split(".")[2] if test_id.count(".") >= 2 else ""
    for ev in run["load_errors"]:
        if ev["name"] in ("test_sqlite3", module):
            return {
                "msg": ev["msg"],
                "where": ev.get("where", ""),
                "raised": ev.get("raised", ""),
                "scope": "test module fails at import",
            }
    for ev in run["group_errors"]:
        m = _DESC.match(ev["desc"])
        if m and test_id.startswith(m.group("name") + "."):
            return {
                "msg": ev["msg"],
                "where": ev.get("where", ""),
                "raised": ev.get("raised", ""),
                "scope": ev["desc"].split(" ")[0] + " fails",
            }
    return {"msg": "not run", "where": "", "raised": "", "scope": ""}


# Quoted literals that are not plain names (paths, SQL, values).
_QUOTED = re.compile(r"(?<!\w)'(?![\w.]{1,40}')[^']*'(?!\w)")


def cause_of(msg: str) -> str:
    """A grouping key for a failure's first line: the same cause in different
    tests gets the same key."""
    m = re.match(r"^(\w+): (.*)$", msg)
    if not m:
        return msg
    exc, text = m.groups()
    attr = re.match(r"module '[\w.]+' has no attribute '(\w+)'", text)
    if exc == "AttributeError" and attr:
        return f"missing module attribute {attr.group(1)}"
    attr = re.match(r"(?:type object )?'(\w+)'(?: object)? has no attribute '(\w+)'", text)
    if exc == "AttributeError" and attr:
        return f"missing attribute {attr.group(1)}.{attr.group(2)}"
    if exc == "ImportError" and "cannot import name" in text:
        name = re.search(r"cannot import name '(\w+)'", text)
        return f"missing module attribute {name.group(1) if name else text}"
    if exc == "TypeError":
        kw = re.search(r"(\S+)\(\) got an unexpected keyword argument '(\w+)'", text)
        if kw:
            return f"TypeError: {kw.group(1)}() does not take keyword argument {kw.group(2)!r}"
    if exc == "AssertionError":
        raised = re.match(r"^(\w+) not raised", text)
        if raised:
            return f"AssertionError: {raised.group(1)} not raised"
        if " does not match " in text:
            return "AssertionError: a different error message than sqlite3's"
        if "not found in" in text or "not found" in text:
            return "AssertionError: expected text not found"
        return "AssertionError: a different value than sqlite3's"
    if exc == "OperationalError" and text.startswith("no such function: "):
        return "OperationalError: no such function: … (a function the test registered)"
    # Other exceptions: their message with numbers and literals blanked.
    return f"{exc}: " + re.sub(r"(?<![A-Za-z])\d+", "N", _QUOTED.sub("'…'", text))[:160]


def _compare(stock: Dict[str, Any], lite: Dict[str, Any]) -> Dict[str, Any]:
    """Test-by-test comparison of a litelane run with the stock run."""
    rows = []
    for test_id, rec in stock["tests"].items():
        lrec = lite["tests"].get(test_id)
        row = {"id": test_id, "stock": rec["outcome"]}
        if rec["outcome"] != PASS:
            row["stock_msg"] = rec.get("msg", "")
        if lrec is None:
            miss = _missing_cause(test_id, lite)
            row.update(
                litelane=NOT_RUN, msg=miss["msg"], where=miss["where"], raised=miss["raised"], scope=miss["scope"]
            )
        else:
            row["litelane"] = lrec["outcome"]
            if lrec["outcome"] != PASS:
                row.update(msg=lrec.get("msg", ""), where=lrec.get("where", ""), raised=lrec.get("raised", ""))
        rows.append(row)
    stock_pass = [r for r in rows if r["stock"] == PASS]
    both = [r for r in stock_pass if r["litelane"] == PASS]
    groups: Dict[str, List[Dict[str, Any]]] = defaultdict(list)
    for r in stock_pass:
        if r["litelane"] == PASS:
            continue
        if r["litelane"] == SKIP:
            key = f"skipped on litelane: {r['msg']}"
        elif r["litelane"] in (TIMEOUT, CRASH):
            key = f"{r['litelane']}: {cause_of(r['msg'])}"
        else:
            key = cause_of(r["msg"])
        if r.get("scope"):
            key = f"{r['scope']}: {key}"
        r["cause"] = key
        groups[key].append(r)
    ordered = sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0]))
    return {
        "module": lite["module"],
        "total": len(rows),
        "stock_pass": len(stock_pass),
        "litelane_pass": len(both),
        "ratio": len(both) / len(stock_pass) if stock_pass else 0.0,
        "litelane_pass_anywhere": sum(1 for r in rows if r["litelane"] == PASS),
        "only_on_litelane": sorted(set(lite["tests"]) - set(stock["tests"])),
        "incidents": lite["incidents"],
        "groups": [
            {
                "cause": k,
                "count": len(v),
                "tests": [{key: r.get(key, "") for key in ("id", "litelane", "msg", "where", "raised")} for r in v],
            }
            for k, v in ordered
        ],
        "tests": rows,
    }


def compare_runs(
    python: str,
    suite_dir: Optional[str] = None,
    suite_source: str = "",
    per_test_timeout: float = 60.0,
    timeout: float = 900.0,
    workdir: Optional[str] = None,
    probe: bool = False,
) -> Dict[str, Any]:
    """Runs the suite on the standard library, then on litelane, both with
    ``python``, and returns the comparison (see ``scripts/cpython-sqlite3``
    for its JSON form). ``timeout`` (seconds) bounds all runs together.

    With ``probe``, a third run (a diagnostic, not the measure) first copies
    onto ``litelane.dbapi`` the plain constants (ints, strings, tuples) of the
    standard library's module that it lacks, so that test modules which fail
    at import for one constant show what fails next; its comparison is the
    report's ``"probe"``."""
    deadline = time.monotonic() + timeout
    own = workdir is None
    workdir = os.path.abspath(workdir or tempfile.mkdtemp(prefix="cpython-sqlite3-"))
    os.makedirs(workdir, exist_ok=True)
    try:
        stock = run_suite(python, "stock", suite_dir, workdir, per_test_timeout, deadline)
        lite = run_suite(python, "litelane", suite_dir, workdir, per_test_timeout, deadline)
        extra = run_suite(python, "probe", suite_dir, workdir, per_test_timeout, deadline) if probe else None
    finally:
        if own:
            shutil.rmtree(workdir, ignore_errors=True)
    report = _compare(stock, lite)
    if extra is not None:
        report["probe"] = _compare(stock, extra)
        report["probe"]["filled"] = extra["module"].get("filled", [])
    import litelane

    report.update(
        interpreter={
            "executable": python,
            "version": platform.python_version(),
            "implementation": platform.python_implementation(),
        },
        suite={
            "source": suite_source or f"{python}'s own Lib/test/test_sqlite3 (CPython {platform.python_version()})",
            "dir": suite_dir or os.path.dirname(_own_suite_dir() or ""),
        },
        stock_module=stock["module"],
        litelane_version=getattr(litelane, "__version__", "?"),
    )
    report["incidents"] = stock["incidents"] + report["incidents"]
    return report


def _own_suite_dir() -> Optional[str]:
    """The directory of this interpreter's own ``test/test_sqlite3``, or None."""
    try:
        spec = importlib.util.find_spec(SUITE)
    except ImportError:
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return list(spec.submodule_search_locations)[0]


def _render_groups(cmp: Dict[str, Any], out: List[str], list_limit: int) -> None:
    lost = sum(g["count"] for g in cmp["groups"])
    out.append(f"{lost} tests pass on sqlite3 but not on litelane, in {len(cmp['groups'])} groups by cause:")
    for g in cmp["groups"]:
        out.append("")
        out.append(f"[{g['count']}] {g['cause']}")
        if g["count"] > list_limit:
            per_class: Dict[str, int] = defaultdict(int)
            for t in g["tests"]:
                per_class[t["id"].replace(SUITE + ".", "").rsplit(".", 1)[0]] += 1
            out.append("    " + ", ".join(f"{name} ({n})" for name, n in sorted(per_class.items())))
            continue
        for t in g["tests"]:
            short = t["id"].replace(SUITE + ".", "")
            detail = t["msg"] if t["msg"] and t["msg"] not in g["cause"] else ""
            where = f" @ {t['where']}" if t["where"] else ""
            out.append(f"    {short}{where}" + (f" -- {detail}" if detail else ""))


def render(report: Dict[str, Any], list_limit: int = 40) -> str:
    """The readable summary of a :func:`compare_runs` report. Groups of more
    than ``list_limit`` tests are shown as counts per test class."""
    out = []
    interp = report["interpreter"]
    out.append("CPython test_sqlite3 against litelane.dbapi (aliased as sqlite3 and _sqlite3)")
    out.append(f"interpreter: {interp['executable']} ({interp['implementation']} {interp['version']})")
    out.append(f"suite: {report['suite']['source']}")
    sm, lm = report["stock_module"], report["module"]
    out.append(
        f"stock: {sm.get('module')} (SQLite {sm.get('sqlite_version')}); "
        f"litelane: {lm.get('module')} {report['litelane_version']} (SQLite {lm.get('sqlite_version')})"
    )
    out.append(
        f"tests: {report['total']}; pass on sqlite3: {report['stock_pass']}; "
        f"of those pass on litelane: {report['litelane_pass']} ({100 * report['ratio']:.1f}%)"
    )
    for line in report["incidents"]:
        out.append(f"incident: {line}")
    out.append("")
    _render_groups(report, out, list_limit)
    probe = report.get("probe")
    if probe:
        out.append("")
        out.append("=" * 78)
        out.append("Diagnostic probe (not the measure): the same run after copying onto litelane.dbapi")
        out.append(f"the {len(probe['filled'])} plain constants of sqlite3 it lacks: {', '.join(probe['filled'])}")
        out.append(
            f"pass on litelane among the {probe['stock_pass']} that pass on sqlite3: "
            f"{probe['litelane_pass']} ({100 * probe['ratio']:.1f}%)"
        )
        for line in probe["incidents"]:
            out.append(f"incident: {line}")
        out.append("")
        _render_groups(probe, out, list_limit)
    return "\n".join(out) + "\n"


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="cmd")
    child = sub.add_parser("child")
    child.add_argument("mode", choices=["stock", "litelane", "probe"])
    child.add_argument("events")
    child.add_argument("--suite-dir")
    child.add_argument("--skip-file")
    parser.add_argument("--suite-dir", help="a directory holding test_sqlite3/ (default: this interpreter's own)")
    parser.add_argument("--suite-source", default="", help="where the suite came from (for the report)")
    parser.add_argument("--json", help="write the comparison as JSON here")
    parser.add_argument("--text", help="write the readable summary here (default: stdout only)")
    parser.add_argument("--per-test-timeout", type=float, default=60.0, help="seconds (default 60)")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds for both runs (default 900)")
    parser.add_argument(
        "--probe", action="store_true", help="also run the diagnostic probe (missing constants copied from sqlite3)"
    )
    parser.add_argument("--workdir", help="keep the children's event files and logs here")
    args = parser.parse_args(argv)
    if args.cmd == "child":
        child_main(args.mode, args.suite_dir, args.events, args.skip_file)
        return 0
    if not args.suite_dir and not _own_suite_dir():
        print(
            f"{sys.executable} has no {SUITE}; pass --suite-dir (scripts/cpython-sqlite3 fetches one)", file=sys.stderr
        )
        return 2
    report = compare_runs(
        sys.executable, args.suite_dir, args.suite_source, args.per_test_timeout, args.timeout, args.workdir, args.probe
    )
    text = render(report)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)
    if args.text:
        with open(args.text, "w") as f:
            f.write(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
