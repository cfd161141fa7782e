//! What the long-run examples (`kill_proof`, `soak`) share: reading their
//! options (`--flag value ...`) and leaving with status 2 on a bad command
//! line. Not an example itself (Cargo builds `examples/*.rs` only).

use litelane::Profile;

/// The result, or, on an error, `NAME: error` on stderr and exit status 2
/// (a bad command line).
pub fn or_exit<T>(name: &str, r: Result<T, String>) -> T {
    r.unwrap_or_else(|e| {
        eprintln!("{name}: {e}");
        std::process::exit(2)
    })
}

/// The options of a command line, one flag at a time, each taking its value
/// when it has one.
pub struct Flags<'a> {
    it: std::slice::Iter<'a, String>,
    flag: &'a str,
}

impl<'a> Flags<'a> {
    /// The options in `argv` (without the program's name).
    pub fn new(argv: &'a [String]) -> Flags<'a> {
        Flags {
            it: argv.iter(),
            flag: "",
        }
    }

    /// The next flag, or `None` at the end.
    pub fn next_flag(&mut self) -> Option<&'a str> {
        self.flag = self.it.next()?;
        Some(self.flag)
    }

    /// The current flag's value (the next argument).
    pub fn value(&mut self) -> Result<&'a str, String> {
        let flag = self.flag;
        self.it
            .next()
            .map(String::as_str)
            .ok_or_else(|| format!("{flag} needs a value"))
    }

    /// The current flag's value as a whole number of `what` (its unit, for
    /// the error).
    pub fn number(&mut self, what: &str) -> Result<u64, String> {
        let v = self.value()?;
        v.parse()
            .map_err(|_| format!("{}: {v:?} is not a whole number of {what}", self.flag))
    }

    /// The current flag's value as WAL profiles: `all` (safe and balanced),
    /// or one profile other than `fast`.
    pub fn wal_profiles(&mut self) -> Result<Vec<Profile>, String> {
        let v = self.value()?;
        if v == "all" {
            return Ok(vec![Profile::Safe, Profile::Balanced]);
        }
        let p: Profile = v.parse().map_err(|e| format!("{}: {e}", self.flag))?;
        if p == Profile::Fast {
            return Err(format!(
                "{}: only the WAL profiles (safe, balanced) or all",
                self.flag
            ));
        }
        Ok(vec![p])
    }

    /// An error naming the current flag as unknown.
    pub fn unknown(&self) -> String {
        format!("unknown option {:?}", self.flag)
    }
}

/// What a writer process prints for its write of row `id`: the id once the
/// write is acknowledged, or `ERR <SQLite code, or -1> <message>`.
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
