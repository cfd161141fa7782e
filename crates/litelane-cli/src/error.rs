//! The error type of the `litelane` command: the import library's. Its
//! kinds (engine, I/O with its OS error, bad input) are every command's,
//! and `import` and `sniff` return it as it is.

pub use litelane_import::Error as CliError;

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_chain_names_each_cause_once() {
        let os = std::io::Error::other("disk on fire");
        let inner = litelane_import::Error::io("reading b.csv", os);
        let e = CliError::Context {
            message: format!("file 2 of 2 (b.csv): {inner}"),
            source: Box::new(inner),
        };
        assert_eq!(
            chain(&e),
            "file 2 of 2 (b.csv): reading b.csv: disk on fire"
        );
        // A cause the message does not hold is added.
        let e = CliError::Context {
            message: "file 1 of 1 (a.csv)".into(),
            source: Box::new(CliError::Input("bad".into())),
        };
        assert_eq!(chain(&e), "file 1 of 1 (a.csv): bad");
        let e = CliError::io("writing out.db", std::io::Error::other("no space"));
        assert_eq!(chain(&e), "writing out.db: no space");
    }
}
