//! `litelane import`: the flags go to the `litelane-import` library; this
//! module installs the Ctrl-C handler and prints the `--json` summary.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use litelane_import::{ImportArgs, EXIT_INTERRUPTED};

use crate::error::CliError;

/// Runs `litelane import`; returns the exit status (0 every record stored,
/// 3 some rejected, 130 interrupted); an error is status 1.
pub fn run(mut args: ImportArgs) -> Result<i32, CliError> {
    // Ctrl-C stops the import at the next record, keeping what is committed.
    let flag = Arc::new(AtomicBool::new(false));
    let set = Arc::clone(&flag);
    let _ = ctrlc::set_handler(move || set.store(true, Ordering::SeqCst));
    args.interrupt = Some(flag);
    let json = args.json;
    let outcome = litelane_import::run(args)?;
    if json && !outcome.summary.is_null() && outcome.status != EXIT_INTERRUPTED {
        println!("{}", outcome.summary);
    }
    Ok(outcome.status)
}
