//! `litelane doctor DB`: the file's settings against best practice, each
//! shortfall with the exact command that fixes it. Reads only.

use litelane::quote_ident;
use litelane::rusqlite::Connection;
use serde::Serialize;

use super::stats::{collect, Stats};
use super::{human_bytes, integrity, open_untrusted, shell_quote, DoctorArgs};
use crate::error::CliError;

/// A WAL file larger than this is worth a checkpoint (64 MiB, litelane's
/// `journal_size_limit`).
pub const WAL_WARN_BYTES: u64 = 64 << 20;
/// A WAL at least this large (1 MiB) that is also larger than the database
/// file is reported: what a bulk write left, not a working set.
pub const WAL_LEFTOVER_BYTES: u64 = 1 << 20;
/// Free pages above this share of the file are worth a VACUUM.
pub const FREELIST_WARN_RATIO: f64 = 0.10;
/// ...when there are at least this many of them.
pub const FREELIST_WARN_PAGES: u64 = 256;

/// One thing that falls short.
#[derive(Debug, Serialize)]
pub struct Finding {
    /// Short name of the check.
    pub check: String,
    /// `warning` (costs speed, safety or space) or `info`.
    pub severity: &'static str,
    /// What is wrong and why it matters.
    pub message: String,
    /// The SQL that fixes it, if it is SQL.
    pub sql: Option<String>,
    /// The shell command that fixes it.
    pub command: String,
}

fn sql_fix(check: &str, severity: &'static str, message: String, db: &str, sql: String) -> Finding {
    Finding {
        check: check.into(),
        severity,
        message,
        command: format!("sqlite3 {} {}", shell_quote(db), shell_quote(&sql)),
        sql: Some(sql),
    }
}

/// Foreign keys whose child columns are not the leading columns of any
/// index: `(table, columns, parent table)`.
fn unindexed_foreign_keys(
    conn: &Connection,
    s: &Stats,
) -> Result<Vec<(String, Vec<String>, String)>, CliError> {
    let mut out = Vec::new();
    for t in s.tables.iter().filter(|t| t.kind == "table") {
        // (id, seq, parent, from)
        let mut fks: Vec<(i64, i64, String, String)> = Vec::new();
        {
            let mut stmt = conn.prepare(
                "SELECT id, seq, \"table\", \"from\" FROM pragma_foreign_key_list(?1) ORDER BY id, seq",
            )?;
            let rows = stmt.query_map([&t.name], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
            })?;
            for r in rows {
                fks.push(r?);
            }
        }
        if fks.is_empty() {
            continue;
        }
        // Leading columns of every index (including the primary key's).
        let mut index_cols: Vec<Vec<String>> = Vec::new();
        {
            let mut stmt = conn.prepare("SELECT name FROM pragma_index_list(?1)")?;
            let names: Vec<String> = stmt
                .query_map([&t.name], |r| r.get(0))?
                .collect::<Result<_, _>>()?;
            let mut cols = conn
                .prepare("SELECT coalesce(name, '') FROM pragma_index_info(?1) ORDER BY seqno")?;
            for n in names {
                let c: Vec<String> = cols
                    .query_map([&n], |r| r.get(0))?
                    .collect::<Result<_, _>>()?;
                index_cols.push(c);
            }
            // An INTEGER PRIMARY KEY is the rowid: indexed by nature.
            let mut pk = conn.prepare(
                "SELECT name FROM pragma_table_info(?1) WHERE pk = 1 AND upper(type) = 'INTEGER' \
                 AND (SELECT count(*) FROM pragma_table_info(?1) WHERE pk > 0) = 1",
            )?;
            let rowid: Vec<String> = pk
                .query_map([&t.name], |r| r.get(0))?
                .collect::<Result<_, _>>()?;
            index_cols.extend(rowid.into_iter().map(|c| vec![c]));
        }
        let mut i = 0;
        while i < fks.len() {
            let id = fks[i].0;
            let parent = fks[i].2.clone();
            let mut cols = Vec::new();
            while i < fks.len() && fks[i].0 == id {
                cols.push(fks[i].3.clone());
                i += 1;
            }
            let covered = index_cols.iter().any(|ix| {
                ix.len() >= cols.len()
                    && cols
                        .iter()
                        .all(|c| ix[..cols.len()].iter().any(|x| x.eq_ignore_ascii_case(c)))
            });
            if !covered {
                out.push((t.name.clone(), cols, parent));
            }
        }
    }
    Ok(out)
}

/// Checks an open database: each check below that finds something adds
/// its finding, in this order.
pub fn diagnose(conn: &Connection, s: &Stats) -> Result<Vec<Finding>, CliError> {
    let db = s.path.as_str();
    let mut f: Vec<Finding> = [
        journal_mode(s, db),
        wal_size(s, db),
        freelist(s, db),
        auto_vacuum(s, db),
        page_size(s, db),
    ]
    .into_iter()
    .flatten()
    .collect();
    for (table, cols, parent) in unindexed_foreign_keys(conn, s)? {
        f.push(foreign_key_index(db, &table, &cols, &parent));
    }
    f.extend(sync_failure(db));
    f.extend(leftovers(std::path::Path::new(&s.path)));
    f.extend(statistics(s, db));
    Ok(f)
}

/// Not in WAL mode.
fn journal_mode(s: &Stats, db: &str) -> Option<Finding> {
    (!s.journal_mode.eq_ignore_ascii_case("wal")).then(|| {
        sql_fix(
            "journal_mode",
            "warning",
            format!(
                "journal mode is {}: a writer blocks every reader and each commit rewrites a \
                 rollback journal; WAL lets readers run beside the writer and commits append",
                s.journal_mode
            ),
            db,
            "PRAGMA journal_mode=WAL;".into(),
        )
    })
}

/// A large WAL file, or one larger than the database.
fn wal_size(s: &Stats, db: &str) -> Option<Finding> {
    let wal_leftover = s.wal_bytes >= WAL_LEFTOVER_BYTES && s.wal_bytes > s.file_bytes;
    if s.wal_bytes <= WAL_WARN_BYTES && !wal_leftover {
        return None;
    }
    Some(Finding {
        check: "wal_size".into(),
        severity: "warning",
        message: format!(
            "the WAL file is {}{}: reads get slower as it grows, and it holds space; a \
             reader that never ends, or no checkpoints, keeps it from being reset",
            human_bytes(s.wal_bytes),
            if wal_leftover {
                format!(
                    ", larger than the database file ({})",
                    human_bytes(s.file_bytes)
                )
            } else {
                String::new()
            }
        ),
        sql: Some("PRAGMA wal_checkpoint(TRUNCATE);".into()),
        command: format!("litelane checkpoint {} --mode truncate", shell_quote(db)),
    })
}

/// Many free pages.
fn freelist(s: &Stats, db: &str) -> Option<Finding> {
    if s.page_count == 0 {
        return None;
    }
    let ratio = s.freelist_count as f64 / s.page_count as f64;
    (ratio > FREELIST_WARN_RATIO && s.freelist_count >= FREELIST_WARN_PAGES).then(|| {
        sql_fix(
            "freelist",
            "warning",
            format!(
                "{:.0}% of the file ({} pages, {}) is free pages left by deletes: the file is \
                 larger than its data and the data is scattered",
                ratio * 100.0,
                s.freelist_count,
                human_bytes(s.freelist_count * s.page_size)
            ),
            db,
            "VACUUM;".into(),
        )
    })
}

/// `auto_vacuum=FULL`.
fn auto_vacuum(s: &Stats, db: &str) -> Option<Finding> {
    (s.auto_vacuum == 1).then(|| {
        sql_fix(
            "auto_vacuum",
            "info",
            "auto_vacuum is FULL: every commit that frees pages moves other pages to the end of \
             the file to truncate it, which costs time at each commit and fragments tables; \
             INCREMENTAL frees space when you ask for it"
                .into(),
            db,
            "PRAGMA auto_vacuum=INCREMENTAL; VACUUM;".into(),
        )
    })
}

/// Pages smaller than 4096 bytes.
fn page_size(s: &Stats, db: &str) -> Option<Finding> {
    if s.page_size >= 4096 {
        return None;
    }
    let sql = if s.journal_mode.eq_ignore_ascii_case("wal") {
        "PRAGMA journal_mode=DELETE; PRAGMA page_size=4096; VACUUM; PRAGMA journal_mode=WAL;"
    } else {
        "PRAGMA page_size=4096; VACUUM;"
    };
    Some(sql_fix(
        "page_size",
        "warning",
        format!(
            "page size is {} bytes: smaller than the 4096-byte pages of today's disks and \
             file systems, so every page write is a partial block",
            s.page_size
        ),
        db,
        sql.into(),
    ))
}

/// A foreign key of `table` (its columns `cols`) to `parent` with no index.
fn foreign_key_index(db: &str, table: &str, cols: &[String], parent: &str) -> Finding {
    let quoted = cols
        .iter()
        .map(|c| quote_ident(c))
        .collect::<Vec<_>>()
        .join(", ");
    let name = format!("{}_{}_idx", table, cols.join("_"));
    let sql = format!(
        "CREATE INDEX {} ON {}({quoted});",
        quote_ident(&name),
        quote_ident(table),
    );
    sql_fix(
        "foreign_key_index",
        "warning",
        format!(
            "foreign key {}({quoted}) → {} has no index: every delete or key update in {} scans \
             all of {}",
            quote_ident(table),
            quote_ident(parent),
            quote_ident(parent),
            quote_ident(table)
        ),
        db,
        sql,
    )
}

/// A failed fsync recorded in the cross-process lock file.
fn sync_failure(db: &str) -> Option<Finding> {
    let (lock, at) = litelane::xproc::recorded_sync_failure(std::path::Path::new(db))?;
    let lock = lock.display().to_string();
    Some(Finding {
        check: "sync_failure".into(),
        severity: "warning",
        message: format!(
            "the lock file {lock} records a failed fsync of the WAL (at commit {at}): the \
             commits around it may or may not be durable, and every litelane process \
             refuses writes to this database until the disk and the database are checked \
             and that lock file is removed while no process has the database open (see \
             docs/durability.md, \"What a caller should do on OutcomeUnknown\")"
        ),
        sql: None,
        command: format!(
            "litelane doctor --integrity {}, then with no process using it: rm -- {}",
            shell_quote(db),
            shell_quote(&lock)
        ),
    })
}

/// Indexes but no query planner statistics.
fn statistics(s: &Stats, db: &str) -> Option<Finding> {
    let has_stat1 = s
        .tables
        .iter()
        .any(|t| t.name.eq_ignore_ascii_case("sqlite_stat1"));
    (s.indexes > 0 && !has_stat1).then(|| {
        sql_fix(
            "statistics",
            "info",
            "no query planner statistics (sqlite_stat1): with several indexes on a table the \
             planner may pick a poor one"
                .into(),
            db,
            "PRAGMA optimize;".into(),
        )
    })
}

/// Files litelane leaves beside the database only when a run of it was
/// killed: an import's lock file (`DB.litelane-import-HASH.lock`), the
/// database a killed import was writing aside (`DB.litelane-import-HASH.importing`,
/// stale when its table's lock file is not held), and a
/// recover's working directory (`.litelane-recover-*`, made beside its
/// output; those in the database's directory are looked at), each reported
/// only when no running litelane holds its lock (probed with a shared lock,
/// released at once).
pub fn leftovers(db: &std::path::Path) -> Vec<Finding> {
    let mut out = Vec::new();
    let real = std::fs::canonicalize(db).unwrap_or_else(|_| db.to_path_buf());
    let Some(dir) = real.parent() else {
        return out;
    };
    let Some(file) = real.file_name().map(|n| n.to_string_lossy().into_owned()) else {
        return out;
    };
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    let mut names: Vec<(String, std::path::PathBuf)> = entries
        .flatten()
        .map(|e| (e.file_name().to_string_lossy().into_owned(), e.path()))
        .collect();
    names.sort();
    let held = |p: &std::path::Path| {
        std::fs::File::open(p)
            .is_ok_and(|f| !matches!(fs4::fs_std::FileExt::try_lock_shared(&f), Ok(true)))
    };
    let lock_prefix = format!("{file}.litelane-import-");
    for (name, path) in &names {
        let shown = path.display().to_string();
        if name.starts_with(&lock_prefix) && name.ends_with(".lock") {
            if !std::fs::symlink_metadata(path).is_ok_and(|m| m.is_file()) || held(path) {
                continue;
            }
            out.push(Finding {
                check: "stale_import_lock".into(),
                severity: "info",
                message: format!(
                    "{shown} is the lock file of an import that was killed (no import holds \
                     it): harmless, but nothing uses it"
                ),
                sql: None,
                command: format!("rm -- {}", shell_quote(&shown)),
            });
        } else if let Some(table) = name
            .strip_prefix(&lock_prefix)
            .and_then(|n| n.strip_suffix(".importing"))
        {
            let lock = dir.join(format!("{lock_prefix}{table}.lock"));
            if !std::fs::symlink_metadata(path).is_ok_and(|m| m.is_file()) || held(&lock) {
                continue;
            }
            let bytes = std::fs::metadata(path).map_or(0, |m| m.len());
            out.push(Finding {
                check: "stale_import_aside".into(),
                severity: "warning",
                message: format!(
                    "{shown} ({}) is the database an import that was killed was writing aside \
                     (no import of its table is running): nothing uses it, remove it",
                    human_bytes(bytes)
                ),
                sql: None,
                command: format!("rm -- {}", shell_quote(&shown)),
            });
        } else if name.starts_with(".litelane-recover-") {
            if !std::fs::symlink_metadata(path).is_ok_and(|m| m.is_dir())
                || held(&path.join("lock"))
            {
                continue;
            }
            let bytes: u64 = std::fs::read_dir(path)
                .map(|es| {
                    es.flatten()
                        .filter_map(|e| e.metadata().ok())
                        .map(|m| m.len())
                        .sum()
                })
                .unwrap_or(0);
            out.push(Finding {
                check: "stale_recover_dir".into(),
                severity: "warning",
                message: format!(
                    "{shown} ({}) is the working directory of a `litelane recover` that was \
                     killed (no recover holds it); the next recover into this directory \
                     removes it, or remove it yourself",
                    human_bytes(bytes)
                ),
                sql: None,
                command: format!("rm -r -- {}", shell_quote(&shown)),
            });
        }
    }
    out
}

/// Runs `litelane doctor`.
pub fn doctor(args: DoctorArgs) -> Result<(), CliError> {
    if args.integrity {
        return doctor_integrity(&args);
    }
    let conn = open_untrusted(&args.db)?;
    let s = collect(&conn, &args.db)?;
    let findings = diagnose(&conn, &s)?;
    if args.json {
        println!("{}", settings_json(&s, &findings));
        return Ok(());
    }
    print_findings(&s, &findings);
    Ok(())
}

fn settings_json(s: &Stats, findings: &[Finding]) -> serde_json::Value {
    serde_json::json!({
        "path": s.path,
        "journal_mode": s.journal_mode,
        "page_size": s.page_size,
        "auto_vacuum": s.auto_vacuum,
        "wal_bytes": s.wal_bytes,
        "freelist_count": s.freelist_count,
        "page_count": s.page_count,
        "findings": findings,
    })
}

fn print_findings(s: &Stats, findings: &[Finding]) {
    if findings.is_empty() {
        println!("{}: no problems found", s.path);
        return;
    }
    println!("{}: {} finding(s)", s.path, findings.len());
    for x in findings {
        println!();
        println!("[{}] {}: {}", x.severity, x.check, x.message);
        println!("  fix: {}", x.command);
    }
}

/// `doctor --integrity`: the damage check first (a damaged file may not get
/// as far as the settings), then the settings if the file allows.
fn doctor_integrity(args: &DoctorArgs) -> Result<(), CliError> {
    let db_text = args.db.display().to_string();
    let (report, conn) = match open_untrusted(&args.db) {
        Ok(conn) => (integrity::check(&conn, &args.db, args.quick), Some(conn)),
        // Not a database any more (header) or the schema unreadable.
        Err(CliError::Engine(e)) if matches!(e.sqlite_code(), Some(11) | Some(26)) => {
            let report = integrity::IntegrityReport {
                check: if args.quick {
                    "quick_check"
                } else {
                    "integrity_check"
                },
                ok: false,
                slices: 0,
                longest_slice_ms: 0.0,
                damage: vec![integrity::unreadable(&db_text, &e.to_string())],
                not_checked: vec!["everything: SQLite cannot open the file as a database".into()],
            };
            (report, None)
        }
        Err(e) => return Err(e),
    };
    // The settings, when the file can be read that far.
    let settings = conn
        .as_ref()
        .map(|c| collect(c, &args.db).and_then(|s| diagnose(c, &s).map(|f| (s, f))));
    if args.json {
        let mut out = match &settings {
            Some(Ok((s, f))) => settings_json(s, f),
            _ => serde_json::json!({ "path": db_text }),
        };
        if let Some(Err(e)) = &settings {
            out["settings_error"] = serde_json::Value::String(e.to_string());
        }
        out["integrity"] = serde_json::to_value(&report)
            .map_err(|e| CliError::Input(format!("serializing the report: {e}")))?;
        println!("{out}");
    } else {
        print_integrity(&db_text, &report);
        match &settings {
            Some(Ok((s, f))) => {
                println!();
                print_findings(s, f);
            }
            Some(Err(e)) => println!("\nsettings not checked: {e}"),
            None => {}
        }
    }
    if report.ok {
        Ok(())
    } else {
        Err(CliError::Input(format!(
            "{db_text} is damaged: {} problem(s) found by {}",
            report.damage.len(),
            report.check
        )))
    }
}

fn print_integrity(db: &str, r: &integrity::IntegrityReport) {
    if r.ok {
        println!(
            "{db}: {} found no damage ({} slices, the longest {:.0} ms)",
            r.check, r.slices, r.longest_slice_ms
        );
    } else {
        println!(
            "{db}: {} found {} damaged object(s)",
            r.check,
            r.damage.len()
        );
    }
    for d in &r.damage {
        println!();
        println!("[damage] {}", d.message);
        println!("  what to do: {}", d.advice);
        println!("  command: {}", d.command);
        for line in &d.details {
            println!("  sqlite: {line}");
        }
    }
    for n in &r.not_checked {
        println!("not checked: {n}");
    }
}
