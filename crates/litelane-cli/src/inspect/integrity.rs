//! `litelane doctor --integrity`: SQLite's `integrity_check` (or
//! `quick_check`), one table at a time, reported per damaged object with
//! what to do about it.
//!
//! **Time-sliced.** `PRAGMA integrity_check` over the whole file holds one
//! read transaction for the whole check: on a live WAL database that keeps
//! checkpoints from resetting the WAL for as long as the check runs. With a
//! table name, the pragma checks only that table and its indexes (and, for
//! `sqlite_schema`, the free-page list), each call in its own read
//! transaction: the longest snapshot is the time to check the largest table.
//! (`PRAGMA integrity_check(N)` would not help: N limits the number of
//! errors reported, not the work.) What a check by table cannot see is the
//! file-level part: the free-page list, the schema's own b-tree and pages
//! that nothing uses (SQLite checks those only in a whole-file check;
//! `integrity_check('sqlite_schema')` checks nothing in SQLite 3.54). Files
//! up to [`WHOLE_FILE_MAX_BYTES`] get one whole-file pass after the slices
//! for that part; for larger ones the report says what was not checked.

use std::collections::HashMap;
use std::path::Path;
use std::time::Instant;

use litelane::quote_ident;
use litelane::rusqlite::Connection;
use serde::Serialize;

use super::shell_quote;

/// One damaged object, in words.
#[derive(Debug, Serialize, Clone)]
pub struct Damage {
    /// `table`, `index`, `schema`, `freelist`, `constraint` or `file`.
    pub kind: &'static str,
    /// The table or index, if any.
    pub name: Option<String>,
    /// For an index: its table.
    pub table: Option<String>,
    /// Database pages named in SQLite's messages.
    pub pages: Vec<u64>,
    /// What is wrong and what it means.
    pub message: String,
    /// What to do.
    pub advice: String,
    /// The shell command that does it.
    pub command: String,
    /// SQLite's own lines about this object (at most 20).
    pub details: Vec<String>,
}

/// The outcome of the check.
#[derive(Debug, Serialize)]
pub struct IntegrityReport {
    /// `integrity_check` or `quick_check`.
    pub check: &'static str,
    /// True when nothing is damaged.
    pub ok: bool,
    /// Read transactions used (one per table, plus the schema).
    pub slices: u64,
    /// The longest of them, in milliseconds.
    pub longest_slice_ms: f64,
    /// What is damaged.
    pub damage: Vec<Damage>,
    /// What this check does not cover.
    pub not_checked: Vec<String>,
}

/// SQLite's lines about one object: (key, name, pages, lines).
type Group = (String, Option<String>, Vec<u64>, Vec<String>);

#[derive(Debug, Clone)]
struct Object {
    kind: String,
    name: String,
    table: String,
}

/// Runs the check on an open connection (read-only, autocommit): each
/// table with its indexes in a slice of its own, then the whole file when it
/// is small enough; SQLite's lines grouped by the object they are about, one
/// [`Damage`] each.
pub fn check(conn: &Connection, db: &Path, quick: bool) -> IntegrityReport {
    let pragma = if quick {
        "quick_check"
    } else {
        "integrity_check"
    };
    let mut report = IntegrityReport {
        check: pragma,
        ok: true,
        slices: 0,
        longest_slice_ms: 0.0,
        damage: Vec::new(),
        not_checked: vec![
            "pages that no table or index uses (\"never used\"): space, not data; \
             only a whole-file check sees them"
                .into(),
        ],
    };
    let db_text = db.display().to_string();
    let fix = Fix {
        recover_cmd: format!(
            "litelane recover {} {}",
            shell_quote(&db_text),
            shell_quote(&format!("{db_text}.recovered"))
        ),
        db_text,
    };
    let objects = match list_objects(conn) {
        Ok(o) => o,
        Err(e) => {
            report.ok = false;
            report
                .damage
                .push(schema_damage(&e.to_string(), &fix.recover_cmd));
            return report;
        }
    };
    let by_root: HashMap<i64, Object> = objects.iter().cloned().collect();
    let slices: Vec<String> = objects
        .iter()
        .filter(|(root, o)| o.kind == "table" && *root > 0)
        .map(|(_, o)| o.name.clone())
        .collect();
    let mut lines = check_tables(conn, &mut report, &slices, quick, &by_root);
    check_whole_file(conn, db, &mut report, &mut lines);
    let groups = group_lines(lines, &by_root);
    let damaged_tables: Vec<String> = groups
        .iter()
        .filter(|g| g.0.starts_with("table:"))
        .filter_map(|g| g.1.clone())
        .collect();
    for group in groups {
        let d = damage_of(group, &by_root, &damaged_tables, &fix);
        report.damage.push(d);
    }
    report.ok = report.damage.is_empty();
    report
}

/// What the advice of a finding names: the database, and the command that
/// salvages it.
struct Fix {
    db_text: String,
    recover_cmd: String,
}

/// The schema's objects, by root page.
fn list_objects(conn: &Connection) -> Result<Vec<(i64, Object)>, litelane::rusqlite::Error> {
    let mut s = conn.prepare("SELECT rootpage, type, name, tbl_name, sql FROM sqlite_schema")?;
    let objects = s
        .query_map([], |r| {
            let sql: Option<String> = r.get(4)?;
            let kind: String = r.get(1)?;
            let virt = sql
                .as_deref()
                .is_some_and(|s| s.to_ascii_uppercase().starts_with("CREATE VIRTUAL"));
            Ok((
                r.get::<_, Option<i64>>(0)?.unwrap_or(0),
                Object {
                    kind: if virt { "virtual".into() } else { kind },
                    name: r.get(2)?,
                    table: r.get(3)?,
                },
            ))
        })?
        .collect();
    objects
}

/// Runs `sql` (a check) as one slice of the report: counted and timed.
fn timed_slice(
    conn: &Connection,
    report: &mut IntegrityReport,
    sql: &str,
) -> Result<Vec<String>, litelane::rusqlite::Error> {
    let started = Instant::now();
    let out = run_check(conn, sql);
    report.slices += 1;
    let ms = started.elapsed().as_secs_f64() * 1000.0;
    report.longest_slice_ms = report.longest_slice_ms.max(ms);
    out
}

/// Checks each table (with its indexes) alone; SQLite's lines other than
/// "ok", with the table they came from.
fn check_tables(
    conn: &Connection,
    report: &mut IntegrityReport,
    slices: &[String],
    quick: bool,
    by_root: &HashMap<i64, Object>,
) -> Vec<(String, String)> {
    let mut lines: Vec<(String, String)> = Vec::new(); // (slice, line)
    for slice in slices {
        let sql = format!("PRAGMA {}('{}')", report.check, slice.replace('\'', "''"));
        match timed_slice(conn, report, &sql) {
            Ok(v) => lines.extend(
                v.into_iter()
                    .filter(|l| l != "ok")
                    .map(|l| (slice.clone(), l)),
            ),
            // The check itself stopped on damage (integrity_check's index
            // lookups fail on a damaged index page): find which b-tree.
            Err(e) => lines.extend(
                locate(conn, slice, quick, by_root)
                    .unwrap_or_else(|| vec![format!("check stopped: {e}")])
                    .into_iter()
                    .map(|l| (slice.clone(), l)),
            ),
        }
    }
    lines
}

/// The whole-file part: the free-page list, the schema's own b-tree and
/// pages nothing uses are only checked by a check of the whole file (with a
/// table name, SQLite checks that table and its indexes only). One read
/// transaction for the whole file: only when the file is small enough for
/// that to be short; otherwise the report says what was not checked.
fn check_whole_file(
    conn: &Connection,
    db: &Path,
    report: &mut IntegrityReport,
    lines: &mut Vec<(String, String)>,
) {
    let file_bytes = std::fs::metadata(db).map_or(u64::MAX, |m| m.len());
    if file_bytes > WHOLE_FILE_MAX_BYTES {
        report.not_checked = vec![format!(
            "the free-page list, the schema's own pages and pages that no table uses: the \
             file is larger than {} MiB, and only a check of the whole file at once sees them \
             (sqlite3 DB 'PRAGMA integrity_check;' holds one read snapshot for all of it)",
            WHOLE_FILE_MAX_BYTES >> 20
        )];
        return;
    }
    report.not_checked.clear();
    let out = timed_slice(conn, report, &format!("PRAGMA {}", report.check));
    // Keep only what the table slices could not see.
    let mut file_level = 0;
    for l in out.unwrap_or_default() {
        if is_file_level(&l) || parse_tree(&l).is_some_and(|(root, _)| root == 1) {
            lines.push(("sqlite_schema".into(), l));
            file_level += 1;
        }
    }
    // SQLite skips its free-list and "never used" checks when the first
    // entry of its table hash is a view (the view's root page 0 reads as
    // "partial check"; seen in 3.40 and 3.54). Count instead: pages in
    // b-trees (dbstat) plus free pages must make the file.
    if file_level == 0 {
        if let Some(line) = page_accounting(conn) {
            lines.push(("sqlite_schema".into(), line));
        }
    }
}

/// SQLite's lines grouped by the object they are about, in the order first
/// seen: at most 20 lines a group, each page once.
fn group_lines(lines: Vec<(String, String)>, by_root: &HashMap<i64, Object>) -> Vec<Group> {
    let mut groups: Vec<Group> = Vec::new();
    let mut add = |key: String, name: Option<String>, page: Option<u64>, line: String| {
        let i = match groups.iter().position(|g| g.0 == key) {
            Some(i) => i,
            None => {
                groups.push((key, name, Vec::new(), Vec::new()));
                groups.len() - 1
            }
        };
        let g = &mut groups[i];
        if let Some(p) = page {
            if !g.2.contains(&p) {
                g.2.push(p);
            }
        }
        if g.3.len() < 20 {
            g.3.push(line);
        }
    };
    for (slice, line) in lines {
        if line.starts_with("*** in database") {
            continue;
        }
        if let Some((root, page)) = parse_tree(&line) {
            match by_root.get(&root) {
                Some(o) if root == 1 => {
                    add("schema".into(), Some(o.name.clone()), Some(page), line)
                }
                Some(o) if o.kind == "index" => add(
                    format!("index:{}", o.name),
                    Some(o.name.clone()),
                    Some(page),
                    line,
                ),
                Some(o) => add(
                    format!("table:{}", o.name),
                    Some(o.name.clone()),
                    Some(page),
                    line,
                ),
                None if root == 1 => add("schema".into(), None, Some(page), line),
                None => add(
                    format!("table:{slice}"),
                    Some(slice.clone()),
                    Some(page),
                    line,
                ),
            }
        } else if let Some(ix) = index_named(&line) {
            add(format!("index:{ix}"), Some(ix), None, line);
        } else if line.contains("never used") {
            add("unused".into(), None, parse_page(&line), line);
        } else if is_file_level(&line) {
            add("freelist".into(), None, None, line);
        } else if let Some(t) = constraint_table(&line) {
            add(format!("constraint:{t}"), Some(t), None, line);
        } else if slice == "sqlite_schema" {
            add("schema".into(), None, None, line);
        } else {
            add(format!("table:{slice}"), Some(slice.clone()), None, line);
        }
    }
    groups
}

/// The finding for one group of SQLite's lines: what is damaged, what it
/// means, and the command that repairs it.
// Long by nature: one arm per kind of damage, most of each its message.
fn damage_of(
    (key, name, mut pages, details): Group,
    by_root: &HashMap<i64, Object>,
    damaged_tables: &[String],
    fix: &Fix,
) -> Damage {
    pages.sort_unstable();
    let vacuum = || format!("sqlite3 {} 'VACUUM;'", shell_quote(&fix.db_text));
    if key == "schema" {
        let mut d = schema_damage(&details.join("; "), &fix.recover_cmd);
        d.pages = pages;
        d.details = details;
        d
    } else if key == "freelist" {
        Damage {
            kind: "freelist",
            name: None,
            table: None,
            pages,
            message: "the list of free pages is damaged: no table has lost rows, but SQLite \
                      may later reuse a page that is still in use and damage a table"
                .into(),
            advice: "stop writing to the database and rebuild the file (VACUUM writes a new \
                     file from the tables and drops the old free list)"
                .into(),
            command: vacuum(),
            details,
        }
    } else if key == "unused" {
        Damage {
            kind: "unused_pages",
            name: None,
            table: None,
            pages,
            message: "some pages belong to no table, index or free list: space lost, no \
                      rows (often left by a crash of a tool that wrote the file without a \
                      journal)"
                .into(),
            advice: "rebuild the file to reclaim the space".into(),
            command: vacuum(),
            details,
        }
    } else if let Some(ix) = key.strip_prefix("index:") {
        index_damage(ix, name, pages, details, by_root, damaged_tables, fix)
    } else if let Some(t) = key.strip_prefix("constraint:") {
        Damage {
            kind: "constraint",
            name: Some(t.to_string()),
            table: Some(t.to_string()),
            pages,
            message: format!(
                "rows of table {} break its NOT NULL or CHECK constraints (written while the \
                 constraint was not enforced, or changed by damage)",
                quote_ident(t)
            ),
            advice: "find those rows (SQLite's lines below name the column or constraint) \
                     and fix or delete them"
                .into(),
            command: format!(
                "sqlite3 {} {}",
                shell_quote(&fix.db_text),
                shell_quote(&format!("PRAGMA integrity_check({});", quote_ident(t)))
            ),
            details,
        }
    } else {
        let t = key.strip_prefix("table:").unwrap_or(&key).to_string();
        Damage {
            kind: "table",
            name: Some(t.clone()),
            table: Some(t.clone()),
            message: format!(
                "table {} is damaged{}: some of its rows cannot be read, or are not what was \
                 written",
                quote_ident(&t),
                pages_text(&pages)
            ),
            pages,
            advice: "stop writing to the database; keep a copy of it as it is; salvage what \
                     can be read into a new file and check the report of what was lost"
                .into(),
            command: fix.recover_cmd.clone(),
            details,
        }
    }
}

/// " (page 3)", " (pages 3, 7)", or nothing.
fn pages_text(pages: &[u64]) -> String {
    if pages.is_empty() {
        return String::new();
    }
    format!(
        " (page{} {})",
        if pages.len() == 1 { "" } else { "s" },
        pages
            .iter()
            .map(|p| p.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    )
}

/// The finding for a damaged index: rebuilt from its table unless the table
/// is damaged too (then the table is salvaged first).
fn index_damage(
    ix: &str,
    name: Option<String>,
    pages: Vec<u64>,
    details: Vec<String>,
    by_root: &HashMap<i64, Object>,
    damaged_tables: &[String],
    fix: &Fix,
) -> Damage {
    let table = by_root
        .values()
        .find(|o| o.kind == "index" && o.name == ix)
        .map(|o| o.table.clone());
    let table_too = table.as_ref().is_some_and(|t| damaged_tables.contains(t));
    let sql = format!("REINDEX {};", quote_ident(ix));
    Damage {
        kind: "index",
        name,
        table: table.clone(),
        message: format!(
            "index {}{} is damaged{}: queries that use it can miss rows or return wrong ones{}",
            quote_ident(ix),
            table
                .as_ref()
                .map(|t| format!(" on table {}", quote_ident(t)))
                .unwrap_or_default(),
            pages_text(&pages),
            if table_too {
                "; its table is damaged too"
            } else {
                "; the table's rows themselves are intact"
            }
        ),
        pages,
        advice: if table_too {
            "salvage the table first (see the table's entry), then rebuild the index".into()
        } else {
            "rebuild the index from its table (nothing is lost)".into()
        },
        command: if table_too {
            fix.recover_cmd.clone()
        } else {
            format!(
                "sqlite3 {} {}",
                shell_quote(&fix.db_text),
                shell_quote(&sql)
            )
        },
        details,
    }
}

/// The file cannot be opened as a database at all.
pub fn unreadable(db: &str, error: &str) -> Damage {
    let message = match truncated(Path::new(db)) {
        Some((have, want)) => format!(
            "the file is truncated: its header says {want} pages, the file holds {have} \
             (a copy cut short, a full disk, a crash of a tool that wrote it); SQLite refuses \
             to open it ({error})"
        ),
        None => format!(
            "SQLite cannot read the file as a database ({error}): the header (its first 100 \
             bytes) or the schema on page 1 is damaged"
        ),
    };
    Damage {
        kind: "file",
        name: None,
        table: None,
        pages: vec![1],
        message,
        advice: "keep a copy of the file as it is; salvage what can be read into a new file \
                 (recover rebuilds a damaged header in a private copy)"
            .into(),
        command: format!(
            "litelane recover {} {}",
            shell_quote(db),
            shell_quote(&format!("{db}.recovered"))
        ),
        details: vec![error.to_string()],
    }
}

/// After a check of `table` stopped on an error: quick_check's page-level
/// lines if it gets through, else a full read of the table and of each of
/// its indexes, each alone. Lines name the index in the form the grouping
/// understands. None when nothing more specific was found.
fn locate(
    conn: &Connection,
    table: &str,
    quick: bool,
    by_root: &HashMap<i64, Object>,
) -> Option<Vec<String>> {
    let lit = table.replace('\'', "''");
    if !quick {
        let q = run_check(conn, &format!("PRAGMA quick_check('{lit}')"));
        if let Ok(v) = q {
            let v: Vec<String> = v.into_iter().filter(|l| l != "ok").collect();
            if !v.is_empty() {
                return Some(v);
            }
        }
    }
    let mut out = Vec::new();
    let t = quote_ident(table);
    if let Err(e) = conn.query_row(&format!("SELECT count(*) FROM {t} NOT INDEXED"), [], |r| {
        r.get::<_, i64>(0)
    }) {
        out.push(format!("reading the table's pages failed: {e}"));
    }
    let mut indexes: Vec<&Object> = by_root
        .values()
        .filter(|o| o.kind == "index" && o.table == table)
        .collect();
    indexes.sort_by(|a, b| a.name.cmp(&b.name));
    for ix in indexes {
        let sql = format!(
            "SELECT count(*) FROM {t} INDEXED BY {}",
            quote_ident(&ix.name)
        );
        if let Err(e) = conn.query_row(&sql, [], |r| r.get::<_, i64>(0)) {
            if !e.to_string().contains("no query solution") {
                out.push(format!(
                    "reading failed: {e}: entries missing from index {}",
                    ix.name
                ));
            }
        }
    }
    (!out.is_empty()).then_some(out)
}

fn schema_damage(detail: &str, recover_cmd: &str) -> Damage {
    Damage {
        kind: "schema",
        name: Some("sqlite_schema".into()),
        table: None,
        pages: Vec::new(),
        message: format!(
            "the schema (the list of tables and indexes, on page 1 and the pages it points to) \
             is damaged: SQLite may not find some tables at all ({detail})"
        ),
        advice: "stop writing to the database; keep a copy of it as it is; salvage what can be \
                 read into a new file"
            .into(),
        command: recover_cmd.to_string(),
        details: vec![detail.to_string()],
    }
}

/// `Some((pages in the file, pages the header claims))` when the header is
/// sound, its page count valid, and the file shorter.
fn truncated(db: &Path) -> Option<(u64, u64)> {
    use std::io::Read;
    let mut h = [0u8; 100];
    let mut f = std::fs::File::open(db).ok()?;
    f.read_exact(&mut h).ok()?;
    let len = f.metadata().ok()?.len();
    if &h[..16] != b"SQLite format 3\0" || h[24..28] != h[92..96] {
        return None;
    }
    let ps = match u16::from_be_bytes([h[16], h[17]]) {
        1 => 65536u64,
        n if n >= 512 && n.is_power_of_two() => n as u64,
        _ => return None,
    };
    let want = u32::from_be_bytes([h[28], h[29], h[30], h[31]]) as u64;
    let have = len.div_ceil(ps);
    (want > have).then_some((have, want))
}

/// "Freelist: ..." when the free-page count of the header and the pages in
/// b-trees do not add up to the file (files without auto-vacuum, whose
/// pointer-map pages would need counting too). None when they do, or when
/// they cannot be counted.
fn page_accounting(conn: &Connection) -> Option<String> {
    // One read snapshot for all the counts: a commit of a live writer
    // between two of them made them disagree (a free list reported damaged
    // on a sound file, about 1 run in 13 of
    // `doctor_integrity_runs_beside_live_writers`).
    let snapshot = conn.is_autocommit() && conn.execute_batch("BEGIN").is_ok();
    let out = count_pages(conn);
    if snapshot {
        let _ = conn.execute_batch("COMMIT");
    }
    out
}

fn count_pages(conn: &Connection) -> Option<String> {
    let one = |sql: &str| conn.query_row(sql, [], |r| r.get::<_, i64>(0)).ok();
    if one("PRAGMA auto_vacuum")? != 0 {
        return None;
    }
    let pages = one("PRAGMA page_count")?;
    let free = one("PRAGMA freelist_count")?;
    let used = one("SELECT count(*) FROM dbstat")?;
    let page_size = one("PRAGMA page_size")?;
    // The page holding byte 2^30 is never used, in files that reach it.
    let pending = (1i64 << 30) / page_size + 1;
    let expected = pages - used - i64::from(pages >= pending);
    (free != expected).then(|| {
        format!(
            "Freelist: the header counts {free} free pages, but {used} of the file's {pages} \
             pages are in tables and indexes, which leaves {expected}"
        )
    })
}

/// Runs a check pragma; returns its messages one per line ("ok" and the
/// "*** in database main ***" headings left out). One result row can hold
/// several messages separated by newlines.
fn run_check(conn: &Connection, sql: &str) -> Result<Vec<String>, litelane::rusqlite::Error> {
    let rows: Vec<String> = conn
        .prepare(sql)
        .and_then(|mut s| s.query_map([], |r| r.get(0))?.collect())?;
    Ok(rows
        .iter()
        .flat_map(|r| r.lines())
        .map(str::trim)
        .filter(|l| !l.is_empty() && *l != "ok" && !l.starts_with("*** in database"))
        .map(str::to_string)
        .collect())
}

/// Files up to this size (256 MiB) also get one whole-file check after the
/// table slices: about a second of read snapshot on a quiet disk.
pub const WHOLE_FILE_MAX_BYTES: u64 = 256 << 20;

/// Lines about the file rather than one b-tree: the free list, pages never
/// used, auto-vacuum bookkeeping.
fn is_file_level(line: &str) -> bool {
    let l = line.to_ascii_lowercase();
    l.contains("freelist")
        || l.contains("never used")
        || l.starts_with("max rootpage")
        || l.starts_with("incremental_vacuum")
}

/// `Page N: never used` → N.
fn parse_page(line: &str) -> Option<u64> {
    line.strip_prefix("Page ")?
        .split(':')
        .next()?
        .trim()
        .parse()
        .ok()
}

/// `Tree R page P ...: ...` → (R, P).
fn parse_tree(line: &str) -> Option<(i64, u64)> {
    let rest = line.strip_prefix("Tree ")?;
    let mut it = rest.split_whitespace();
    let root: i64 = it.next()?.parse().ok()?;
    if it.next()? != "page" {
        return None;
    }
    let page = it.next()?.trim_end_matches(':').parse().ok()?;
    Some((root, page))
}

/// `row N missing from index I`, `wrong # of entries in index I`,
/// `non-unique entry in index I` → I.
fn index_named(line: &str) -> Option<String> {
    for marker in [
        " missing from index ",
        "wrong # of entries in index ",
        "non-unique entry in index ",
    ] {
        if let Some(i) = line.find(marker) {
            return Some(line[i + marker.len()..].trim().to_string());
        }
    }
    None
}

/// `NULL value in T.C`, `CHECK constraint failed in T` → T.
fn constraint_table(line: &str) -> Option<String> {
    if let Some(rest) = line.strip_prefix("NULL value in ") {
        return Some(rest.rsplit_once('.').map_or(rest, |(t, _)| t).to_string());
    }
    line.strip_prefix("CHECK constraint failed in ")
        .map(|t| t.trim().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sqlite_lines_are_attributed_to_their_object() {
        type Row = (
            &'static str,
            Option<(i64, u64)>,
            Option<&'static str>,
            Option<&'static str>,
        );
        let table: &[Row] = &[
            (
                "Tree 3 page 3 cell 0: invalid page number 99",
                Some((3, 3)),
                None,
                None,
            ),
            (
                "Tree 12 page 40: btreeInitPage() returns error code 11",
                Some((12, 40)),
                None,
                None,
            ),
            (
                "Tree 2 page 2 right child: 2nd reference to page 7",
                Some((2, 2)),
                None,
                None,
            ),
            (
                "row 5 missing from index idx_a b",
                None,
                Some("idx_a b"),
                None,
            ),
            ("wrong # of entries in index i", None, Some("i"), None),
            ("non-unique entry in index u", None, Some("u"), None),
            ("NULL value in t.x", None, None, Some("t")),
            ("NULL value in my.table.x", None, None, Some("my.table")),
            ("CHECK constraint failed in t", None, None, Some("t")),
            ("Freelist: invalid page number 7", None, None, None),
            ("Tree x page 1: nonsense", None, None, None),
            ("Tree", None, None, None),
        ];
        assert_eq!(parse_page("Page 17: never used"), Some(17));
        assert_eq!(parse_page("Page x: never used"), None);
        assert!(is_file_level("Freelist: 2nd reference to page 4"));
        assert!(is_file_level("Page 9: never used"));
        assert!(!is_file_level("Tree 3 page 3: never mind"));
        for (line, tree, index, cons) in table {
            assert_eq!(parse_tree(line), *tree, "{line}");
            assert_eq!(index_named(line).as_deref(), *index, "{line}");
            assert_eq!(constraint_table(line).as_deref(), *cons, "{line}");
        }
    }
}
