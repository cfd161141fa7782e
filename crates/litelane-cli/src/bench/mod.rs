//! `litelane bench` (being built).

use crate::error::CliError;

/// Arguments of `litelane bench`.
#[derive(clap::Args)]
pub struct BenchArgs {
    /// The scenario: ladder, wal, threads, contention, import, insert, all.
    pub scenario: String,
}

pub fn run(_a: BenchArgs) -> Result<(), CliError> {
    Err(CliError::Input("bench is not built yet".into()))
}
