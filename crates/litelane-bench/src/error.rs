//! The error type of `litelane-bench`: the import library's, whose kinds
//! (engine, I/O with its OS error, input) are the ones a benchmark meets,
//! and which the `import` scenario's child process returns as it is.

pub use litelane_import::Error as BenchError;
