//! `bench ladder` (being built).

use super::report::Outcome;
use super::Ctx;
use crate::error::CliError;

/// Runs the scenario.
pub fn run(_ctx: &Ctx) -> Result<Outcome, CliError> {
    Err(CliError::Input("bench ladder is not built yet".into()))
}
