//! Kill -9 a process in the middle of writing: under `safe` and `balanced`
//! every write that was acknowledged is there afterwards and the file passes
//! `PRAGMA integrity_check`.
//!
//! The writing process is this test binary itself, re-run with the ignored
//! test `crash_child_writes_until_killed` selected and the database path and
//! profile in environment variables.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::thread;

use litelane::{Database, Options, Profile};

const DB_ENV: &str = "LITELANE_CRASH_DB";
const PROFILE_ENV: &str = "LITELANE_CRASH_PROFILE";

/// The child: writes small transactions from 4 threads forever, printing
/// the id of each one after `write` returned Ok.
#[test]
#[ignore = "run only as the child of the crash tests"]
fn crash_child_writes_until_killed() {
    let path = std::env::var(DB_ENV).expect("run by the crash tests");
    let profile: Profile = std::env::var(PROFILE_ENV).unwrap().parse().unwrap();
    let db = Database::open(&path, Options::with_profile(profile)).unwrap();
    db.write(|tx| {
        Ok(tx.execute_batch("CREATE TABLE IF NOT EXISTS acked(id INTEGER PRIMARY KEY, pad BLOB)")?)
    })
    .unwrap();
    println!("READY");
    let handles: Vec<_> = (0..4i64)
        .map(|t| {
            let db = db.clone();
            thread::spawn(move || {
                let mut out = std::io::stdout();
                for i in 0.. {
                    let id = i * 4 + t;
                    db.write(|tx| {
                        Ok(tx.execute("INSERT INTO acked VALUES (?, randomblob(2000))", [id])?)
                    })
                    .unwrap();
                    writeln!(out, "{id}").unwrap();
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
}

fn crash_once(profile: Profile) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("crash.db");
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--ignored",
            "--exact",
            "crash::crash_child_writes_until_killed",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(DB_ENV, &path)
        .env(PROFILE_ENV, profile.name())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut acked = Vec::new();
    for line in lines.by_ref() {
        let line = line.unwrap();
        if let Ok(id) = line.trim().parse::<i64>() {
            acked.push(id);
            if acked.len() == 1500 {
                break;
            }
        }
    }
    child.kill().unwrap(); // SIGKILL
                           // Ids printed before the kill landed but were not read yet also count.
    for line in lines.map_while(Result::ok) {
        if let Ok(id) = line.trim().parse::<i64>() {
            acked.push(id);
        }
    }
    child.wait().unwrap();
    assert!(acked.len() >= 1500, "the child wrote {} rows", acked.len());

    let db = Database::open(&path, Options::with_profile(profile)).unwrap();
    let (integrity, missing): (String, i64) = db
        .read(|c| {
            let integrity = c.query_row("PRAGMA integrity_check", [], |r| r.get(0))?;
            let mut st = c.prepare("SELECT count(*) FROM acked WHERE id = ?")?;
            let mut missing = 0;
            for id in &acked {
                missing += 1 - st.query_row([id], |r| r.get::<_, i64>(0))?;
            }
            Ok((integrity, missing))
        })
        .unwrap();
    assert_eq!(integrity, "ok", "{profile}: the file is intact");
    assert_eq!(missing, 0, "{profile}: {missing} acknowledged writes lost");
}

#[test]
fn acknowledged_writes_survive_a_kill_under_safe() {
    crash_once(Profile::Safe);
}

#[test]
fn acknowledged_writes_survive_a_kill_under_balanced() {
    crash_once(Profile::Balanced);
}
