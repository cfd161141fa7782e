//! The dialect: the delimiter and the quote a file is read with (the
//! candidate whose records most often share one field count), and the
//! records a sample splits into with them.

use std::collections::BTreeMap;

use crate::read::source::Format;

use super::{Options, Rec, DELIMITERS, DIALECT_BYTES, QUOTES};

/// Splits `bytes` into records with `delimiter` and `quote`, as the import
/// reads them (blank lines skipped; LF, CRLF or CR ends a line). When
/// `complete` is false the last record may be cut and is dropped. At most
/// `limit` records.
pub fn records(
    bytes: &[u8],
    delimiter: u8,
    quote: Option<u8>,
    complete: bool,
    limit: usize,
) -> Vec<Rec> {
    let mut out = Vec::new();
    each_record(bytes, delimiter, quote, complete, limit, |rec| {
        // A copy of the record's fields and place alone: `clone` would copy
        // the reader's buffers, grown to twice what the longest record
        // needed.
        let mut copy = Rec::with_capacity(rec.as_slice().len(), rec.len());
        copy.extend(rec);
        copy.set_position(rec.position().cloned());
        out.push(copy);
    });
    out
}

/// Calls `f` with each of the first `limit` records of `bytes`, as
/// [`records`] returns them, without keeping them.
fn each_record(
    bytes: &[u8],
    delimiter: u8,
    quote: Option<u8>,
    complete: bool,
    limit: usize,
    mut f: impl FnMut(&Rec),
) {
    let mut rdr = crate::read::records::csv_reader(delimiter, quote).from_reader(bytes);
    // Each record is handed on once the next one is read: the last one of
    // an incomplete input may be cut short, and is dropped.
    let (mut rec, mut next) = (Rec::new(), Rec::new());
    let mut have = false;
    for _ in 0..limit {
        match rdr.read_byte_record(&mut next) {
            Ok(true) => {
                if have {
                    f(&rec);
                }
                std::mem::swap(&mut rec, &mut next);
                have = true;
            }
            Ok(false) => {
                if have && complete {
                    f(&rec);
                }
                return;
            }
            Err(_) => break,
        }
    }
    if have {
        f(&rec);
    }
}

/// How many of `bytes`' first `limit` records (as [`records`] reads them)
/// have each field count, by field count.
fn field_counts(
    bytes: &[u8],
    delimiter: u8,
    quote: Option<u8>,
    complete: bool,
    limit: usize,
) -> BTreeMap<usize, usize> {
    let mut counts = BTreeMap::new();
    each_record(bytes, delimiter, quote, complete, limit, |rec| {
        *counts.entry(rec.len()).or_default() += 1;
    });
    counts
}

/// The most common field count among `recs` (the larger on a tie), and how
/// many records have it.
pub(super) fn modal(recs: &[Rec]) -> (usize, usize) {
    let mut counts: BTreeMap<usize, usize> = BTreeMap::new();
    for r in recs {
        *counts.entry(r.len()).or_default() += 1;
    }
    modal_of(counts)
}

/// The most common field count in `counts` (the larger on a tie), and how
/// many records have it.
fn modal_of(counts: BTreeMap<usize, usize>) -> (usize, usize) {
    counts
        .into_iter()
        .max_by_key(|&(n, c)| (c, n))
        .unwrap_or((0, 0))
}

/// Chooses the delimiter and quote: the candidate whose records most often
/// share one field count above 1 (then the most fields, then the earlier
/// candidate). A file with one column is read with `,` and `"`.
pub fn choose_dialect(head: &[u8], complete: bool) -> (u8, Option<u8>) {
    let cut = head.len() > DIALECT_BYTES;
    let bytes = &head[..head.len().min(DIALECT_BYTES)];
    let mut best = ((0usize, 0usize), (b',', Some(b'"')));
    for d in DELIMITERS {
        for q in QUOTES {
            let (fields, n) = modal_of(field_counts(bytes, d, Some(q), complete && !cut, 2000));
            let score = if fields > 1 { (n, fields) } else { (0, 0) };
            if score > best.0 {
                best = (score, (d, Some(q)));
            }
        }
    }
    best.1
}

/// The delimiter and quote: TSV's tab and no quote, or the user's
/// delimiter, or what the head shows.
pub(super) fn dialect(head: &[u8], complete: bool, opts: &Options) -> (u8, Option<u8>) {
    match (opts.format, opts.delimiter) {
        (Format::Tsv, d) => (d.unwrap_or(b'\t'), None),
        (_, Some(d)) => {
            let (_, q) = choose_dialect(head, complete);
            (d, q)
        }
        _ => choose_dialect(head, complete),
    }
}
