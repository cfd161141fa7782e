//! Import CSV, TSV and NDJSON files into a SQLite table through the
//! litelane engine — the code behind `litelane import`, usable from Rust.
//!
//! ```
//! # fn main() -> Result<(), litelane_import::Error> {
//! # let dir = tempfile::tempdir().unwrap();
//! use litelane_import::{ImportOptions, Progress, Rejected, Summary};
//!
//! let csv = dir.path().join("people.csv");
//! std::fs::write(&csv, "name,age\nAda,36\nAlan,41\nGrace,85\nBob,old\n").unwrap();
//!
//! // What the caller wants to hear: here, the rejected records.
//! #[derive(Default)]
//! struct Rejects(Vec<String>);
//! impl Progress for Rejects {
//!     fn rejected(&mut self, r: &Rejected<'_>) {
//!         self.0.push(format!("line {}: {}", r.line, r.reason));
//!     }
//! }
//!
//! let mut options = ImportOptions::new(csv.to_str().unwrap(), dir.path().join("app.db"));
//! options.types_for = vec!["age=INTEGER".into()]; // instead of inferred (TEXT here)
//! options.strict = true; // a value that does not fit its column is rejected
//! let mut rejects = Rejects::default();
//! let outcome = litelane_import::run(options, &mut rejects)?;
//!
//! assert_eq!(outcome.status, litelane_import::EXIT_REJECTS);
//! let Some(Summary::File(summary)) = &outcome.summary else { unreachable!() };
//! assert_eq!(summary.table, "people");
//! assert_eq!((summary.rows_inserted, summary.rows_rejected), (3, 1));
//! assert_eq!(summary.columns[1].ty, "INTEGER");
//! assert_eq!(rejects.0.len(), 1);
//! assert!(rejects.0[0].starts_with("line 5: "));
//! // The summary as `litelane import --json` prints it:
//! let json = serde_json::to_value(&outcome.summary).unwrap();
//! assert_eq!(json["rows_inserted"], 3);
//! # Ok(()) }
//! ```
//!
//! [`ImportOptions`] is plain data with the command's defaults; progress,
//! rejects, lines of report and stopping go through the caller's
//! [`Progress`] ([`Silent`] for none); the result is an [`Outcome`] whose
//! [`Summary`] serializes to the command's `--json` object. The library
//! prints nothing.
//!
//! # The pipeline
//!
//! An import flows one way through four layers; each module uses only the
//! ones before it (and the shared [`values`] and [`error`]):
//!
//! 1. [`read`] — bytes to records: files, glob patterns, stdin,
//!    gzip/zstd, text encodings, CSV/TSV fields, NDJSON lines, JSON arrays.
//! 2. [`plan`] — what to do: the sniffed dialect, header and column types,
//!    the target table as it is and as it will be, the caller's
//!    [`ImportOptions`], the progress record of a resumable import.
//! 3. [`convert`] — records to typed rows, or rejects, on a parser thread.
//! 4. [`load`] — the rows stored through the engine's bulk path, in one
//!    transaction or one per `commit_every` rows (resumable), with
//!    upserts, `ALTER TABLE` for new columns, rejects, the caller's
//!    [`Progress`] and the [`Summary`].
//!
//! [`run`] and [`run_into`] are the entry points; the layers' modules are
//! public for the command line (`litelane sniff`) and the fuzz target
//! (feature `fuzzing`), and are not a stable interface. The behaviour of every option is described
//! in `docs/import.md`.

#![deny(unsafe_code)]
#![deny(missing_docs)]

pub mod convert;
pub mod error;
/// The read → convert → SQLite path with its invariants checked, for the
/// fuzz target (`fuzz/`, which turns on the `fuzzing` feature) and this
/// crate's tests; not compiled otherwise, not a stable interface.
#[cfg(any(test, feature = "fuzzing"))]
#[doc(hidden)]
pub mod fuzzing;
pub mod load;
pub mod plan;
pub mod read;
pub mod values;

pub use error::{Error, ErrorKind};
pub use load::report::{Note, NoteKind, NoteLevel, Progress, Rejected, Silent};
pub use load::summary::{
    AlreadyFinished, ColumnSummary, Counts, FileSummary, FilesSummary, SniffedSummary, Summary,
};
pub use load::{run, run_into, Outcome, EXIT_INTERRUPTED, EXIT_OK, EXIT_REJECTS};
pub use plan::conflict::OnConflict;
pub use plan::options::{ImportOptions, Mode, Types};
pub use plan::SAMPLE_RECORDS;
pub use read::source::Format;
