//! The `litelane` command: import, sniff, stats, doctor, checkpoint,
//! backup, recover. (The benchmarks are the separate `litelane-bench`.)
//!
//! Each subcommand lives in its own module; this file only parses the
//! command line and turns an error into a message and an exit code
//! (0 success, 1 failure, 2 usage error, 4 a commit's outcome unknown;
//! `import` also exits 3 when it finished but rejected records, and 130
//! when interrupted by Ctrl-C).
//! The binary (`src/main.rs`) only calls [`main`].
//!
//! The import itself is the `litelane-import` library; `import` and
//! `sniff` here only parse flags into its options, report what it tells
//! them on stderr (the progress bar, rejects, the account of the run), print
//! and choose the exit status. [`import::ImportFlags`] is public for
//! `litelane-bench`'s import child.

#![deny(unsafe_code)]

mod error;
pub mod import;
mod inspect;
mod sniff;

use clap::{Parser, Subcommand};

use error::CliError;

/// The fast lane for SQLite.
#[derive(Parser)]
#[command(name = "litelane", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Import a CSV, TSV or NDJSON file into a table. Exit status: 0 every
    /// record stored, 3 finished with rejected records, 1 failed, 2 usage
    /// error, 4 the last commit's outcome is unknown (its fsync failed: it
    /// may or may not be stored), 130 interrupted (Ctrl-C; what is
    /// committed stays).
    Import(Box<import::ImportFlags>),
    /// Print the plan an import of a CSV/TSV file would use: delimiter,
    /// quote, header, skipped lines, index column, column types and null
    /// tokens (`--json`: the form `import --plan` reads).
    Sniff(sniff::SniffArgs),
    /// Show file, WAL, page and table statistics of a database.
    Stats(inspect::StatsArgs),
    /// Check a database's settings against best practice.
    Doctor(inspect::DoctorArgs),
    /// Run one checkpoint.
    Checkpoint(inspect::CheckpointArgs),
    /// Copy a database that may be in use, consistently, to a new file.
    Backup(inspect::BackupArgs),
    /// Salvage what can be read from a damaged database into a new file.
    Recover(inspect::RecoverArgs),
}

/// Runs the `litelane` command with the process's arguments, and exits the
/// process with the command's status.
pub fn main() {
    std::process::exit(run(std::env::args_os()));
}

/// Exit status when a commit's outcome is unknown ([`litelane::Error::OutcomeUnknown`]:
/// its fsync failed, the change may or may not be stored).
pub const EXIT_OUTCOME_UNKNOWN: i32 = 4;

/// Runs the `litelane` command with `args` (the first is the program's name)
/// and returns its exit status: 0 on success, 1 on an error (printed on
/// stderr), 2 on bad arguments (clap's usage message),
/// [`EXIT_OUTCOME_UNKNOWN`] (4) when a commit's outcome is unknown, or the
/// import's own status. The Python package's `litelane` console script calls this.
pub fn run<I, T>(args: I) -> i32
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return e.exit_code();
        }
    };
    let mut status = 0;
    let result: Result<(), CliError> = match cli.command {
        Command::Import(a) => import::run(*a).map(|code| status = code),
        Command::Sniff(a) => sniff::run(a),
        Command::Stats(a) => inspect::stats(a),
        Command::Doctor(a) => inspect::doctor(a),
        Command::Checkpoint(a) => inspect::checkpoint(a),
        Command::Backup(a) => inspect::backup(a),
        Command::Recover(a) => inspect::recover(a),
    };
    match result {
        Ok(()) => status,
        Err(e) if error::outcome_unknown(&e) => {
            eprintln!("litelane: outcome unknown: {}", error::chain(&e));
            eprintln!(
                "litelane: the last commit may or may not be stored (exit status {EXIT_OUTCOME_UNKNOWN}): \
                 do not simply run the command again; check the disk, open the database again and \
                 check whether the change is there first (docs/durability.md, \"What a caller \
                 should do on OutcomeUnknown\")"
            );
            EXIT_OUTCOME_UNKNOWN
        }
        Err(e) => {
            eprintln!("litelane: error: {}", error::chain(&e));
            1
        }
    }
}
