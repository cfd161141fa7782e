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
    /// `import` or `sniff` failed (the library's error, with its cause).
    Import(litelane_import::Error),
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CliError::Engine(e) => write!(f, "{e}"),
            CliError::Io { context, source } => write!(f, "{context}: {source}"),
            CliError::Input(m) => f.write_str(m),
            CliError::Import(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for CliError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            CliError::Engine(e) => Some(e),
            CliError::Io { source, .. } => Some(source),
            CliError::Input(_) => None,
            CliError::Import(e) => e.source(),
        }
    }
}

impl From<litelane_import::Error> for CliError {
    fn from(e: litelane_import::Error) -> Self {
        CliError::Import(e)
    }
}

/// The error and its causes on one line, `: `-separated, each cause said
/// once: a cause whose text the message already holds (the OS error of an
/// I/O error, the engine's error an import wraps) adds nothing.
pub fn chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut next = e.source();
    while let Some(cause) = next {
        let text = cause.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        next = cause.source();
    }
    out
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_chain_names_each_cause_once() {
        let os = std::io::Error::other("disk on fire");
        let inner = litelane_import::Error::io("reading b.csv", os);
        let e = CliError::Import(litelane_import::Error::Context {
            message: format!("file 2 of 2 (b.csv): {inner}"),
            source: Box::new(inner),
        });
        assert_eq!(
            chain(&e),
            "file 2 of 2 (b.csv): reading b.csv: disk on fire"
        );
        // A cause the message does not hold is added.
        let e = CliError::Import(litelane_import::Error::Context {
            message: "file 1 of 1 (a.csv)".into(),
            source: Box::new(litelane_import::Error::Input("bad".into())),
        });
        assert_eq!(chain(&e), "file 1 of 1 (a.csv): bad");
        let e = CliError::io("writing out.db", std::io::Error::other("no space"));
        assert_eq!(chain(&e), "writing out.db: no space");
    }
}
