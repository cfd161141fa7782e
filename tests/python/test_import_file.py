"""`Database.import_file`: the import library in this process, the GIL
released, the same summary as `litelane import --json`."""

import json
import subprocess
import sys
import threading
import time

import litelane
import pytest

# Audit events that start another program (PEP 578 names).
PROCESS_EVENTS = ("subprocess.Popen", "os.exec", "os.posix_spawn", "os.spawn", "os.system", "os.fork")

_seen = []
_armed = threading.Event()


def _hook(event, args):
    if _armed.is_set() and event.startswith(PROCESS_EVENTS):
        _seen.append(event)


# An audit hook cannot be removed: it records only while armed.
sys.addaudithook(_hook)

CSV = "id,name,score,day\n1,ann,1.5,2024-01-02\n2,bob,NA,2024-01-03\n\n3,cy,2.25,2024-02-29\n4,dee,x,2024-03-01\n"

# Keys whose values are timings.
TIMINGS = {"seconds", "rows_per_sec"}


def cli_json(csv_path, db_path, table, *flags):
    """What the `litelane` command the package installs prints with --json."""
    command = [sys.executable, "-m", "litelane._cli", "import", str(csv_path), "--db", str(db_path)]
    command += ["--table", table, "--json", "--quiet", *flags]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert proc.returncode in (0, 3), proc.stderr
    return json.loads(proc.stdout)


def test_the_summary_is_the_commands_json(tmp_path):
    csv = tmp_path / "scores.csv"
    csv.write_text(CSV)
    flags = ("--null", "NA", "--type", "score=REAL")
    expected = cli_json(csv, tmp_path / "cli.db", "scores", *flags)
    with litelane.open(str(tmp_path / "lib.db")) as db:
        got = db.import_file(str(csv), "scores", null="NA", type="score=REAL")
        assert db.query("SELECT count(*) FROM scores") == [(4,)]
    assert set(got) == set(expected)
    for key in set(expected) - TIMINGS:
        assert got[key] == expected[key], key
    assert got["rows_inserted"] == 4
    assert got["blank_lines"] == 1
    assert got["kept_as_text"] == {"score": 1}
    assert got["null_tokens"] == {"score": {"NA": 1}}


def test_several_files_give_the_commands_totals(tmp_path):
    for name, rows in (("a.csv", "x\n1\n2\n"), ("b.csv", "x\n3\n")):
        (tmp_path / name).write_text(rows)
    pattern = str(tmp_path / "*.csv")
    expected = cli_json(pattern, tmp_path / "cli.db", "t")
    with litelane.open(str(tmp_path / "lib.db")) as db:
        got = db.import_file(pattern, "t")
    assert set(got) == set(expected)
    assert (got["rows_inserted"], len(got["files"])) == (3, 2)
    assert [f["rows_inserted"] for f in got["files"]] == [2, 1]


def test_import_file_starts_no_process(tmp_path, monkeypatch):
    # Nothing to find on PATH, no binary named: the import cannot be a command.
    monkeypatch.delenv("LITELANE_BIN", raising=False)
    monkeypatch.setenv("PATH", "/nonexistent")
    csv = tmp_path / "in.csv"
    csv.write_text(CSV)
    with litelane.open(str(tmp_path / "t.db")) as db:
        _seen.clear()
        _armed.set()
        try:
            summary = db.import_file(str(csv), "t")
            seen_during_import = list(_seen)
            # The hook works: a process started while armed is seen.
            subprocess.run([sys.executable, "-c", "pass"], check=True)
        finally:
            _armed.clear()
    assert summary["rows_inserted"] == 4
    assert seen_during_import == []
    assert "subprocess.Popen" in _seen, "the audit hook records a process that is started"


def test_the_gil_is_released_while_importing(tmp_path):
    csv = tmp_path / "big.csv"
    with open(csv, "w") as f:
        f.write("a,b,c\n")
        for i in range(300_000):
            f.write(f"{i},name {i},{i * 0.5}\n")
    started, done = threading.Event(), threading.Event()
    out = {}

    def work():
        with litelane.open(str(tmp_path / "t.db")) as db:
            started.set()
            try:
                out["summary"] = db.import_file(str(csv), "t")
            finally:
                done.set()

    t = threading.Thread(target=work)
    # This thread spins until the import is done, noting the longest time
    # it was kept from running once the import had begun. Were the GIL held
    # by the import, that would be about the whole import.
    first = last = time.perf_counter()
    longest = 0.0
    t.start()
    while not done.is_set():
        now = time.perf_counter()
        if started.is_set():
            longest = max(longest, now - last)
        last = now
    t.join()
    assert out["summary"]["rows_inserted"] == 300_000
    elapsed = last - first
    assert longest < elapsed / 2, (longest, elapsed)


def test_ctrl_c_stops_an_import_and_keeps_what_was_committed(tmp_path):
    """SIGINT during import_file raises KeyboardInterrupt soon, not after
    the whole file; the database holds whole batches only (a prefix of the
    file, as the command's Ctrl-C leaves it) and takes writes afterwards."""
    import os
    import signal

    rows = 3_000_000
    csv = tmp_path / "huge.csv"
    with open(csv, "w") as f:
        f.write("a,b\n")
        f.writelines(f"{i},row {i}\n" for i in range(rows))
    db = litelane.open(str(tmp_path / "t.db"))
    # Python's own Ctrl-C handler, whatever this process inherited: a
    # shell's background job starts with SIGINT ignored, and Python then
    # keeps it ignored.
    inherited = signal.signal(signal.SIGINT, signal.default_int_handler)
    # The main thread gets SIGINT while it is inside import_file.
    # (The whole file takes this machine about 1.5 s.)
    timer = threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    started = time.perf_counter()
    try:
        with pytest.raises(KeyboardInterrupt):
            db.import_file(str(csv), "t", commit_every="50000")
    finally:
        timer.join()
        signal.signal(signal.SIGINT, inherited)
    took = time.perf_counter() - started
    created = db.query("SELECT count(*) FROM sqlite_master WHERE name = 't'") == [(1,)]
    count, top = db.query("SELECT count(*), max(a) FROM t")[0] if created else (0, None)
    # Stopped early, with whole batches of the file's first rows stored.
    assert count < rows, (count, took)
    assert count % 50_000 == 0, count
    assert top == (count - 1 if count else None), (count, top)
    db.execute("CREATE TABLE after_stop(x)")
    db.execute("INSERT INTO after_stop VALUES (1)")
    assert db.query("SELECT x FROM after_stop") == [(1,)]
    db.close()


def test_errors_name_the_file_and_a_bad_option_is_refused(tmp_path):
    with litelane.open(str(tmp_path / "t.db")) as db:
        with pytest.raises(litelane.OperationalError, match="missing.csv"):
            db.import_file(str(tmp_path / "missing.csv"), "x")
        with pytest.raises(litelane.ProgrammingError, match="no-such-flag"):
            db.import_file(str(tmp_path / "missing.csv"), "x", no_such_flag=True)
        csv = tmp_path / "in.csv"
        csv.write_text("a\n1\n")
        db.import_file(str(csv), "t")
        with pytest.raises(litelane.OperationalError, match="already exists"):
            db.import_file(str(csv), "t")


def test_an_sqlite_failure_carries_its_code(tmp_path):
    csv = tmp_path / "in.csv"
    csv.write_text("a\n1\n")
    with litelane.open(str(tmp_path / "t.db")) as db:
        db.executescript(
            "CREATE TABLE u(a INTEGER);CREATE TRIGGER tu BEFORE INSERT ON u BEGIN SELECT no_such_function(); END;"
        )
        with pytest.raises(litelane.OperationalError, match="no_such_function") as info:
            db.import_file(str(csv), "u", mode="append")
        assert info.value.sqlite_errorcode == 1
        assert info.value.sqlite_errorname == "SQLITE_ERROR"
        assert "in.csv" in str(info.value)
        assert db.query("SELECT count(*) FROM u") == [(0,)]


def test_progress_and_rejects_reach_the_callers_functions(tmp_path):
    csv = tmp_path / "in.csv"
    text = "a,b\n1,x\n2,y\n3\n"
    csv.write_text(text)
    calls, rejects = [], []
    with litelane.open(str(tmp_path / "t.db")) as db:
        got = db.import_file(
            str(csv),
            "t",
            progress=lambda rows, done, total: calls.append((rows, done, total)),
            on_reject=lambda *r: rejects.append(r),
            null=["NA", "-"],
        )
    assert got["rows_inserted"] == 2 and got["rows_rejected"] == 1
    assert calls[-1] == (2, len(text), len(text)), calls
    assert len(rejects) == 1
    line, record, reason, raw = rejects[0]
    assert (line, raw) == (4, b"3"), rejects
    assert "field" in reason, reason


def test_an_exception_in_a_callback_stops_the_import_and_is_raised(tmp_path):
    csv = tmp_path / "in.csv"
    csv.write_text("a\n" + "".join(f"{i}\n" for i in range(100_000)))

    def progress(rows, done, total):
        raise ValueError("enough")

    with litelane.open(str(tmp_path / "t.db")) as db:
        with pytest.raises(ValueError, match="enough"):
            db.import_file(str(csv), "t", progress=progress, commit_every=1000)
        created = db.query("SELECT count(*) FROM sqlite_master WHERE name = 't'") == [(1,)]
        count = db.query("SELECT count(*) FROM t")[0][0] if created else 0
        assert count < 100_000 and count % 1000 == 0, count


def test_option_values_are_checked_by_name(tmp_path):
    csv = tmp_path / "in.csv"
    csv.write_text("a\n1\n")
    with litelane.open(str(tmp_path / "t.db")) as db:
        with pytest.raises(litelane.ProgrammingError, match="mode"):
            db.import_file(str(csv), "t", mode="sideways")
        with pytest.raises(litelane.ProgrammingError, match="commit_every"):
            db.import_file(str(csv), "t", commit_every="many")
        with pytest.raises(litelane.ProgrammingError, match="delimiter"):
            db.import_file(str(csv), "t", delimiter=";;")
        with pytest.raises(litelane.OperationalError, match="no_header"):
            db.import_file(str(csv), "t", header=True, no_header=True)
