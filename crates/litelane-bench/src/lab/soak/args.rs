//! The soak's command line.
//!
//! - `--seconds N`: length of the run, all profiles at once (default 120);
//! - `--profile safe|balanced|all` (default all);
//! - `--dir PATH` for the databases (default: a temporary directory);
//! - `--csv PATH` (default soak.csv), `--svg PATH` (no chart if absent);
//! - `--no-explicit-checkpoints`: only the background checkpointer (by
//!   default a thread also calls `Database::checkpoint(Passive)` every 5 s);
//! - `--kill-every S`: seconds between SIGKILLs of the writer process
//!   (default 180; 0: no writer process);
//! - `--full-for S`: seconds the filesystem of `--dir` is kept nearly full
//!   (default 0: never), starting at `--full-at S` (default: half-way),
//!   leaving `--full-leave MIB` free (default 128). It refuses filesystems
//!   larger than 8 GiB, so it cannot fill a shared disk: `scripts/soak`
//!   mounts a 1 GiB filesystem for it;
//! - `--max-checkpoint-hold-ms N`: the longest any write may wait on a
//!   checkpoint, in milliseconds (default 50): the longest a checkpoint of
//!   the soak process or of a writer process held their writers back
//!   (`Metrics::checkpoint_hold_max`, which the writer process prints);
//! - `--hold-writers`: bound the WAL by holding writers back
//!   (`OverLimit::HoldWriters`, litelane's behaviour before issue 39)
//!   instead of the default `OverLimit::Grow`, to compare.

use std::path::PathBuf;

use litelane::{OverLimit, Profile};

use crate::lab::flags::Flags;

/// What the command line asks for.
pub struct Args {
    pub seconds: u64,
    pub profiles: Vec<Profile>,
    pub dir: Option<PathBuf>,
    pub csv: PathBuf,
    pub svg: Option<PathBuf>,
    pub explicit_checkpoints: bool,
    pub kill_every: u64,
    pub full_at: Option<u64>,
    pub full_for: u64,
    pub full_leave_mib: u64,
    pub max_hold_ms: u64,
    pub over_limit: OverLimit,
}

/// `argv` (the options only), or what is wrong with it.
pub fn parse(argv: &[String]) -> Result<Args, String> {
    let mut a = Args {
        seconds: 120,
        profiles: vec![Profile::Safe, Profile::Balanced],
        dir: None,
        csv: PathBuf::from("soak.csv"),
        svg: None,
        explicit_checkpoints: true,
        kill_every: 180,
        full_at: None,
        full_for: 0,
        full_leave_mib: 128,
        max_hold_ms: 50,
        // The library's default (`Grow`), unless `--hold-writers`.
        over_limit: litelane::Checkpoints::default().over_limit,
    };
    let mut flags = Flags::new(argv);
    while let Some(flag) = flags.next_flag() {
        match flag {
            "--seconds" => a.seconds = flags.number("seconds")?,
            "--kill-every" => a.kill_every = flags.number("seconds")?,
            "--full-at" => a.full_at = Some(flags.number("seconds")?),
            "--full-for" => a.full_for = flags.number("seconds")?,
            "--full-leave" => a.full_leave_mib = flags.number("MiB")?,
            "--profile" => a.profiles = flags.wal_profiles()?,
            "--dir" => a.dir = Some(PathBuf::from(flags.value()?)),
            "--csv" => a.csv = PathBuf::from(flags.value()?),
            "--svg" => a.svg = Some(PathBuf::from(flags.value()?)),
            "--no-explicit-checkpoints" => a.explicit_checkpoints = false,
            "--max-checkpoint-hold-ms" => a.max_hold_ms = flags.number("milliseconds")?,
            "--hold-writers" => a.over_limit = OverLimit::HoldWriters,
            _ => return Err(flags.unknown()),
        }
    }
    Ok(a)
}
