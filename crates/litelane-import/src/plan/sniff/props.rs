use super::*;
use crate::values::is_iso_date;
use proptest::prelude::*;

fn opts() -> Options {
    Options {
        format: Format::Csv,
        delimiter: None,
        header: None,
        nulls: None,
        types_text: false,
    }
}

/// A field of column kind `k` from `v`.
fn value(k: u8, v: i64, word: &str) -> String {
    match k % 4 {
        0 => v.to_string(),
        1 => format!("{}.{}", v, (v.unsigned_abs() % 97)),
        2 => format!("{word}{}", v.unsigned_abs() % 10),
        _ => format!("\"{word}, {v}\""),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Tables of numbers and words (some quoted, holding the
    /// delimiter), written with any of the four delimiters: the sniffer
    /// finds the delimiter, the header when there is one and some column
    /// is numeric, and the column count.
    #[test]
    fn generated_tables_are_sniffed_back(
        d in 0usize..4,
        kinds in proptest::collection::vec(0u8..4, 2..6),
        rows in proptest::collection::vec(proptest::collection::vec(-1000i64..1000, 6), 3..30),
        word in "[a-z]{1,6}",
        with_header in any::<bool>(),
    ) {
        let delim = DELIMITERS[d] as char;
        let mut body = String::new();
        if with_header {
            let names: Vec<String> = (0..kinds.len()).map(|i| format!("col{i}")).collect();
            body.push_str(&names.join(&delim.to_string()));
            body.push('\n');
        }
        for r in &rows {
            let fields: Vec<String> = kinds
                .iter()
                .enumerate()
                .map(|(i, k)| {
                    let f = value(*k, r[i], &word);
                    // Quoted fields hold the delimiter, not only commas.
                    f.replace(", ", &format!("{delim} "))
                })
                .collect();
            body.push_str(&fields.join(&delim.to_string()));
            body.push('\n');
        }
        let p = sniff(body.as_bytes(), true, &[], &opts()).unwrap();
        prop_assert_eq!(p.delimiter, delim);
        prop_assert_eq!(p.columns.len(), kinds.len());
        prop_assert_eq!(p.skip_rows, 0);
        let numeric = kinds.iter().any(|k| k % 4 < 2);
        if numeric {
            prop_assert_eq!(p.header, with_header, "{}", body);
        } else {
            // All text: a header is assumed (nothing tells it apart).
            prop_assert!(p.header);
        }
        for (c, k) in p.columns.iter().zip(&kinds) {
            let want = match k % 4 {
                0 => ColType::Integer,
                1 => ColType::Real,
                _ => ColType::Text,
            };
            // A real column whose sampled values all happen to be
            // integral is still REAL ("5.0" is not an integer).
            prop_assert_eq!(c.ty, want, "{}", body);
        }
    }

    /// `is_iso_date` agrees with SQLite: a `YYYY-MM-DD` text is a date
    /// exactly when SQLite's date() gives it back unchanged.
    #[test]
    fn iso_dates_agree_with_sqlite(y in 0u32..10000, m in 0u32..14, d in 0u32..33) {
        let s = format!("{y:04}-{m:02}-{d:02}");
        let c = rusqlite::Connection::open_in_memory().unwrap();
        let back: Option<String> =
            c.query_row("SELECT date(?1)", [&s], |r| r.get(0)).unwrap();
        prop_assert_eq!(is_iso_date(s.as_bytes()), back.as_deref() == Some(s.as_str()), "{}", s);
    }
}
