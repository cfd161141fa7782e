//! `litelane recover DB OUT`: salvages what can be read from a damaged
//! database into a new one, and says what was and was not recovered.
//!
//! SQLite's recovery extension (`ext/recover`, behind the shell's
//! `.recover`) reads raw pages through `sqlite_dbpage` and rebuilds tables
//! from every cell it can find, orphan pages included. It is not part of
//! the amalgamation that `libsqlite3-sys` bundles and no maintained crate
//! packages it, so this command is built on SQLite's ordinary interfaces
//! instead, and salvages less in one case (pages no b-tree points to any
//! more; see docs/durability.md):
//!
//! 1. DB (with its `-wal` and `-journal`, if any) is copied into a private
//!    temporary directory; DB itself is only ever read. If the 100-byte
//!    header is damaged, the copy's header is rebuilt (the page size is
//!    found by trying each size until the schema reads).
//! 2. The copy is opened with `writable_schema` on (so a truncated file or a
//!    damaged schema entry does not stop everything), triggers and views
//!    off and `cell_size_check` on.
//! 3. Each table is recreated in OUT from its `CREATE` statement, and its
//!    rows are read in rowid order in batches. When a read fails, a rowid
//!    alone is probed: if it reads, only that row's content is damaged and
//!    it is skipped; if not, the damaged page's rowid range is found by
//!    searching (exponentially, then by bisection) for the first rowid past
//!    which seeks succeed again, and that range is reported as lost.
//!    Tables without rowid are read in key order forwards, then backwards
//!    from the end, up to the damage.
//! 4. Indexes are rebuilt from the recovered rows (index pages are never
//!    read), then views and triggers are recreated.
//!
//! OUT is written to a temporary file beside it and moved into place at the
//! end.

use std::io::{IsTerminal, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use litelane::rusqlite::config::DbConfig;
use litelane::rusqlite::types::Value;
use litelane::rusqlite::{params_from_iter, Connection, OpenFlags};
use litelane::{quote_ident, same_file};
use serde::Serialize;

use super::{require_file, RecoverArgs};
use crate::error::CliError;

/// Rows read per batch.
const BATCH: i64 = 512;
/// Errors kept per table in the report (the count is always complete).
const ERRORS_KEPT: usize = 5;
/// The prefix of the private working directory, made beside OUT.
const SCRATCH_PREFIX: &str = ".litelane-recover-";
/// The file in the working directory a running recover holds locked.
const SCRATCH_LOCK: &str = "lock";
/// The files a working directory may hold (nothing else is ever removed).
const SCRATCH_FILES: &[&str] = &[
    "lock",
    "work.db",
    "work.db-wal",
    "work.db-shm",
    "work.db-journal",
    "out.db",
    "out.db-wal",
    "out.db-shm",
    "out.db-journal",
];
/// A working directory without a lock file is taken for one left by a
/// killed run only when it is older than this (a new one gets its lock file
/// right after it is made).
const UNLOCKED_STALE_AFTER: Duration = Duration::from_secs(60);

/// Set by the SIGINT/SIGTERM handler: the copy stops at the next batch.
static INTERRUPTED: AtomicBool = AtomicBool::new(false);

fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::SeqCst)
}

/// Progress on stderr, at most once a second: the table being copied, rows
/// so far and where the scan is.
pub struct Watch {
    show: bool,
    last: Instant,
}

impl Watch {
    /// Progress shown when `show`.
    pub fn new(show: bool) -> Watch {
        Watch {
            show,
            last: Instant::now(),
        }
    }

    fn tick(&mut self, t: &TableReport, at: &str) {
        if self.show && self.last.elapsed() >= Duration::from_secs(1) {
            self.last = Instant::now();
            eprintln!(
                "litelane: recover: table {}: {} rows recovered, {} unreadable ranges so far ({at})",
                quote_ident(&t.name),
                t.rows_recovered,
                t.lost_rowid_ranges.len() as u64 + t.rows_unreadable
            );
        }
    }
}

/// What happened to one table.
#[derive(Debug, Serialize, Default)]
pub struct TableReport {
    /// The table's name.
    pub name: String,
    /// `complete`: every row read; `partial`: some rows lost; `lost`:
    /// nothing readable; `skipped`: not copied (see `errors`).
    pub status: &'static str,
    /// Rows written to OUT.
    pub rows_recovered: u64,
    /// Rows read but refused by OUT (a constraint of the table failed:
    /// the damage changed a value).
    pub rows_rejected: u64,
    /// Rowid ranges `[first, last]` that could not be read (how many rows
    /// they held is unknown: a range covers the gap between readable rows).
    pub lost_rowid_ranges: Vec<(i64, i64)>,
    /// Rows whose rowid was readable but whose content was not.
    pub rows_unreadable: u64,
    /// For tables without rowid: whether rows between the damage points
    /// could not be reached.
    pub rows_lost_in_key_order: bool,
    /// The number of read errors met.
    pub error_count: u64,
    /// The first few errors, as SQLite put them.
    pub errors: Vec<String>,
}

impl TableReport {
    fn error(&mut self, e: impl std::fmt::Display) {
        self.error_count += 1;
        if self.errors.len() < ERRORS_KEPT {
            self.errors.push(e.to_string());
        }
    }
}

/// An index, view or trigger recreated (or not) in OUT.
#[derive(Debug, Serialize)]
pub struct ObjectReport {
    /// `index`, `view` or `trigger`.
    pub kind: String,
    /// Its name.
    pub name: String,
    /// Whether it exists in OUT.
    pub created: bool,
    /// Why not, if not.
    pub error: Option<String>,
}

/// The whole report of `litelane recover`.
#[derive(Debug, Serialize, Default)]
pub struct RecoverReport {
    /// The damaged database.
    pub db: String,
    /// The new database.
    pub out: String,
    /// `complete` (everything read), `partial`, or `nothing` (not even the
    /// schema could be read; OUT is not written).
    pub outcome: &'static str,
    /// What was wrong with the 100-byte header and was rebuilt in the
    /// working copy (empty when the header was sound).
    pub header_repairs: Vec<String>,
    /// Errors reading the schema (`sqlite_schema`) itself.
    pub schema_errors: Vec<String>,
    /// One entry per table.
    pub tables: Vec<TableReport>,
    /// Indexes, views and triggers.
    pub objects: Vec<ObjectReport>,
    /// Rows written to OUT, all tables.
    pub rows_recovered: u64,
    /// `integrity_check` of OUT (`ok` expected).
    pub out_integrity: Vec<String>,
}

fn io_err(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> CliError {
    let what = what.into();
    move |e| CliError::io(what, e)
}

fn with_suffix(p: &Path, s: &str) -> PathBuf {
    let mut o = p.as_os_str().to_owned();
    o.push(s);
    PathBuf::from(o)
}

/// Refuses an OUT that is the database (or a side file of it) always, and
/// an existing OUT unless `force`.
fn check_out(db: &Path, out: &Path, force: bool) -> Result<(), CliError> {
    for side in ["", "-wal", "-shm", "-journal"] {
        if same_file(&with_suffix(db, side), out) {
            return Err(CliError::Input(format!(
                "{} is the database {}{} itself: recover never writes into the damaged file; \
                 choose a new path for OUT",
                out.display(),
                db.display(),
                side
            )));
        }
    }
    super::check_side_files("recover", db, out)?;
    match std::fs::symlink_metadata(out) {
        Ok(md) if md.is_dir() => Err(CliError::Input(format!(
            "{} is a directory: OUT must be a new file",
            out.display()
        ))),
        Ok(_) if !force => Err(CliError::Input(format!(
            "{} already exists: refusing to overwrite it (use --force to replace it)",
            out.display()
        ))),
        _ => Ok(()),
    }
}

// ---- the header -------------------------------------------------------

const MAGIC: &[u8; 16] = b"SQLite format 3\0";

fn page_size_field(h: &[u8]) -> Option<u64> {
    let v = u16::from_be_bytes([h[16], h[17]]) as u64;
    let v = if v == 1 { 65536 } else { v };
    (v.is_power_of_two() && (512..=65536).contains(&v)).then_some(v)
}

/// What is wrong with a header, in words.
fn header_problems(h: &[u8], file_len: u64) -> Vec<String> {
    let mut p = Vec::new();
    if h.len() < 100 {
        p.push(format!(
            "the file is {file_len} bytes: shorter than a header"
        ));
        return p;
    }
    if &h[..16] != MAGIC {
        p.push("the magic string \"SQLite format 3\" is missing".into());
    }
    if page_size_field(h).is_none() {
        p.push(format!(
            "page size field {} is not a power of two from 512 to 65536",
            u16::from_be_bytes([h[16], h[17]])
        ));
    }
    if !(1..=2).contains(&h[18]) || !(1..=2).contains(&h[19]) {
        p.push(format!(
            "file format versions {}/{} are not 1 or 2",
            h[18], h[19]
        ));
    }
    if h[21] != 64 || h[22] != 32 || h[23] != 32 {
        p.push(format!(
            "payload fractions {}/{}/{} are not 64/32/32",
            h[21], h[22], h[23]
        ));
    }
    let enc = u32::from_be_bytes([h[56], h[57], h[58], h[59]]);
    if enc > 3 {
        p.push(format!("text encoding {enc} is not 1, 2 or 3"));
    }
    p
}

/// Rewrites the header of the working copy with safe values and the given
/// page size (rollback journal, no free list, size from the file).
fn rebuild_header(h: &mut [u8; 100], page_size: u64) {
    h[..16].copy_from_slice(MAGIC);
    let ps = if page_size == 65536 {
        1u16
    } else {
        page_size as u16
    };
    h[16..18].copy_from_slice(&ps.to_be_bytes());
    h[18] = 1;
    h[19] = 1;
    if h[20] > 64 {
        h[20] = 0;
    }
    h[21] = 64;
    h[22] = 32;
    h[23] = 32;
    h[28..32].fill(0); // page count: from the file's size
    h[32..40].fill(0); // free list: not needed to read
    let fmt = u32::from_be_bytes([h[44], h[45], h[46], h[47]]);
    if !(1..=4).contains(&fmt) {
        h[44..48].copy_from_slice(&4u32.to_be_bytes());
    }
    h[52..56].fill(0);
    let enc = u32::from_be_bytes([h[56], h[57], h[58], h[59]]);
    if !(1..=3).contains(&enc) {
        h[56..60].copy_from_slice(&1u32.to_be_bytes());
    }
    h[64..68].fill(0);
    h[92..100].fill(0);
}

fn write_header(path: &Path, h: &[u8; 100]) -> Result<(), CliError> {
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .map_err(io_err(format!("opening {}", path.display())))?;
    f.seek(SeekFrom::Start(0))
        .and_then(|_| f.write_all(h))
        .map_err(io_err(format!(
            "repairing the header of {}",
            path.display()
        )))
}

// ---- opening the working copy --------------------------------------------

/// Opens the private working copy: nothing stored in it runs, damage is
/// tolerated where SQLite allows it.
fn open_copy(path: &Path) -> Result<Connection, CliError> {
    let ctx = |what: &str| format!("{what} the working copy {}", path.display());
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let name = format!("the working copy {}", path.display());
    let conn = super::open_inert(path, flags, false, &name)?;
    // writable_schema: a truncated file or a bad schema entry is read as far
    // as possible instead of failing at open. query_only: never write.
    conn.execute_batch(
        "PRAGMA writable_schema = ON; PRAGMA cell_size_check = ON; PRAGMA mmap_size = 0; \
         PRAGMA trusted_schema = OFF; PRAGMA query_only = ON;",
    )
    .map_err(|e| litelane::Error::from_sqlite(e, ctx("configuring")))?;
    Ok(conn)
}

/// Reads one schema row set; Ok(None) when the schema cannot be read.
fn read_schema(conn: &Connection) -> Result<Vec<SchemaRow>, String> {
    let mut stmt = conn
        .prepare("SELECT type, name, tbl_name, rootpage, sql FROM sqlite_schema")
        .map_err(|e| e.to_string())?;
    let rows = stmt
        .query_map([], |r| {
            Ok(SchemaRow {
                kind: r.get::<_, Option<String>>(0)?.unwrap_or_default(),
                name: r.get::<_, Option<String>>(1)?.unwrap_or_default(),
                table: r.get::<_, Option<String>>(2)?.unwrap_or_default(),
                rootpage: r.get::<_, Option<i64>>(3)?.unwrap_or(0),
                sql: r.get(4)?,
            })
        })
        .map_err(|e| e.to_string())?;
    rows.collect::<Result<Vec<_>, _>>()
        .map_err(|e| e.to_string())
}

#[derive(Debug, Clone)]
struct SchemaRow {
    kind: String,
    name: String,
    table: String,
    rootpage: i64,
    sql: Option<String>,
}

/// Tries page sizes until the schema of the working copy reads.
fn repair_header(work: &Path, file_len: u64, report: &mut RecoverReport) -> Result<(), CliError> {
    let mut h = [0u8; 100];
    {
        let mut f =
            std::fs::File::open(work).map_err(io_err(format!("opening {}", work.display())))?;
        let n = f
            .read(&mut h)
            .map_err(io_err(format!("reading {}", work.display())))?;
        if n < 100 {
            report.header_repairs = header_problems(&h[..n], file_len);
            return Ok(());
        }
    }
    let problems = header_problems(&h, file_len);
    if problems.is_empty() {
        return Ok(());
    }
    let mut candidates: Vec<u64> = page_size_field(&h).into_iter().collect();
    for ps in [4096, 1024, 2048, 8192, 16384, 32768, 65536, 512] {
        if !candidates.contains(&ps) {
            candidates.push(ps);
        }
    }
    for ps in candidates {
        let mut fixed = h;
        rebuild_header(&mut fixed, ps);
        write_header(work, &fixed)?;
        let Ok(conn) = open_copy(work) else { continue };
        let max_page = file_len.div_ceil(ps) as i64;
        let ok = matches!(read_schema(&conn), Ok(rows)
            if rows.iter().all(|r| r.rootpage >= 0 && r.rootpage <= max_page)
                && rows.iter().any(|r| r.sql.as_deref().is_some_and(|s| s.to_ascii_uppercase().starts_with("CREATE"))));
        if ok {
            report.header_repairs = problems;
            report.header_repairs.push(format!(
                "rebuilt with a page size of {ps} bytes (the one whose schema reads)"
            ));
            return Ok(());
        }
    }
    report.header_repairs = problems;
    report
        .header_repairs
        .push("no page size made the schema readable".into());
    write_header(work, &h)?;
    Ok(())
}

// ---- copying a table -----------------------------------------------------

/// The columns of a table that hold stored values (not generated), and
/// whether it has a rowid, and the name to reach it by.
struct Shape {
    columns: Vec<String>,
    rowid: Option<&'static str>,
    pk: Vec<String>,
}

fn shape(conn: &Connection, table: &str, sql: &str) -> Result<Shape, String> {
    let mut stmt = conn
        .prepare("SELECT name, hidden, pk FROM pragma_table_xinfo(?1) ORDER BY cid")
        .map_err(|e| e.to_string())?;
    let mut columns = Vec::new();
    let mut pk: Vec<(i64, String)> = Vec::new();
    let rows = stmt
        .query_map([table], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, i64>(1)?,
                r.get::<_, i64>(2)?,
            ))
        })
        .map_err(|e| e.to_string())?;
    for r in rows {
        let (name, hidden, k) = r.map_err(|e| e.to_string())?;
        if hidden == 0 {
            columns.push(name.clone());
        }
        if k > 0 {
            pk.push((k, name));
        }
    }
    if columns.is_empty() {
        return Err("no columns could be read from its definition".into());
    }
    pk.sort();
    let upper = sql.to_ascii_uppercase();
    let without_rowid = upper.contains("WITHOUT") && upper.contains("ROWID");
    let rowid = if without_rowid {
        None
    } else {
        ["rowid", "_rowid_", "oid"]
            .into_iter()
            .find(|n| !columns.iter().any(|c| c.eq_ignore_ascii_case(n)))
    };
    Ok(Shape {
        columns,
        rowid,
        pk: pk.into_iter().map(|(_, n)| n).collect(),
    })
}

/// Writes rows into OUT, counting those refused.
struct Sink<'c> {
    insert: litelane::rusqlite::CachedStatement<'c>,
}

impl Sink<'_> {
    fn put(&mut self, values: &[Value], t: &mut TableReport) {
        match self.insert.execute(params_from_iter(values.iter())) {
            Ok(_) => t.rows_recovered += 1,
            Err(e) => {
                t.rows_rejected += 1;
                t.error(format!("row refused by OUT: {e}"));
            }
        }
    }
}

/// Probes whether a seek to `from` works: Ok(Some(first rowid >= from)),
/// Ok(None) (no rows from there on), or Err (the seek met damage).
fn probe(conn: &Connection, q_table: &str, rid: &str, from: i64) -> Result<Option<i64>, String> {
    let sql =
        format!("SELECT {rid} FROM {q_table} NOT INDEXED WHERE {rid} >= ?1 ORDER BY {rid} LIMIT 1");
    let mut stmt = conn.prepare_cached(&sql).map_err(|e| e.to_string())?;
    let mut rows = stmt.query([from]).map_err(|e| e.to_string())?;
    match rows.next() {
        Ok(Some(r)) => match r.get::<_, i64>(0) {
            // A damaged b-tree can send a seek to an earlier row: that is
            // damage too, and following it would scan backwards forever.
            Ok(id) if id < from => Err(format!(
                "a seek to rowid {from} landed on rowid {id}: the b-tree is damaged"
            )),
            Ok(id) => Ok(Some(id)),
            Err(e) => Err(e.to_string()),
        },
        Ok(None) => Ok(None),
        Err(e) => Err(e.to_string()),
    }
}

/// The smallest `s > bad` from which a seek works again (a seek to `bad`
/// fails). A seek lands in the damaged page for every rowid up to the
/// largest key that page held, and past it in the next page, so the
/// failing seeks form one run: search exponentially for a working point,
/// then bisect.
fn skip_damage(conn: &Connection, q_table: &str, rid: &str, bad: i64) -> Option<i64> {
    let mut bad = bad;
    let mut step: i64 = 1;
    let good = loop {
        let s = bad.saturating_add(step);
        if probe(conn, q_table, rid, s).is_ok() {
            break s;
        }
        if s == i64::MAX {
            return None; // nothing past the damage can be reached
        }
        bad = s;
        step = step.saturating_mul(2);
    };
    let (mut lo, mut hi) = (bad, good);
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if probe(conn, q_table, rid, mid).is_ok() {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    Some(hi)
}

/// Copies a rowid table in rowid order, batch by batch. The scan only ever
/// moves forwards: `start` grows with every pass of the loop (a row the
/// damaged b-tree returns out of order ends the batch as damage), so it
/// ends on any file, however damaged.
fn copy_rowid_table(
    src: &Connection,
    sink: &mut Sink<'_>,
    q_table: &str,
    rid: &str,
    cols: &str,
    t: &mut TableReport,
    watch: &mut Watch,
) {
    let sql = format!(
        "SELECT {rid}, {cols} FROM {q_table} NOT INDEXED WHERE {rid} >= ?1 ORDER BY {rid} LIMIT {BATCH}"
    );
    // The next rowid to read is >= start.
    let mut start = i64::MIN;
    loop {
        if interrupted() {
            t.error("interrupted");
            return;
        }
        watch.tick(t, &format!("at rowid {start}"));
        let before = start;
        let read = match src.prepare_cached(&sql) {
            Err(e) => {
                t.error(e);
                return;
            }
            Ok(mut stmt) => read_batch(&mut stmt, start, sink, t),
        };
        if let Some(id) = read.last {
            if id == i64::MAX {
                return;
            }
            start = id + 1;
        }
        let Some(err) = &read.failed else {
            if read.got < BATCH {
                return; // the end of the table
            }
            continue;
        };
        t.error(err);
        match past_damage(src, q_table, rid, start, before, &read, t) {
            Some(next) => start = next,
            None => return,
        }
        if start <= before {
            // Cannot happen by the rules above; if it ever did, stop rather
            // than read the same rows again.
            t.error(format!("the scan could not move past rowid {start}"));
            t.lost_rowid_ranges.push((start, i64::MAX));
            return;
        }
    }
}

/// What one batch of a rowid scan read.
struct BatchRead {
    /// Rows copied.
    got: i64,
    /// The last rowid copied.
    last: Option<i64>,
    /// Why the batch ended early.
    failed: Option<String>,
    /// A row came back out of order: what lies between is unknown.
    disorder: bool,
}

/// Reads one batch from rowid `start` on (`stmt`: the scan's query) and
/// copies each row through `sink`, stopping at the first error or row out
/// of order.
fn read_batch(
    stmt: &mut rusqlite::CachedStatement<'_>,
    start: i64,
    sink: &mut Sink<'_>,
    t: &mut TableReport,
) -> BatchRead {
    let mut read = BatchRead {
        got: 0,
        last: None,
        failed: None,
        disorder: false,
    };
    let mut rows = match stmt.query([start]) {
        Ok(rows) => rows,
        Err(e) => {
            read.failed = Some(e.to_string());
            return read;
        }
    };
    loop {
        let r = match rows.next() {
            Ok(None) => return read,
            Ok(Some(r)) => r,
            Err(e) => {
                read.failed = Some(e.to_string());
                return read;
            }
        };
        let n = r.as_ref().column_count();
        let v = match (0..n).map(|i| r.get(i)).collect::<Result<Vec<Value>, _>>() {
            Ok(v) => v,
            Err(e) => {
                read.failed = Some(e.to_string());
                return read;
            }
        };
        let Value::Integer(id) = v[0] else {
            read.failed = Some("a rowid that is not an integer".into());
            return read;
        };
        let floor = read.last.map_or(start, |l| l.saturating_add(1));
        if id < floor || read.last == Some(i64::MAX) {
            read.disorder = true;
            read.failed = Some(format!(
                "rowid {id} came after rowid {}: the b-tree is damaged (rows out of order)",
                floor.saturating_sub(1)
            ));
            return read;
        }
        sink.put(&v, t);
        read.last = Some(id);
        read.got += 1;
    }
}

/// Where the scan goes on after a batch that met damage at `start` (the
/// batch began at `before`): which is damaged, one row's content or the
/// page(s) from `start` on, decides; what is skipped is recorded as lost.
/// `None`: nothing further can be read.
fn past_damage(
    src: &Connection,
    q_table: &str,
    rid: &str,
    start: i64,
    before: i64,
    read: &BatchRead,
    t: &mut TableReport,
) -> Option<i64> {
    match probe(src, q_table, rid, start) {
        Ok(Some(r)) if read.disorder && r > before => {
            // The scan left the b-tree (a row out of order), not a row's
            // content: go on from the next rowid a seek finds, which may
            // well read; what lay between is unknown.
            if r > start {
                t.lost_rowid_ranges.push((start, r - 1));
            }
            Some(r)
        }
        Ok(Some(r)) => {
            // The rowid reads, the row does not: skip that row. Rows the
            // failed read should have met before it (when the seek skips
            // over part of the damage) are in the range too.
            t.rows_unreadable += 1;
            let from = if read.last.is_some() || read.disorder {
                start
            } else {
                r
            };
            t.lost_rowid_ranges.push((from, r));
            (r != i64::MAX).then(|| r + 1)
        }
        Ok(None) => None,
        Err(_) => match skip_damage(src, q_table, rid, start) {
            Some(s) => {
                t.lost_rowid_ranges.push((start, s - 1));
                Some(s)
            }
            None => {
                t.lost_rowid_ranges.push((start, i64::MAX));
                None
            }
        },
    }
}

fn copy_without_rowid(
    src: &Connection,
    sink: &mut Sink<'_>,
    q_table: &str,
    cols: &str,
    pk: &[String],
    t: &mut TableReport,
    watch: &mut Watch,
) {
    let order = |dir: &str| {
        pk.iter()
            .map(|c| format!("{} {dir}", quote_ident(c)))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let forward = format!("SELECT {cols} FROM {q_table} ORDER BY {}", order("ASC"));
    let backward = format!("SELECT {cols} FROM {q_table} ORDER BY {}", order("DESC"));
    let mut read = |sql: &str, t: &mut TableReport| -> (u64, bool) {
        let mut n = 0;
        let mut stmt = match src.prepare(sql) {
            Ok(s) => s,
            Err(e) => {
                t.error(e);
                return (0, false);
            }
        };
        let mut rows = match stmt.query([]) {
            Ok(r) => r,
            Err(e) => {
                t.error(e);
                return (0, false);
            }
        };
        loop {
            if n % 4096 == 0 {
                if interrupted() {
                    t.error("interrupted");
                    return (n, true);
                }
                watch.tick(t, "in key order");
            }
            match rows.next() {
                Ok(None) => return (n, true),
                Ok(Some(r)) => {
                    let k = r.as_ref().column_count();
                    match (0..k).map(|i| r.get(i)).collect::<Result<Vec<Value>, _>>() {
                        Ok(v) => {
                            sink.put(&v, t);
                            n += 1;
                        }
                        Err(e) => {
                            t.error(e);
                            return (n, false);
                        }
                    }
                }
                Err(e) => {
                    t.error(e);
                    return (n, false);
                }
            }
        }
    };
    let (_, complete) = read(&forward, t);
    if !complete {
        t.rows_lost_in_key_order = true;
        // From the other end, up to the damage.
        let _ = read(&backward, t);
    }
}

fn copy_table(
    src: &Connection,
    dst: &Connection,
    row: &SchemaRow,
    watch: &mut Watch,
) -> TableReport {
    let mut t = TableReport {
        name: row.name.clone(),
        ..Default::default()
    };
    let sql = row.sql.clone().unwrap_or_default();
    if let Err(e) = create(dst, &sql) {
        t.status = "skipped";
        t.error(format!("its CREATE TABLE does not run in OUT: {e}"));
        return t;
    }
    let shape = match shape(src, &row.name, &sql) {
        Ok(s) => s,
        Err(e) => {
            t.status = "lost";
            t.error(e);
            return t;
        }
    };
    let q_table = quote_ident(&row.name);
    let cols = shape
        .columns
        .iter()
        .map(|c| quote_ident(c))
        .collect::<Vec<_>>()
        .join(", ");
    let mut ins_cols = Vec::new();
    if let Some(r) = shape.rowid {
        ins_cols.push(r.to_string());
    }
    ins_cols.extend(shape.columns.iter().map(|c| quote_ident(c)));
    let marks = vec!["?"; ins_cols.len()].join(", ");
    let insert_sql = format!(
        "INSERT INTO main.{q_table}({}) VALUES ({marks})",
        ins_cols.join(", ")
    );
    let insert = match dst.prepare_cached(&insert_sql) {
        Ok(s) => s,
        Err(e) => {
            t.status = "skipped";
            t.error(format!("cannot insert into OUT: {e}"));
            return t;
        }
    };
    let mut sink = Sink { insert };
    match shape.rowid {
        Some(rid) => copy_rowid_table(src, &mut sink, &q_table, rid, &cols, &mut t, watch),
        None if !shape.pk.is_empty() => {
            copy_without_rowid(src, &mut sink, &q_table, &cols, &shape.pk, &mut t, watch)
        }
        None => {
            t.status = "skipped";
            t.error("every rowid name is taken by a column and there is no primary key");
            return t;
        }
    }
    let damaged = t.error_count > 0 || !t.lost_rowid_ranges.is_empty() || t.rows_lost_in_key_order;
    t.status = if !damaged && t.rows_rejected == 0 {
        "complete"
    } else if t.rows_recovered == 0 && damaged {
        "lost"
    } else {
        "partial"
    };
    t
}

// ---- the command ---------------------------------------------------------

/// Copies DB and its side files into `dir`; returns the working copy's path.
fn working_copy(db: &Path, dir: &Path) -> Result<PathBuf, CliError> {
    let work = dir.join("work.db");
    std::fs::copy(db, &work).map_err(io_err(format!("copying {}", db.display())))?;
    for side in ["-wal", "-journal"] {
        let s = with_suffix(db, side);
        if s.is_file() {
            std::fs::copy(&s, with_suffix(&work, side))
                .map_err(io_err(format!("copying {}", s.display())))?;
        }
    }
    Ok(work)
}

/// Salvages `db` into a new database at `out_tmp`, showing progress through
/// `watch`. Fails when interrupted (SIGINT/SIGTERM).
pub fn salvage(
    db: &Path,
    out_tmp: &Path,
    scratch: &Path,
    watch: &mut Watch,
) -> Result<RecoverReport, CliError> {
    let mut report = RecoverReport {
        db: db.display().to_string(),
        ..Default::default()
    };
    let work = working_copy(db, scratch)?;
    let file_len = std::fs::metadata(&work).map_or(0, |m| m.len());
    repair_header(&work, file_len, &mut report)?;
    let src = match open_copy(&work) {
        Ok(c) => c,
        Err(e) => {
            report.schema_errors.push(e.to_string());
            report.outcome = "nothing";
            return Ok(report);
        }
    };
    let schema = match read_schema(&src) {
        Ok(s) => s,
        Err(e) => {
            report.schema_errors.push(e);
            report.outcome = "nothing";
            return Ok(report);
        }
    };
    let dst = create_out(&src, out_tmp)?;
    let vtabs: Vec<String> = schema
        .iter()
        .filter(|r| r.kind == "table" && r.sql.as_deref().is_some_and(is_virtual))
        .map(|r| r.name.clone())
        .collect();
    let sequence = copy_tables(&src, &dst, &schema, &vtabs, &mut report, watch)?;
    if let Some(seq) = sequence {
        copy_sequence(&src, &dst, &seq, &mut report, watch)?;
    }
    create_objects(&dst, &schema, &vtabs, &mut report);
    dst.execute_batch("COMMIT")
        .map_err(|e| litelane::Error::from_sqlite(e, "committing OUT"))?;
    report.out_integrity = {
        let mut stmt = dst.prepare("PRAGMA integrity_check")?;
        let rows = stmt.query_map([], |r| r.get(0))?;
        rows.collect::<Result<_, _>>()?
    };
    dst.close()
        .map_err(|(_, e)| litelane::Error::from_sqlite(e, "closing OUT"))?;
    report.rows_recovered = report.tables.iter().map(|t| t.rows_recovered).sum();
    let all_complete = report.tables.iter().all(|t| t.status == "complete")
        && report.objects.iter().all(|o| o.created);
    report.outcome = if all_complete && report.header_repairs.is_empty() {
        "complete"
    } else {
        "partial"
    };
    Ok(report)
}

/// Creates OUT at `out_tmp`, defensive and with no trusted schema, with the
/// damaged file's page size, `user_version` and `application_id`, no
/// journal, and a transaction open.
fn create_out(src: &Connection, out_tmp: &Path) -> Result<Connection, CliError> {
    let dst = Connection::open(out_tmp)
        .map_err(|e| litelane::Error::from_sqlite(e, format!("creating {}", out_tmp.display())))?;
    dst.set_db_config(DbConfig::SQLITE_DBCONFIG_DEFENSIVE, true)
        .and_then(|_| dst.set_db_config(DbConfig::SQLITE_DBCONFIG_TRUSTED_SCHEMA, false))
        .map_err(|e| litelane::Error::from_sqlite(e, "configuring OUT"))?;
    let page_size: i64 = src
        .query_row("PRAGMA page_size", [], |r| r.get(0))
        .unwrap_or(4096);
    let (user_version, app_id): (i64, i64) = (
        src.query_row("PRAGMA user_version", [], |r| r.get(0))
            .unwrap_or(0),
        src.query_row("PRAGMA application_id", [], |r| r.get(0))
            .unwrap_or(0),
    );
    dst.execute_batch(&format!(
        "PRAGMA page_size = {page_size}; PRAGMA journal_mode = OFF; PRAGMA synchronous = OFF; \
         PRAGMA foreign_keys = OFF; PRAGMA user_version = {user_version}; \
         PRAGMA application_id = {app_id}; BEGIN;"
    ))
    .map_err(|e| litelane::Error::from_sqlite(e, "configuring OUT"))?;
    Ok(dst)
}

/// Copies every ordinary table of `schema` into OUT, reporting each (and
/// each virtual or shadow table skipped); returns `sqlite_sequence`'s row,
/// copied last. Fails when interrupted.
fn copy_tables(
    src: &Connection,
    dst: &Connection,
    schema: &[SchemaRow],
    vtabs: &[String],
    report: &mut RecoverReport,
    watch: &mut Watch,
) -> Result<Option<SchemaRow>, CliError> {
    let mut sequence: Option<SchemaRow> = None;
    for row in schema.iter().filter(|r| r.kind == "table") {
        let lower = row.name.to_ascii_lowercase();
        if lower == "sqlite_sequence" {
            sequence = Some(row.clone());
            continue;
        }
        if lower.starts_with("sqlite_") {
            continue; // sqlite_stat*: rebuilt by ANALYZE / PRAGMA optimize
        }
        if let Some(skipped) = virtual_or_shadow(row, &lower, vtabs) {
            report.tables.push(skipped);
            continue;
        }
        if row.sql.is_none() {
            continue;
        }
        report.tables.push(copy_table(src, dst, row, watch));
        if interrupted() {
            return Err(CliError::Input(format!(
                "interrupted while copying table {}; nothing was written to OUT",
                quote_ident(&row.name)
            )));
        }
    }
    Ok(sequence)
}

/// The report of a table not copied because it is a virtual table or a
/// shadow table of one (`lower`: its name in lower case); `None` for an
/// ordinary table.
fn virtual_or_shadow(row: &SchemaRow, lower: &str, vtabs: &[String]) -> Option<TableReport> {
    if row.sql.as_deref().is_some_and(is_virtual) {
        return Some(TableReport {
            name: row.name.clone(),
            status: "skipped",
            errors: vec![
                "a virtual table: recreate it by hand (its module may not be here)".into(),
            ],
            error_count: 0,
            ..Default::default()
        });
    }
    let v = vtabs
        .iter()
        .find(|v| lower.starts_with(&format!("{}_", v.to_ascii_lowercase())))?;
    Some(TableReport {
        name: row.name.clone(),
        status: "skipped",
        errors: vec![format!(
            "a shadow table of virtual table {}",
            quote_ident(v)
        )],
        ..Default::default()
    })
}

/// AUTOINCREMENT counters: OUT created `sqlite_sequence` with the first
/// such table; its values are copied so new rowids do not reuse old ones.
fn copy_sequence(
    src: &Connection,
    dst: &Connection,
    seq: &SchemaRow,
    report: &mut RecoverReport,
    watch: &mut Watch,
) -> Result<(), CliError> {
    let mut t = TableReport {
        name: seq.name.clone(),
        ..Default::default()
    };
    let exists: bool = dst
        .query_row(
            "SELECT count(*) FROM sqlite_schema WHERE name = 'sqlite_sequence'",
            [],
            |r| r.get::<_, i64>(0),
        )
        .map(|n| n > 0)
        .unwrap_or(false);
    if !exists {
        return Ok(());
    }
    let _ = dst.execute("DELETE FROM sqlite_sequence", []);
    let mut sink = Sink {
        insert: dst
            .prepare_cached("INSERT INTO sqlite_sequence(rowid, name, seq) VALUES (?, ?, ?)")
            .map_err(|e| litelane::Error::from_sqlite(e, "copying sqlite_sequence"))?,
    };
    copy_rowid_table(
        src,
        &mut sink,
        "sqlite_sequence",
        "rowid",
        "name, seq",
        &mut t,
        watch,
    );
    t.status = if t.error_count == 0 {
        "complete"
    } else {
        "partial"
    };
    report.tables.push(t);
    Ok(())
}

/// Indexes from the recovered rows, then views and triggers (last, so no
/// trigger fires while rows are copied); each reported, and none made on a
/// table not recovered.
fn create_objects(
    dst: &Connection,
    schema: &[SchemaRow],
    vtabs: &[String],
    report: &mut RecoverReport,
) {
    for kind in ["index", "view", "trigger"] {
        for row in schema.iter().filter(|r| r.kind == kind) {
            let Some(sql) = row.sql.as_deref() else {
                continue; // automatic indexes of UNIQUE / PRIMARY KEY
            };
            let skipped = vtabs.iter().any(|v| v.eq_ignore_ascii_case(&row.table))
                || report
                    .tables
                    .iter()
                    .any(|t| t.name.eq_ignore_ascii_case(&row.table) && t.status == "skipped");
            let result = if skipped && kind != "view" {
                Err(format!(
                    "its table {} was not recovered",
                    quote_ident(&row.table)
                ))
            } else {
                create(dst, sql)
            };
            report.objects.push(ObjectReport {
                kind: kind.into(),
                name: row.name.clone(),
                created: result.is_ok(),
                error: result.err(),
            });
        }
    }
}

/// Runs one `CREATE ...` statement from the damaged file's schema in OUT:
/// anything else, or more than one statement, is refused (the text comes
/// from a damaged, untrusted file).
fn create(dst: &Connection, sql: &str) -> Result<(), String> {
    let head: String = sql
        .trim_start()
        .chars()
        .take(6)
        .collect::<String>()
        .to_ascii_uppercase();
    if head != "CREATE" {
        return Err(format!(
            "its schema entry is not a CREATE statement: {sql:?}"
        ));
    }
    dst.execute(sql, []).map(|_| ()).map_err(|e| e.to_string())
}

fn is_virtual(sql: &str) -> bool {
    let words: Vec<String> = sql
        .split_whitespace()
        .take(2)
        .map(|w| w.to_ascii_uppercase())
        .collect();
    words.len() == 2 && words[0] == "CREATE" && words[1] == "VIRTUAL"
}

fn range_text(r: &(i64, i64)) -> String {
    match r {
        (i64::MIN, i64::MAX) => "every rowid (the table's root page)".to_string(),
        (a, b) if a == b => format!("rowid {a}"),
        (i64::MIN, b) => format!("rowids up to {b}"),
        (a, i64::MAX) => format!("rowids from {a} on"),
        (a, b) => format!("rowids {a} to {b}"),
    }
}

/// Runs `litelane recover`.
pub fn recover(args: RecoverArgs) -> Result<(), CliError> {
    require_file(&args.db)?;
    check_out(&args.db, &args.out, args.force)?;
    let out_dir = match args.out.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let removed = remove_stale_scratch(&out_dir);
    if removed > 0 {
        eprintln!(
            "litelane: removed {removed} working director{} left in {} by an interrupted recover",
            if removed == 1 { "y" } else { "ies" },
            out_dir.display()
        );
    }
    // SIGINT/SIGTERM stop the copy at the next batch, so that the working
    // directory (removed when `scratch` is dropped) does not stay behind.
    let _ = ctrlc::set_handler(|| INTERRUPTED.store(true, Ordering::SeqCst));
    let scratch = tempfile::Builder::new()
        .prefix(SCRATCH_PREFIX)
        .tempdir_in(&out_dir)
        .map_err(io_err(format!(
            "creating a working directory in {}",
            out_dir.display()
        )))?;
    // Held for the whole run: a later run that can take it knows the
    // directory was left by a killed one.
    let lock = std::fs::File::create(scratch.path().join(SCRATCH_LOCK))
        .map_err(io_err("creating the working directory's lock"))?;
    let _ = fs4::fs_std::FileExt::try_lock_exclusive(&lock);
    let out_tmp = scratch.path().join("out.db");
    let mut watch = Watch::new(!args.json || std::io::stderr().is_terminal());
    let mut report = salvage(&args.db, &out_tmp, scratch.path(), &mut watch)?;
    report.out = args.out.display().to_string();
    if report.outcome != "nothing" {
        // Check again: OUT may have appeared meanwhile.
        check_out(&args.db, &args.out, args.force)?;
        let f = std::fs::File::open(&out_tmp).map_err(io_err("syncing OUT"))?;
        f.sync_all().map_err(io_err("syncing OUT"))?;
        if args.force {
            std::fs::rename(&out_tmp, &args.out).map_err(io_err(format!(
                "moving the result to {}",
                args.out.display()
            )))?;
        } else {
            std::fs::hard_link(&out_tmp, &args.out)
                .map_err(io_err(format!("creating {}", args.out.display())))?;
        }
        if let Ok(d) = std::fs::File::open(&out_dir) {
            let _ = d.sync_all();
        }
    }
    if args.json {
        println!(
            "{}",
            serde_json::to_string(&report).map_err(|e| CliError::Input(e.to_string()))?
        );
    } else {
        print_report(&report);
    }
    if report.outcome == "nothing" {
        return Err(CliError::Input(format!(
            "nothing could be recovered from {}: its schema is unreadable ({}); {} was not written",
            args.db.display(),
            report.schema_errors.join("; "),
            args.out.display()
        )));
    }
    Ok(())
}

/// Removes the working directories (`.litelane-recover-*` in `dir`) that
/// killed runs left: those whose lock no running recover holds (or, made by
/// an older litelane, that have no lock file and are over a minute old), and
/// that hold only files recover makes (anything else: left alone). Returns
/// how many were removed.
fn remove_stale_scratch(dir: &Path) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    let mut removed = 0;
    for e in entries.flatten() {
        let name = e.file_name();
        if !name.to_string_lossy().starts_with(SCRATCH_PREFIX) {
            continue;
        }
        let path = e.path();
        // Not through a symbolic link: only a real directory of ours.
        match std::fs::symlink_metadata(&path) {
            Ok(m) if m.is_dir() => {}
            _ => continue,
        }
        // Anything recover does not make in it: not ours to clear.
        let only_ours = std::fs::read_dir(&path).is_ok_and(|files| {
            files.flatten().all(|f| {
                SCRATCH_FILES
                    .iter()
                    .any(|n| f.file_name() == std::ffi::OsStr::new(n))
            })
        });
        if !only_ours {
            continue;
        }
        let lock_path = path.join(SCRATCH_LOCK);
        let held_by_nobody = match std::fs::OpenOptions::new().write(true).open(&lock_path) {
            Ok(f) => matches!(fs4::fs_std::FileExt::try_lock_exclusive(&f), Ok(true)),
            Err(_) => std::fs::metadata(&path)
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| t.elapsed().ok())
                .is_some_and(|age| age > UNLOCKED_STALE_AFTER),
        };
        if !held_by_nobody {
            continue;
        }
        for f in SCRATCH_FILES {
            let _ = std::fs::remove_file(path.join(f));
        }
        if std::fs::remove_dir(&path).is_ok() {
            removed += 1;
        }
    }
    removed
}

fn print_report(r: &RecoverReport) {
    println!("{} → {}: recovery {}", r.db, r.out, r.outcome);
    if !r.header_repairs.is_empty() {
        println!("header was damaged (repaired in a private copy, never in the file):");
        for h in &r.header_repairs {
            println!("  - {h}");
        }
    }
    for e in &r.schema_errors {
        println!("schema: {e}");
    }
    for t in &r.tables {
        print!(
            "table {}: {}, {} rows recovered",
            quote_ident(&t.name),
            t.status,
            t.rows_recovered
        );
        if t.rows_rejected > 0 {
            print!(", {} rows refused by its constraints", t.rows_rejected);
        }
        println!();
        if !t.lost_rowid_ranges.is_empty() {
            let ranges: Vec<String> = t.lost_rowid_ranges.iter().map(range_text).collect();
            println!("  unreadable: {}", ranges.join(", "));
        }
        if t.rows_lost_in_key_order {
            println!("  rows between the damaged pages (in key order) could not be reached");
        }
        for e in &t.errors {
            println!("  {e}");
        }
        if t.error_count as usize > t.errors.len() {
            println!("  ... {} errors in all", t.error_count);
        }
    }
    for o in &r.objects {
        match &o.error {
            None => println!("{} {}: recreated", o.kind, quote_ident(&o.name)),
            Some(e) => println!("{} {}: not recreated: {e}", o.kind, quote_ident(&o.name)),
        }
    }
    if !r.out_integrity.is_empty() {
        println!(
            "integrity_check of the result: {}",
            r.out_integrity.join("; ")
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn any_header_is_judged_without_panic_and_a_rebuilt_one_is_sound() {
        // A small deterministic generator: thousands of hostile headers.
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for i in 0..5000 {
            let mut h = [0u8; 100];
            for b in h.iter_mut() {
                *b = next() as u8;
            }
            if i % 3 == 0 {
                h[..16].copy_from_slice(MAGIC);
            }
            let len = next() % (1 << 30);
            let _ = header_problems(&h, len);
            let _ = header_problems(&h[..(i % 100)], len);
            for ps in [512u64, 4096, 65536] {
                let mut fixed = h;
                rebuild_header(&mut fixed, ps);
                assert!(header_problems(&fixed, len).is_empty(), "{fixed:?}");
                assert_eq!(page_size_field(&fixed), Some(ps));
            }
        }
    }

    #[test]
    fn a_sound_header_has_no_problems_and_each_damage_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("h.db");
        Connection::open(&p)
            .unwrap()
            .execute_batch("CREATE TABLE t(x)")
            .unwrap();
        let f = std::fs::read(&p).unwrap();
        let h: [u8; 100] = f[..100].try_into().unwrap();
        assert!(header_problems(&h, f.len() as u64).is_empty());
        let cases: &[(usize, u8, &str)] = &[
            (0, b'X', "magic"),
            (16, 0x03, "page size"),
            (18, 9, "file format"),
            (21, 65, "payload fractions"),
            (59, 7, "text encoding"),
        ];
        for (at, v, words) in cases {
            let mut bad = h;
            bad[*at] = *v;
            let p = header_problems(&bad, f.len() as u64);
            assert!(p.iter().any(|m| m.contains(words)), "{at}: {p:?}");
        }
        assert!(header_problems(&h[..10], 10)[0].contains("shorter than a header"));
    }

    #[test]
    fn lost_ranges_read_as_words() {
        let cases = [
            ((i64::MIN, i64::MAX), "every rowid (the table's root page)"),
            ((7, 7), "rowid 7"),
            ((i64::MIN, 12), "rowids up to 12"),
            ((40, i64::MAX), "rowids from 40 on"),
            ((3, 9), "rowids 3 to 9"),
        ];
        for (r, text) in cases {
            assert_eq!(range_text(&r), text);
        }
    }

    #[test]
    fn is_virtual_reads_the_first_two_words() {
        assert!(is_virtual("CREATE VIRTUAL TABLE f USING fts5(x)"));
        assert!(is_virtual("create\n virtual table f using rtree(a,b,c)"));
        assert!(!is_virtual("CREATE TABLE virtual(x)"));
        assert!(!is_virtual(""));
    }
}
