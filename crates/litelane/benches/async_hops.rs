//! Async hops per row vs one hop per transaction vs plain sync.
//!
//! `cargo bench -p litelane --bench async_hops` inserts the same 100,000 rows
//! four ways, each on a fresh database (profile `balanced`), and prints the
//! median of 3 runs:
//!
//! - `sync, one transaction`: `db.write` once, all rows inside;
//! - `async, one hop`: `db.write_async` once, all rows inside, awaited once;
//! - `sync, one transaction per row`: `db.write` per row (no hop);
//! - `async, one hop per row`: `db.write_async(..).await` per row — the shape
//!   the Windows report measured (58x slower inserts).
//!
//! The per-row variants run on 10,000 rows and are scaled; the table says so.

use std::time::Instant;

use litelane::{Database, Options};

const ROWS: i64 = 100_000;
const PER_ROW_SAMPLE: i64 = 10_000;

fn fresh() -> (tempfile::TempDir, Database) {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path().join("a.db"), Options::default()).unwrap();
    db.write(|tx| {
        Ok(tx.execute_batch(
            "CREATE TABLE trips(id INTEGER PRIMARY KEY, route INTEGER, headsign TEXT)",
        )?)
    })
    .unwrap();
    (dir, db)
}

fn insert_all(tx: &litelane::Tx<'_>, rows: i64) -> litelane::Result<()> {
    let mut st = tx.prepare_cached("INSERT INTO trips VALUES (?, ?, 'Union Station via King')")?;
    for i in 0..rows {
        st.execute((i, i % 97))?;
    }
    Ok(())
}

fn time(rows: i64, f: impl FnOnce(&Database)) -> f64 {
    let (_dir, db) = fresh();
    let start = Instant::now();
    f(&db);
    let secs = start.elapsed().as_secs_f64();
    let n: i64 = db
        .read(|c| Ok(c.query_row("SELECT count(*) FROM trips", [], |r| r.get(0))?))
        .unwrap();
    assert_eq!(n, rows);
    rows as f64 / secs
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

/// A named way of inserting `rows` rows.
type Variant<'a> = (&'static str, i64, Box<dyn Fn(&Database) + 'a>);

fn main() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let variants: Vec<Variant> = vec![
        (
            "sync, one transaction",
            ROWS,
            Box::new(|db| db.write(|tx| insert_all(tx, ROWS)).unwrap()),
        ),
        (
            "async, one hop",
            ROWS,
            Box::new(|db| {
                rt.block_on(db.write_async(|tx| insert_all(tx, ROWS)))
                    .unwrap()
            }),
        ),
        (
            "sync, one transaction per row",
            PER_ROW_SAMPLE,
            Box::new(|db| {
                for i in 0..PER_ROW_SAMPLE {
                    db.write(|tx| {
                        Ok(tx
                            .prepare_cached("INSERT INTO trips VALUES (?, 1, 'x')")?
                            .execute([i])
                            .map(|_| ())?)
                    })
                    .unwrap();
                }
            }),
        ),
        (
            "async, one hop per row",
            PER_ROW_SAMPLE,
            Box::new(|db| {
                rt.block_on(async {
                    for i in 0..PER_ROW_SAMPLE {
                        db.write_async(move |tx| {
                            Ok(tx
                                .prepare_cached("INSERT INTO trips VALUES (?, 1, 'x')")?
                                .execute([i])
                                .map(|_| ())?)
                        })
                        .await
                        .unwrap();
                    }
                })
            }),
        ),
    ];
    println!(
        "{ROWS} rows, profile balanced, median of 3 (per-row variants on {PER_ROW_SAMPLE} rows)"
    );
    println!("{:<32} {:>12} {:>12}", "variant", "rows/s", "vs best");
    let results: Vec<(&str, f64)> = variants
        .iter()
        .map(|(name, rows, f)| (*name, median((0..3).map(|_| time(*rows, f)).collect())))
        .collect();
    let best = results.iter().map(|r| r.1).fold(0.0, f64::max);
    for (name, r) in results {
        println!("{name:<32} {r:>12.0} {:>11.1}x slower", best / r);
    }
}
