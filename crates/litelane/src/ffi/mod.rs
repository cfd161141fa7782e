//! Every `unsafe` of the engine lives in this private module
//! (`#![deny(unsafe_code)]` holds everywhere else).
//!
//! - SQLite's C API where rusqlite does not wrap it: turning off the global
//!   memory-statistics mutex (`sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0)`)
//!   and reading `SQLITE_DBSTATUS_DEFERRED_FKS`.
//! - [`JobRef`]: a queued write closure borrowed across threads for group
//!   commit by flat combining.
//! - [`BulkStatement`]: the bulk inserter's statement, bound straight from
//!   the rows' borrowed values (`SQLITE_STATIC`: no copy per value) and
//!   stepped in the same call, so the values outlive every read SQLite makes
//!   of them.
//! - [`memory_vfs`]: the VFS of in-memory databases, SQLite's `memdb` for
//!   their own names and the default VFS for every other file (`ATTACH`).
//! - [`paced_vfs`]: the checkpointer's VFS, SQLite's `unix` VFS with the
//!   database file synced every MiB written; and [`gathering_vfs`], the
//!   writer's, with a transaction's WAL frames written in one system call
//!   (both used only while `unix` is the default VFS);
//!   [`gathering_vfs_over`] gathers over a VFS the caller names.
//!
//! One file per concern: `sqlite` (C calls rusqlite lacks), `log` (the
//! error log), `shared_page` (a mapped page and its futexes), `job_ref`
//! (group commit's borrowed closures), `bulk_statement` (the bulk insert's
//! statement), `memory_vfs` (the in-memory databases' VFS), `paced_vfs` (the
//! checkpointer's and the writer's), `vfs_forward` (what these VFSs hand on
//! to the one they wrap).

mod bulk_statement;
mod job_ref;
mod log;
mod memory_vfs;
mod paced_vfs;
#[cfg(target_os = "linux")]
mod shared_page;
mod sqlite;
mod vfs_forward;

pub(crate) use bulk_statement::BulkStatement;
pub(crate) use job_ref::{enter_with_job, JobRef};
pub(crate) use log::{capture_os_errors, take_logged_os_error};
pub(crate) use memory_vfs::memory_vfs;
pub(crate) use paced_vfs::{gathering_vfs, gathering_vfs_over, paced_vfs};
#[cfg(target_os = "linux")]
pub(crate) use shared_page::{
    futex_wait, futex_wake_all, futex_wake_one, futex_wake_one_move_rest, SharedPage,
};
pub(crate) use sqlite::{
    data_version, disable_memstatus, has_deferred_fk_violations, is_complete,
    set_last_insert_rowid, set_persistent_wal, sync_journal,
};
