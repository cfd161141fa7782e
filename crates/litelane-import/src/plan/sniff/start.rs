//! Where the records start: the preamble lines to skip, and the shape of
//! the header (row names, a trailing delimiter).

use crate::read::dialect::INDEX_COLUMN;

use super::header::{looks_like_header, shifted};
use super::{Rec, MAX_SKIP};

/// Where the header (or the data) starts, and the header's shape.
pub(super) struct Start {
    /// Records before it (a preamble).
    pub(super) at: usize,
    /// The header has one field fewer than the records: row names.
    pub(super) index_column: bool,
    /// The header ends with a delimiter the records lack.
    pub(super) trailing: bool,
    /// The records end with a delimiter (an always-empty last field) the
    /// header lacks.
    pub(super) records_trailing: bool,
}

/// Finds the first record with the modal field count `fields` (or one
/// fewer, for a header over row names; or one more, empty, for a header
/// that ends with a delimiter), skipping at most `MAX_SKIP` records before
/// it; none found: the input starts at once. `header` is the user's
/// `--header`/`--no-header`.
pub(super) fn find_start(
    recs: &[Rec],
    fields: usize,
    header: Option<bool>,
    user_nulls: Option<&[String]>,
) -> Start {
    let mut start = Start {
        at: 0,
        index_column: false,
        trailing: false,
        records_trailing: false,
    };
    let limit = MAX_SKIP.min(recs.len());
    while start.at < limit {
        let at = start.at;
        let n = recs[at].len();
        if n == fields {
            return start;
        }
        let maybe_header =
            header != Some(false) && recs.get(at + 1).is_some_and(|r| r.len() == fields);
        if maybe_header {
            if records_end_with_delimiter(recs, at, fields, user_nulls) {
                start.records_trailing = true;
                return start;
            }
            if header_ends_with_delimiter(recs, at, fields, user_nulls) {
                start.trailing = true;
                return start;
            }
            if n + 1 == fields
                && !looks_like_header(&recs[at + 1], &recs[at + 2..], user_nulls)
                && looks_like_header(&recs[at], &shifted(&recs[at + 1..]), user_nulls)
            {
                start.index_column = fields > 1;
                return start;
            }
        }
        start.at += 1;
    }
    start.at = 0;
    start
}

/// Every record of the usual width after `recs[at]` ends with an empty
/// field, and `recs[at]` (one field short) is a header once given that
/// field: the records end with a delimiter the header lacks (not row
/// names, which would shift every value one column to the right).
pub(super) fn records_end_with_delimiter(
    recs: &[Rec],
    at: usize,
    fields: usize,
    user_nulls: Option<&[String]>,
) -> bool {
    if recs[at].len() + 1 != fields
        || fields <= 1
        || !recs[at + 1..]
            .iter()
            .take(2000)
            .filter(|r| r.len() == fields)
            .all(|r| r[fields - 1].is_empty())
    {
        return false;
    }
    let mut padded = recs[at].clone();
    padded.push_field(b"");
    looks_like_header(&padded, &recs[at + 1..], user_nulls)
}

/// `recs[at]` has one field more than the records, empty, and is a header
/// without it: a header that ends with a delimiter the records lack.
pub(super) fn header_ends_with_delimiter(
    recs: &[Rec],
    at: usize,
    fields: usize,
    user_nulls: Option<&[String]>,
) -> bool {
    let n = recs[at].len();
    if n != fields + 1 || fields == 0 || !recs[at].get(n - 1).is_some_and(|f| f.is_empty()) {
        return false;
    }
    let cut: Rec = recs[at].iter().take(fields).collect();
    looks_like_header(&cut, &recs[at + 1..], user_nulls)
}

impl Start {
    /// The first record as the header would be: without a trailing empty
    /// field, or with the one the records have.
    pub(super) fn first_record(&self, recs: &[Rec], fields: usize) -> Rec {
        if self.trailing {
            recs[self.at].iter().take(fields).collect()
        } else if self.records_trailing {
            let mut r = recs[self.at].clone();
            r.push_field(b"");
            r
        } else {
            recs[self.at].clone()
        }
    }

    /// The note saying how many records are skipped, when some are
    /// (`header`: the user's `--header`/`--no-header`).
    pub(super) fn skip_note(&self, header: Option<bool>) -> Option<String> {
        (self.at > 0).then(|| {
            format!(
                "skipping {} record(s) before the {} (they have a different number of fields)",
                self.at,
                if header == Some(false) {
                    "data"
                } else {
                    "header"
                }
            )
        })
    }

    /// The note saying the first field is a row name, when it is.
    pub(super) fn index_note(&self, fields: usize) -> Option<String> {
        self.index_column.then(|| {
            format!(
                "the header has {} fields and the records {fields}: the first field of each \
                 record is a row name, imported as column {INDEX_COLUMN:?}",
                fields - 1
            )
        })
    }

    /// A header told by the first record's shape alone, and why; `None`
    /// when its values must decide.
    pub(super) fn header_shape(&self, fields: usize) -> Option<(bool, String)> {
        if self.index_column {
            Some((
                true,
                "the first record has one field fewer than the rest: a header over row names"
                    .to_string(),
            ))
        } else if self.trailing {
            Some((
                true,
                "the first record ends with a delimiter the rest lack: a header".to_string(),
            ))
        } else if self.records_trailing {
            Some((
                true,
                format!(
                    "the first record has one field fewer than the rest, whose last field is \
                     always empty (a delimiter at the end of each line): a header; the last \
                     column is named c{fields}"
                ),
            ))
        } else {
            None
        }
    }
}
