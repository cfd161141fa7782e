//! Open-time settings: the durability profile and every knob a user tunes.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use crate::error::Error;

/// How much a commit survives, and what it costs. One word each.
///
/// | profile | journal | `synchronous` | survives process crash | survives power loss |
/// |---|---|---|---|---|
/// | `Safe` | WAL | FULL | yes | yes: every acknowledged commit |
/// | `Balanced` (default) | WAL | NORMAL | yes | the file is never corrupt; the last commits may be lost |
/// | `Fast` | MEMORY | OFF | **no: a crash during a write can corrupt the file** | no |
///
/// `Fast` is for data you can rebuild (a cache, an import you can re-run).
/// See `docs/durability.md` for the measured cost of each.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Profile {
    /// WAL + `synchronous=FULL`: an acknowledged commit survives power loss.
    Safe,
    /// WAL + `synchronous=NORMAL`: survives a process crash; after power loss
    /// the most recent commits may be gone but the file is intact. The default.
    #[default]
    Balanced,
    /// Rollback journal kept in memory + `synchronous=OFF`: fastest; a crash or
    /// power loss in the middle of a write can corrupt the database file.
    Fast,
}

impl Profile {
    /// The profile's name as used on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Profile::Safe => "safe",
            Profile::Balanced => "balanced",
            Profile::Fast => "fast",
        }
    }

    /// The `journal_mode` this profile asks for.
    pub fn journal_mode(self) -> &'static str {
        match self {
            Profile::Safe | Profile::Balanced => "wal",
            Profile::Fast => "memory",
        }
    }

    /// The `synchronous` level this profile asks for, as SQLite's number
    /// (0 = OFF, 1 = NORMAL, 2 = FULL).
    pub fn synchronous(self) -> i64 {
        match self {
            Profile::Safe => 2,
            Profile::Balanced => 1,
            Profile::Fast => 0,
        }
    }

    /// All profiles, safest first.
    pub const ALL: [Profile; 3] = [Profile::Safe, Profile::Balanced, Profile::Fast];
}

impl fmt::Display for Profile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Profile {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self, Error> {
        match s.to_ascii_lowercase().as_str() {
            "safe" => Ok(Profile::Safe),
            "balanced" => Ok(Profile::Balanced),
            "fast" => Ok(Profile::Fast),
            _ => Err(Error::invalid(format!(
                "unknown profile {s:?}: expected safe, balanced or fast"
            ))),
        }
    }
}

/// Group commit: several queued write transactions share one SQLite commit.
#[derive(Debug, Clone, PartialEq)]
pub struct GroupCommit {
    /// Off: every `write` commits on its own. Default: on.
    pub enabled: bool,
    /// Most jobs in one group. Default 64.
    pub max_jobs: usize,
    /// Longest time a group stays open after its first job started, before it
    /// commits even with writers still queued. Bounds the extra latency of the
    /// first job of a group. Default 5 ms. A lone writer never waits for this:
    /// a group only grows with jobs that are already queued.
    pub max_wait: Duration,
}

impl Default for GroupCommit {
    fn default() -> Self {
        GroupCommit {
            enabled: true,
            max_jobs: 64,
            max_wait: Duration::from_millis(5),
        }
    }
}

/// What the background checkpointer does when the WAL passes
/// [`Checkpoints::limit_pages`] and a checkpoint cannot copy all of it,
/// because a read holds a snapshot older than the WAL's end (SQLite cannot
/// copy the frames that snapshot still needs, nor start the WAL over while
/// it lives). Bounding the WAL then takes waiting for that read or ending
/// it; this chooses who waits. Default [`OverLimit::Grow`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OverLimit {
    /// Writers never wait for the checkpointer (the default): the WAL grows
    /// past the limit for as long as a read pins it, the checkpointer keeps
    /// copying what it can with PASSIVE checkpoints (which never block
    /// anyone) and tries again every [`OVER_LIMIT_RETRY`], so the WAL is
    /// copied back and starts over at the first moment no read pins it.
    /// Writers are only held back by the checkpointer's short catch-up (a
    /// PASSIVE checkpoint of at most 128 frames and its syncs, in a turn of
    /// its own, so the next write restarts the WAL), for at most 10 ms plus
    /// the wait for the turn among processes (at most 5 ms): a catch-up
    /// that takes longer lets the writers go on while it finishes.
    /// [`Metrics::wal_over_limit`](crate::Metrics::wal_over_limit) says
    /// since when the WAL is over its limit, why, and which read pins it;
    /// [`Checkpoints::max_read_age`] turns the limit into a hard bound by
    /// interrupting reads that pin it for too long.
    #[default]
    Grow,
    /// Bound the WAL by holding writers back (litelane's default until
    /// issue 39, now only on request): past the limit the WAL hook closes a gate
    /// in the writer queue and the checkpointer takes the writer's next turn
    /// to run a RESTART checkpoint that waits up to
    /// [`Checkpoints::escalation_wait`] (default 2 s) for the reads on old
    /// snapshots. Every writer of the process waits that long, at most once
    /// per read that pins the WAL (docs/concurrency.md, "Checkpoints").
    HoldWriters,
}

/// How often the checkpointer tries again while the WAL is over its limit
/// and pinned by a read, under [`OverLimit::Grow`]: 10 ms. A PASSIVE
/// checkpoint that finds nothing it may copy costs a few microseconds;
/// this is also the longest the checkpointer takes to notice that the last
/// read pinning the WAL ended while writes go on (copying the WAL back
/// then takes what the copy takes, with writers going on).
pub const OVER_LIMIT_RETRY: Duration = Duration::from_millis(10);

/// Background checkpoints, off the write path.
#[derive(Debug, Clone, PartialEq)]
pub struct Checkpoints {
    /// Run checkpoints on a background thread (and turn off SQLite's automatic
    /// checkpoint inside commits). Default: on. Only applies in WAL mode.
    /// Off (with `external` off too): SQLite's automatic checkpoint runs
    /// inside the commit that crosses 1000 pages, as in plain SQLite.
    pub background: bool,
    /// Leave every checkpoint to another process, such as a replicator like
    /// Litestream, which reads the WAL and checkpoints it itself. litelane
    /// then runs no checkpoint of its own (no background thread, SQLite's
    /// automatic checkpoint off, no WAL gate): the WAL's size is that
    /// process's business. Default: off. [`Checkpoints::external`] builds it.
    pub external: bool,
    /// WAL size, in pages, after which a PASSIVE checkpoint is started.
    /// Default 1000 (SQLite's own automatic-checkpoint threshold).
    pub passive_after_pages: u32,
    /// The WAL's bound, in pages: past it the WAL is *over its limit*
    /// ([`Metrics::wal_over_limit`](crate::Metrics::wal_over_limit)), and
    /// what happens then is [`over_limit`](Checkpoints::over_limit)'s
    /// choice. Default 10,000 pages (about 40 MiB at 4 KiB pages). The WAL
    /// *file* stays allocated up to `Options::journal_size_limit` (64 MiB)
    /// after it starts over, whatever this is.
    pub limit_pages: u32,
    /// Past `limit_pages` with a read pinning the WAL: let the WAL grow and
    /// never hold writers ([`OverLimit::Grow`], the default), or hold
    /// writers while a RESTART checkpoint waits for the read
    /// ([`OverLimit::HoldWriters`]).
    pub over_limit: OverLimit,
    /// Under [`OverLimit::HoldWriters`] only: the longest wait of an
    /// escalated checkpoint for old readers. Default 2 s. Writers wait
    /// behind the closed gate for at most this long plus the checkpoint's
    /// own copying, and only once per read that pins the WAL (see
    /// `docs/concurrency.md`, "Checkpoints"). Unused under
    /// [`OverLimit::Grow`].
    pub escalation_wait: Duration,
    /// The hard bound on the WAL: when the WAL is over `limit_pages` and a
    /// checkpoint finds it pinned by reads of this process older than this,
    /// the checkpointer interrupts their running statements (the read fails
    /// with `SQLITE_INTERRUPT` and a message naming this option). The WAL
    /// then grows past its limit by at most what is written in this long
    /// (plus the time a read's closure holds its snapshot without running a
    /// statement, which SQLite cannot interrupt). Default `None`: reads are
    /// never interrupted.
    pub max_read_age: Option<Duration>,
    /// Checkpoint after the writer has been idle this long (if the WAL has
    /// frames). Default 250 ms.
    pub idle_after: Duration,
}

impl Checkpoints {
    /// Checkpoints left to another process (see [`Checkpoints::external`](field@Checkpoints::external)):
    /// for running beside a WAL replicator such as Litestream.
    ///
    /// ```
    /// let opts = litelane::Options {
    ///     checkpoints: litelane::Checkpoints::external(),
    ///     ..Default::default()
    /// };
    /// assert!(!opts.checkpoints.background);
    /// ```
    pub fn external() -> Checkpoints {
        Checkpoints {
            background: false,
            external: true,
            ..Checkpoints::default()
        }
    }
}

impl Default for Checkpoints {
    fn default() -> Self {
        Checkpoints {
            background: true,
            external: false,
            passive_after_pages: 1000,
            limit_pages: 10_000,
            over_limit: OverLimit::Grow,
            escalation_wait: Duration::from_secs(2),
            max_read_age: None,
            idle_after: Duration::from_millis(250),
        }
    }
}

/// Everything [`Database::open`](crate::Database::open) takes.
///
/// ```
/// use litelane::{Options, Profile};
/// let opts = Options { profile: Profile::Safe, readers: 4, ..Options::default() };
/// assert_eq!(opts.profile.synchronous(), 2);
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Options {
    /// Durability profile. Default [`Profile::Balanced`].
    pub profile: Profile,
    /// Number of reader connections. Default: the number of cores, at least 2.
    pub readers: usize,
    /// Page cache per connection, in KiB (written as `PRAGMA cache_size=-N`).
    /// Default 16,384 KiB (16 MiB) for the writer; readers get the same.
    pub cache_size_kib: u32,
    /// Memory-mapped I/O size of each reader, in bytes (`PRAGMA
    /// mmap_size`). Default 256 MiB; 0 turns mmap off. The writer never
    /// maps: a mapping connection looks each page up in the WAL index
    /// instead of finding it in its own cache (docs/performance.md, "The
    /// memory map").
    pub mmap_size: u64,
    /// How long a connection waits for a lock held by *another process*
    /// before it reports `SQLITE_BUSY`. Writers of this process never wait on
    /// each other through this: they queue in process. Default 5 s.
    pub busy_timeout: Duration,
    /// Prepared statements cached per connection. Default 64.
    pub statement_cache: usize,
    /// Bytes of WAL (or rollback journal) file kept allocated after a
    /// checkpoint resets it (`PRAGMA journal_size_limit`). Default 64 MiB.
    pub journal_size_limit: u64,
    /// Keep the WAL file on disk when the last connection closes
    /// (`SQLITE_FCNTL_PERSIST_WAL`), so it is not re-created and re-grown on
    /// the next open. Default: **off**, as in SQLite: the last connection
    /// to close checkpoints and deletes the WAL. While the database is open
    /// the WAL stays allocated either way (`journal_size_limit`).
    ///
    /// A kept WAL still holds valid frames after a clean close, and SQLite
    /// cannot tell whose they are: if the database file is then replaced
    /// (a backup restored with `mv`), the next open applies the old WAL to
    /// the new file, which reads back the old rows and later overwrites
    /// the restored ones (docs/durability.md, "Replacing a database
    /// file"). Turn it on only where nothing ever replaces the file.
    pub persistent_wal: bool,
    /// Group commit settings.
    pub group_commit: GroupCommit,
    /// Background checkpoint settings.
    pub checkpoints: Checkpoints,
    /// A statement slower than this is recorded in the metrics with its SQL.
    /// Default 100 ms.
    pub slow_statement: Duration,
    /// A wait for the writer longer than this records the label and SQL of the
    /// transaction that held it. Default 50 ms.
    pub long_wait: Duration,
    /// Threads that run `write_async` / `read_async` closures. Default 4.
    pub async_threads: usize,
    /// Queue the writers of every litelane process that opens the same file
    /// through one fair, crash-safe queue (a `<db>-lane` lock file beside the
    /// database; see [`crate::xproc`]) instead of SQLite's sleeping busy
    /// retries. Default: on (ignored for in-memory databases). When the lock
    /// file cannot be used (read-only directory, another OS), litelane falls
    /// back to the busy timeout and says why in
    /// [`Metrics::process_queue_off`](crate::Metrics::process_queue_off).
    pub process_queue: bool,
    /// How long this process keeps the cross-process turn after its writer
    /// goes idle, for its own next write (turn cohorting; see
    /// docs/concurrency.md, "Across processes"). It lingers only while this
    /// process's last pause between writes was shorter than this, so a
    /// process that writes rarely never makes others wait; a linger that is
    /// not used costs the next process at most this. `Duration::ZERO` hands
    /// the turn on as soon as the writer is idle. Default 250 µs. Under
    /// `safe` with the queue on, an idle writer lingers only while no other
    /// process has the database open; otherwise it hands the turn on before
    /// its fsync, which the next process's commit may share.
    pub process_turn_linger: Duration,
    /// Name of a registered SQLite VFS to open every connection through
    /// (`sqlite3_open_v2`'s `zVfs`), e.g. a fault-injecting shim in tests.
    /// Default `None`: SQLite's default VFS. When that is SQLite's own
    /// `unix` VFS, litelane wraps it for two of its connections: the
    /// checkpointer's, to sync the database file every MiB a checkpoint
    /// copies into it (docs/concurrency.md, "Checkpoints"), and the
    /// writer's, to write a transaction's WAL frames in one call
    /// (docs/architecture.md). A VFS named here, or one a program made the
    /// default, is used as it is, handed SQLite's own writes. Ignored for
    /// in-memory databases, which always use `memdb`.
    pub vfs: Option<String>,
    /// With [`vfs`](Options::vfs) named: the writer's connection still
    /// writes each transaction's WAL frames in one call, through a VFS of
    /// litelane's over the named one (`litelane-gather+NAME`), as it does
    /// over SQLite's `unix` VFS. Default `false`: a named VFS is handed
    /// SQLite's own writes, one frame header and one page at a time, which
    /// a VFS that reads meaning into a write's size needs (SQLite's
    /// cksumvfs checksums every write of 512 bytes or more as one page).
    /// Set it for a VFS that stores a write of any size as the same bytes
    /// written piece by piece, as the unix VFSs and litelane's
    /// fault-injecting test VFS do.
    pub gather_over_vfs: bool,
    /// Open every connection with SQLite's stock settings — foreign keys
    /// off, double-quoted string literals accepted, defensive mode off,
    /// `trusted_schema` on — as a program written for stock SQLite expects,
    /// instead of litelane's stricter ones (foreign keys on, `"x"` always an
    /// identifier, defensive, `trusted_schema` off). Default `false`
    /// (litelane's); the Python drop-in `litelane.dbapi` turns it on unless
    /// asked for `strict=True`. Under `safe`, one-statement writes are
    /// combined across processes only between processes with the same
    /// setting (docs/concurrency.md, "Combined commits").
    pub stock_settings: bool,
}

impl Default for Options {
    fn default() -> Self {
        let cores = std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(2);
        Options {
            profile: Profile::Balanced,
            readers: cores.max(2),
            cache_size_kib: 16 * 1024,
            mmap_size: 256 * 1024 * 1024,
            busy_timeout: Duration::from_secs(5),
            statement_cache: 64,
            journal_size_limit: 64 * 1024 * 1024,
            persistent_wal: false,
            group_commit: GroupCommit::default(),
            checkpoints: Checkpoints::default(),
            slow_statement: Duration::from_millis(100),
            long_wait: Duration::from_millis(50),
            process_queue: true,
            process_turn_linger: Duration::from_micros(250),
            async_threads: 4,
            vfs: None,
            gather_over_vfs: false,
            stock_settings: false,
        }
    }
}

impl Options {
    /// Default options with another profile.
    pub fn with_profile(profile: Profile) -> Self {
        Options {
            profile,
            ..Options::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn profiles_parse_by_name_and_reject_unknown_words() {
        for p in Profile::ALL {
            assert_eq!(p.name().parse::<Profile>().unwrap(), p);
        }
        let err = "durable".parse::<Profile>().unwrap_err();
        assert!(err.to_string().contains("durable"));
    }

    #[test]
    fn default_options_have_at_least_two_readers_and_balanced_profile() {
        let o = Options::default();
        assert!(o.readers >= 2);
        assert_eq!(o.profile, Profile::Balanced);
    }
}
