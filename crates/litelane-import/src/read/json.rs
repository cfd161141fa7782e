//! Scanning NDJSON lines as written, before they are parsed: long numbers,
//! tiny exponents, the raw text of each value.

use std::collections::HashMap;

/// A run of this many ASCII digits may be an integer beyond 64 bits
/// (`i64::MAX` has 19 digits).
pub const LONG_DIGITS: usize = 19;

/// True when `raw` holds a run of at least [`LONG_DIGITS`] ASCII digits: a
/// number in it may be an integer beyond 64 bits, which the JSON parser
/// reads as a double.
pub fn has_long_number(raw: &[u8]) -> bool {
    // Looks at every LONG_DIGITS-th byte only: a long run holds one of
    // them. Invariant: every long run starts at `p + 1 - LONG_DIGITS` or
    // later. A byte at `p` that is not a digit moves that bound past `p`;
    // a digit's run, measured, is long or moves the bound past its end.
    let mut p = LONG_DIGITS - 1;
    while p < raw.len() {
        if raw[p].is_ascii_digit() {
            let start = raw[..p]
                .iter()
                .rposition(|c| !c.is_ascii_digit())
                .map_or(0, |q| q + 1);
            let end = raw[p..]
                .iter()
                .position(|c| !c.is_ascii_digit())
                .map_or(raw.len(), |q| p + q);
            if end - start >= LONG_DIGITS {
                return true;
            }
            p = end + LONG_DIGITS;
        } else {
            p += LONG_DIGITS;
        }
    }
    false
}

/// True when `raw` holds `e-` or `E-` followed by three digits or more: a
/// number there may be below a double's range (`1e-400`), which the JSON
/// parser reads as 0.0. (A number written without an exponent needs a run
/// of over 300 zeros to be that small: [`has_long_number`] finds it.)
pub fn has_tiny_exponent(raw: &[u8]) -> bool {
    // Found from the `-` (rarer in a line than an `e`): one fast pass.
    memchr::memchr_iter(b'-', raw).any(|i| {
        i > 0
            && matches!(raw[i - 1], b'e' | b'E')
            && raw
                .get(i + 1..i + 4)
                .is_some_and(|d| d.iter().all(u8::is_ascii_digit))
    })
}

/// The JSON text of each top-level value of the object in `raw`, as
/// written; `None` when it is not an object.
pub fn raw_values(raw: &[u8]) -> Option<HashMap<String, &serde_json::value::RawValue>> {
    serde_json::from_slice(raw).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The definition [`has_tiny_exponent`] must agree with, byte by byte.
    fn tiny_plain(raw: &[u8]) -> bool {
        raw.windows(5).any(|w| {
            matches!(w[0], b'e' | b'E') && w[1] == b'-' && w[2..].iter().all(u8::is_ascii_digit)
        })
    }

    #[test]
    fn tiny_exponents_found_anywhere() {
        for (raw, want) in [
            ("{\"a\":1e-400}", true),
            ("{\"a\":1E-308}", true),
            ("{\"a\":1e-40}", false),
            ("{\"a\":1e-4000}", true),
            ("{\"a\":\"e-123\"}", true),
            ("e-12", false),
            ("e-123", true),
            ("E-", false),
            ("-123", false),
            ("{\"d\":\"2013-01-01\",\"x\":-123}", false),
            ("1e+400", false),
            ("ee--123", false),
            ("e-e-123", true),
            ("", false),
        ] {
            assert_eq!(has_tiny_exponent(raw.as_bytes()), want, "{raw:?}");
            assert_eq!(tiny_plain(raw.as_bytes()), want, "{raw:?}");
        }
    }

    proptest! {
        #[test]
        fn tiny_exponent_scan_is_the_plain_one(
            raw in proptest::collection::vec(
                prop_oneof![Just(b'e'), Just(b'E'), Just(b'-'), Just(b'1'), Just(b'0'), Just(b'x'), any::<u8>()],
                0..64,
            )
        ) {
            prop_assert_eq!(has_tiny_exponent(&raw), tiny_plain(&raw));
        }
    }
}
