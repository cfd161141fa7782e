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

/// True when `e` or one of its causes is a commit whose outcome is unknown
/// ([`litelane::Error::OutcomeUnknown`]).
pub fn outcome_unknown(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut next = Some(e);
    while let Some(err) = next {
        if err
            .downcast_ref::<litelane::Error>()
            .is_some_and(litelane::Error::is_outcome_unknown)
        {
            return true;
        }
        next = err.source();
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_outcome_unknown_is_found_through_the_chain() {
        let unknown = litelane::Error::OutcomeUnknown {
            path: "d.db".into(),
            file: "d.db-wal".into(),
            code: 10,
            extended_code: 1034,
            cause: "Input/output error".into(),
            context: "COMMIT".into(),
            os: Some(std::io::Error::from_raw_os_error(5).into()),
        };
        let e = CliError::Context {
            message: "importing".into(),
            source: Box::new(CliError::Engine(unknown)),
        };
        assert!(outcome_unknown(&e));
        // The chain goes down to the operating system's error.
        let mut cause: &dyn std::error::Error = &e;
        while let Some(next) = cause.source() {
            cause = next;
        }
        let os = cause
            .downcast_ref::<std::io::Error>()
            .expect("ends in the OS error");
        assert_eq!(os.raw_os_error(), Some(5));
        let plain = CliError::Engine(litelane::Error::ReadOnly { path: "d".into() });
        assert!(!outcome_unknown(&plain));
        assert!(!outcome_unknown(&CliError::Input("bad".into())));
    }

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
