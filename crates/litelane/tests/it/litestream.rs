//! litelane beside a real WAL replicator: the `litestream` binary replicates
//! the database to a file replica while litelane writes under load with
//! `Checkpoints::external()`; then the replica is restored and compared row
//! for row with the source.
//!
//! The binary is found on `PATH`, in `$LITESTREAM`, or in `~/go/bin`
//! (`go install github.com/benbjohnson/litestream/cmd/litestream@v0.3.13`,
//! which `scripts/test` runs). Without it the test says so and passes,
//! unless `LITELANE_REQUIRE_LITESTREAM=1` (set by `scripts/test` once it has
//! installed it), where a missing binary fails the test.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use litelane::{Checkpoints, Database, Options, Profile};

fn litestream() -> Option<PathBuf> {
    let mut candidates: Vec<PathBuf> = Vec::new();
    if let Some(p) = std::env::var_os("LITESTREAM") {
        candidates.push(p.into());
    }
    if let Some(path) = std::env::var_os("PATH") {
        candidates.extend(std::env::split_paths(&path).map(|d| d.join("litestream")));
    }
    if let Some(home) = std::env::var_os("HOME") {
        candidates.push(Path::new(&home).join("go/bin/litestream"));
    }
    candidates.into_iter().find(|p| p.is_file())
}

/// Kills the replicator however the test ends.
struct Replicator(Child);

impl Drop for Replicator {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn rows(path: &Path) -> Vec<(i64, String)> {
    let conn = rusqlite::Connection::open(path).unwrap();
    let mut st = conn
        .prepare("SELECT id, body FROM events ORDER BY id")
        .unwrap();
    st.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .collect::<rusqlite::Result<_>>()
        .unwrap()
}

#[test]
fn litestream_replicates_what_litelane_writes_and_restores_it_exactly() {
    let Some(bin) = litestream() else {
        assert!(
            std::env::var_os("LITELANE_REQUIRE_LITESTREAM").is_none(),
            "LITELANE_REQUIRE_LITESTREAM is set but no litestream binary was found"
        );
        eprintln!("litestream not installed: skipping (scripts/test installs it)");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let db_path = dir.path().join("app.db");
    let replica = dir.path().join("replica");
    let config = dir.path().join("litestream.yml");
    std::fs::write(
        &config,
        format!(
            "dbs:\n  - path: {}\n    replicas:\n      - type: file\n        path: {}\n        sync-interval: 100ms\n",
            db_path.display(),
            replica.display()
        ),
    )
    .unwrap();

    let opts = Options {
        profile: Profile::Safe,
        checkpoints: Checkpoints::external(),
        ..Options::default()
    };
    let db = Database::open(&db_path, opts).unwrap();
    db.write(|tx| {
        Ok(tx.execute_batch("CREATE TABLE events(id INTEGER PRIMARY KEY, body TEXT NOT NULL)")?)
    })
    .unwrap();

    let _replicator = Replicator(
        Command::new(&bin)
            .args(["replicate", "-config"])
            .arg(&config)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start litestream"),
    );

    // Four writers for about two seconds, single-row transactions (group
    // commit), while litestream copies the WAL and checkpoints.
    let stop = Arc::new(AtomicBool::new(false));
    let writers: Vec<_> = (0..4i64)
        .map(|w| {
            let (db, stop) = (db.clone(), Arc::clone(&stop));
            thread::spawn(move || {
                let mut n = 0i64;
                while !stop.load(Ordering::Relaxed) {
                    let id = w * 1_000_000 + n;
                    db.write(move |tx| {
                        Ok(tx.execute(
                            "INSERT INTO events(id, body) VALUES (?, printf('event %d %s', ?, hex(randomblob(40))))",
                            [id, id],
                        )?)
                    })
                    .unwrap();
                    n += 1;
                }
                n
            })
        })
        .collect();
    thread::sleep(Duration::from_secs(2));
    stop.store(true, Ordering::Relaxed);
    let written: i64 = writers.into_iter().map(|h| h.join().unwrap()).sum();
    assert!(written > 100, "only {written} rows written");
    let source = rows(&db_path);
    assert_eq!(source.len() as i64, written);

    // Wait until the replica has everything: restore until it matches.
    let restored = dir.path().join("restored.db");
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut last = Vec::new();
    while Instant::now() < deadline {
        let _ = std::fs::remove_file(&restored);
        let status = Command::new(&bin)
            .args(["restore", "-config"])
            .arg(&config)
            .arg("-o")
            .arg(&restored)
            .arg(&db_path)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .expect("run litestream restore");
        if status.success() {
            last = rows(&restored);
            if last == source {
                break;
            }
        }
        thread::sleep(Duration::from_millis(500));
    }
    assert_eq!(
        last.len(),
        source.len(),
        "the restored replica has {} of {} rows",
        last.len(),
        source.len()
    );
    assert!(last == source, "the restored rows differ from the source");
    let check: String = rusqlite::Connection::open(&restored)
        .unwrap()
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap();
    assert_eq!(check, "ok");
    // litelane never checkpointed: the replicator did.
    assert_eq!(db.metrics().checkpoints, 0);
}
