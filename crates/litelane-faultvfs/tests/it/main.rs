//! The fault-injecting VFS's tests, one binary with a module per concern:
//! `shim` (the shim alone, through plain rusqlite), `faults` (injected
//! faults under litelane) and `powerloss` (simulated power cuts under
//! litelane's workloads and profiles).
//!
//! One module: `cargo test -p litelane-faultvfs --test it powerloss::`.

mod common;

mod faults;
mod powerloss;
mod shim;
