//! The lock file where there are no open-file-description locks (not
//! Linux): every call says the cross-process queue is not there, and the
//! engine goes on without it.
//!
//! Other systems: no open-file-description byte-range locks through a
//! safe API yet; the queue is off (see docs/concurrency.md).

use std::fs::File;
use std::path::Path;
use std::time::SystemTime;

use super::layout::Record;
use super::{HolderInfo, Patience, Stop};

const OFF: &str = "the cross-process queue is only implemented on Linux";

pub fn open_lock_file(_: &Path, _: &Path) -> Result<File, String> {
    Err(OFF.into())
}
pub fn read_failed_at(_: &Path) -> Option<u64> {
    None
}
pub type FileId = (u64, u64);
pub fn file_id(_: &File) -> Result<FileId, String> {
    Err(OFF.into())
}
pub fn reopen_same(_: &Path, _: FileId) -> Result<File, String> {
    Err(OFF.into())
}
pub fn initialize(_: &File, _: std::time::Duration) -> Result<(), String> {
    Err(OFF.into())
}
pub enum Start {
    Granted(u64, SystemTime),
    Wait(Pending),
}
pub struct Pending;

impl Pending {
    // Never built: `start` fails here.
    pub fn ticket(&self) -> u64 {
        0
    }
}
pub fn start(_: &File, _: u32, _: &str, _: &Patience<'_>) -> Result<Start, Stop> {
    Err(Stop::Failed(OFF.into()))
}
pub fn finish(
    _: &File,
    _: Pending,
    _: &dyn Fn() -> bool,
    _: &Patience<'_>,
) -> Result<Option<(u64, SystemTime)>, Stop> {
    Err(Stop::Failed(OFF.into()))
}
pub fn unlock_turn_byte(_: &File) -> std::io::Result<()> {
    Ok(())
}
pub fn unlock_ticket(_: &File, _: u64) -> std::io::Result<()> {
    Ok(())
}
pub fn write_record(_: &File, _: &Record) -> std::io::Result<()> {
    Ok(())
}
pub fn record_of(_: &File, _: u64) -> Option<HolderInfo> {
    None
}
pub fn holder(_: &File) -> Option<HolderInfo> {
    None
}
pub fn announce_presence(_: &File) -> std::io::Result<bool> {
    Err(std::io::Error::other(OFF))
}
pub fn is_at(_: &Path, _: FileId) -> bool {
    true
}
pub fn remove_if_last(_: &File, _: &Path, _: FileId) -> bool {
    false
}
pub fn others_present(_: &File) -> std::io::Result<bool> {
    Ok(true)
}
pub fn queued(_: &File) -> u64 {
    0
}
pub fn read_locked(_: &File, _: u64) -> std::io::Result<bool> {
    Ok(false)
}
