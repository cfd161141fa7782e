//! Reading records: CSV/TSV through the `csv` crate, NDJSON line by line,
//! a JSON array element by element.

use std::io::BufRead;

use crate::error::Error;
use crate::read::source::Format;

/// A record read from the input, borrowed from the reader.
pub enum RawRef<'a> {
    /// A CSV/TSV record and where it is.
    Csv(&'a csv::ByteRecord, Place),
    /// An NDJSON line (without its line ending) and where it is.
    Json(&'a [u8], Place),
}

/// A record kept for later (the inference sample).
pub enum RawOwned {
    /// A CSV/TSV record and where it is.
    Csv(csv::ByteRecord, Place),
    /// An NDJSON line and where it is.
    Json(Vec<u8>, Place),
}

/// Where a record is in the (decoded) input.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Place {
    /// The physical line it starts on (1-based; LF, CRLF and a lone CR each
    /// end a line).
    pub line: u64,
    /// The byte offset just after it (where the next record may start).
    pub end: u64,
}

impl RawRef<'_> {
    /// Copies the record.
    pub fn to_owned(&self) -> RawOwned {
        match self {
            RawRef::Csv(r, p) => RawOwned::Csv((*r).clone(), *p),
            RawRef::Json(b, p) => RawOwned::Json(b.to_vec(), *p),
        }
    }
}

/// Appended after the input so that a quote still open at its end can be
/// told from a closed one: after a closed quote this is a record of its own;
/// inside an open one it becomes part of the last field.
const SENTINEL: &[u8] = b"\x00litelane:end-of-input\xff";

/// The input of the CSV reader: counts line breaks (LF, CRLF, lone CR) as
/// the bytes pass, so that a record's starting byte can be turned into its
/// physical line, and appends a sentinel (bytes no text holds) at the end.
pub struct Lines {
    inner: Box<dyn BufRead + Send>,
    /// Bytes of the input passed on so far.
    offset: u64,
    /// Offsets at which a line ends (just after its LF or lone CR) not yet
    /// claimed by a record.
    breaks: std::cell::RefCell<std::collections::VecDeque<u64>>,
    /// Line breaks claimed so far.
    claimed: std::cell::Cell<u64>,
    /// The last byte passed on was a CR.
    cr: bool,
    /// The last byte passed on ended a line (LF or CR), or there was none.
    at_line_start: bool,
    /// The line break appended after the input ended its last line.
    tail_break: bool,
    /// Input length, once its end was reached.
    total: Option<u64>,
    /// Bytes of the sentinel already passed on.
    tail: usize,
}

impl Lines {
    fn new(inner: Box<dyn BufRead + Send>) -> Lines {
        Lines {
            inner,
            offset: 0,
            breaks: Default::default(),
            claimed: Default::default(),
            cr: false,
            at_line_start: true,
            tail_break: false,
            total: None,
            tail: 0,
        }
    }

    /// The line a record starting at byte `start` begins on.
    fn line_at(&self, start: u64) -> u64 {
        let mut q = self.breaks.borrow_mut();
        let mut n = self.claimed.get();
        while q.front().is_some_and(|&b| b <= start) {
            q.pop_front();
            n += 1;
        }
        self.claimed.set(n);
        n + 1
    }
}

impl std::io::Read for Lines {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.total.is_none() {
            let chunk = self.inner.fill_buf()?;
            if !chunk.is_empty() {
                let n = chunk.len().min(buf.len());
                buf[..n].copy_from_slice(&chunk[..n]);
                self.inner.consume(n);
                let mut q = self.breaks.borrow_mut();
                for i in memchr::memchr2_iter(b'\n', b'\r', &buf[..n]) {
                    let c = buf[i];
                    // The LF of a CRLF adds no line: its CR already did.
                    let after_cr = if i == 0 { self.cr } else { buf[i - 1] == b'\r' };
                    if c == b'\r' || !after_cr {
                        q.push_back(self.offset + i as u64 + 1);
                    }
                }
                self.cr = buf[n - 1] == b'\r';
                self.at_line_start = matches!(buf[n - 1], b'\n' | b'\r');
                self.offset += n as u64;
                return Ok(n);
            }
            self.total = Some(self.offset);
            if !self.at_line_start {
                // The line break appended below ends the last line.
                self.breaks.borrow_mut().push_back(self.offset + 1);
                self.tail_break = true;
            }
        }
        // The end: a line break, the sentinel, a line break.
        let tail: &[u8] = &[b"\n", SENTINEL, b"\n"].concat();
        let rest = &tail[self.tail.min(tail.len())..];
        let n = rest.len().min(buf.len());
        buf[..n].copy_from_slice(&rest[..n]);
        self.tail += n;
        Ok(n)
    }
}

/// Counts the line breaks in `b` (LF, CRLF, lone CR; a CR at the end of `b`
/// counts as one).
fn line_breaks(b: &[u8]) -> u64 {
    let mut n = 0;
    for i in memchr::memchr2_iter(b'\n', b'\r', b) {
        if b[i] == b'\r' || i == 0 || b[i - 1] != b'\r' {
            n += 1;
        }
    }
    n
}

/// Reads one line ending in LF, CRLF or a lone CR (the ending included) into
/// `buf`; returns the bytes consumed (0 at the end of the input). JSON text
/// holds no raw CR or LF, so a lone CR can only end a line.
fn read_line_any<R: BufRead + ?Sized>(rdr: &mut R, buf: &mut Vec<u8>) -> std::io::Result<usize> {
    let mut n = 0;
    loop {
        let avail = rdr.fill_buf()?;
        if avail.is_empty() {
            return Ok(n);
        }
        match memchr::memchr2(b'\n', b'\r', avail) {
            Some(i) => {
                let cr = avail[i] == b'\r';
                buf.extend_from_slice(&avail[..=i]);
                rdr.consume(i + 1);
                n += i + 1;
                if cr && rdr.fill_buf()?.first() == Some(&b'\n') {
                    buf.push(b'\n');
                    rdr.consume(1);
                    n += 1;
                }
                return Ok(n);
            }
            None => {
                let len = avail.len();
                buf.extend_from_slice(avail);
                rdr.consume(len);
                n += len;
            }
        }
    }
}

/// The `csv` reader settings of every record read: records as they are (no
/// header, any width), the dialect's delimiter and quote (`None`: no
/// quoting), and LF, CRLF or a lone CR ending a record (a CR inside quotes
/// is data; line numbers come from [`Lines`]).
pub fn csv_reader(delimiter: u8, quote: Option<u8>) -> csv::ReaderBuilder {
    let mut b = csv::ReaderBuilder::new();
    b.has_headers(false)
        .flexible(true)
        .delimiter(delimiter)
        .quoting(quote.is_some())
        .quote(quote.unwrap_or(b'"'))
        .terminator(csv::Terminator::CRLF);
    b
}

/// Reads records one after another.
pub enum Records {
    /// CSV or TSV.
    Csv {
        /// The reader.
        rdr: csv::Reader<Lines>,
        /// The current record (reused).
        rec: csv::ByteRecord,
        /// The line the next record should start on, were no line blank.
        next_line: u64,
        /// Blank lines skipped (they are not records).
        blank: u64,
    },
    /// NDJSON.
    Ndjson {
        /// The input.
        rdr: Box<dyn BufRead + Send>,
        /// The current line (reused).
        buf: Vec<u8>,
        /// Lines read so far.
        line: u64,
        /// Bytes read so far.
        offset: u64,
        /// Blank lines skipped.
        blank: u64,
        /// Whether the input is one JSON array of objects (decided from its
        /// first byte that is not whitespace) and where its reading is.
        array: JsonArray,
    },
}

/// The reading of a JSON array (`[{...}, {...}]`), one element per record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JsonArray {
    /// Not decided yet (nothing read).
    Unknown,
    /// The input is NDJSON (one value per line).
    Lines,
    /// Inside the array: `elements` read so far, `opened` is the line of
    /// its `[`, `cr` says the last byte read was a CR.
    Open {
        /// Elements read so far.
        elements: u64,
        /// The line of the opening bracket.
        opened: u64,
        /// The last byte read was a CR (for counting CRLF as one break).
        cr: bool,
    },
    /// The closing bracket was read.
    Closed,
}

/// JSON's whitespace: space, tab, LF, CR.
fn json_space(c: &u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\n' | b'\r')
}

/// Whether `head` (the start of an input) opens a JSON array: its first
/// byte that is not JSON whitespace is `[`.
pub fn is_json_array(head: &[u8]) -> bool {
    head.iter().find(|c| !json_space(c)) == Some(&b'[')
}

/// Whether the input's first byte that is not whitespace opens a JSON array
/// (looked at without consuming anything; only the bytes already buffered
/// are looked at, 1 MiB for a file).
pub fn starts_json_array<R: BufRead + ?Sized>(rdr: &mut R) -> std::io::Result<bool> {
    Ok(is_json_array(rdr.fill_buf()?))
}

/// Whether the input's first byte that is not whitespace opens a JSON array
/// or object (a JSON file whatever its name).
pub fn starts_json<R: BufRead + ?Sized>(rdr: &mut R) -> std::io::Result<bool> {
    let head = rdr.fill_buf()?;
    Ok(matches!(
        head.iter().find(|c| !json_space(c)),
        Some(b'[' | b'{')
    ))
}

/// Reads the next element of a JSON array into `buf` (cleared first):
/// `Ok(true)` with the element, `Ok(false)` after the closing bracket (and
/// only whitespace after it). The element's bytes are copied as written
/// (whitespace and line breaks inside it included) for the NDJSON
/// converter to parse; a malformed element is its concern (a rejected
/// record). Only the array's own structure is checked here: a missing
/// comma, text after the closing bracket or an input that ends inside the
/// array are errors naming their line.
fn next_array_element<R: BufRead + ?Sized>(
    rdr: &mut R,
    buf: &mut Vec<u8>,
    line: &mut u64,
    offset: &mut u64,
    state: &mut JsonArray,
    display: &str,
) -> Result<Option<u64>, Error> {
    let JsonArray::Open {
        elements,
        opened,
        cr,
    } = state
    else {
        return Ok(None);
    };
    buf.clear();
    let Some(first) = element_start(rdr, line, offset, cr, *elements, *opened, display)? else {
        *state = JsonArray::Closed;
        only_whitespace_after_array(rdr, line, display)?;
        return Ok(None);
    };
    buf.push(first);
    let start_line = *line;
    if matches!(first, b'{' | b'[' | b'"') {
        let at = ElementAt {
            start_line,
            number: *elements + 1,
        };
        bracketed_element(rdr, buf, line, offset, cr, at, display)?;
    } else {
        bare_element(rdr, buf, line, offset, display)?;
    }
    *elements += 1;
    Ok(Some(start_line))
}

/// An I/O error reading `display` at `line`.
fn read_error(display: &str, line: u64, e: std::io::Error) -> Error {
    Error::io(format!("{display}:{line}: reading"), e)
}

/// Skips whitespace, then a comma (after an element: `elements > 0`), and
/// returns the element's first byte; `None` at the closing bracket. A
/// missing or doubled comma, or the end of the input, is an error.
fn element_start<R: BufRead + ?Sized>(
    rdr: &mut R,
    line: &mut u64,
    offset: &mut u64,
    cr: &mut bool,
    elements: u64,
    opened: u64,
    display: &str,
) -> Result<Option<u8>, Error> {
    let mut want_comma = elements > 0;
    loop {
        let avail = rdr.fill_buf().map_err(|e| read_error(display, *line, e))?;
        if avail.is_empty() {
            return Err(Error::at(
                display,
                *line,
                format!(
                    "the JSON array opened on line {opened} is never closed: the \
                 input ends after {elements} elements (is the file cut short?)"
                ),
            ));
        }
        let c = avail[0];
        rdr.consume(1);
        *offset += 1;
        match c {
            b'\n' => {
                if !*cr {
                    *line += 1;
                }
                *cr = false;
                continue;
            }
            b'\r' => {
                *line += 1;
                *cr = true;
                continue;
            }
            b' ' | b'\t' => {
                *cr = false;
                continue;
            }
            _ => *cr = false,
        }
        match c {
            b']' => return Ok(None),
            b',' if want_comma => want_comma = false,
            _ if want_comma => {
                return Err(Error::at(
                    display,
                    *line,
                    format!(
                        "expected a comma or ']' after element {elements} of the \
                     JSON array, found {:?}",
                        c as char
                    ),
                ))
            }
            b',' => {
                return Err(Error::at(
                    display,
                    *line,
                    format!(
                        "an empty element (two commas, or a comma first) in the \
                     JSON array after element {elements}"
                    ),
                ))
            }
            _ => return Ok(Some(c)),
        }
    }
}

/// After the closing bracket of the array, only whitespace may follow.
fn only_whitespace_after_array<R: BufRead + ?Sized>(
    rdr: &mut R,
    line: &mut u64,
    display: &str,
) -> Result<(), Error> {
    loop {
        let avail = rdr.fill_buf().map_err(|e| read_error(display, *line, e))?;
        if avail.is_empty() {
            return Ok(());
        }
        let n = avail.len();
        if let Some(i) = avail.iter().position(|c| !c.is_ascii_whitespace()) {
            let at = *line + line_breaks(&avail[..i]);
            return Err(Error::at(
                display,
                at,
                "text after the closing bracket of the JSON array \
                 (a JSON file holds one array of objects; NDJSON holds one object \
                 per line)",
            ));
        }
        *line += line_breaks(avail);
        rdr.consume(n);
    }
}

/// A bare number or word (its first byte in `buf`): its end is the next
/// comma, bracket or whitespace.
fn bare_element<R: BufRead + ?Sized>(
    rdr: &mut R,
    buf: &mut Vec<u8>,
    line: &mut u64,
    offset: &mut u64,
    display: &str,
) -> Result<(), Error> {
    loop {
        let avail = rdr.fill_buf().map_err(|e| read_error(display, *line, e))?;
        let end = avail
            .iter()
            .position(|c| matches!(c, b',' | b']' | b' ' | b'\t' | b'\n' | b'\r'));
        // Up to the delimiter, or all that is buffered (none at the end).
        let take = end.unwrap_or(avail.len());
        buf.extend_from_slice(&avail[..take]);
        rdr.consume(take);
        *offset += take as u64;
        if end.is_some() || take == 0 {
            return Ok(());
        }
    }
}

/// Where an element begins, for the error of one never closed.
#[derive(Clone, Copy)]
struct ElementAt {
    start_line: u64,
    /// Its number in the array, from 1.
    number: u64,
}

/// An object, array or string element (its first byte in `buf`): up to the
/// end of its outermost brackets, or its closing quote.
fn bracketed_element<R: BufRead + ?Sized>(
    rdr: &mut R,
    buf: &mut Vec<u8>,
    line: &mut u64,
    offset: &mut u64,
    cr: &mut bool,
    at: ElementAt,
    display: &str,
) -> Result<(), Error> {
    let mut depth: u32 = matches!(buf[0], b'{' | b'[') as u32;
    let mut in_string = buf[0] == b'"';
    let mut escaped = false;
    loop {
        let avail = rdr.fill_buf().map_err(|e| read_error(display, *line, e))?;
        if avail.is_empty() {
            let ElementAt { start_line, number } = at;
            return Err(Error::at(
                display,
                start_line,
                format!(
                    "element {number} of the JSON array, begun on line \
                 {start_line}, is never closed: the input ends inside it (is the file cut \
                 short?)"
                ),
            ));
        }
        let mut used = avail.len();
        let mut done = false;
        for (i, &c) in avail.iter().enumerate() {
            if depth == 0 && !in_string {
                // A string element ended at its closing quote.
                used = i;
                done = true;
                break;
            }
            if in_string {
                if escaped {
                    escaped = false;
                } else if c == b'\\' {
                    escaped = true;
                } else if c == b'"' {
                    in_string = false;
                }
                continue;
            }
            match c {
                b'"' => in_string = true,
                b'{' | b'[' => depth += 1,
                b'}' | b']' => {
                    depth -= 1;
                    if depth == 0 {
                        used = i + 1;
                        done = true;
                        break;
                    }
                }
                _ => {}
            }
        }
        let chunk = &avail[..used];
        // A CRLF split between two reads is one line break.
        *line += line_breaks(chunk) - (*cr && chunk.first() == Some(&b'\n')) as u64;
        *cr = chunk.last() == Some(&b'\r');
        buf.extend_from_slice(chunk);
        rdr.consume(used);
        *offset += used as u64;
        if done {
            return Ok(());
        }
    }
}

/// The next CSV/TSV record of `rdr` (see [`Records::next_record`]).
fn next_csv<'a>(
    rdr: &mut csv::Reader<Lines>,
    rec: &'a mut csv::ByteRecord,
    next_line: &mut u64,
    blank: &mut u64,
    display: &str,
) -> Result<Option<RawRef<'a>>, Error> {
    let more = rdr.read_byte_record(rec).map_err(|e| {
        // An I/O error (invalid UTF-16, a broken gzip stream) has
        // no record position: name the line being read.
        let at = e.position().map_or(rdr.position().byte(), |p| p.byte());
        let line = rdr.get_ref().line_at(at);
        let msg = e.to_string();
        match e.into_kind() {
            csv::ErrorKind::Io(io) => Error::io(format!("{display}:{line}: reading"), io),
            _ => Error::at(display, line, format!("reading: {msg}")),
        }
    })?;
    if !more {
        // Only reached when the sentinel was swallowed (below).
        return Ok(None);
    }
    // A record's end is exact (its start may include the blank
    // lines before it): its line is the one after its end, less
    // the line breaks inside its fields and its own.
    let end = rdr.position().byte();
    let lines = rdr.get_ref();
    let claimed = lines.claimed.get();
    let after = lines.line_at(end);
    // Line breaks up to its end: its own, and only when there are
    // more (blank lines before it, or breaks inside its quoted
    // fields) is the record scanned for the ones inside it.
    let popped = lines.claimed.get() - claimed;
    if let Some(total) = lines.total {
        let tail_end = total + 2 + SENTINEL.len() as u64;
        if end == tail_end && rec.len() == 1 && &rec[0] == SENTINEL {
            // Blank lines between the last record and the end
            // are counted too: only the input's own line breaks
            // (and the one that ends an unterminated last line)
            // were counted, so `after` is its line count + 1.
            if after > *next_line {
                *blank += after - *next_line;
            }
            *next_line = after;
            return Ok(None);
        }
        if end > total + 1 {
            let last = &rec[rec.len() - 1];
            let real = &last[..last.len().saturating_sub(SENTINEL.len() + 2)];
            // Every line break after the field's start is in it.
            let opened = after
                .saturating_sub(line_breaks(real) + lines.tail_break as u64)
                .max(1);
            return Err(Error::at(
                display,
                opened,
                format!(
                    "a quoted field opened on line {opened} is never \
                 closed: the quote is still open at the end of the input; close it, \
                 or double it (\"\") if it is data"
                ),
            ));
        }
    }
    let inside = if popped > 1 {
        line_breaks(rec.as_slice())
    } else {
        0
    };
    let line = after.saturating_sub(1 + inside).max(1);
    if line > *next_line {
        *blank += line - *next_line;
    }
    *next_line = line + 1 + inside;
    Ok(Some(RawRef::Csv(rec, Place { line, end })))
}

/// The next NDJSON line, or JSON array element, of `rdr` (see
/// [`Records::next_record`]); `line` and `offset` count what was read.
fn next_json<'a>(
    rdr: &mut Box<dyn BufRead + Send>,
    buf: &'a mut Vec<u8>,
    line: &mut u64,
    offset: &mut u64,
    blank: &mut u64,
    array: &mut JsonArray,
    display: &str,
) -> Result<Option<RawRef<'a>>, Error> {
    loop {
        if *array == JsonArray::Unknown {
            let is_array = starts_json_array(rdr.as_mut())
                .map_err(|e| Error::io(format!("{display}:1: reading"), e))?;
            *array = JsonArray::Lines;
            if is_array {
                // Up to and including the '['.
                let head = rdr
                    .fill_buf()
                    .map_err(|e| Error::io(format!("{display}:1: reading"), e))?;
                let i = head.iter().position(|&c| c == b'[').unwrap_or(0);
                let opened = 1 + line_breaks(&head[..i]);
                rdr.consume(i + 1);
                *offset += i as u64 + 1;
                *line = opened;
                *array = JsonArray::Open {
                    elements: 0,
                    opened,
                    cr: false,
                };
            }
        }
        if matches!(array, JsonArray::Open { .. } | JsonArray::Closed) {
            let at = next_array_element(rdr.as_mut(), buf, line, offset, array, display)?;
            return Ok(at.map(|start| {
                RawRef::Json(
                    buf,
                    Place {
                        line: start,
                        end: *offset,
                    },
                )
            }));
        }
        buf.clear();
        let n = read_line_any(rdr.as_mut(), buf)
            .map_err(|e| Error::io(format!("{display}:{}: reading", *line + 1), e))?;
        if n == 0 {
            return Ok(None);
        }
        *line += 1;
        *offset += n as u64;
        while matches!(buf.last(), Some(b'\n' | b'\r')) {
            buf.pop();
        }
        if buf.iter().all(|c| c.is_ascii_whitespace()) {
            *blank += 1;
            continue;
        }
        return Ok(Some(RawRef::Json(
            buf,
            Place {
                line: *line,
                end: *offset,
            },
        )));
    }
}

impl Records {
    /// Reads `input` as `format`.
    pub fn new(format: Format, input: Box<dyn BufRead + Send>) -> Records {
        let delimiter = if format == Format::Tsv { b'\t' } else { b',' };
        let quote = (format == Format::Csv).then_some(b'"');
        Records::with_dialect(format, input, delimiter, quote)
    }

    /// Reads `input` as `format`, CSV/TSV fields split on `delimiter` and
    /// quoted with `quote` (`None`: no quoting).
    pub fn with_dialect(
        format: Format,
        input: Box<dyn BufRead + Send>,
        delimiter: u8,
        quote: Option<u8>,
    ) -> Records {
        match format {
            Format::Csv | Format::Tsv => {
                let rdr = csv_reader(delimiter, quote)
                    .buffer_capacity(1 << 16)
                    .from_reader(Lines::new(input));
                Records::Csv {
                    rdr,
                    rec: csv::ByteRecord::new(),
                    next_line: 1,
                    blank: 0,
                }
            }
            Format::Ndjson => Records::Ndjson {
                rdr: input,
                buf: Vec::with_capacity(4096),
                line: 0,
                offset: 0,
                blank: 0,
                array: JsonArray::Unknown,
            },
        }
    }

    /// Blank lines skipped so far (not records: nothing is lost).
    pub fn blank_lines(&self) -> u64 {
        match self {
            Records::Csv { blank, .. } | Records::Ndjson { blank, .. } => *blank,
        }
    }

    /// The next record, or `None` at the end of the input. Blank lines are
    /// skipped and counted ([`blank_lines`](Records::blank_lines)). A quote
    /// still open at the end of the input is an error naming the line where
    /// it opened.
    pub fn next_record(&mut self, display: &str) -> Result<Option<RawRef<'_>>, Error> {
        match self {
            Records::Csv {
                rdr,
                rec,
                next_line,
                blank,
            } => next_csv(rdr, rec, next_line, blank, display),
            Records::Ndjson {
                rdr,
                buf,
                line,
                offset,
                blank,
                array,
            } => next_json(rdr, buf, line, offset, blank, array, display),
        }
    }
}

impl Records {
    /// The next record, owned: [`next_record`](Records::next_record)'s,
    /// moved out of the reader rather than copied (a huge record is held
    /// once, not twice, while it waits in the inference sample).
    pub fn next_owned(&mut self, display: &str) -> Result<Option<RawOwned>, Error> {
        let place = match self.next_record(display)? {
            None => return Ok(None),
            Some(RawRef::Csv(_, at) | RawRef::Json(_, at)) => at,
        };
        // Copies, not `take`s: the reader's buffers keep their capacity, so
        // the next record is not grown from empty again.
        Ok(Some(match self {
            Records::Csv { rec, .. } => RawOwned::Csv(rec.clone(), place),
            Records::Ndjson { buf, .. } => RawOwned::Json(buf.clone(), place),
        }))
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
                RawRef::Csv(rec, at) => out.push((
                    rec.iter()
                        .map(|f| String::from_utf8_lossy(f).into_owned())
                        .collect(),
                    at.line,
                )),
                RawRef::Json(b, at) => {
                    out.push((vec![String::from_utf8_lossy(b).into_owned()], at.line))
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
        // Lone-CR NDJSON: each CR ends a line.
        let got = read_all(Format::Ndjson, b"{\"a\":1}\r{\"a\":\"x\\ry\"}\r\r{\"a\":3}");
        assert_eq!(got.len(), 3);
        assert_eq!(got[1], (vec!["{\"a\":\"x\\ry\"}".into()], 2));
        assert_eq!(got[2].1, 4);
    }

    #[test]
    fn lone_cr_lines_and_crs_in_quotes() {
        let got = read_all(Format::Csv, b"a,b\r1,\"x\r\"\r\"\r\",2\r\r3,y");
        assert_eq!(got.len(), 4);
        assert_eq!(got[1], (vec!["1".into(), "x\r".into()], 2));
        // Physical lines: a CR inside quotes still ends a line of the file.
        assert_eq!(got[2], (vec!["\r".into(), "2".into()], 4));
        assert_eq!(got[3], (vec!["3".into(), "y".into()], 7));
    }

    #[test]
    fn an_open_quote_is_an_error_naming_its_line() {
        for (data, line) in [
            (&b"a\n\"x"[..], 2),
            (&b"a\n\"x\n\n\ny\n"[..], 2),
            (&b"a,b\r\n1,\"p\r\nq\"\r\n2,\"r"[..], 4),
            (&b"\""[..], 1),
        ] {
            let mut r = Records::new(Format::Csv, Box::new(std::io::Cursor::new(data)));
            let err = loop {
                match r.next_record("t") {
                    Ok(Some(_)) => continue,
                    Ok(None) => panic!("{:?}: no error", String::from_utf8_lossy(data)),
                    Err(e) => break e.to_string(),
                }
            };
            assert!(
                err.contains(&format!("t:{line}: a quoted field opened on line {line}")),
                "{:?}: {err}",
                String::from_utf8_lossy(data)
            );
        }
    }
}
