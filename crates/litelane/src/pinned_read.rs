//! What the metrics say of the read that pins the WAL ([`PinnedRead`]): a
//! value of its own, so that the metrics (which show it) and the reader pool
//! (which finds it) do not lean on each other.

use std::time::Duration;

/// A read that holds a snapshot, as [`Metrics::wal_pinned_by`](crate::Metrics::wal_pinned_by) shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct PinnedRead {
    /// The read's label (`""` for [`Database::read`](crate::Database::read)).
    pub label: String,
    /// How long its snapshot has been open.
    pub age: Duration,
    /// The first statement the read ran (`""` before it ran one).
    pub sql: String,
}
