//! The safe half of the shim: what the disk holds durably, what is still in
//! the (simulated) OS cache, which faults are armed, and what a power cut
//! leaves behind. `ffi.rs` calls into this for every I/O and does only the
//! pointer work.
//!
//! The model, per file path:
//! * an *inode* holds the bytes that are durable (as of its last `xSync`) and
//!   the writes and truncates made since, in order;
//! * a *directory entry* says which inode the path names now and which inode
//!   it named when its directory was last synced. SQLite's unix VFS syncs the
//!   directory only on the first `xSync` of a journal or WAL it opened with
//!   `SQLITE_OPEN_CREATE`, and on `xDelete(.., syncDir=1)` (see `unixOpen` /
//!   `unixSync` / `unixDelete` in `os_unix.c`); this model syncs it at exactly
//!   those points and no others.

use std::collections::HashMap;
use std::ffi::c_int;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::thread::ThreadId;

use rusqlite::ffi as sq;

use crate::{CutReport, Effect, Fault, FileKind, Op, SECTOR};

/// Bytes in flight since the last sync: one write or one truncate.
#[derive(Debug, Clone)]
enum Pending {
    Write { offset: u64, data: Vec<u8> },
    Truncate(u64),
}

#[derive(Debug, Default)]
struct Inode {
    /// What survives a cut for sure.
    durable: Vec<u8>,
    /// Writes and truncates since the last sync, oldest first.
    pending: Vec<Pending>,
    /// The file's size now (all writes applied).
    size: u64,
}

/// A path's directory entry: the inode it names now and the one it named
/// when the directory was last synced.
#[derive(Debug, Default, Clone, Copy)]
struct Entry {
    now: Option<u64>,
    durable: Option<u64>,
}

/// One open file handle of SQLite's.
#[derive(Debug)]
struct Handle {
    /// `None` for files the model does not track (temp files).
    inode: Option<u64>,
    kind: FileKind,
    /// The unix VFS syncs the directory on this handle's first `xSync`.
    dir_sync_due: bool,
    path: Option<PathBuf>,
}

#[derive(Debug)]
struct Armed {
    fault: Fault,
    seen: u64,
    fired: u64,
}

#[derive(Debug)]
struct CutPlan {
    after_ops: u64,
    seed: u64,
    out_dir: PathBuf,
}

#[derive(Default)]
struct Model {
    inodes: HashMap<u64, Inode>,
    entries: HashMap<PathBuf, Entry>,
    handles: HashMap<u64, Handle>,
    next_id: u64,
    faults: Vec<Armed>,
    fired: u64,
    /// Bytes files may still grow by; `None`: unlimited.
    space_left: Option<u64>,
    /// Writes, syncs and truncates of tracked files, ever.
    ops: u64,
    plan: Option<CutPlan>,
    report: Option<CutReport>,
    /// Successful syncs, by kind of file.
    syncs: HashMap<FileKind, u64>,
    /// The largest write asked for, by kind of file (bytes).
    largest_write: HashMap<FileKind, u64>,
    /// A disk that lies: syncs report success and make nothing durable.
    lying: bool,
}

/// Everything the shim knows; one per registered VFS.
#[derive(Default)]
pub(crate) struct Shared {
    model: Mutex<Model>,
    cut: AtomicBool,
}

/// What `ffi.rs` needs to know when SQLite opens a file.
pub(crate) struct OpenPrep {
    existed: bool,
}

impl Model {
    /// The first armed fault that matches this call and is due, if any
    /// (counting the call against every matching fault's `after`).
    fn due(&mut self, op: Op, kind: FileKind, len: usize) -> Option<Effect> {
        let me = std::thread::current().id();
        let mut hit = None;
        for a in &mut self.faults {
            let f = &a.fault;
            if f.op != op
                || f.file.is_some_and(|k| k != kind)
                || len < f.min_len
                || f.thread.is_some_and(|t: ThreadId| t != me)
            {
                continue;
            }
            if a.seen < f.after {
                a.seen += 1;
                continue;
            }
            a.seen += 1;
            if a.fired < f.times && hit.is_none() {
                a.fired += 1;
                hit = Some(f.effect);
            }
        }
        if hit.is_some() {
            self.fired += 1;
        }
        hit
    }

    fn new_id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }

    fn apply(img: &mut Vec<u8>, op: &Pending) {
        match op {
            Pending::Write { offset, data } => {
                let off = *offset as usize;
                if img.len() < off + data.len() {
                    img.resize(off + data.len(), 0);
                }
                img[off..off + data.len()].copy_from_slice(data);
            }
            Pending::Truncate(size) => img.resize(*size as usize, 0),
        }
    }

    fn sync_inode(&mut self, id: u64) {
        if let Some(ino) = self.inodes.get_mut(&id) {
            let pending = std::mem::take(&mut ino.pending);
            for op in &pending {
                Model::apply(&mut ino.durable, op);
            }
        }
    }

    /// The directory holding `path` is synced: every entry in it is durable.
    fn sync_dir(&mut self, path: &Path) {
        let dir = path.parent().map(Path::to_path_buf);
        for (p, e) in self.entries.iter_mut() {
            if p.parent().map(Path::to_path_buf) == dir {
                e.durable = e.now;
            }
        }
    }

    /// Counts one mutating op; if a cut is planned for it, cuts (the op is
    /// then not performed). Returns whether the power is off.
    fn tick(&mut self, shared_cut: &AtomicBool) -> bool {
        self.ops += 1;
        let due = self.plan.as_ref().is_some_and(|p| self.ops >= p.after_ops);
        if due {
            let plan = self.plan.take().expect("checked");
            self.cut(plan.seed, &plan.out_dir);
            shared_cut.store(true, Ordering::SeqCst);
            return true;
        }
        false
    }

    /// The disk a power cut could leave, written to `out`.
    fn cut(&mut self, seed: u64, out: &Path) {
        let mut rng = fastrand::Rng::with_seed(seed);
        let mut report = CutReport {
            seed,
            at_op: self.ops,
            ..CutReport::default()
        };
        let mut paths: Vec<_> = self.entries.keys().cloned().collect();
        paths.sort();
        if let Err(e) = std::fs::create_dir_all(out) {
            report.error = Some(format!("creating {}: {e}", out.display()));
        }
        for path in paths {
            let e = self.entries[&path];
            // A directory entry changed since the last directory sync may or
            // may not have reached the disk.
            let chosen = if e.now == e.durable || rng.bool() {
                e.durable
            } else {
                e.now
            };
            if e.now != e.durable {
                report.entries_in_doubt += 1;
            }
            let Some(id) = chosen else {
                if e.now.is_some() {
                    report.files_lost.push(path.clone());
                }
                continue;
            };
            let ino = &self.inodes[&id];
            let mut img = ino.durable.clone();
            // Each unsynced op is kept with a probability drawn per file, or
            // (one time in four) the disk kept them in order up to a point.
            let n = ino.pending.len();
            let in_order = rng.u8(0..4) == 0;
            let p = rng.f64();
            let prefix = rng.usize(0..=n);
            let kept: Vec<usize> = (0..n)
                .filter(|&i| if in_order { i < prefix } else { rng.f64() < p })
                .collect();
            report.pending_ops += n as u64;
            report.kept_ops += kept.len() as u64;
            let last = kept.last().copied();
            for &i in &kept {
                let op = &ino.pending[i];
                match (op, Some(i) == last) {
                    (Pending::Write { offset, data }, true) => {
                        // Torn: only the sectors up to a random boundary.
                        let end = offset + data.len() as u64;
                        let first_boundary = (offset / SECTOR + 1) * SECTOR;
                        let cuts: Vec<u64> = (0..)
                            .map(|k| first_boundary + k * SECTOR)
                            .take_while(|b| *b < end)
                            .collect();
                        // Half the time the write made it whole; otherwise
                        // it stops at a sector boundary inside it.
                        let keep_to = if cuts.is_empty() || rng.bool() {
                            end
                        } else {
                            cuts[rng.usize(0..cuts.len())]
                        };
                        if keep_to < end {
                            report.torn_writes += 1;
                        }
                        let len = (keep_to - offset) as usize;
                        Model::apply(
                            &mut img,
                            &Pending::Write {
                                offset: *offset,
                                data: data[..len].to_vec(),
                            },
                        );
                    }
                    (op, _) => Model::apply(&mut img, op),
                }
            }
            let name = path.file_name().map(PathBuf::from).unwrap_or_default();
            let dest = out.join(&name);
            if let Err(err) = std::fs::write(&dest, &img) {
                report
                    .error
                    .get_or_insert_with(|| format!("writing {}: {err}", dest.display()));
            }
            report.files.push((name, img.len() as u64));
        }
        self.report = Some(report);
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Model> {
        self.model.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn is_cut(&self) -> bool {
        self.cut.load(Ordering::SeqCst)
    }

    // ---- the public API's side ----

    pub(crate) fn arm(&self, fault: Fault) {
        self.lock().faults.push(Armed {
            fault,
            seen: 0,
            fired: 0,
        });
    }

    pub(crate) fn clear_faults(&self) {
        let mut m = self.lock();
        m.faults.clear();
        m.space_left = None;
    }

    pub(crate) fn set_space(&self, bytes: Option<u64>) {
        self.lock().space_left = bytes;
    }

    pub(crate) fn fired(&self) -> u64 {
        self.lock().fired
    }

    pub(crate) fn set_lying(&self, on: bool) {
        self.lock().lying = on;
    }

    pub(crate) fn syncs(&self, kind: FileKind) -> u64 {
        self.lock().syncs.get(&kind).copied().unwrap_or(0)
    }

    pub(crate) fn largest_write(&self, kind: FileKind) -> u64 {
        self.lock().largest_write.get(&kind).copied().unwrap_or(0)
    }

    pub(crate) fn ops(&self) -> u64 {
        self.lock().ops
    }

    pub(crate) fn plan_cut(&self, after_ops: u64, seed: u64, out_dir: PathBuf) {
        let mut m = self.lock();
        let at = m.ops + after_ops.max(1);
        m.plan = Some(CutPlan {
            after_ops: at,
            seed,
            out_dir,
        });
    }

    pub(crate) fn cut_now(&self, seed: u64, out_dir: &Path) -> CutReport {
        let mut m = self.lock();
        if let Some(r) = &m.report {
            return r.clone();
        }
        m.plan = None;
        m.cut(seed, out_dir);
        self.cut.store(true, Ordering::SeqCst);
        m.report.clone().expect("just cut")
    }

    pub(crate) fn report(&self) -> Option<CutReport> {
        self.lock().report.clone()
    }

    /// Bytes a file now holds durably and pending ops, for diagnostics.
    pub(crate) fn unsynced_ops(&self) -> u64 {
        self.lock()
            .inodes
            .values()
            .map(|i| i.pending.len() as u64)
            .sum()
    }

    // ---- the VFS side ----

    pub(crate) fn prepare_open(&self, path: Option<&Path>) -> OpenPrep {
        OpenPrep {
            existed: path.is_some_and(|p| p.exists()),
        }
    }

    /// Registers a handle SQLite opened successfully; returns its id.
    pub(crate) fn opened(&self, path: Option<&Path>, flags: c_int, prep: OpenPrep) -> u64 {
        let kind = FileKind::from_flags(flags);
        let tracked = path.is_some() && kind != FileKind::Other;
        let mut m = self.lock();
        let id = m.new_id();
        let mut inode = None;
        if let (true, Some(p)) = (tracked, path) {
            let entry = m.entries.get(p).copied().unwrap_or_default();
            let ino = match entry.now {
                Some(i) => i,
                None => {
                    let i = m.new_id();
                    let data = if prep.existed {
                        std::fs::read(p).unwrap_or_default()
                    } else {
                        Vec::new()
                    };
                    let size = data.len() as u64;
                    m.inodes.insert(
                        i,
                        Inode {
                            durable: data,
                            pending: Vec::new(),
                            size,
                        },
                    );
                    // A file found on disk is taken as durable, entry and all;
                    // a file this open created is not, until a directory sync.
                    let e = m.entries.entry(p.to_path_buf()).or_default();
                    e.now = Some(i);
                    if prep.existed && e.durable.is_none() {
                        e.durable = Some(i);
                    }
                    i
                }
            };
            inode = Some(ino);
        }
        let is_create = flags & sq::SQLITE_OPEN_CREATE != 0;
        let dir_sync_due =
            is_create && matches!(kind, FileKind::Wal | FileKind::Journal) && inode.is_some();
        m.handles.insert(
            id,
            Handle {
                inode,
                kind,
                dir_sync_due,
                path: path.map(Path::to_path_buf),
            },
        );
        id
    }

    pub(crate) fn closed(&self, handle: u64) {
        self.lock().handles.remove(&handle);
    }

    pub(crate) fn read(
        &self,
        handle: u64,
        buf: &mut [u8],
        real: impl FnOnce(&mut [u8]) -> c_int,
    ) -> c_int {
        if self.is_cut() {
            return sq::SQLITE_IOERR_READ;
        }
        let effect = {
            let mut m = self.lock();
            let kind = m.handles.get(&handle).map_or(FileKind::Other, |h| h.kind);
            m.due(Op::Read, kind, buf.len())
        };
        match effect {
            None => real(buf),
            Some(Effect::IoError) => sq::SQLITE_IOERR_READ,
            Some(Effect::ShortRead) => {
                let rc = real(buf);
                if rc != sq::SQLITE_OK {
                    return rc;
                }
                let half = buf.len() / 2;
                buf[half..].fill(0);
                sq::SQLITE_IOERR_SHORT_READ
            }
            Some(Effect::CorruptRead) => {
                let rc = real(buf);
                buf.fill(0xA5);
                rc
            }
            Some(Effect::ShortWrite) => real(buf), // rejected by `arm`
        }
    }

    pub(crate) fn write(
        &self,
        handle: u64,
        offset: u64,
        data: &[u8],
        real: impl FnOnce(&[u8]) -> c_int,
    ) -> c_int {
        let code = sq::SQLITE_IOERR_WRITE;
        if self.is_cut() {
            return code;
        }
        let mut m = self.lock();
        // The power may have gone while this call waited for the lock.
        if self.is_cut() {
            return code;
        }
        let (kind, inode) = m
            .handles
            .get(&handle)
            .map_or((FileKind::Other, None), |h| (h.kind, h.inode));
        if inode.is_some() && m.tick(&self.cut) {
            return sq::SQLITE_IOERR_WRITE;
        }
        let largest = m.largest_write.entry(kind).or_default();
        *largest = (*largest).max(data.len() as u64);
        let mut data = data;
        let mut rc_after = sq::SQLITE_OK;
        match m.due(Op::Write, kind, data.len()) {
            Some(Effect::IoError) => return sq::SQLITE_IOERR_WRITE,
            Some(Effect::ShortWrite) => {
                // The unix VFS reports a write that wrote less than asked as
                // SQLITE_FULL (`unixWrite`); the part written stays written.
                let part = (data.len() / 2) as u64 / SECTOR * SECTOR;
                data = &data[..part as usize];
                rc_after = sq::SQLITE_FULL;
            }
            _ => {}
        }
        if let (Some(left), Some(id)) = (m.space_left, inode) {
            let size = m.inodes[&id].size;
            let growth = (offset + data.len() as u64).saturating_sub(size);
            if growth > left {
                return sq::SQLITE_FULL;
            }
            m.space_left = Some(left - growth);
        }
        if data.is_empty() {
            return rc_after;
        }
        let rc = real(data);
        if rc == sq::SQLITE_OK {
            if let Some(ino) = inode.and_then(|i| m.inodes.get_mut(&i)) {
                ino.size = ino.size.max(offset + data.len() as u64);
                ino.pending.push(Pending::Write {
                    offset,
                    data: data.to_vec(),
                });
            }
            rc_after
        } else {
            rc
        }
    }

    pub(crate) fn truncate(&self, handle: u64, size: u64, real: impl FnOnce() -> c_int) -> c_int {
        let code = sq::SQLITE_IOERR_TRUNCATE;
        if self.is_cut() {
            return code;
        }
        let mut m = self.lock();
        // The power may have gone while this call waited for the lock.
        if self.is_cut() {
            return code;
        }
        let (kind, inode) = m
            .handles
            .get(&handle)
            .map_or((FileKind::Other, None), |h| (h.kind, h.inode));
        if inode.is_some() && m.tick(&self.cut) {
            return sq::SQLITE_IOERR_TRUNCATE;
        }
        if let Some(Effect::IoError) = m.due(Op::Truncate, kind, 0) {
            return sq::SQLITE_IOERR_TRUNCATE;
        }
        let rc = real();
        if rc == sq::SQLITE_OK {
            if let Some(ino) = inode.and_then(|i| m.inodes.get_mut(&i)) {
                ino.size = size;
                ino.pending.push(Pending::Truncate(size));
            }
        }
        rc
    }

    pub(crate) fn sync(&self, handle: u64, real: impl FnOnce() -> c_int) -> c_int {
        let code = sq::SQLITE_IOERR_FSYNC;
        if self.is_cut() {
            return code;
        }
        let mut m = self.lock();
        // The power may have gone while this call waited for the lock.
        if self.is_cut() {
            return code;
        }
        let (kind, inode) = m
            .handles
            .get(&handle)
            .map_or((FileKind::Other, None), |h| (h.kind, h.inode));
        if inode.is_some() && m.tick(&self.cut) {
            return sq::SQLITE_IOERR_FSYNC;
        }
        if let Some(Effect::IoError) = m.due(Op::Sync, kind, 0) {
            return sq::SQLITE_IOERR_FSYNC;
        }
        if m.lying {
            return sq::SQLITE_OK;
        }
        let rc = real();
        if rc != sq::SQLITE_OK {
            return rc;
        }
        if let Some(id) = inode {
            m.sync_inode(id);
            *m.syncs.entry(kind).or_default() += 1;
        }
        let due = m.handles.get_mut(&handle).and_then(|h| {
            let due = std::mem::take(&mut h.dir_sync_due);
            due.then(|| h.path.clone()).flatten()
        });
        if let Some(path) = due {
            m.sync_dir(&path);
        }
        rc
    }

    pub(crate) fn delete(
        &self,
        path: &Path,
        dir_sync: bool,
        real: impl FnOnce() -> c_int,
    ) -> c_int {
        if self.is_cut() {
            return sq::SQLITE_IOERR_DELETE;
        }
        let mut m = self.lock();
        if self.is_cut() {
            return sq::SQLITE_IOERR_DELETE;
        }
        let rc = real();
        if rc == sq::SQLITE_OK {
            if let Some(e) = m.entries.get_mut(path) {
                e.now = None;
            }
            if dir_sync {
                m.sync_dir(path);
            }
        }
        rc
    }

    /// Locks, file sizes and shared memory fail once the power is off
    /// (unlocking still works, so old connections can close).
    pub(crate) fn gate(&self, code: c_int) -> Option<c_int> {
        self.is_cut().then_some(code)
    }

    /// Whether a new open is refused (the power is off).
    pub(crate) fn refuse_open(&self) -> bool {
        self.is_cut()
    }
}
