//! What a writer process of the long runs prints on stdout, one line per
//! write: the row's id once its `write` returned `Ok`, or `ERR <SQLite
//! code, or -1> <message>`. The parent reads the lines as they come: an id
//! printed is a promise that the row is in the file.

/// The line a writer process prints for its write of row `id`.
pub fn ack_line<T>(id: i64, r: &litelane::Result<T>) -> String {
    match r {
        Ok(_) => format!("{id}\n"),
        Err(e) => format!("ERR {} {e}\n", e.sqlite_code().unwrap_or(-1)),
    }
}

/// Writes `line` to stdout at once; when stdout is closed (the parent is
/// gone), the process ends with status 1.
pub fn print_or_exit(line: &str) {
    use std::io::Write as _;
    let mut out = std::io::stdout().lock();
    if out
        .write_all(line.as_bytes())
        .and_then(|_| out.flush())
        .is_err()
    {
        std::process::exit(1);
    }
}
