//! The engine's metrics as Python dicts.

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

/// A read that pins the WAL as a dict (`label`, `age` in seconds, `sql`),
/// or None.
fn pinned_read_dict<'py>(
    py: Python<'py>,
    read: Option<&litelane::PinnedRead>,
) -> PyResult<Option<Bound<'py, PyDict>>> {
    let Some(r) = read else { return Ok(None) };
    let d = PyDict::new(py);
    d.set_item("label", &r.label)?;
    d.set_item("age", r.age.as_secs_f64())?;
    d.set_item("sql", &r.sql)?;
    Ok(Some(d))
}

/// The WAL over its limit as a dict (`duration` in seconds, `wal_pages`,
/// `limit_pages`, `reason`: "pinned_by_read", "pinned_elsewhere",
/// "catching_up" or "checkpoint_failed"; `pinned_by` for the first,
/// `error` for the last), or None while it is within its limit.
fn over_limit_dict<'py>(
    py: Python<'py>,
    over: Option<&litelane::WalOverLimit>,
) -> PyResult<Option<Bound<'py, PyDict>>> {
    use litelane::OverLimitReason as R;
    let Some(o) = over else { return Ok(None) };
    let d = PyDict::new(py);
    d.set_item("duration", o.duration.as_secs_f64())?;
    d.set_item("wal_pages", o.wal_pages)?;
    d.set_item("limit_pages", o.limit_pages)?;
    let reason = match &o.reason {
        R::PinnedByRead(r) => {
            d.set_item("pinned_by", pinned_read_dict(py, Some(r))?)?;
            "pinned_by_read"
        }
        R::PinnedElsewhere => "pinned_elsewhere",
        R::CatchingUp => "catching_up",
        R::CheckpointFailed(e) => {
            d.set_item("error", e)?;
            "checkpoint_failed"
        }
        _ => "other",
    };
    d.set_item("reason", reason)?;
    Ok(Some(d))
}

/// A snapshot of the engine's metrics as a dict; durations in seconds.
pub fn metrics_dict<'py>(py: Python<'py>, m: &litelane::Metrics) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("queue_wait_p50", m.queue_wait_p50.as_secs_f64())?;
    d.set_item("queue_wait_p95", m.queue_wait_p95.as_secs_f64())?;
    d.set_item("queue_wait_p99", m.queue_wait_p99.as_secs_f64())?;
    d.set_item("queue_wait_max", m.queue_wait_max.as_secs_f64())?;
    d.set_item("queue_depth", m.queue_depth)?;
    d.set_item("transactions", m.transactions)?;
    d.set_item("rollbacks", m.rollbacks)?;
    d.set_item("outcomes_unknown", m.outcomes_unknown)?;
    d.set_item("rows_written", m.rows_written)?;
    d.set_item("commits", m.commits)?;
    d.set_item("mean_group_size", m.mean_group_size())?;
    d.set_item("group_sizes", m.group_sizes.to_vec())?;
    d.set_item("busy_errors", m.busy_errors)?;
    d.set_item("checkpoints", m.checkpoints)?;
    d.set_item("checkpoints_escalated", m.checkpoints_escalated)?;
    d.set_item("checkpoint_pages", m.checkpoint_pages)?;
    d.set_item("checkpoint_time", m.checkpoint_time.as_secs_f64())?;
    d.set_item("wal_pages", m.wal_pages)?;
    d.set_item(
        "wal_over_limit",
        over_limit_dict(py, m.wal_over_limit.as_ref())?,
    )?;
    d.set_item("wal_over_limit_count", m.wal_over_limit_count)?;
    d.set_item("wal_over_limit_time", m.wal_over_limit_time.as_secs_f64())?;
    d.set_item(
        "wal_pinned_by",
        pinned_read_dict(py, m.wal_pinned_by.as_ref())?,
    )?;
    d.set_item("checkpoint_holds", m.checkpoint_holds)?;
    d.set_item("checkpoint_hold_max", m.checkpoint_hold_max.as_secs_f64())?;
    d.set_item("checkpoint_hold_time", m.checkpoint_hold_time.as_secs_f64())?;
    d.set_item("wal_file_bytes", m.wal_file_bytes)?;
    d.set_item("wal_syncs", m.wal_syncs)?;
    d.set_item("syncs_shared", m.syncs_shared)?;
    d.set_item("combined_elsewhere", m.combined_elsewhere)?;
    d.set_item("combined_here", m.combined_here)?;
    d.set_item("process_turns", m.process_turns)?;
    d.set_item("turns_out_of_order", m.turns_out_of_order)?;
    d.set_item("process_queue_off", m.process_queue_off.as_deref())?;
    d.set_item("combined_commits_off", m.combined_commits_off.as_deref())?;
    let slow = PyList::empty(py);
    for s in &m.slow_statements {
        let e = PyDict::new(py);
        e.set_item("sql", &s.sql)?;
        e.set_item("duration", s.duration.as_secs_f64())?;
        slow.append(e)?;
    }
    d.set_item("slow_statements", slow)?;
    let long = PyList::empty(py);
    for w in &m.long_waits {
        let e = PyDict::new(py);
        e.set_item("waited", w.waited.as_secs_f64())?;
        e.set_item("waiter_label", &w.waiter_label)?;
        e.set_item("holder_label", &w.holder_label)?;
        e.set_item("holder_sql", &w.holder_sql)?;
        long.append(e)?;
    }
    d.set_item("long_waits", long)?;
    Ok(d)
}
