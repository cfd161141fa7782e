//! `bench ladder`: report 000 (Android, 100,000 rows at start-up). Each rung
//! adds one of the report's steps, on a fresh file:
//!
//! 1. `autocommit-per-row`: one implicit transaction per row, rollback journal,
//!    `synchronous=FULL`, the `INSERT` compiled for every row (Android's
//!    `SQLiteDatabase.insert()`). Run on a sample (default 2,000 rows): its
//!    rows/s is measured on the sample and says so.
//! 2. `one-transaction`: the same inside one `BEGIN … COMMIT`.
//! 3. `prepared-statement`: one statement prepared once and reused.
//! 4. `wal-normal`: plus `journal_mode=WAL`, `synchronous=NORMAL`.
//! 5. `memory-off`: plus `journal_mode=MEMORY`, `synchronous=OFF` (the risky step).
//! 6. `litelane-safe`, `litelane-balanced`, `litelane-fast`: the engine's bulk
//!    inserter under each profile.
//!
//! Reported: rows/s and the speed-up over the first rung.

use std::path::Path;
use std::time::Instant;

use litelane::{BulkRow, Database, Options, Profile, ValueRef};
use rusqlite::Connection;

use super::data::{records, Record, RECORD_INSERT, RECORD_SCHEMA};
use super::report::{group_digits, round, Outcome, Row, Unit};
use super::{median_of, Ctx};
use crate::error::BenchError;

impl BulkRow for Record {
    fn len(&self) -> usize {
        5
    }
    fn value(&self, i: usize) -> ValueRef<'_> {
        match i {
            0 => ValueRef::Integer(self.id),
            1 => ValueRef::Text(self.code.as_bytes()),
            2 => ValueRef::Text(self.name.as_bytes()),
            3 => ValueRef::Real(self.amount),
            _ => ValueRef::Integer(self.flag),
        }
    }
}

/// How a plain rung runs.
#[derive(Debug, Clone, Copy)]
struct Rung {
    name: &'static str,
    journal: &'static str,
    synchronous: i64,
    one_transaction: bool,
    reuse_statement: bool,
}

const RUNGS: [Rung; 5] = [
    Rung {
        name: "autocommit-per-row",
        journal: "delete",
        synchronous: 2,
        one_transaction: false,
        reuse_statement: false,
    },
    Rung {
        name: "one-transaction",
        journal: "delete",
        synchronous: 2,
        one_transaction: true,
        reuse_statement: false,
    },
    Rung {
        name: "prepared-statement",
        journal: "delete",
        synchronous: 2,
        one_transaction: true,
        reuse_statement: true,
    },
    Rung {
        name: "wal-normal",
        journal: "wal",
        synchronous: 1,
        one_transaction: true,
        reuse_statement: true,
    },
    Rung {
        name: "memory-off",
        journal: "memory",
        synchronous: 0,
        one_transaction: true,
        reuse_statement: true,
    },
];

/// Runs the scenario.
pub fn run(ctx: &Ctx) -> Result<Outcome, BenchError> {
    let rows = ctx.pick(ctx.args.rows, 100_000, 100_000).max(1);
    let sample = ctx.pick(ctx.args.sample, 2_000, 2_000).clamp(1, rows);
    let mut o = Outcome::new(
        "ladder",
        "report 000 (Android, 100k rows: 2000 s → 18.5 s → 5.85 s → 5.26 s → 4.04 s)",
        format!(
            "{} rows per rung, each on a fresh file; the autocommit rung on a sample of {}; median of {} run(s)",
            group_digits(rows as f64, 0),
            group_digits(sample as f64, 0),
            ctx.runs(3)
        ),
    );
    o.param("rows", rows);
    o.param("autocommit_sample", sample);
    o.column("speed-up", "speedup_vs_autocommit", 1);
    o.column("est. s for all", "estimated_seconds_for_all_rows", 2);
    let seed = ctx.args.seed;
    let runs = ctx.runs(3);
    o.param("runs", runs);
    o.rows = median_of(runs, |run| {
        let mut out = Vec::new();
        for rung in RUNGS {
            let n = if rung.one_transaction { rows } else { sample };
            ctx.progress(format!(
                "ladder: {} ({n} rows), run {}/{runs}",
                rung.name,
                run + 1
            ));
            out.push(plain_rung(ctx, rung, n, seed)?);
        }
        for profile in Profile::ALL {
            let name = match profile {
                Profile::Safe => "litelane-safe",
                Profile::Balanced => "litelane-balanced",
                Profile::Fast => "litelane-fast",
            };
            ctx.progress(format!("ladder: {name}, run {}/{runs}", run + 1));
            out.push(litelane_rung(ctx, name, profile, rows, seed)?);
        }
        Ok(out)
    })?;
    let first = o.rows.first().map_or(0.0, Row::rate);
    for r in &mut o.rows {
        if first > 0.0 {
            r.set("speedup_vs_autocommit", round(r.rate() / first, 2));
        }
        if r.rate() > 0.0 {
            r.set(
                "estimated_seconds_for_all_rows",
                round(rows as f64 / r.rate(), 3),
            );
        }
    }
    if sample < rows {
        o.notes.push(format!(
            "autocommit-per-row inserted {sample} of the {rows} rows; its rows/s and the estimate for all rows come from that sample"
        ));
    }
    Ok(o)
}

fn count_rows(path: &Path) -> u64 {
    Connection::open(path)
        .and_then(|c| c.query_row("SELECT count(*) FROM record", [], |r| r.get::<_, i64>(0)))
        .map_or(0, |n| n as u64)
}

fn plain_rung(ctx: &Ctx, rung: Rung, rows: u64, seed: u64) -> Result<Row, BenchError> {
    let dir = ctx.fresh_dir()?;
    let path = dir.path().join("ladder.db");
    let conn = Connection::open(&path)?;
    conn.query_row(
        &format!("PRAGMA journal_mode = {}", rung.journal),
        [],
        |_| Ok(()),
    )?;
    conn.execute_batch(&format!("PRAGMA synchronous = {}", rung.synchronous))?;
    conn.execute_batch(RECORD_SCHEMA)?;
    let data = records(seed, rows);
    let start = Instant::now();
    if rung.one_transaction {
        conn.execute_batch("BEGIN")?;
    }
    if rung.reuse_statement {
        let mut st = conn.prepare(RECORD_INSERT)?;
        for r in data {
            st.execute((r.id, &r.code, &r.name, r.amount, r.flag))?;
        }
    } else {
        for r in data {
            conn.execute(RECORD_INSERT, (r.id, &r.code, &r.name, r.amount, r.flag))?;
        }
    }
    if rung.one_transaction {
        conn.execute_batch("COMMIT")?;
    }
    let elapsed = start.elapsed();
    drop(conn);
    let stored = count_rows(&path);
    Ok(Row::new(rung.name, Unit::Rows, rows, elapsed)
        .errors(rows.abs_diff(stored))
        .with("journal_mode", rung.journal)
        .with("synchronous", rung.synchronous)
        .with("one_transaction", rung.one_transaction)
        .with("prepared_once", rung.reuse_statement))
}

fn litelane_rung(
    ctx: &Ctx,
    name: &str,
    profile: Profile,
    rows: u64,
    seed: u64,
) -> Result<Row, BenchError> {
    let dir = ctx.fresh_dir()?;
    let path = dir.path().join("ladder.db");
    let db = Database::open(&path, Options::with_profile(profile))?;
    db.write(|tx| Ok(tx.execute_batch(RECORD_SCHEMA)?))?;
    let start = Instant::now();
    let report = db
        .inserter("record", &["id", "code", "name", "amount", "flag"])?
        .insert(records(seed, rows))?;
    let elapsed = start.elapsed();
    drop(db);
    let stored = count_rows(&path);
    Ok(Row::new(name, Unit::Rows, report.rows, elapsed)
        .errors(rows.abs_diff(stored))
        .with("profile", profile.name())
        .with("journal_mode", profile.journal_mode())
        .with("synchronous", profile.synchronous())
        .with("rows_per_statement", report.rows_per_statement))
}
