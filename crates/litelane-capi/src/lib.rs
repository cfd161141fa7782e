//! litelane's engine behind a stable C ABI: `include/litelane.h`, built by
//! `scripts/build-capi DIR` into `DIR/include`, `DIR/lib/liblitelane.so`
//! (+ `.a`) and `DIR/lib/pkgconfig/litelane.pc`.
//!
//! The ABI follows DuckDB's C API and SQLite's own: opaque handles, an
//! `int` status on every call, results through out-parameters, and the
//! error of the last failing call fetched separately (per thread). Handles
//! are ids looked up in a registry, never pointers the library
//! dereferences, so a NULL, closed, freed or wrong-kind handle is
//! `LITELANE_MISUSE` with a message, never a crash; ids are never reused.
//!
//! `ffi` holds every `extern "C"` function and every `unsafe` line (the
//! raw pointers C passes); the rest is safe Rust: `codes` (the status
//! codes), `handles` (the registry), `errors` (the per-thread error) and
//! `calls` (what each function does). The arrows go one way: `ffi` ->
//! `calls` -> `errors` -> `codes`.

#![deny(unsafe_code)]

mod calls;
mod codes;
mod errors;
mod ffi;
mod handles;

pub use codes::*;
pub use ffi::*;
