//! `litelane backup DB OUT`: an online, consistent copy of a database that
//! may be in use, checked with `integrity_check` before it is reported.

use std::time::{Duration, Instant};

use litelane::{backup_connection, BackupOptions, BackupProgress, BackupReport};
use serde_json::json;

use super::{human_bytes, open_untrusted, BackupArgs};
use crate::error::CliError;

/// Runs `litelane backup`.
pub fn backup(args: BackupArgs) -> Result<(), CliError> {
    if args.pages_per_step == 0 {
        return Err(CliError::Input(
            "--pages-per-step must be at least 1".into(),
        ));
    }
    super::check_side_files("backup", &args.db, &args.out)?;
    if let Ok(md) = std::fs::metadata(&args.out) {
        if md.is_file() && md.len() > 0 && !args.force {
            return Err(CliError::Input(format!(
                "backup destination {} exists and is not empty ({} bytes): refusing to \
                 overwrite it; give another path, or --force to replace it",
                args.out.display(),
                md.len()
            )));
        }
    }
    // Read-only, nothing stored in the file runs: the copy is made from a
    // read snapshot of this connection (the engine's own queue belongs to the
    // process that has the database open; this is another process).
    let conn = open_untrusted(&args.db)?;
    let opts = BackupOptions {
        pages_per_step: args.pages_per_step,
        overwrite: args.force,
    };
    let mut progress = progress_printer(!args.json);
    let report = backup_connection(&conn, &args.out, &opts, &mut progress)?;
    drop(conn);
    // The copy is as untrusted as its source: check it the same way.
    let copy = open_untrusted(&args.out)?;
    let check: Vec<String> = {
        let mut stmt = copy.prepare("PRAGMA integrity_check")?;
        let rows = stmt.query_map([], |r| r.get(0))?;
        rows.collect::<Result<_, _>>()?
    };
    let ok = check.len() == 1 && check[0] == "ok";
    print_report(&args, &report, &check, ok);
    if ok {
        Ok(())
    } else {
        Err(CliError::Input(format!(
            "the copy {} does not pass integrity_check: the source is probably damaged; \
             run `litelane doctor --integrity` on it",
            args.out.display()
        )))
    }
}

/// Once a second at most, unless `show` is false: the pages copied so far.
fn progress_printer(show: bool) -> impl FnMut(BackupProgress) {
    let mut last_print = Instant::now();
    move |p: BackupProgress| {
        if show && last_print.elapsed() >= Duration::from_secs(1) {
            last_print = Instant::now();
            let pct = if p.pages_total == 0 {
                100.0
            } else {
                p.pages_done as f64 * 100.0 / p.pages_total as f64
            };
            eprintln!(
                "litelane: backup: {}/{} pages ({pct:.0}%)",
                p.pages_done, p.pages_total
            );
        }
    }
}

/// Prints what the backup did and the copy's `integrity_check` (`check`,
/// `ok` when it passed): one JSON object with `--json`, else lines of text.
fn print_report(args: &BackupArgs, report: &BackupReport, check: &[String], ok: bool) {
    if args.json {
        println!(
            "{}",
            json!({
                "db": args.db.display().to_string(),
                "out": report.path.display().to_string(),
                "pages": report.pages,
                "page_size": report.page_size,
                "bytes": report.bytes,
                "steps": report.steps,
                "elapsed_ms": report.elapsed.as_secs_f64() * 1000.0,
                "integrity_check": check,
            })
        );
        return;
    }
    println!(
        "{}: backed up {} pages ({}) to {} in {:.2} s, {} steps",
        args.db.display(),
        report.pages,
        human_bytes(report.bytes),
        report.path.display(),
        report.elapsed.as_secs_f64(),
        report.steps
    );
    if ok {
        println!("integrity_check of the copy: ok");
    } else {
        println!("integrity_check of the copy found problems:");
        for line in check {
            println!("  {line}");
        }
    }
}
