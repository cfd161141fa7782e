//! Smoke tests of `litelane-bench`: every scenario at a tiny size, through the
//! real binary, checked through its `--json` output. No timing is asserted:
//! speed is shown by the benchmarks' ratios, never tested.

use std::path::Path;
use std::process::Command;

use serde_json::Value;

/// Runs `litelane-bench ARGS --dir TMP` and returns its output, which must
/// be a success.
fn run_ok(tmp: &Path, args: &[&str]) -> std::process::Output {
    let out = Command::new(env!("CARGO_BIN_EXE_litelane-bench"))
        .args(args)
        .arg("--dir")
        .arg(tmp)
        .output()
        .expect("running litelane-bench");
    assert!(
        out.status.success(),
        "litelane-bench {args:?} failed: {}\n{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    out
}

/// Runs `litelane-bench ARGS --json --quiet --dir TMP` and parses stdout.
fn bench(tmp: &Path, args: &[&str]) -> Value {
    let args = [args, &["--json", "--quiet"]].concat();
    let out = run_ok(tmp, &args);
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("bad JSON ({e}): {}", String::from_utf8_lossy(&out.stdout)))
}

fn results(v: &Value) -> &Vec<Value> {
    v["results"].as_array().expect("results array")
}

fn row<'a>(v: &'a Value, name: &str) -> &'a Value {
    results(v)
        .iter()
        .find(|r| r["name"] == name)
        .unwrap_or_else(|| panic!("no row {name:?} in {v:#}"))
}

/// The fields every object of `--json` has.
fn check_envelope(v: &Value, scenario: &str) {
    assert_eq!(v["scenario"], scenario);
    assert!(v["machine"]["cores"].as_u64().unwrap() >= 1);
    assert!(v["machine"]["os"].is_string());
    assert!(v["sqlite_version"].as_str().unwrap().starts_with('3'));
    for r in results(v) {
        assert!(r["name"].is_string(), "{r}");
        assert!(r["seconds"].is_number(), "{r}");
        assert!(r["errors"].is_u64(), "{r}");
        assert!(
            r["rows_per_sec"].is_number() || r["ops_per_sec"].is_number(),
            "{r}"
        );
    }
}

/// Every row whose name starts with `litelane` has no errors.
fn litelane_rows_clean(v: &Value) {
    let mut seen = 0;
    for r in results(v) {
        if r["name"].as_str().unwrap().starts_with("litelane") {
            assert_eq!(r["errors"], 0, "{r}");
            seen += 1;
        }
    }
    assert!(seen > 0, "no litelane rows in {v:#}");
}

#[test]
fn insert_reports_litelane_raw_ffi_and_their_ratio() {
    let tmp = tempfile::tempdir().unwrap();
    let v = bench(
        tmp.path(),
        &[
            "insert",
            "--rows",
            "3000",
            "--runs",
            "1",
            "--profile",
            "fast",
        ],
    );
    check_envelope(&v, "insert");
    for name in ["litelane", "raw-ffi", "litelane-1-row"] {
        let r = row(&v, name);
        assert_eq!(r["rows"], 3000, "{r}");
        assert_eq!(r["rows_stored"], 3000, "{r}");
        assert_eq!(r["errors"], 0, "{r}");
        assert!(r["ratio_vs_raw_ffi"].as_f64().unwrap() > 0.0, "{r}");
    }
    assert_eq!(row(&v, "raw-ffi")["ratio_vs_raw_ffi"], 1.0);
    assert!(row(&v, "litelane")["rows_per_statement"].as_u64().unwrap() > 1);
    // Nothing left behind in --dir.
    assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 0);
}

/// `--processes`: 3 worker processes × 2 threads, beside connection-per-thread
/// processes; every row stored, litelane without errors.
#[test]
fn threads_with_processes_stores_every_row() {
    let tmp = tempfile::tempdir().unwrap();
    let v = bench(
        tmp.path(),
        &[
            "threads",
            "--processes",
            "3",
            "--threads",
            "2",
            "--rows-per-thread",
            "30",
            "--single-rows",
            "5",
            "--profile",
            "balanced",
        ],
    );
    check_envelope(&v, "threads");
    assert_eq!(v["params"]["processes"], 3, "{v:#}");
    for name in [
        "processes-connection-per-thread",
        "processes-connection-per-thread-queued",
        "processes-litelane",
    ] {
        let r = row(&v, name);
        assert_eq!(r["rows"], 180, "{r}");
        assert_eq!(r["rows_stored"], 180, "{r}");
        assert_eq!(r["processes"], 3, "{r}");
        assert_eq!(r["failed_inserts"], 0, "{r}");
        assert!(r["p99_ms"].is_number(), "{r}");
    }
    assert_eq!(row(&v, "processes-litelane")["errors"], 0);
    // Inside the queue's turns the connections never meet each other's lock.
    assert_eq!(
        row(&v, "processes-connection-per-thread-queued")["busy_errors"],
        0
    );
    // The hidden worker command refuses a bad mode with a clear message.
    let out = Command::new(env!("CARGO_BIN_EXE_litelane-bench"))
        .args(["bench-worker", "--db", "x.db", "--mode", "bogus"])
        .args(["--threads", "1", "--rows", "1", "--profile", "safe"])
        .args(["--seed", "1", "--index", "0"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("bogus"));
}

#[test]
fn threads_litelane_stores_every_row_without_errors() {
    let tmp = tempfile::tempdir().unwrap();
    let v = bench(
        tmp.path(),
        &[
            "threads",
            "--threads",
            "3",
            "--rows-per-thread",
            "40",
            "--single-rows",
            "10",
            "--profile",
            "balanced",
        ],
    );
    check_envelope(&v, "threads");
    for name in ["1-thread-defaults", "1-thread-wal", "1-thread-wal-normal"] {
        assert_eq!(row(&v, name)["rows"], 10);
        assert_eq!(row(&v, name)["rows_stored"], 10);
    }
    for name in [
        "connection-per-thread",
        "connection-per-thread-no-busy-timeout",
        "litelane",
        "litelane-no-process-queue",
        "litelane-no-group-commit",
    ] {
        let r = row(&v, name);
        assert_eq!(r["rows"], 120, "{r}");
        assert_eq!(r["rows_stored"], 120, "{r}");
        assert!(r["p99_ms"].is_number(), "{r}");
    }
    litelane_rows_clean(&v);
    assert!(row(&v, "litelane")["mean_group_size"].as_f64().unwrap() >= 1.0);
    assert_eq!(row(&v, "litelane-no-group-commit")["mean_group_size"], 1.0);
}

#[test]
fn wal_counts_writes_and_reads_of_every_variant() {
    let tmp = tempfile::tempdir().unwrap();
    let v = bench(
        tmp.path(),
        &[
            "wal",
            "--writers",
            "2",
            "--readers",
            "3",
            "--writes",
            "15",
            "--reads",
            "20",
        ],
    );
    check_envelope(&v, "wal");
    for name in ["rollback-journal", "wal", "litelane"] {
        let r = row(&v, name);
        assert_eq!(r["ops"], 2 * 15 + 3 * 20, "{r}");
        assert_eq!(r["writes"], 30, "{r}");
        assert_eq!(r["reads"], 60, "{r}");
        assert_eq!(r["reads_found"], 60, "{r}");
        assert!(r["writes_per_sec"].as_f64().unwrap() > 0.0, "{r}");
    }
    litelane_rows_clean(&v);
}

#[test]
fn contention_reports_latency_and_stalls() {
    let tmp = tempfile::tempdir().unwrap();
    let v = bench(
        tmp.path(),
        &["contention", "--threads", "3", "--ops", "150"],
    );
    check_envelope(&v, "contention");
    for name in ["shared-handle-mutex", "busy-retry", "litelane"] {
        let r = row(&v, name);
        assert_eq!(r["ops"], 150, "{r}");
        for k in ["p50_ms", "p99_ms", "max_ms", "stalls_over_16ms"] {
            assert!(r[k].is_number(), "{k} in {r}");
        }
        assert!(r["p50_ms"].as_f64() <= r["max_ms"].as_f64());
    }
    litelane_rows_clean(&v);
}

#[test]
fn import_loads_and_reads_back_every_row() {
    let tmp = tempfile::tempdir().unwrap();
    let v = bench(tmp.path(), &["import", "--csv-rows", "300"]);
    check_envelope(&v, "import");
    for name in [
        "litelane-import",
        "bulk-insert",
        "insert-select",
        "insert-async-per-batch",
        "insert-async-per-row",
        "read-sync",
        "read-async-per-batch",
        "read-async-per-row",
    ] {
        let r = row(&v, name);
        assert_eq!(r["rows"], 300, "{r}");
        assert_eq!(r["errors"], 0, "{r}");
    }
    assert_eq!(row(&v, "read-async-per-row")["hops"], 300);
    assert_eq!(row(&v, "read-async-per-batch")["hops"], 1);
    if Path::new("/usr/bin/sqlite3").exists() {
        assert_eq!(row(&v, "sqlite3-shell-import")["rows"], 300);
    }
}

#[test]
fn ladder_has_every_rung_and_speedups() {
    let tmp = tempfile::tempdir().unwrap();
    let v = bench(
        tmp.path(),
        &["ladder", "--rows", "400", "--sample", "20", "--runs", "1"],
    );
    check_envelope(&v, "ladder");
    assert_eq!(row(&v, "autocommit-per-row")["rows"], 20);
    assert_eq!(row(&v, "autocommit-per-row")["speedup_vs_autocommit"], 1.0);
    for name in [
        "one-transaction",
        "prepared-statement",
        "wal-normal",
        "memory-off",
        "litelane-safe",
        "litelane-balanced",
        "litelane-fast",
    ] {
        let r = row(&v, name);
        assert_eq!(r["rows"], 400, "{r}");
        assert!(r["speedup_vs_autocommit"].as_f64().unwrap() > 0.0, "{r}");
    }
    litelane_rows_clean(&v);
}

#[test]
fn all_writes_a_report_with_one_svg_per_scenario() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let dbs = tmp.path().join("dbs");
    let v = bench(
        &dbs,
        &[
            "all",
            "--runs",
            "1",
            "--rows",
            "300",
            "--threads",
            "2",
            "--rows-per-thread",
            "10",
            "--single-rows",
            "5",
            "--writers",
            "2",
            "--readers",
            "2",
            "--writes",
            "5",
            "--reads",
            "5",
            "--ops",
            "40",
            "--csv-rows",
            "50",
            "--sample",
            "5",
            "--report",
            out.to_str().unwrap(),
        ],
    );
    assert_eq!(v["scenario"], "all");
    let scenarios: Vec<&str> = v["scenarios"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["scenario"].as_str().unwrap())
        .collect();
    assert_eq!(
        scenarios,
        ["insert", "threads", "wal", "contention", "import", "ladder"]
    );
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    for s in &scenarios {
        assert!(md.contains(&format!("## `{s}`")), "{md}");
        assert!(md.contains(&format!("({s}.svg)")), "{md}");
        let svg = std::fs::read_to_string(out.join(format!("{s}.svg"))).unwrap();
        let doc = roxmltree::Document::parse(&svg)
            .unwrap_or_else(|e| panic!("{s}.svg is not well-formed ({e})"));
        assert_eq!(doc.root_element().tag_name().name(), "svg", "{s}.svg");
        let texts: Vec<&str> = doc
            .descendants()
            .filter(|n| n.has_tag_name("text"))
            .filter_map(|n| n.text())
            .map(str::trim)
            .collect();
        assert!(
            texts.contains(&format!("litelane-bench {s}").as_str()),
            "{s}.svg has no title: {texts:?}"
        );
        // Every variant of the scenario is named on its chart.
        let scenario = v["scenarios"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["scenario"] == *s)
            .unwrap();
        for r in scenario["results"].as_array().unwrap() {
            let name = r["name"].as_str().unwrap();
            assert!(
                texts.iter().any(|t| t.starts_with(name)),
                "{s}.svg does not name {name}: {texts:?}"
            );
        }
    }
    // The contention chart has a latency curve per variant.
    let svg = std::fs::read_to_string(out.join("contention.svg")).unwrap();
    let doc = roxmltree::Document::parse(&svg).unwrap();
    let curves = doc
        .descendants()
        .filter(|n| n.has_tag_name("polyline"))
        .filter(|n| n.attribute("points").unwrap_or("").split(' ').count() > 10)
        .count();
    let variants = v["scenarios"][3]["results"].as_array().unwrap().len();
    assert_eq!(v["scenarios"][3]["scenario"], "contention");
    assert_eq!(curves, variants, "{svg}");
    assert_eq!(std::fs::read_dir(&dbs).unwrap().count(), 0);
}

#[test]
fn insert_says_what_it_will_do_and_how_long_and_writes_for_users() {
    let tmp = tempfile::tempdir().unwrap();
    let out = run_ok(
        tmp.path(),
        &["insert", "--rows", "2000", "--runs", "2", "--json"],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("4 variants x 2 run(s), each inserting 2,000 rows"),
        "{err}"
    );
    assert!(err.contains("the first run took"), "{err}");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let text = v.to_string();
    assert!(
        !text.contains("brief"),
        "a text for users speaks of a brief: {text}"
    );
    // -q is --quiet: no progress lines.
    let out = run_ok(
        tmp.path(),
        &["insert", "--rows", "500", "--runs", "1", "-q", "--json"],
    );
    assert_eq!(String::from_utf8_lossy(&out.stderr), "");
    // The default is stated in the help, and is not 5,000,000.
    let help = Command::new(env!("CARGO_BIN_EXE_litelane-bench"))
        .arg("--help")
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    assert!(help.contains("default 1,000,000"), "{help}");
    assert!(!help.contains("5,000,000"), "{help}");
}
