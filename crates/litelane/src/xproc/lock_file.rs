//! The lock file on Linux: its open-file-description locks (`F_OFD_SETLK`,
//! `F_OFD_SETLKW`, `F_OFD_GETLK` on single bytes), opening and judging it,
//! reading and writing its header and records ([`super::layout`]), and the
//! ticket algorithm that runs on them: take a ticket under the header
//! mutex, then wait for the ticket ahead to end, stepping over the dead.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{FileExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;
use std::time::SystemTime;

use nix::errno::Errno;
use nix::fcntl::{fcntl, FcntlArg};
use nix::libc;
use nix::unistd::{Gid, Uid};

use super::layout::{self, Header, HeaderBytes, Record, STATE_HOLDING, STATE_WAITING};
use super::trust;
use super::{HolderInfo, Patience, Stop};

fn flock(kind: libc::c_short, start: u64, len: u64) -> libc::flock {
    libc::flock {
        l_type: kind,
        l_whence: libc::SEEK_SET as libc::c_short,
        l_start: start as libc::off_t,
        l_len: len as libc::off_t,
        // Must be 0 for open-file-description locks.
        l_pid: 0,
    }
}

/// Takes a lock of `kind` on one byte, sleeping in the kernel until it
/// is granted (signals are retried).
fn lock_wait(file: &File, kind: libc::c_short, byte: u64) -> io::Result<()> {
    let fl = flock(kind, byte, 1);
    loop {
        match fcntl(file, FcntlArg::F_OFD_SETLKW(&fl)) {
            Ok(_) => return Ok(()),
            Err(Errno::EINTR) => continue,
            Err(e) => return Err(e.into()),
        }
    }
}

/// Takes a lock of `kind` on one byte if no conflicting lock is held:
/// `Ok(false)` when one is.
fn lock_now(file: &File, kind: libc::c_short, byte: u64) -> io::Result<bool> {
    let fl = flock(kind, byte, 1);
    match fcntl(file, FcntlArg::F_OFD_SETLK(&fl)) {
        Ok(_) => Ok(true),
        Err(Errno::EAGAIN) | Err(Errno::EACCES) => Ok(false),
        Err(e) => Err(e.into()),
    }
}

pub fn unlock(file: &File, start: u64, len: u64) -> io::Result<()> {
    let fl = flock(libc::F_UNLCK as libc::c_short, start, len);
    fcntl(file, FcntlArg::F_OFD_SETLK(&fl))
        .map(drop)
        .map_err(io::Error::from)
}

/// True when another open file description write-locks a byte in
/// `start .. start + len` (`len` 0: to infinity).
fn write_locked(file: &File, start: u64, len: u64) -> io::Result<bool> {
    let mut fl = flock(libc::F_RDLCK as libc::c_short, start, len);
    fcntl(file, FcntlArg::F_OFD_GETLK(&mut fl)).map_err(io::Error::from)?;
    Ok(fl.l_type != libc::F_UNLCK as libc::c_short)
}

/// The short mutex on byte 0, released on drop.
struct MutexGuard<'f>(&'f File);

/// The first pause of a mutex taker that found byte 0 locked; each
/// next one doubles, up to [`MUTEX_NAP_MAX`]. Writers hold the mutex
/// for microseconds.
const MUTEX_NAP_MIN: std::time::Duration = std::time::Duration::from_micros(20);
/// The longest pause between two tries of the mutex: 1 ms, as SQLite's
/// unix VFS polls its own locks.
const MUTEX_NAP_MAX: std::time::Duration = std::time::Duration::from_millis(1);

impl<'f> MutexGuard<'f> {
    /// Takes the mutex: one `F_OFD_SETLK` when it is free (as the
    /// blocking `F_OFD_SETLKW` it replaces), else tries again after a
    /// pause (20 µs, doubling to 1 ms) until `patience` ends: a lock on
    /// byte 0 that is not a writer's (any process that can read the
    /// file can read-lock it) cannot hold a writer past its timeout.
    fn lock(file: &'f File, patience: &Patience<'_>) -> Result<MutexGuard<'f>, Stop> {
        let try_now = || {
            lock_now(file, libc::F_WRLCK as libc::c_short, layout::MUTEX_BYTE)
                .map_err(|e| ctx("cannot lock the lock file", e))
        };
        let mut nap = MUTEX_NAP_MIN;
        while !try_now()? {
            patience.check()?;
            std::thread::sleep(patience.nap(nap));
            nap = (nap * 2).min(MUTEX_NAP_MAX);
        }
        Ok(MutexGuard(file))
    }
}

impl Drop for MutexGuard<'_> {
    fn drop(&mut self) {
        // Cannot fail for a lock we hold; if it did, closing the file
        // would drop it.
        let _ = unlock(self.0, layout::MUTEX_BYTE, 1);
    }
}

pub fn ctx(what: &str, e: io::Error) -> String {
    format!("{what}: {e}")
}

/// The identity of an open file (`st_dev`, `st_ino`): a reopened lock
/// file must be the one [`open_lock_file`] judged.
pub type FileId = (u64, u64);

/// The identity of `file`.
pub fn file_id(file: &File) -> Result<FileId, String> {
    let md = file
        .metadata()
        .map_err(|e| ctx("cannot stat the lock file", e))?;
    Ok((md.dev(), md.ino()))
}

/// Opens the lock file at `lock_path` of the database at `db_path` for
/// reading and writing, creating it if there is none, and returns it
/// only if this process may trust it (`super::trust`).
///
/// An existing file is opened without `O_CREAT` and judged; it is
/// never changed here. A missing one is created with `O_CREAT |
/// O_EXCL | O_NOFOLLOW` (so this process knows it made it, and no
/// symbolic link is followed), then given the database's owner and
/// group when this process is root, and [`trust::new_mode`] of the
/// database's mode.
pub fn open_lock_file(db_path: &Path, lock_path: &Path) -> Result<File, String> {
    let (euid, egid) = (Uid::effective().as_raw(), Gid::effective().as_raw());
    let found = std::fs::metadata(db_path).ok().map(|m| trust::Owner {
        uid: m.uid(),
        gid: m.gid(),
        mode: m.mode() & 0o7777,
    });
    let db = trust::Database::new(found, euid, egid);
    // A file made by another process between our two opens is judged
    // like any other; one removed between them, or removed right after it
    // was opened (the last queue of another process closing: no link
    // left), is looked for again.
    for _ in 0..100 {
        match open_existing(lock_path) {
            Ok(file) => {
                let md = check_regular(&file)?;
                if md.nlink() == 0 {
                    continue;
                }
                let lane = trust::Owner {
                    uid: md.uid(),
                    gid: md.gid(),
                    mode: md.mode() & 0o7777,
                };
                trust::judge(&db, &lane, md.nlink(), euid)?;
                return Ok(file);
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(cannot_open(lock_path, e)),
        }
        match OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(lock_path)
        {
            Ok(file) => {
                give_new_file(&file, &db.owner, euid);
                return Ok(file);
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(cannot_open(lock_path, e)),
        }
    }
    Err("the lock file kept appearing and disappearing while it was opened".into())
}

fn open_existing(lock_path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(lock_path)
}

/// The error of an open, with the owner and mode of what is at the
/// path when there is something (say, `Permission denied` on a file
/// root made before lock files were given to the database's owner).
fn cannot_open(lock_path: &Path, e: io::Error) -> String {
    let mut why = ctx("cannot create or open the lock file for writing", e);
    if let Ok(md) = std::fs::symlink_metadata(lock_path) {
        why.push_str(&format!(
            " (it is owned by uid {} gid {}, mode {:04o})",
            md.uid(),
            md.gid(),
            md.mode() & 0o7777
        ));
    }
    why
}

/// Gives a lock file this process just created the database's owner
/// and group (root only, as SQLite does for `-wal` and `-shm`) and the
/// mode [`trust::new_mode`] of the database's. Best effort: a file
/// that keeps its creator's owner or a narrower mode is still safe (it
/// passes the rules for its creator; others are refused access by the
/// kernel and say so in their metrics).
fn give_new_file(file: &File, db: &trust::Owner, euid: u32) {
    let mut mode = trust::new_mode(db.mode);
    let Ok(md) = file.metadata() else {
        return;
    };
    if euid == 0 {
        if (md.uid(), md.gid()) != (db.uid, db.gid) {
            let _ = std::os::unix::fs::fchown(file, Some(db.uid), Some(db.gid));
        }
    } else if mode & 0o070 != 0
        && md.gid() != db.gid
        && std::os::unix::fs::fchown(file, None, Some(db.gid)).is_err()
    {
        // Not a member of the database's group: a group-writable file
        // of another group would be refused by everyone else.
        mode &= !0o070;
    }
    let _ = file.set_permissions(std::fs::Permissions::from_mode(mode));
}

/// Opens the lock file again (a new open file description) for reading
/// and writing, without creating it or following a symbolic link
/// (tests, which judge no file; the queue uses [`reopen_same`]).
#[cfg(test)]
pub fn reopen(lock_path: &Path) -> Result<File, String> {
    let file = open_existing(lock_path).map_err(|e| ctx("cannot reopen the lock file", e))?;
    check_regular(&file)?;
    Ok(file)
}

/// [`reopen`], refused unless it is still the file `id` that
/// [`open_lock_file`] judged (not one put at the path since).
pub fn reopen_same(lock_path: &Path, id: FileId) -> Result<File, String> {
    let file = open_existing(lock_path).map_err(|e| ctx("cannot reopen the lock file", e))?;
    let md = check_regular(&file)?;
    if (md.dev(), md.ino()) != id {
        return Err("the lock file was replaced since it was opened (not used)".into());
    }
    Ok(file)
}

fn check_regular(file: &File) -> Result<std::fs::Metadata, String> {
    let md = file
        .metadata()
        .map_err(|e| ctx("cannot stat the lock file", e))?;
    if md.is_file() {
        Ok(md)
    } else {
        Err("the lock file is not a regular file".into())
    }
}

/// The failure mark of the lock file at `lock_path`, read without
/// creating, locking or changing anything (see
/// [`super::recorded_sync_failure`]).
pub fn read_failed_at(lock_path: &Path) -> Option<u64> {
    let file = File::open(lock_path).ok()?;
    if !matches!(read_header(&file).ok()?, HeaderBytes::Valid(_)) {
        return None;
    }
    let mut b = [0u8; 8];
    let n = read_at_most(&file, &mut b, super::durable::FAILED as u64).ok()?;
    // The counter is an atomic word of a page mapped by every process:
    // native byte order.
    (n == 8)
        .then(|| u64::from_ne_bytes(b))
        .filter(|&at| at != 0)
}

fn read_header(file: &File) -> io::Result<HeaderBytes> {
    let mut b = [0u8; layout::HEADER_LEN];
    let n = read_at_most(file, &mut b, 0)?;
    if n == 0 {
        return Ok(HeaderBytes::Damaged); // empty: a new file
    }
    Ok(layout::decode_header(&b[..n]))
}

pub fn read_at_most(file: &File, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    let mut done = 0;
    while done < buf.len() {
        match file.read_at(&mut buf[done..], offset + done as u64) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
    Ok(done)
}

fn write_header(file: &File, h: &Header) -> io::Result<()> {
    file.write_all_at(&layout::encode_header(h), 0)
}

pub fn write_record(file: &File, r: &Record) -> io::Result<()> {
    file.write_all_at(&layout::encode_record(r), layout::record_offset(r.ticket))
}

fn read_record(file: &File, ticket: u64) -> Option<Record> {
    // A record is rewritten in one pwrite of 512 aligned bytes; a read
    // racing it can see a mix, which the checksum rejects: try again.
    for _ in 0..4 {
        let mut b = [0u8; layout::RECORD_LEN];
        let n = read_at_most(file, &mut b, layout::record_offset(ticket)).ok()?;
        if n == b.len() {
            if let Some(r) = layout::decode_record(&b) {
                return (r.ticket == ticket).then_some(r);
            }
        }
    }
    None
}

/// Under the mutex: the header, (re)initialized when the file is new or
/// its header was torn and no ticket is live.
///
/// `may_reset` is false while the caller holds a ticket: its own lock is
/// invisible to the check below, and resetting under a live ticket would
/// break the order.
fn header_locked(file: &File, may_reset: bool) -> Result<Header, String> {
    match read_header(file).map_err(|e| ctx("cannot read the lock file", e))? {
        HeaderBytes::Valid(h) => Ok(h),
        HeaderBytes::Damaged if !may_reset => {
            Err("the lock file's header was damaged while this process waited".into())
        }
        HeaderBytes::Foreign => {
            Err("the file exists and is not a litelane lock file (left untouched)".into())
        }
        HeaderBytes::Damaged => {
            // New (empty) file, or a header torn by a system crash. Reset
            // only if no ticket is live: a live ticket's process holds
            // its ticket byte.
            if write_locked(file, layout::TICKET_BASE, 0)
                .map_err(|e| ctx("cannot query the ticket locks", e))?
            {
                return Err("the lock file's header is damaged while writers are \
                            queued; it will be reset when they are gone"
                    .into());
            }
            let h = Header { next: 1, floor: 1 };
            write_header(file, &h).map_err(|e| ctx("cannot write the lock file", e))?;
            Ok(h)
        }
    }
}

pub fn initialize(file: &File, wait: std::time::Duration) -> Result<(), String> {
    let always = || true;
    let patience = Patience::new(Some(std::time::Instant::now() + wait), &always);
    let _m = MutexGuard::lock(file, &patience).map_err(|e| match e {
        Stop::Failed(e) if e.contains(&format!("(os error {})", libc::EINVAL)) => {
            "this kernel or file system has no open-file-description locks".to_string()
        }
        Stop::Failed(e) => e,
        Stop::No(_) => format!(
            "its header mutex (byte {}) stayed locked for {wait:?}: {}",
            layout::MUTEX_BYTE,
            super::FOREIGN
        ),
    })?;
    header_locked(file, true)?;
    // The file is mapped shared (`SharedPage::map`): what is mapped
    // must be written, not a hole. The first page (sync counters,
    // doorbells) is needed; the rest (job slots) only for combined
    // commits, which are off when a full disk refuses it.
    let extend = |to: usize| -> io::Result<()> {
        let len = file.metadata()?.len();
        if len < to as u64 {
            file.write_all_at(&vec![0u8; to - len as usize], len)?;
        }
        Ok(())
    };
    if extend(crate::ffi::SharedPage::LEN).is_err() {
        extend(crate::ffi::SharedPage::MIN_LEN)
            .map_err(|e| ctx("cannot extend the lock file", e))?;
    }
    Ok(())
}

/// What taking a ticket led to.
pub enum Start {
    /// The turn is ours at once: the ticket and when the turn began.
    Granted(u64, SystemTime),
    /// Tickets ahead are live: [`finish`] sleeps until they are done.
    Wait(Pending),
}

/// A published ticket about to sleep on ticket `k`.
pub struct Pending {
    ticket: u64,
    k: u64,
    record: Record,
}

impl Pending {
    /// The waiting ticket.
    pub fn ticket(&self) -> u64 {
        self.ticket
    }
}

/// Waits on the calling thread for a pending ticket's turn, until
/// `until`: sleeps on the doorbell of the live ticket ahead, looking
/// again at each ring and every [`doorbell::POLL`]. Walks down exactly as
/// [`finish`] does; the doorbell only replaces its kernel sleep. On
/// error, the caller closes `file` (the ticket is then finished).
pub fn finish_on_bell(
    file: &File,
    pending: Pending,
    bells: &super::doorbell::Doorbells,
    until: std::time::Instant,
    watch: &mut dyn FnMut(u64) -> bool,
    patience: &Patience<'_>,
) -> Result<super::Waited, Stop> {
    let mut k = pending.k;
    let mut w = Walk::resume(file, pending);
    loop {
        // Read before the check: a ring after it changes the count.
        let seen = bells.seen(k);
        if !write_locked(file, layout::TICKET_BASE + k, 1)
            .map_err(|e| ctx("cannot query a ticket lock", e))?
        {
            // Ticket k is finished: walk on below it.
            match w.run(k - 1, &|| true, false, patience)? {
                Step::Granted(t, since) => return Ok(super::Waited::Granted(t, since)),
                Step::Sleep(j) => k = j,
                Step::Refused => return Err("an open gate refused the turn".to_string().into()),
            }
            continue;
        }
        let now = std::time::Instant::now();
        if now >= until || watch(k) {
            return Ok(super::Waited::Pending(Pending {
                ticket: w.ticket,
                k,
                record: w.record,
            }));
        }
        patience.check()?;
        bells.wait(
            k,
            seen,
            patience.nap((until - now).min(super::doorbell::POLL)),
        );
    }
}

/// Takes a ticket, and the turn if every ticket ahead is finished,
/// without sleeping. On error, the caller closes `file`, which drops the
/// ticket's lock: the ticket is then finished.
pub fn start(file: &File, pid: u32, label: &str, patience: &Patience<'_>) -> Result<Start, Stop> {
    let mutex = MutexGuard::lock(file, patience)?;
    let mut h = header_locked(file, true)?;
    let ticket = h.next;
    if ticket + 1 >= layout::MAX_TICKET {
        return Err(Stop::Failed(
            "ticket counter exhausted; delete the lock file while no \
             process uses the database"
                .into(),
        ));
    }
    // Live from here: our ticket byte is write-locked before anyone can
    // see the ticket. Nobody else can hold it (walkers only lock bytes
    // of tickets below theirs, all issued before this one).
    if !lock_now(
        file,
        libc::F_WRLCK as libc::c_short,
        layout::TICKET_BASE + ticket,
    )
    .map_err(|e| ctx("cannot lock a ticket byte", e))?
    {
        return Err(Stop::Failed(format!(
            "ticket byte {ticket} unexpectedly locked ({})",
            super::FOREIGN
        )));
    }
    // The header and our record are written once we know whether the
    // turn is ours at once (then together with the new floor) or we
    // must sleep first: one write each on the uncontended path.
    h.next = ticket + 1;
    let mut w = Walk {
        file,
        ticket,
        h,
        record: Record {
            ticket,
            state: STATE_WAITING,
            pid,
            since: SystemTime::now(),
            label: label.to_string(),
            sql: String::new(),
        },
        mutex: Some(mutex),
        published: false,
    };
    let out = w.run(ticket - 1, &|| true, false, patience);
    if !w.published && !matches!(out, Ok(Step::Granted(..))) {
        // Nobody saw the ticket (the header still hands it out next):
        // give its byte back before the mutex goes, or the next taker of
        // the same number would find it locked.
        let _ = unlock(file, layout::TICKET_BASE + ticket, 1);
    }
    drop(w.mutex.take());
    match out? {
        Step::Granted(t, since) => Ok(Start::Granted(t, since)),
        Step::Sleep(k) => Ok(Start::Wait(Pending {
            ticket,
            k,
            record: w.record,
        })),
        Step::Refused => Err(Stop::Failed("an open gate refused the turn".into())),
    }
}

/// Sleeps until the turn of a pending ticket comes. Returns the ticket
/// and when the turn began, or `None` when `gate` — asked under the
/// mutex just before the turn is taken — says the caller gave up. On
/// error or `None`, the caller closes `file`, which drops the ticket's
/// lock: the ticket is then finished.
pub fn finish(
    file: &File,
    pending: Pending,
    gate: &dyn Fn() -> bool,
    patience: &Patience<'_>,
) -> Result<Option<(u64, SystemTime)>, Stop> {
    let k = pending.k;
    let mut w = Walk::resume(file, pending);
    w.sleep_on(k)?;
    match w.run(k - 1, gate, true, patience)? {
        Step::Granted(t, since) => Ok(Some((t, since))),
        Step::Refused => Ok(None),
        Step::Sleep(_) => Err(Stop::Failed(
            "a blocking walk returned without its turn".into(),
        )),
    }
}

enum Step {
    Granted(u64, SystemTime),
    /// The gate said the caller gave up.
    Refused,
    /// Must sleep on this ticket (only when not blocking).
    Sleep(u64),
}

/// The wait of one ticket for its turn.
struct Walk<'f> {
    file: &'f File,
    ticket: u64,
    /// The header as last read under the mutex.
    h: Header,
    record: Record,
    /// Held while deciding; released only once the ticket is published.
    mutex: Option<MutexGuard<'f>>,
    /// The header counts the ticket and its record is written.
    published: bool,
}

impl<'f> Walk<'f> {
    /// The walk of a published ticket that waits (after [`start`]).
    fn resume(file: &'f File, pending: Pending) -> Walk<'f> {
        Walk {
            file,
            ticket: pending.ticket,
            h: Header { next: 0, floor: 0 }, // read once the mutex is taken
            record: pending.record,
            mutex: None,
            published: true,
        }
    }

    fn publish(&mut self) -> Result<(), String> {
        write_header(self.file, &self.h).map_err(|e| ctx("cannot write the lock file", e))?;
        let _ = write_record(self.file, &self.record);
        self.published = true;
        Ok(())
    }

    /// Sleeps in the kernel until ticket `k` is unlocked or its process
    /// dies. A read lock, so that several waiters may wait on the same
    /// ticket (after a death) without excluding each other.
    fn sleep_on(&self, k: u64) -> Result<(), String> {
        let byte = layout::TICKET_BASE + k;
        lock_wait(self.file, libc::F_RDLCK as libc::c_short, byte)
            .map_err(|e| ctx("cannot wait on a ticket lock", e))?;
        unlock(self.file, byte, 1).map_err(|e| ctx("cannot unlock a ticket byte", e))
    }

    /// Walks down from `k`, knowing every ticket in `(k, ticket)` is
    /// finished. Sleeps on live tickets when `block`, else stops at the
    /// first one.
    fn run(
        &mut self,
        mut k: u64,
        gate: &dyn Fn() -> bool,
        block: bool,
        patience: &Patience<'_>,
    ) -> Result<Step, Stop> {
        let file = self.file;
        loop {
            if self.mutex.is_none() {
                self.mutex = Some(MutexGuard::lock(file, patience)?);
                self.h = header_locked(file, false)?;
            }
            if k < self.h.floor {
                // Every ticket below ours is finished: the turn is ours.
                if !gate() {
                    return Ok(Step::Refused);
                }
                self.h.floor = self.ticket;
                self.record.state = STATE_HOLDING;
                self.record.since = SystemTime::now();
                self.publish()?;
                self.mutex = None;
                return Ok(Step::Granted(self.ticket, self.record.since));
            }
            if write_locked(file, layout::TICKET_BASE + k, 1)
                .map_err(|e| ctx("cannot query a ticket lock", e))?
            {
                // Ticket k is live.
                if !self.published {
                    self.publish()?;
                }
                self.mutex = None;
                if !block {
                    return Ok(Step::Sleep(k));
                }
                self.sleep_on(k)?;
            }
            // Ticket k is finished (released, or its process died).
            k -= 1;
        }
    }
}

pub fn unlock_ticket(file: &File, ticket: u64) -> io::Result<()> {
    unlock(file, layout::TICKET_BASE + ticket, 1)
}

/// Write-locks the turn byte unless another description holds it.
pub fn lock_turn_byte_now(file: &File) -> io::Result<bool> {
    lock_now(file, libc::F_WRLCK as libc::c_short, layout::TURN_BYTE)
}

pub fn unlock_turn_byte(file: &File) -> io::Result<()> {
    unlock(file, layout::TURN_BYTE, 1)
}

/// True when another description holds the turn byte.
pub fn turn_byte_locked(file: &File) -> io::Result<bool> {
    write_locked(file, layout::TURN_BYTE, 1)
}

/// Write-locks `byte` unless another description holds it.
pub fn lock_byte_now(file: &File, byte: u64) -> io::Result<bool> {
    lock_now(file, libc::F_WRLCK as libc::c_short, byte)
}

pub fn unlock_byte(file: &File, byte: u64) -> io::Result<()> {
    unlock(file, byte, 1)
}

/// True when another description write-locks `byte`.
pub fn byte_locked(file: &File, byte: u64) -> io::Result<bool> {
    write_locked(file, byte, 1)
}

/// True when another description holds a *read* lock on `byte`.
pub fn read_locked(file: &File, byte: u64) -> io::Result<bool> {
    let mut fl = flock(libc::F_WRLCK as libc::c_short, byte, 1);
    fcntl(file, FcntlArg::F_OFD_GETLK(&mut fl)).map_err(io::Error::from)?;
    Ok(fl.l_type == libc::F_RDLCK as libc::c_short)
}

/// The header read without the mutex: a read racing a write fails the
/// checksum and is tried again.
fn header_unlocked(file: &File) -> Option<Header> {
    (0..4).find_map(|_| match read_header(file) {
        Ok(HeaderBytes::Valid(h)) => Some(h),
        _ => None,
    })
}

pub fn queued(file: &File) -> u64 {
    header_unlocked(file).map_or(0, |h| h.next.saturating_sub(h.floor + 1))
}

/// Read-locks the presence byte through `file`, for as long as that
/// open file description lives. `Ok(false)`: it is write-locked, by a
/// process removing the file ([`remove_if_last`]).
pub fn announce_presence(file: &File) -> io::Result<bool> {
    lock_now(file, libc::F_RDLCK as libc::c_short, layout::PRESENCE_BYTE)
}

/// True when the file at `lock_path` is the file `id` (not removed or
/// replaced since it was opened).
pub fn is_at(lock_path: &Path, id: FileId) -> bool {
    std::fs::symlink_metadata(lock_path).is_ok_and(|m| (m.dev(), m.ino()) == id)
}

/// Removes the lock file `id` at `lock_path` if no open file description
/// but `presence` (this queue's, which read-locks the presence byte) has
/// announced itself on it: every queue of every process announces itself
/// before it uses the file, and looks again that the file is still at its
/// path once it has ([`super::ProcessQueue::open`]), so one that opened the
/// file just before it was removed opens a new one. The presence byte is
/// write-locked through `presence` from here until `presence` is closed:
/// a queue announcing itself meanwhile waits for that. True when removed.
///
/// When the write lock is refused, this queue takes its own presence
/// back and asks once more: of queues closing at the same moment, each
/// refused while the others were still present, the last to ask again
/// finds the others gone (or one of them removing the file). Either way
/// `presence` holds no lock on return: the queue no longer counts as
/// present, and a file removed needs no lock (a queue that opened it meets
/// no link left and opens a new one).
pub fn remove_if_last(presence: &File, lock_path: &Path, id: FileId) -> bool {
    let write = || {
        let kind = libc::F_WRLCK as libc::c_short;
        matches!(lock_now(presence, kind, layout::PRESENCE_BYTE), Ok(true))
    };
    let alone = write() || (unlock(presence, layout::PRESENCE_BYTE, 1).is_ok() && write());
    let removed = alone && is_at(lock_path, id) && std::fs::remove_file(lock_path).is_ok();
    let _ = unlock(presence, layout::PRESENCE_BYTE, 1);
    removed
}

/// True when a description other than `file`'s holds the presence
/// byte: another queue is open.
pub fn others_present(file: &File) -> io::Result<bool> {
    let mut fl = flock(libc::F_WRLCK as libc::c_short, layout::PRESENCE_BYTE, 1);
    fcntl(file, FcntlArg::F_OFD_GETLK(&mut fl)).map_err(io::Error::from)?;
    Ok(fl.l_type != libc::F_UNLCK as libc::c_short)
}

pub fn record_of(file: &File, ticket: u64) -> Option<HolderInfo> {
    let r = read_record(file, ticket)?;
    Some(HolderInfo {
        pid: r.pid,
        ticket,
        label: r.label,
        sql: r.sql,
        since: r.since,
    })
}

pub fn holder(file: &File) -> Option<HolderInfo> {
    let h = header_unlocked(file)?;
    let ticket = h.floor;
    if !write_locked(file, layout::TICKET_BASE + ticket, 1).ok()? {
        return None;
    }
    let r = read_record(file, ticket)?;
    (r.state == STATE_HOLDING).then_some(HolderInfo {
        pid: r.pid,
        ticket,
        label: r.label,
        sql: r.sql,
        since: r.since,
    })
}
