//! The shim on its own, through plain rusqlite connections: what a cut
//! keeps, what it may drop, and that faults fire where armed.

use litelane_faultvfs::{Effect, Fault, FaultVfs, FileKind, Op};
use rusqlite::{Connection, OpenFlags};

use crate::common::stored_ids;

fn open(vfs: &FaultVfs, path: &std::path::Path) -> Connection {
    Connection::open_with_flags_and_vfs(path, OpenFlags::default(), vfs.name()).unwrap()
}

/// Rows of `t` in the cut image, or `None` if the image has no usable table.
fn rows_after_cut(dir: &std::path::Path) -> Option<Vec<i64>> {
    let path = dir.join("db");
    if !path.exists() {
        return None;
    }
    let c = Connection::open_with_flags(&path, OpenFlags::SQLITE_OPEN_READ_WRITE).ok()?;
    let ok: String = c
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .ok()?;
    assert_eq!(ok, "ok", "integrity_check of the cut image");
    let mut st = c.prepare("SELECT id FROM t ORDER BY id").ok()?;
    let rows = st
        .query_map([], |r| r.get(0))
        .ok()?
        .collect::<Result<Vec<i64>, _>>()
        .ok()?;
    Some(rows)
}

fn setup(conn: &Connection, sync: &str) {
    conn.execute_batch(&format!(
        "PRAGMA journal_mode=WAL; PRAGMA synchronous={sync}; \
         CREATE TABLE t(id INTEGER PRIMARY KEY, pad BLOB);"
    ))
    .unwrap();
}

#[test]
fn a_synced_commit_survives_every_cut() {
    for seed in 0..20 {
        let dir = tempfile::tempdir().unwrap();
        let vfs = FaultVfs::register().unwrap();
        let conn = open(&vfs, &dir.path().join("db"));
        setup(&conn, "FULL");
        for i in 0..5 {
            conn.execute("INSERT INTO t VALUES (?, randomblob(3000))", [i])
                .unwrap();
        }
        let out = dir.path().join("cut");
        let report = vfs.cut_now(seed, &out);
        assert_eq!(report.error, None);
        assert_eq!(
            rows_after_cut(&out),
            Some(vec![0, 1, 2, 3, 4]),
            "seed {seed}: {report:?}"
        );
        // The old connection fails from now on, and can be dropped.
        let err = conn
            .execute("INSERT INTO t VALUES (99, 1)", [])
            .unwrap_err();
        assert!(
            err.to_string().contains("I/O") || err.to_string().contains("disk"),
            "{err}"
        );
        drop(conn);
    }
}

#[test]
fn unsynced_commits_can_be_lost_and_a_torn_write_is_caught_by_the_wal_checksums() {
    // synchronous=OFF never syncs: whatever the cut keeps is chance. Across
    // seeds some cuts must lose commits (else the shim keeps everything and
    // proves nothing), and no cut may corrupt (the WAL's checksums reject
    // torn or missing frames).
    let mut lost_some = 0;
    let mut kept_all = 0;
    for seed in 0..30 {
        let dir = tempfile::tempdir().unwrap();
        let vfs = FaultVfs::register().unwrap();
        let path = dir.path().join("db");
        // Created and made durable with the plain VFS first.
        {
            let c = Connection::open(&path).unwrap();
            setup(&c, "FULL");
            c.execute_batch("PRAGMA wal_checkpoint(TRUNCATE)").unwrap();
        }
        let conn = open(&vfs, &path);
        conn.execute_batch("PRAGMA synchronous=OFF").unwrap();
        for i in 0..20 {
            conn.execute("INSERT INTO t VALUES (?, randomblob(1500))", [i])
                .unwrap();
        }
        assert!(vfs.unsynced_ops() > 0);
        let out = dir.path().join("cut");
        let report = vfs.cut_now(seed, &out);
        let rows = rows_after_cut(&out).expect("the table was durable before");
        // Whatever survived is a prefix of the commits.
        assert_eq!(
            rows,
            (0..rows.len() as i64).collect::<Vec<_>>(),
            "{report:?}"
        );
        if rows.len() < 20 {
            lost_some += 1;
        } else {
            kept_all += 1;
        }
    }
    assert!(lost_some > 0, "no cut lost an unsynced commit");
    assert!(kept_all + lost_some == 30);
}

#[test]
fn a_new_file_whose_directory_was_never_synced_can_vanish() {
    // The main database file is never directory-synced by SQLite itself; a
    // new database written only with synchronous=OFF in rollback mode has
    // no synced directory entry, so some cuts lose the whole file.
    let mut vanished = 0;
    for seed in 0..20 {
        let dir = tempfile::tempdir().unwrap();
        let vfs = FaultVfs::register().unwrap();
        let conn = open(&vfs, &dir.path().join("db"));
        conn.execute_batch(
            "PRAGMA journal_mode=MEMORY; PRAGMA synchronous=OFF; CREATE TABLE t(id INTEGER PRIMARY KEY);",
        )
        .unwrap();
        let out = dir.path().join("cut");
        let report = vfs.cut_now(seed, &out);
        if !out.join("db").exists() {
            assert_eq!(report.files_lost.len(), 1, "{report:?}");
            vanished += 1;
        }
    }
    assert!(
        vanished > 0 && vanished < 20,
        "vanished in {vanished} of 20 cuts"
    );
}

#[test]
fn a_planned_cut_happens_at_the_chosen_operation_and_stops_all_io() {
    let dir = tempfile::tempdir().unwrap();
    let vfs = FaultVfs::register().unwrap();
    let conn = open(&vfs, &dir.path().join("db"));
    setup(&conn, "FULL");
    let before = vfs.io_ops();
    vfs.cut_after(3, 7, dir.path().join("cut"));
    let mut failed_at = None;
    for i in 0..100 {
        if conn
            .execute("INSERT INTO t VALUES (?, randomblob(100))", [i])
            .is_err()
        {
            failed_at = Some(i);
            break;
        }
    }
    assert!(failed_at.is_some(), "the cut never happened");
    assert!(vfs.is_cut());
    let report = vfs.cut_report().unwrap();
    assert_eq!(report.at_op, before + 3);
    // Reads fail too now.
    assert!(conn
        .query_row("SELECT count(*) FROM t", [], |r| r.get::<_, i64>(0))
        .is_err());
    // And no new connection can open through the shim.
    assert!(Connection::open_with_flags_and_vfs(
        dir.path().join("db"),
        OpenFlags::default(),
        vfs.name()
    )
    .and_then(|c| c.query_row("SELECT 1", [], |r| r.get::<_, i64>(0)))
    .is_err());
}

#[test]
fn faults_that_do_not_fit_their_call_are_refused_with_a_clear_error() {
    let vfs = FaultVfs::register().unwrap();
    let table = [
        (Fault::new(Op::Read, Effect::ShortWrite), "ShortWrite"),
        (Fault::new(Op::Write, Effect::ShortRead), "ShortRead"),
        (Fault::new(Op::Sync, Effect::CorruptRead), "CorruptRead"),
        (Fault::new(Op::Write, Effect::IoError).times(0), "times = 0"),
    ];
    for (fault, words) in table {
        let err = vfs.arm(fault).unwrap_err();
        assert!(err.to_string().contains(words), "{err}");
    }
    assert_eq!(vfs.faults_fired(), 0);
}

#[test]
fn each_fault_fires_on_the_call_it_names_with_sqlites_code() {
    use rusqlite::ErrorCode;
    let cases: Vec<(Fault, ErrorCode)> = vec![
        (
            Fault::new(Op::Write, Effect::IoError).file(FileKind::Wal),
            ErrorCode::SystemIoFailure,
        ),
        (
            Fault::new(Op::Sync, Effect::IoError).file(FileKind::Wal),
            ErrorCode::SystemIoFailure,
        ),
        (
            Fault::new(Op::Write, Effect::ShortWrite)
                .file(FileKind::Wal)
                .min_len(1024),
            ErrorCode::DiskFull,
        ),
    ];
    for (fault, code) in cases {
        let dir = tempfile::tempdir().unwrap();
        let vfs = FaultVfs::register().unwrap();
        let conn = open(&vfs, &dir.path().join("db"));
        setup(&conn, "FULL");
        vfs.arm(fault.clone()).unwrap();
        let err = conn
            .execute("INSERT INTO t VALUES (1, randomblob(3000))", [])
            .unwrap_err();
        assert_eq!(err.sqlite_error_code(), Some(code), "{fault:?}: {err}");
        assert_eq!(vfs.faults_fired(), 1);
        // Rolled back, and the next write works.
        conn.execute("INSERT INTO t VALUES (2, randomblob(3000))", [])
            .unwrap();
        let ids: Vec<i64> = stored_ids(&conn);
        assert_eq!(ids, vec![2], "{fault:?}");
    }
}

#[test]
fn disk_full_refuses_growth_but_not_overwrites() {
    let dir = tempfile::tempdir().unwrap();
    let vfs = FaultVfs::register().unwrap();
    let conn = open(&vfs, &dir.path().join("db"));
    setup(&conn, "FULL");
    vfs.set_disk_space(Some(20_000));
    let mut full_at = None;
    for i in 0..100 {
        if let Err(e) = conn.execute("INSERT INTO t VALUES (?, randomblob(3000))", [i]) {
            assert_eq!(
                e.sqlite_error_code(),
                Some(rusqlite::ErrorCode::DiskFull),
                "{e}"
            );
            full_at = Some(i);
            break;
        }
    }
    let full_at = full_at.expect("the disk never filled");
    assert!(full_at > 0 && full_at < 10, "full at row {full_at}");
    vfs.set_disk_space(None);
    conn.execute("INSERT INTO t VALUES (1000, 1)", []).unwrap();
    let n: i64 = conn
        .query_row("SELECT count(*) FROM t", [], |r| r.get(0))
        .unwrap();
    assert_eq!(n, full_at + 1);
}

#[test]
fn normal_sync_keeps_every_commit_made_before_a_wal_sync() {
    // synchronous=NORMAL syncs the WAL only at checkpoints: a commit made
    // before a checkpoint began must survive any cut after it.
    for mode in ["PASSIVE", "RESTART", "TRUNCATE"] {
        for seed in 0..40u64 {
            let dir = tempfile::tempdir().unwrap();
            let vfs = FaultVfs::register().unwrap();
            let conn = open(&vfs, &dir.path().join("db"));
            setup(&conn, "NORMAL");
            conn.execute_batch("PRAGMA wal_autocheckpoint=0").unwrap();
            let mut required = 0;
            let cut_after = 5 + seed % 30;
            for i in 0..40i64 {
                conn.execute("INSERT INTO t VALUES (?, randomblob(200))", [i])
                    .unwrap();
                if i % 7 == 6 {
                    let before = vfs.syncs(FileKind::Wal);
                    conn.execute_batch(&format!("PRAGMA wal_checkpoint({mode})"))
                        .unwrap();
                    if vfs.syncs(FileKind::Wal) > before {
                        required = i + 1;
                    }
                }
                if i as u64 == cut_after {
                    break;
                }
            }
            let out = dir.path().join("cut");
            let report = vfs.cut_now(seed, &out);
            let rows = rows_after_cut(&out).unwrap_or_default();
            assert!(
                rows.len() as i64 >= required,
                "{mode} seed {seed}: {} rows survived, {required} were synced\n{report:?}",
                rows.len()
            );
        }
    }
}

#[test]
fn litelane_opens_through_a_named_vfs_and_refuses_an_unknown_one() {
    let dir = tempfile::tempdir().unwrap();
    let vfs = FaultVfs::register().unwrap();
    let opts = litelane::Options {
        vfs: Some(vfs.name().to_string()),
        ..litelane::Options::default()
    };
    let db = litelane::Database::open(dir.path().join("db"), opts).unwrap();
    db.write(|tx| Ok(tx.execute_batch("CREATE TABLE t(id INTEGER PRIMARY KEY)")?))
        .unwrap();
    assert!(vfs.io_ops() > 0, "the database did not go through the shim");
    drop(db);

    let opts = litelane::Options {
        vfs: Some("no-such-vfs".to_string()),
        ..litelane::Options::default()
    };
    let err = litelane::Database::open(dir.path().join("other"), opts)
        .err()
        .expect("an unknown VFS must not open");
    let text = err.to_string();
    assert!(
        text.contains("no such vfs") && text.contains("other"),
        "{text}"
    );
    assert!(!dir.path().join("other").exists(), "a file was created");
}
