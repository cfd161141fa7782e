//! Batches of parsed rows, sent from the parser thread to the writer.
//!
//! A batch keeps every value of its rows in two flat buffers (cells and
//! text), so parsing a row allocates nothing; [`RowRef`] hands a row to the
//! binder as [`litelane::BulkRow`], with text borrowed from the batch.

use std::sync::Arc;

use litelane::{BulkRow, ValueRef};

use crate::read::records::Place;
use crate::read::source::fnv1a;
use crate::values::{is_iso_date, is_iso_timestamp, Cell, ColType};

/// What became of one input record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Stored as row `n` of the batch.
    Row(u32),
    /// Rejected: `rejects[n]` of the batch says why.
    Reject(u32),
}

/// One input record, in input order.
#[derive(Debug, Clone, Copy)]
pub struct Entry {
    /// Line of the input where the record starts (1-based; the header is
    /// line 1 of a CSV file with a header).
    pub line: u64,
    /// Number of the record among the data records (1-based).
    pub record: u64,
    /// Byte offset just after the record in the decoded input.
    pub end: u64,
    /// Row or reject.
    pub kind: Kind,
}

/// A rejected record.
#[derive(Debug, Clone)]
pub struct Rejected {
    /// Why it was rejected.
    pub reason: String,
    /// The record as read (for CSV, its fields written back as CSV).
    pub raw: Vec<u8>,
}

/// Rows and rejects of consecutive input records.
#[derive(Debug, Default)]
pub struct Batch {
    /// Values per row.
    pub ncols: usize,
    /// `ncols` cells per row, row after row.
    pub cells: Vec<Cell>,
    /// The text of every [`Cell::Text`] of the batch.
    pub text: Vec<u8>,
    /// Records in input order.
    pub entries: Vec<Entry>,
    /// Rejected records, referred to by [`Kind::Reject`].
    pub rejects: Vec<Rejected>,
    /// Rows in the batch.
    pub rows: u32,
    /// Bytes of the input file read when the batch was sent.
    pub bytes_read: u64,
    /// Blank lines skipped in the whole input (set on the last batch).
    pub blank_lines: u64,
    /// The last batch: the input ended normally after it. (A channel that
    /// closes without one means the parser died: nothing is committed.)
    pub last: bool,
    /// Fields of the batch's rows read as NULL because they equal a null
    /// token: `null_counts[column * null_stride + token]` (token: its index
    /// among the column's tokens); empty when none was met.
    pub null_counts: Vec<u64>,
    /// Tokens per column in `null_counts` (the most any column has).
    pub null_stride: usize,
    /// Indexes into `null_counts` counted for the row being built (taken
    /// back if it is rejected).
    pub row_nulls: Vec<usize>,
    /// Per row: whether a value of it may be [`kept_as_text`]. False says
    /// none is, so the writer skips the check (for a DATE or TIMESTAMP
    /// column that check parses the date again). Set by the converter, which
    /// knows without looking again (see [`Batch::may_keep_text`]).
    pub may_keep: Vec<bool>,
    /// [`may_keep`](Batch::may_keep) of the row being built.
    pub(crate) row_may_keep: bool,
}

impl Batch {
    /// An empty batch for rows of `ncols` values.
    pub fn new(ncols: usize, rows: usize) -> Batch {
        Batch {
            ncols,
            cells: Vec::with_capacity(ncols * rows),
            text: Vec::with_capacity(rows * ncols * 8),
            entries: Vec::with_capacity(rows),
            ..Batch::default()
        }
    }

    /// Appends text to the text buffer and returns its cell.
    pub fn push_text(&mut self, t: &[u8]) -> Cell {
        let start = self.text.len() as u32;
        self.text.extend_from_slice(t);
        Cell::Text(start, t.len() as u32)
    }

    /// Appends `v` as its `Display` writes it (no string of its own) and
    /// returns its cell.
    pub fn push_shown(&mut self, v: &impl std::fmt::Display) -> Cell {
        use std::io::Write;
        let start = self.text.len();
        write!(self.text, "{v}").expect("writing to a Vec cannot fail");
        Cell::Text(start as u32, (self.text.len() - start) as u32)
    }

    /// Records that the last `ncols` cells pushed form a row.
    pub fn finish_row(&mut self, at: Place, record: u64) {
        debug_assert_eq!(self.cells.len(), (self.rows as usize + 1) * self.ncols);
        self.entries.push(Entry {
            line: at.line,
            end: at.end,
            record,
            kind: Kind::Row(self.rows),
        });
        self.rows += 1;
        self.row_nulls.clear();
        self.may_keep.push(std::mem::take(&mut self.row_may_keep));
    }

    /// Whether a value of row `row` is [`kept_as_text`] (`types`: the
    /// columns' types).
    pub fn any_kept(&self, row: usize, types: &[ColType]) -> bool {
        self.cells[row * self.ncols..(row + 1) * self.ncols]
            .iter()
            .zip(types)
            .any(|(cell, ty)| kept_as_text(*ty, *cell, &self.text))
    }

    /// Notes that the row being built may hold a value [`kept_as_text`]:
    /// text in a column whose type is not TEXT or ANY, unless it is a date
    /// checked as one in a DATE or TIMESTAMP column.
    pub fn may_keep_text(&mut self) {
        self.row_may_keep = true;
    }

    /// Counts a field of the row being built read as NULL: column `col`'s
    /// null token number `token`; `stride`: tokens per column, at most.
    pub fn count_null(&mut self, col: usize, token: usize, stride: usize) {
        if self.null_counts.is_empty() {
            self.null_stride = stride;
            self.null_counts = vec![0; self.ncols * stride];
        }
        let i = col * self.null_stride + token;
        self.null_counts[i] += 1;
        self.row_nulls.push(i);
    }

    /// Drops the cells and text pushed since `mark` (a row that turned out
    /// to be bad).
    pub fn undo_to(&mut self, mark: (usize, usize)) {
        self.cells.truncate(mark.0);
        self.text.truncate(mark.1);
        for i in self.row_nulls.drain(..) {
            self.null_counts[i] -= 1;
        }
        self.row_may_keep = false;
    }

    /// Where the next row starts, for [`undo_to`](Batch::undo_to).
    pub fn mark(&self) -> (usize, usize) {
        (self.cells.len(), self.text.len())
    }

    /// Records a rejected record.
    pub fn reject(&mut self, at: Place, record: u64, reason: String, raw: Vec<u8>) {
        self.entries.push(Entry {
            line: at.line,
            end: at.end,
            record,
            kind: Kind::Reject(self.rejects.len() as u32),
        });
        self.rejects.push(Rejected { reason, raw });
    }

    /// A hash of what entry `i` became (its row's values, or its reject's
    /// record and reason), recorded with each commit so that `--resume` can
    /// check that the record is still the same.
    pub fn entry_hash(&self, i: usize) -> u64 {
        let mut h = 0xcbf2_9ce4_8422_2325u64;
        match self.entries[i].kind {
            Kind::Row(r) => {
                let row = &self.cells[r as usize * self.ncols..(r as usize + 1) * self.ncols];
                for c in row {
                    h = match *c {
                        Cell::Null => fnv1a(h, b"n"),
                        Cell::Int(v) => fnv1a(fnv1a(h, b"i"), &v.to_le_bytes()),
                        Cell::Real(v) => fnv1a(fnv1a(h, b"r"), &v.to_bits().to_le_bytes()),
                        Cell::Text(s, n) => {
                            let t = &self.text[s as usize..(s + n) as usize];
                            fnv1a(fnv1a(fnv1a(h, b"t"), &(n as u64).to_le_bytes()), t)
                        }
                    };
                }
            }
            Kind::Reject(j) => {
                let r = &self.rejects[j as usize];
                h = fnv1a(fnv1a(h, b"x"), &r.raw);
                h = fnv1a(h, r.reason.as_bytes());
            }
        }
        h
    }

    /// Bytes held, to decide when to send the batch.
    pub fn weight(&self) -> usize {
        self.text.len() + self.cells.len() * std::mem::size_of::<Cell>()
    }
}

/// True when `cell` of a column of type `ty` holds a value that did not fit
/// the type and is stored as written (text): `unknown` in an INTEGER column,
/// `yes` in a BOOLEAN one, `soon` in a DATE one (SQLite keeps such text as
/// text). Counted for the summary.
pub fn kept_as_text(ty: ColType, cell: Cell, text: &[u8]) -> bool {
    let Cell::Text(start, len) = cell else {
        return false;
    };
    match ty {
        ColType::Integer | ColType::Real | ColType::Numeric | ColType::Boolean => true,
        ColType::Date | ColType::Timestamp => {
            let t = &text[start as usize..start as usize + len as usize];
            !is_iso_date(t) && !is_iso_timestamp(t)
        }
        ColType::Text | ColType::Any => false,
    }
}

/// One row of a shared batch, with its place in the input.
#[derive(Clone)]
pub struct RowRef {
    /// The batch holding the row.
    pub batch: Arc<Batch>,
    /// Row number within the batch.
    pub row: u32,
    /// Input line of the record.
    pub line: u64,
    /// Record number in the input.
    pub record: u64,
}

impl RowRef {
    /// Adds 1 (or, `add` false, takes 1) in `counts` for each column of the
    /// row whose value is [`kept_as_text`] (`types`: the columns' types).
    pub fn count_kept(&self, types: &[ColType], counts: &mut [i64], add: bool) {
        let b = &*self.batch;
        // A batch that does not say (built by hand) is checked in full.
        if !b.may_keep.get(self.row as usize).copied().unwrap_or(true) {
            debug_assert!(!b.any_kept(self.row as usize, types));
            return;
        }
        let row = &b.cells[self.row as usize * b.ncols..(self.row as usize + 1) * b.ncols];
        for ((cell, ty), n) in row.iter().zip(types).zip(counts.iter_mut()) {
            if kept_as_text(*ty, *cell, &b.text) {
                *n += if add { 1 } else { -1 };
            }
        }
    }
}

impl BulkRow for RowRef {
    fn len(&self) -> usize {
        self.batch.ncols
    }

    fn value(&self, i: usize) -> ValueRef<'_> {
        let b = &*self.batch;
        match b.cells[self.row as usize * b.ncols + i] {
            Cell::Null => ValueRef::Null,
            Cell::Int(v) => ValueRef::Integer(v),
            Cell::Real(v) => ValueRef::Real(v),
            Cell::Text(start, len) => {
                ValueRef::Text(&b.text[start as usize..start as usize + len as usize])
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_read_back_their_values_and_undo_drops_a_partial_row() {
        let mut b = Batch::new(2, 4);
        let t = b.push_text(b"hello");
        b.cells.push(Cell::Int(7));
        b.cells.push(t);
        b.finish_row(Place { line: 2, end: 9 }, 1);
        let mark = b.mark();
        let t = b.push_text(b"bad");
        b.cells.push(t);
        b.undo_to(mark);
        b.reject(
            Place { line: 3, end: 13 },
            2,
            "nope".into(),
            b"bad".to_vec(),
        );
        b.cells.push(Cell::Null);
        b.cells.push(Cell::Real(1.5));
        b.finish_row(Place { line: 4, end: 20 }, 3);
        let b = Arc::new(b);
        let r0 = RowRef {
            batch: Arc::clone(&b),
            row: 0,
            line: 2,
            record: 1,
        };
        let r1 = RowRef {
            batch: Arc::clone(&b),
            row: 1,
            line: 4,
            record: 3,
        };
        assert_eq!(r0.value(0), ValueRef::Integer(7));
        assert_eq!(r0.value(1), ValueRef::Text(b"hello"));
        assert_eq!(r1.value(0), ValueRef::Null);
        assert_eq!(r1.value(1), ValueRef::Real(1.5));
        assert_eq!(b.entries[1].kind, Kind::Reject(0));
        assert_eq!(b.text, b"hello");
    }
}
