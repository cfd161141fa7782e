//! Reading the long runs' options (`--flag value ...`): a bad command line
//! is an `Err` with the message, which the run prints before leaving with
//! status 2.

use litelane::Profile;

/// The options of a command line, one flag at a time, each taking its value
/// when it has one.
pub struct Flags<'a> {
    it: std::slice::Iter<'a, String>,
    flag: &'a str,
}

impl<'a> Flags<'a> {
    /// The options in `argv` (without the program's and the run's names).
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

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn flags_take_their_values_and_name_what_is_wrong() {
        let a = argv("--seconds 60 --profile all --dir");
        let mut f = Flags::new(&a);
        assert_eq!(f.next_flag(), Some("--seconds"));
        assert_eq!(f.number("seconds"), Ok(60));
        assert_eq!(f.next_flag(), Some("--profile"));
        assert_eq!(f.wal_profiles(), Ok(vec![Profile::Safe, Profile::Balanced]));
        assert_eq!(f.next_flag(), Some("--dir"));
        assert_eq!(f.value(), Err("--dir needs a value".to_string()));
        let a = argv("--rounds x --profile fast");
        let mut f = Flags::new(&a);
        f.next_flag();
        assert!(f
            .number("rounds")
            .unwrap_err()
            .contains("not a whole number"));
        f.next_flag();
        assert!(f
            .wal_profiles()
            .unwrap_err()
            .contains("only the WAL profiles"));
        assert_eq!(f.unknown(), "unknown option \"--profile\"");
    }
}
