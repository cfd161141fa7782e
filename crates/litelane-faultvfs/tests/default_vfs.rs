//! litelane under a default VFS that is not SQLite's own: a binary of its
//! own, because it changes the process's default VFS.
//!
//! litelane wraps SQLite's `unix` VFS for its writer (gathering the WAL's
//! appends into one write) and its checkpointer (pacing the database
//! file's write-back). A program may make its own VFS the default (an
//! encrypting one, or SQLite's cksumvfs, which computes a checksum over
//! each write it takes for a page), before or after litelane registered
//! its VFSs: every connection must then write through that VFS, handed
//! SQLite's own writes, one page or one frame header at a time, never
//! litelane's gathered ones.

use std::path::Path;

use litelane::{CheckpointMode, Database, Options, Profile};
use litelane_faultvfs::{make_default, FaultVfs, FileKind};

/// Bytes of a page (SQLite's default page size).
const PAGE: u64 = 4096;

/// One transaction of `rows` rows of 1 KiB.
fn write_rows(db: &Database, rows: usize) {
    db.write(|tx| {
        tx.execute_batch("CREATE TABLE IF NOT EXISTS t(id INTEGER PRIMARY KEY, body TEXT)")?;
        for i in 0..rows {
            tx.execute(
                "INSERT INTO t(body) VALUES (?1)",
                [format!("{i:04}").repeat(256)],
            )?;
        }
        Ok(())
    })
    .unwrap();
}

fn count(path: &Path) -> i64 {
    rusqlite::Connection::open(path)
        .unwrap()
        .query_row("SELECT count(*) FROM t", [], |r| r.get(0))
        .unwrap()
}

/// Opens `path` under `profile` while `vfs` is the default, writes 40 rows
/// of 1 KiB in one transaction (about ten pages of WAL frames, which
/// litelane's own VFS would write in one call) and checkpoints them: `vfs`
/// must have taken the writer's and the checkpoint's writes, none of them
/// larger than a page.
fn writes_go_through(vfs: &FaultVfs, path: &Path, profile: Profile, when: &str) {
    let db = Database::open(path, Options::with_profile(profile)).unwrap();
    write_rows(&db, 40);
    db.checkpoint(CheckpointMode::Truncate).unwrap();
    drop(db);
    let wal = vfs.largest_write(FileKind::Wal);
    assert!(
        wal > 0,
        "{when}, {profile:?}: the writer's WAL writes bypassed the default VFS"
    );
    assert!(
        wal <= PAGE,
        "{when}, {profile:?}: the default VFS was handed a WAL write of {wal} bytes, more than \
         a page: writes gathered over a VFS that may read meaning into each write"
    );
    assert!(
        vfs.largest_write(FileKind::MainDb) > 0,
        "{when}, {profile:?}: the checkpoint's writes bypassed the default VFS"
    );
    assert_eq!(count(path), 40);
}

/// Opens an in-memory database while `vfs` is the default, attaches the
/// file `path` to its writer and writes 40 rows of 1 KiB into it: SQLite
/// opens an attached file in its connection's VFS, so `vfs` must have taken
/// the file's writes (the in-memory database's VFS routes every other name
/// to the default of the moment it opened).
fn attached_file_goes_through(vfs: &FaultVfs, path: &Path, when: &str) {
    let before = vfs.io_ops();
    let db = Database::open_in_memory(Options::default()).unwrap();
    let sql = format!("ATTACH '{}' AS a", path.display());
    db.read_on_writer(|c| Ok(c.execute_batch(&sql)?)).unwrap();
    db.write(|tx| {
        tx.execute_batch("CREATE TABLE a.t(id INTEGER PRIMARY KEY, body TEXT)")?;
        for i in 0..40 {
            tx.execute(
                "INSERT INTO a.t(body) VALUES (?1)",
                [format!("{i:04}").repeat(256)],
            )?;
        }
        Ok(())
    })
    .unwrap();
    drop(db);
    assert!(
        vfs.largest_write(FileKind::MainDb) > 0 && vfs.io_ops() > before,
        "{when}: the writes of a file attached to an in-memory database bypassed the default VFS"
    );
    assert_eq!(count(path), 40);
}

#[test]
fn a_program_s_default_vfs_takes_every_write_as_sqlite_makes_it() {
    let dir = tempfile::tempdir().unwrap();
    // Before litelane registered anything in this process.
    let first = FaultVfs::register().unwrap();
    make_default(first.name()).unwrap();
    writes_go_through(&first, &dir.path().join("first.db"), Profile::Safe, "first");
    attached_file_goes_through(&first, &dir.path().join("first-attached.db"), "first");

    // With `unix` the default again, litelane's own VFSs are used...
    make_default("unix").unwrap();
    let own = dir.path().join("own.db");
    let kept = Database::open(&own, Options::with_profile(Profile::Safe)).unwrap();
    write_rows(&kept, 40);

    // ...until a program makes its VFS the default. Each shim stays
    // registered: the in-memory databases' VFS over it routes to it.
    let mut shims = Vec::new();
    for profile in [Profile::Safe, Profile::Balanced] {
        make_default("unix").unwrap();
        let later = FaultVfs::register().unwrap();
        make_default(later.name()).unwrap();
        let path = dir.path().join(format!("later-{profile:?}.db"));
        writes_go_through(&later, &path, profile, "later");
        let attached = dir.path().join(format!("later-{profile:?}-attached.db"));
        attached_file_goes_through(&later, &attached, "later");
        shims.push(later);
    }
    // A program unregisters its default VFS (a program may then free it)
    // while litelane's in-memory databases' VFS over it stays registered,
    // which SQLite then makes the default: files open in `unix`, as they
    // would have without litelane, never in the unregistered VFS.
    make_default("unix").unwrap();
    let gone = FaultVfs::register().unwrap();
    make_default(gone.name()).unwrap();
    attached_file_goes_through(&gone, &dir.path().join("gone-attached.db"), "gone");
    gone.unregister();
    let ops = gone.io_ops();
    let plain = dir.path().join("plain.db");
    rusqlite::Connection::open(&plain)
        .unwrap()
        .execute_batch("CREATE TABLE t(x); INSERT INTO t VALUES (1);")
        .unwrap();
    assert_eq!(count(&plain), 1);
    let db = Database::open_in_memory(Options::default()).unwrap();
    let attached = dir.path().join("after-gone.db");
    let sql = format!("ATTACH '{}' AS a", attached.display());
    db.read_on_writer(|c| Ok(c.execute_batch(&sql)?)).unwrap();
    db.write(|tx| Ok(tx.execute_batch("CREATE TABLE a.t(x); INSERT INTO a.t VALUES (1);")?))
        .unwrap();
    drop(db);
    assert_eq!(count(&attached), 1);
    assert_eq!(
        gone.io_ops(),
        ops,
        "files opened after their VFS was unregistered went through it"
    );
    // ...and a VFS the program registers next, over that default, gets
    // every write.
    let next = FaultVfs::register().unwrap();
    make_default(next.name()).unwrap();
    writes_go_through(&next, &dir.path().join("next.db"), Profile::Safe, "next");
    attached_file_goes_through(&next, &dir.path().join("next-attached.db"), "next");
    shims.push(next);

    // The database opened in between keeps its VFS and works beside them.
    write_rows(&kept, 40);
    drop(kept);
    assert_eq!(count(&own), 80);
}
