//! The WAL file kept allocated ahead of the writer.
//!
//! A commit that appends past the end of the WAL file grows it, and growing a
//! file is a metadata change: the commit's `fdatasync` then writes the
//! file's inode (and on a journaling file system waits for a journal commit)
//! besides the frames. Measured on ext4, a `safe` commit into a growing WAL
//! costs about twice one into space the file already has (docs/performance.md,
//! "WAL space"). SQLite reuses the WAL from its start after a checkpoint, so
//! a WAL that has grown once stays cheap; this module gets there from the
//! first commit: before each `COMMIT`, when fewer than [`HEADROOM`] bytes of
//! allocated file are left past the frames, the file is extended with zeros
//! by [`CHUNK`], never past `journal_size_limit` (SQLite would truncate it
//! back).
//!
//! Zeros past the last frame are never read as frames: a frame is valid only
//! with the WAL header's salts and a checksum chained from the frames before
//! it. The extension is written only past the end of the file and only
//! while this connection holds SQLite's WAL write lock (inside a write
//! transaction), so no other writer of any process appends at the same time.

use std::fs::OpenOptions;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;

/// Bytes of allocated WAL left past the frames below which the file is
/// extended before a commit: 1 MiB.
pub(crate) const HEADROOM: u64 = 1024 * 1024;

/// Bytes by which the WAL file is extended at a time: 4 MiB.
pub(crate) const CHUNK: u64 = 4 * 1024 * 1024;

/// The WAL header, before the first frame: 32 bytes.
const WAL_HEADER: u64 = 32;

/// A frame's header, before its page: 24 bytes.
const FRAME_HEADER: u64 = 24;

/// What the writer knows of its WAL file's allocated size.
pub(crate) struct WalSpace {
    path: PathBuf,
    /// Bytes of one frame (page size + frame header).
    frame: u64,
    /// The file is never extended past this (`journal_size_limit`, bytes).
    limit: u64,
    /// The file's size when last looked at or extended, in bytes.
    allocated: u64,
}

impl WalSpace {
    /// For the database file at `db_path` (its WAL is `<db>-wal`), pages of
    /// `page_size` bytes, extended up to `limit` bytes.
    pub fn new(db_path: &str, page_size: u64, limit: u64) -> WalSpace {
        WalSpace {
            path: PathBuf::from(format!("{db_path}-wal")),
            frame: page_size + FRAME_HEADER,
            limit,
            allocated: 0,
        }
    }

    /// Called inside a write transaction, before its `COMMIT`, with the
    /// frames the WAL held after the last commit: extends the file when the
    /// headroom is used up. Any failure (no such file, a full disk) leaves
    /// the file as it was; SQLite then grows it itself, as without this.
    pub fn before_commit(&mut self, frames: u64) {
        let used = WAL_HEADER + frames * self.frame;
        if used + HEADROOM <= self.allocated || self.allocated >= self.limit {
            return;
        }
        // Never create: the WAL is SQLite's file.
        let Ok(file) = OpenOptions::new().write(true).open(&self.path) else {
            return;
        };
        let Ok(len) = file.metadata().map(|m| m.len()) else {
            return;
        };
        self.allocated = len;
        let target = (used + CHUNK).min(self.limit);
        let mut at = len;
        let zeros = vec![0u8; 256 * 1024];
        while at < target {
            let n = (target - at).min(zeros.len() as u64) as usize;
            if file.write_all_at(&zeros[..n], at).is_err() {
                return;
            }
            at += n as u64;
            self.allocated = at;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extends_only_past_the_end_and_never_past_the_limit() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("w.db");
        let wal = dir.path().join("w.db-wal");
        std::fs::write(&wal, b"frames").unwrap();
        let mut space = WalSpace::new(db.to_str().unwrap(), 4096, 6 * 1024 * 1024);
        space.before_commit(10);
        let bytes = std::fs::read(&wal).unwrap();
        assert_eq!(&bytes[..6], b"frames", "what was there is untouched");
        assert!(bytes[6..].iter().all(|&b| b == 0));
        assert_eq!(bytes.len() as u64, WAL_HEADER + 10 * 4120 + CHUNK);
        // Enough headroom: nothing to do.
        space.before_commit(11);
        assert_eq!(std::fs::metadata(&wal).unwrap().len(), bytes.len() as u64);
        // Near the end: extended again, up to the limit only.
        space.before_commit(1200);
        assert_eq!(std::fs::metadata(&wal).unwrap().len(), 6 * 1024 * 1024);
        space.before_commit(1400);
        assert_eq!(std::fs::metadata(&wal).unwrap().len(), 6 * 1024 * 1024);
    }

    #[test]
    fn never_creates_the_wal() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("none.db");
        WalSpace::new(db.to_str().unwrap(), 4096, 64 << 20).before_commit(0);
        assert!(!dir.path().join("none.db-wal").exists());
    }
}
