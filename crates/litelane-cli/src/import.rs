//! `litelane import` (being built).

use crate::error::CliError;

/// Arguments of `litelane import`.
#[derive(clap::Args)]
pub struct ImportArgs {
    /// The file to import (`-` for stdin).
    pub source: String,
}

pub fn run(_args: ImportArgs) -> Result<(), CliError> {
    Err(CliError::Input("import is not built yet".into()))
}
