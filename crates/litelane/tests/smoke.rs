use litelane::{Database, Options, Value};

#[test]
fn file_database_writes_reads_and_bulk_inserts() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path().join("s.db"), Options::default()).unwrap();
    db.write(|tx| Ok(tx.execute_batch("CREATE TABLE t(a INTEGER, b TEXT)")?))
        .unwrap();
    let rows = (0..10_000i64).map(|i| vec![Value::Integer(i), Value::Text(format!("r{i}"))]);
    let rep = db.inserter("t", &["a", "b"]).unwrap().insert(rows).unwrap();
    assert_eq!(rep.rows, 10_000);
    let n: i64 = db
        .read(|c| Ok(c.query_row("SELECT count(*) FROM t", [], |r| r.get(0))?))
        .unwrap();
    assert_eq!(n, 10_000);
}
