//! Opening the input: a file, `-` for stdin, gzip read transparently, the
//! format from the extension, and a fingerprint to recognise the file again.

use std::fs::File;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::error::Error;

/// An input format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    /// Comma-separated values (RFC 4180 quoting).
    Csv,
    /// Tab-separated values (no quoting: `"` is an ordinary character).
    Tsv,
    /// One JSON object per line.
    Ndjson,
}

impl Format {
    /// The format named by a file name's extension (after any `.gz`), or
    /// `None` for an unknown one.
    pub fn from_name(name: &str) -> Option<Format> {
        let name = name.to_ascii_lowercase();
        let name = name
            .strip_suffix(".gz")
            .or_else(|| name.strip_suffix(".zst"))
            .unwrap_or(&name);
        let ext = Path::new(name).extension()?.to_str()?;
        match ext {
            "csv" => Some(Format::Csv),
            "tsv" | "tab" => Some(Format::Tsv),
            "ndjson" | "jsonl" | "json" => Some(Format::Ndjson),
            _ => None,
        }
    }
}

/// The default table name for a source: its file name without `.gz` and
/// without its extension (`trips.csv.gz` → `trips`).
pub fn table_stem(source: &str) -> Option<String> {
    let file = Path::new(source).file_name()?.to_str()?;
    let file = file
        .strip_suffix(".gz")
        .or_else(|| file.strip_suffix(".GZ"))
        .or_else(|| file.strip_suffix(".zst"))
        .or_else(|| file.strip_suffix(".ZST"))
        .unwrap_or(file);
    let stem = Path::new(file).file_stem()?.to_str()?;
    (!stem.is_empty()).then(|| stem.to_string())
}

/// Counts the bytes read through it (compressed bytes for a `.gz` file), for
/// the progress bar.
struct Counting<R> {
    inner: R,
    count: Arc<AtomicU64>,
}

impl<R: Read> Read for Counting<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.count.fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }
}

/// An opened input.
pub struct Input {
    /// Decoded bytes (gzip undone, a UTF-8 byte-order mark skipped).
    pub reader: Box<dyn BufRead + Send>,
    /// Size of the file on disk, when it is a regular file.
    pub size: Option<u64>,
    /// Bytes of the file read so far.
    pub bytes_read: Arc<AtomicU64>,
    /// Identifies the file's content (size and hashes of its start and end);
    /// `None` for stdin or a pipe.
    pub fingerprint: Option<String>,
    /// How to name the input in messages.
    pub display: String,
    /// The file's device and inode (`None` for stdin), to refuse writing
    /// over it.
    pub id: Option<(u64, u64)>,
}

const READ_BUFFER: usize = 1 << 20;

/// Opens `source` (`-` = stdin).
pub fn open(source: &str) -> Result<Input, Error> {
    let count = Arc::new(AtomicU64::new(0));
    let mut id = None;
    let (raw, size, fingerprint, display): (Box<dyn Read + Send>, _, _, _) = if source == "-" {
        (
            Box::new(std::io::stdin()),
            None,
            None,
            "<stdin>".to_string(),
        )
    } else {
        let file = File::open(source).map_err(|e| Error::io(format!("opening {source}"), e))?;
        let meta = file
            .metadata()
            .map_err(|e| Error::io(format!("reading the metadata of {source}"), e))?;
        if meta.is_dir() {
            return Err(Error::Input(format!("{source} is a directory, not a file")));
        }
        id = meta_id(&meta);
        let (size, fp) = if meta.is_file() {
            let fp = fingerprint(&file, meta.len())
                .map_err(|e| Error::io(format!("reading {source}"), e))?;
            (Some(meta.len()), Some(fp))
        } else {
            (None, None)
        };
        (Box::new(file), size, fp, source.to_string())
    };
    let counted = Counting {
        inner: raw,
        count: Arc::clone(&count),
    };
    let buffered = BufReader::with_capacity(READ_BUFFER, counted);
    let reader = decode(Box::new(buffered), &display)?;
    Ok(Input {
        reader,
        size,
        bytes_read: count,
        fingerprint,
        display,
        id,
    })
}

/// The decoded text of `buffered` (the file's bytes as read): gzip or zstd
/// undone, a UTF-8 byte-order mark skipped, UTF-16 with a byte-order mark
/// decoded to UTF-8; nested or other compression and UTF-32 refused naming
/// `display`. Errors inside the stream (a broken gzip stream, an unpaired
/// surrogate) surface when the returned reader is read.
pub fn decode(
    mut buffered: Box<dyn BufRead + Send>,
    display: &str,
) -> Result<Box<dyn BufRead + Send>, Error> {
    let head = buffered
        .fill_buf()
        .map_err(|e| Error::io(format!("reading {display}"), e))?;
    let gzip = head.starts_with(&[0x1f, 0x8b]);
    let zstd = head.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]);
    let mut reader: Box<dyn BufRead + Send> = if gzip {
        Box::new(BufReader::with_capacity(
            READ_BUFFER,
            flate2::bufread::MultiGzDecoder::new(buffered),
        ))
    } else if zstd {
        let dec = zstd::stream::read::Decoder::with_buffer(buffered)
            .map_err(|e| Error::io(format!("reading {display} (zstd)"), e))?;
        Box::new(BufReader::with_capacity(READ_BUFFER, dec))
    } else {
        Box::new(buffered)
    };
    let head = reader
        .fill_buf()
        .map_err(|e| Error::io(format!("reading {display}"), e))?;
    if let Some(what) = compressed(head) {
        let inside = if gzip {
            "inside its gzip layer "
        } else if zstd {
            "inside its zstd layer "
        } else {
            ""
        };
        return Err(Error::Input(format!(
            "{display} is still {what} {inside}(its first bytes are that format's \
             signature): litelane reads plain text or one layer of gzip or zstd; decompress it first"
        )));
    }
    if head.starts_with(&[0xff, 0xfe, 0, 0]) || head.starts_with(&[0, 0, 0xfe, 0xff]) {
        return Err(Error::Input(format!(
            "{display} starts with a UTF-32 byte-order mark: litelane reads UTF-8 and UTF-16; \
             convert it to UTF-8 first (e.g. iconv -f UTF-32 -t UTF-8)"
        )));
    }
    if head.starts_with(&[0xef, 0xbb, 0xbf]) {
        reader.consume(3);
    } else if head.starts_with(&[0xff, 0xfe]) || head.starts_with(&[0xfe, 0xff]) {
        let big_endian = head[0] == 0xfe;
        reader.consume(2);
        reader = Box::new(BufReader::with_capacity(
            READ_BUFFER,
            Utf16::new(reader, big_endian),
        ));
    }
    Ok(reader)
}

/// The compression format whose signature `head` starts with, if any.
fn compressed(head: &[u8]) -> Option<&'static str> {
    const SIGNATURES: [(&[u8], &str); 5] = [
        (&[0x1f, 0x8b], "gzip-compressed"),
        (&[0x28, 0xb5, 0x2f, 0xfd], "zstd-compressed"),
        (b"BZh", "bzip2-compressed"),
        (&[0xfd, b'7', b'z', b'X', b'Z', 0], "xz-compressed"),
        (b"PK\x03\x04", "a zip archive"),
    ];
    SIGNATURES
        .iter()
        // bzip2's "BZh" is followed by the block size digit 1-9.
        .find(|(sig, _)| {
            head.starts_with(sig)
                && (*sig != b"BZh" || head.get(3).is_some_and(|c| (b'1'..=b'9').contains(c)))
        })
        .map(|(_, name)| *name)
}

/// Decodes UTF-16 (after its byte-order mark) into UTF-8. An unpaired
/// surrogate is an error naming its byte offset, never a replacement
/// character.
struct Utf16 {
    inner: Box<dyn BufRead + Send>,
    big_endian: bool,
    /// Bytes of the input consumed, counting the byte-order mark.
    offset: u64,
    /// A high surrogate waiting for its low half.
    high: Option<u16>,
    /// An odd byte left over from the last read.
    odd: Option<u8>,
    /// Decoded bytes not yet returned.
    out: Vec<u8>,
    pos: usize,
    /// An invalid unit was met: returned once the bytes decoded before it
    /// are read, so that the error surfaces at its own line.
    failed: Option<std::io::Error>,
}

impl Utf16 {
    fn new(inner: Box<dyn BufRead + Send>, big_endian: bool) -> Utf16 {
        Utf16 {
            inner,
            big_endian,
            offset: 2,
            high: None,
            odd: None,
            out: Vec::new(),
            pos: 0,
            failed: None,
        }
    }

    fn bad(&self, what: &str) -> std::io::Error {
        std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!(
                "invalid UTF-16{}: {what} at byte {} of the file",
                if self.big_endian { "BE" } else { "LE" },
                self.offset
            ),
        )
    }

    fn unit(&mut self, u: u16) -> std::io::Result<()> {
        let c = match (self.high.take(), u) {
            (None, 0xd800..=0xdbff) => {
                self.high = Some(u);
                self.offset += 2;
                return Ok(());
            }
            (None, 0xdc00..=0xdfff) => {
                return Err(self.bad("a low surrogate without its high half"))
            }
            (None, u) => char::from_u32(u as u32),
            (Some(h), 0xdc00..=0xdfff) => {
                char::from_u32(0x10000 + (((h as u32) - 0xd800) << 10) + (u as u32 - 0xdc00))
            }
            (Some(_), _) => return Err(self.bad("a high surrogate without its low half")),
        };
        let c = c.ok_or_else(|| self.bad("an invalid code point"))?;
        let mut buf = [0u8; 4];
        self.out
            .extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
        self.offset += 2;
        Ok(())
    }
}

impl Utf16 {
    /// Decodes `bytes` (after any odd byte kept from before) into `out`.
    fn decode(&mut self, mut bytes: &[u8]) -> std::io::Result<()> {
        let mut pair = [0u8; 2];
        if let Some(b) = self.odd.take() {
            pair = [b, bytes[0]];
            bytes = &bytes[1..];
            self.unit(self.to_u16(pair))?;
        }
        let mut pairs = bytes.chunks_exact(2);
        for p in &mut pairs {
            pair.copy_from_slice(p);
            self.unit(self.to_u16(pair))?;
        }
        self.odd = pairs.remainder().first().copied();
        Ok(())
    }

    fn to_u16(&self, pair: [u8; 2]) -> u16 {
        if self.big_endian {
            u16::from_be_bytes(pair)
        } else {
            u16::from_le_bytes(pair)
        }
    }
}

impl Read for Utf16 {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        while self.pos == self.out.len() {
            if let Some(e) = self.failed.take() {
                return Err(e);
            }
            self.out.clear();
            self.pos = 0;
            let chunk = self.inner.fill_buf()?;
            if chunk.is_empty() {
                if self.odd.is_some() {
                    return Err(self.bad("an odd number of bytes"));
                }
                if self.high.is_some() {
                    return Err(self.bad("a high surrogate at the end of the input"));
                }
                return Ok(0);
            }
            let chunk = chunk.to_vec();
            self.inner.consume(chunk.len());
            if let Err(e) = self.decode(&chunk) {
                self.failed = Some(e);
            }
        }
        let n = buf.len().min(self.out.len() - self.pos);
        buf[..n].copy_from_slice(&self.out[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}

/// 64-bit FNV-1a.
pub fn fnv1a(mut h: u64, bytes: &[u8]) -> u64 {
    for &b in bytes {
        h ^= b as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

const FINGERPRINT_SPAN: u64 = 1 << 20;

/// `size:hash` where the hash covers the first and the last MiB of the file.
fn fingerprint(file: &File, size: u64) -> std::io::Result<String> {
    let mut f = file.try_clone()?;
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    let mut buf = vec![0u8; FINGERPRINT_SPAN as usize];
    let n = read_up_to(&mut f, &mut buf)?;
    h = fnv1a(h, &buf[..n]);
    if size > FINGERPRINT_SPAN {
        f.seek(SeekFrom::Start(size.saturating_sub(FINGERPRINT_SPAN)))?;
        let n = read_up_to(&mut f, &mut buf)?;
        h = fnv1a(h, &buf[..n]);
    }
    f.seek(SeekFrom::Start(0))?;
    Ok(format!("{size}:{h:016x}"))
}

fn read_up_to(f: &mut File, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match f.read(&mut buf[n..])? {
            0 => break,
            k => n += k,
        }
    }
    Ok(n)
}

/// The device and inode of a file, from its metadata (`None` off Unix).
pub fn meta_id(meta: &std::fs::Metadata) -> Option<(u64, u64)> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        Some((meta.dev(), meta.ino()))
    }
    #[cfg(not(unix))]
    {
        let _ = meta;
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn format_and_table_come_from_the_file_name() {
        assert_eq!(Format::from_name("a/trips.csv"), Some(Format::Csv));
        assert_eq!(Format::from_name("trips.TSV.gz"), Some(Format::Tsv));
        assert_eq!(Format::from_name("x.jsonl"), Some(Format::Ndjson));
        assert_eq!(Format::from_name("x.txt"), None);
        assert_eq!(table_stem("dir/trips.csv.gz").as_deref(), Some("trips"));
        assert_eq!(table_stem("data.2024.csv").as_deref(), Some("data.2024"));
        assert_eq!(table_stem("-").as_deref(), Some("-"));
    }

    #[test]
    fn gzip_and_bom_are_undone_and_fingerprints_differ_by_content() {
        use std::io::Write;
        let dir = tempfile::tempdir().unwrap();
        let plain = dir.path().join("a.csv");
        std::fs::write(&plain, b"\xef\xbb\xbfx,y\n1,2\n").unwrap();
        let gz = dir.path().join("a.csv.gz");
        let mut enc = flate2::write::GzEncoder::new(File::create(&gz).unwrap(), Default::default());
        enc.write_all(b"\xef\xbb\xbfx,y\n1,2\n").unwrap();
        enc.finish().unwrap();
        for p in [&plain, &gz] {
            let mut input = open(p.to_str().unwrap()).unwrap();
            let mut s = String::new();
            input.reader.read_to_string(&mut s).unwrap();
            assert_eq!(s, "x,y\n1,2\n");
        }
        let other = dir.path().join("b.csv");
        std::fs::write(&other, b"\xef\xbb\xbfx,y\n1,3\n").unwrap();
        let a = open(plain.to_str().unwrap()).unwrap().fingerprint.unwrap();
        let b = open(other.to_str().unwrap()).unwrap().fingerprint.unwrap();
        assert_ne!(a, b);
        assert_eq!(
            a,
            open(plain.to_str().unwrap()).unwrap().fingerprint.unwrap()
        );
    }
}
