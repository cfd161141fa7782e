//! The parser thread: records in, batches of typed rows out.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::SyncSender;
use std::sync::Arc;

use crate::convert::batch::Batch;
use crate::convert::Converter;
use crate::error::Error;
use crate::plan::resume::ResumePoint;
use crate::read::records::{RawOwned, RawRef, Records};

/// Records per batch sent to the writer (a batch is also sent once it holds
/// [`BATCH_BYTES`]).
pub const BATCH_ROWS: usize = 4096;
/// Bytes of values per batch, at most (roughly).
pub const BATCH_BYTES: usize = 4 << 20;

/// Everything the parser thread needs.
pub struct ParseJob {
    /// Records still to read.
    pub records: Records,
    /// Records read ahead for type inference, converted first.
    pub sample: Vec<RawOwned>,
    /// How records become rows.
    pub converter: Converter,
    /// Records to skip before converting (`--resume`).
    pub skip: u64,
    /// With `--resume`: the last record committed, checked when reached.
    pub resume: Option<ResumePoint>,
    /// Bytes of the file read so far.
    pub bytes_read: Arc<AtomicU64>,
    /// Size of the file when it was opened (a regular file only).
    pub size: Option<u64>,
    /// The input's name for messages.
    pub display: String,
}

impl ParseJob {
    /// Reads every record and sends batches of rows on `tx` in input order,
    /// the last one marked [`Batch::last`]. An error is sent as the last
    /// message instead. Stops early when the receiver
    /// is gone (the writer stopped).
    pub fn run(mut self, tx: SyncSender<Result<Batch, Error>>) {
        let ncols = self.converter.plan().columns.len();
        let mut batch = Batch::new(ncols, BATCH_ROWS);
        let mut record: u64 = 0;
        let send = |batch: &mut Batch, bytes: &AtomicU64| -> bool {
            let next = Batch::new(ncols, if batch.last { 0 } else { BATCH_ROWS });
            let mut full = std::mem::replace(batch, next);
            full.bytes_read = bytes.load(Ordering::Relaxed);
            tx.send(Ok(full)).is_ok()
        };
        for raw in std::mem::take(&mut self.sample) {
            record += 1;
            match &raw {
                RawOwned::Csv(r, at) => self.converter.push_csv(&mut batch, r, *at, record),
                RawOwned::Json(b, at) => self.converter.push_json(&mut batch, b, *at, record),
            }
            if (batch.entries.len() >= BATCH_ROWS || batch.weight() >= BATCH_BYTES)
                && !send(&mut batch, &self.bytes_read)
            {
                return;
            }
        }
        loop {
            let raw = match self.records.next_record(&self.display) {
                Ok(Some(r)) => r,
                Ok(None) => break,
                Err(e) => {
                    // The records before the error are good: with
                    // --commit-every they may still be committed.
                    if !batch.entries.is_empty() && !send(&mut batch, &self.bytes_read) {
                        return;
                    }
                    let _ = tx.send(Err(e));
                    return;
                }
            };
            record += 1;
            if record <= self.skip {
                if let Some(point) = self.resume.filter(|p| p.record == record) {
                    let same = same_as_then(&mut self.converter, ncols, &raw, point, &self.display);
                    if let Err(e) = same {
                        let _ = tx.send(Err(e));
                        return;
                    }
                }
                continue;
            }
            match raw {
                RawRef::Csv(r, at) => self.converter.push_csv(&mut batch, r, at, record),
                RawRef::Json(b, at) => self.converter.push_json(&mut batch, b, at, record),
            }
            if (batch.entries.len() >= BATCH_ROWS || batch.weight() >= BATCH_BYTES)
                && !send(&mut batch, &self.bytes_read)
            {
                return;
            }
        }
        if let Err(e) = self.check_end(record) {
            let _ = tx.send(Err(e));
            return;
        }
        batch.blank_lines = self.records.blank_lines();
        batch.last = true;
        send(&mut batch, &self.bytes_read);
    }

    /// At the end of the input (`record` records read): an input with fewer
    /// records than a resumed import had read, or one that shrank while
    /// being read, is an error.
    fn check_end(&self, record: u64) -> Result<(), Error> {
        if record < self.skip {
            return Err(Error::Input(format!(
                "{}: has only {record} records, but the import to resume had already read {}",
                self.display, self.skip
            )));
        }
        let read = self.bytes_read.load(Ordering::Relaxed);
        if let Some(size) = self.size.filter(|&s| read < s) {
            return Err(Error::Input(format!(
                "{}: the input ended after {read} bytes, but the file had {size} bytes when the \
                 import began: it shrank while being read (was it being rewritten?), so its \
                 last record may be cut short",
                self.display
            )));
        }
        Ok(())
    }
}

/// With `--resume`: the record `raw`, the last one the interrupted import
/// committed (`point`), must end where it ended then and convert to the
/// same row; otherwise the file changed before the point to resume from.
fn same_as_then(
    converter: &mut Converter,
    ncols: usize,
    raw: &RawRef<'_>,
    point: ResumePoint,
    display: &str,
) -> Result<(), Error> {
    let record = point.record;
    let mut probe = Batch::new(ncols, 1);
    let at = match raw {
        RawRef::Csv(r, at) => {
            converter.push_csv(&mut probe, r, *at, record);
            *at
        }
        RawRef::Json(b, at) => {
            converter.push_json(&mut probe, b, *at, record);
            *at
        }
    };
    if at.end == point.end && probe.entry_hash(0) == point.hash {
        return Ok(());
    }
    Err(Error::Input(format!(
        "refusing to resume: {display}:{}: record {record}, the last one the \
         interrupted import committed, is not the same as then ({}); the \
         file was changed before the point to resume from. Start over \
         with --mode replace",
        at.line,
        if at.end != point.end {
            format!("it now ends at byte {}, then at byte {}", at.end, point.end)
        } else {
            "its content differs".to_string()
        }
    )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::read::source::Format;

    fn job(data: &'static [u8], size: Option<u64>, read: u64) -> Vec<Result<Batch, Error>> {
        use crate::plan::columns::{ColumnPlan, Plan};
        use crate::values::ColType;
        let mut records = Records::new(Format::Csv, Box::new(std::io::Cursor::new(data)));
        records.next_record("t").unwrap(); // the header
        let plan = Plan {
            format: Format::Csv,
            header: true,
            fields: 1,
            nulls: vec![],
            columns: vec![ColumnPlan {
                name: "a".into(),
                ty: ColType::Text,
                strict: false,
                src: 0,
                key: "a".into(),
            }],
            commit_every: None,
            rejects_table: None,
            recurring: Default::default(),
            sniffed: None,
        };
        let (tx, rx) = std::sync::mpsc::sync_channel(16);
        ParseJob {
            records,
            sample: Vec::new(),
            converter: Converter::new(plan),
            skip: 0,
            resume: None,
            bytes_read: Arc::new(AtomicU64::new(read)),
            size,
            display: "t.csv".into(),
        }
        .run(tx);
        rx.into_iter().collect()
    }

    #[test]
    fn an_input_that_ends_short_of_its_size_at_open_fails() {
        // The file had 1000 bytes when opened, but only 10 could be read.
        let got = job(b"a\nx\ny\n", Some(1000), 10);
        let last = got.last().unwrap();
        let err = match last {
            Err(e) => e.to_string(),
            Ok(_) => panic!("a shrunken input must not end normally"),
        };
        assert!(err.contains("shrank while being read"), "{err}");
        assert!(
            err.contains("after 10 bytes") && err.contains("1000 bytes"),
            "{err}"
        );
        // The records read are still delivered before the error (with
        // --commit-every they may be committed; the error ends the import).
        assert!(got.iter().all(|b| b.as_ref().map_or(true, |b| !b.last)));
        // Read to its size: ends normally, with the blank lines counted.
        let got = job(b"a\nx\n\ny\n", Some(8), 8);
        let last = got.last().unwrap().as_ref().unwrap();
        assert!(last.last);
        assert_eq!(last.blank_lines, 1);
    }
}
