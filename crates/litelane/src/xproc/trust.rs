//! Whose lock file the queue uses (docs/concurrency.md, "Who can do what:
//! the lock file's trust").
//!
//! Whoever can write the `<db>-lane` file can write the tickets, the
//! doorbells and the job slots of combined commits (statements that the
//! turn holder runs in its own transaction). So the file is used only when
//! everyone who can write it could already write the database:
//!
//! 1. its owner is the database's owner or this process's effective user
//!    (any owner when everyone may write the database, `o+w`);
//! 2. its group and other write bits are no wider than the database's;
//! 3. when it is group-writable, its group is the database's group (unless
//!    everyone may write the database);
//! 4. it has one hard link (not a second name of some other file).
//!
//! A new lock file gets read and write for exactly the classes that may
//! write the database ([`new_mode`]), and, when root creates it, the
//! database's owner and group (as SQLite does for its `-wal` and `-shm`).
//!
//! Pure decisions on numbers (owners and modes), so that they are tested
//! without changing users; the system calls are in `xproc/lock_file.rs`.

/// Permission bits of a database that does not exist yet, as SQLite
/// creates it (before the umask).
pub const NEW_DATABASE_MODE: u32 = 0o644;

const GROUP_WRITE: u32 = 0o020;
const OTHER_WRITE: u32 = 0o002;

/// The owner, group and permission bits of a file (`st_uid`, `st_gid`,
/// `st_mode & 0o7777`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Owner {
    /// Owning user id.
    pub uid: u32,
    /// Owning group id.
    pub gid: u32,
    /// Permission bits (`0o7777` at most).
    pub mode: u32,
}

/// The database the lock file belongs to, as the rules see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Database {
    /// Its owner and mode; for a database that does not exist yet, this
    /// process's effective user and group and [`NEW_DATABASE_MODE`].
    pub owner: Owner,
    /// False when the database file does not exist yet.
    pub exists: bool,
}

impl Database {
    /// The database from its metadata (`None`: it does not exist yet, and
    /// this process, `euid`/`egid`, is about to create it).
    pub fn new(found: Option<Owner>, euid: u32, egid: u32) -> Database {
        match found {
            Some(owner) => Database {
                owner,
                exists: true,
            },
            None => Database {
                owner: Owner {
                    uid: euid,
                    gid: egid,
                    mode: NEW_DATABASE_MODE,
                },
                exists: false,
            },
        }
    }

    fn others_write(&self) -> bool {
        self.owner.mode & OTHER_WRITE != 0
    }

    fn describe(&self) -> String {
        let o = self.owner;
        if self.exists {
            format!(
                "the database is owned by uid {} gid {}, mode {:04o}",
                o.uid, o.gid, o.mode
            )
        } else {
            format!(
                "the database does not exist yet (taken as owned by this process, uid {} gid {}, \
                 mode {:04o})",
                o.uid, o.gid, o.mode
            )
        }
    }
}

/// The permission bits of a new lock file for a database of mode
/// `db_mode`: read and write for the owner, and for the group and for
/// others only when they may write the database (`0o644` → `0o600`,
/// `0o664` → `0o660`, `0o666` → `0o666`). Set with `fchmod`, so the umask
/// does not narrow it: every process that may write the database must be
/// able to open its lock file.
pub fn new_mode(db_mode: u32) -> u32 {
    let mut mode = 0o600;
    if db_mode & GROUP_WRITE != 0 {
        mode |= 0o060;
    }
    if db_mode & OTHER_WRITE != 0 {
        mode |= 0o006;
    }
    mode
}

/// `Ok` when the lock file (`lane`, with `links` hard links) may be used by
/// a process of effective user `euid` for database `db`; otherwise which
/// rule it breaks, with the facts, in words.
pub fn judge(db: &Database, lane: &Owner, links: u64, euid: u32) -> Result<(), String> {
    let o = db.owner;
    let broken = if lane.uid != o.uid && lane.uid != euid && !db.others_write() {
        format!(
            "a lock file is used only when it belongs to the database's owner (uid {}) or to \
             this process's user (euid {euid})",
            o.uid
        )
    } else if lane.mode & (GROUP_WRITE | OTHER_WRITE) & !o.mode != 0 {
        "its group or other write bits are wider than the database's, so someone who cannot \
         write the database could write it"
            .to_string()
    } else if lane.mode & GROUP_WRITE != 0 && lane.gid != o.gid && !db.others_write() {
        format!(
            "it is group-writable and its group is not the database's (gid {})",
            o.gid
        )
    } else if links != 1 {
        format!("it has {links} hard links (a lock file has one name)")
    } else {
        return Ok(());
    };
    Err(format!(
        "the lock file is owned by uid {} gid {}, mode {:04o}; {}; refused: {broken}; \
         the file is left untouched (remove it, or fix its owner or mode, when no process \
         uses it)",
        lane.uid,
        lane.gid,
        lane.mode,
        db.describe()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    const ROOT: u32 = 0;
    const APP: u32 = 1000;
    const NOBODY: u32 = 65534;

    fn owner(uid: u32, gid: u32, mode: u32) -> Owner {
        Owner { uid, gid, mode }
    }

    fn db(uid: u32, gid: u32, mode: u32) -> Database {
        Database::new(Some(owner(uid, gid, mode)), 12345, 12345)
    }

    #[test]
    fn new_lock_files_give_read_only_to_classes_that_may_write_the_database() {
        for (db_mode, lane) in [
            (0o644, 0o600),
            (0o600, 0o600),
            (0o444, 0o600),
            (0o664, 0o660),
            (0o660, 0o660),
            (0o666, 0o666),
            (0o646, 0o606),
            (0o4775, 0o660),
        ] {
            assert_eq!(new_mode(db_mode), lane, "db {db_mode:04o}");
        }
    }

    /// (what, database, lock file, its hard links, euid, Ok or the words
    /// of the refusal)
    #[test]
    fn the_rules_accept_files_of_writers_only() {
        type Case = (
            &'static str,
            Database,
            Owner,
            u64,
            u32,
            Result<(), &'static str>,
        );
        #[rustfmt::skip]
        let cases: &[Case] = &[
            ("root's own file", db(APP, APP, 0o644), owner(ROOT, ROOT, 0o644), 1, ROOT, Ok(())),
            ("the db owner's file, used by root", db(APP, APP, 0o644), owner(APP, APP, 0o600), 1, ROOT, Ok(())),
            ("the db owner's file, used by the owner", db(APP, APP, 0o664), owner(APP, APP, 0o660), 1, APP, Ok(())),
            ("planted by another user", db(ROOT, ROOT, 0o644), owner(NOBODY, NOBODY, 0o666), 1, ROOT, Err("belongs to the database's owner (uid 0)")),
            ("planted by another user, mode 0600", db(APP, APP, 0o644), owner(NOBODY, NOBODY, 0o600), 1, APP, Err("euid 1000")),
            ("other-writable, db not", db(APP, APP, 0o644), owner(APP, APP, 0o646), 1, APP, Err("wider than the database's")),
            ("group-writable, db not", db(APP, APP, 0o644), owner(APP, APP, 0o664), 1, ROOT, Err("wider than the database's")),
            ("group-writable with another group", db(APP, 100, 0o664), owner(APP, 200, 0o660), 1, APP, Err("group is not the database's (gid 100)")),
            ("group-writable with the db's group", db(APP, 100, 0o664), owner(APP, 100, 0o660), 1, APP, Ok(())),
            ("everyone may write the db: any owner", db(APP, APP, 0o666), owner(NOBODY, NOBODY, 0o666), 1, ROOT, Ok(())),
            ("a second name of another file", db(APP, APP, 0o644), owner(APP, APP, 0o600), 2, APP, Err("2 hard links")),
            ("a new db: this process's file", Database::new(None, APP, APP), owner(APP, APP, 0o600), 1, APP, Ok(())),
            ("a new db: someone else's file", Database::new(None, APP, APP), owner(NOBODY, NOBODY, 0o600), 1, APP, Err("does not exist yet")),
            ("a new db: a wide file", Database::new(None, APP, APP), owner(APP, APP, 0o666), 1, APP, Err("wider")),
        ];
        for (what, d, lane, links, euid, want) in cases {
            let got = judge(d, lane, *links, *euid);
            match (want, &got) {
                (Ok(()), Ok(())) => {}
                (Err(words), Err(why)) => {
                    assert!(why.contains(words), "{what}: {why}");
                    assert!(why.contains("left untouched"), "{what}: {why}");
                    let mode = format!("mode {:04o}", lane.mode);
                    assert!(why.contains(&mode), "{what}: names the file's mode: {why}");
                }
                _ => panic!("{what}: wanted {want:?}, got {got:?}"),
            }
        }
    }

    /// A lock file put at the path after it was judged (here: renamed
    /// over it) is not reopened: every open file description of a queue
    /// is of the file it judged.
    #[test]
    fn a_lock_file_replaced_after_it_was_judged_is_not_reopened() {
        use super::super::lock_file;
        let (dir, path, judged) = super::super::scratch_lock_file();
        let id = lock_file::file_id(&judged).unwrap();
        assert!(lock_file::reopen_same(&path, id).is_ok());
        let other = dir.path().join("other");
        std::fs::write(&other, b"someone else's").unwrap();
        std::fs::rename(&other, &path).unwrap();
        let err = lock_file::reopen_same(&path, id).unwrap_err();
        assert!(err.contains("replaced"), "{err}");
        assert_eq!(std::fs::read(&path).unwrap(), b"someone else's");
    }

    /// A lock file made by [`new_mode`] for a database passes the rules
    /// whoever made it among those who may write the database.
    #[test]
    fn a_new_lock_file_passes_the_rules() {
        for db_mode in 0..=0o777 {
            let d = db(APP, 100, db_mode);
            let lane = owner(APP, 100, new_mode(db_mode));
            assert_eq!(judge(&d, &lane, 1, ROOT), Ok(()), "db {db_mode:04o}");
            assert_eq!(judge(&d, &lane, 1, APP), Ok(()), "db {db_mode:04o}");
        }
    }
}
