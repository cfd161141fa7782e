//! `litelane stats`, `doctor` and `checkpoint` (being built).

use crate::error::CliError;

/// Arguments of `litelane stats`.
#[derive(clap::Args)]
pub struct StatsArgs {
    /// The database file.
    pub db: String,
}

/// Arguments of `litelane doctor`.
#[derive(clap::Args)]
pub struct DoctorArgs {
    /// The database file.
    pub db: String,
}

/// Arguments of `litelane checkpoint`.
#[derive(clap::Args)]
pub struct CheckpointArgs {
    /// The database file.
    pub db: String,
}

pub fn stats(_a: StatsArgs) -> Result<(), CliError> {
    Err(CliError::Input("stats is not built yet".into()))
}
pub fn doctor(_a: DoctorArgs) -> Result<(), CliError> {
    Err(CliError::Input("doctor is not built yet".into()))
}
pub fn checkpoint(_a: CheckpointArgs) -> Result<(), CliError> {
    Err(CliError::Input("checkpoint is not built yet".into()))
}
