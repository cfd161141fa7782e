//! Arbitrary bytes through the import's decode → sniff → read → convert →
//! SQLite path; `litelane_import::fuzzing::check` panics when an invariant
//! fails (its module documentation lists them): every record a row or a
//! reject, the reader's records the `csv` crate's own, lines in range and
//! increasing, each stored value the field as written.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    litelane_import::fuzzing::check(data);
});
