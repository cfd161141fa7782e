//! The durability plan: what a profile decides for one open, computed once.
//!
//! [`Database::open`](crate::Database::open) computes a [`DurabilityPlan`]
//! from the profile, the target and whether the cross-process queue is
//! asked for, before it opens a connection. `connection.rs` applies the
//! plan's settings to each connection by its role, the writer receives the
//! plan's shared-sync decision, and the checkpointer and backups read
//! whether the file is in WAL mode from it: no part of the engine derives
//! the journal mode from the profile again, nor reads `synchronous` or
//! `journal_mode` back from SQLite to decide.

use std::path::Path;

use rusqlite::Connection;

use crate::error::{Context, Error, Result};
use crate::options::Profile;

/// A `journal_mode` litelane sets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum JournalMode {
    /// `WAL`: one mode for the file, set by the writer, kept in the file's
    /// header; readers never wait for the writer.
    Wal,
    /// `MEMORY`: a rollback journal kept in memory, set on each connection
    /// (rollback journal modes are per connection, not per file).
    Memory,
}

impl JournalMode {
    /// The mode's name as `PRAGMA journal_mode` takes and returns it.
    pub(crate) fn as_sql(self) -> &'static str {
        match self {
            JournalMode::Wal => "wal",
            JournalMode::Memory => "memory",
        }
    }
}

/// A `PRAGMA synchronous` level.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Synchronous {
    /// `OFF` (0): nothing is synced.
    Off,
    /// `NORMAL` (1): in WAL mode the WAL is synced only at checkpoints.
    Normal,
    /// `FULL` (2): in WAL mode the WAL is synced at every commit.
    Full,
}

impl Synchronous {
    /// The level as SQLite's number (0 = OFF, 1 = NORMAL, 2 = FULL), as
    /// `PRAGMA synchronous` takes and returns it.
    pub(crate) fn level(self) -> i64 {
        match self {
            Synchronous::Off => 0,
            Synchronous::Normal => 1,
            Synchronous::Full => 2,
        }
    }

    /// The level a profile asks for ([`Profile::synchronous`]).
    fn of(profile: Profile) -> Synchronous {
        match profile {
            Profile::Safe => Synchronous::Full,
            Profile::Balanced => Synchronous::Normal,
            Profile::Fast => Synchronous::Off,
        }
    }
}

/// What the writer connection sets when it opens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct WriterSettings {
    /// `PRAGMA journal_mode`, set and checked: the open fails when SQLite
    /// answers another mode.
    pub journal_mode: JournalMode,
    /// `PRAGMA synchronous` as set at open. Under
    /// [`SharedSync::On`] with the cross-process queue open, the writer
    /// then commits with [`SHARED_SYNC_WRITER_SYNCHRONOUS`] instead.
    pub synchronous: Synchronous,
}

/// What a reader or the checkpointer connection sets when it opens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct OtherSettings {
    /// `PRAGMA journal_mode` set on this connection: a rollback journal
    /// mode, which is per connection. `None` in WAL mode, which is the
    /// file's (the writer sets it), or, on a read-only file, whatever mode
    /// the file has.
    pub journal_mode: Option<JournalMode>,
    /// `PRAGMA synchronous` on this connection.
    pub synchronous: Synchronous,
}

/// Why the writer does not share the WAL's fsync ([`SharedSync::Off`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NoSharedSync {
    /// The database is opened read-only: it takes no commits.
    ReadOnly,
    /// The database is in memory: no WAL file to sync.
    InMemory,
    /// The profile does not sync each commit of a WAL (only `safe` does):
    /// there is no per-commit fsync to share.
    ProfileSyncsNoCommit,
    /// The cross-process queue is off (`Options::process_queue`), or could
    /// not be opened: the fsync would be shared with nobody else's turn.
    NoProcessQueue,
}

/// Whether the writer makes commits durable itself, after its turn,
/// sharing the WAL's fsync with other threads and processes
/// (`xproc/durable.rs`, `Writer::shared_sync`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SharedSync {
    /// On: the writer commits with [`SHARED_SYNC_WRITER_SYNCHRONOUS`] and
    /// syncs the WAL after handing the turn on. Only with the cross-process
    /// queue open: when it could not be opened,
    /// [`DurabilityPlan::without_process_queue`] turns this into
    /// `Off(NoProcessQueue)`.
    On,
    /// Off, and why: SQLite syncs (or not) inside `COMMIT` as the writer's
    /// `synchronous` says.
    Off(NoSharedSync),
}

/// The writer's `synchronous` under [`SharedSync::On`]: `NORMAL`, the WAL's
/// frames are written by `COMMIT` and synced by the writer after its turn.
pub(crate) const SHARED_SYNC_WRITER_SYNCHRONOUS: Synchronous = Synchronous::Normal;

/// What the one who closes the database puts back afterwards. The engine
/// itself restores nothing: it keeps what to restore
/// ([`Database::journal_mode_to_restore`](crate::Database::journal_mode_to_restore))
/// for a caller that asks for it, such as `litelane import --profile fast`,
/// which then calls [`restore_journal_mode`] once the database is closed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RestoreOnClose {
    /// Nothing: the plan's journal mode is the file's own (WAL, kept in the
    /// file), or the plan leaves the file as it is (read-only), or there
    /// is no file (in memory).
    Nothing,
    /// The journal mode the file had at open, read by the writer before it
    /// sets the plan's: the plan's rollback journal in memory (`fast`)
    /// takes a file out of WAL mode, and it stays out after close.
    FileJournalMode,
}

/// Everything a durability profile decides for one open, computed once by
/// [`DurabilityPlan::new`] in [`Database::open`](crate::Database::open).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct DurabilityPlan {
    /// The profile the plan was made from.
    pub profile: Profile,
    /// The journal mode of the database under this profile: the profile's
    /// ([`Profile::journal_mode`]) for a file, [`JournalMode::Memory`] in
    /// memory (SQLite's memdb has no shared memory, so no WAL). Backups
    /// copy from a reader's snapshot when it is [`JournalMode::Wal`].
    pub journal_mode: JournalMode,
    /// The writer's settings; `None` when the database is opened read-only
    /// (a `file:` URI with `mode=ro` or `immutable=1`): the writer leaves
    /// the file's journal mode and its own `synchronous` as they are.
    pub writer: Option<WriterSettings>,
    /// Each reader's settings.
    pub reader: OtherSettings,
    /// The checkpointer's settings (the background checkpointer, the side
    /// connection of explicit checkpoints, and the writer's syncer).
    pub checkpointer: OtherSettings,
    /// litelane runs checkpoints (a background checkpointer, a side
    /// connection for explicit ones): a WAL it writes, so not read-only.
    pub checkpoints: bool,
    /// Whether the writer shares the WAL's fsync after its turn.
    pub shared_sync: SharedSync,
    /// What the one who closes the database may put back afterwards.
    pub restore_on_close: RestoreOnClose,
}

/// What a plan needs to know of the database opened (`connection::Target`
/// says it for a path or URI: [`Target::kind`](crate::connection::Target::kind)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TargetKind {
    /// Opened read-only (`mode=ro`, `immutable=1`).
    pub read_only: bool,
    /// An in-memory database (no file).
    pub in_memory: bool,
}

impl DurabilityPlan {
    /// The plan for `profile` on `target`, with the cross-process queue
    /// asked for (`process_queue`, `Options::process_queue`) or not.
    pub(crate) fn new(profile: Profile, target: TargetKind, process_queue: bool) -> DurabilityPlan {
        let journal_mode = match profile {
            // memdb has no shared memory, so no WAL.
            _ if target.in_memory => JournalMode::Memory,
            Profile::Safe | Profile::Balanced => JournalMode::Wal,
            Profile::Fast => JournalMode::Memory,
        };
        let synchronous = Synchronous::of(profile);
        let other = OtherSettings {
            // A file opened read-only keeps the mode it has: a connection
            // that may not write cannot take a WAL file out of WAL mode
            // (SQLite answers "database is locked"), and writes no journal.
            journal_mode: (journal_mode != JournalMode::Wal
                && (target.in_memory || !target.read_only))
                .then_some(journal_mode),
            synchronous,
        };
        let writer = (!target.read_only).then_some(WriterSettings {
            journal_mode,
            synchronous,
        });
        let shared_sync = if target.read_only {
            SharedSync::Off(NoSharedSync::ReadOnly)
        } else if target.in_memory {
            SharedSync::Off(NoSharedSync::InMemory)
        } else if synchronous != Synchronous::Full || journal_mode != JournalMode::Wal {
            SharedSync::Off(NoSharedSync::ProfileSyncsNoCommit)
        } else if !process_queue {
            SharedSync::Off(NoSharedSync::NoProcessQueue)
        } else {
            SharedSync::On
        };
        let restore_on_close =
            if writer.is_some() && !target.in_memory && journal_mode != JournalMode::Wal {
                RestoreOnClose::FileJournalMode
            } else {
                RestoreOnClose::Nothing
            };
        DurabilityPlan {
            profile,
            journal_mode,
            writer,
            reader: other,
            checkpointer: other,
            checkpoints: journal_mode == JournalMode::Wal && !target.read_only,
            shared_sync,
            restore_on_close,
        }
    }

    /// The plan once the cross-process queue turned out unavailable (it
    /// could not be opened, and the metrics say why): no shared sync.
    pub(crate) fn without_process_queue(mut self) -> DurabilityPlan {
        if self.shared_sync == SharedSync::On {
            self.shared_sync = SharedSync::Off(NoSharedSync::NoProcessQueue);
        }
        self
    }

    /// In WAL mode.
    pub(crate) fn wal(&self) -> bool {
        self.journal_mode == JournalMode::Wal
    }
}

/// The journal modes SQLite knows, as `PRAGMA journal_mode` names them.
const JOURNAL_MODES: [&str; 6] = ["delete", "truncate", "persist", "memory", "wal", "off"];

/// Puts the database file at `path` back into journal `mode` (one of
/// SQLite's: `delete`, `truncate`, `persist`, `memory`, `wal`, `off`, any
/// case), with a connection of its own, and returns the mode the file is
/// in afterwards, as SQLite answers it: `mode` when it was already in it
/// or the change took; the old mode when SQLite could not change it (then
/// the caller says so). For the mode
/// [`Database::journal_mode_to_restore`](crate::Database::journal_mode_to_restore)
/// gave, once that database is closed (no connection of it may be open:
/// changing into or out of WAL mode needs the file to itself).
///
/// Fails with [`Error::InvalidInput`](crate::Error::InvalidInput) for
/// another `mode`, and with SQLite's error when the file cannot be opened
/// or the mode read or set (`SQLITE_BUSY` when another connection holds
/// the file for longer than the connection's busy timeout, rusqlite's
/// 5 s).
pub fn restore_journal_mode(path: impl AsRef<Path>, mode: &str) -> Result<String> {
    let path = path.as_ref();
    let Some(mode) = JOURNAL_MODES.iter().find(|m| m.eq_ignore_ascii_case(mode)) else {
        return Err(Error::invalid(format!(
            "unknown journal mode {mode:?}: expected one of {}",
            JOURNAL_MODES.join(", ")
        )));
    };
    let ctx = |what: &str| format!("restoring the journal mode of {}: {what}", path.display());
    let c = Connection::open(path).context(|| ctx("opening"))?;
    let now: String = c
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .context(|| ctx("reading it"))?;
    if now.eq_ignore_ascii_case(mode) {
        return Ok(now);
    }
    c.query_row(&format!("PRAGMA journal_mode = {mode}"), [], |r| r.get(0))
        .context(|| ctx(&format!("setting {mode}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The kinds of target a plan depends on: a file, a file by read-only
    /// URI (`mode=ro` or `immutable=1`), an in-memory database, a read-only
    /// in-memory URI.
    fn target(kind: &str) -> TargetKind {
        TargetKind {
            read_only: kind.ends_with("-ro") || kind.ends_with("-immutable"),
            in_memory: kind.starts_with("memory"),
        }
    }

    #[test]
    fn each_profile_and_target_kind_gets_its_plan() {
        use JournalMode::{Memory, Wal};
        use NoSharedSync::*;
        use RestoreOnClose::{FileJournalMode as Restore, Nothing};
        use Synchronous::{Full, Normal, Off};
        let on = |j, s| {
            Some(WriterSettings {
                journal_mode: j,
                synchronous: s,
            })
        };
        let other = |j, s| OtherSettings {
            journal_mode: j,
            synchronous: s,
        };
        // (profile, target kind, queue asked for,
        //  journal, writer, readers and checkpointer, checkpoints, shared sync,
        //  what to restore on close)
        #[rustfmt::skip]
        let cases = [
            (Profile::Safe, "file", true, Wal, on(Wal, Full), other(None, Full), true, SharedSync::On, Nothing),
            (Profile::Safe, "file", false, Wal, on(Wal, Full), other(None, Full), true, SharedSync::Off(NoProcessQueue), Nothing),
            (Profile::Balanced, "file", true, Wal, on(Wal, Normal), other(None, Normal), true, SharedSync::Off(ProfileSyncsNoCommit), Nothing),
            (Profile::Fast, "file", true, Memory, on(Memory, Off), other(Some(Memory), Off), false, SharedSync::Off(ProfileSyncsNoCommit), Restore),
            (Profile::Safe, "file-ro", true, Wal, None, other(None, Full), false, SharedSync::Off(ReadOnly), Nothing),
            (Profile::Balanced, "file-immutable", true, Wal, None, other(None, Normal), false, SharedSync::Off(ReadOnly), Nothing),
            (Profile::Fast, "file-ro", true, Memory, None, other(None, Off), false, SharedSync::Off(ReadOnly), Nothing),
            (Profile::Safe, "memory", true, Memory, on(Memory, Full), other(Some(Memory), Full), false, SharedSync::Off(InMemory), Nothing),
            (Profile::Balanced, "memory", true, Memory, on(Memory, Normal), other(Some(Memory), Normal), false, SharedSync::Off(InMemory), Nothing),
            (Profile::Fast, "memory", false, Memory, on(Memory, Off), other(Some(Memory), Off), false, SharedSync::Off(InMemory), Nothing),
            (Profile::Safe, "memory-ro", true, Memory, None, other(Some(Memory), Full), false, SharedSync::Off(ReadOnly), Nothing),
        ];
        for (profile, kind, queue, journal, writer, others, checkpoints, shared_sync, restore) in
            cases
        {
            let plan = DurabilityPlan::new(profile, target(kind), queue);
            let want = DurabilityPlan {
                profile,
                journal_mode: journal,
                writer,
                reader: others,
                checkpointer: others,
                checkpoints,
                shared_sync,
                restore_on_close: restore,
            };
            assert_eq!(plan, want, "{profile} on {kind}, queue {queue}");
            assert_eq!(plan.wal(), journal == Wal, "{profile} on {kind}");
        }
    }

    #[test]
    fn the_plan_keeps_the_profiles_own_words() {
        // A file's plan says what `Profile` documents, level for level.
        for profile in Profile::ALL {
            let plan = DurabilityPlan::new(profile, target("file"), true);
            let w = plan.writer.expect("a writable file has writer settings");
            assert_eq!(w.journal_mode.as_sql(), profile.journal_mode(), "{profile}");
            assert_eq!(w.synchronous.level(), profile.synchronous(), "{profile}");
            assert_eq!(plan.reader.synchronous.level(), profile.synchronous());
        }
        assert_eq!(SHARED_SYNC_WRITER_SYNCHRONOUS.level(), 1);
    }

    #[test]
    fn a_queue_that_could_not_open_turns_shared_sync_off_and_nothing_else() {
        let plan = DurabilityPlan::new(Profile::Safe, target("file"), true);
        assert_eq!(plan.shared_sync, SharedSync::On);
        let without = plan.without_process_queue();
        assert_eq!(
            without.shared_sync,
            SharedSync::Off(NoSharedSync::NoProcessQueue)
        );
        assert_eq!(
            DurabilityPlan {
                shared_sync: SharedSync::On,
                ..without
            },
            plan
        );
        // An Off for another reason keeps its reason.
        let balanced = DurabilityPlan::new(Profile::Balanced, target("file"), true);
        assert_eq!(balanced.without_process_queue(), balanced);
    }

    #[test]
    fn fast_keeps_the_journal_mode_it_replaced_for_the_one_who_closes() {
        use crate::{Database, Options};
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("j.db");
        let open = |p: Profile| Database::open(&path, Options::with_profile(p)).unwrap();
        let mode = |db: &Database| db.journal_mode_to_restore().map(str::to_string);
        // A new file: a rollback journal before, and after.
        assert_eq!(mode(&open(Profile::Fast)).as_deref(), Some("delete"));
        assert_eq!(restore_journal_mode(&path, "delete").unwrap(), "delete");
        // WAL is the file's own mode under safe and balanced: nothing.
        for profile in [Profile::Balanced, Profile::Safe] {
            let other = dir.path().join(format!("{profile}.db"));
            let db = Database::open(&other, Options::with_profile(profile)).unwrap();
            assert_eq!(mode(&db), None, "{profile}");
        }
        // fast takes a WAL file out of WAL mode; restoring puts it back.
        Connection::open(&path)
            .unwrap()
            .query_row("PRAGMA journal_mode = WAL", [], |_| Ok(()))
            .unwrap();
        let db = open(Profile::Fast);
        assert_eq!(mode(&db).as_deref(), Some("wal"));
        drop(db);
        let plain = Connection::open(&path).unwrap();
        let now = |c: &Connection| {
            c.query_row("PRAGMA journal_mode", [], |r| r.get::<_, String>(0))
                .unwrap()
        };
        assert_eq!(now(&plain), "delete");
        drop(plain);
        assert_eq!(restore_journal_mode(&path, "WAL").unwrap(), "wal");
        assert_eq!(now(&Connection::open(&path).unwrap()), "wal");
        // In memory and read-only: nothing.
        let memory = Database::open_in_memory(Options::with_profile(Profile::Fast)).unwrap();
        assert_eq!(mode(&memory), None);
        // (A rollback file: fast's readers set their journal in memory,
        // which a read-only connection cannot do to a file in WAL mode.)
        let rollback = dir.path().join("ro.db");
        Connection::open(&rollback)
            .unwrap()
            .execute_batch("CREATE TABLE t(x)")
            .unwrap();
        let uri = format!("file:{}?mode=ro", rollback.display());
        let ro = Database::open(&uri, Options::with_profile(Profile::Fast)).unwrap();
        assert_eq!(mode(&ro), None);
        drop(ro);
        // Only SQLite's journal modes are taken.
        let e = restore_journal_mode(&path, "wal; DROP TABLE t").unwrap_err();
        assert!(matches!(e, Error::InvalidInput { .. }), "{e}");
    }
}
