//! Import CSV, TSV and NDJSON files into a SQLite table through the
//! litelane engine — the code behind `litelane import`, usable from Rust.
//!
//! ```
//! # fn main() -> Result<(), litelane_import::Error> {
//! # let dir = tempfile::tempdir().unwrap();
//! let csv = dir.path().join("people.csv");
//! std::fs::write(&csv, "name,age\nAda,36\nAlan,41\nGrace,85\n").unwrap();
//!
//! let mut args = litelane_import::ImportArgs::new(
//!     csv.to_str().unwrap(),
//!     dir.path().join("app.db"),
//! );
//! args.quiet = true; // no progress bar or summary lines on stderr
//! let outcome = litelane_import::run(args)?;
//!
//! assert_eq!(outcome.status, litelane_import::EXIT_OK);
//! assert_eq!(outcome.summary["table"], "people");
//! assert_eq!(outcome.summary["rows_inserted"], 3);
//! let db = litelane::Database::open(dir.path().join("app.db"), Default::default()).unwrap();
//! let n: i64 = db
//!     .read(|c| Ok(c.query_row("SELECT count(*) FROM people", [], |r| r.get(0))?))
//!     .unwrap();
//! assert_eq!(n, 3);
//! # Ok(()) }
//! ```
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
//!    [`ImportArgs`], the progress record of a resumable import.
//! 3. [`convert`] — records to typed rows, or rejects, on a parser thread.
//! 4. [`load`] — the rows stored through the engine's bulk path, in one
//!    transaction or one per `commit_every` rows (resumable), with
//!    upserts, `ALTER TABLE` for new columns, rejects and the summary.
//!
//! [`run`] and [`run_into`] are the entry points; the layers' modules are
//! public for the command line (`litelane sniff`) and the fuzz target
//! (feature `fuzzing`), and are not a stable interface. The behaviour of every option is described
//! in `docs/import.md`.

#![deny(unsafe_code)]

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
pub use load::{run, run_into, Outcome, EXIT_INTERRUPTED, EXIT_OK, EXIT_REJECTS};
pub use plan::conflict::OnConflict;
pub use plan::options::{ImportArgs, Mode, Types};
pub use plan::SAMPLE_RECORDS;
pub use read::source::Format;
