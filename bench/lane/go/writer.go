// Command writer is the go-sqlite3 client of scripts/lane-fairness and
// scripts/lane-bench: it writes tagged rows into one table of a WAL
// database for a while and logs every write (arrival, grant, end, outcome).
//
// Built with `-tags libsqlite3`, it links the system's libsqlite3 (CGO_CFLAGS
// and CGO_LDFLAGS point at a lane SQLite build), and LD_LIBRARY_PATH picks
// the library at run time: the same binary runs on stock and on lane SQLite.
//
// Log lines (tab-separated), one per write:
//
//	W kind pid wid seq arrival_ns grant_ns end_ns status
//
// status is "ok" or "err:<message> [extended code N]"; grant_ns is when BEGIN returned (0 for
// autocommit writes). With -flush, a "B kind pid wid seq grant_ns" line is
// also written when a transaction has begun, and every line is written to
// the file at once (for the kill -9 phase: what was acknowledged survives
// the process).
package main

import (
	"bufio"
	"context"
	"database/sql"
	"flag"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	sqlite3 "github.com/mattn/go-sqlite3"
)

type config struct {
	db, kind, mode, sync, logPath string
	seconds                       float64
	count, rows, conns, payload   int
	startAt                       int64
	timeoutMs                     int
	holdMs                        float64
	flush                         bool
}

type logger struct {
	mu    sync.Mutex
	f     *os.File
	w     *bufio.Writer
	flush bool
}

func (l *logger) line(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.flush {
		l.f.WriteString(s)
	} else {
		l.w.WriteString(s)
	}
}

func (l *logger) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.w.Flush()
	l.f.Close()
}

func now() int64 { return time.Now().UnixNano() }

func oneLine(s string) string {
	return strings.NewReplacer("\t", " ", "\n", " ").Replace(s)
}

func main() {
	var c config
	flag.StringVar(&c.db, "db", "", "database file (WAL; table rows made by the harness)")
	flag.StringVar(&c.kind, "kind", "go", "client kind written into each row")
	flag.StringVar(&c.mode, "mode", "auto", "auto (autocommit inserts) | immediate (BEGIN IMMEDIATE; -rows inserts; COMMIT) | deferred (BEGIN; SELECT; INSERT; COMMIT)")
	flag.StringVar(&c.sync, "sync", "NORMAL", "PRAGMA synchronous")
	flag.StringVar(&c.logPath, "log", "", "log file")
	flag.Float64Var(&c.seconds, "seconds", 3, "write until this long after the start")
	flag.IntVar(&c.count, "count", 0, "writes per connection (instead of -seconds)")
	flag.IntVar(&c.rows, "rows", 1, "rows per transaction (immediate)")
	flag.IntVar(&c.conns, "conns", 1, "connections (goroutines) of one database/sql pool")
	flag.IntVar(&c.payload, "payload", 64, "payload bytes per row")
	flag.Int64Var(&c.startAt, "start-at", 0, "start at this wall-clock time (ns since the epoch)")
	flag.IntVar(&c.timeoutMs, "timeout-ms", 5000, "busy timeout (ms)")
	flag.Float64Var(&c.holdMs, "hold-ms", 0, "sleep this long inside each transaction, before COMMIT")
	flag.BoolVar(&c.flush, "flush", false, "write each log line at once (and B lines)")
	flag.Parse()
	if c.db == "" || c.logPath == "" {
		fmt.Fprintln(os.Stderr, "writer: -db and -log are required")
		os.Exit(2)
	}
	if c.mode != "auto" && c.mode != "immediate" && c.mode != "deferred" {
		fmt.Fprintln(os.Stderr, "writer: -mode is auto, immediate or deferred")
		os.Exit(2)
	}
	f, err := os.Create(c.logPath)
	if err != nil {
		fmt.Fprintln(os.Stderr, "writer:", err)
		os.Exit(1)
	}
	lg := &logger{f: f, w: bufio.NewWriterSize(f, 1<<20), flush: c.flush}
	defer lg.close()

	txlock := "deferred"
	if c.mode == "immediate" {
		txlock = "immediate"
	}
	dsn := fmt.Sprintf("file:%s?_busy_timeout=%d&_sync=%s&_txlock=%s", c.db, c.timeoutMs, c.sync, txlock)
	db, err := sql.Open("sqlite3", dsn)
	if err != nil {
		fmt.Fprintln(os.Stderr, "writer:", err)
		os.Exit(1)
	}
	db.SetMaxOpenConns(c.conns)
	db.SetMaxIdleConns(c.conns)
	db.SetConnMaxLifetime(0)
	ctx := context.Background()
	// Open every connection of the pool before the start, and check the library.
	conns := make([]*sql.Conn, c.conns)
	for i := range conns {
		if conns[i], err = db.Conn(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "writer:", err)
			os.Exit(1)
		}
		var v string
		if err = conns[i].QueryRowContext(ctx, "SELECT sqlite_version()").Scan(&v); err != nil {
			fmt.Fprintln(os.Stderr, "writer:", err)
			os.Exit(1)
		}
	}
	for _, cn := range conns {
		cn.Close()
	}
	ins, err := db.Prepare("INSERT INTO rows(kind, pid, wid, seq, sub, payload) VALUES (?, ?, ?, ?, ?, ?)")
	if err != nil {
		fmt.Fprintln(os.Stderr, "writer:", err)
		os.Exit(1)
	}
	payload := strings.Repeat("x", c.payload)
	pid := os.Getpid()
	if c.startAt > 0 {
		if d := time.Duration(c.startAt - now()); d > 0 {
			time.Sleep(d)
		}
	}
	start := now()
	deadline := start + int64(c.seconds*1e9)
	hold := time.Duration(c.holdMs * 1e6)

	var wg sync.WaitGroup
	for wid := 0; wid < c.conns; wid++ {
		wg.Add(1)
		go func(wid int) {
			defer wg.Done()
			for seq := 0; ; seq++ {
				if c.count > 0 {
					if seq >= c.count {
						return
					}
				} else if now() >= deadline {
					return
				}
				arrival := now()
				var grant int64
				var err error
				switch c.mode {
				case "auto":
					_, err = ins.Exec(c.kind, pid, wid, seq, 0, payload)
				default:
					var tx *sql.Tx
					tx, err = db.BeginTx(ctx, nil)
					if err == nil {
						if c.mode == "deferred" {
							var n sql.NullInt64
							err = tx.QueryRow("SELECT max(id) FROM rows").Scan(&n)
						}
						// With _txlock=immediate, BEGIN IMMEDIATE took the lock.
						grant = now()
						if c.flush && c.mode == "immediate" {
							lg.line(fmt.Sprintf("B\t%s\t%d\t%d\t%d\t%d\n", c.kind, pid, wid, seq, grant))
						}
						n := c.rows
						if c.mode == "deferred" {
							n = 1
						}
						for sub := 0; err == nil && sub < n; sub++ {
							_, err = tx.Stmt(ins).Exec(c.kind, pid, wid, seq, sub, payload)
						}
						if err == nil && hold > 0 {
							time.Sleep(hold)
						}
						if err == nil {
							err = tx.Commit()
						} else {
							tx.Rollback()
						}
					}
				}
				end := now()
				status := "ok"
				if err != nil {
					status = "err:" + oneLine(err.Error())
					if se, ok := err.(sqlite3.Error); ok {
						status += fmt.Sprintf(" [extended code %d]", int(se.ExtendedCode))
					}
				}
				lg.line(fmt.Sprintf("W\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%s\n", c.kind, pid, wid, seq, arrival, grant, end, status))
			}
		}(wid)
	}
	wg.Wait()
}
