//! Taking the samples: the head and further regions of the input, the
//! sniffer's options from the flags, and a plan read back from a file
//! instead of sniffed.

use std::io::{BufRead, Read, Seek, SeekFrom};
use std::path::PathBuf;

use crate::error::Error;
use crate::read::source::{self, Format};

use super::dialect::records;
use super::{sniff, Options, Rec, Region, SniffPlan, HEAD_BYTES, REGION_BYTES};

/// The records of the further regions, and the places sampled (`start`
/// and each region that held a record).
pub(super) fn region_records(
    regions: &[Region],
    delimiter: u8,
    quote: Option<u8>,
) -> (Vec<Rec>, Vec<String>) {
    let mut recs = Vec::new();
    let mut places = vec!["start".to_string()];
    for r in regions {
        let rr = records(&r.bytes, delimiter, quote, r.complete, usize::MAX);
        if !rr.is_empty() {
            places.push(r.place.clone());
        }
        recs.extend(rr);
    }
    (recs, places)
}

/// A reader that fails with the error met while sniffing.
pub(super) struct Failed(Option<std::io::Error>);

impl Read for Failed {
    fn read(&mut self, _: &mut [u8]) -> std::io::Result<usize> {
        match self.0.take() {
            Some(e) => Err(e),
            None => Err(std::io::Error::other("the input could not be read")),
        }
    }
}

impl BufRead for Failed {
    fn fill_buf(&mut self) -> std::io::Result<&[u8]> {
        match self.0.take() {
            Some(e) => Err(e),
            None => Err(std::io::Error::other("the input could not be read")),
        }
    }
    fn consume(&mut self, _: usize) {}
}

/// Samples the middle and the end of a plain (uncompressed, UTF-8) file
/// longer than `head_len` bytes, each aligned to the line start after the
/// sampled offset. Nothing for stdin, compressed or UTF-16 input.
pub fn read_regions(path: &str, head_len: usize) -> Vec<Region> {
    if path == "-" {
        return Vec::new();
    }
    let Ok(mut f) = std::fs::File::open(path) else {
        return Vec::new();
    };
    let Ok(size) = f.metadata().map(|m| m.len()) else {
        return Vec::new();
    };
    let mut magic = [0u8; 4];
    if f.read_exact(&mut magic).is_err()
        || magic.starts_with(&[0x1f, 0x8b])
        || magic == [0x28, 0xb5, 0x2f, 0xfd]
        || magic.starts_with(&[0xff, 0xfe])
        || magic.starts_with(&[0xfe, 0xff])
    {
        return Vec::new();
    }
    let head_len = head_len as u64;
    let mut out = Vec::new();
    let end_at = size.saturating_sub(REGION_BYTES as u64);
    for (place, at) in [("middle", size / 2), ("end", end_at)] {
        if at <= head_len
            || out
                .iter()
                .any(|r: &(String, u64)| r.1 + REGION_BYTES as u64 > at)
        {
            continue;
        }
        out.push((place.to_string(), at));
    }
    out.into_iter()
        .filter_map(|(place, at)| {
            f.seek(SeekFrom::Start(at)).ok()?;
            let mut buf = Vec::new();
            (&mut f)
                .take(REGION_BYTES as u64)
                .read_to_end(&mut buf)
                .ok()?;
            let complete = at + buf.len() as u64 >= size;
            // Align to a record start: after the first line break.
            let nl = memchr::memchr2(b'\n', b'\r', &buf)?;
            let mut s = nl + 1;
            if buf[nl] == b'\r' && buf.get(s) == Some(&b'\n') {
                s += 1;
            }
            Some(Region {
                place,
                bytes: buf[s..].to_vec(),
                complete,
            })
        })
        .collect()
}

/// The null tokens `--null` flags give: none (the defaults apply: the empty
/// field, and the sniffer's per-column tokens) when no flag is given; else
/// the empty field (unless `no_defaults`, `--no-default-nulls`) followed by
/// each flag's token, once each. Giving the result again returns it as it
/// is.
pub fn null_tokens(flags: &[String], no_defaults: bool) -> Vec<String> {
    if flags.is_empty() {
        return Vec::new();
    }
    let mut tokens = if no_defaults {
        Vec::new()
    } else {
        vec![String::new()]
    };
    for f in flags {
        if !tokens.contains(f) {
            tokens.push(f.clone());
        }
    }
    tokens
}

/// The sniffer's options from flags shared by `sniff` and `import`.
pub fn options(
    format: Format,
    delimiter: Option<char>,
    header: bool,
    no_header: bool,
    nulls: &[String],
    types_text: bool,
) -> Result<Options, Error> {
    let delimiter = match delimiter {
        None => None,
        Some(c) if c.is_ascii() && !matches!(c, '\n' | '\r' | '"') => Some(c as u8),
        Some(c) => {
            return Err(Error::Input(format!(
                "--delimiter {c:?}: give one ASCII character other than a line break or '\"'"
            )))
        }
    };
    Ok(Options {
        format,
        delimiter,
        header: if header {
            Some(true)
        } else if no_header {
            Some(false)
        } else {
            None
        },
        nulls: (!nulls.is_empty()).then(|| nulls.to_vec()),
        types_text,
    })
}

/// Opens `path` and sniffs it: the plan, and the input ready to be read
/// from its first byte (the head sampled is put back in front).
pub fn sniff_input(
    input: &mut source::Input,
    path: &str,
    opts: &Options,
) -> Result<SniffPlan, Error> {
    let mut head = Vec::new();
    // A read error (invalid UTF-16, a broken compressed stream) is not
    // reported here: the head read so far is sniffed, and the import meets
    // the error where it is, with its line.
    let (complete, failed) = match (&mut input.reader)
        .take(HEAD_BYTES as u64)
        .read_to_end(&mut head)
    {
        Ok(_) => match input.reader.fill_buf() {
            Ok(rest) => (head.len() < HEAD_BYTES || rest.is_empty(), None),
            Err(e) => (false, Some(e)),
        },
        Err(e) => (false, Some(e)),
    };
    if head.is_empty() && failed.is_none() {
        return Err(Error::Input(format!(
            "{} is empty: there is no header line to name the columns",
            input.display
        )));
    }
    let fail_msg = failed.as_ref().map(|e| e.to_string());
    let regions = read_regions(path, head.len());
    let plan = sniff(&head, complete, &regions, opts)
        .map_err(|e| Error::Input(format!("{}: {e}", input.display)));
    let rest = std::mem::replace(&mut input.reader, Box::new(std::io::empty()));
    input.reader = match failed {
        None => Box::new(std::io::Cursor::new(head).chain(rest)),
        Some(e) => Box::new(std::io::Cursor::new(head).chain(Failed(Some(e)))),
    };
    match (plan, fail_msg) {
        (Err(_), Some(m)) => Err(Error::Input(format!("reading {}: {m}", input.display))),
        (p, _) => p,
    }
}

/// Reads a plan written by `litelane sniff --json`.
pub fn load_plan(path: &PathBuf) -> Result<SniffPlan, Error> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| Error::io(format!("reading the plan {}", path.display()), e))?;
    let plan: SniffPlan = serde_json::from_str(&text).map_err(|e| {
        Error::Input(format!(
            "the plan {} is not a valid plan: {e}",
            path.display()
        ))
    })?;
    plan.validate()
        .map_err(|e| Error::Input(format!("the plan {}: {e}", path.display())))?;
    Ok(plan)
}

/// The plan of a fresh CSV/TSV import: read from `--plan FILE`, or sniffed
/// from `input` (which is then ready to be read from its first byte).
/// `None` for NDJSON.
#[allow(clippy::too_many_arguments)]
pub fn plan_for_import(
    plan_file: Option<&PathBuf>,
    format: Format,
    delimiter: Option<char>,
    header: bool,
    no_header: bool,
    nulls: &[String],
    types_text: bool,
    input: &mut source::Input,
    path: &str,
) -> Result<Option<SniffPlan>, Error> {
    if let Some(p) = plan_file {
        let plan = load_plan(p)?;
        if no_header && plan.header {
            return Err(Error::Input(format!(
                "--no-header contradicts the plan {} (\"header\": true)",
                p.display()
            )));
        }
        return Ok(Some(plan));
    }
    if format == Format::Ndjson {
        return Ok(None);
    }
    let opts = options(format, delimiter, header, no_header, nulls, types_text)?;
    sniff_input(input, path, &opts).map(Some)
}
