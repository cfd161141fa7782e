#!/usr/bin/env bash
# CPU time and context switches per write, lane against stock, for the
# diagnosis in docs/lane-sqlite-bench.md: P go-sqlite3 writer processes
# (bench/lane/go, autocommit single-row INSERTs, synchronous=NORMAL) x N
# writes each, under `perf stat`, variants alternated, ROUNDS times.
#
#   bench/lane/cpu.sh [-p P] [-n N] [-r ROUNDS] [VARIANT...]
#
# VARIANT: stock | lane | setlk (the lane build with LITELANE_LANE=off: SQLite
# with SETLK_TIMEOUT, without the lane VFS) | a directory holding a
# libsqlite3.so.0 (another build). Default: stock setlk lane.
# Needs perf, and target/lane-bench/go-writer (scripts/lane-bench builds it).
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
p=1 n=40000 rounds=3
usage() { sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; }
while [ $# -gt 0 ]; do
    case "$1" in
        -p) p=$2; shift 2 ;;
        -n) n=$2; shift 2 ;;
        -r) rounds=$2; shift 2 ;;
        -h|--help) usage; exit 0 ;;
        -*) echo "cpu.sh: unknown option $1" >&2; usage >&2; exit 2 ;;
        *) break ;;
    esac
done
variants=("$@")
[ ${#variants[@]} -gt 0 ] || variants=(stock setlk lane)
command -v perf >/dev/null || { echo "cpu.sh: perf is needed" >&2; exit 1; }
writer=$root/target/lane-bench/go-writer
[ -x "$writer" ] || { echo "cpu.sh: no $writer: run scripts/lane-bench --only go-1 once" >&2; exit 1; }
work=$root/target/lane-bench/cpu
mkdir -p "$work"
for ((i = 1; i <= rounds; i++)); do
    for v in "${variants[@]}"; do
        off=
        case "$v" in
            stock|lane) lib=$root/target/lane-sqlite/$v/lib ;;
            setlk) lib=$root/target/lane-sqlite/lane/lib; off=off ;;
            *) lib=$v ;;
        esac
        [ -f "$lib/libsqlite3.so.0" ] || { echo "cpu.sh: no $lib/libsqlite3.so.0" >&2; exit 1; }
        rm -f "$work"/c.db* "$work"/c-*.log
        python3 - "$work/c.db" <<'EOF'
import sqlite3, sys
c = sqlite3.connect(sys.argv[1]); c.execute("PRAGMA journal_mode=WAL")
c.execute("CREATE TABLE rows(id INTEGER PRIMARY KEY, kind TEXT, pid INT, wid INT, seq INT, sub INT, payload TEXT)")
c.commit()
EOF
        out=$(LITELANE_LANE=$off LD_LIBRARY_PATH=$lib perf stat -x, -e task-clock,context-switches \
            bash -c "for j in \$(seq $p); do $writer -db $work/c.db -log $work/c-\$j.log -count $n & done; wait" 2>&1 >/dev/null)
        tc=$(echo "$out" | grep task-clock | cut -d, -f1)
        cs=$(echo "$out" | grep context-sw | cut -d, -f1)
        cat "$work"/c-*.log | awk -F'\t' -v tc="$tc" -v cs="$cs" -v v="$v" -v i="$i" -v p="$p" \
            -v load="$(cut -d' ' -f1 /proc/loadavg)" '
            { if (!s || $6 < s) s = $6; if ($8 > e) e = $8; w++; if ($9 != "ok") b++ }
            END { printf "P=%d %-6s round %d: %6.1f us CPU/write  %5.2f context switches/write  %7.0f rows/s  busy %d  load %s\n",
                  p, v, i, tc * 1000 / w, cs / w, w / ((e - s) / 1e9), b, load }'
    done
done
