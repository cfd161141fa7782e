//! SQLite's error log (`SQLITE_CONFIG_LOG`): the OS errors its Unix VFS
//! reports, kept for the error that follows.

use std::ffi::c_int;
use std::sync::OnceLock;

static ERROR_LOG: OnceLock<bool> = OnceLock::new();

/// An operating-system error that SQLite's Unix VFS reported through its
/// error log (`SQLITE_CONFIG_LOG`): `os_unix.c:LINE: (ERRNO) FUNC(PATH) -
/// TEXT`, with the result code it returned.
#[derive(Debug, Clone)]
pub(crate) struct LoggedOsError {
    /// The SQLite result code the VFS returned (e.g. `SQLITE_IOERR_FSYNC`).
    pub code: c_int,
    pub errno: i32,
    /// The system call that failed (`open`, `full_fsync`, `ftruncate`...).
    pub call: String,
    /// The file it failed on.
    pub path: String,
}

thread_local! {
    /// The last OS error SQLite logged on this thread, until an error of
    /// the same extended code takes it ([`take_logged_os_error`]).
    static LOGGED: std::cell::RefCell<Option<LoggedOsError>> =
        const { std::cell::RefCell::new(None) };
}

/// Installs SQLite's error log callback, once per process and before SQLite
/// initializes (see [`disable_memstatus`] for the same constraint), so that
/// an SQLite error caused by a failed system call can name the call, the
/// file and the `errno` ([`take_logged_os_error`]). Returns whether it took
/// effect. The log is process-wide: a program that set its own
/// `SQLITE_CONFIG_LOG` first keeps it (then this returns false).
pub(crate) fn capture_os_errors() -> bool {
    *ERROR_LOG.get_or_init(|| {
        // SAFETY: as in `disable_memstatus`: before any connection of ours;
        // SQLITE_MISUSE and no change once SQLite is initialized. The
        // callback is a plain `fn` that only touches a thread-local.
        unsafe { rusqlite::trace::config_log(Some(remember_os_error)).is_ok() }
    })
}

/// The log callback: keeps what the Unix VFS says about a failed system
/// call; ignores every other message.
fn remember_os_error(code: c_int, msg: &str) {
    if let Some(e) = parse_os_error(code, msg) {
        LOGGED.with(|l| *l.borrow_mut() = Some(e));
    }
}

/// Reads `os_unix.c:LINE: (ERRNO) FUNC(PATH) - TEXT`.
fn parse_os_error(code: c_int, msg: &str) -> Option<LoggedOsError> {
    let rest = msg.strip_prefix("os_unix.c:")?;
    let rest = &rest[rest.find(": (")? + 3..];
    let (errno, rest) = rest.split_once(") ")?;
    let (call, rest) = rest.split_once('(')?;
    let path = &rest[..rest.rfind(") - ").unwrap_or(rest.len())];
    Some(LoggedOsError {
        code,
        errno: errno.parse().ok()?,
        call: call.to_string(),
        path: path.to_string(),
    })
}

/// The OS error SQLite logged on this thread for an error of extended
/// result code `code`, if the last one logged was of exactly that code (and
/// forgets it): a stale entry of another kind of failure is never taken.
pub(crate) fn take_logged_os_error(code: c_int) -> Option<LoggedOsError> {
    LOGGED.with(|l| {
        let mut l = l.borrow_mut();
        match l.as_ref() {
            Some(e) if e.code == code => l.take(),
            _ => None,
        }
    })
}

#[cfg(test)]
mod log_tests {
    use super::*;

    #[test]
    fn the_vfs_log_line_is_read_into_call_path_and_errno() {
        let e = parse_os_error(
            1034,
            "os_unix.c:38712: (5) full_fsync(/tmp/a b(1).db-wal) - Input/output error",
        )
        .expect("parsed");
        assert_eq!((e.code, e.errno), (1034, 5));
        assert_eq!(e.call, "full_fsync");
        assert_eq!(e.path, "/tmp/a b(1).db-wal");
        for other in [
            "statement aborts at 12: [INSERT INTO t VALUES(1)] UNIQUE constraint failed",
            "os_unix.c:1: no errno here",
            "",
        ] {
            assert!(parse_os_error(19, other).is_none(), "{other}");
        }
    }

    #[test]
    fn a_logged_error_is_taken_once_and_only_by_its_code() {
        remember_os_error(14, "os_unix.c:1: (2) open(/nowhere/x.db) - No such file");
        assert!(take_logged_os_error(10).is_none(), "another code");
        assert!(
            take_logged_os_error(14 | 1 << 8).is_none(),
            "another extended code"
        );
        let e = take_logged_os_error(14).expect("its code");
        assert_eq!((e.errno, e.path.as_str()), (2, "/nowhere/x.db"));
        assert!(take_logged_os_error(14).is_none(), "taken once");
    }
}
