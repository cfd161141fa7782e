//! `bench import`: report 003 (Windows, SQLWinRT). A generated trips CSV
//! shaped like the report's Toronto transit file (128,982 rows × 8 columns,
//! headsigns with commas and double quotes) is loaded:
//!
//! * `sqlite3-shell-import`: the `sqlite3` shell's `.import --csv` (when
//!   `sqlite3` is on `PATH`; skipped with a note otherwise);
//! * `litelane-import`: `litelane import FILE --db DB --json --quiet` (the
//!   same library, as `litelane-bench import-child`), run as a
//!   child process of this very executable;
//! * `bulk-insert`: the parsed rows inserted from structs by the engine's
//!   bulk inserter (the report's "insert within a transaction");
//! * `insert-select-text`: the floor a typed import is measured against:
//!   SQLite copying the CSV's text, already in a table of TEXT columns in
//!   another database, into the table litelane import made (same types,
//!   `''` → NULL) with one `INSERT … SELECT` under the same pragmas;
//! * `insert-select`: SQLite copying typed rows from one table to another of
//!   the same schema (`INSERT … SELECT *`): its transfer optimisation copies
//!   records without decoding them, a bound no import can reach.
//!
//! Then the report's second half, every row read back into a struct and
//! inserted again from structs, hopping between the caller and the engine:
//! one `read_async`/`write_async` hop per row, one per batch of 1,000 rows, and
//! (reads) one synchronous `db.read`. The per-row slowdown is the report's
//! 58× (inserts) and 88× (reads) effect.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use litelane::{BulkRow, Database, Options, Profile, ValueRef};
use rusqlite::Connection;
use serde_json::Value;

use super::data::{trips, write_trips_csv, Trip, TRIP_COLUMNS, TRIP_ROWS};
use super::report::{group_digits, round, Outcome, Row, Unit};
use super::Ctx;
use crate::error::BenchError;

const TTC_SCHEMA: &str = "CREATE TABLE ttc(id INTEGER PRIMARY KEY, route_id INTEGER, \
     service_id INTEGER, trip_id INTEGER, trip_headsign TEXT, direction_id INTEGER, \
     block_id INTEGER, shape_id INTEGER, wheelchair_accessible INTEGER)";
/// `id`, then the trips CSV's columns ([`TRIP_COLUMNS`]) in their order.
const TTC_COLUMNS: [&str; 9] = {
    let mut cols = ["id"; 9];
    let mut i = 0;
    while i < TRIP_COLUMNS.len() {
        cols[i + 1] = TRIP_COLUMNS[i];
        i += 1;
    }
    cols
};
const SELECT_RANGE: &str = "SELECT route_id, service_id, trip_id, trip_headsign, direction_id, \
     block_id, shape_id, wheelchair_accessible FROM ttc WHERE id BETWEEN ?1 AND ?2 ORDER BY id";
const SELECT_ALL: &str = "SELECT route_id, service_id, trip_id, trip_headsign, direction_id, \
     block_id, shape_id, wheelchair_accessible FROM ttc ORDER BY id";
const INSERT_ONE: &str = "INSERT INTO ttc2(id, route_id, service_id, trip_id, trip_headsign, \
     direction_id, block_id, shape_id, wheelchair_accessible) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)";
/// Rows per hop of the per-batch variants.
const BATCH: u64 = 1_000;

/// A trip with its row id, insertable without allocation.
struct TtcRow<'a> {
    id: i64,
    trip: &'a Trip,
}

impl BulkRow for TtcRow<'_> {
    fn len(&self) -> usize {
        9
    }
    fn value(&self, i: usize) -> ValueRef<'_> {
        let t = self.trip;
        match i {
            0 => ValueRef::Integer(self.id),
            1 => ValueRef::Integer(t.route_id),
            2 => ValueRef::Integer(t.service_id),
            3 => ValueRef::Integer(t.trip_id),
            4 => ValueRef::Text(t.headsign.as_bytes()),
            5 => ValueRef::Integer(t.direction_id),
            6 => ValueRef::Integer(t.block_id),
            7 => ValueRef::Integer(t.shape_id),
            _ => ValueRef::Integer(i64::from(t.accessible)),
        }
    }
}

fn trip_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Trip> {
    Ok(Trip {
        route_id: r.get(0)?,
        service_id: r.get(1)?,
        trip_id: r.get(2)?,
        headsign: r.get(3)?,
        direction_id: r.get(4)?,
        block_id: r.get(5)?,
        shape_id: r.get(6)?,
        accessible: r.get::<_, i64>(7)? != 0,
    })
}

/// Where the `sqlite3` shell is, if on `PATH`.
fn find_sqlite3() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join("sqlite3"))
        .find(|p| p.is_file())
}

fn count(path: &Path, table: &str) -> u64 {
    Connection::open(path)
        .and_then(|c| {
            c.query_row(&format!("SELECT count(*) FROM {table}"), [], |r| {
                r.get::<_, i64>(0)
            })
        })
        .map_or(0, |n| n as u64)
}

/// Runs the scenario.
pub fn run(ctx: &Ctx) -> Result<Outcome, BenchError> {
    let rows = ctx.pick(ctx.args.csv_rows, TRIP_ROWS, TRIP_ROWS).max(1);
    let profile = ctx.profile(Profile::Balanced)?;
    let mut o = Outcome::new(
        "import",
        "report 003 (SQLWinRT: a hop back to the UI context per row made inserts 58× and reads 88× slower)",
        format!(
            "a generated {}-row, 8-column trips CSV; litelane under profile {profile}",
            group_digits(rows as f64, 0)
        ),
    );
    o.param("rows", rows);
    o.param("profile", profile.name());
    o.param("batch_rows", BATCH);
    o.column("vs best", "slowdown", 1);
    let dir = ctx.fresh_dir()?;
    let csv = dir.path().join("trips.csv");
    let started = Instant::now();
    let data: Vec<Trip> = trips(ctx.args.seed, rows).collect();
    {
        let file = std::fs::File::create(&csv)
            .map_err(|e| BenchError::io(format!("creating {}", csv.display()), e))?;
        let mut out = std::io::BufWriter::new(file);
        write_trips_csv(&mut out, data.iter().cloned())
            .and_then(|_| std::io::Write::flush(&mut out))
            .map_err(|e| BenchError::io(format!("writing {}", csv.display()), e))?;
    }
    let bytes = std::fs::metadata(&csv).map_or(0, |m| m.len());
    o.param("csv_bytes", bytes);
    ctx.progress(format!(
        "import: wrote {} ({:.1} MB) in {:.2} s",
        csv.display(),
        bytes as f64 / 1e6,
        started.elapsed().as_secs_f64()
    ));

    // 1. The sqlite3 shell.
    match find_sqlite3() {
        Some(shell) => {
            ctx.progress("import: sqlite3-shell-import");
            o.rows.push(shell_import(ctx, &shell, &csv, rows)?);
        }
        None => o
            .notes
            .push("sqlite3-shell-import skipped: no `sqlite3` on PATH".to_string()),
    }
    // 2. litelane import, as a child process.
    ctx.progress("import: litelane-import");
    let imported = litelane_import(ctx, &csv, rows, profile)?;
    o.rows.push(imported.row);
    o.notes.extend(imported.note);
    if let Some((table, create)) = &imported.table {
        ctx.progress("import: insert-select-text");
        o.rows
            .push(text_copy_floor(ctx, &csv, table, create, rows, profile)?);
    }

    // 3. Bulk insert from structs, then the async hops, on one database.
    let db_dir = ctx.fresh_dir()?;
    let db_path = db_dir.path().join("ttc.db");
    let db = Database::open(&db_path, Options::with_profile(profile))?;
    db.write(|tx| {
        tx.execute_batch(TTC_SCHEMA)?;
        tx.execute_batch(&TTC_SCHEMA.replace("ttc(", "ttc2("))?;
        tx.execute_batch(&TTC_SCHEMA.replace("ttc(", "ttc_copy("))?;
        Ok(())
    })?;
    ctx.progress("import: bulk-insert");
    let start = Instant::now();
    let report = db
        .inserter("ttc", &TTC_COLUMNS)?
        .insert(data.iter().enumerate().map(|(i, trip)| TtcRow {
            id: i as i64 + 1,
            trip,
        }))?;
    let stored =
        db.read(|c| Ok(c.query_row("SELECT count(*) FROM ttc", [], |r| r.get::<_, i64>(0))?))?;
    o.rows.push(
        Row::new("bulk-insert", Unit::Rows, report.rows, start.elapsed())
            .errors(rows.abs_diff(stored as u64))
            .with("hops", 0)
            .with("kind", "insert"),
    );

    ctx.progress("import: insert-select");
    let start = Instant::now();
    let copied = db.write(|tx| Ok(tx.execute("INSERT INTO ttc_copy SELECT * FROM ttc", [])?))?;
    o.rows.push(
        Row::new("insert-select", Unit::Rows, copied as u64, start.elapsed())
            .errors(rows.abs_diff(copied as u64))
            .with("kind", "insert"),
    );

    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .map_err(|e| BenchError::io("starting a tokio runtime", e))?;
    ctx.progress("import: insert-async-per-batch");
    o.rows.push(rt.block_on(insert_async(&db, &data, BATCH))?);
    db.write(|tx| Ok(tx.execute_batch("DELETE FROM ttc2")?))?;
    ctx.progress("import: insert-async-per-row");
    o.rows.push(rt.block_on(insert_async(&db, &data, 1))?);

    ctx.progress("import: read-sync");
    let start = Instant::now();
    let all = db.read(|c| {
        let mut st = c.prepare(SELECT_ALL)?;
        let v = st
            .query_map([], trip_from_row)?
            .collect::<rusqlite::Result<Vec<Trip>>>()?;
        Ok(v)
    })?;
    let elapsed = start.elapsed();
    let wrong = all.iter().zip(&data).filter(|(a, b)| a != b).count() as u64;
    o.rows.push(
        Row::new("read-sync", Unit::Rows, all.len() as u64, elapsed)
            .errors(rows.abs_diff(all.len() as u64) + wrong)
            .with("hops", 1)
            .with("kind", "read"),
    );
    ctx.progress("import: read-async-per-batch");
    o.rows.push(rt.block_on(read_async(&db, &data, BATCH))?);
    ctx.progress("import: read-async-per-row");
    o.rows.push(rt.block_on(read_async(&db, &data, 1))?);
    drop(db);

    // Slowdowns: inserts against bulk-insert, reads against read-sync.
    let best = |kind: &str, name: &str| {
        o.rows
            .iter()
            .find(|r| r.name == name && r.extra.get("kind").and_then(Value::as_str) == Some(kind))
            .map_or(0.0, Row::rate)
    };
    let (ins, rd) = (best("insert", "bulk-insert"), best("read", "read-sync"));
    for r in &mut o.rows {
        let base = match r.extra.get("kind").and_then(Value::as_str) {
            Some("read") => rd,
            _ => ins,
        };
        if r.rate() > 0.0 && base > 0.0 {
            r.set("slowdown", round(base / r.rate(), 2));
        }
    }
    let rate = |n: &str| o.rows.iter().find(|r| r.name == n).map(Row::rate);
    if let (Some(a), Some(b)) = (rate("insert-async-per-row"), rate("insert-async-per-batch")) {
        o.notes.push(format!(
            "one hop per row: inserts {:.1}× slower than one hop per 1,000 rows (each per-row hop is also its own transaction)",
            b / a.max(f64::MIN_POSITIVE)
        ));
    }
    if let (Some(a), Some(b), Some(s)) = (
        rate("read-async-per-row"),
        rate("read-async-per-batch"),
        rate("read-sync"),
    ) {
        o.notes.push(format!(
            "one hop per row: reads {:.1}× slower than one hop per 1,000 rows and {:.1}× slower than one synchronous read",
            b / a.max(f64::MIN_POSITIVE),
            s / a.max(f64::MIN_POSITIVE)
        ));
    }
    let imported = rate("litelane-import").filter(|r| *r > 0.0);
    if let (Some(l), Some(s)) = (imported, rate("sqlite3-shell-import")) {
        o.notes.push(format!(
            "litelane import is {:.2}× the sqlite3 shell (target ≥ 3×; the shell stores every column as TEXT)",
            l / s.max(f64::MIN_POSITIVE)
        ));
    }
    if let (Some(l), Some(f)) = (imported, rate("insert-select-text")) {
        o.notes.push(format!(
            "litelane import takes {:.2}× the time of its floor, SQLite copying the same text into the same typed table (target ≤ 1.1×; the import's time includes process start, sniffing and CSV parsing)",
            f / l.max(f64::MIN_POSITIVE)
        ));
    }
    if let (Some(l), Some(f)) = (imported, rate("insert-select")) {
        o.notes.push(format!(
            "a record-for-record copy of typed rows (INSERT … SELECT *, SQLite's transfer optimisation) is {:.2}× faster than litelane import",
            f / l.max(f64::MIN_POSITIVE)
        ));
    }
    Ok(o)
}

/// `sqlite3 DB ".import --csv FILE trips"` on a fresh file (the shell's
/// defaults: rollback journal, `synchronous=FULL`, every column TEXT).
fn shell_import(ctx: &Ctx, shell: &Path, csv: &Path, rows: u64) -> Result<Row, BenchError> {
    let dir = ctx.fresh_dir()?;
    let db = dir.path().join("shell.db");
    let start = Instant::now();
    let out = Command::new(shell)
        .arg(&db)
        .arg(format!(".import --csv '{}' trips", csv.display()))
        .output();
    let elapsed = start.elapsed();
    let stored = count(&db, "trips");
    let mut row = Row::new("sqlite3-shell-import", Unit::Rows, stored, elapsed)
        .errors(rows.abs_diff(stored))
        .with("kind", "insert")
        .with("column_types", "text");
    match out {
        Ok(o) if o.status.success() => {}
        Ok(o) => row.set(
            "error",
            format!(
                "sqlite3 exited with {}: {}",
                o.status,
                String::from_utf8_lossy(&o.stderr).trim()
            ),
        ),
        Err(e) => row.set("error", format!("running {}: {e}", shell.display())),
    }
    Ok(row)
}

/// What [`litelane_import()`] measured.
struct Imported {
    /// The variant's row.
    row: Row,
    /// Why it failed, if it did.
    note: Option<String>,
    /// The table it made: its name and `CREATE TABLE` statement.
    table: Option<(String, String)>,
}

/// `litelane import CSV --db DB --json --quiet` as a child process (this
/// binary's hidden `import-child`, the same library as the command). An
/// import that fails (or is not built) becomes a row with errors and a note,
/// not a failed benchmark.
fn litelane_import(
    ctx: &Ctx,
    csv: &Path,
    rows: u64,
    profile: Profile,
) -> Result<Imported, BenchError> {
    let dir = ctx.fresh_dir()?;
    let db = dir.path().join("import.db");
    let exe = std::env::current_exe()
        .map_err(|e| BenchError::io("finding the litelane-bench executable", e))?;
    let start = Instant::now();
    let out = Command::new(&exe)
        .arg("import-child")
        .arg(csv)
        .arg("--db")
        .arg(&db)
        .arg("--profile")
        .arg(profile.name())
        .arg("--json")
        .arg("--quiet")
        .output();
    let elapsed = start.elapsed();
    let failed = |why: String| {
        let row = Row::new("litelane-import", Unit::Rows, 0, elapsed)
            .errors(rows)
            .with("kind", "insert")
            .with("error", why.clone());
        Imported {
            row,
            note: Some(format!("litelane-import failed: {why}")),
            table: None,
        }
    };
    let out = match out {
        Ok(o) => o,
        Err(e) => return Ok(failed(format!("running {}: {e}", exe.display()))),
    };
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        return Ok(failed(format!(
            "exit status {}: {}",
            out.status,
            stderr.trim().chars().take(300).collect::<String>()
        )));
    }
    let summary: Value = match serde_json::from_slice(&out.stdout) {
        Ok(v) => v,
        Err(e) => return Ok(failed(format!("its --json output did not parse: {e}"))),
    };
    let inserted = summary["rows_inserted"].as_u64().unwrap_or(0);
    let rejected = summary["rows_rejected"].as_u64().unwrap_or(0);
    let table = summary["table"]
        .as_str()
        .unwrap_or("trips")
        .replace('"', "\"\"");
    let stored = count(&db, &format!("\"{table}\""));
    let mut row = Row::new("litelane-import", Unit::Rows, stored, elapsed)
        .errors(rows.abs_diff(stored) + rejected)
        .with("kind", "insert")
        .with("rows_inserted", inserted)
        .with("rows_rejected", rejected);
    if let Some(secs) = summary["seconds"].as_f64() {
        row.set("seconds_reported_by_import", secs);
    }
    if let Some(cols) = summary.get("columns") {
        row.set("columns", cols.clone());
    }
    let raw_table = summary["table"].as_str().unwrap_or("trips").to_string();
    let create = Connection::open(&db)
        .and_then(|c| {
            c.query_row(
                "SELECT sql FROM sqlite_schema WHERE type = 'table' AND name = ?1",
                [&raw_table],
                |r| r.get::<_, String>(0),
            )
        })
        .ok()
        .map(|sql| (raw_table, sql));
    Ok(Imported {
        row,
        note: None,
        table: create,
    })
}

/// The floor of a typed import: SQLite copying the CSV's text, already in a
/// table of TEXT columns in another database file (as the shell's `.import`
/// leaves it), into a fresh database holding the table litelane made (same
/// types), `''` turned into NULL as litelane does, with the engine's pragmas
/// for `profile`: `ATTACH`, then one `INSERT … SELECT` in one transaction.
/// The copy and the close that checkpoints the WAL are timed, not loading
/// the text.
fn text_copy_floor(
    ctx: &Ctx,
    csv: &Path,
    table: &str,
    create: &str,
    rows: u64,
    profile: Profile,
) -> Result<Row, BenchError> {
    let dir = ctx.fresh_dir()?;
    let text_db = dir.path().join("text.db");
    let engine = |e: rusqlite::Error, what: &str| {
        BenchError::Engine(litelane::Error::from_sqlite(e, what.to_string()))
    };
    let mut reader = csv::ReaderBuilder::new()
        .from_path(csv)
        .map_err(|e| BenchError::Input(format!("reading {}: {e}", csv.display())))?;
    let width = reader
        .headers()
        .map_err(|e| BenchError::Input(format!("reading {}: {e}", csv.display())))?
        .len();
    let cols: Vec<String> = (1..=width).map(|i| format!("c{i}")).collect();
    {
        let mut text = Connection::open(&text_db).map_err(|e| engine(e, "opening text.db"))?;
        text.execute_batch(&format!(
            "PRAGMA journal_mode = OFF; CREATE TABLE src({})",
            cols.iter()
                .map(|c| format!("{c} TEXT"))
                .collect::<Vec<_>>()
                .join(", ")
        ))
        .map_err(|e| engine(e, "creating the text table"))?;
        let tx = text.transaction().map_err(|e| engine(e, "BEGIN"))?;
        {
            let sql = litelane::insert_sql("INSERT INTO src VALUES ", width, 1);
            let mut st = tx.prepare(&sql).map_err(|e| engine(e, &sql))?;
            for rec in reader.byte_records() {
                let rec =
                    rec.map_err(|e| BenchError::Input(format!("reading {}: {e}", csv.display())))?;
                for (i, f) in rec.iter().enumerate() {
                    st.raw_bind_parameter(i + 1, std::str::from_utf8(f).unwrap_or(""))
                        .map_err(|e| engine(e, "binding"))?;
                }
                st.raw_execute()
                    .map_err(|e| engine(e, "loading the text table"))?;
            }
        }
        tx.commit().map_err(|e| engine(e, "COMMIT"))?;
    }
    let target = dir.path().join("typed.db");
    let conn = Connection::open(&target).map_err(|e| engine(e, "opening typed.db"))?;
    for p in super::insert::engine_pragmas(profile) {
        conn.query_row(&p, [], |_| Ok(())).or_else(|e| match e {
            rusqlite::Error::QueryReturnedNoRows => Ok(()),
            e => Err(engine(e, &p)),
        })?;
    }
    conn.execute_batch(create).map_err(|e| engine(e, create))?;
    let select: Vec<String> = cols.iter().map(|c| format!("NULLIF({c}, '')")).collect();
    let copy = format!(
        "INSERT INTO {} SELECT {} FROM text.src",
        litelane::quote_ident(table),
        select.join(", ")
    );
    conn.execute("ATTACH ?1 AS text", [text_db.to_string_lossy()])
        .map_err(|e| engine(e, "ATTACH"))?;
    let start = Instant::now();
    conn.execute_batch("BEGIN")
        .map_err(|e| engine(e, "BEGIN"))?;
    let copied = conn.execute(&copy, []).map_err(|e| engine(e, &copy))?;
    conn.execute_batch("COMMIT")
        .map_err(|e| engine(e, "COMMIT"))?;
    // Closing folds the WAL into the database file, as it does when
    // litelane import's process ends: part of both times.
    conn.close()
        .map_err(|(_, e)| engine(e, "closing typed.db"))?;
    let elapsed = start.elapsed();
    Ok(
        Row::new("insert-select-text", Unit::Rows, copied as u64, elapsed)
            .errors(rows.abs_diff(copied as u64))
            .with("kind", "insert"),
    )
}

/// Inserts every trip into `ttc2` through `write_async`, `per_hop` rows per
/// hop (each hop one transaction), awaiting each before the next.
async fn insert_async(db: &Database, data: &[Trip], per_hop: u64) -> Result<Row, BenchError> {
    let start = Instant::now();
    let mut errors = 0u64;
    let mut hops = 0u64;
    for (chunk_no, chunk) in data.chunks(per_hop as usize).enumerate() {
        let first = chunk_no as i64 * per_hop as i64 + 1;
        let owned: Vec<Trip> = chunk.to_vec();
        let r = db
            .write_async(move |tx| {
                let mut st = tx.prepare_cached(INSERT_ONE)?;
                for (i, t) in owned.iter().enumerate() {
                    st.execute((
                        first + i as i64,
                        t.route_id,
                        t.service_id,
                        t.trip_id,
                        &t.headsign,
                        t.direction_id,
                        t.block_id,
                        t.shape_id,
                        i64::from(t.accessible),
                    ))?;
                }
                Ok(())
            })
            .await;
        hops += 1;
        if r.is_err() {
            errors += chunk.len() as u64;
        }
    }
    let elapsed = start.elapsed();
    let stored =
        db.read(|c| Ok(c.query_row("SELECT count(*) FROM ttc2", [], |r| r.get::<_, i64>(0))?))?;
    let name = if per_hop == 1 {
        "insert-async-per-row"
    } else {
        "insert-async-per-batch"
    };
    Ok(Row::new(name, Unit::Rows, data.len() as u64, elapsed)
        .errors(errors + (data.len() as u64).abs_diff(stored as u64))
        .with("hops", hops)
        .with("kind", "insert")
        .with("us_per_row", round(per_row_us(elapsed, data.len()), 3)))
}

/// Reads every trip back through `read_async`, `per_hop` rows per hop.
async fn read_async(db: &Database, data: &[Trip], per_hop: u64) -> Result<Row, BenchError> {
    let n = data.len() as u64;
    let start = Instant::now();
    let mut out: Vec<Trip> = Vec::with_capacity(data.len());
    let mut errors = 0u64;
    let mut hops = 0u64;
    let mut first = 1u64;
    while first <= n {
        let last = (first + per_hop - 1).min(n);
        let r = db
            .read_async(move |c| {
                let mut st = c.prepare_cached(SELECT_RANGE)?;
                let v = st
                    .query_map([first as i64, last as i64], trip_from_row)?
                    .collect::<rusqlite::Result<Vec<Trip>>>()?;
                Ok(v)
            })
            .await;
        hops += 1;
        match r {
            Ok(v) => out.extend(v),
            Err(_) => errors += last - first + 1,
        }
        first = last + 1;
    }
    let elapsed = start.elapsed();
    let wrong = out.iter().zip(data).filter(|(a, b)| a != b).count() as u64;
    let name = if per_hop == 1 {
        "read-async-per-row"
    } else {
        "read-async-per-batch"
    };
    Ok(Row::new(name, Unit::Rows, out.len() as u64, elapsed)
        .errors(errors + wrong + n.abs_diff(out.len() as u64))
        .with("hops", hops)
        .with("kind", "read")
        .with("us_per_row", round(per_row_us(elapsed, data.len()), 3)))
}

fn per_row_us(d: Duration, rows: usize) -> f64 {
    d.as_secs_f64() * 1e6 / rows.max(1) as f64
}
