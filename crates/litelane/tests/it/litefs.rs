//! litelane on LiteFS: the real `litefs` binary mounts a FUSE filesystem as
//! the primary of a two-node cluster (static lease, both nodes on this
//! machine); litelane writes to a database inside the primary's mount under
//! `safe`, and every acknowledged row must reach the replica's mount, whose
//! copy must pass `PRAGMA integrity_check`.
//!
//! The binary is found in `$LITEFS`, on `PATH` or in `~/go/bin`
//! (`go install github.com/superfly/litefs/cmd/litefs@v0.5.14`, which
//! `scripts/test` runs). The test needs `/dev/fuse`, `fusermount3` (or
//! `fusermount`) and root (to mount). Without any of them it
//! says which and passes, unless `LITELANE_REQUIRE_LITEFS=1`, where a
//! missing piece fails it.

use std::collections::HashSet;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::Duration;

use litelane::{Database, Options, Profile};

fn find_on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

fn litefs() -> Option<PathBuf> {
    let mut candidates: Vec<PathBuf> = Vec::new();
    if let Some(p) = std::env::var_os("LITEFS") {
        candidates.push(p.into());
    }
    candidates.extend(find_on_path("litefs"));
    if let Some(home) = std::env::var_os("HOME") {
        candidates.push(Path::new(&home).join("go/bin/litefs"));
    }
    candidates.into_iter().find(|p| p.is_file())
}

/// Why LiteFS cannot run here, if it cannot.
fn missing() -> Option<String> {
    if litefs().is_none() {
        return Some("no litefs binary ($LITEFS, PATH, ~/go/bin)".into());
    }
    if !Path::new("/dev/fuse").exists() {
        return Some("no /dev/fuse (FUSE is not available)".into());
    }
    if find_on_path("fusermount3").is_none() && find_on_path("fusermount").is_none() {
        return Some("no fusermount3 or fusermount on PATH (install fuse3)".into());
    }
    let root = std::fs::read_to_string("/proc/self/status").is_ok_and(|s| {
        s.lines()
            .find(|l| l.starts_with("Uid:"))
            .and_then(|l| l.split_whitespace().nth(2))
            == Some("0")
    });
    if !root {
        return Some("not root: this test mounts LiteFS as root".into());
    }
    None
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free local port")
}

/// One `litefs mount` process; stopped and unmounted however the test ends.
struct Node {
    child: Child,
    mount: PathBuf,
}

impl Node {
    fn start(bin: &Path, dir: &Path, name: &str, port: u16, primary_port: u16) -> Node {
        let mount = dir.join(name).join("mnt");
        let data = dir.join(name).join("data");
        std::fs::create_dir_all(&mount).unwrap();
        std::fs::create_dir_all(&data).unwrap();
        let config = dir.join(format!("{name}.yml"));
        std::fs::write(
            &config,
            format!(
                "fuse:\n  dir: \"{}\"\ndata:\n  dir: \"{}\"\nlease:\n  type: \"static\"\n  \
                 advertise-url: \"http://127.0.0.1:{primary_port}\"\n  candidate: {}\n\
                 http:\n  addr: \"127.0.0.1:{port}\"\n",
                mount.display(),
                data.display(),
                port == primary_port
            ),
        )
        .unwrap();
        let log = std::fs::File::create(dir.join(format!("{name}.log"))).unwrap();
        let child = Command::new(bin)
            .args(["mount", "-config"])
            .arg(&config)
            .stdout(Stdio::from(log.try_clone().unwrap()))
            .stderr(Stdio::from(log))
            .spawn()
            .expect("start litefs");
        Node { child, mount }
    }

    /// LiteFS puts a `.lag` file in a mount once it is ready.
    fn wait_ready(&mut self, log: &Path) {
        let ready = crate::common::eventually(Duration::from_secs(20), || {
            self.mount.join(".lag").exists() || self.child.try_wait().ok().flatten().is_some()
        });
        let exited = self.child.try_wait().ok().flatten();
        assert!(
            ready && exited.is_none(),
            "litefs did not mount {} (exit {exited:?}); its log:\n{}",
            self.mount.display(),
            std::fs::read_to_string(log).unwrap_or_default()
        );
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        // SIGTERM lets litefs unmount; then make sure nothing stays mounted.
        let _ = Command::new("kill")
            .arg(self.child.id().to_string())
            .status();
        let stopped = crate::common::eventually(Duration::from_secs(5), || {
            self.child.try_wait().ok().flatten().is_some()
        });
        if !stopped {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        for tool in ["fusermount3", "fusermount"] {
            if Command::new(tool)
                .args(["-u", "-z"])
                .arg(&self.mount)
                .stderr(Stdio::null())
                .status()
                .is_ok()
            {
                break;
            }
        }
    }
}

fn replica_ids(path: &Path) -> Result<(String, HashSet<i64>), rusqlite::Error> {
    let c = rusqlite::Connection::open_with_flags(
        path,
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_URI,
    )?;
    let integrity: String = c.query_row("PRAGMA integrity_check", [], |r| r.get(0))?;
    let mut st = c.prepare("SELECT id FROM acked")?;
    let ids = st
        .query_map([], |r| r.get(0))?
        .collect::<Result<HashSet<i64>, _>>()?;
    Ok((integrity, ids))
}

#[test]
fn litefs_replicates_every_row_litelane_acknowledged() {
    if let Some(why) = missing() {
        assert!(
            std::env::var_os("LITELANE_REQUIRE_LITEFS").is_none(),
            "LITELANE_REQUIRE_LITEFS is set but LiteFS cannot run: {why}"
        );
        eprintln!("litefs test skipped: {why}");
        return;
    }
    let bin = litefs().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (pp, rp) = (free_port(), free_port());
    let mut primary = Node::start(&bin, dir.path(), "primary", pp, pp);
    primary.wait_ready(&dir.path().join("primary.log"));
    let mut replica = Node::start(&bin, dir.path(), "replica", rp, pp);
    replica.wait_ready(&dir.path().join("replica.log"));

    // The mount refuses writes ("attempt to write a readonly database")
    // until the node holds the primary's lease, which can come a moment
    // after it reported ready on a loaded machine: try for up to 10 s.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let db = loop {
        match Database::open(
            primary.mount.join("app.db"),
            Options::with_profile(Profile::Safe),
        ) {
            Err(e)
                if e.to_string().contains("readonly") && std::time::Instant::now() < deadline =>
            {
                std::thread::sleep(Duration::from_millis(100))
            }
            other => break other.expect("open a database inside the LiteFS mount"),
        }
    };
    crate::common::exec(&db, "CREATE TABLE acked(id INTEGER PRIMARY KEY, body BLOB)");
    let started = std::time::Instant::now();
    let writers: Vec<_> = (0..4i64)
        .map(|t| {
            let db = db.clone();
            thread::spawn(move || {
                let mut acked = Vec::new();
                for i in 0..250 {
                    let id = t * 1_000_000 + i;
                    db.write(|tx| {
                        Ok(tx.execute("INSERT INTO acked VALUES (?, randomblob(300))", [id])?)
                    })
                    .expect("a write through LiteFS");
                    acked.push(id);
                }
                acked
            })
        })
        .collect();
    let mut acked: Vec<i64> = writers
        .into_iter()
        .flat_map(|w| w.join().unwrap())
        .collect();
    let bulk: Vec<Vec<litelane::Value>> = (0..5_000i64)
        .map(|i| {
            vec![
                litelane::Value::Integer(10_000_000 + i),
                litelane::Value::Blob(vec![7; 100]),
            ]
        })
        .collect();
    db.inserter("acked", &["id", "body"])
        .and_then(|ins| ins.commit_every(1000).insert(bulk))
        .expect("a bulk insert through LiteFS");
    acked.extend(10_000_000..10_005_000);
    let wrote = started.elapsed();
    eprintln!(
        "litefs: process queue {}",
        match &db.metrics().process_queue_off {
            None => "on".to_string(),
            Some(why) => format!("off: {why}"),
        }
    );

    let replica_db = replica.mount.join("app.db");
    let mut last = None;
    let complete = crate::common::eventually(Duration::from_secs(30), || {
        last = Some(replica_ids(&replica_db));
        matches!(&last, Some(Ok((_, ids))) if acked.iter().all(|id| ids.contains(id)))
    });
    let (integrity, ids) = match last {
        Some(Ok(r)) => r,
        Some(Err(e)) => panic!(
            "reading the replica failed: {e}\nprimary log:\n{}\nreplica log:\n{}",
            std::fs::read_to_string(dir.path().join("primary.log")).unwrap_or_default(),
            std::fs::read_to_string(dir.path().join("replica.log")).unwrap_or_default()
        ),
        None => unreachable!("polled at least once"),
    };
    eprintln!(
        "litefs: 1,000 single-row commits and 5,000 bulk rows written in {wrote:?}; \
         all on the replica {:?} after the last write",
        started.elapsed() - wrote
    );
    let missing = acked.iter().filter(|id| !ids.contains(id)).count();
    assert!(
        complete,
        "{missing} of {} acknowledged rows never reached the replica",
        acked.len()
    );
    assert_eq!(integrity, "ok", "the replica's copy is intact");

    // The primary restarts (its litefs process stopped and started again on
    // the same data directory): every acknowledged row is still there, and
    // writes after the restart reach the replica too.
    drop(db);
    drop(primary);
    let mut primary = Node::start(&bin, dir.path(), "primary", pp, pp);
    primary.wait_ready(&dir.path().join("primary.log"));
    let db = Database::open(
        primary.mount.join("app.db"),
        Options::with_profile(Profile::Safe),
    )
    .expect("reopen the database after the primary restarted");
    let after_restart: HashSet<i64> = db
        .read(|c| {
            let mut st = c.prepare("SELECT id FROM acked")?;
            let ids = st
                .query_map([], |r| r.get(0))?
                .collect::<Result<HashSet<i64>, _>>()?;
            Ok(ids)
        })
        .unwrap();
    let lost = acked
        .iter()
        .filter(|id| !after_restart.contains(id))
        .count();
    assert_eq!(
        lost, 0,
        "acknowledged rows lost across the primary's restart"
    );
    for id in 20_000_000..20_000_100i64 {
        db.write(|tx| Ok(tx.execute("INSERT INTO acked VALUES (?, x'00')", [id])?))
            .expect("a write after the primary restarted");
        acked.push(id);
    }
    let mut last = None;
    let complete = crate::common::eventually(Duration::from_secs(30), || {
        last = Some(replica_ids(&replica_db));
        matches!(&last, Some(Ok((_, ids))) if acked.iter().all(|id| ids.contains(id)))
    });
    assert!(
        complete,
        "rows written after the primary restarted never reached the replica: {:?}\nprimary log:\n{}",
        last.map(|r| r.map(|(integrity, ids)| (integrity, ids.len()))),
        std::fs::read_to_string(dir.path().join("primary.log")).unwrap_or_default()
    );
    drop(db);
}
