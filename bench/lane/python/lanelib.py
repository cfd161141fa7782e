"""Shared by scripts/lane-fairness and scripts/lane-bench: the client
programs (bench/lane/{node,go,python}), their builds under target/, running
writer processes against one database, and reading their logs.

Every writer logs one line per write (see bench/lane/go/writer.go):

    W kind pid wid seq arrival_ns grant_ns end_ns status
    B kind pid wid seq grant_ns
"""
from __future__ import annotations

import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Sequence

ROOT = Path(__file__).resolve().parents[3]
TARGET = ROOT / "target"
LANE_SQLITE = TARGET / "lane-sqlite"
CACHE = TARGET / "lane-bench"
GO_WRITER = CACHE / "go-writer"
NODE_WRITER = ROOT / "bench/lane/node/writer.js"
PY_WRITER = ROOT / "bench/lane/python/writer.py"
VENV_PY = TARGET / "py-venv/bin/python"
SQLITE_VERSION = "3.54.1"


class Fail(Exception):
    """A prerequisite or a run failed: the message says what and how to fix it."""


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def lib_dir(lib: str) -> Path:
    return LANE_SQLITE / lib / "lib"


def node_module(lib: str) -> Path:
    return CACHE / f"node-{lib}" / "node_modules" / "better-sqlite3"


def _run(cmd: Sequence[str], what: str, cwd: Optional[Path] = None, env: Optional[dict] = None) -> None:
    log(f"  $ {' '.join(str(c) for c in cmd)}")
    e = dict(os.environ)
    e.setdefault("CARGO_BUILD_JOBS", "1")
    if env:
        e.update(env)
    r = subprocess.run(["nice", "-n", "10", *map(str, cmd)], cwd=cwd, env=e)
    if r.returncode != 0:
        raise Fail(f"{what} failed (exit {r.returncode}): {' '.join(str(c) for c in cmd)}")


def ensure(need: Iterable[str]) -> None:
    """Builds what is missing of: sqlite (both builds), node, go, engine."""
    need = set(need)
    for lib in ("stock", "lane"):
        if not (lib_dir(lib) / "libsqlite3.so.0").exists():
            log(f"building {lib} SQLite into {LANE_SQLITE / lib} (about 2 minutes)")
            args = ["--stock"] if lib == "stock" else []
            _run([ROOT / "scripts/build-lane-sqlite", *args, LANE_SQLITE / lib], f"scripts/build-lane-sqlite {lib}")
    if "node" in need:
        if not shutil.which("node") or not shutil.which("npm"):
            raise Fail("node and npm are needed for the better-sqlite3 client")
        for lib in ("stock", "lane"):
            addon = node_module(lib) / "build/Release/better_sqlite3.node"
            amal_c = LANE_SQLITE / lib / "amalgamation" / "sqlite3.c"
            if addon.exists() and addon.stat().st_mtime >= amal_c.stat().st_mtime:
                continue
            # Missing, or older than the amalgamation it was built on (a
            # rebuilt lane SQLite): built again.
            d = CACHE / f"node-{lib}"
            shutil.rmtree(d, ignore_errors=True)
            d.mkdir(parents=True, exist_ok=True)
            for f in ("package.json", "package-lock.json"):
                shutil.copy(ROOT / "bench/lane/node" / f, d / f)
            amal = LANE_SQLITE / lib / "amalgamation"
            env = {}
            if lib == "lane":
                # The lane amalgamation calls the queue's static library.
                env["LDFLAGS"] = (amal / "link-flags").read_text().strip()
            log(f"building better-sqlite3 on the {lib} amalgamation into {d} (several minutes)")
            _run(["npm", "ci", "--no-audit", "--no-fund", "--build-from-source", "--nodedir=/usr",
                  f"--sqlite3={amal}"], f"npm ci (better-sqlite3, {lib})", cwd=d, env=env)
    if "go" in need and not GO_WRITER.exists():
        if not shutil.which("go"):
            raise Fail("go is needed for the go-sqlite3 client")
        inc, lib = LANE_SQLITE / "lane/include", lib_dir("lane")
        log(f"building {GO_WRITER} (go-sqlite3, -tags libsqlite3)")
        _run(["go", "build", "-p", "1", "-tags", "libsqlite3", "-o", GO_WRITER, "."], "go build",
             cwd=ROOT / "bench/lane/go",
             env={"CGO_CFLAGS": f"-I{inc}", "CGO_LDFLAGS": f"-L{lib}",
                  "GOPATH": str(TARGET / "go"), "GOCACHE": str(TARGET / "go-cache"), "GOFLAGS": "-modcacherw"})
    if "engine" in need:
        ok = VENV_PY.exists() and subprocess.run(
            [VENV_PY, "-c", "import litelane.dbapi"], capture_output=True).returncode == 0
        if not ok:
            log("installing litelane's Python package into target/py-venv (pip install .; several minutes)")
            if not VENV_PY.exists():
                _run([sys.executable, "-m", "venv", TARGET / "py-venv"], "python3 -m venv")
            _run([VENV_PY, "-m", "pip", "install", "-q", "maturin>=1.9.4,<2"], "pip install maturin")
            _run([VENV_PY, "-m", "pip", "install", "-q", "--no-deps", "."], "pip install .", cwd=ROOT)


def check_versions(need: Iterable[str]) -> None:
    """Every client runs SQLite 3.54.1 from the build it was given, and lane
    builds answer PRAGMA lane (a wrong library path would be silent)."""
    import tempfile

    with tempfile.TemporaryDirectory(dir=CACHE) as d:
        db = Path(d) / "v.db"
        make_db(db)
        for lib in ("stock", "lane"):
            code = ("import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); "
                    "print(sqlite3.sqlite_version, c.execute('PRAGMA lane').fetchall())")
            out = subprocess.run([sys.executable, "-c", code, db], env=env_for("py", lib),
                                 capture_output=True, text=True).stdout.strip()
            want_lane = lib == "lane"
            if not out.startswith(SQLITE_VERSION) or ("on:" in out) != want_lane:
                raise Fail(f"python3 with LD_LIBRARY_PATH={lib_dir(lib)} says {out!r}: "
                           f"expected SQLite {SQLITE_VERSION} {'with' if want_lane else 'without'} lane")
            if "node" in need:
                code = ("const D=require(process.argv[1]); const d=new D(process.argv[2]);"
                        "let l=[]; try{l=d.pragma('lane')}catch(e){};"
                        "console.log(d.prepare('select sqlite_version() v').get().v, JSON.stringify(l))")
                out = subprocess.run(["node", "-e", code, node_module(lib), db],
                                     capture_output=True, text=True).stdout.strip()
                if not out.startswith(SQLITE_VERSION) or ("on:" in out) != want_lane:
                    raise Fail(f"better-sqlite3 in {node_module(lib)} says {out!r}: "
                               f"expected SQLite {SQLITE_VERSION} {'with' if want_lane else 'without'} lane")


def make_db(path: Path) -> None:
    for suffix in ("", "-wal", "-shm", "-lane", "-journal"):
        p = Path(f"{path}{suffix}")
        if p.exists():
            p.unlink()
    path.parent.mkdir(parents=True, exist_ok=True)
    c = sqlite3.connect(path)
    c.execute("PRAGMA journal_mode=WAL")
    c.execute("CREATE TABLE rows(id INTEGER PRIMARY KEY, kind TEXT, pid INT, wid INT, seq INT, sub INT, payload TEXT)")
    c.commit()
    c.close()


def env_for(client: str, lib: str) -> dict:
    e = dict(os.environ)
    e.pop("LITELANE_LANE", None)
    if client in ("go", "py"):
        e["LD_LIBRARY_PATH"] = str(lib_dir(lib))
    return e


@dataclass
class Spec:
    """One writer process."""
    client: str  # node | go | py | engine
    lib: str  # lane | stock (engine: its own SQLite and the queue)
    kind: str  # the tag written into each row and log line
    mode: str = "auto"
    sync: str = "NORMAL"
    rows: int = 1
    hold_ms: float = 0.0
    conns: int = 1
    count: int = 0
    timeout_ms: int = 5000
    flush: bool = False

    def command(self, db: Path, logp: Path, seconds: float, start_at: int) -> List[str]:
        common = ["--db", str(db), "--log", str(logp), "--kind", self.kind, "--mode", self.mode,
                  "--sync", self.sync, "--rows", str(self.rows), "--hold-ms", str(self.hold_ms),
                  "--timeout-ms", str(self.timeout_ms), "--seconds", str(seconds),
                  "--count", str(self.count), "--start-at", str(start_at)]
        if self.flush:
            common.append("--flush")
        if self.client == "node":
            return ["node", str(NODE_WRITER), "--module", str(node_module(self.lib)), *common]
        if self.client == "go":
            return [str(GO_WRITER), "--conns", str(self.conns), *common]
        if self.client == "py":
            return [sys.executable, str(PY_WRITER), "--client", "sqlite3", *common]
        if self.client == "engine":
            return [str(VENV_PY), str(PY_WRITER), "--client", "engine", *common]
        raise ValueError(self.client)


@dataclass
class Proc:
    spec: Spec
    popen: subprocess.Popen
    log: Path
    err: Path


def start(specs: Sequence[Spec], db: Path, outdir: Path, seconds: float, lead: float) -> tuple:
    """Starts every writer; they begin writing together `lead` seconds from
    now. Returns (processes, start_at_ns)."""
    outdir.mkdir(parents=True, exist_ok=True)
    start_at = time.time_ns() + int(lead * 1e9)
    procs = []
    for i, s in enumerate(specs):
        lp = outdir / f"{i:02d}-{s.kind.replace(':', '_')}.log"
        ep = outdir / f"{i:02d}-{s.kind.replace(':', '_')}.stderr"
        with open(ep, "w") as ef:
            p = subprocess.Popen(s.command(db, lp, seconds, start_at), env=env_for(s.client, s.lib),
                                 stdout=ef, stderr=subprocess.STDOUT)
        procs.append(Proc(s, p, lp, ep))
    return procs, start_at


def wait_all(procs: Sequence[Proc], timeout: float, killed: Iterable[int] = ()) -> None:
    killed = set(killed)
    deadline = time.monotonic() + timeout
    for p in procs:
        try:
            p.popen.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.popen.kill()
            p.popen.wait()
            raise Fail(f"writer {p.spec.kind} (pid {p.popen.pid}) did not finish in time; see {p.err}")
    for p in procs:
        if p.popen.pid in killed:
            continue
        if p.popen.returncode != 0:
            raise Fail(f"writer {p.spec.kind} (pid {p.popen.pid}) exited {p.popen.returncode}: "
                       f"{p.err.read_text()[-2000:]}")


@dataclass
class Write:
    kind: str
    pid: int
    wid: int
    seq: int
    arrival: int
    grant: int
    end: int
    status: str

    @property
    def ok(self) -> bool:
        return self.status == "ok"


@dataclass
class Log:
    writes: List[Write] = field(default_factory=list)
    begins: Dict[tuple, int] = field(default_factory=dict)  # (pid, wid, seq) -> grant_ns


def read_log(path: Path) -> Log:
    out = Log()
    if not path.exists():
        return out
    with open(path) as f:
        for line in f:
            if not line.endswith("\n"):
                break  # cut by a kill
            t = line.rstrip("\n").split("\t")
            if t[0] == "W" and len(t) == 9:
                out.writes.append(Write(t[1], int(t[2]), int(t[3]), int(t[4]), int(t[5]), int(t[6]), int(t[7]), t[8]))
            elif t[0] == "B" and len(t) == 6:
                out.begins[(int(t[2]), int(t[3]), int(t[4]))] = int(t[5])
    return out


def is_busy(status: str) -> bool:
    s = status.lower()
    return "database is locked" in s or "busy" in s


def pct(values: Sequence[float], p: float) -> float:
    if not values:
        return float("nan")
    v = sorted(values)
    k = min(len(v) - 1, max(0, int(round(p / 100 * (len(v) - 1)))))
    return v[k]


def loadavg() -> str:
    return " ".join(open("/proc/loadavg").read().split()[:3])


def terminate(procs: Sequence[Proc]) -> None:
    for p in procs:
        if p.popen.poll() is None:
            try:
                p.popen.send_signal(signal.SIGKILL)
            except ProcessLookupError:
                pass
