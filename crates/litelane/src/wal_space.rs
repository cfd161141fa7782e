//! The WAL file kept allocated ahead of the writer.
//!
//! A commit that appends past the end of the WAL file grows it, and growing a
//! file is a metadata change: the commit's `fdatasync` then writes the
//! file's inode (and on a journaling file system waits for a journal commit)
//! besides the frames. Measured on ext4, a `safe` commit into a growing WAL
//! costs about twice one into space the file already has (docs/performance.md,
//! "WAL space"). SQLite reuses the WAL from its start after a checkpoint, so
//! a WAL that has grown once stays cheap; this module gets there from the
//! first commit: before each `COMMIT`, when little allocated file is left
//! past the frames, the file is extended with zeros, never past
//! `journal_size_limit` (SQLite would truncate it back).
//!
//! The steps grow with the file: [`FIRST_STEP`] for a new WAL, then as much
//! as the file already has, up to [`CHUNK`]; an extension is due when less
//! than half a step (at most [`HEADROOM`]) is left. A short-lived program
//! thus writes zeros in proportion to the WAL it uses: a first commit that
//! wrote a whole 4 MiB chunk cost about 2.5 ms, a tenth of a 1,000-insert
//! run (docs/performance.md, "WAL space").
//!
//! Zeros past the last frame are never read as frames: a frame is valid only
//! with the WAL header's salts and a checksum chained from the frames before
//! it. The extension is written only past the end of the file and only
//! while this connection holds SQLite's WAL write lock (inside a write
//! transaction), so no other writer of any process appends at the same time.

use std::fs::OpenOptions;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;

/// The most allocated WAL left past the frames below which the file is
/// extended before a commit: 1 MiB (half a step when steps are smaller).
pub(crate) const HEADROOM: u64 = 1024 * 1024;

/// The largest step by which the WAL file is extended: 4 MiB.
pub(crate) const CHUNK: u64 = 4 * 1024 * 1024;

/// The step by which a new (or small) WAL file is extended: 256 KiB.
pub(crate) const FIRST_STEP: u64 = 256 * 1024;

/// Bytes by which a WAL file of `len` bytes is extended: as many as it has,
/// from [`FIRST_STEP`] to [`CHUNK`].
fn step(len: u64) -> u64 {
    len.clamp(FIRST_STEP, CHUNK)
}

/// Bytes of allocated file left past the frames below which a file of
/// `len` bytes is extended: half a step, at most [`HEADROOM`].
fn headroom(len: u64) -> u64 {
    (step(len) / 2).min(HEADROOM)
}

/// What an extension writes, 256 KiB at a time: zero-initialized static
/// memory (the program's `.bss`), so no extension allocates or clears a
/// buffer (a `vec![0; 256 KiB]` per extension cost about 1,600 instructions
/// per transaction of a one-row Python transaction loop, in `calloc`'s
/// `memset`).
static ZEROS: [u8; 256 * 1024] = [0; 256 * 1024];

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
        if used + headroom(self.allocated) <= self.allocated || self.allocated >= self.limit {
            return;
        }
        // Never create: the WAL is SQLite's file.
        let Ok(file) = OpenOptions::new().write(true).open(&self.path) else {
            return;
        };
        let Ok(len) = file.metadata().map(|m| m.len()) else {
            return;
        };
        if len == 0 {
            // A WAL not written yet: the first commit writes its header and
            // syncs it (and the directory, for a new file) whatever the
            // `synchronous` level, and would sync these zeros with it
            // (measured: a fresh database's first commit 2.5-3.0 ms with a
            // first step, 0.8-1.0 ms for `sqlite3`). The next one extends.
            return;
        }
        self.allocated = len;
        let target = (used + step(len)).min(self.limit);
        let mut at = len;
        while at < target {
            let n = (target - at).min(ZEROS.len() as u64) as usize;
            if file.write_all_at(&ZEROS[..n], at).is_err() {
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
    fn a_wal_not_written_yet_is_left_to_its_first_commit() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("w.db");
        let wal = dir.path().join("w.db-wal");
        std::fs::write(&wal, b"").unwrap();
        let mut space = WalSpace::new(db.to_str().unwrap(), 4096, 64 * 1024 * 1024);
        space.before_commit(0);
        assert_eq!(std::fs::metadata(&wal).unwrap().len(), 0);
        // Once SQLite wrote its header and a frame, the next commit extends.
        std::fs::write(&wal, vec![1u8; 32 + 4120]).unwrap();
        space.before_commit(1);
        assert_eq!(
            std::fs::metadata(&wal).unwrap().len(),
            WAL_HEADER + 4120 + FIRST_STEP
        );
    }

    #[test]
    fn extends_only_past_the_end_and_never_past_the_limit() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("w.db");
        let wal = dir.path().join("w.db-wal");
        std::fs::write(&wal, b"frames").unwrap();
        let limit = 24 * 1024 * 1024;
        let mut space = WalSpace::new(db.to_str().unwrap(), 4096, limit);
        space.before_commit(10);
        let bytes = std::fs::read(&wal).unwrap();
        assert_eq!(&bytes[..6], b"frames", "what was there is untouched");
        assert!(bytes[6..].iter().all(|&b| b == 0));
        let used = |frames: u64| WAL_HEADER + frames * 4120;
        assert_eq!(
            bytes.len() as u64,
            used(10) + FIRST_STEP,
            "a new WAL: a small step"
        );
        // Enough headroom: nothing to do.
        space.before_commit(11);
        assert_eq!(std::fs::metadata(&wal).unwrap().len(), bytes.len() as u64);
        // Commit after commit: the file stays ahead of the frames, in steps
        // that grow to CHUNK and never pass the limit.
        let mut len = bytes.len() as u64;
        let mut steps = Vec::new();
        for frames in 12..8000 {
            space.before_commit(frames);
            let now = std::fs::metadata(&wal).unwrap().len();
            assert!(now >= len, "never shrinks");
            assert!(now <= limit, "never past the limit: {now}");
            if now < limit {
                assert!(now > used(frames), "allocated ahead of frame {frames}");
            }
            if now > len {
                assert!(now - used(frames) <= CHUNK, "a step of at most CHUNK");
                steps.push(now - len);
                len = now;
            }
        }
        assert_eq!(len, limit, "grown to the limit");
        // 24 MiB: 7 growing steps, then about CHUNK - HEADROOM each, the
        // last one cut at the limit.
        assert!(steps.len() <= 16, "few extensions: {steps:?}");
        let (_, before_last) = steps.split_last().unwrap();
        assert!(
            before_last.windows(2).all(|w| w[1] + FIRST_STEP >= w[0])
                && steps.iter().max() >= Some(&(CHUNK - HEADROOM)),
            "steps grow to about CHUNK: {steps:?}"
        );
    }

    #[test]
    fn never_creates_the_wal() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("none.db");
        WalSpace::new(db.to_str().unwrap(), 4096, 64 << 20).before_commit(0);
        assert!(!dir.path().join("none.db-wal").exists());
    }
}
