#!/usr/bin/env python3
"""The Python clients of scripts/lane-fairness and scripts/lane-bench.

Writes tagged rows into the table ``rows`` of a WAL database for a while and
logs every write, with the options and log format of bench/lane/go/writer.go:

    W kind pid wid seq arrival_ns grant_ns end_ns status
    B kind pid wid seq grant_ns            (with --flush, when BEGIN returned)

``--client sqlite3`` uses Python's own ``sqlite3`` module (which links
libsqlite3.so.0 dynamically: LD_LIBRARY_PATH picks stock or lane SQLite);
``--client engine`` uses litelane's engine through ``litelane.dbapi`` (its
own bundled SQLite, the cross-process queue of the engine).
"""
import argparse
import os
import sys
import time


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--db", required=True)
    ap.add_argument("--log", required=True)
    ap.add_argument("--client", choices=["sqlite3", "engine"], default="sqlite3")
    ap.add_argument("--kind", default="python")
    ap.add_argument("--mode", choices=["auto", "immediate", "deferred"], default="auto")
    ap.add_argument("--sync", default="NORMAL", help="PRAGMA synchronous (engine: NORMAL = profile balanced, FULL = safe)")
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--count", type=int, default=0)
    ap.add_argument("--rows", type=int, default=1, help="rows per transaction (immediate)")
    ap.add_argument("--payload", type=int, default=64)
    ap.add_argument("--start-at", type=int, default=0, help="wall-clock ns to start at")
    ap.add_argument("--timeout-ms", type=int, default=5000)
    ap.add_argument("--hold-ms", type=float, default=0.0)
    ap.add_argument("--flush", action="store_true")
    a = ap.parse_args()

    if a.client == "engine":
        import litelane.dbapi as mod

        profile = {"NORMAL": "balanced", "FULL": "safe"}.get(a.sync.upper())
        if profile is None:
            print(f"writer.py: --client engine takes --sync NORMAL or FULL, not {a.sync}", file=sys.stderr)
            return 2
        con = mod.connect(a.db, timeout=a.timeout_ms / 1000, isolation_level=None, profile=profile)
    else:
        import sqlite3 as mod

        con = mod.connect(a.db, timeout=a.timeout_ms / 1000, isolation_level=None)
        con.execute(f"PRAGMA synchronous={a.sync}")

    fd = os.open(a.log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    buf = []

    def line(s: str) -> None:
        if a.flush:
            os.write(fd, s.encode())
        else:
            buf.append(s)
            if len(buf) >= 4096:
                os.write(fd, "".join(buf).encode())
                buf.clear()

    ins = "INSERT INTO rows(kind, pid, wid, seq, sub, payload) VALUES (?, ?, ?, ?, ?, ?)"
    begin = "BEGIN IMMEDIATE" if a.mode == "immediate" else "BEGIN"
    payload = "x" * a.payload
    pid = os.getpid()
    kind = a.kind
    now = time.time_ns
    cur = con.cursor()
    if a.start_at:
        d = (a.start_at - now()) / 1e9
        if d > 0:
            time.sleep(d)
    deadline = now() + int(a.seconds * 1e9)
    hold = a.hold_ms / 1000
    seq = 0
    while True:
        if a.count > 0:
            if seq >= a.count:
                break
        elif now() >= deadline:
            break
        arrival = now()
        grant = 0
        status = "ok"
        try:
            if a.mode == "auto":
                cur.execute(ins, (kind, pid, 0, seq, 0, payload))
            else:
                cur.execute(begin)
                try:
                    if a.mode == "deferred":
                        cur.execute("SELECT max(id) FROM rows").fetchall()
                    grant = now()
                    if a.flush and a.mode == "immediate":
                        line(f"B\t{kind}\t{pid}\t0\t{seq}\t{grant}\n")
                    for sub in range(1 if a.mode == "deferred" else a.rows):
                        cur.execute(ins, (kind, pid, 0, seq, sub, payload))
                    if hold:
                        time.sleep(hold)
                    cur.execute("COMMIT")
                except BaseException:
                    if con.in_transaction:
                        cur.execute("ROLLBACK")
                    raise
        except mod.Error as e:
            status = "err:" + str(e).replace("\t", " ").replace("\n", " ")
            code = getattr(e, "sqlite_errorname", None)
            if code:
                status += f" [{code}]"
        end = now()
        line(f"W\t{kind}\t{pid}\t0\t{seq}\t{arrival}\t{grant}\t{end}\t{status}\n")
        seq += 1
    if buf:
        os.write(fd, "".join(buf).encode())
    os.close(fd)
    con.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
