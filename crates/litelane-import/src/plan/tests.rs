//! Each step of the plan, table-driven: hostile inputs in, exact outcomes
//! (names, types, statements, messages) out.

#![allow(clippy::type_complexity)]

use std::io::Cursor;
use std::path::PathBuf;

use super::*;
use crate::plan::table::ExistingColumn;
use crate::read::records::Place;
use crate::read::source;

/// `litelane import in.csv --db d.db FLAGS`: the options those flags set
/// (each flag the field of the same name; the flags the tables use).
pub(super) fn args(flags: &[&str]) -> FileArgs {
    let mut o = crate::ImportOptions::new("in.csv", "d.db");
    let mut it = flags.iter().copied();
    while let Some(flag) = it.next() {
        let mut value = || it.next().expect("a value").to_string();
        match flag {
            "--header" => o.header = true,
            "--no-header" => o.no_header = true,
            "--strict" => o.strict = true,
            "--resume" => o.resume = true,
            "--alter" => o.alter = true,
            "--no-default-nulls" => o.no_default_nulls = true,
            "--commit-every" => o.commit_every = Some(value().parse().unwrap()),
            "--max-rejects" => o.max_rejects = Some(value().parse().unwrap()),
            "--delimiter" => o.delimiter = value().chars().next(),
            "--format" => o.format = Some(value().parse().unwrap()),
            "--mode" => o.mode = Some(value().parse().unwrap()),
            "--types" => o.types = Some(value().parse().unwrap()),
            "--on-conflict" => o.on_conflict = Some(value().parse().unwrap()),
            "--null" => o.nulls.push(value()),
            "--type" => o.types_for.push(value()),
            "--pk" => o.pk = Some(value()),
            "--plan" => o.plan = Some(value().into()),
            "--rejects" => o.rejects = Some(value().into()),
            "--rejects-table" => o.rejects_table = Some(value()),
            "--source-column" => o.source_column = Some(value()),
            "--table" => o.table = Some(value()),
            other => panic!("no such flag in the tests: {other}"),
        }
    }
    o.into()
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

fn err<T: std::fmt::Debug>(r: Result<T, Error>) -> String {
    r.unwrap_err().to_string()
}

/// What reading a file's start gives: the plan's column names, skipped
/// records, index column, the header's fields, and the sample records as
/// (line, fields).
#[derive(Debug, PartialEq)]
struct Read {
    columns: Vec<String>,
    skip_rows: u64,
    index_column: bool,
    header: Option<Vec<String>>,
    rows: Vec<(u64, Vec<String>)>,
}

/// Writes `bytes` to a file and reads its start as a fresh import does:
/// open (BOM, UTF-16), sniff, layout, skip, header, sample. Messages name
/// the file `f.csv`.
fn read(bytes: &[u8]) -> Result<Read, String> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("f.csv").display().to_string();
    std::fs::write(&path, bytes).unwrap();
    let name = |e: Error| e.to_string().replace(&path, "f.csv");
    let mut input = source::open(&path).map_err(name)?;
    let plan = sniff::plan_for_import(
        None,
        Format::Csv,
        None,
        false,
        false,
        &[],
        false,
        &mut input,
        &path,
    )
    .map_err(name)?
    .expect("CSV has a plan");
    let layout = layout(Format::Csv, Some(&plan), false, &[]);
    let mut records = plan.sniffed().records(layout.format, input.reader);
    let header = read_header(&mut records, &layout, Some(&plan), &path).map_err(name)?;
    let sample = read_sample(&mut records, &path).map_err(name)?;
    let rows = sample
        .iter()
        .map(|r| match r {
            RawOwned::Csv(r, at) => (
                at.line,
                r.iter()
                    .map(|f| String::from_utf8_lossy(f).into_owned())
                    .collect(),
            ),
            RawOwned::Json(..) => panic!("a JSON record from CSV"),
        })
        .collect();
    Ok(Read {
        columns: plan.columns.iter().map(|c| c.name.clone()).collect(),
        skip_rows: plan.skip_rows,
        index_column: plan.index_column,
        header,
        rows,
    })
}

fn utf16le(s: &str, bom: bool) -> Vec<u8> {
    let mut out = if bom { vec![0xff, 0xfe] } else { Vec::new() };
    out.extend(s.encode_utf16().flat_map(u16::to_le_bytes));
    out
}

fn rows(r: &[(u64, &[&str])]) -> Vec<(u64, Vec<String>)> {
    r.iter().map(|(l, f)| (*l, strings(f))).collect()
}

#[test]
fn header_and_sample_from_hostile_files() {
    struct Case {
        name: &'static str,
        bytes: Vec<u8>,
        want: Result<Read, &'static str>,
    }
    let ok = |columns: &[&str],
              skip_rows: u64,
              index_column: bool,
              header: Option<&[&str]>,
              r: &[(u64, &[&str])]| {
        Ok(Read {
            columns: strings(columns),
            skip_rows,
            index_column,
            header: header.map(strings),
            rows: rows(r),
        })
    };
    let cases = vec![
        Case {
            name: "plain",
            bytes: b"id,name\n1,a\n2,b\n".to_vec(),
            want: ok(
                &["id", "name"],
                0,
                false,
                Some(&["id", "name"]),
                &[(2, &["1", "a"]), (3, &["2", "b"])],
            ),
        },
        Case {
            name: "UTF-8 byte-order mark: not part of the first name",
            bytes: b"\xef\xbb\xbfid,name\n1,a\n".to_vec(),
            want: ok(
                &["id", "name"],
                0,
                false,
                Some(&["id", "name"]),
                &[(2, &["1", "a"])],
            ),
        },
        Case {
            name: "UTF-16LE with its byte-order mark: decoded",
            bytes: utf16le("id,name\r\n1,a\r\n", true),
            want: ok(
                &["id", "name"],
                0,
                false,
                Some(&["id", "name"]),
                &[(2, &["1", "a"])],
            ),
        },
        Case {
            name: "UTF-16LE without a byte-order mark: the header is not text",
            bytes: utf16le("id,name\n1,a\n", false),
            want: Err(
                "f.csv:1: the header is not text: column 1 holds a NUL byte at byte 1 of \
                       its name (is the file binary, still compressed, or UTF-16 without a \
                       byte-order mark?)",
            ),
        },
        Case {
            name: "invalid UTF-8 in a name",
            bytes: b"id,na\xffme\nx,y\n1,2\n".to_vec(),
            want: Err(
                "f.csv:1: the header is not valid UTF-8: column 2 has an invalid byte at \
                       byte 2 of its name (convert the file to UTF-8, e.g. with iconv)",
            ),
        },
        Case {
            name: "duplicate and empty names: renamed, never empty",
            bytes: b"a,A,a,\nx,y,z,w\n".to_vec(),
            want: ok(
                &["a", "A_2", "a_3", "c4"],
                0,
                false,
                Some(&["a", "A", "a", ""]),
                &[(2, &["x", "y", "z", "w"])],
            ),
        },
        Case {
            name: "a title and a note before the header are skipped",
            bytes: b"Sales report\nsource: ERP\nid,n\n1,2\n3,4\n".to_vec(),
            want: ok(
                &["id", "n"],
                2,
                false,
                Some(&["id", "n"]),
                &[(4, &["1", "2"]), (5, &["3", "4"])],
            ),
        },
        Case {
            name: "R's row names: the header is one field short",
            bytes: b"\"a\",\"b\"\n\"r1\",1,2\n\"r2\",3,4\n".to_vec(),
            want: ok(
                &["row_names", "a", "b"],
                0,
                true,
                Some(&["a", "b"]),
                &[(2, &["r1", "1", "2"]), (3, &["r2", "3", "4"])],
            ),
        },
        Case {
            name: "no header: numbers all the way down",
            bytes: b"1,2\n3,4\n".to_vec(),
            want: ok(
                &["c1", "c2"],
                0,
                false,
                None,
                &[(1, &["1", "2"]), (2, &["3", "4"])],
            ),
        },
        Case {
            name: "hostile names are kept as written",
            bytes: b"\"\"\"; DROP TABLE x; --\",n\nv,1\n".to_vec(),
            want: ok(
                &["\"; DROP TABLE x; --", "n"],
                0,
                false,
                Some(&["\"; DROP TABLE x; --", "n"]),
                &[(2, &["v", "1"])],
            ),
        },
        Case {
            name: "empty file",
            bytes: Vec::new(),
            want: Err("f.csv is empty: there is no header line to name the columns"),
        },
        Case {
            name: "only blank lines",
            bytes: b"\n\n\r\n".to_vec(),
            want: Err("f.csv: no record to sniff: the input is empty"),
        },
    ];
    for c in cases {
        let got = read(&c.bytes);
        match (&got, &c.want) {
            (Ok(g), Ok(w)) => assert_eq!(g, w, "{}", c.name),
            (Err(g), Err(w)) => assert_eq!(g, w, "{}", c.name),
            _ => panic!("{}: got {got:?}, want {:?}", c.name, c.want),
        }
    }
}

fn plan_of(names: &[&str], index_column: bool) -> SniffPlan {
    SniffPlan {
        format: Format::Csv,
        delimiter: ',',
        quote: Some('"'),
        header: true,
        skip_rows: 0,
        index_column,
        header_trailing_delimiter: false,
        records_trailing_delimiter: false,
        header_reason: None,
        nulls: vec![String::new()],
        columns: names
            .iter()
            .map(|n| sniff::SniffColumn {
                name: n.to_string(),
                ty: ColType::Text,
                nulls: None,
                trim: false,
                tokens_seen: Default::default(),
            })
            .collect(),
        notes: Vec::new(),
        sampled: None,
    }
}

#[test]
fn the_header_must_match_the_plan() {
    let rec = |fields: &[&str]| csv::ByteRecord::from(fields.to_vec());
    // (plan columns, index column, header fields) → outcome.
    let cases: Vec<(&[&str], bool, Option<&[&str]>, Result<&[&str], &str>)> = vec![
        (&["a", "b"], false, Some(&["a", "b"]), Ok(&["a", "b"])),
        // A plan may rename the columns: the header's fields are returned,
        // the plan's names are used for the table.
        (&["x", "y"], false, Some(&["a", "b"]), Ok(&["a", "b"])),
        (&["row_names", "a"], true, Some(&["a"]), Ok(&["a"])),
        (
            &["a", "b", "c"],
            false,
            Some(&["a", "b"]),
            Err("f.csv:7: the header has 2 fields, but the plan expects 3 (columns 3)"),
        ),
        (
            &["row_names", "a", "b"],
            true,
            Some(&["r", "a", "b"]),
            Err(
                "f.csv:7: the header has 3 fields, but the plan expects 2 (columns 3, the \
                 first a row name)",
            ),
        ),
        (
            &["a"],
            false,
            None,
            Err("f.csv is empty: there is no header line to name the columns"),
        ),
    ];
    for (cols, index, fields, want) in cases {
        let plan = plan_of(cols, index);
        let r = fields.map(rec);
        let got = header(r.as_ref().map(|r| (r, 7)), &plan, "f.csv");
        match want {
            Ok(w) => assert_eq!(got.unwrap(), strings(w), "{cols:?} {fields:?}"),
            Err(w) => assert_eq!(err(got), w, "{cols:?} {fields:?}"),
        }
    }
}

#[test]
fn the_layout_comes_from_the_plan_then_the_flags() {
    let mut p = plan_of(&["a"], false);
    p.skip_rows = 2;
    p.nulls = strings(&["", "NA"]);
    let mut tsv_no_header = plan_of(&["a"], false);
    tsv_no_header.format = Format::Tsv;
    tsv_no_header.header = false;
    let l = |format, header, skip_rows, nulls: &[&str]| Layout {
        format,
        header,
        skip_rows,
        nulls: strings(nulls),
    };
    // (given format, plan, --no-header, --null) → layout.
    let cases: Vec<(Format, Option<&SniffPlan>, bool, &[&str], Layout)> = vec![
        (
            Format::Ndjson,
            None,
            false,
            &[],
            l(Format::Ndjson, false, 0, &[""]),
        ),
        // NDJSON has no header, whatever the flags.
        (
            Format::Ndjson,
            None,
            true,
            &["x"],
            l(Format::Ndjson, false, 0, &["x"]),
        ),
        (
            Format::Csv,
            Some(&p),
            false,
            &[],
            l(Format::Csv, true, 2, &["", "NA"]),
        ),
        // --null replaces the plan's tokens.
        (
            Format::Csv,
            Some(&p),
            false,
            &["-"],
            l(Format::Csv, true, 2, &["-"]),
        ),
        // The plan's format and header win over the given ones.
        (
            Format::Ndjson,
            Some(&tsv_no_header),
            false,
            &[],
            l(Format::Tsv, false, 0, &[""]),
        ),
    ];
    for (format, plan, no_header, nulls, want) in cases {
        assert_eq!(
            layout(format, plan, no_header, &strings(nulls)),
            want,
            "{format:?} {no_header} {nulls:?}"
        );
    }
    let given = [
        (Some(Format::Tsv), "x.csv", Format::Tsv),
        (None, "data/x.tsv.gz", Format::Tsv),
        (None, "x.jsonl", Format::Ndjson),
        (None, "x.ndjson.zst", Format::Ndjson),
        (None, "x.txt", Format::Csv),
        (None, "-", Format::Csv),
    ];
    for (flag, source, want) in given {
        assert_eq!(given_format(flag, source), want, "{flag:?} {source}");
    }
}

/// Sniffs `bytes` (CSV, the whole file) and returns the inputs, with each
/// column's null tokens and padding as the plan records them.
fn csv_types(bytes: &[u8], types: Types) -> Vec<(String, ColType, Option<Vec<String>>, bool)> {
    let opts = sniff::options(Format::Csv, None, false, false, &[], types == Types::Text).unwrap();
    let plan = sniff::sniff(bytes, true, &[], &opts).unwrap();
    let inputs = csv_inputs(&plan, types);
    assert_eq!(inputs.fields, plan.columns.len());
    inputs
        .keys
        .into_iter()
        .zip(inputs.types)
        .zip(&plan.columns)
        .map(|((k, t), c)| (k, t, c.nulls.clone(), c.trim))
        .collect()
}

#[test]
fn csv_types_from_the_sample() {
    type Want = &'static [(&'static str, ColType, Option<&'static [&'static str]>, bool)];
    let cases: Vec<(&str, &[u8], Types, Want)> = vec![
        (
            "leading zeros stay TEXT",
            b"zip,n\n02134,1\n10001,2\n",
            Types::Infer,
            &[
                ("zip", ColType::Text, None, false),
                ("n", ColType::Integer, None, false),
            ],
        ),
        (
            "NA in a numeric column is NULL; in a text column it is text",
            b"a,b\n1,x\nNA,NA\n3,z\n",
            Types::Infer,
            &[
                ("a", ColType::Integer, Some(&["", "NA"]), false),
                ("b", ColType::Text, None, false),
            ],
        ),
        (
            "beyond 64 bits: TEXT, never a rounded REAL",
            b"big,n\n99999999999999999999,1\n-18446744073709551616,2\n",
            Types::Infer,
            &[
                ("big", ColType::Text, None, false),
                ("n", ColType::Integer, None, false),
            ],
        ),
        (
            "-0.0 and -0 are REAL",
            b"r\n-0.0\n-0\n1.5\n",
            Types::Infer,
            &[("r", ColType::Real, None, false)],
        ),
        (
            "space-padded numbers: the number, trimmed",
            b"n,s\n  12,a\n3  ,b\n 4 ,c\n",
            Types::Infer,
            &[
                ("n", ColType::Integer, None, true),
                ("s", ColType::Text, None, false),
            ],
        ),
        (
            "--types text: every column TEXT, no null token",
            b"a,b\n1,1.5\nNA,2\n",
            Types::Text,
            &[
                ("a", ColType::Text, None, false),
                ("b", ColType::Text, None, false),
            ],
        ),
    ];
    for (name, bytes, types, want) in cases {
        let want: Vec<_> = want
            .iter()
            .map(|(k, t, n, trim)| (k.to_string(), *t, n.map(strings), *trim))
            .collect();
        assert_eq!(csv_types(bytes, types), want, "{name}");
    }
}

fn json_sample(lines: &[&str]) -> Vec<RawOwned> {
    lines
        .iter()
        .enumerate()
        .map(|(i, l)| {
            RawOwned::Json(
                l.as_bytes().to_vec(),
                Place {
                    line: i as u64 + 1,
                    end: 0,
                },
            )
        })
        .collect()
}

#[test]
fn ndjson_columns_and_types_from_the_sample() {
    type Want = Result<&'static [(&'static str, ColType)], &'static str>;
    let cases: Vec<(&str, &[&str], Types, bool, Want)> = vec![
        (
            "keys in order of first appearance, typed",
            &[r#"{"b":1,"zip":"02134"}"#, r#"{"a":1.5,"b":2}"#],
            Types::Infer,
            false,
            Ok(&[
                ("b", ColType::Integer),
                ("zip", ColType::Text),
                ("a", ColType::Real),
            ]),
        ),
        (
            "keys in another order, or fewer: each value typed under its own key",
            &[
                r#"{"a":1,"b":"t"}"#,
                r#"{"b":"u","a":2}"#,
                r#"{"c":1.5}"#,
                r#"{"c":2,"b":"v","a":3}"#,
            ],
            Types::Infer,
            false,
            Ok(&[
                ("a", ColType::Integer),
                ("b", ColType::Text),
                ("c", ColType::Real),
            ]),
        ),
        (
            "integers and reals mixed: REAL; -0.0: REAL",
            &[r#"{"x":1,"z":-0.0}"#, r#"{"x":2.5,"z":0}"#],
            Types::Infer,
            false,
            Ok(&[("x", ColType::Real), ("z", ColType::Real)]),
        ),
        (
            "beyond 64 bits: TEXT (the digits are kept)",
            &[r#"{"big":123456789012345678901234567890}"#, r#"{"big":1}"#],
            Types::Infer,
            false,
            Ok(&[("big", ColType::Text)]),
        ),
        (
            "a string \"NA\" among numbers: TEXT; only nulls: TEXT",
            &[r#"{"n":1,"e":null}"#, r#"{"n":"NA","e":null}"#],
            Types::Infer,
            false,
            Ok(&[("n", ColType::Text), ("e", ColType::Text)]),
        ),
        (
            "lines that are not objects are not columns; true/false are stored 1/0: INTEGER",
            &["[1,2]", "not json", r#"{"k":true}"#, "3", r#"{"k":false}"#],
            Types::Infer,
            false,
            Ok(&[("k", ColType::Integer)]),
        ),
        (
            "--types text",
            &[r#"{"n":1,"r":2.5}"#],
            Types::Text,
            false,
            Ok(&[("n", ColType::Text), ("r", ColType::Text)]),
        ),
        (
            "no object: an error naming the input",
            &["[1]", "2"],
            Types::Infer,
            false,
            Err("f.ndjson: no JSON object among the first 2 records to take the columns from"),
        ),
        (
            "no object but the table exists: its columns are the plan",
            &["[1]"],
            Types::Infer,
            true,
            Ok(&[]),
        ),
    ];
    for (name, lines, types, exists, want) in cases {
        let got = ndjson_inputs(&json_sample(lines), types, exists, "f.ndjson");
        match want {
            Ok(w) => {
                let g = got.unwrap();
                assert_eq!(g.fields, 0, "{name}");
                let pairs: Vec<(String, ColType)> = g.keys.into_iter().zip(g.types).collect();
                let w: Vec<(String, ColType)> =
                    w.iter().map(|(k, t)| (k.to_string(), *t)).collect();
                assert_eq!(pairs, w, "{name}");
            }
            Err(w) => assert_eq!(err(got), w, "{name}"),
        }
    }
}

#[test]
fn key_flags_need_a_key_for_on_conflict() {
    let cases: Vec<(
        Option<&str>,
        Option<OnConflict>,
        Result<(&[&str], OnConflict), &str>,
    )> = vec![
        (None, None, Ok((&[], OnConflict::Fail))),
        (Some("id"), None, Ok((&["id"], OnConflict::Fail))),
        (
            Some("a,B"),
            Some(OnConflict::Upsert),
            Ok((&["a", "B"], OnConflict::Upsert)),
        ),
        (
            None,
            Some(OnConflict::Ignore),
            Err(
                "--on-conflict ignore needs --pk COL[,COL]: the key that tells a row already \
                 present",
            ),
        ),
        // An explicit fail needs no key.
        (None, Some(OnConflict::Fail), Ok((&[], OnConflict::Fail))),
        (
            Some("a,,b"),
            Some(OnConflict::Upsert),
            Err("--pk \"a,,b\": an empty column name (give COL or COL1,COL2)"),
        ),
        (
            Some(""),
            None,
            Err("--pk \"\": an empty column name (give COL or COL1,COL2)"),
        ),
    ];
    for (pk, on, want) in cases {
        let got = key_flags(pk, on);
        match want {
            Ok((names, on_conflict)) => assert_eq!(
                got.unwrap(),
                KeyFlags {
                    names: strings(names),
                    on_conflict
                },
                "{pk:?} {on:?}"
            ),
            Err(w) => assert_eq!(err(got), w, "{pk:?} {on:?}"),
        }
    }
}

fn inputs(cols: &[(&str, ColType)]) -> Inputs {
    Inputs {
        keys: cols.iter().map(|(k, _)| k.to_string()).collect(),
        fields: cols.len(),
        types: cols.iter().map(|(_, t)| *t).collect(),
    }
}

fn key(names: &[&str], on_conflict: OnConflict) -> KeyFlags {
    KeyFlags {
        names: strings(names),
        on_conflict,
    }
}

/// (name, type, strict) of each planned column.
fn shape(cols: &[ColumnPlan]) -> Vec<(String, ColType, bool)> {
    cols.iter()
        .map(|c| (c.name.clone(), c.ty, c.strict))
        .collect()
}

fn cols(v: &[(&str, ColType, bool)]) -> Vec<(String, ColType, bool)> {
    v.iter().map(|(n, t, s)| (n.to_string(), *t, *s)).collect()
}

#[test]
fn new_tables_quote_every_name_and_keep_them_distinct() {
    use ColType::{Integer as I, Real as R, Text as T};
    struct Case {
        name: &'static str,
        table: &'static str,
        inputs: &'static [(&'static str, ColType)],
        flags: ColumnFlags,
        key: KeyFlags,
        drop_first: bool,
        want: Result<
            (
                Vec<(String, ColType, bool)>,
                Vec<&'static str>,
                Vec<&'static str>,
            ),
            &'static str,
        >,
    }
    let none = ColumnFlags::default();
    let strict = ColumnFlags {
        strict: true,
        ..ColumnFlags::default()
    };
    let overrides = |o: &[(&str, ColType)]| ColumnFlags {
        overrides: o.iter().map(|(n, t)| (n.to_string(), *t)).collect(),
        ..ColumnFlags::default()
    };
    let no_key = key(&[], OnConflict::Fail);
    let cases =
        vec![
        Case {
            name: "hostile, empty and case-only-different names",
            table: "t\"; DROP TABLE y; --",
            inputs: &[("\"; DROP TABLE x; --", T), ("", I), ("Id", I), ("id", T)],
            flags: none.clone(),
            key: no_key.clone(),
            drop_first: false,
            want: Ok((
                cols(&[
                    ("\"; DROP TABLE x; --", T, false),
                    ("c2", I, false),
                    ("Id", I, false),
                    ("id_2", T, false),
                ]),
                vec![],
                vec!["CREATE TABLE \"t\"\"; DROP TABLE y; --\" (\"\"\"; DROP TABLE x; --\" TEXT, \
                      \"c2\" INTEGER, \"Id\" INTEGER, \"id_2\" TEXT)"],
            )),
        },
        Case {
            name: "--mode replace over an existing table drops it first",
            table: "t",
            inputs: &[("a", I)],
            flags: none.clone(),
            key: no_key.clone(),
            drop_first: true,
            want: Ok((
                cols(&[("a", I, false)]),
                vec![],
                vec!["DROP TABLE \"t\"", "CREATE TABLE \"t\" (\"a\" INTEGER)"],
            )),
        },
        Case {
            name: "--strict: typed columns reject what does not fit",
            table: "t",
            inputs: &[("a", I), ("b", T), ("c", R), ("d", ColType::Boolean)],
            flags: strict.clone(),
            key: no_key.clone(),
            drop_first: false,
            want: Ok((
                cols(&[
                    ("a", I, true),
                    ("b", T, false),
                    ("c", R, true),
                    ("d", ColType::Boolean, true),
                ]),
                vec![],
                vec!["CREATE TABLE \"t\" (\"a\" INTEGER, \"b\" TEXT, \"c\" REAL, \"d\" INTEGER) \
                      STRICT"],
            )),
        },
        Case {
            name: "--type, matched exactly first, then ignoring case",
            table: "t",
            inputs: &[("zip", I), ("Code", I), ("code", I)],
            flags: overrides(&[("ZIP", T), ("code", T), ("code_2", R)]),
            key: no_key.clone(),
            drop_first: false,
            want: Ok((
                cols(&[("zip", T, false), ("Code", T, false), ("code_2", R, false)]),
                vec![],
                vec!["CREATE TABLE \"t\" (\"zip\" TEXT, \"Code\" TEXT, \"code_2\" REAL)"],
            )),
        },
        Case {
            name: "--type of an unknown column",
            table: "t",
            inputs: &[("a", I), ("b\"", I)],
            flags: overrides(&[("nope", T)]),
            key: no_key.clone(),
            drop_first: false,
            want: Err("--type nope=...: no such column (columns: \"a\", \"b\"\"\")"),
        },
        Case {
            name: "--pk in another case: the column's spelling; an INTEGER key is the rowid",
            table: "t",
            inputs: &[("Id", I), ("v", T)],
            flags: none.clone(),
            key: key(&["ID"], OnConflict::Fail),
            drop_first: false,
            want: Ok((
                cols(&[("Id", I, true), ("v", T, false)]),
                vec!["Id"],
                vec!["CREATE TABLE \"t\" (\"Id\" INTEGER PRIMARY KEY, \"v\" TEXT)"],
            )),
        },
        Case {
            name: "a TEXT key is NOT NULL",
            table: "t",
            inputs: &[("code", T)],
            flags: none.clone(),
            key: key(&["code"], OnConflict::Upsert),
            drop_first: false,
            want: Ok((
                cols(&[("code", T, false)]),
                vec!["code"],
                vec!["CREATE TABLE \"t\" (\"code\" TEXT PRIMARY KEY NOT NULL)"],
            )),
        },
        Case {
            name: "composite key",
            table: "t",
            inputs: &[("a", I), ("b", T), ("c", R)],
            flags: none.clone(),
            key: key(&["b", "a"], OnConflict::Ignore),
            drop_first: false,
            want: Ok((
                cols(&[("a", I, false), ("b", T, false), ("c", R, false)]),
                vec!["b", "a"],
                vec!["CREATE TABLE \"t\" (\"a\" INTEGER NOT NULL, \"b\" TEXT NOT NULL, \"c\" \
                      REAL, PRIMARY KEY (\"b\", \"a\"))"],
            )),
        },
        Case {
            name: "--pk of an unknown column",
            table: "t",
            inputs: &[("a", I)],
            flags: none.clone(),
            key: key(&["nope"], OnConflict::Fail),
            drop_first: false,
            want: Err("--pk \"nope\": no such column in f.csv (columns: \"a\")"),
        },
        Case {
            name: "--pk naming one column twice",
            table: "t",
            inputs: &[("a", I), ("b", I)],
            flags: none.clone(),
            key: key(&["a", "A"], OnConflict::Fail),
            drop_first: false,
            want: Err("--pk names column \"a\" twice"),
        },
    ];
    for c in cases {
        let got = new_table(
            c.table,
            inputs(c.inputs),
            &c.flags,
            &c.key,
            c.drop_first,
            "f.csv",
        );
        match c.want {
            Ok((columns, key, setup)) => {
                let g = got.unwrap();
                assert_eq!(g.table, c.table, "{}", c.name);
                assert_eq!(shape(&g.columns), columns, "{}", c.name);
                assert_eq!(g.key, strings(&key), "{}", c.name);
                assert_eq!(g.setup, strings(&setup), "{}", c.name);
                // Each column reads the field it was named from.
                let src: Vec<usize> = g.columns.iter().map(|c| c.src).collect();
                assert_eq!(src, (0..c.inputs.len()).collect::<Vec<_>>(), "{}", c.name);
            }
            Err(w) => assert_eq!(err(got), w, "{}", c.name),
        }
    }
}

proptest::proptest! {
    /// Whatever the names, the new table's statement is one SQLite runs,
    /// and the table it makes has exactly the planned columns.
    #[test]
    fn any_names_make_a_table_sqlite_creates(
        table in "t[^\0]{0,11}",
        names in proptest::collection::vec(".{0,8}", 1..6),
    ) {
        let n = names.len();
        let inp = Inputs {
            keys: names,
            fields: n,
            types: vec![ColType::Text; n],
        };
        let plan = new_table(&table, inp, &ColumnFlags::default(), &key(&[], OnConflict::Fail), false, "f")
            .unwrap();
        let c = rusqlite::Connection::open_in_memory().unwrap();
        for s in &plan.setup {
            c.execute_batch(s).unwrap();
        }
        let got: Vec<String> = c
            .prepare("SELECT name FROM pragma_table_info(?1)")
            .unwrap()
            .query_map([&table], |r| r.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        let want: Vec<String> = plan.columns.iter().map(|c| c.name.clone()).collect();
        proptest::prop_assert_eq!(got, want);
        let tables: i64 = c
            .query_row("SELECT count(*) FROM sqlite_schema WHERE type = 'table'", [], |r| r.get(0))
            .unwrap();
        proptest::prop_assert_eq!(tables, 1);
    }
}

fn existing() -> Existing {
    let col = |name: &str, declared: &str, rowid_alias| ExistingColumn {
        name: name.into(),
        declared: declared.into(),
        rowid_alias,
    };
    Existing {
        name: "T".into(),
        columns: vec![
            col("id", "INTEGER", true),
            col("name", "VARCHAR(20)", false),
            col("score", "DOUBLE", false),
            col("src", "TEXT", false),
        ],
        strict: false,
        generated: Vec::new(),
    }
}

#[test]
fn appending_matches_columns_by_name_or_says_which_are_missing() {
    use ColType::{Integer as I, Real as R, Text as T};
    struct Case {
        name: &'static str,
        format: Format,
        inputs: &'static [(&'static str, ColType)],
        flags: ColumnFlags,
        key: KeyFlags,
        strict_table: bool,
        indexes: Vec<Vec<Option<String>>>,
        /// (column, type, strict, src, key), key columns, setup.
        want: Result<
            (
                Vec<(&'static str, ColType, bool, usize, &'static str)>,
                Vec<&'static str>,
                Vec<&'static str>,
            ),
            &'static str,
        >,
    }
    let none = ColumnFlags::default();
    let alter = ColumnFlags {
        alter: true,
        ..ColumnFlags::default()
    };
    let no_key = key(&[], OnConflict::Fail);
    let idx = |cols: &[Option<&str>]| cols.iter().map(|c| c.map(String::from)).collect();
    let base = || Case {
        name: "",
        format: Format::Csv,
        inputs: &[],
        flags: none.clone(),
        key: no_key.clone(),
        strict_table: false,
        indexes: Vec::new(),
        want: Err(""),
    };
    let cases = vec![
        Case {
            name: "matched ignoring case, in input order, typed by the table",
            inputs: &[("NAME", I), ("ID", T), ("score", T)],
            want: Ok((
                vec![
                    ("name", T, false, 0, "NAME"),
                    ("id", I, true, 1, "ID"),
                    ("score", R, false, 2, "score"),
                ],
                vec![],
                vec![],
            )),
            ..base()
        },
        Case {
            name: "--strict or a STRICT table: numeric columns reject what does not fit",
            inputs: &[("score", T), ("name", I)],
            strict_table: true,
            want: Ok((
                vec![
                    ("score", R, true, 0, "score"),
                    ("name", T, false, 1, "name"),
                ],
                vec![],
                vec![],
            )),
            ..base()
        },
        Case {
            name: "fewer input columns than the table: the others take their defaults",
            inputs: &[("score", R)],
            want: Ok((vec![("score", R, false, 0, "score")], vec![], vec![])),
            ..base()
        },
        Case {
            name: "missing columns without --alter",
            inputs: &[("id", I), ("extra", I), ("more\"", T)],
            want: Err(
                "input columns \"extra\", \"more\"\"\" are not in table \"T\" (its columns: \
                       \"id\", \"name\", \"score\", \"src\"); add them with --alter",
            ),
            ..base()
        },
        Case {
            name: "missing columns with --alter: added, typed from the data",
            inputs: &[("id", I), ("extra", I), ("Name", T), ("more\"", R)],
            flags: alter.clone(),
            want: Ok((
                vec![
                    ("id", I, true, 0, "id"),
                    ("extra", I, false, 1, "extra"),
                    ("name", T, false, 2, "Name"),
                    ("more\"", R, false, 3, "more\""),
                ],
                vec![],
                vec![
                    "ALTER TABLE \"T\" ADD COLUMN \"extra\" INTEGER",
                    "ALTER TABLE \"T\" ADD COLUMN \"more\"\"\" REAL",
                ],
            )),
            ..base()
        },
        Case {
            name: "duplicate input names: the second is renamed, and then missing",
            inputs: &[("name", T), ("NAME", T)],
            want: Err(
                "input column \"NAME_2\" is not in table \"T\" (its columns: \"id\", \
                       \"name\", \"score\", \"src\"); add it with --alter",
            ),
            ..base()
        },
        Case {
            name: "--type on an existing table",
            inputs: &[("id", I)],
            flags: ColumnFlags {
                overrides: vec![("id".into(), T)],
                ..ColumnFlags::default()
            },
            want: Err(
                "--type applies to a new table; \"T\" exists and its columns keep their \
                       types",
            ),
            ..base()
        },
        Case {
            name: "NDJSON fills every column but --source-column; unknown keys ignored",
            format: Format::Ndjson,
            inputs: &[("score", I), ("extra", T)],
            flags: ColumnFlags {
                source_column: Some("SRC".into()),
                ..ColumnFlags::default()
            },
            want: Ok((
                vec![
                    ("id", I, true, 0, "id"),
                    ("name", T, false, 1, "name"),
                    ("score", R, false, 2, "score"),
                ],
                vec![],
                vec![],
            )),
            ..base()
        },
        Case {
            name: "NDJSON with --alter: unknown keys added",
            format: Format::Ndjson,
            inputs: &[("extra", T)],
            flags: alter.clone(),
            want: Ok((
                vec![
                    ("id", I, true, 0, "id"),
                    ("name", T, false, 1, "name"),
                    ("score", R, false, 2, "score"),
                    ("src", T, false, 3, "src"),
                    ("extra", T, false, 4, "extra"),
                ],
                vec![],
                vec!["ALTER TABLE \"T\" ADD COLUMN \"extra\" TEXT"],
            )),
            ..base()
        },
        Case {
            name: "NDJSON keys differing only in case, with --alter: one column added",
            format: Format::Ndjson,
            inputs: &[("extra", I), ("EXTRA", T), ("Src", T)],
            flags: alter.clone(),
            want: Ok((
                vec![
                    ("id", I, true, 0, "id"),
                    ("name", T, false, 1, "name"),
                    ("score", R, false, 2, "score"),
                    ("src", T, false, 3, "src"),
                    ("extra", I, false, 4, "extra"),
                ],
                vec![],
                vec!["ALTER TABLE \"T\" ADD COLUMN \"extra\" INTEGER"],
            )),
            ..base()
        },
        Case {
            name: "--pk in another case: the table's spelling",
            inputs: &[("name", T)],
            key: key(&["NAME"], OnConflict::Fail),
            want: Ok((vec![("name", T, false, 0, "name")], vec!["name"], vec![])),
            ..base()
        },
        Case {
            name: "--pk of a column the table lacks",
            inputs: &[("name", T)],
            key: key(&["nope"], OnConflict::Fail),
            want: Err(
                "--pk \"nope\": table \"T\" has no such column (its columns: \"id\", \
                       \"name\", \"score\", \"src\")",
            ),
            ..base()
        },
        Case {
            name: "upsert on the rowid needs no index",
            inputs: &[("ID", I)],
            key: key(&["ID"], OnConflict::Upsert),
            want: Ok((vec![("id", I, true, 0, "ID")], vec!["id"], vec![])),
            ..base()
        },
        Case {
            name: "upsert without a unique index on the key",
            inputs: &[("name", T)],
            key: key(&["name"], OnConflict::Upsert),
            indexes: vec![idx(&[Some("name"), Some("score")]), idx(&[None])],
            want: Err(
                "--on-conflict upsert needs a PRIMARY KEY or UNIQUE index on (\"name\") of \
                       table \"T\", and it has none; create one first, e.g. CREATE UNIQUE INDEX \
                       \"T_key\" ON \"T\" (\"name\")",
            ),
            ..base()
        },
        Case {
            name: "a unique index on the key, in another order and case",
            inputs: &[("name", T), ("score", R)],
            key: key(&["score", "name"], OnConflict::Ignore),
            indexes: vec![idx(&[Some("NAME"), Some("Score")])],
            want: Ok((
                vec![
                    ("name", T, false, 0, "name"),
                    ("score", R, false, 1, "score"),
                ],
                vec!["score", "name"],
                vec![],
            )),
            ..base()
        },
    ];
    for c in cases {
        let mut t = existing();
        t.strict = c.strict_table;
        let before = t.columns.len();
        let got = append_table(
            &mut t,
            c.format,
            inputs(c.inputs),
            &c.flags,
            &c.key,
            &c.indexes,
        );
        match c.want {
            Ok((columns, key, setup)) => {
                let g = got.unwrap();
                assert_eq!(g.table, "T", "{}", c.name);
                let shape: Vec<_> = g
                    .columns
                    .iter()
                    .map(|c| (c.name.as_str(), c.ty, c.strict, c.src, c.key.as_str()))
                    .collect();
                assert_eq!(shape, columns, "{}", c.name);
                assert_eq!(g.key, strings(&key), "{}", c.name);
                assert_eq!(g.setup, strings(&setup), "{}", c.name);
                // The added columns are now the table's (for --source-column).
                assert_eq!(t.columns.len(), before + setup.len(), "{}", c.name);
            }
            Err(w) => assert_eq!(err(got), w, "{}", c.name),
        }
    }
}

fn table_plan(names: &[&str]) -> TablePlan {
    TablePlan {
        table: "t".into(),
        columns: names
            .iter()
            .enumerate()
            .map(|(i, n)| ColumnPlan {
                name: n.to_string(),
                ty: ColType::Text,
                strict: false,
                src: i,
                key: n.to_string(),
            })
            .collect(),
        key: Vec::new(),
        setup: Vec::new(),
    }
}

#[test]
fn the_key_must_be_imported_to_match_rows() {
    let p = table_plan(&["Id", "v"]);
    let cases: Vec<(OnConflict, &[&str], Result<(), &str>)> = vec![
        (OnConflict::Fail, &["absent"], Ok(())),
        (OnConflict::Upsert, &["id"], Ok(())),
        (
            OnConflict::Upsert,
            &["id", "w\""],
            Err(
                "--pk \"w\"\"\": the input has no such column, so its rows cannot be matched \
                 to the stored ones",
            ),
        ),
        (
            OnConflict::Replace,
            &["x"],
            Err(
                "--pk \"x\": the input has no such column, so its rows cannot be matched to \
                 the stored ones",
            ),
        ),
    ];
    for (on, k, want) in cases {
        let got = check_key_imported(on, &strings(k), &p.columns);
        match want {
            Ok(()) => got.unwrap(),
            Err(w) => assert_eq!(err(got), w, "{on:?} {k:?}"),
        }
    }
}

#[test]
fn source_column_and_nothing_to_import() {
    let t = existing();
    let cases: Vec<(&[&str], Option<&str>, bool, Result<Option<&str>, &str>)> = vec![
        (&["a"], None, false, Ok(None)),
        (
            &["a"],
            Some("file\""),
            false,
            Ok(Some("ALTER TABLE \"t\" ADD COLUMN \"file\"\"\" TEXT")),
        ),
        // The appended table has it already (in another case).
        (&["a"], Some("SRC"), true, Ok(None)),
        (
            &["a", "File"],
            Some("file"),
            false,
            Err("--source-column \"file\": the input has a column of that name; give another"),
        ),
        (&["a"], Some(""), false, Err("--source-column needs a name")),
        (&[], None, false, Err("f.csv: no columns to import")),
        (&[], Some("f"), true, Err("f.csv: no columns to import")),
    ];
    for (names, sc, appended, want) in cases {
        let got = finish_columns(&table_plan(names), sc, appended.then_some(&t), "f.csv");
        match want {
            Ok(w) => assert_eq!(got.unwrap(), w.map(String::from), "{names:?} {sc:?}"),
            Err(w) => assert_eq!(err(got), w, "{names:?} {sc:?}"),
        }
    }
}

#[test]
fn the_import_plan_carries_the_flags() {
    let mut sniffed = plan_of(&["a", "b"], false);
    sniffed.columns[0].nulls = Some(strings(&["", "NA"]));
    sniffed.delimiter = ';';
    let mut target = table_plan(&["a", "b"]);
    target.key = strings(&["a"]);
    let a = args(&[
        "--commit-every",
        "10",
        "--rejects-table",
        "rj",
        "--source-column",
        "f",
    ]);
    let lay = layout(Format::Csv, Some(&sniffed), false, &[]);
    let p = import_plan(lay, 2, &target, OnConflict::Ignore, Some(&sniffed), &a);
    assert_eq!(p.format, Format::Csv);
    assert!(p.header);
    assert_eq!(p.fields, 2);
    assert_eq!(p.nulls, strings(&[""]));
    assert_eq!(p.columns, target.columns);
    assert_eq!(p.commit_every, Some(10));
    assert_eq!(p.rejects_table.as_deref(), Some("rj"));
    assert_eq!(
        p.recurring,
        Recurring {
            key: strings(&["a"]),
            on_conflict: OnConflict::Ignore,
            source_column: Some("f".into()),
        }
    );
    let s = p.sniffed.unwrap();
    assert_eq!(s.delimiter, ';');
    assert_eq!(s.column_nulls, vec![Some(strings(&["", "NA"])), None]);
    // --null: the same tokens in every column, the sniffed ones dropped.
    let a = args(&["--null", "-"]);
    let lay = layout(Format::Csv, Some(&sniffed), false, &a.nulls);
    let p = import_plan(lay, 2, &target, OnConflict::Fail, Some(&sniffed), &a);
    assert_eq!(p.nulls, strings(&["-"]));
    assert_eq!(
        p.sniffed.unwrap().column_nulls,
        Vec::<Option<Vec<String>>>::new()
    );
    assert_eq!(p.commit_every, None);
    // NDJSON: no dialect, no header.
    let lay = layout(Format::Ndjson, None, false, &[]);
    let p = import_plan(lay, 0, &target, OnConflict::Fail, None, &args(&[]));
    assert_eq!(
        (p.format, p.header, p.sniffed),
        (Format::Ndjson, false, None)
    );
}

#[test]
fn bookkeeping_statements_quote_names_and_keep_other_files_progress() {
    let progress_delete =
        |rest: &str| format!("DELETE FROM \"_litelane_import\" WHERE table_name = 'it''s'{rest}");
    let create_rejects = "CREATE TABLE IF NOT EXISTS \"r\"\"j\" (target_table TEXT NOT NULL, \
                          source TEXT NOT NULL, line INTEGER NOT NULL, record INTEGER NOT NULL, \
                          reason TEXT NOT NULL, raw)";
    // (flags, keep other progress, mode, recorded) → statements.
    let cases: Vec<(&[&str], bool, Mode, bool, Vec<String>)> = vec![
        (&[], false, Mode::Create, false, vec![]),
        (
            &["--commit-every", "5"],
            false,
            Mode::Create,
            false,
            vec![resume::create_sql()],
        ),
        (
            &["--rejects-table", "r\"j"],
            false,
            Mode::Append,
            false,
            vec![create_rejects.to_string()],
        ),
        (
            &["--rejects-table", "r\"j"],
            false,
            Mode::Replace,
            true,
            vec![
                create_rejects.to_string(),
                "DELETE FROM \"r\"\"j\" WHERE target_table = 'it''s'".to_string(),
                progress_delete(""),
            ],
        ),
        // One file of several: only its own record goes.
        (
            &["--commit-every", "5"],
            true,
            Mode::Append,
            true,
            vec![
                resume::create_sql(),
                progress_delete(" AND source = '/d/o''brien.csv'"),
            ],
        ),
        // ... unless the table is replaced: then every record goes.
        (&[], true, Mode::Replace, true, vec![progress_delete("")]),
    ];
    for (flags, keep, mode, recorded, want) in cases {
        let mut a = args(flags);
        a.keep_other_progress = keep;
        assert_eq!(
            bookkeeping_sql(&a, mode, "it's", recorded, "/d/o'brien.csv"),
            want,
            "{flags:?} {keep} {mode:?} {recorded}"
        );
    }
}

#[test]
fn the_progress_record_is_keyed_by_table_and_source() {
    let lay = layout(Format::Ndjson, None, false, &[]);
    let plan = import_plan(
        lay,
        0,
        &table_plan(&["a"]),
        OnConflict::Fail,
        None,
        &args(&[]),
    );
    assert!(progress_record("t", "/x.csv", None, &plan, None, None).is_none());
    let p = progress_record(
        "T",
        "/data/x.csv",
        Some("fp".into()),
        &plan,
        Some("/r.ndjson".into()),
        Some(100),
    )
    .unwrap();
    assert_eq!((p.table.as_str(), p.source.as_str()), ("T", "/data/x.csv"));
    assert_eq!(p.fingerprint.as_deref(), Some("fp"));
    assert_eq!(p.plan, plan);
    assert_eq!(p.rejects_file.as_deref(), Some("/r.ndjson"));
    assert_eq!(p.state, resume::RUNNING);
    assert_eq!(
        (
            p.records_read,
            p.rows_inserted,
            p.rows_rejected,
            p.last_line,
            p.rejects_bytes
        ),
        (0, 0, 0, 0, 0)
    );
    assert_eq!((p.resume_end, p.resume_hash), (None, None));
}

fn record(state: &str) -> Progress {
    let lay = layout(Format::Ndjson, None, false, &[]);
    Progress {
        table: "T\"x".into(),
        source: "/in.csv".into(),
        fingerprint: None,
        plan: import_plan(
            lay,
            0,
            &table_plan(&["a"]),
            OnConflict::Fail,
            None,
            &args(&[]),
        ),
        records_read: 10,
        rows_inserted: 9,
        rows_rejected: 1,
        last_line: 11,
        rejects_file: None,
        rejects_bytes: 0,
        state: state.into(),
        resume_end: None,
        resume_hash: None,
    }
}

#[test]
fn an_interrupted_import_or_an_existing_table_stops_a_fresh_one() {
    let running = vec![record(resume::DONE), record(resume::RUNNING)];
    let msg = "an import of /in.csv into \"T\"\"x\" was interrupted after line 11 (9 rows \
               committed); continue it with --resume, or start over with --mode replace";
    for mode in [Mode::Create, Mode::Append] {
        assert_eq!(err(check_interrupted(mode, &running)), msg, "{mode:?}");
    }
    check_interrupted(Mode::Replace, &running).unwrap();
    check_interrupted(Mode::Append, &[record(resume::DONE)]).unwrap();
    check_interrupted(Mode::Create, &[]).unwrap();

    let t = existing();
    let db = PathBuf::from("/d/x.db");
    assert_eq!(
        err(check_create(Mode::Create, Some(&t), "t\"", &db)),
        "table \"t\"\"\" already exists in /d/x.db; use --mode append to add rows or --mode \
         replace to recreate it"
    );
    check_create(Mode::Create, None, "t", &db).unwrap();
    check_create(Mode::Append, Some(&t), "t", &db).unwrap();
    check_create(Mode::Replace, Some(&t), "t", &db).unwrap();
}

#[test]
fn reading_skips_the_preamble_then_samples_at_most_the_sample_size() {
    let mut body = String::from("skip me\nid\n");
    for i in 0..SAMPLE_RECORDS + 5 {
        body.push_str(&format!("{i}\n"));
    }
    let mut p = plan_of(&["id"], false);
    p.skip_rows = 1;
    let lay = layout(Format::Csv, Some(&p), false, &[]);
    let mut records = Records::new(Format::Csv, Box::new(Cursor::new(body.into_bytes())));
    let header = read_header(&mut records, &lay, Some(&p), "f.csv").unwrap();
    assert_eq!(header, Some(strings(&["id"])));
    let sample = read_sample(&mut records, "f.csv").unwrap();
    assert_eq!(sample.len(), SAMPLE_RECORDS);
    match (&sample[0], &sample[SAMPLE_RECORDS - 1]) {
        (RawOwned::Csv(first, a), RawOwned::Csv(last, b)) => {
            assert_eq!((&first[0], a.line), (&b"0"[..], 3));
            let n = (SAMPLE_RECORDS - 1).to_string();
            assert_eq!(
                (&last[0], b.line),
                (n.as_bytes(), SAMPLE_RECORDS as u64 + 2)
            );
        }
        _ => panic!("CSV records expected"),
    }
    // The rest is still there for the import.
    assert!(records.next_record("f.csv").unwrap().is_some());
}
