//! The engine's integration tests, one binary (each module was a test binary
//! of its own; one binary links the crate once). Run one module with
//! `cargo test -p litelane --test it <module>::`, e.g. `held::`.

mod common;

mod async_api;
mod backup;
mod bad_input;
mod bulk;
mod bulk_source;
mod checkpoints;
mod concurrency;
mod configure;
mod crash;
mod error_chain;
mod execute;
mod group_commit;
mod held;
mod litefs;
mod litestream;
mod outcomes;
mod process_waits;
mod processes;
mod schema;
mod stress;
mod transactions;
mod xproc;
mod xproc_trust;
