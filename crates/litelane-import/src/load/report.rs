//! What an import tells its caller while it runs: rows stored so far,
//! rejected records, lines of report, and whether to stop. The library
//! prints nothing itself; the caller implements [`Progress`] (the command
//! draws a bar and writes stderr, Python calls a function, a C caller a
//! callback).

/// A rejected record, as the import met it.
#[derive(Debug, Clone, Copy)]
pub struct Rejected<'a> {
    /// The input's name as the messages give it (a path, or `<stdin>`).
    pub input: &'a str,
    /// The line (1-based) the record starts on.
    pub line: u64,
    /// The record's number (1-based, the header and skipped lines
    /// counted).
    pub record: u64,
    /// Why it was rejected.
    pub reason: &'a str,
    /// The record as read (bytes, maybe not UTF-8).
    pub raw: &'a [u8],
    /// This input's rejects so far in this run, this one included (1 for
    /// the first).
    pub nth: u64,
    /// The record is kept in the rejects file (`rejects`); when false, the
    /// caller is its only witness besides the count (and the rejects
    /// table, if any).
    pub in_file: bool,
}

/// How much a [`Note`] matters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoteLevel {
    /// The account of a finished run (what the sniffer chose, values kept
    /// as text, null tokens, the rows imported): what `litelane import`
    /// prints on stderr unless `--quiet`.
    Info,
    /// The run was stopped ([`Progress::should_stop`]): said even by a
    /// quiet command.
    Stopped,
}

/// What a [`Note`] is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoteKind {
    /// What the sniffer decided (delimiter, skipped lines, header) when it
    /// differs from a plain comma-separated file with a header. Given
    /// before the first row is stored; the command says it then only when
    /// its progress bar shows, and otherwise first among the lines of the
    /// finished run.
    Sniffed,
    /// One line of the account of a finished file.
    Finished,
    /// A resumed import had already finished: nothing was done.
    AlreadyFinished,
    /// The totals of a run over several files.
    Totals,
    /// The run stopped because [`Progress::should_stop`] said so.
    Stopped,
}

/// A line of report, in words (no `litelane:` prefix, no newline).
#[derive(Debug, Clone, Copy)]
pub struct Note<'a> {
    /// Whether a quiet caller shows it.
    pub level: NoteLevel,
    /// What it is about.
    pub kind: NoteKind,
    /// The text.
    pub text: &'a str,
}

/// The caller's side of an import: every method has a default that does
/// nothing, so an implementation overrides only what it wants. Called on
/// the thread that called [`run`](crate::run) or [`run_into`](crate::run_into).
pub trait Progress {
    /// The rows of one file start to flow; `total_bytes` is the input's
    /// size in bytes (as stored on disk: compressed for `.gz`/`.zst`), or
    /// `None` when unknown (stdin, a pipe). Called once per file.
    fn start(&mut self, total_bytes: Option<u64>) {
        let _ = total_bytes;
    }

    /// `rows` rows handed to SQLite so far in this file (committed or
    /// not), `bytes_read` bytes of the input read (the same unit as
    /// `total_bytes` of [`start`](Progress::start)). Called once per batch
    /// the parser delivers (a few thousand rows), before its rows are
    /// stored, and again with every row counted once the input ends.
    fn rows(&mut self, rows: u64, bytes_read: u64) {
        let _ = (rows, bytes_read);
    }

    /// The rows of this file stopped flowing (finished, failed or stopped).
    fn finish(&mut self) {}

    /// One rejected record.
    fn rejected(&mut self, rejected: &Rejected<'_>) {
        let _ = rejected;
    }

    /// A line of report.
    fn note(&mut self, note: &Note<'_>) {
        let _ = note;
    }

    /// True to stop the import at the next record: the transaction under
    /// way rolls back, what is committed stays, and the import returns
    /// [`EXIT_INTERRUPTED`](crate::EXIT_INTERRUPTED). Asked before every
    /// record and every 100 ms while waiting for the parser, so it must be
    /// cheap (read a flag).
    fn should_stop(&self) -> bool {
        false
    }
}

/// A [`Progress`] that ignores everything and never stops.
#[derive(Debug, Clone, Copy, Default)]
pub struct Silent;

impl Progress for Silent {}

/// Says one `Info` line of kind `kind`.
pub(crate) fn info(p: &mut dyn Progress, kind: NoteKind, text: &str) {
    p.note(&Note {
        level: NoteLevel::Info,
        kind,
        text,
    });
}

/// Says that the run stopped.
pub(crate) fn stopped(p: &mut dyn Progress, text: &str) {
    p.note(&Note {
        level: NoteLevel::Stopped,
        kind: NoteKind::Stopped,
        text,
    });
}
