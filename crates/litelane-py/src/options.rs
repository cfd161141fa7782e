//! What Python passes the engine: its options by name, and `SQLITE_LIMIT_*`
//! categories by number.

use std::time::Duration;

use litelane::{Options, Profile};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::errors::{exc, Class, IntoPy};

fn seconds(py: Python<'_>, name: &str, v: &Bound<'_, PyAny>) -> PyResult<Duration> {
    let s: f64 = v.extract().map_err(|_| {
        exc(
            py,
            Class::ProgrammingError,
            format!("option {name}: expected seconds (a number)"),
        )
    })?;
    Duration::try_from_secs_f64(s).map_err(|_| {
        exc(
            py,
            Class::ProgrammingError,
            format!("option {name}: {s} is not a duration in seconds"),
        )
    })
}

pub fn build_options(
    py: Python<'_>,
    profile: &str,
    readers: Option<usize>,
    options: Option<&Bound<'_, PyDict>>,
) -> PyResult<Options> {
    let profile: Profile = profile.parse().py_err(py)?;
    let mut o = Options::with_profile(profile);
    if let Some(r) = readers {
        if r == 0 {
            return Err(exc(
                py,
                Class::ProgrammingError,
                "readers must be at least 1",
            ));
        }
        o.readers = r;
    }
    let Some(options) = options else {
        return Ok(o);
    };
    let bad = |name: &str, what: &str| {
        exc(
            py,
            Class::ProgrammingError,
            format!("option {name}: expected {what}"),
        )
    };
    for (k, v) in options.iter() {
        let name: String = k.extract()?;
        let int =
            |what: &str| -> PyResult<u64> { v.extract::<u64>().map_err(|_| bad(&name, what)) };
        let flag =
            || -> PyResult<bool> { v.extract::<bool>().map_err(|_| bad(&name, "True or False")) };
        let pages = || -> PyResult<u32> {
            u32::try_from(int("pages")?).map_err(|_| bad(&name, "pages below 2^32"))
        };
        match name.as_str() {
            "cache_size_kib" => {
                o.cache_size_kib =
                    u32::try_from(int("KiB")?).map_err(|_| bad(&name, "KiB below 2^32"))?
            }
            "mmap_size" => o.mmap_size = int("bytes")?,
            "busy_timeout" => o.busy_timeout = seconds(py, &name, &v)?,
            "statement_cache" => o.statement_cache = int("a count")? as usize,
            "journal_size_limit" => o.journal_size_limit = int("bytes")?,
            "persistent_wal" => o.persistent_wal = flag()?,
            "group_commit" => o.group_commit.enabled = flag()?,
            "group_commit_max_jobs" => o.group_commit.max_jobs = int("a count")?.max(1) as usize,
            "group_commit_max_wait" => o.group_commit.max_wait = seconds(py, &name, &v)?,
            "background_checkpoints" => o.checkpoints.background = flag()?,
            "checkpoint_after_pages" => o.checkpoints.passive_after_pages = pages()?,
            "wal_limit_pages" => o.checkpoints.limit_pages = pages()?,
            "over_limit" => {
                o.checkpoints.over_limit = match v.extract::<String>().as_deref() {
                    Ok("grow") => litelane::OverLimit::Grow,
                    Ok("hold_writers") => litelane::OverLimit::HoldWriters,
                    _ => return Err(bad(&name, "\"grow\" or \"hold_writers\"")),
                }
            }
            "escalation_wait" => o.checkpoints.escalation_wait = seconds(py, &name, &v)?,
            "max_read_age" => {
                o.checkpoints.max_read_age = match v.is_none() {
                    true => None,
                    false => Some(seconds(py, &name, &v)?),
                }
            }
            "slow_statement" => o.slow_statement = seconds(py, &name, &v)?,
            "long_wait" => o.long_wait = seconds(py, &name, &v)?,
            "async_threads" => o.async_threads = int("a count")?.max(1) as usize,
            "process_queue" => o.process_queue = flag()?,
            "stock_settings" => o.stock_settings = flag()?,
            "process_turn_linger" => o.process_turn_linger = seconds(py, &name, &v)?,
            _ => {
                return Err(exc(
                    py,
                    Class::ProgrammingError,
                    format!(
                        "unknown option {name:?}: expected one of cache_size_kib, mmap_size, \
                         busy_timeout, statement_cache, journal_size_limit, persistent_wal, \
                         group_commit, group_commit_max_jobs, group_commit_max_wait, \
                         background_checkpoints, checkpoint_after_pages, wal_limit_pages, \
                         over_limit, escalation_wait, max_read_age, slow_statement, long_wait, \
                         async_threads, process_queue, stock_settings, process_turn_linger"
                    ),
                ))
            }
        }
    }
    Ok(o)
}

/// The limit of an `SQLITE_LIMIT_*` number, as `sqlite3` checks it.
pub fn limit_of(py: Python<'_>, category: i32) -> PyResult<litelane::rusqlite::limits::Limit> {
    use litelane::rusqlite::limits::Limit::*;
    Ok(match category {
        0 => SQLITE_LIMIT_LENGTH,
        1 => SQLITE_LIMIT_SQL_LENGTH,
        2 => SQLITE_LIMIT_COLUMN,
        3 => SQLITE_LIMIT_EXPR_DEPTH,
        4 => SQLITE_LIMIT_COMPOUND_SELECT,
        5 => SQLITE_LIMIT_VDBE_OP,
        6 => SQLITE_LIMIT_FUNCTION_ARG,
        7 => SQLITE_LIMIT_ATTACHED,
        8 => SQLITE_LIMIT_LIKE_PATTERN_LENGTH,
        9 => SQLITE_LIMIT_VARIABLE_NUMBER,
        10 => SQLITE_LIMIT_TRIGGER_DEPTH,
        11 => SQLITE_LIMIT_WORKER_THREADS,
        _ => {
            return Err(exc(
                py,
                Class::ProgrammingError,
                "'category' is out of bounds",
            ))
        }
    })
}
