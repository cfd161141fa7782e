//! Where rejected records go: `--rejects FILE` (one JSON object per line:
//! `{"line", "record", "reason", "raw"}`, plus `"raw_base64"` when the record
//! is not valid UTF-8), or, without it, nowhere but the caller's
//! [`Progress::rejected`](crate::Progress::rejected) (the command prints the
//! first 20 on stderr) and the count in the summary.

use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use crate::error::Error;

/// The rejects sink.
pub struct Rejects {
    /// The rejects file, if any.
    path: Option<PathBuf>,
    /// It, open, once [`start`](Rejects::start) was called.
    writer: Option<BufWriter<File>>,
    bytes: u64,
    count: u64,
    input: String,
    /// Each JSON object also names the input (`"source"`): set in a run
    /// over several files, which share one rejects file.
    source: bool,
}

impl Rejects {
    /// No file: rejects are only counted (and told to the caller).
    pub fn stderr(input: &str) -> Rejects {
        Rejects {
            path: None,
            writer: None,
            bytes: 0,
            count: 0,
            input: input.to_string(),
            source: false,
        }
    }

    /// Writes rejects to `path`, keeping its first `keep` bytes (0 for a
    /// new import; the length recorded at the last commit for `--resume`).
    /// Nothing is created or cut until [`start`](Rejects::start), called
    /// once the import is known to begin.
    pub fn file(path: &Path, keep: u64, input: &str) -> Result<Rejects, Error> {
        let len = match std::fs::metadata(path) {
            Ok(m) => m.len(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => 0,
            Err(e) => {
                return Err(Error::io(
                    format!("examining the rejects file {}", path.display()),
                    e,
                ))
            }
        };
        if len < keep {
            return Err(Error::Input(format!(
                "the rejects file {} has {len} bytes, but the import to resume had written {keep}; \
                 it was changed since",
                path.display()
            )));
        }
        Ok(Rejects {
            path: Some(path.to_path_buf()),
            writer: None,
            bytes: keep,
            count: 0,
            input: input.to_string(),
            source: false,
        })
    }

    /// Opens the file (created if missing), cuts it to the length kept and
    /// writes from there: called when the rows begin to flow, after every
    /// check passed.
    pub fn start(&mut self) -> Result<(), Error> {
        let Some(path) = &self.path else {
            return Ok(());
        };
        let ctx = || format!("opening the rejects file {}", path.display());
        let mut f = OpenOptions::new()
            .create(true)
            .write(true)
            .truncate(false)
            .open(path)
            .map_err(|e| Error::io(ctx(), e))?;
        if f.metadata().map_err(|e| Error::io(ctx(), e))?.is_file() {
            f.set_len(self.bytes).map_err(|e| Error::io(ctx(), e))?;
            f.seek(SeekFrom::Start(self.bytes))
                .map_err(|e| Error::io(ctx(), e))?;
        }
        self.writer = Some(BufWriter::with_capacity(64 << 10, f));
        Ok(())
    }

    /// Names the input in each JSON object (`"source"`).
    pub fn name_source(&mut self) {
        self.source = true;
    }

    /// The rejects file, if any.
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// Bytes written to the file (including those kept from a resumed run).
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// The input's name, as messages give it.
    pub fn input(&self) -> &str {
        &self.input
    }

    /// Records one rejected record; returns how many this run recorded,
    /// this one included.
    pub fn write(
        &mut self,
        line: u64,
        record: u64,
        reason: &str,
        raw: &[u8],
    ) -> Result<u64, Error> {
        self.count += 1;
        match (&mut self.writer, &self.path) {
            (Some(w), Some(path)) => {
                let mut obj = serde_json::Map::new();
                obj.insert("line".into(), line.into());
                obj.insert("record".into(), record.into());
                obj.insert("reason".into(), reason.into());
                obj.insert("raw".into(), String::from_utf8_lossy(raw).into());
                if self.source {
                    obj.insert("source".into(), self.input.clone().into());
                }
                if std::str::from_utf8(raw).is_err() {
                    obj.insert("raw_base64".into(), base64(raw).into());
                }
                let mut text = serde_json::Value::Object(obj).to_string();
                text.push('\n');
                w.write_all(text.as_bytes()).map_err(|e| {
                    Error::io(format!("writing the rejects file {}", path.display()), e)
                })?;
                self.bytes += text.len() as u64;
            }
            (None, Some(path)) => {
                return Err(Error::Input(format!(
                    "internal error: the rejects file {} was written before it was opened",
                    path.display()
                )))
            }
            (_, None) => {}
        }
        Ok(self.count)
    }

    /// Pushes what was written to the operating system (done before every
    /// commit, so that the length recorded with the commit is on file).
    pub fn flush(&mut self) -> Result<(), Error> {
        if let (Some(w), Some(path)) = (&mut self.writer, &self.path) {
            w.flush().map_err(|e| {
                Error::io(format!("writing the rejects file {}", path.display()), e)
            })?;
        }
        Ok(())
    }
}

/// Standard base64 with padding.
fn base64(data: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
    for chunk in data.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (b[0] as u32) << 16 | (b[1] as u32) << 8 | b[2] as u32;
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_matches_the_rfc_examples() {
        assert_eq!(base64(b""), "");
        assert_eq!(base64(b"f"), "Zg==");
        assert_eq!(base64(b"fo"), "Zm8=");
        assert_eq!(base64(b"foo"), "Zm9v");
        assert_eq!(base64(b"foobar"), "Zm9vYmFy");
    }

    #[test]
    fn rejects_file_is_truncated_to_the_kept_length_on_resume() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("r.ndjson");
        let old = b"old content that must go once the import starts";
        std::fs::write(&p, old).unwrap();
        let mut r = Rejects::file(&p, 0, "in.csv").unwrap();
        assert_eq!(
            std::fs::read(&p).unwrap(),
            old,
            "nothing is cut before start"
        );
        let fresh = dir.path().join("new.ndjson");
        let mut n = Rejects::file(&fresh, 0, "in.csv").unwrap();
        assert!(!fresh.exists(), "nothing is created before start");
        n.start().unwrap();
        assert!(fresh.exists());
        r.start().unwrap();
        r.write(2, 1, "bad", b"a,\xff").unwrap();
        r.flush().unwrap();
        let keep = r.bytes();
        r.write(3, 2, "worse", b"b").unwrap();
        r.flush().unwrap();
        drop(r);
        let mut r = Rejects::file(&p, keep, "in.csv").unwrap();
        r.start().unwrap();
        r.write(4, 3, "again", b"c").unwrap();
        r.flush().unwrap();
        let text = std::fs::read_to_string(&p).unwrap();
        let lines: Vec<serde_json::Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0]["line"], 2);
        assert_eq!(lines[0]["raw_base64"], base64(b"a,\xff"));
        assert_eq!(lines[1]["reason"], "again");
    }
}
