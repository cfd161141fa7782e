//! `litelane checkpoint DB`: runs one checkpoint and says what it did.

use litelane::{CheckpointReport, Checkpoints, Database, Options, Profile};
use serde_json::json;

use super::{file_len, human_bytes, open_untrusted, pragma, wal_path, CheckpointArgs};
use crate::error::CliError;

/// Runs `litelane checkpoint`.
pub fn checkpoint(args: CheckpointArgs) -> Result<(), CliError> {
    // Look first, read-only: opening with the engine would switch a
    // rollback-journal database to WAL.
    let journal: String = {
        let conn = open_untrusted(&args.db)?;
        pragma(&conn, "journal_mode")?
    };
    let wal = wal_path(&args.db);
    let before = file_len(&wal);
    if !journal.eq_ignore_ascii_case("wal") {
        if args.json {
            println!(
                "{}",
                json!({"mode": args.mode.name(), "journal_mode": journal, "ran": false,
                       "wal_bytes_before": before, "wal_bytes_after": before})
            );
        } else {
            println!(
                "{} is not in WAL mode (journal_mode={journal}): there is nothing to checkpoint",
                args.db.display()
            );
        }
        return Ok(());
    }
    let opts = Options {
        profile: Profile::Balanced,
        readers: 1,
        async_threads: 1,
        checkpoints: Checkpoints {
            background: false,
            ..Checkpoints::default()
        },
        ..Options::default()
    };
    let db = Database::open(&args.db, opts)?;
    let report = db.checkpoint(args.mode)?;
    drop(db);
    print_report(&args, &journal, &report, before, file_len(&wal));
    Ok(())
}

/// Prints what the checkpoint did and the WAL file's size `before` and
/// `after` it (bytes): one JSON object with `--json`, else lines of text.
fn print_report(
    args: &CheckpointArgs,
    journal: &str,
    report: &CheckpointReport,
    before: u64,
    after: u64,
) {
    if args.json {
        println!(
            "{}",
            json!({
                "mode": report.mode.name(),
                "journal_mode": journal,
                "ran": true,
                "wal_frames": report.wal_frames,
                "checkpointed_frames": report.checkpointed_frames,
                "busy": report.busy,
                "seconds": report.elapsed.as_secs_f64(),
                "wal_bytes_before": before,
                "wal_bytes_after": after,
            })
        );
        return;
    }
    // A TRUNCATE that succeeds reports 0 frames: the WAL is gone.
    let done = if report.mode == litelane::CheckpointMode::Truncate && !report.busy {
        "WAL copied into the database and truncated".to_string()
    } else {
        format!(
            "{} of {} WAL frames copied into the database",
            report.checkpointed_frames, report.wal_frames
        )
    };
    println!(
        "{} checkpoint of {}: {done} in {:.3} s{}",
        report.mode,
        args.db.display(),
        report.elapsed.as_secs_f64(),
        if report.busy {
            " (not complete: a reader or writer was in the way; run again, or use --mode restart)"
        } else {
            ""
        }
    );
    println!(
        "WAL file: {} before, {} after",
        human_bytes(before),
        human_bytes(after)
    );
}
