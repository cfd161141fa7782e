//! The command's integration tests, one binary (each module was a test
//! binary of its own). Run one module with `cargo test -p litelane-cli --test it <module>::`.

mod common;

mod import;
mod import_hostile;
mod import_new_db;
mod import_recurring;
mod import_resume;
mod import_sniff;
mod inspect;
mod recover;
