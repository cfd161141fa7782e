//! How many rows to bind per multi-row INSERT.
//!
//! `cargo bench -p litelane --bench rows_per_statement` inserts the same rows
//! with different rows-per-statement settings, each on a fresh database
//! (profile `fast`, so the disk does not dominate), and prints the median
//! rows/s of 5 runs and the ratio to one row per statement. The default,
//! `TARGET_PARAMS_PER_STATEMENT`, is chosen from this table.

use std::time::Instant;

use litelane::{BulkRow, Database, Options, Profile, ValueRef};

struct Row {
    cols: usize,
    i: i64,
    text: [u8; 8],
}

impl BulkRow for Row {
    fn len(&self) -> usize {
        self.cols
    }
    fn value(&self, c: usize) -> ValueRef<'_> {
        match c % 3 {
            0 => ValueRef::Integer(self.i.wrapping_mul(c as i64 + 1)),
            1 => ValueRef::Text(&self.text),
            _ => ValueRef::Real(self.i as f64 * 0.5),
        }
    }
}

fn run(cols: usize, rows: i64, per_stmt: usize) -> f64 {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(
        dir.path().join("b.db"),
        Options::with_profile(Profile::Fast),
    )
    .unwrap();
    let names: Vec<String> = (0..cols).map(|c| format!("c{c}")).collect();
    let ddl = format!("CREATE TABLE t({})", names.join(","));
    db.write(|tx| Ok(tx.execute_batch(&ddl)?)).unwrap();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let start = Instant::now();
    db.inserter("t", &refs)
        .unwrap()
        .rows_per_statement(per_stmt)
        .unwrap()
        .insert((0..rows).map(|i| Row {
            cols,
            i,
            text: *b"abcdefgh",
        }))
        .unwrap();
    rows as f64 / start.elapsed().as_secs_f64()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn main() {
    for (cols, rows) in [(4usize, 400_000i64), (20, 100_000)] {
        println!("\n{cols} columns, {rows} rows, profile fast, median of 5");
        println!(
            "{:>14} {:>8} {:>12} {:>8}",
            "rows/stmt", "params", "rows/s", "vs 1"
        );
        let mut base = 0.0;
        for per in [1usize, 4, 16, 32, 64, 128, 256, 1024] {
            let per = per.min(32766 / cols);
            let r = median((0..5).map(|_| run(cols, rows, per)).collect());
            if per == 1 {
                base = r;
            }
            println!("{per:>14} {:>8} {r:>12.0} {:>7.2}x", per * cols, r / base);
        }
    }
}
