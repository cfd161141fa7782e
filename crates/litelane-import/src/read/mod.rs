//! Layer 1, *read*: bytes to records. Opening an input — a file, stdin,
//! gzip or zstd, UTF-8/UTF-16/Latin-1 decoded to UTF-8 ([`source`]) —, the
//! files of a run ([`files`]: paths and glob patterns), the checks on paths
//! and the per-table lock ([`guard`]), the CSV dialect ([`dialect`]) and
//! the records themselves ([`records`]: CSV/TSV fields, NDJSON lines, JSON
//! array elements; [`json`]: scanning a JSON line as written). Uses nothing
//! of the later layers.

pub mod dialect;
pub mod files;
pub mod guard;
pub mod json;
pub mod records;
pub mod source;
