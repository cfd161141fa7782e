//! The long runs of the lab: `litelane-bench soak ...` (writers, readers,
//! bulk inserts, checkpoints and a writer process killed with SIGKILL, for
//! a while, under each WAL profile; `scripts/soak`) and `litelane-bench
//! kill-proof ...` (writers killed with SIGKILL at random moments, then
//! the file checked; `scripts/durability-proof`). Unlike the scenarios of
//! [`crate::bench`] they are proofs that run for minutes to hours and exit
//! non-zero when a promise broke.
//!
//! Both read their options one flag at a time ([`flags`]) and start writer
//! processes (the same binary again) that speak [`ack`]'s line protocol.
//! Each returns its exit status: 0 success, 1 a failure of what it checks
//! (or of the run), 2 a bad command line or an output it could not write.

mod ack;
mod flags;
pub mod kill_proof;
pub mod soak;
