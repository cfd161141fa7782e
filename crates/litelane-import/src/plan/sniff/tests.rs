use super::*;
use super::{input::*, types::*};
use crate::read::source;
use crate::values::{is_iso_date, is_iso_timestamp};

/// One sniffing case: input bytes and options → the expected plan.
struct Case {
    name: &'static str,
    input: &'static str,
    tsv: bool,
    header: Option<bool>,
    nulls: Option<&'static [&'static str]>,
    delimiter: char,
    quote: Option<char>,
    has_header: bool,
    skip: u64,
    index: bool,
    /// Column names, space-separated.
    names: &'static str,
    /// Column types, space-separated.
    types: &'static str,
    /// `(column, its own null tokens)` to check.
    col_nulls: &'static [(usize, Option<&'static [&'static str]>)],
    /// Columns whose padding is trimmed.
    trim: &'static [usize],
}

const BASE: Case = Case {
    name: "",
    input: "",
    tsv: false,
    header: None,
    nulls: None,
    delimiter: ',',
    quote: Some('"'),
    has_header: true,
    skip: 0,
    index: false,
    names: "",
    types: "",
    col_nulls: &[],
    trim: &[],
};

fn cases() -> Vec<Case> {
    vec![
        Case { name: "commas with a header", input: "a,b\n1,x\n2,y\n", names: "a b", types: "INTEGER TEXT", ..BASE },
        Case { name: "semicolons", input: "a;b;c\n1;2;3\n4;5;6\n", delimiter: ';', names: "a b c", types: "INTEGER INTEGER INTEGER", ..BASE },
        Case { name: "semicolons with decimal commas", input: "x;y\n1,5;2,25\n3,5;4,75\n6,5;7,75\n", delimiter: ';', names: "x y", types: "TEXT TEXT", ..BASE },
        Case { name: "pipes", input: "id|name\n1|ann\n2|bob\n", delimiter: '|', names: "id name", types: "INTEGER TEXT", ..BASE },
        Case { name: "tabs in a .csv", input: "a\tb\n1\t2.5\n3\t4\n", delimiter: '\t', names: "a b", types: "INTEGER REAL", ..BASE },
        Case { name: "quoted delimiters", input: "name,city\n\"Smith, J\",\"Paris, FR\"\n\"Doe, A\",Rome\n", names: "name city", types: "TEXT TEXT", ..BASE },
        Case { name: "quoted semicolons in a semicolon file", input: "n;t\n1;\"a;b\"\n2;\"c;d;e\"\n3;f\n", delimiter: ';', names: "n t", types: "INTEGER TEXT", ..BASE },
        Case { name: "header-less reals (no column named 0.00)", input: "0.00,-0.55\n1.5,2.5\n3,4\n", has_header: false, names: "c1 c2", types: "REAL REAL", ..BASE },
        Case { name: "header-less integers", input: "1,2\n3,4\n5,6\n", has_header: false, names: "c1 c2", types: "INTEGER INTEGER", ..BASE },
        Case { name: "a real above integers is data, and makes the column REAL", input: "0.00,-0.55\n1.5,2\n", has_header: false, names: "c1 c2", types: "REAL REAL", ..BASE },
        Case { name: "all text: a header is assumed", input: "a,b\nx,y\nz,w\n", names: "a b", types: "TEXT TEXT", ..BASE },
        Case { name: "preamble lines before the header", input: "Table 1: Population by region\nSource: the agency\nregion,pop,share\nnorth,10,0.5\nsouth,20,0.25\n", skip: 2, names: "region pop share", types: "TEXT INTEGER REAL", ..BASE },
        Case { name: "a count line in place of a header", input: "3\n1,2.5\n2,3.5\n3,4.5\n", skip: 1, has_header: false, names: "c1 c2", types: "INTEGER REAL", ..BASE },
        Case { name: "R row names: header one field short", input: "x,y\n\"a\",1,2.5\n\"b\",3,4.5\n\"c\",5,6\n", index: true, names: "row_names x y", types: "TEXT INTEGER REAL", ..BASE },
        Case { name: "R row names after a preamble title", input: "My title\nx,y\nr1,1,2\nr2,3,4\n", skip: 1, index: true, names: "row_names x y", types: "TEXT INTEGER INTEGER", ..BASE },
        Case { name: "a title line is not a row-names header", input: "Title\na,b\n1,2\n3,4\n", skip: 1, names: "a b", types: "INTEGER INTEGER", ..BASE },
        Case { name: "NA in numeric columns becomes NULL", input: "a,b\n1,NA\n2,3.5\nNA,4\n", names: "a b", types: "INTEGER REAL", col_nulls: &[(0, Some(&["", "NA"])), (1, Some(&["", "NA"]))], ..BASE },
        Case { name: "NA as a country code stays text", input: "country,pop\nNA,2.5\nFR,67\nDE,83\n", names: "country pop", types: "TEXT REAL", col_nulls: &[(0, None), (1, None)], ..BASE },
        Case { name: "a column of only NA stays text", input: "a,b\nNA,1\nNA,2\n", names: "a b", types: "TEXT INTEGER", col_nulls: &[(0, None)], ..BASE },
        Case { name: "N/A and NULL tokens", input: "a,b\nN/A,x\n5,NULL\n6,y\n", names: "a b", types: "INTEGER TEXT", col_nulls: &[(0, Some(&["", "N/A"])), (1, None)], ..BASE },
        Case { name: "dates", input: "d,v\n2024-01-05,1\n2024-02-29,2\n", names: "d v", types: "DATE INTEGER", ..BASE },
        Case { name: "a date that does not exist is text", input: "d,v\n2023-02-29,1\n2024-01-05,2\n", names: "d v", types: "TEXT INTEGER", ..BASE },
        Case { name: "timestamps, T or space, zone", input: "t,v\n2024-01-05 10:30:00,1\n2024-01-05T11:00:00.5Z,2\n2024-01-06T00:00+02:00,3\n", names: "t v", types: "TIMESTAMP INTEGER", ..BASE },
        Case { name: "dates and timestamps mixed", input: "t\n2024-01-05\n2024-01-05 10:30\n", names: "t", types: "TIMESTAMP", ..BASE },
        Case { name: "booleans", input: "ok,n\ntrue,1\nFALSE,2\nTrue,3\n", names: "ok n", types: "BOOLEAN INTEGER", ..BASE },
        Case { name: "leading zeros stay text", input: "zip,n\n02134,1\n10001,2\n", names: "zip n", types: "TEXT INTEGER", ..BASE },
        Case { name: "integers past 64 bits stay text", input: "acct,n\n12345678901234567890123,1\n5,2\n", names: "acct n", types: "TEXT INTEGER", ..BASE },
        Case { name: "space-padded numbers are numbers, trimmed", input: "a,b\n .01138,1\n 2.5 ,2\n3,3\n", names: "a b", types: "REAL INTEGER", trim: &[0], ..BASE },
        Case { name: "padding around text stays text", input: "a,b\n x,1\ny ,2\n", names: "a b", types: "TEXT INTEGER", ..BASE },
        Case { name: "TSV: tab, quotes are data", input: "a\tb\n\"x\t1\ny\"\t2\n", tsv: true, delimiter: '\t', quote: None, names: "a b", types: "TEXT INTEGER", ..BASE },
        Case { name: "blank lines are not records", input: "a,b\n\n1,2\n\n3,4\n", names: "a b", types: "INTEGER INTEGER", ..BASE },
        Case { name: "--null given: exactly those, everywhere", input: "a,b\nNA,x\n1,NA\n", nulls: Some(&["NA"]), names: "a b", types: "INTEGER TEXT", col_nulls: &[(0, None), (1, None)], ..BASE },
        Case { name: "--no-header forces data", input: "a,b\nx,y\n", header: Some(false), has_header: false, names: "c1 c2", types: "TEXT TEXT", ..BASE },
        Case { name: "--header forces a header over numbers", input: "2019,2020\n5,6\n7,8\n", header: Some(true), names: "2019 2020", types: "INTEGER INTEGER", ..BASE },
        Case { name: "numeric header names look like data (use --header)", input: "2019,2020\n5,6\n7,8\n", has_header: false, names: "c1 c2", types: "INTEGER INTEGER", ..BASE },
        Case { name: "duplicate header names are renamed", input: "a,A,b\n1,2,3\n", names: "a A_2 b", types: "INTEGER INTEGER INTEGER", ..BASE },
        // Headers as real files write them (issue 22).
        Case { name: "R write.csv: an empty first name over row names, text columns", input: "\"\",\"class\",\"age\",\"sex\",\"survived\"\n\"1\",\"1st class\",\"adult\",\"man\",\"yes\"\n\"2\",\"3rd class\",\"child\",\"woman\",\"no\"\n", names: "c1 class age sex survived", types: "INTEGER TEXT TEXT TEXT TEXT", ..BASE },
        Case { name: "a cross-table whose column names are years, over a text first column", input: "\"\",\"1940\",\"1945\"\n\"Agriculture\",12,15\n\"Industry\",30,28\n", names: "c1 1940 1945", types: "TEXT INTEGER INTEGER", ..BASE },
        Case { name: "years as names, unquoted, over a text first column with an empty corner", input: ",1940,1945\nAgriculture,12,15\nIndustry,30,28\n", has_header: false, names: "c1 c2 c3", types: "TEXT INTEGER INTEGER", ..BASE },
        Case { name: "quoted years above bare numbers are names", input: "\"2019\",\"2020\"\n5,6\n7,8\n", names: "2019 2020", types: "INTEGER INTEGER", ..BASE },
        Case { name: "quoted numbers above quoted numbers are data", input: "\"2019\",\"2020\"\n\"5\",\"6\"\n", has_header: false, names: "c1 c2", types: "INTEGER INTEGER", ..BASE },
        Case { name: "a row missing its first value is data, not a header", input: ",1,2\na,3,4\nb,5,6\n", has_header: false, names: "c1 c2 c3", types: "TEXT INTEGER INTEGER", ..BASE },
        Case { name: "a header ending with a delimiter, after notes", input: "Notes: survey 2024\nSource: agency\nname,age,city,\nalice,30,paris\nbob,25,rome\n", skip: 2, names: "name age city", types: "TEXT INTEGER TEXT", ..BASE },
        Case { name: "a header ending with a delimiter, no notes", input: "name,age,\nalice,30\nbob,25\n", names: "name age", types: "TEXT INTEGER", ..BASE },
        Case { name: "records ending with a delimiter the header lacks are not row names", input: "a,b\n1,2,\n3,4,\n", names: "a b c3", types: "INTEGER INTEGER TEXT", ..BASE },
        Case { name: "R row names are still row names", input: "\"x\",\"y\"\n\"a\",1,\n\"b\",2,5\n", index: true, names: "row_names x y", types: "TEXT INTEGER INTEGER", ..BASE },
        Case { name: "a file of one numeric line is data", input: "1,2.5,3\n", has_header: false, names: "c1 c2 c3", types: "INTEGER REAL INTEGER", ..BASE },
        Case { name: "a file of one line of names is a header", input: "a,b,c\n", names: "a b c", types: "TEXT TEXT TEXT", ..BASE },
        Case { name: "one column", input: "n\n1\n2\n", names: "n", types: "INTEGER", ..BASE },
        Case { name: "CRLF and lone CR line ends", input: "a;b\r\n1;x\r2;y\r", delimiter: ';', names: "a b", types: "INTEGER TEXT", ..BASE },
    ]
}

#[test]
fn the_dialect_header_and_types_table() {
    let cases = cases();
    assert!(cases.len() >= 20);
    for c in cases {
        let opts = Options {
            format: if c.tsv { Format::Tsv } else { Format::Csv },
            delimiter: None,
            header: c.header,
            nulls: c.nulls.map(|n| n.iter().map(|s| s.to_string()).collect()),
            types_text: false,
        };
        let p = sniff(c.input.as_bytes(), true, &[], &opts)
            .unwrap_or_else(|e| panic!("{}: {e}", c.name));
        let names: Vec<&str> = p.columns.iter().map(|c| c.name.as_str()).collect();
        let types: Vec<&str> = p.columns.iter().map(|c| c.ty.sql()).collect();
        let got = (p.delimiter, p.quote, p.header, p.skip_rows, p.index_column);
        let want = (c.delimiter, c.quote, c.has_header, c.skip, c.index);
        assert_eq!(
            got, want,
            "{}: (delimiter, quote, header, skip, index)\n{p:#?}",
            c.name
        );
        assert_eq!(names.join(" "), c.names, "{}: names", c.name);
        assert_eq!(types.join(" "), c.types, "{}: types\n{:?}", c.name, p.notes);
        for (i, want) in c.col_nulls {
            let want = want.map(|w| w.iter().map(|s| s.to_string()).collect::<Vec<_>>());
            assert_eq!(p.columns[*i].nulls, want, "{}: nulls of column {i}", c.name);
        }
        let trimmed: Vec<usize> = (0..p.columns.len())
            .filter(|&i| p.columns[i].trim)
            .collect();
        assert_eq!(trimmed, c.trim, "{}: trimmed columns", c.name);
        // The plan survives JSON as `import --plan` reads it.
        let back: SniffPlan = serde_json::from_str(&serde_json::to_string(&p).unwrap()).unwrap();
        assert_eq!(back, p, "{}: JSON round trip", c.name);
    }
}

#[test]
fn types_come_from_the_middle_and_end_of_a_file_too() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("big.csv");
    let mut body = String::from("id,v\n");
    let mut i = 0u64;
    while body.len() < 2 * HEAD_BYTES + 2 * REGION_BYTES {
        body.push_str(&format!("{i},{}\n", i % 97));
        i += 1;
    }
    body.push_str(&format!("{i},not a number\n"));
    std::fs::write(&path, &body).unwrap();
    let p = path.to_str().unwrap();
    let mut input = source::open(p).unwrap();
    let opts = options(Format::Csv, None, false, false, &[], false).unwrap();
    let plan = sniff_input(&mut input, p, &opts).unwrap();
    let sampled = plan.sampled.clone().unwrap();
    assert_eq!(sampled.places, ["start", "middle", "end"]);
    assert_eq!(plan.columns[0].ty, ColType::Integer);
    assert_eq!(plan.columns[1].ty, ColType::Text, "the last record is text");
    // The input is whole again: the first record is the header.
    let mut all = Vec::new();
    input.reader.read_to_end(&mut all).unwrap();
    assert_eq!(all, body.as_bytes());
    // Regions start at a record start.
    for r in read_regions(p, HEAD_BYTES) {
        let first = r.bytes.split(|&c| c == b'\n').next().unwrap();
        let s = std::str::from_utf8(first).unwrap();
        let (a, _) = s.split_once(',').unwrap();
        assert!(
            a.parse::<u64>().is_ok(),
            "{} starts mid-record: {s:?}",
            r.place
        );
    }
}

#[test]
fn a_plan_from_a_file_is_checked() {
    let p = sniff(
        b"a,b\n1,2\n",
        true,
        &[],
        &options(Format::Csv, None, false, false, &[], false).unwrap(),
    )
    .unwrap();
    assert!(p.validate().is_ok());
    let mut bad = p.clone();
    bad.delimiter = '\n';
    assert!(bad.validate().unwrap_err().contains("delimiter"));
    let mut bad = p.clone();
    bad.quote = Some(',');
    assert!(bad.validate().unwrap_err().contains("quote"));
    let mut bad = p.clone();
    bad.columns.clear();
    assert!(bad.validate().unwrap_err().contains("columns"));
    assert!(type_overrides(&["a=text".into()]).unwrap()[0].1 == ColType::Text);
    assert!(type_overrides(&["a".into()]).is_err());
    assert!(type_overrides(&["a=uuid".into()])
        .unwrap_err()
        .to_string()
        .contains("uuid"));
}

#[test]
fn zst_names_give_the_format_and_the_table() {
    assert_eq!(
        source::table_stem("data/trips.csv.zst").as_deref(),
        Some("trips")
    );
    assert_eq!(Format::from_name("x.tsv.zst"), Some(Format::Tsv));
    assert_eq!(Format::from_name("x.csv.gz"), Some(Format::Csv));
}

#[test]
fn iso_dates_and_timestamps() {
    /// Asserts that `is` takes each of `ok` and refuses each of `bad`.
    fn check(is: fn(&[u8]) -> bool, ok: &[&str], bad: &[&str]) {
        for s in ok {
            assert!(is(s.as_bytes()), "{s}");
        }
        for s in bad {
            assert!(!is(s.as_bytes()), "{s}");
        }
    }
    check(
        is_iso_date,
        &["2024-01-05", "2000-02-29", "1999-12-31"],
        &[
            "2023-02-29",
            "1900-02-29",
            "2024-13-01",
            "2024-00-10",
            "2024-1-05",
            "20240105",
            "2024-01-05 ",
        ],
    );
    check(
        is_iso_timestamp,
        &[
            "2024-01-05 10:30",
            "2024-01-05T10:30:59",
            "2024-01-05T10:30:59.123Z",
            "2024-01-05 23:59:00-05:00",
        ],
        &[
            "2024-01-05",
            "2024-01-05 24:00",
            "2024-01-05T10:60",
            "2024-01-05T10:30:00.",
            "2024-01-05T10:30Q",
        ],
    );
}
