//! Whether the first record is a header, and the columns' names: the
//! types of the rows below it, which fields are quoted, row names.

use crate::read::dialect::INDEX_COLUMN;
use crate::values::{
    is_iso_date, is_iso_timestamp, parse_bool, parse_int, parse_real, trim_spaces, ColType,
};

use super::types::{infer, ColumnStats};
use super::{Rec, TYPE_RECORDS};

/// True when `first` looks like a header above `rows`: some column whose
/// other values all share a type other than TEXT has a value in `first`
/// that does not fit it (DuckDB's rule). When every column is TEXT, there
/// is no telling, and a header is assumed.
pub(super) fn looks_like_header(first: &Rec, rows: &[Rec], nulls: Option<&[String]>) -> bool {
    let (stats, n) = infer(rows.iter().take(TYPE_RECORDS), first.len(), nulls);
    if n == 0 {
        return true;
    }
    let types: Vec<ColType> = stats.iter().map(ColumnStats::decide).collect();
    if types.iter().all(|t| *t == ColType::Text) {
        return true;
    }
    first
        .iter()
        .zip(&types)
        .any(|(f, t)| *t != ColType::Text && !ColumnStats::fits(*t, f, nulls))
}

/// Which fields of the record starting at byte `start` of `bytes` are
/// quoted (blank lines before it are skipped). The csv reader does not keep
/// this; a header written as quoted strings above unquoted numbers tells a
/// header apart from data.
pub(super) fn quoting(bytes: &[u8], start: usize, delimiter: u8, quote: u8) -> Vec<bool> {
    let mut i = start;
    while i < bytes.len() && matches!(bytes[i], b'\n' | b'\r') {
        i += 1;
    }
    let mut out = Vec::new();
    loop {
        let quoted = bytes.get(i) == Some(&quote);
        if quoted {
            i += 1;
            while i < bytes.len() {
                if bytes[i] == quote {
                    if bytes.get(i + 1) == Some(&quote) {
                        i += 2;
                        continue;
                    }
                    i += 1;
                    break;
                }
                i += 1;
            }
        }
        while i < bytes.len() && !matches!(bytes[i], b'\n' | b'\r') && bytes[i] != delimiter {
            i += 1;
        }
        out.push(quoted);
        if bytes.get(i) == Some(&delimiter) {
            i += 1;
        } else {
            return out;
        }
    }
}

/// A value a data field holds and a name does not: a number, a date, a
/// boolean.
pub(super) fn is_value(f: &[u8]) -> bool {
    let t = trim_spaces(f);
    parse_real(t).is_some()
        || parse_int(t).is_some()
        || parse_bool(f).is_some()
        || is_iso_date(f)
        || is_iso_timestamp(f)
}

/// Whether `first` is a header above `rows`, and why (in words, for the
/// plan's notes and the import's summary). `quoted`: which fields of
/// `first`, and of the first rows, were quoted (`None`: no quoting). The
/// signals, in order:
///
/// 1. a record alone is a header unless every value in it is a number,
///    date or boolean (a file of one numeric line is data);
/// 2. a value that does not fit its column's type below (a name above
///    numbers, dates or booleans): header (DuckDB's rule);
/// 3. an empty first field above a column with no empty field, the other
///    fields filled: a header over row names (R's `write.csv`), unless they
///    are unquoted values like the rows below (then a row with a missing
///    first value);
/// 4. every field quoted above a numeric column written unquoted: names
///    written as strings (`"1940","1945"` above numbers);
/// 5. every column text: nothing tells, a header is assumed;
/// 6. otherwise data.
pub(super) fn decide_header(
    first: &Rec,
    rows: &[Rec],
    nulls: Option<&[String]>,
    quoted: Option<(&[bool], &[Vec<bool>])>,
) -> (bool, String) {
    let (stats, n) = infer(rows.iter().take(TYPE_RECORDS), first.len(), nulls);
    if n == 0 {
        return only_record(first);
    }
    let types: Vec<ColType> = stats.iter().map(ColumnStats::decide).collect();
    if let Some((f, t)) = first
        .iter()
        .zip(&types)
        .find(|(f, t)| **t != ColType::Text && !ColumnStats::fits(**t, f, nulls))
    {
        return (
            true,
            format!(
                "the first record does not fit the types below it ({:?} above {} values)",
                String::from_utf8_lossy(f),
                t.sql()
            ),
        );
    }
    let same = |r: &&Rec| r.len() == first.len();
    let quoted_names = quoted.is_some_and(|q| quoted_names(first, rows, &types, q));
    if first.len() > 1
        && first[0].is_empty()
        && first.iter().skip(1).all(|f| !f.is_empty())
        && rows
            .iter()
            .take(TYPE_RECORDS)
            .filter(same)
            .all(|r| !r[0].is_empty())
        && (quoted_names || !first.iter().skip(1).all(is_value))
    {
        return (
            true,
            "the first record's first field is empty above a column with no empty field, \
             the others named: a header over row names (as R's write.csv writes it)"
                .into(),
        );
    }
    if quoted_names {
        return (
            true,
            "the first record is quoted above numbers written without quotes: names written \
             as strings"
                .into(),
        );
    }
    if types.iter().all(|t| *t == ColType::Text) {
        return (
            true,
            "every column is text, so nothing tells a header from data: a header is assumed \
             (--no-header if it is data)"
                .into(),
        );
    }
    (
        false,
        "the first record's values have the same types as the rest, so it is data; columns \
         are named c1, c2, ... (--header if it names them)"
            .into(),
    )
}

/// Header or data when `first` is the only record: data when every field
/// it fills is a value (a number, date, boolean), else a header.
pub(super) fn only_record(first: &Rec) -> (bool, String) {
    let values = first.iter().filter(|f| !f.is_empty()).collect::<Vec<_>>();
    if !values.is_empty() && values.iter().all(|f| is_value(f)) {
        return (
            false,
            "the only record holds numbers (or dates, booleans), not names: it is data".into(),
        );
    }
    (
        true,
        "the only record holds names: a header with no rows below it".into(),
    )
}

/// Names written as quoted strings above numbers written bare: every field
/// of `first` filled is quoted (`q`, per field), and a numeric column
/// (`types`) has a bare value below (`rq`: which fields of `rows` were
/// quoted).
pub(super) fn quoted_names(
    first: &Rec,
    rows: &[Rec],
    types: &[ColType],
    (q, rq): (&[bool], &[Vec<bool>]),
) -> bool {
    let all_quoted = first
        .iter()
        .zip(q)
        .all(|(f, &quoted)| quoted || f.is_empty());
    let bare_number_below = types.iter().enumerate().any(|(j, t)| {
        matches!(t, ColType::Integer | ColType::Real)
            && rows
                .iter()
                .zip(rq)
                .filter(|(r, _)| r.len() == first.len())
                .any(|(r, rq)| !r[j].is_empty() && !rq.get(j).copied().unwrap_or(true))
    });
    all_quoted && first.iter().any(|f| !f.is_empty()) && bare_number_below
}

/// The records without their first field (the row names), for checking a
/// short header against the columns it names.
pub(super) fn shifted(rows: &[Rec]) -> Vec<Rec> {
    rows.iter()
        .take(2000)
        .filter(|r| !r.is_empty())
        .map(|r| r.iter().skip(1).collect())
        .collect()
}

/// Which fields were quoted: of the first of `recs` and of up to 200
/// records after it (read again from `head`, where each record starts).
pub(super) fn quotings(
    head: &[u8],
    recs: &[Rec],
    delimiter: u8,
    q: u8,
) -> (Vec<bool>, Vec<Vec<bool>>) {
    let at = |r: &Rec| r.position().map_or(usize::MAX, |p| p.byte() as usize);
    let of = |r: &Rec| quoting(head, at(r), delimiter, q);
    let rows: Vec<Vec<bool>> = recs[1..].iter().take(200).map(of).collect();
    (of(&recs[0]), rows)
}

/// The columns' names: the header's (after the row names' column), or
/// c1, c2, ... without one; made usable as SQL names.
pub(super) fn column_names(header: Option<&Rec>, index_column: bool, fields: usize) -> Vec<String> {
    let names: Vec<String> = match header {
        Some(first) => {
            let mut h: Vec<String> = first
                .iter()
                .map(|f| String::from_utf8_lossy(f).into_owned())
                .collect();
            if index_column {
                h.insert(0, INDEX_COLUMN.to_string());
            }
            h
        }
        None => (1..=fields).map(|i| format!("c{i}")).collect(),
    };
    crate::plan::table::column_names(Some(names), fields)
}
