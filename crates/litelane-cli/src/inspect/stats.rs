//! `litelane stats DB`: file and WAL size, pages, freelist, journal mode,
//! tables with their row counts.

use litelane::quote_ident;
use litelane::rusqlite::Connection;
use serde::Serialize;

use super::{file_len, human_bytes, open_untrusted, pragma, wal_path, StatsArgs};
use crate::error::CliError;

/// One schema object.
#[derive(Debug, Serialize)]
pub struct TableStat {
    /// Its name.
    pub name: String,
    /// `table`, `virtual` (a virtual table: not counted, counting would run
    /// its module) or `view` (not counted: counting would run its query).
    #[serde(rename = "type")]
    pub kind: String,
    /// Rows, for ordinary tables.
    pub rows: Option<u64>,
}

/// Everything `stats` reports.
#[derive(Debug, Serialize)]
pub struct Stats {
    /// The database file.
    pub path: String,
    /// Its size in bytes.
    pub file_bytes: u64,
    /// Size of the `-wal` file (0 when there is none).
    pub wal_bytes: u64,
    /// Bytes per page.
    pub page_size: u64,
    /// Pages in the database.
    pub page_count: u64,
    /// Unused pages.
    pub freelist_count: u64,
    /// `wal`, `delete`, ...
    pub journal_mode: String,
    /// 0 none, 1 full, 2 incremental.
    pub auto_vacuum: i64,
    /// Text encoding.
    pub encoding: String,
    /// The application's schema version number.
    pub user_version: i64,
    /// The SQLite that read the file.
    pub sqlite_version: String,
    /// Tables, virtual tables and views.
    pub tables: Vec<TableStat>,
    /// Number of indexes.
    pub indexes: u64,
    /// Number of triggers.
    pub triggers: u64,
}

/// Reads the statistics of an open database.
pub fn collect(conn: &Connection, path: &std::path::Path) -> Result<Stats, CliError> {
    let mut objects = Vec::new();
    let mut indexes = 0;
    let mut triggers = 0;
    {
        let mut stmt = conn.prepare(
            "SELECT type, name, coalesce(sql, '') FROM sqlite_schema \
             WHERE type IN ('table', 'view', 'index', 'trigger') ORDER BY name",
        )?;
        let rows = stmt.query_map([], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, String>(2)?,
            ))
        })?;
        for row in rows {
            let (kind, name, sql) = row?;
            match kind.as_str() {
                "index" => indexes += 1,
                "trigger" => triggers += 1,
                "view" => objects.push((name, "view")),
                _ => {
                    let virt = sql
                        .trim_start()
                        .get(..14)
                        .is_some_and(|s| s.eq_ignore_ascii_case("CREATE VIRTUAL"));
                    objects.push((name, if virt { "virtual" } else { "table" }));
                }
            }
        }
    }
    let mut tables = Vec::with_capacity(objects.len());
    for (name, kind) in objects {
        let rows = if kind == "table" {
            let sql = format!("SELECT count(*) FROM main.{}", quote_ident(&name));
            let n: i64 = conn.query_row(&sql, [], |r| r.get(0)).map_err(|e| {
                litelane::Error::from_sqlite(
                    e,
                    format!("counting the rows of {}", quote_ident(&name)),
                )
            })?;
            Some(n as u64)
        } else {
            None
        };
        tables.push(TableStat {
            name,
            kind: kind.to_string(),
            rows,
        });
    }
    Ok(Stats {
        path: path.display().to_string(),
        file_bytes: file_len(path),
        wal_bytes: file_len(&wal_path(path)),
        page_size: pragma::<i64>(conn, "page_size")? as u64,
        page_count: pragma::<i64>(conn, "page_count")? as u64,
        freelist_count: pragma::<i64>(conn, "freelist_count")? as u64,
        journal_mode: pragma(conn, "journal_mode")?,
        auto_vacuum: pragma(conn, "auto_vacuum")?,
        encoding: pragma(conn, "encoding")?,
        user_version: pragma(conn, "user_version")?,
        sqlite_version: litelane::sqlite_version().to_string(),
        tables,
        indexes,
        triggers,
    })
}

/// Runs `litelane stats`.
pub fn stats(args: StatsArgs) -> Result<(), CliError> {
    let conn = open_untrusted(&args.db)?;
    let s = collect(&conn, &args.db)?;
    if args.json {
        println!("{}", serde_json::to_string(&s).expect("stats serialize"));
        return Ok(());
    }
    println!("database      {}", s.path);
    println!(
        "file          {} ({} bytes)",
        human_bytes(s.file_bytes),
        s.file_bytes
    );
    println!(
        "wal           {} ({} bytes)",
        human_bytes(s.wal_bytes),
        s.wal_bytes
    );
    println!("journal mode  {}", s.journal_mode);
    println!("page size     {} bytes", s.page_size);
    println!("pages         {}", s.page_count);
    let pct = if s.page_count > 0 {
        100.0 * s.freelist_count as f64 / s.page_count as f64
    } else {
        0.0
    };
    println!("free pages    {} ({pct:.1}%)", s.freelist_count);
    println!(
        "auto_vacuum   {}",
        ["none", "full", "incremental"]
            .get(s.auto_vacuum as usize)
            .unwrap_or(&"?")
    );
    println!("encoding      {}", s.encoding);
    println!("indexes       {}", s.indexes);
    println!("triggers      {}", s.triggers);
    println!("tables        {}", s.tables.len());
    for t in &s.tables {
        match t.rows {
            Some(n) => println!("  {:<30} {n:>12} rows", quote_ident(&t.name)),
            None => println!(
                "  {:<30} {:>12}",
                quote_ident(&t.name),
                format!("({}, not counted)", t.kind)
            ),
        }
    }
    Ok(())
}
