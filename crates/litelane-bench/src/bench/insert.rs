//! `bench insert`: the "one billion rows" table
//! `user(id INTEGER PRIMARY KEY, area CHAR(6), age INTEGER NOT NULL, active INTEGER NOT NULL)`
//! loaded by litelane's bulk inserter, beside the floor: a raw C-API loop
//! (`bench::raw::RawConnection`) with the same pragmas, one transaction,
//! one prepared single-row `INSERT`, bind/step/reset per row.
//!
//! Variants: `litelane` (multi-row statements), its floor `raw-ffi-multi`
//! (the same multi-row statements bound and stepped by a C loop), `raw-ffi`
//! (a C loop of one row per statement, the classic hand-written insert) and
//! `litelane-1-row` (the bulk inserter with one row per statement, to show
//! what the multi-row path buys). Each run of each variant is on a fresh file;
//! only the insert itself (first `BEGIN` to `COMMIT`) is timed.

use std::path::Path;
use std::time::Instant;

use super::raw::RawConnection;
use litelane::{Database, Options, Profile};

use super::data::{users, USER_COLUMNS, USER_SCHEMA};
use super::report::{Outcome, Row, Unit};
use super::{median_of, Ctx};
use crate::error::BenchError;

/// Rows each variant inserts per run when `--rows` is not given (outside
/// `bench all`, which uses 2,000,000).
pub const DEFAULT_ROWS: u64 = 1_000_000;

/// Variants each run times (litelane, raw-ffi-multi, raw-ffi,
/// litelane-1-row).
const VARIANTS: usize = 4;

/// Runs the scenario.
pub fn run(ctx: &Ctx) -> Result<Outcome, BenchError> {
    let rows = ctx.pick(ctx.args.rows, DEFAULT_ROWS, 2_000_000);
    let runs = ctx.runs(3);
    let profiles: Vec<Profile> = match ctx.args.profile.as_deref() {
        Some("all") => Profile::ALL.to_vec(),
        None if ctx.in_all => Profile::ALL.to_vec(),
        _ => vec![ctx.profile(Profile::Balanced)?],
    };
    let names: Vec<&str> = profiles.iter().map(|p| p.name()).collect();
    let mut o = Outcome::new(
        "insert",
        "the \"one billion rows\" bulk insert: litelane's inserter beside C-API loops",
        format!(
            "{} rows into user(id, area, age, active), profile {}, median of {runs} run(s)",
            super::report::group_digits(rows as f64, 0),
            names.join(" / ")
        ),
    );
    o.param("rows", rows);
    o.param("runs", runs);
    o.param("profiles", names.clone());
    o.column("profile", "profile", 0);
    o.column("× raw-multi", "ratio_vs_raw_ffi_multi", 3);
    o.column("× raw-ffi", "ratio_vs_raw_ffi", 3);
    o.column("rows/stmt", "rows_per_statement", 0);
    let total_runs = runs * profiles.len();
    ctx.progress(format!(
        "insert: {VARIANTS} variants x {total_runs} run(s), each inserting {} rows into a fresh \
         database in {} (--rows N and --runs N make it shorter); the time it will take is \
         printed after the first run",
        super::report::group_digits(rows as f64, 0),
        ctx.base.display()
    ));
    let started = Instant::now();
    let mut done_runs = 0usize;
    for profile in profiles {
        let seed = ctx.args.seed;
        let mut measured = median_of(runs, |run| {
            if done_runs == 1 {
                let per = started.elapsed().as_secs_f64();
                ctx.progress(format!(
                    "insert: the first run took {per:.1} s; about {:.0} s more",
                    per * (total_runs - 1) as f64
                ));
            }
            done_runs += 1;
            ctx.progress(format!("insert {profile}: run {}/{runs}", run + 1));
            // Alternate the order so neither variant always runs on a warmer cache.
            let mut out = Vec::new();
            let multi = per_statement(USER_COLUMNS.len());
            if run % 2 == 0 {
                out.push(litelane_variant(ctx, profile, rows, seed, None)?);
                out.push(raw_ffi(ctx, profile, rows, seed, multi)?);
            } else {
                let raw = raw_ffi(ctx, profile, rows, seed, multi)?;
                out.push(litelane_variant(ctx, profile, rows, seed, None)?);
                out.push(raw);
            }
            out.push(raw_ffi(ctx, profile, rows, seed, 1)?);
            out.push(litelane_variant(ctx, profile, rows, seed, Some(1))?);
            Ok(out)
        })?;
        let rate_of = |name: &str| measured.iter().find(|r| r.name == name).map(Row::rate);
        let floor = rate_of("raw-ffi").unwrap_or(0.0);
        let multi = rate_of("raw-ffi-multi").unwrap_or(0.0);
        let lit = rate_of("litelane");
        let one = rate_of("litelane-1-row");
        for r in &mut measured {
            let rate = r.rate();
            for (key, base) in [
                ("ratio_vs_raw_ffi", floor),
                ("ratio_vs_raw_ffi_multi", multi),
            ] {
                if base > 0.0 {
                    r.set(key, super::report::round(rate / base, 4));
                }
            }
            r.set("profile", profile.name());
        }
        if let (Some(lit), Some(one)) = (lit, one) {
            let tiny = f64::MIN_POSITIVE;
            o.notes.push(format!(
                "{profile}: litelane is {:.3}× raw-ffi-multi, the same multi-row statements from a C loop (target ≥ 1.0), \
                 and {:.3}× raw-ffi (one row per statement); multi-row statements are {:.2}× one row per statement",
                lit / multi.max(tiny),
                lit / floor.max(tiny),
                lit / one.max(tiny)
            ));
        }
        o.rows.extend(measured);
    }
    Ok(o)
}

/// Rows per statement of litelane's bulk inserter for a table of `columns`
/// columns, which the `raw-ffi-multi` floor uses too.
fn per_statement(columns: usize) -> usize {
    (litelane::TARGET_PARAMS_PER_STATEMENT / columns).max(1)
}

/// Counts the rows of `user` in the file at `path` (0 if unreadable).
fn count_rows(path: &Path) -> u64 {
    rusqlite::Connection::open(path)
        .and_then(|c| c.query_row("SELECT count(*) FROM user", [], |r| r.get::<_, i64>(0)))
        .map_or(0, |n| n as u64)
}

/// The engine's bulk inserter; `rows_per_statement = Some(1)` for the
/// one-row-per-statement variant.
fn litelane_variant(
    ctx: &Ctx,
    profile: Profile,
    rows: u64,
    seed: u64,
    rows_per_statement: Option<usize>,
) -> Result<Row, BenchError> {
    let dir = ctx.fresh_dir()?;
    let path = dir.path().join("insert.db");
    let db = Database::open(&path, Options::with_profile(profile))?;
    db.write(|tx| Ok(tx.execute_batch(USER_SCHEMA)?))?;
    let start = Instant::now();
    let mut inserter = db.inserter("user", &USER_COLUMNS)?;
    if let Some(n) = rows_per_statement {
        inserter = inserter.rows_per_statement(n)?;
    }
    let report = inserter.insert(users(seed, rows))?;
    let elapsed = start.elapsed();
    drop(db);
    let stored = count_rows(&path);
    let name = if rows_per_statement == Some(1) {
        "litelane-1-row"
    } else {
        "litelane"
    };
    Ok(Row::new(name, Unit::Rows, report.rows, elapsed)
        .errors(rows.abs_diff(stored))
        .with("rows_per_statement", report.rows_per_statement)
        .with("statements", report.statements)
        .with("rows_stored", stored))
}

/// The pragmas litelane's writer connection runs for `profile` (see
/// `crates/litelane/src/connection.rs`), taken from the same `Options`.
pub fn engine_pragmas(profile: Profile) -> Vec<String> {
    let o = Options::with_profile(profile);
    let mut p = vec![
        format!("PRAGMA cache_size = -{}", o.cache_size_kib),
        "PRAGMA temp_store = MEMORY".to_string(),
        "PRAGMA foreign_keys = ON".to_string(),
        "PRAGMA trusted_schema = OFF".to_string(),
        format!("PRAGMA journal_mode = {}", profile.journal_mode()),
        format!("PRAGMA synchronous = {}", profile.synchronous()),
        format!("PRAGMA journal_size_limit = {}", o.journal_size_limit),
    ];
    if profile.journal_mode() == "wal" && o.checkpoints.background {
        // litelane checkpoints on its own thread, never inside a commit.
        p.push("PRAGMA wal_autocheckpoint = 0".to_string());
    }
    p
}

/// The floors: what a careful C programmer writes by hand. One transaction,
/// one prepared `INSERT` of `per_stmt` rows (1: `raw-ffi`; litelane's own
/// rows per statement: `raw-ffi-multi`), bind/step/reset per statement, and
/// the rows that are left over in one last statement of their own.
fn raw_ffi(
    ctx: &Ctx,
    profile: Profile,
    rows: u64,
    seed: u64,
    per_stmt: usize,
) -> Result<Row, BenchError> {
    let dir = ctx.fresh_dir()?;
    let path = dir.path().join("insert.db");
    let conn = RawConnection::open(&path)?;
    for p in engine_pragmas(profile) {
        conn.exec(&p)?;
    }
    conn.exec(USER_SCHEMA)?;
    let prefix = "INSERT INTO user(id, area, age, active) VALUES ";
    let start = Instant::now();
    conn.exec("BEGIN")?;
    let mut n = 0u64;
    let mut statements = 0u64;
    {
        let mut full = conn.prepare(&litelane::insert_sql(prefix, 4, per_stmt))?;
        let mut data = users(seed, rows);
        let mut buffer = Vec::with_capacity(per_stmt);
        loop {
            buffer.clear();
            buffer.extend(data.by_ref().take(per_stmt));
            if buffer.is_empty() {
                break;
            }
            let mut part;
            let st = if buffer.len() == per_stmt {
                &mut full
            } else {
                part = conn.prepare(&litelane::insert_sql(prefix, 4, buffer.len()))?;
                &mut part
            };
            let mut i = 1;
            for u in &buffer {
                st.bind_int(i, u.id)?;
                st.bind_text(i + 1, u.area_str())?;
                st.bind_int(i + 2, u.age)?;
                st.bind_int(i + 3, u.active)?;
                i += 4;
            }
            st.execute()?;
            n += buffer.len() as u64;
            statements += 1;
        }
    }
    conn.exec("COMMIT")?;
    let elapsed = start.elapsed();
    drop(conn);
    let stored = count_rows(&path);
    let name = if per_stmt == 1 {
        "raw-ffi"
    } else {
        "raw-ffi-multi"
    };
    Ok(Row::new(name, Unit::Rows, n, elapsed)
        .errors(rows.abs_diff(stored))
        .with("rows_per_statement", per_stmt)
        .with("statements", statements)
        .with("rows_stored", stored))
}
