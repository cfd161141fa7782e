//! Properties of [`Converter`] on one CSV field: what each column type
//! accepts, and that nothing is silently changed (`docs/import.md`,
//! "Columns and types"). Oracles are independent where one exists: Rust's
//! own integer and float formatting, and SQLite's `date()`.

use super::*;
use crate::convert::batch::Kind;
use crate::read::dialect::Sniffed;
use proptest::prelude::*;

/// What one field became.
#[derive(Debug, Clone, PartialEq)]
enum Got {
    Null,
    Int(i64),
    Real(f64),
    Text(Vec<u8>),
    /// Rejected, with the reason.
    Rejected(String),
}

/// A converter of one CSV field into column `x` of type `ty`.
pub(super) fn converter(ty: ColType, strict: bool, nulls: &[&str]) -> Converter {
    Converter::new(Plan {
        format: Format::Csv,
        header: true,
        fields: 1,
        nulls: nulls.iter().map(|s| s.to_string()).collect(),
        columns: vec![ColumnPlan {
            name: "x".into(),
            ty,
            strict,
            src: 0,
            key: "x".into(),
        }],
        commit_every: None,
        rejects_table: None,
        recurring: Default::default(),
        sniffed: None,
    })
}

fn one(ty: ColType, strict: bool, nulls: &[&str], field: &[u8]) -> Got {
    let c = converter(ty, strict, nulls);
    let mut b = Batch::new(1, 1);
    let mut rec = csv::ByteRecord::new();
    rec.push_field(field);
    c.push_csv(&mut b, &rec, Place { line: 2, end: 9 }, 1);
    assert_eq!(b.entries.len(), 1, "one record, one entry");
    match b.entries[0].kind {
        Kind::Reject(j) => Got::Rejected(b.rejects[j as usize].reason.clone()),
        Kind::Row(_) => match b.cells[0] {
            Cell::Null => Got::Null,
            Cell::Int(v) => Got::Int(v),
            Cell::Real(v) => Got::Real(v),
            Cell::Text(s, n) => Got::Text(b.text[s as usize..(s + n) as usize].to_vec()),
        },
    }
}

/// Integer text that is not canonical: SQLite's INTEGER affinity would
/// turn most of it into a number other than as written.
fn non_canonical_integer() -> impl Strategy<Value = String> {
    let digits = "[0-9]{1,18}";
    prop_oneof![
        digits.prop_map(|d| format!("0{d}")),
        digits.prop_map(|d| format!("+{d}")),
        digits.prop_map(|d| format!(" {d}")),
        digits.prop_map(|d| format!("{d} ")),
        digits.prop_map(|d| format!("\t{d}\n")),
        digits.prop_map(|d| format!("{d}e0")),
        digits.prop_map(|d| format!("{d}.0")),
        digits.prop_map(|d| format!("{d}.")),
        "[1-9][0-9]{19,40}",
        "-[1-9][0-9]{19,40}",
        Just("-0".to_string()),
        Just("9223372036854775808".to_string()),
        Just("-9223372036854775809".to_string()),
        digits.prop_map(|d| format!("{d}_000")),
        digits.prop_map(|d| format!("0x{d}")),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    /// A canonical i64 is stored in an INTEGER column as that integer,
    /// strict or not.
    #[test]
    fn a_canonical_integer_is_stored_as_that_integer(v in any::<i64>(), strict in any::<bool>()) {
        let text = v.to_string();
        prop_assert_eq!(one(ColType::Integer, strict, &[], text.as_bytes()), Got::Int(v));
        // NUMERIC and BOOLEAN columns take it as the integer too.
        prop_assert_eq!(one(ColType::Numeric, false, &[], text.as_bytes()), Got::Int(v));
        prop_assert_eq!(one(ColType::Boolean, strict, &[], text.as_bytes()), Got::Int(v));
    }

    /// Other integer-looking text in an INTEGER column is never turned into
    /// a (different) integer: it is stored as exactly the same text when
    /// SQLite would keep it as text, else rejected with a reason naming
    /// the column; strict, it is always rejected.
    #[test]
    fn other_integer_text_is_kept_exactly_or_rejected(field in non_canonical_integer()) {
        let f = field.as_bytes();
        match one(ColType::Integer, false, &[], f) {
            Got::Text(t) => {
                prop_assert_eq!(&t, f);
                prop_assert!(!looks_numeric_to_sqlite(f) && !is_big_integer(f));
            }
            Got::Rejected(reason) => {
                prop_assert!(looks_numeric_to_sqlite(f) || is_big_integer(f), "{}", reason);
                prop_assert!(reason.contains("column \"x\""), "{}", reason);
                prop_assert!(reason.contains("--types text"), "{}", reason);
            }
            other => prop_assert!(false, "{:?} became {:?}", field, other),
        }
        prop_assert!(
            matches!(one(ColType::Integer, true, &[], f), Got::Rejected(_)),
            "strict INTEGER took {:?}", field
        );
    }

    /// A finite double written in its shortest form (and in exponent form)
    /// goes into a REAL column as the same double, to the last bit; `-0.0`
    /// keeps its sign in the cell (SQLite then stores 0.0, documented).
    #[test]
    fn reals_round_trip_to_the_last_bit(
        v in any::<f64>().prop_filter("finite", |v| v.is_finite()),
        strict in any::<bool>()
    ) {
        // (Not `{v}`: for 1e38 it writes 39 digits, an integer beyond 64
        // bits, which a REAL column rejects by design.)
        for text in [format!("{v:?}"), format!("{v:e}")] {
            match one(ColType::Real, strict, &[], text.as_bytes()) {
                Got::Real(x) => prop_assert_eq!(x.to_bits(), v.to_bits(), "{}", text),
                other => prop_assert!(false, "{} became {:?}", text, other),
            }
        }
    }

    /// BOOLEAN takes exactly `true`/`false` in any case (→ 1/0) and
    /// canonical integers; other text is kept as written or rejected (never
    /// read as a boolean), and always rejected when strict.
    #[test]
    fn booleans_are_true_false_in_any_case(
        word in "[tT][rR][uU][eE]|[fF][aA][lL][sS][eE]",
        other in "[a-zA-Z ]{1,6}|[yYnN]|[tTfF]|on|off|yes|no"
    ) {
        let want = i64::from(word.eq_ignore_ascii_case("true"));
        for strict in [false, true] {
            prop_assert_eq!(one(ColType::Boolean, strict, &[], word.as_bytes()), Got::Int(want));
            let got = one(ColType::Boolean, strict, &[], other.as_bytes());
            if other.eq_ignore_ascii_case("true") || other.eq_ignore_ascii_case("false") {
                continue;
            }
            match got {
                Got::Text(t) if !strict => prop_assert_eq!(t, other.as_bytes()),
                Got::Rejected(_) if strict => {}
                g => prop_assert!(false, "{:?} (strict {}) became {:?}", other, strict, g),
            }
        }
    }

    /// DATE takes exactly the calendar dates that exist, as SQLite's
    /// `date()` reads them (it normalises `2023-02-29` to March 1st, so a
    /// date is valid when `date(x)` is `x`): stored as written; a strict
    /// DATE column rejects everything else.
    #[test]
    fn dates_are_exactly_the_days_that_exist(y in 1000u32..=9999, m in 0u32..=13, d in 0u32..=32) {
        let c = rusqlite::Connection::open_in_memory().unwrap();
        let text = format!("{y:04}-{m:02}-{d:02}");
        let exists: bool = c
            .query_row("SELECT date(?1) IS ?1", [&text], |r| r.get(0))
            .unwrap();
        let got = one(ColType::Date, true, &[], text.as_bytes());
        if exists {
            prop_assert_eq!(got, Got::Text(text.clone().into_bytes()));
        } else {
            prop_assert!(matches!(got, Got::Rejected(_)), "{} became {:?}", text, got);
        }
        // Not strict: kept as written either way (SQLite keeps such text).
        prop_assert_eq!(
            one(ColType::Date, false, &[], text.as_bytes()),
            Got::Text(text.into_bytes())
        );
    }

    /// TIMESTAMP takes a date, `T` or a space, `HH:MM`, optional `:SS` and
    /// fraction, optional `Z` or `±HH:MM`, each part in range; one part out
    /// of range and a strict TIMESTAMP column rejects it.
    #[test]
    fn timestamps_take_their_documented_forms(
        h in 0u32..=23, mi in 0u32..=59, s in proptest::option::of(0u32..=59),
        frac in proptest::option::of("[0-9]{1,9}"),
        sep in prop_oneof![Just('T'), Just(' ')],
        zone in prop_oneof![Just(String::new()), Just("Z".to_string()),
                            (0u32..=14, 0u32..=59, any::<bool>())
                                .prop_map(|(zh, zm, p)| format!("{}{zh:02}:{zm:02}", if p { '+' } else { '-' }))],
        bad in 0usize..4
    ) {
        let secs = match (s, &frac) {
            (Some(s), Some(f)) => format!(":{s:02}.{f}"),
            (Some(s), None) => format!(":{s:02}"),
            (None, _) => String::new(),
        };
        let good = format!("2024-02-29{sep}{h:02}:{mi:02}{secs}{zone}");
        prop_assert_eq!(
            one(ColType::Timestamp, true, &[], good.as_bytes()),
            Got::Text(good.clone().into_bytes())
        );
        let broken = match bad {
            0 => format!("2024-02-29{sep}{:02}:{mi:02}{secs}{zone}", 24 + h % 76),
            1 => format!("2024-02-29{sep}{h:02}:{:02}{secs}{zone}", 60 + mi % 40),
            2 => format!("2023-02-29{sep}{h:02}:{mi:02}{secs}{zone}"),
            _ => format!("2024-02-29{sep}{h:02}:{mi:02}{secs}+{:02}:00", 15 + h),
        };
        prop_assert!(
            matches!(one(ColType::Timestamp, true, &[], broken.as_bytes()), Got::Rejected(_)),
            "{} was taken", broken
        );
    }

    /// A field equal to a null token is NULL in every column type; a field
    /// that only resembles one (other case, spaces) is not.
    #[test]
    fn null_tokens_are_exact(
        token in "NA|N/A|NULL|null|#N/A|\\\\N|-|",
        ty_i in 0usize..8,
        strict in any::<bool>()
    ) {
        let ty = [ColType::Integer, ColType::Real, ColType::Text, ColType::Any,
                  ColType::Numeric, ColType::Boolean, ColType::Date, ColType::Timestamp][ty_i];
        let strict = strict && ty != ColType::Text;
        prop_assert_eq!(one(ty, strict, &[token.as_str()], token.as_bytes()), Got::Null);
        for near in [format!(" {token}"), format!("{token} "), token.to_ascii_lowercase() + "x"] {
            prop_assert_ne!(one(ty, strict, &[token.as_str()], near.as_bytes()), Got::Null);
        }
    }
}

#[test]
fn negative_zero_keeps_its_sign_in_the_cell_and_sqlite_stores_zero() {
    let Got::Real(x) = one(ColType::Real, false, &[], b"-0.0") else {
        panic!("-0.0 is a REAL");
    };
    assert_eq!(x.to_bits(), (-0.0f64).to_bits());
    let c = rusqlite::Connection::open_in_memory().unwrap();
    let back: f64 = c.query_row("SELECT ?1", [x], |r| r.get(0)).unwrap();
    assert_eq!(back, 0.0);
    // `-0` is not a canonical integer: not an INTEGER, and SQLite's INTEGER
    // affinity would make it 0, so it is rejected there.
    assert!(matches!(
        one(ColType::Integer, false, &[], b"-0"),
        Got::Rejected(_)
    ));
}

#[test]
fn padding_is_dropped_from_numbers_only() {
    // A sniffed space-padded INTEGER column: `  12` is the number 12, but
    // text (a later value, or the column made TEXT by --type) keeps its
    // spaces; it used to be stored trimmed.
    for (ty, field, want) in [
        (ColType::Integer, &b"  12"[..], Got::Int(12)),
        (ColType::Real, b" 2.5 ", Got::Real(2.5)),
        (ColType::Integer, b" abc ", Got::Text(b" abc ".to_vec())),
        (ColType::Text, b"  12", Got::Text(b"  12".to_vec())),
        (
            ColType::Date,
            b" 2024-01-05",
            Got::Text(b" 2024-01-05".to_vec()),
        ),
    ] {
        let mut plan = converter(ty, false, &[]).plan().clone();
        plan.sniffed = Some(Sniffed {
            delimiter: ',',
            quote: Some('"'),
            trim: vec![true],
            ..Sniffed::default()
        });
        let c = Converter::new(plan);
        let mut b = Batch::new(1, 1);
        let mut rec = csv::ByteRecord::new();
        rec.push_field(field);
        c.push_csv(&mut b, &rec, Place { line: 2, end: 9 }, 1);
        let got = match b.cells.first() {
            Some(Cell::Int(v)) => Got::Int(*v),
            Some(Cell::Real(v)) => Got::Real(*v),
            Some(Cell::Text(s, n)) => Got::Text(b.text[*s as usize..(s + n) as usize].to_vec()),
            other => panic!("{other:?}: {:?}", b.rejects),
        };
        assert_eq!(got, want, "{ty:?} {:?}", String::from_utf8_lossy(field));
    }
}

#[test]
fn a_rejected_record_is_written_back_with_the_plans_quote() {
    // A plan (`--plan`) may quote with `'`: the rejects file quotes with it
    // too, so the record reads back as the same fields.
    let mut plan = converter(ColType::Text, false, &[]).plan().clone();
    plan.fields = 3;
    plan.sniffed = Some(Sniffed {
        delimiter: ';',
        quote: Some('\''),
        ..Sniffed::default()
    });
    let c = Converter::new(plan);
    let mut b = Batch::new(1, 1);
    let mut rec = csv::ByteRecord::new();
    rec.push_field(b"it's");
    rec.push_field(b"a;b");
    c.push_csv(&mut b, &rec, Place { line: 2, end: 9 }, 1);
    assert_eq!(b.rejects[0].raw, b"'it''s';'a;b'");
    let back = crate::plan::sniff::records(&b.rejects[0].raw, b';', Some(b'\''), true, 2);
    assert_eq!(back, vec![rec]);
}
