//! The plan in words: what `litelane sniff` prints, and the import's
//! one-line summary of the sniffer's decisions.

use crate::read::dialect::{Sniffed, INDEX_COLUMN};
use crate::read::source::Format;

use super::SniffPlan;

/// The plan in words, as `litelane sniff` prints it.
pub fn describe(plan: &SniffPlan, display: &str) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let name = |c: char| match c {
        '\t' => "tab".to_string(),
        c => format!("{c:?}"),
    };
    let _ = writeln!(s, "file:        {display}");
    let _ = writeln!(
        s,
        "dialect:     {} delimiter {}, quote {}",
        match plan.format {
            Format::Tsv => "tsv",
            _ => "csv",
        },
        name(plan.delimiter),
        plan.quote.map_or("none".to_string(), name)
    );
    let _ = writeln!(s, "header:      {}", if plan.header { "yes" } else { "no" });
    let _ = writeln!(s, "skip rows:   {}", plan.skip_rows);
    let _ = writeln!(
        s,
        "index col:   {}",
        if plan.index_column {
            INDEX_COLUMN
        } else {
            "no"
        }
    );
    let _ = writeln!(s, "nulls:       {:?}", plan.nulls);
    if let Some(sm) = &plan.sampled {
        let _ = writeln!(
            s,
            "sampled:     {} records from {}",
            sm.records,
            sm.places.join(", ")
        );
    }
    let _ = writeln!(s, "columns:");
    let width = plan
        .columns
        .iter()
        .map(|c| c.name.chars().count())
        .max()
        .unwrap_or(0);
    for c in &plan.columns {
        let mut extra = String::new();
        if let Some(n) = &c.nulls {
            let _ = write!(extra, "  nulls {n:?}");
        }
        if c.trim {
            extra.push_str("  trim spaces");
        }
        if !c.tokens_seen.is_empty() {
            let _ = write!(extra, "  seen {:?}", c.tokens_seen);
        }
        let line = format!("  {:width$}  {:9}{extra}", c.name, c.ty.sql());
        let _ = writeln!(s, "{}", line.trim_end());
    }
    if !plan.notes.is_empty() {
        let _ = writeln!(s, "notes:");
        for n in &plan.notes {
            let _ = writeln!(s, "  - {n}");
        }
    }
    s
}

/// The sniffer's decisions that differ from a plain comma-separated file
/// with a header, in words for the stderr summary; `None` when none do.
pub fn summary_line(s: &Sniffed, header: bool) -> Option<String> {
    let mut parts = Vec::new();
    if s.delimiter != ',' {
        parts.push(format!(
            "fields split on {}",
            if s.delimiter == '\t' {
                "tab".to_string()
            } else {
                format!("{:?}", s.delimiter)
            }
        ));
    }
    if s.skip_rows > 0 {
        parts.push(format!(
            "{} record(s) before the {} skipped",
            s.skip_rows,
            if header { "header" } else { "data" }
        ));
    }
    let reason = s.header_reason.as_deref();
    if !header {
        parts.push(match reason {
            Some(r) => format!("no header line (columns c1, c2, ...): {r}"),
            None => "no header line (columns c1, c2, ...)".into(),
        });
    } else if let Some(r) = reason.filter(|r| {
        // The usual cases (a name above numbers, all text) go unsaid.
        !r.starts_with("the first record does not fit") && !r.starts_with("every column is text")
    }) {
        parts.push(format!("header line: {r}"));
    }
    if s.index_column {
        parts.push(format!(
            "first field of each record imported as {INDEX_COLUMN:?}"
        ));
    }
    let nulls: usize = s.column_nulls.iter().filter(|n| n.is_some()).count();
    if nulls > 0 {
        parts.push(format!(
            "null tokens such as NA applied in {nulls} numeric column(s)"
        ));
    }
    let trimmed = s.trim.iter().filter(|t| **t).count();
    if trimmed > 0 {
        parts.push(format!(
            "spaces around numbers dropped in {trimmed} column(s)"
        ));
    }
    (!parts.is_empty()).then(|| {
        format!(
            "sniffed: {} (see `litelane sniff`; override with flags or --plan)",
            parts.join("; ")
        )
    })
}
