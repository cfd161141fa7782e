"""A minimal ctypes client of a libsqlite3 (lane or stock), for the lane
SQLite tests: SQLite's C API as a C program calls it, with its log
(sqlite3_log) captured, in this process or in a child process.

As a script, it runs one child writer: ``lanelib.py LIB STEPS_JSON``, where
each step is a list — ``["open", path, busy_timeout_ms, vfs_or_null]``,
``["exec", sql]`` (prints ``{"rc", "extended", "msg", "rows", "ms"}`` as one
JSON line), ``["say", text]``, ``["sleep", seconds]``, ``["wait"]`` (reads
a line of stdin), ``["fork_exec", sql, parent_sql]`` (forks; the child opens
its own connection to the same file and runs ``sql``, printing its result;
with ``parent_sql``, the parent runs it first and the child waits 0.3 s),
``["fork_sleep", seconds]`` (forks a child that touches nothing and sleeps,
and prints ``{"forked": pid}``), ``["close"]`` (``sqlite3_close_v2`` of the
connection), ``["exists", path]`` (prints ``{"exists": bool}``) — and
prints the log lines it captured at the end as ``{"log": [...]}``.
"""

from __future__ import annotations

import ctypes
import json
import os
import sys
import time

SQLITE_OK = 0
SQLITE_BUSY = 5
SQLITE_CONFIG_LOG = 16
OPEN_FLAGS = 0x2 | 0x4 | 0x40  # READWRITE | CREATE | URI

_LOG_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int, ctypes.c_char_p)
_ROW_FN = ctypes.CFUNCTYPE(
    ctypes.c_int,
    ctypes.c_void_p,
    ctypes.c_int,
    ctypes.POINTER(ctypes.c_char_p),
    ctypes.POINTER(ctypes.c_char_p),
)


class Lib:
    """One libsqlite3, loaded by path, its log captured in ``self.log``."""

    def __init__(self, path: str):
        self.dll = ctypes.CDLL(path)
        self.log: list[tuple[int, str]] = []

        def on_log(_arg, code, msg):
            self.log.append((code, msg.decode("utf-8", "replace")))

        self._on_log = _LOG_FN(on_log)  # kept alive: SQLite holds it
        rc = self.dll.sqlite3_config(ctypes.c_int(SQLITE_CONFIG_LOG), self._on_log, None)
        if rc != SQLITE_OK:
            raise RuntimeError(f"sqlite3_config(LOG) failed with {rc} (initialized already?)")
        self.dll.sqlite3_libversion.restype = ctypes.c_char_p
        self.dll.sqlite3_errmsg.restype = ctypes.c_char_p
        self.dll.sqlite3_vfs_find.restype = ctypes.c_void_p
        self.dll.sqlite3_vfs_find.argtypes = [ctypes.c_char_p]

    def version(self) -> str:
        return self.dll.sqlite3_libversion().decode()

    def default_vfs(self) -> str:
        vfs = self.dll.sqlite3_vfs_find(None)
        # struct sqlite3_vfs: int iVersion, szOsFile, mxPathname; pNext; zName.
        return ctypes.c_char_p.from_address(vfs + 24).value.decode()

    def open(self, path: str, busy_timeout_ms: int = 0, vfs: str | None = None) -> Conn:
        return Conn(self, path, busy_timeout_ms, vfs)


class Conn:
    """A connection: ``exec`` runs SQL and returns its outcome as a dict."""

    def __init__(self, lib: Lib, path: str, busy_timeout_ms: int, vfs: str | None):
        self.lib = lib
        self.db = ctypes.c_void_p()
        rc = lib.dll.sqlite3_open_v2(path.encode(), ctypes.byref(self.db), OPEN_FLAGS, vfs.encode() if vfs else None)
        if rc != SQLITE_OK:
            raise RuntimeError(f"cannot open {path}: {rc}")
        lib.dll.sqlite3_extended_result_codes(self.db, 1)
        if busy_timeout_ms:
            lib.dll.sqlite3_busy_timeout(self.db, busy_timeout_ms)

    def exec(self, sql: str) -> dict:
        rows: list[list[str | None]] = []

        def on_row(_arg, n, values, _names):
            rows.append([values[i].decode() if values[i] is not None else None for i in range(n)])
            return 0

        cb = _ROW_FN(on_row)
        err = ctypes.c_char_p()
        start = time.monotonic()
        rc = self.lib.dll.sqlite3_exec(self.db, sql.encode(), cb, None, ctypes.byref(err))
        ms = (time.monotonic() - start) * 1000
        msg = err.value.decode() if err.value else ""
        if err.value:
            self.lib.dll.sqlite3_free(err)
        return {"rc": rc & 0xFF, "extended": rc, "msg": msg, "rows": rows, "ms": ms}

    def one(self, sql: str):
        """The first column of the first row (raises on an error)."""
        out = self.exec(sql)
        if out["rc"] != SQLITE_OK:
            raise RuntimeError(f"{sql}: {out['msg']} ({out['extended']})")
        return out["rows"][0][0] if out["rows"] else None

    def close(self) -> None:
        if self.db:
            self.lib.dll.sqlite3_close_v2(self.db)
            self.db = ctypes.c_void_p()


def _run(lib_path: str, steps: list) -> None:
    lib = Lib(lib_path)
    conn = None
    opened: list = []
    for step in steps:
        kind = step[0]
        if kind == "open":
            opened = step[1:]
            conn = lib.open(step[1], step[2], step[3] if len(step) > 3 else None)
        elif kind == "exec":
            print(json.dumps(conn.exec(step[1])), flush=True)
        elif kind == "say":
            print(json.dumps({"say": step[1]}), flush=True)
        elif kind == "sleep":
            time.sleep(step[1])
        elif kind == "wait":
            sys.stdin.readline()
        elif kind == "fork_exec":
            pid = os.fork()
            if pid == 0:
                if len(step) > 2:
                    time.sleep(0.3)  # the parent runs its SQL first
                child = lib.open(opened[0], opened[1])
                out = child.exec(step[1])
                out["log"] = [m for _, m in lib.log]
                print(json.dumps(out), flush=True)
                os._exit(0)
            if len(step) > 2:
                print(json.dumps(conn.exec(step[2])), flush=True)
            os.waitpid(pid, 0)
        elif kind == "close":
            conn.close()
        elif kind == "exists":
            print(json.dumps({"exists": os.path.exists(step[1])}), flush=True)
        elif kind == "fork_sleep":
            pid = os.fork()
            if pid == 0:
                # Off the parent's pipes: whoever reads them sees the
                # parent's end, not this child's.
                null = os.open(os.devnull, os.O_RDWR)
                for fd in (0, 1, 2):
                    os.dup2(null, fd)
                time.sleep(step[1])
                os._exit(0)
            print(json.dumps({"forked": pid}), flush=True)
        else:
            raise ValueError(f"unknown step {step!r}")
    print(json.dumps({"log": [m for _, m in lib.log]}), flush=True)


if __name__ == "__main__":
    _run(sys.argv[1], json.loads(sys.argv[2]))
