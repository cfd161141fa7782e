//! Reading records (CSV/TSV through the `csv` crate, NDJSON line by line)
//! and the parser thread that turns them into batches.

use std::io::BufRead;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::SyncSender;
use std::sync::Arc;

use super::batch::Batch;
use super::convert::Converter;
use super::source::Format;
use crate::error::CliError;

/// Records per batch sent to the writer (a batch is also sent once it holds
/// [`BATCH_BYTES`]).
pub const BATCH_ROWS: usize = 4096;
/// Bytes of values per batch, at most (roughly).
pub const BATCH_BYTES: usize = 4 << 20;

/// A record read from the input, borrowed from the reader.
pub enum RawRef<'a> {
    /// A CSV/TSV record and the line it starts on.
    Csv(&'a csv::ByteRecord, u64),
    /// An NDJSON line (without its line ending) and its number.
    Json(&'a [u8], u64),
}

/// A record kept for later (the inference sample).
pub enum RawOwned {
    /// A CSV/TSV record and its line.
    Csv(csv::ByteRecord, u64),
    /// An NDJSON line and its number.
    Json(Vec<u8>, u64),
}

impl RawRef<'_> {
    /// Copies the record.
    pub fn to_owned(&self) -> RawOwned {
        match self {
            RawRef::Csv(r, l) => RawOwned::Csv((*r).clone(), *l),
            RawRef::Json(b, l) => RawOwned::Json(b.to_vec(), *l),
        }
    }
}

/// Reads records one after another.
pub enum Records {
    /// CSV or TSV.
    Csv {
        /// The reader.
        rdr: csv::Reader<Box<dyn BufRead + Send>>,
        /// The current record (reused).
        rec: csv::ByteRecord,
        /// Scratch space for the last field.
        last: Vec<u8>,
    },
    /// NDJSON.
    Ndjson {
        /// The input.
        rdr: Box<dyn BufRead + Send>,
        /// The current line (reused).
        buf: Vec<u8>,
        /// Lines read so far.
        line: u64,
    },
}

impl Records {
    /// Reads `input` as `format`.
    pub fn new(format: Format, input: Box<dyn BufRead + Send>) -> Records {
        match format {
            Format::Csv | Format::Tsv => {
                let rdr = csv::ReaderBuilder::new()
                    .has_headers(false)
                    .flexible(true)
                    .delimiter(if format == Format::Tsv { b'\t' } else { b',' })
                    .quoting(format == Format::Csv)
                    // Records end at LF; a CR before it is removed from the
                    // last field (the csv crate's own CRLF handling
                    // miscounts line numbers).
                    .terminator(csv::Terminator::Any(b'\n'))
                    .buffer_capacity(1 << 16)
                    .from_reader(input);
                Records::Csv {
                    rdr,
                    rec: csv::ByteRecord::new(),
                    last: Vec::new(),
                }
            }
            Format::Ndjson => Records::Ndjson {
                rdr: input,
                buf: Vec::with_capacity(4096),
                line: 0,
            },
        }
    }

    /// The next record, or `None` at the end of the input. Blank NDJSON
    /// lines are skipped (they are not records).
    pub fn next_record(&mut self, display: &str) -> Result<Option<RawRef<'_>>, CliError> {
        match self {
            Records::Csv { rdr, rec, last } => loop {
                let more = rdr.read_byte_record(rec).map_err(|e| {
                    let line = e.position().map_or(0, |p| p.line());
                    CliError::Input(format!("{display}:{line}: reading: {e}"))
                })?;
                if !more {
                    return Ok(None);
                }
                let n = rec.len();
                if n > 0 && rec[n - 1].ends_with(b"\r") {
                    if n == 1 && rec[0].len() == 1 {
                        continue; // a blank CRLF line, skipped like a blank LF line
                    }
                    last.clear();
                    last.extend_from_slice(&rec[n - 1][..rec[n - 1].len() - 1]);
                    rec.truncate(n - 1);
                    rec.push_field(last);
                }
                let line = rec.position().map_or(0, |p| p.line());
                return Ok(Some(RawRef::Csv(rec, line)));
            },
            Records::Ndjson { rdr, buf, line } => loop {
                buf.clear();
                let n = rdr
                    .read_until(b'\n', buf)
                    .map_err(|e| CliError::io(format!("{display}:{}: reading", *line + 1), e))?;
                if n == 0 {
                    return Ok(None);
                }
                *line += 1;
                while matches!(buf.last(), Some(b'\n' | b'\r')) {
                    buf.pop();
                }
                if buf.iter().all(|c| c.is_ascii_whitespace()) {
                    continue;
                }
                return Ok(Some(RawRef::Json(buf, *line)));
            },
        }
    }
}

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
    /// Bytes of the file read so far.
    pub bytes_read: Arc<AtomicU64>,
    /// The input's name for messages.
    pub display: String,
}

impl ParseJob {
    /// Reads every record and sends batches of rows on `tx` in input order,
    /// the last one marked [`Batch::last`]. An error is sent as the last
    /// message instead. Stops early when the receiver
    /// is gone (the writer stopped).
    pub fn run(mut self, tx: SyncSender<Result<Batch, CliError>>) {
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
                RawOwned::Csv(r, line) => self.converter.push_csv(&mut batch, r, *line, record),
                RawOwned::Json(b, line) => self.converter.push_json(&mut batch, b, *line, record),
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
                    let _ = tx.send(Err(e));
                    return;
                }
            };
            record += 1;
            if record <= self.skip {
                continue;
            }
            match raw {
                RawRef::Csv(r, line) => self.converter.push_csv(&mut batch, r, line, record),
                RawRef::Json(b, line) => self.converter.push_json(&mut batch, b, line, record),
            }
            if (batch.entries.len() >= BATCH_ROWS || batch.weight() >= BATCH_BYTES)
                && !send(&mut batch, &self.bytes_read)
            {
                return;
            }
        }
        if record < self.skip {
            let _ = tx.send(Err(CliError::Input(format!(
                "{}: has only {record} records, but the import to resume had already read {}",
                self.display, self.skip
            ))));
            return;
        }
        batch.last = true;
        send(&mut batch, &self.bytes_read);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_all(format: Format, data: &'static [u8]) -> Vec<(Vec<String>, u64)> {
        let mut r = Records::new(format, Box::new(std::io::Cursor::new(data)));
        let mut out = Vec::new();
        while let Some(rec) = r.next_record("t").unwrap() {
            match rec {
                RawRef::Csv(rec, line) => out.push((
                    rec.iter()
                        .map(|f| String::from_utf8_lossy(f).into_owned())
                        .collect(),
                    line,
                )),
                RawRef::Json(b, line) => {
                    out.push((vec![String::from_utf8_lossy(b).into_owned()], line))
                }
            }
        }
        out
    }

    #[test]
    fn csv_quoting_crlf_and_embedded_newlines() {
        let got = read_all(
            Format::Csv,
            b"a,b\r\n\"x, y\",\"say \"\"hi\"\"\"\r\n\"multi\nline\",2\r\nlast,",
        );
        assert_eq!(got[0], (vec!["a".into(), "b".into()], 1));
        assert_eq!(got[1].0, vec!["x, y", "say \"hi\""]);
        assert_eq!(got[2], (vec!["multi\nline".into(), "2".into()], 3));
        assert_eq!(got[3], (vec!["last".into(), "".into()], 5));
        let got = read_all(Format::Csv, b"a,b\r\n\r\n1,\"x\r\ny\"\r\n2,3");
        assert_eq!(got.len(), 3);
        assert_eq!(got[1], (vec!["1".into(), "x\r\ny".into()], 3));
        assert_eq!(got[2], (vec!["2".into(), "3".into()], 5));
    }

    #[test]
    fn tsv_treats_quotes_as_text_and_ndjson_skips_blank_lines() {
        let got = read_all(Format::Tsv, b"a\tb\n\"q\tz\n");
        assert_eq!(got[1].0, vec!["\"q", "z"]);
        let got = read_all(Format::Ndjson, b"{\"a\":1}\r\n\n  \n{\"a\":2}");
        assert_eq!(got.len(), 2);
        assert_eq!(got[0], (vec!["{\"a\":1}".into()], 1));
        assert_eq!(got[1].1, 4);
    }
}
