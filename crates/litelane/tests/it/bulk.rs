//! Bulk insert: typed values, hostile names, batches, progress, channels.

use crate::common;

use std::sync::mpsc;
use std::thread;

use common::{exec, query_i64, temp_db};
use litelane::{BulkRow, Options, Value, ValueRef};

#[test]
fn every_value_type_round_trips() {
    let (_dir, db) = temp_db(Options::default());
    exec(&db, "CREATE TABLE t(n, i, r, s, b)");
    let row = vec![
        Value::Null,
        Value::Integer(-42),
        Value::Real(2.5),
        Value::Text("héllo, \"world\"".into()),
        Value::Blob(vec![0, 1, 255]),
    ];
    db.inserter("t", &["n", "i", "r", "s", "b"])
        .unwrap()
        .insert([row.clone()])
        .unwrap();
    let got: Vec<Value> = db
        .read(|c| {
            Ok(c.query_row("SELECT n, i, r, s, b FROM t", [], |r| {
                (0..5).map(|i| r.get(i)).collect()
            })?)
        })
        .unwrap();
    assert_eq!(got, row);
    assert_eq!(
        query_i64(
            &db,
            "SELECT count(*) FROM t WHERE typeof(i) = 'integer' AND typeof(r) = 'real'"
        ),
        1
    );
}

#[test]
fn hostile_table_and_column_names_are_only_ever_names() {
    let (_dir, db) = temp_db(Options::default());
    let table = "x\"; DROP TABLE victim; --";
    let col = "\"); DELETE FROM victim; --";
    exec(
        &db,
        "CREATE TABLE victim(v); INSERT INTO victim VALUES (1);",
    );
    db.write(|tx| {
        Ok(tx.execute_batch(&format!(
            "CREATE TABLE {}({})",
            litelane::quote_ident(table),
            litelane::quote_ident(col)
        ))?)
    })
    .unwrap();
    db.inserter(table, &[col])
        .unwrap()
        .insert([[Value::Integer(5)]])
        .unwrap();
    assert_eq!(query_i64(&db, "SELECT count(*) FROM victim"), 1);
    let sql = format!(
        "SELECT {} FROM {}",
        litelane::quote_ident(col),
        litelane::quote_ident(table)
    );
    assert_eq!(query_i64(&db, &sql), 5);
}

struct Pair {
    id: i64,
    name: [u8; 4],
}

impl BulkRow for Pair {
    fn len(&self) -> usize {
        2
    }
    fn value(&self, i: usize) -> ValueRef<'_> {
        match i {
            0 => ValueRef::Integer(self.id),
            _ => ValueRef::Text(&self.name),
        }
    }
}

#[test]
fn rows_from_a_channel_fed_by_another_thread_all_land_with_progress_reported() {
    let (_dir, db) = temp_db(Options::default());
    exec(&db, "CREATE TABLE t(id INTEGER PRIMARY KEY, name TEXT)");
    let (tx, rx) = mpsc::sync_channel(64);
    let producer = thread::spawn(move || {
        for id in 1..=25_000 {
            tx.send(Pair { id, name: *b"abcd" }).unwrap();
        }
    });
    let mut seen = Vec::new();
    let report = db
        .inserter("t", &["id", "name"])
        .unwrap()
        .commit_every(10_000)
        .on_progress(|n| seen.push(n))
        .insert(rx)
        .unwrap();
    producer.join().unwrap();
    assert_eq!(report.rows, 25_000);
    assert_eq!(report.commits, 3);
    assert_eq!(query_i64(&db, "SELECT count(*) FROM t"), 25_000);
    assert_eq!(query_i64(&db, "SELECT sum(id) FROM t"), 25_000 * 25_001 / 2);
    assert_eq!(seen.last(), Some(&25_000));
    assert!(
        seen.windows(2).all(|w| w[0] < w[1]),
        "progress only goes up"
    );
}

#[test]
fn statements_hold_many_rows_but_never_exceed_the_parameter_limit() {
    let (_dir, db) = temp_db(Options::default());
    exec(&db, "CREATE TABLE t(a, b, c)");
    let limit = db.max_parameters().unwrap();
    let rows = (0..10_000).map(|i| [Value::Integer(i), Value::Integer(i), Value::Integer(i)]);
    let report = db
        .inserter("t", &["a", "b", "c"])
        .unwrap()
        .insert(rows)
        .unwrap();
    assert!(report.rows_per_statement > 1);
    assert!(report.rows_per_statement * 3 <= limit);
    assert_eq!(
        report.statements,
        10_000u64.div_ceil(report.rows_per_statement as u64)
    );
    // Asking for more rows per statement than the limit allows is clamped.
    let wide = db
        .inserter("t", &["a", "b", "c"])
        .unwrap()
        .rows_per_statement(1_000_000)
        .unwrap();
    let r = wide
        .insert((0..100).map(|i| [Value::Integer(i), Value::Null, Value::Null]))
        .unwrap();
    assert!(r.rows_per_statement * 3 <= limit);
    assert_eq!(query_i64(&db, "SELECT count(*) FROM t"), 10_100);
}
