//! Power cuts, simulated, under litelane's workloads and profiles.
//!
//! Each run opens a fresh database through the shim, starts a workload,
//! cuts the power at a random write/sync/truncate (seeded), drops the old
//! `Database`, opens the image the cut left with the ordinary VFS and checks:
//!
//! * `safe`: `PRAGMA integrity_check` is ok and no acknowledged commit is lost;
//! * `balanced`: integrity is ok and the only commits lost were acknowledged
//!   after the last WAL sync (no WAL sync began after they returned);
//! * `fast`: measured, not asserted.
//!
//! Short form (in `cargo test`): a few cuts per profile and workload. Long
//! form, which prints the table in docs/durability.md:
//!
//! ```text
//! LITELANE_POWERLOSS_CUTS=100 cargo test --release -p litelane-faultvfs \
//!     --test it powerloss:: -- --ignored --nocapture
//! ```
//!
//! `LITELANE_POWERLOSS_CUTS` is per profile and workload;
//! `LITELANE_POWERLOSS_PROFILES=safe,balanced` limits the profiles (default
//! all three). `scripts/durability-proof` runs it.

use std::collections::HashSet;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use litelane::{Database, Options, Profile, Value};
use litelane_faultvfs::{CutReport, FaultVfs, FileKind};
use rusqlite::{Connection, OpenFlags};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Workload {
    /// Single-row transactions from 6 threads: group commit.
    Group,
    /// `Inserter` with `commit_every`, next to one single-row writer.
    Bulk,
    /// Single-row writes with a checkpoint every few pages (background and
    /// explicit), so cuts land inside checkpoints.
    Checkpointing,
    /// Larger rows with a tiny WAL bound: escalated checkpoints.
    WalBound,
    /// 4 `Database` handles on the file (each with its own cross-process
    /// queue, as 4 processes would have), one thread each writing with
    /// `execute`: under `safe` the turn holder commits the others'
    /// statements (combined commits).
    Combined,
}

const WORKLOADS: [Workload; 5] = [
    Workload::Group,
    Workload::Bulk,
    Workload::Checkpointing,
    Workload::WalBound,
    Workload::Combined,
];

fn name(w: Workload) -> &'static str {
    match w {
        Workload::Group => "group commit, 6 threads",
        Workload::Bulk => "bulk insert (commit every 200 rows)",
        Workload::Checkpointing => "checkpoints in progress",
        Workload::WalBound => "WAL at its bound (limit 32 pages)",
        Workload::Combined => "combined commits, 4 handles × execute",
    }
}

/// Bytes of a page: a WAL write larger than this held several frames.
const PAGE: u64 = 4096;

/// `gather`: the writer writes each transaction's WAL frames in one call
/// over the shim (`Options::gather_over_vfs`), as it does over SQLite's
/// own VFS; otherwise the shim gets SQLite's writes one by one.
fn options(profile: Profile, w: Workload, vfs: &FaultVfs, gather: bool) -> Options {
    let mut o = Options::with_profile(profile);
    o.vfs = Some(vfs.name().to_string());
    o.gather_over_vfs = gather;
    o.readers = 2;
    o.async_threads = 1;
    o.cache_size_kib = 256;
    match w {
        Workload::Checkpointing => {
            o.checkpoints.passive_after_pages = 8;
            o.checkpoints.idle_after = Duration::from_millis(2);
            // An explicit FULL/RESTART/TRUNCATE checkpoint holds the writer's
            // turn while it waits for the reader, up to `busy_timeout`: with
            // the default 5 s the writers hardly wrote, and most cuts came at
            // the 10-s deadline instead of at a random I/O.
            o.busy_timeout = Duration::from_millis(20);
        }
        Workload::WalBound => {
            o.checkpoints.passive_after_pages = 16;
            o.checkpoints.limit_pages = 32;
            // Escalated checkpoints (the WAL bounded by holding writers).
            o.checkpoints.over_limit = litelane::OverLimit::HoldWriters;
            o.checkpoints.escalation_wait = Duration::from_millis(50);
        }
        _ => {
            o.checkpoints.passive_after_pages = 200;
        }
    }
    o
}

/// An acknowledged commit: the ids it wrote and the number of WAL syncs
/// done when `write` returned.
#[derive(Debug, Clone)]
struct Ack {
    ids: Vec<i64>,
    wal_syncs: u64,
}

#[derive(Debug, Default, Clone)]
struct Outcome {
    acked_commits: usize,
    /// Acknowledged commits the profile promises to keep.
    required: usize,
    /// Acknowledged commits missing (in whole or part).
    lost: usize,
    /// Of those, commits the profile promised to keep.
    lost_required: usize,
    /// Integrity check failed, the file is not a database, or reading failed.
    corrupt: Option<String>,
    /// The first few promised commits that were lost: (ids, WAL syncs at ack).
    lost_examples: Vec<(Vec<i64>, u64)>,
    /// WAL syncs when the power went.
    final_wal_syncs: u64,
    /// Largest id in the image.
    max_found: i64,
    /// The workload had not reached its planned op after 10 s: cut then.
    at_deadline: bool,
    /// Statements one handle committed for another (`Combined`).
    combined: u64,
    /// The writer gathered WAL frames into writes larger than a page.
    gathered: bool,
    report: CutReport,
}

/// Runs `w` under `profile` until the power fails at a random op.
fn run_once(profile: Profile, w: Workload, seed: u64, lying: bool) -> Outcome {
    let dir = tempfile::tempdir().unwrap();
    let vfs = Arc::new(FaultVfs::register().unwrap());
    vfs.set_lying_syncs(lying);
    let mut rng = fastrand::Rng::with_seed(seed);
    // Every other seed: the writer's WAL frames gathered, as by default.
    let gather = seed % 2 == 0;
    let db = Database::open(dir.path().join("db"), options(profile, w, &vfs, gather)).unwrap();
    let acks: Arc<Mutex<Vec<Ack>>> = Arc::default();
    let setup =
        db.write(|tx| Ok(tx.execute_batch("CREATE TABLE t(id INTEGER PRIMARY KEY, pad BLOB)")?));
    if setup.is_ok() {
        acks.lock().unwrap().push(Ack {
            ids: vec![],
            wal_syncs: vfs.syncs(FileKind::Wal),
        });
    }
    let out = dir.path().join("cut");
    vfs.cut_after(rng.u64(1..600), seed, &out);
    let stop = Arc::new(AtomicBool::new(false));
    let next_id = Arc::new(std::sync::atomic::AtomicI64::new(1));
    let mut handles = Vec::new();
    let single_writers = match w {
        Workload::Group => 6,
        Workload::Bulk => 1,
        Workload::Checkpointing | Workload::WalBound => 3,
        Workload::Combined => 4,
    };
    // Combined: a handle of its own per writer (the first is `db`).
    let handles_of_file: Vec<Database> = match w {
        Workload::Combined => (1..single_writers as usize)
            .map(|_| {
                Database::open(dir.path().join("db"), options(profile, w, &vfs, gather)).unwrap()
            })
            .collect(),
        _ => Vec::new(),
    };
    let pad = if w == Workload::WalBound { 3000 } else { 200 };
    // What a writing thread takes along.
    let writer_handles = || {
        (
            db.clone(),
            Arc::clone(&vfs),
            Arc::clone(&acks),
            Arc::clone(&stop),
            Arc::clone(&next_id),
        )
    };
    for k in 0..single_writers as usize {
        let (mut db, vfs, acks, stop, next_id) = writer_handles();
        let execute = w == Workload::Combined;
        if let Some(other) = k.checked_sub(1).and_then(|i| handles_of_file.get(i)) {
            db = other.clone();
        }
        handles.push(thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) && !vfs.is_cut() {
                let id = next_id.fetch_add(1, Ordering::Relaxed);
                let sql = "INSERT INTO t VALUES (?1, randomblob(?2))";
                let r = if execute {
                    db.execute(sql, &[Value::Integer(id), Value::Integer(pad)])
                        .map(drop)
                } else {
                    db.write(|tx| Ok(tx.execute(sql, [id, pad]).map(drop)?))
                };
                if r.is_ok() {
                    let wal_syncs = vfs.syncs(FileKind::Wal);
                    acks.lock().unwrap().push(Ack {
                        ids: vec![id],
                        wal_syncs,
                    });
                }
            }
        }));
    }
    if w == Workload::Bulk {
        let (db, vfs, acks, stop, next_id) = writer_handles();
        handles.push(thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) && !vfs.is_cut() {
                let first = next_id.fetch_add(1000, Ordering::Relaxed);
                let ids: Vec<i64> = (first..first + 1000).collect();
                let rows = ids
                    .iter()
                    .map(|&i| vec![Value::Integer(i), Value::Blob(vec![7; 100])]);
                let r = db
                    .inserter("t", &["id", "pad"])
                    .map(|ins| ins.commit_every(200))
                    .and_then(|ins| ins.insert(rows));
                if r.is_ok() {
                    let wal_syncs = vfs.syncs(FileKind::Wal);
                    acks.lock().unwrap().push(Ack { ids, wal_syncs });
                }
            }
        }));
    }
    if w == Workload::Checkpointing {
        let (db, vfs, stop) = (db.clone(), Arc::clone(&vfs), Arc::clone(&stop));
        handles.push(thread::spawn(move || {
            let modes = [
                litelane::CheckpointMode::Passive,
                litelane::CheckpointMode::Full,
                litelane::CheckpointMode::Restart,
                litelane::CheckpointMode::Truncate,
            ];
            let mut k = 0;
            while !stop.load(Ordering::Relaxed) && !vfs.is_cut() {
                let _ = db.checkpoint(modes[k % modes.len()]);
                k += 1;
                thread::sleep(Duration::from_millis(3));
            }
        }));
    }
    // Readers hold snapshots too, so checkpoints cannot always finish.
    {
        let (db, vfs, stop) = (db.clone(), Arc::clone(&vfs), Arc::clone(&stop));
        handles.push(thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) && !vfs.is_cut() {
                let _ = db.read(|c| {
                    let n: i64 = c.query_row("SELECT count(*) FROM t", [], |r| r.get(0))?;
                    thread::sleep(Duration::from_millis(2));
                    Ok(n)
                });
            }
        }));
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while !vfs.is_cut() && Instant::now() < deadline {
        thread::sleep(Duration::from_millis(1));
    }
    // A workload that ran out of time before its planned op is cut now.
    let at_deadline = !vfs.is_cut();
    let report = vfs.cut_now(seed, &out);
    stop.store(true, Ordering::Relaxed);
    // Every workload thread returns on its own (no write is needed to
    // unstick a group: see `explicit_checkpoint_queued_behind_a_group_strands_it`).
    for h in handles {
        h.join().unwrap();
    }
    let combined = std::iter::once(&db)
        .chain(&handles_of_file)
        .map(|d| d.metrics().combined_here)
        .sum();
    drop(db);
    drop(handles_of_file);
    let final_wal_syncs = vfs.syncs(FileKind::Wal);
    let acks = acks.lock().unwrap().clone();
    let mut o = check(profile, &out, &acks, final_wal_syncs, report);
    o.at_deadline = at_deadline;
    o.combined = combined;
    o.gathered = vfs.largest_write(FileKind::Wal) > PAGE;
    assert!(
        gather || !o.gathered,
        "seed {seed}: a WAL write larger than a page without gathering"
    );
    o
}

/// What the image left by the cut holds.
fn check(profile: Profile, out: &Path, acks: &[Ack], wal_syncs: u64, report: CutReport) -> Outcome {
    let mut o = Outcome {
        acked_commits: acks.len(),
        report,
        ..Outcome::default()
    };
    let found = match read_image(&out.join("db")) {
        Ok(found) => found,
        Err(why) => {
            o.corrupt = Some(why);
            HashSet::new()
        }
    };
    let table_survived = found.contains(&0);
    o.final_wal_syncs = wal_syncs;
    o.max_found = found.iter().copied().max().unwrap_or(-1);
    for a in acks {
        // Under balanced a commit must survive once a WAL sync began after
        // it returned; under safe always.
        let required = match profile {
            Profile::Safe => true,
            Profile::Balanced => wal_syncs > a.wal_syncs,
            Profile::Fast => false,
        };
        if required {
            o.required += 1;
        }
        let lost = if a.ids.is_empty() {
            !table_survived
        } else {
            a.ids.iter().any(|i| !found.contains(i))
        };
        if lost {
            o.lost += 1;
            if required {
                o.lost_required += 1;
                if o.lost_examples.len() < 5 {
                    o.lost_examples.push((a.ids.clone(), a.wal_syncs));
                }
            }
        }
    }
    o
}

/// The ids in the image (0 marks that the table exists), or why the image
/// is not a sound database. A missing file is an empty database.
fn read_image(path: &Path) -> Result<HashSet<i64>, String> {
    let mut found = HashSet::new();
    if !path.exists() {
        return Ok(found);
    }
    let c = Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_WRITE)
        .map_err(|e| format!("open: {e}"))?;
    let checks: Vec<String> = c
        .prepare("PRAGMA integrity_check")
        .and_then(|mut s| s.query_map([], |r| r.get(0))?.collect())
        .map_err(|e| format!("integrity_check: {e}"))?;
    if checks != ["ok"] {
        return Err(format!("integrity_check: {}", checks.join("; ")));
    }
    let has_table: bool = c
        .query_row(
            "SELECT count(*) FROM sqlite_schema WHERE name = 't'",
            [],
            |r| r.get::<_, i64>(0),
        )
        .map_err(|e| format!("schema: {e}"))?
        > 0;
    if has_table {
        found.insert(0);
        let mut st = c.prepare("SELECT id FROM t").map_err(|e| e.to_string())?;
        let ids = st
            .query_map([], |r| r.get::<_, i64>(0))
            .and_then(|rows| rows.collect::<Result<Vec<_>, _>>())
            .map_err(|e| format!("reading t: {e}"))?;
        found.extend(ids);
    }
    Ok(found)
}

#[derive(Debug, Default)]
struct Tally {
    cuts: usize,
    corrupt: usize,
    acked: usize,
    lost: usize,
    lost_required: usize,
    torn: u64,
    files_lost: usize,
    /// Cuts made at the 10-s deadline rather than at the planned op.
    at_deadline: usize,
    /// Statements committed by another handle than their own.
    combined: u64,
    /// Cuts whose writer gathered WAL frames into writes larger than a page.
    gathered: usize,
}

fn campaign(profile: Profile, w: Workload, cuts: u64, base_seed: u64, lying: bool) -> Tally {
    let mut t = Tally::default();
    for k in 0..cuts {
        let seed = base_seed.wrapping_mul(1_000_003).wrapping_add(k);
        let o = run_once(profile, w, seed, lying);
        t.cuts += 1;
        t.acked += o.acked_commits;
        t.lost += o.lost;
        t.lost_required += o.lost_required;
        t.torn += o.report.torn_writes;
        t.files_lost += o.report.files_lost.len();
        t.at_deadline += usize::from(o.at_deadline);
        t.combined += o.combined;
        t.gathered += usize::from(o.gathered);
        let promised = profile != Profile::Fast && !lying;
        if let Some(why) = &o.corrupt {
            t.corrupt += 1;
            if promised {
                panic!(
                    "{profile} / {w:?} seed {seed}: corrupt after the cut: {why}\n{:?}",
                    o.report
                );
            }
        }
        if o.lost_required > 0 && promised {
            panic!(
                "{profile} / {w:?} seed {seed}: {} acknowledged commit(s) it promised to keep were lost \
                 ({} acknowledged, {} required; lost (ids, WAL syncs at ack): {:?}; \
                 WAL syncs at the cut {}, largest id found {})\n{:?}",
                o.lost_required, o.acked_commits, o.required, o.lost_examples,
                o.final_wal_syncs, o.max_found, o.report
            );
        }
    }
    t
}

fn short_cuts() -> u64 {
    3
}

/// A short campaign of each workload under `profile` in turn (lazily, one
/// when asked for), the i-th with base seed `seed + i`.
fn short_campaigns(profile: Profile, seed: u64) -> impl Iterator<Item = (Workload, Tally)> {
    WORKLOADS.into_iter().enumerate().map(move |(i, w)| {
        let t = campaign(profile, w, short_cuts(), seed + i as u64, false);
        (w, t)
    })
}

#[test]
fn safe_keeps_every_acknowledged_commit_through_power_cuts() {
    let mut gathered = 0;
    for (w, t) in short_campaigns(Profile::Safe, 100) {
        gathered += t.gathered;
        assert_eq!(t.lost, 0, "{w:?}: {t:?}");
        assert_eq!(t.corrupt, 0, "{w:?}: {t:?}");
        assert!(
            t.acked > 0,
            "{w:?}: nothing was acknowledged before the cuts"
        );
        if w == Workload::Combined {
            assert!(
                t.combined > 0,
                "no statement was committed by another handle: {t:?}"
            );
        }
    }
    assert!(gathered > 0, "no cut came after a gathered WAL write");
}

#[test]
fn balanced_stays_intact_and_loses_only_commits_after_the_last_wal_sync() {
    for (w, t) in short_campaigns(Profile::Balanced, 200) {
        assert_eq!(t.lost_required, 0, "{w:?}: {t:?}");
        assert_eq!(t.corrupt, 0, "{w:?}: {t:?}");
    }
}

#[test]
fn fast_is_measured_and_can_lose_or_corrupt() {
    // Not a promise either way: this runs the harness under `fast` so a
    // crash in it shows, and checks it reports something.
    let t = campaign(Profile::Fast, Workload::Group, short_cuts(), 300, false);
    assert_eq!(t.cuts as u64, short_cuts());
    assert!(t.acked > 0, "{t:?}");
}

#[test]
fn the_harness_fails_on_a_disk_that_lies_about_fsync() {
    // `safe` on a disk whose fsync does nothing: acknowledged commits must
    // go missing (or the file break) in some cuts, or the harness could not
    // tell a broken durability story from a sound one.
    let t = campaign(Profile::Safe, Workload::Group, 6, 400, true);
    assert!(
        t.lost + t.corrupt > 0,
        "six cuts on a lying disk lost nothing: the harness is vacuous ({t:?})"
    );
}

/// The long form: prints the table for docs/durability.md.
#[test]
#[ignore = "long: LITELANE_POWERLOSS_CUTS=100 cargo test --release -p litelane-faultvfs --test it powerloss:: -- --ignored --nocapture"]
fn power_loss_table() {
    let cuts: u64 = std::env::var("LITELANE_POWERLOSS_CUTS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(100);
    println!("\n| profile | workload | cuts | corruptions | acknowledged commits | acknowledged commits lost | of which promised | torn writes | files lost | cut at the 10-s deadline | cuts after gathered WAL writes |");
    println!("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    let mut failures = Vec::new();
    let started = Instant::now();
    for profile in profiles_from_env() {
        for (i, w) in WORKLOADS.into_iter().enumerate() {
            let base = 10_000 + i as u64 * 100 + profile.synchronous() as u64;
            let t = std::panic::catch_unwind(|| campaign(profile, w, cuts, base, false));
            match t {
                Ok(t) => println!(
                    "| {profile} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                    name(w),
                    t.cuts,
                    t.corrupt,
                    t.acked,
                    t.lost,
                    t.lost_required,
                    t.torn,
                    t.files_lost,
                    t.at_deadline,
                    t.gathered
                ),
                Err(_) => failures.push(format!("{profile} / {w:?}")),
            }
        }
    }
    println!(
        "\n{} profile(s) × {} workloads × {cuts} cuts in {:.0} s",
        profiles_from_env().len(),
        WORKLOADS.len(),
        started.elapsed().as_secs_f64()
    );
    assert!(failures.is_empty(), "promises broken: {failures:?}");
}

/// The profiles the long form runs: `LITELANE_POWERLOSS_PROFILES`, a
/// comma-separated list (`safe,balanced`), or all three when unset.
fn profiles_from_env() -> Vec<Profile> {
    match std::env::var("LITELANE_POWERLOSS_PROFILES") {
        Ok(list) => list
            .split(',')
            .map(|p| {
                p.trim()
                    .parse()
                    .unwrap_or_else(|e| panic!("LITELANE_POWERLOSS_PROFILES: {e}"))
            })
            .collect(),
        Err(_) => Profile::ALL.to_vec(),
    }
}
