//! The `--resume` steps, table-driven with exact outcomes.

#![allow(clippy::type_complexity)]

use std::path::PathBuf;

use super::*;
use crate::plan::columns::ColumnPlan;
use crate::read::dialect::Sniffed;

/// `litelane import in.csv --db d.db --resume FLAGS`.
fn args(flags: &[&str]) -> FileArgs {
    crate::plan::tests::args(&[&["--resume"], flags].concat())
}

/// A recorded plan: CSV split on `;` after 2 skipped records and a header,
/// keyed on `id` with upsert, a source column, not strict.
fn recorded_plan() -> Plan {
    let col = |name: &str, ty| ColumnPlan {
        name: name.into(),
        ty,
        strict: false,
        src: 0,
        key: name.into(),
    };
    Plan {
        format: Format::Csv,
        header: true,
        fields: 2,
        nulls: vec![String::new()],
        columns: vec![col("id", ColType::Integer), col("name", ColType::Text)],
        commit_every: Some(100),
        rejects_table: Some("rj".into()),
        recurring: conflict::Recurring {
            key: vec!["id".into()],
            on_conflict: conflict::OnConflict::Upsert,
            source_column: Some("src".into()),
        },
        sniffed: Some(Sniffed {
            delimiter: ';',
            quote: Some('"'),
            skip_rows: 2,
            ..Sniffed::default()
        }),
    }
}

fn record(source: &str, state: &str) -> Progress {
    Progress {
        table: "T".into(),
        source: source.into(),
        fingerprint: Some("fp1".into()),
        plan: recorded_plan(),
        records_read: 40,
        rows_inserted: 38,
        rows_rejected: 2,
        last_line: 44,
        rejects_file: Some("/r/rej.ndjson".into()),
        rejects_bytes: 123,
        state: state.into(),
        resume_end: Some(4096),
        resume_hash: Some(0xfeed),
    }
}

#[test]
fn the_record_to_resume_is_this_sources_newest() {
    let db = PathBuf::from("/d/x.db");
    let pick = |recorded: &[Progress]| {
        pick_record(recorded, "/abs/in.csv", "in.csv", "in.csv", &db, "t\"")
            .map(|r| (r.source, r.state))
            .map_err(|e| e.to_string())
    };
    let running = resume::RUNNING.to_string();
    let done = resume::DONE.to_string();
    let cases: Vec<(Vec<Progress>, Result<(String, String), &str>)> = vec![
        (
            vec![record("/abs/in.csv", resume::RUNNING)],
            Ok(("/abs/in.csv".into(), running.clone())),
        ),
        // Recorded as given (an older litelane): found too.
        (
            vec![record("in.csv", resume::RUNNING)],
            Ok(("in.csv".into(), running.clone())),
        ),
        // The newest of this source wins, other sources are passed over.
        (
            vec![
                record("/abs/in.csv", resume::RUNNING),
                record("/abs/in.csv", resume::DONE),
                record("/abs/other.csv", resume::RUNNING),
            ],
            Ok(("/abs/in.csv".into(), done)),
        ),
        (
            vec![record("/abs/other.csv", resume::RUNNING)],
            Err(
                "refusing to resume: in.csv is not the file the interrupted import into \"T\" \
                 was reading (/abs/other.csv)",
            ),
        ),
        (
            vec![record("/abs/other.csv", resume::DONE)],
            Err(
                "nothing to resume: /d/x.db records no resumable import of in.csv into \
                 \"t\"\"\" (only imports run with --commit-every can be resumed)",
            ),
        ),
        (
            vec![],
            Err(
                "nothing to resume: /d/x.db records no resumable import of in.csv into \
                 \"t\"\"\" (only imports run with --commit-every can be resumed)",
            ),
        ),
    ];
    for (recorded, want) in cases {
        let sources: Vec<&str> = recorded.iter().map(|r| r.source.as_str()).collect();
        assert_eq!(pick(&recorded), want.map_err(String::from), "{sources:?}");
    }
}

#[test]
fn only_the_same_file_is_resumed() {
    let rec = record("/abs/in.csv", resume::RUNNING);
    let mut stdin = rec.clone();
    stdin.fingerprint = None;
    let other = "refusing to resume: in.csv is not the file the interrupted import into \"T\" \
                 was reading (/abs/in.csv: its size or content differs)";
    let from_stdin = "the interrupted import into \"T\" read from stdin: it cannot be resumed; \
                      start over with --mode replace";
    let cases: Vec<(&Progress, Option<&str>, Result<(), &str>)> = vec![
        (&rec, Some("fp1"), Ok(())),
        (&rec, Some("fp2"), Err(other)),
        (&rec, None, Err(other)),
        (&stdin, Some("fp1"), Err(from_stdin)),
        (&stdin, None, Err(from_stdin)),
    ];
    for (r, fp, want) in cases {
        let got = check_fingerprint(r, fp, "in.csv").map_err(|e| e.to_string());
        assert_eq!(
            got,
            want.map_err(String::from),
            "{:?} {fp:?}",
            r.fingerprint
        );
    }
}

#[test]
fn flags_that_contradict_the_recorded_plan_are_named() {
    let plan = recorded_plan();
    // Flags that agree with the recording (or say nothing) are accepted.
    let agree: &[&[&str]] = &[
        &[],
        &["--format", "csv"],
        &["--null", ""],
        &["--pk", "ID"],
        &["--on-conflict", "upsert"],
        &["--source-column", "src"],
        &["--delimiter", ";"],
        &["--header"],
        &["--commit-every", "7", "--rejects-table", "other"],
    ];
    for flags in agree {
        check_resume_flags(&args(flags), &plan).unwrap_or_else(|e| panic!("{flags:?}: {e}"));
    }
    let cases: Vec<(&[&str], &str)> = vec![
        (
            &["--format", "tsv"],
            "--format tsv (the import is reading csv)",
        ),
        (
            &["--no-header"],
            "--no-header (the import read a header line)",
        ),
        (
            &["--null", "NA"],
            "--null [\"NA\"] (the import's null tokens are [\"\"])",
        ),
        (
            &["--types", "text"],
            "--types text (the import's columns are typed)",
        ),
        (&["--strict"], "--strict (the import was not strict)"),
        (
            &["--mode", "replace"],
            "--mode replace (a resumed import appends to its table)",
        ),
        (
            &["--pk", "id,name"],
            "--pk id,name (the table already exists)",
        ),
        (&["--pk", "id,"], "--pk id, (the table already exists)"),
        (
            &["--on-conflict", "ignore"],
            "--on-conflict ignore (the import's is upsert)",
        ),
        (
            &["--source-column", "SRC"],
            "--source-column SRC (not the import's)",
        ),
        (
            &["--plan", "p.json"],
            "--plan (the import's plan is recorded)",
        ),
        (&["--type", "id=TEXT"], "--type (the table already exists)"),
        (
            &["--delimiter", ","],
            "--delimiter ',' (the import splits on ';')",
        ),
    ];
    for (flags, what) in cases {
        let e = check_resume_flags(&args(flags), &plan)
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            format!(
                "refusing to resume: these flags contradict the interrupted import's recorded \
                 plan, which --resume follows: {what}; run again without them (or start over \
                 with --mode replace)"
            ),
            "{flags:?}"
        );
    }
    // Several: all named, in a fixed order.
    let e = check_resume_flags(&args(&["--strict", "--format", "ndjson"]), &plan)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains(
            ": --format ndjson (the import is reading csv), --strict (the import was not strict);"
        ),
        "{e}"
    );
    // --header against a recording without one; TSV's default delimiter.
    let mut tsv = recorded_plan();
    tsv.format = Format::Tsv;
    tsv.header = false;
    tsv.sniffed = None;
    check_resume_flags(&args(&["--delimiter", "\t"]), &tsv).unwrap();
    let e = check_resume_flags(&args(&["--header", "--delimiter", ","]), &tsv)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains(
            ": --delimiter ',' (the import splits on '\\t'), --header (the import read no \
             header line);"
        ),
        "{e}"
    );
}

#[test]
fn the_resumed_plan_takes_only_commit_every_and_a_new_rejects_table() {
    let rec = recorded_plan();
    let (p, setup) = resumed_plan(&rec, &args(&[]));
    assert_eq!((p, setup), (rec.clone(), vec![]));
    let (p, setup) = resumed_plan(
        &rec,
        &args(&["--commit-every", "7", "--rejects-table", "rj"]),
    );
    assert_eq!(p.commit_every, Some(7));
    assert_eq!(p.rejects_table.as_deref(), Some("rj"));
    assert!(setup.is_empty(), "{setup:?}");
    let (p, setup) = resumed_plan(&rec, &args(&["--rejects-table", "n\"ew"]));
    assert_eq!(p.rejects_table.as_deref(), Some("n\"ew"));
    assert_eq!(p.commit_every, Some(100));
    assert_eq!(setup, vec![rejects_table_sql("n\"ew")]);
    assert!(setup[0].starts_with("CREATE TABLE IF NOT EXISTS \"n\"\"ew\" ("));
    // Everything else is the recording's.
    assert_eq!(
        (p.columns, p.recurring, p.sniffed, p.nulls),
        (rec.columns, rec.recurring, rec.sniffed, rec.nulls)
    );
}

#[test]
fn records_before_the_data_and_the_point_to_continue_after() {
    let mut p = recorded_plan();
    assert_eq!(records_before_data(&p), 3);
    p.header = false;
    assert_eq!(records_before_data(&p), 2);
    p.sniffed = None;
    assert_eq!(records_before_data(&p), 0);
    p.header = true;
    assert_eq!(records_before_data(&p), 1);

    let rec = record("/abs/in.csv", resume::RUNNING);
    assert_eq!(
        resume_point(&rec),
        Some(ResumePoint {
            record: 40,
            end: 4096,
            hash: 0xfeed
        })
    );
    let cases: Vec<(u64, Option<u64>, Option<u64>)> = vec![
        // Nothing committed yet.
        (0, Some(4096), Some(0xfeed)),
        // Written by an older litelane: no point recorded.
        (40, None, Some(0xfeed)),
        (40, Some(4096), None),
    ];
    for (read, end, hash) in cases {
        let mut r = rec.clone();
        (r.records_read, r.resume_end, r.resume_hash) = (read, end, hash);
        assert_eq!(resume_point(&r), None, "{read} {end:?} {hash:?}");
    }
}

#[test]
fn the_rejects_file_continues_where_the_commit_left_it() {
    let rec = record("/abs/in.csv", resume::RUNNING);
    let mut none = rec.clone();
    none.rejects_file = None;
    let t = |path: Option<&str>, keep, recheck| RejectsTarget {
        path: path.map(String::from),
        keep,
        recheck,
    };
    let cases: Vec<(Option<&str>, &Progress, RejectsTarget)> = vec![
        // The recorded file: its committed length kept, checked again.
        (None, &rec, t(Some("/r/rej.ndjson"), 123, true)),
        // --rejects naming the same file: kept, not re-checked.
        (
            Some("/r/rej.ndjson"),
            &rec,
            t(Some("/r/rej.ndjson"), 123, false),
        ),
        // Another file: started anew.
        (
            Some("/r/new.ndjson"),
            &rec,
            t(Some("/r/new.ndjson"), 0, false),
        ),
        (
            Some("/r/new.ndjson"),
            &none,
            t(Some("/r/new.ndjson"), 0, false),
        ),
        // None recorded, none given: stderr.
        (None, &none, t(None, 0, false)),
    ];
    for (given, r, want) in cases {
        assert_eq!(
            rejects_target(given.map(String::from), r),
            want,
            "{given:?} {:?}",
            r.rejects_file
        );
    }
}
