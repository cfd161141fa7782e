//! The one error type of the `litelane` command.

use std::fmt;

/// Everything a subcommand can fail with. The message always says what went
/// wrong and where (file, line, table).
#[derive(Debug)]
pub enum CliError {
    /// An error from the engine (carries SQLite's codes and context).
    Engine(litelane::Error),
    /// Reading or writing a file failed.
    Io {
        /// What was being done, with the path.
        context: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// The input or the arguments are not usable.
    Input(String),
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CliError::Engine(e) => write!(f, "{e}"),
            CliError::Io { context, source } => write!(f, "{context}: {source}"),
            CliError::Input(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for CliError {}

impl From<litelane::Error> for CliError {
    fn from(e: litelane::Error) -> Self {
        CliError::Engine(e)
    }
}

impl From<rusqlite::Error> for CliError {
    fn from(e: rusqlite::Error) -> Self {
        CliError::Engine(e.into())
    }
}

impl CliError {
    /// An I/O error with what was being done.
    pub fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        CliError::Io {
            context: context.into(),
            source,
        }
    }
}
