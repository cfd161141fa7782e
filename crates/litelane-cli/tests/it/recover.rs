//! `litelane recover`, `doctor --integrity` and `backup`, on databases
//! damaged on purpose, run as a child process.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use rusqlite::Connection;

use crate::common::run;

const PAGE: u64 = 4096;
const ITEMS: i64 = 3000;
const NOTES: i64 = 3000;
const DOCS: i64 = 5;

fn stdout_json(o: &Output) -> serde_json::Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
        panic!(
            "not one JSON object ({e}): stdout {} stderr {}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        )
    })
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// The fixture: `items` (3000 rows, ~25 a page, an index on `name`), a
/// small table, a WITHOUT ROWID table of 3000 rows, a table of rows that
/// spill onto overflow pages, a view and a trigger; a dropped table leaves
/// free pages. Rollback journal, 4 KiB pages.
fn fixture(path: &Path) {
    let c = Connection::open(path).unwrap();
    c.execute_batch(&format!(
        "PRAGMA page_size = {PAGE};
         CREATE TABLE items(id INTEGER PRIMARY KEY, name TEXT NOT NULL, qty INTEGER);
         CREATE TABLE trash(x);
         WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < {ITEMS})
           INSERT INTO items SELECT i, printf('item-%05d-%s', i, hex(zeroblob(60))), i * 7 FROM s;
         INSERT INTO trash SELECT randomblob(3000) FROM items LIMIT 20;
         CREATE TABLE small(x TEXT);
         INSERT INTO small VALUES ('a'), ('b'), ('c');
         CREATE TABLE notes(k TEXT PRIMARY KEY, v INTEGER) WITHOUT ROWID;
         INSERT INTO notes SELECT 'k' || id, id FROM items WHERE id <= {NOTES};
         CREATE TABLE docs(id INTEGER PRIMARY KEY, body BLOB);
         INSERT INTO docs SELECT id, zeroblob(10000) FROM items WHERE id <= {DOCS};
         CREATE INDEX items_name ON items(name);
         CREATE VIEW big AS SELECT * FROM items WHERE qty > 100;
         CREATE TRIGGER small_log AFTER INSERT ON small BEGIN SELECT 1; END;
         DROP TABLE trash;"
    ))
    .unwrap();
}

/// Pages of an object by kind (`leaf`, `internal`), from the dbstat table.
fn pages_of(path: &Path, name: &str, kind: &str) -> Vec<u64> {
    let c = Connection::open(path).unwrap();
    let mut st = c
        .prepare("SELECT pageno FROM dbstat WHERE name = ?1 AND pagetype = ?2 ORDER BY pageno")
        .unwrap();
    st.query_map([name, kind], |r| r.get::<_, i64>(0))
        .unwrap()
        .map(|r| r.unwrap() as u64)
        .collect()
}

fn varint(b: &[u8]) -> (i64, usize) {
    let mut v: u64 = 0;
    for (i, &x) in b.iter().enumerate().take(9) {
        if i == 8 {
            return (((v << 8) | x as u64) as i64, 9);
        }
        v = (v << 7) | (x & 0x7f) as u64;
        if x & 0x80 == 0 {
            return (v as i64, i + 1);
        }
    }
    (v as i64, 9)
}

/// The rowids stored on a table leaf page (parsed from the file).
fn rowids_on_page(path: &Path, page: u64) -> Vec<i64> {
    let f = std::fs::read(path).unwrap();
    let p = &f[((page - 1) * PAGE) as usize..(page * PAGE) as usize];
    assert_eq!(p[0], 0x0d, "page {page} is not a table leaf");
    let n = u16::from_be_bytes([p[3], p[4]]) as usize;
    (0..n)
        .map(|i| {
            let off = u16::from_be_bytes([p[8 + 2 * i], p[9 + 2 * i]]) as usize;
            let (_, a) = varint(&p[off..]);
            varint(&p[off + a..]).0
        })
        .collect()
}

fn zero_page(path: &Path, page: u64) {
    let mut f = std::fs::read(path).unwrap();
    let at = ((page - 1) * PAGE) as usize;
    f[at..at + PAGE as usize].fill(0);
    std::fs::write(path, f).unwrap();
}

fn items_ids(path: &Path) -> BTreeSet<i64> {
    let c = Connection::open(path).unwrap();
    let mut st = c.prepare("SELECT id, name, qty FROM items").unwrap();
    st.query_map([], |r| {
        let id: i64 = r.get(0)?;
        let name: String = r.get(1)?;
        let qty: i64 = r.get(2)?;
        // Every recovered row is exactly what was written.
        assert_eq!(name, format!("item-{id:05}-{}", "00".repeat(60)));
        assert_eq!(qty, id * 7);
        Ok(id)
    })
    .unwrap()
    .map(|r| r.unwrap())
    .collect()
}

fn count(path: &Path, sql: &str) -> i64 {
    Connection::open(path)
        .unwrap()
        .query_row(sql, [], |r| r.get(0))
        .unwrap()
}

/// One kind of damage, what it does to the file, and what must come back.
struct Case {
    name: &'static str,
    damage: fn(&Path) -> Expect,
}

/// What `recover` must report for a case.
struct Expect {
    /// Exactly these `items` ids come back.
    items: BTreeSet<i64>,
    /// `items` status.
    items_status: &'static str,
    /// The header was rebuilt.
    header_repaired: bool,
    /// Overall outcome.
    outcome: &'static str,
    /// `doctor --integrity`: the kind of damage it must name, and the
    /// object, and a word of its command.
    doctor: Option<(&'static str, Option<&'static str>, &'static str)>,
    /// The other tables: (name, status, rows recovered); None: untouched
    /// (complete, every row).
    others: Option<Vec<(&'static str, &'static str, i64)>>,
}

fn untouched() -> Vec<(&'static str, &'static str, i64)> {
    vec![
        ("small", "complete", 3),
        ("notes", "complete", NOTES),
        ("docs", "complete", DOCS),
    ]
}

fn all_items() -> BTreeSet<i64> {
    (1..=ITEMS).collect()
}

fn zero_items_leaf(db: &Path) -> Expect {
    let leaves = pages_of(db, "items", "leaf");
    let victim = leaves[leaves.len() / 2];
    let lost: BTreeSet<i64> = rowids_on_page(db, victim).into_iter().collect();
    assert!(lost.len() > 10);
    zero_page(db, victim);
    Expect {
        items: all_items().difference(&lost).copied().collect(),
        items_status: "partial",
        header_repaired: false,
        outcome: "partial",
        doctor: Some(("table", Some("items"), "litelane recover")),
        others: None,
    }
}

fn zero_first_items_leaf(db: &Path) -> Expect {
    let leaves = pages_of(db, "items", "leaf");
    let lost: BTreeSet<i64> = rowids_on_page(db, leaves[0]).into_iter().collect();
    zero_page(db, leaves[0]);
    Expect {
        items: all_items().difference(&lost).copied().collect(),
        items_status: "partial",
        header_repaired: false,
        outcome: "partial",
        doctor: Some(("table", Some("items"), "litelane recover")),
        others: None,
    }
}

fn zero_header(db: &Path) -> Expect {
    let mut f = std::fs::read(db).unwrap();
    f[..100].fill(0);
    std::fs::write(db, f).unwrap();
    Expect {
        items: all_items(),
        items_status: "complete",
        header_repaired: true,
        outcome: "partial",
        doctor: Some(("file", None, "litelane recover")),
        others: None,
    }
}

fn truncate(db: &Path) -> Expect {
    // Keep the file up to the middle of items' leaves: the later leaves
    // (and everything after them) are gone.
    let leaves = pages_of(db, "items", "leaf");
    let keep_pages = leaves[leaves.len() / 2];
    let kept: BTreeSet<i64> = leaves
        .iter()
        .filter(|&&p| p <= keep_pages)
        .flat_map(|&p| rowids_on_page(db, p))
        .collect();
    let f = std::fs::OpenOptions::new().write(true).open(db).unwrap();
    f.set_len(keep_pages * PAGE).unwrap();
    Expect {
        items: kept,
        items_status: "partial",
        header_repaired: false,
        outcome: "partial",
        // SQLite refuses to open a file shorter than its header says.
        doctor: Some(("file", None, "litelane recover")),
        // The tables made after items lived past the cut.
        others: Some(vec![]),
    }
}

fn zero_index_leaf(db: &Path) -> Expect {
    let leaves = pages_of(db, "items_name", "leaf");
    zero_page(db, leaves[leaves.len() / 2]);
    Expect {
        items: all_items(),
        items_status: "complete",
        header_repaired: false,
        outcome: "complete",
        doctor: Some(("index", Some("items_name"), "REINDEX")),
        others: None,
    }
}

fn freelist_loop(db: &Path) -> Expect {
    let mut f = std::fs::read(db).unwrap();
    let trunk = u32::from_be_bytes([f[32], f[33], f[34], f[35]]) as u64;
    assert!(trunk > 0, "the fixture has free pages");
    // The trunk's "next trunk" pointer points back to itself, and the
    // header counts more free pages than the trunk lists (otherwise SQLite
    // stops at the count and never follows the loop).
    let at = ((trunk - 1) * PAGE) as usize;
    f[at..at + 4].copy_from_slice(&(trunk as u32).to_be_bytes());
    let n = u32::from_be_bytes([f[36], f[37], f[38], f[39]]);
    f[36..40].copy_from_slice(&(n + 10).to_be_bytes());
    std::fs::write(db, f).unwrap();
    Expect {
        items: all_items(),
        items_status: "complete",
        header_repaired: false,
        outcome: "complete",
        doctor: Some(("freelist", None, "VACUUM")),
        others: None,
    }
}

fn no_damage(_db: &Path) -> Expect {
    Expect {
        items: all_items(),
        items_status: "complete",
        header_repaired: false,
        outcome: "complete",
        doctor: None,
        others: None,
    }
}

fn zero_items_root(db: &Path) -> Expect {
    let root = count(
        db,
        "SELECT rootpage FROM sqlite_schema WHERE name = 'items'",
    ) as u64;
    assert_eq!(
        pages_of(db, "items", "internal"),
        vec![root],
        "one interior page"
    );
    zero_page(db, root);
    Expect {
        items: BTreeSet::new(),
        items_status: "lost",
        header_repaired: false,
        outcome: "partial",
        doctor: Some(("table", Some("items"), "litelane recover")),
        others: None,
    }
}

fn zero_without_rowid_leaf(db: &Path) -> Expect {
    let leaves = pages_of(db, "notes", "leaf");
    assert!(leaves.len() > 3);
    let victim = leaves[leaves.len() / 2];
    let f = std::fs::read(db).unwrap();
    let at = ((victim - 1) * PAGE) as usize;
    assert_eq!(f[at], 0x0a, "an index-b-tree leaf");
    let cells = u16::from_be_bytes([f[at + 3], f[at + 4]]) as i64;
    zero_page(db, victim);
    Expect {
        items: all_items(),
        items_status: "complete",
        header_repaired: false,
        outcome: "partial",
        doctor: Some(("table", Some("notes"), "litelane recover")),
        others: Some(vec![
            ("small", "complete", 3),
            ("notes", "partial", NOTES - cells),
            ("docs", "complete", DOCS),
        ]),
    }
}

fn zero_first_overflow_page(db: &Path) -> Expect {
    // The lowest overflow page is the first of a chain: zeroed, the chain
    // ends early and that one row cannot be read.
    let overflow = pages_of(db, "docs", "overflow");
    zero_page(db, overflow[0]);
    Expect {
        items: all_items(),
        items_status: "complete",
        header_repaired: false,
        outcome: "partial",
        doctor: Some(("table", Some("docs"), "litelane recover")),
        others: Some(vec![
            ("small", "complete", 3),
            ("notes", "complete", NOTES),
            ("docs", "partial", DOCS - 1),
        ]),
    }
}

const CASES: &[Case] = &[
    Case {
        name: "no damage",
        damage: no_damage,
    },
    Case {
        name: "a table leaf page zeroed",
        damage: zero_items_leaf,
    },
    Case {
        name: "the first table leaf zeroed",
        damage: zero_first_items_leaf,
    },
    Case {
        name: "the 100-byte header zeroed",
        damage: zero_header,
    },
    Case {
        name: "the file truncated",
        damage: truncate,
    },
    Case {
        name: "an index leaf page zeroed",
        damage: zero_index_leaf,
    },
    Case {
        name: "a loop in the free-page list",
        damage: freelist_loop,
    },
    Case {
        name: "the table's root page zeroed",
        damage: zero_items_root,
    },
    Case {
        name: "a WITHOUT ROWID leaf zeroed",
        damage: zero_without_rowid_leaf,
    },
    Case {
        name: "one row's overflow page zeroed",
        damage: zero_first_overflow_page,
    },
];

fn dir_listing(dir: &Path) -> BTreeSet<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect()
}

#[test]
fn recover_salvages_what_each_kind_of_damage_leaves() {
    for case in CASES {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("damaged.db");
        fixture(&db);
        let expect = (case.damage)(&db);
        let before = std::fs::read(&db).unwrap();
        let out = dir.path().join("out").join("recovered.db");
        std::fs::create_dir(out.parent().unwrap()).unwrap();
        let files_before = dir_listing(dir.path());
        let o = run(&["recover", s(&db), s(&out), "--json"]);
        let name = case.name;
        assert!(
            o.status.success(),
            "{name}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let r = stdout_json(&o);
        // The damaged file is only read.
        assert_eq!(std::fs::read(&db).unwrap(), before, "{name}: DB changed");
        assert_eq!(
            dir_listing(dir.path()),
            files_before,
            "{name}: files appeared beside DB"
        );
        assert_eq!(
            dir_listing(out.parent().unwrap()),
            BTreeSet::from(["recovered.db".to_string()]),
            "{name}: temporary files left beside OUT"
        );
        assert_eq!(r["outcome"], expect.outcome, "{name}: {r}");
        assert_eq!(
            !r["header_repairs"].as_array().unwrap().is_empty(),
            expect.header_repaired,
            "{name}: {r}"
        );
        assert_eq!(r["out_integrity"], serde_json::json!(["ok"]), "{name}");
        let t = |n: &str| {
            r["tables"]
                .as_array()
                .unwrap()
                .iter()
                .find(|t| t["name"] == n)
                .unwrap_or_else(|| panic!("{name}: no report for {n}: {r}"))
                .clone()
        };
        let items = t("items");
        assert_eq!(items["status"], expect.items_status, "{name}: {items}");
        let got = items_ids(&out);
        let missing: Vec<_> = expect.items.difference(&got).collect();
        let extra: Vec<_> = got.difference(&expect.items).collect();
        assert!(
            missing.is_empty() && extra.is_empty(),
            "{name}: {} items missing (first {:?}), {} unexpected",
            missing.len(),
            missing.first(),
            extra.len()
        );
        assert_eq!(items["rows_recovered"], got.len() as u64, "{name}");
        // Every lost id lies in a reported lost range.
        let ranges: Vec<(i64, i64)> = items["lost_rowid_ranges"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| (p[0].as_i64().unwrap(), p[1].as_i64().unwrap()))
            .collect();
        for id in all_items().difference(&got) {
            assert!(
                ranges.iter().any(|(a, b)| a <= id && id <= b),
                "{name}: lost id {id} not in a reported range {ranges:?}"
            );
        }
        if expect.items == all_items() {
            assert!(ranges.is_empty(), "{name}: {ranges:?}");
        }
        // The other tables.
        for (table, status, rows) in expect.others.clone().unwrap_or_else(untouched) {
            let rep = t(table);
            assert_eq!(rep["status"], status, "{name}: {rep}");
            assert_eq!(rep["rows_recovered"], rows, "{name}: {rep}");
            assert_eq!(count(&out, &format!("SELECT count(*) FROM {table}")), rows);
            if table == "docs" && status == "partial" {
                // One row's content unreadable, its rowid known.
                assert_eq!(rep["rows_unreadable"], 1, "{name}: {rep}");
                let r = &rep["lost_rowid_ranges"][0];
                assert_eq!(r[0], r[1], "{name}: {rep}");
                let lost = r[0].as_i64().unwrap();
                assert_eq!(
                    count(
                        &out,
                        &format!("SELECT count(*) FROM docs WHERE id = {lost}")
                    ),
                    0
                );
                assert_eq!(
                    count(&out, "SELECT count(*) FROM docs WHERE length(body) = 10000"),
                    DOCS - 1
                );
            }
            if table == "notes" && status == "partial" {
                assert_eq!(rep["rows_lost_in_key_order"], true, "{name}: {rep}");
            }
        }
        // The index is rebuilt from the recovered rows, and used.
        let objects = r["objects"].as_array().unwrap();
        for (kind, obj) in [
            ("index", "items_name"),
            ("view", "big"),
            ("trigger", "small_log"),
        ] {
            assert!(
                objects
                    .iter()
                    .any(|o| o["kind"] == kind && o["name"] == obj && o["created"] == true),
                "{name}: {kind} {obj} not recreated: {r}"
            );
        }
        assert_eq!(
            count(
                &out,
                "SELECT count(*) FROM items INDEXED BY items_name WHERE name > ''"
            ),
            got.len() as i64
        );
        // Human-readable output says the same.
        let out2 = dir.path().join("out").join("again.db");
        let o = run(&["recover", s(&db), s(&out2)]);
        let text = String::from_utf8_lossy(&o.stdout);
        assert!(
            text.contains(&format!("recovery {}", expect.outcome)),
            "{name}: {text}"
        );
        assert!(text.contains("table \"items\""), "{name}: {text}");
    }
}

#[test]
fn doctor_integrity_names_what_is_damaged_and_what_to_do() {
    for case in CASES {
        for quick in [false, true] {
            let dir = tempfile::tempdir().unwrap();
            let db = dir.path().join("damaged.db");
            fixture(&db);
            let expect = (case.damage)(&db);
            let before = std::fs::read(&db).unwrap();
            let mut args = vec!["doctor", s(&db), "--integrity", "--json"];
            if quick {
                args.push("--quick");
            }
            let o = run(&args);
            let name = format!("{} (quick: {quick})", case.name);
            let r = stdout_json(&o);
            assert_eq!(std::fs::read(&db).unwrap(), before, "{name}: DB changed");
            let integ = &r["integrity"];
            assert_eq!(
                integ["check"],
                if quick {
                    "quick_check"
                } else {
                    "integrity_check"
                }
            );
            match expect.doctor {
                None => {
                    assert!(o.status.success(), "{name}: {integ}");
                    assert_eq!(integ["ok"], true, "{name}: {integ}");
                    // One slice per table (4), plus the whole-file pass
                    // (free list, unused pages) of a small file.
                    assert_eq!(integ["slices"], 5, "{name}: {integ}");
                    assert_eq!(integ["not_checked"], serde_json::json!([]));
                }
                Some((kind, object, command_word)) => {
                    assert!(!o.status.success(), "{name}: damage must fail the command");
                    let err = String::from_utf8_lossy(&o.stderr);
                    assert!(err.contains("is damaged"), "{name}: {err}");
                    assert_eq!(integ["ok"], false, "{name}");
                    let damage = integ["damage"].as_array().unwrap();
                    let hit = damage
                        .iter()
                        .find(|d| d["kind"] == kind && object.is_none_or(|n| d["name"] == n));
                    let hit =
                        hit.unwrap_or_else(|| panic!("{name}: no {kind} {object:?} in {integ}"));
                    assert!(
                        hit["command"].as_str().unwrap().contains(command_word),
                        "{name}: {hit}"
                    );
                    assert!(!hit["message"].as_str().unwrap().is_empty());
                    if kind == "index" {
                        // Index-only damage: no table is blamed.
                        assert!(
                            damage.iter().all(|d| d["kind"] != "table"),
                            "{name}: {integ}"
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn doctor_integrity_runs_beside_live_writers() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("live.db");
    fixture(&path);
    let db = litelane::Database::open(&path, litelane::Options::default()).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let db = db.clone();
        let stop = Arc::clone(&stop);
        std::thread::spawn(move || {
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                db.write(|tx| Ok(tx.execute("INSERT INTO small VALUES ('live')", [])?))
                    .unwrap();
                n += 1;
            }
            n
        })
    };
    let count_live = || count(&path, "SELECT count(*) FROM small WHERE x = 'live'");
    let before = count_live();
    let o = run(&["doctor", s(&path), "--integrity", "--json"]);
    let after = count_live();
    stop.store(true, Ordering::Relaxed);
    let written = writer.join().unwrap();
    let r = stdout_json(&o);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(r["integrity"]["ok"], true, "{r}");
    assert_eq!(r["journal_mode"], "wal");
    assert!(
        after > before,
        "no commit while doctor ran ({written} in all)"
    );
}

#[test]
fn recover_refuses_outputs_that_would_destroy_something() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("d.db");
    fixture(&db);
    zero_items_leaf(&db);
    let link = dir.path().join("link.db");
    std::fs::hard_link(&db, &link).unwrap();
    let taken = dir.path().join("taken.db");
    std::fs::write(&taken, b"user's file").unwrap();
    let sub = dir.path().join("sub");
    std::fs::create_dir(&sub).unwrap();
    let same_spelled_differently: PathBuf = dir.path().join(".").join("d.db");
    let db_bytes = std::fs::read(&db).unwrap();
    let cases: &[(&Path, &[&str], &str)] = &[
        (&db, &[], "itself"),
        (&db, &["--force"], "itself"),
        (&same_spelled_differently, &["--force"], "itself"),
        (&link, &["--force"], "itself"),
        (&taken, &[], "already exists"),
        (&sub, &["--force"], "directory"),
    ];
    for (out, extra, words) in cases {
        let mut args = vec!["recover", s(&db), s(out)];
        args.extend_from_slice(extra);
        let o = run(&args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{out:?} {extra:?} must be refused");
        assert!(err.contains(words), "{out:?}: {err}");
        assert!(
            err.contains(&*out.file_name().unwrap().to_string_lossy()),
            "{err}"
        );
        assert_eq!(std::fs::read(&db).unwrap(), db_bytes);
    }
    assert_eq!(std::fs::read(&taken).unwrap(), b"user's file");
    // --force replaces a file that is not the database.
    let o = run(&["recover", s(&db), s(&taken), "--force"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(count(&taken, "SELECT count(*) FROM items") > 0);
    // A file that is not a database at all: nothing recovered, OUT not made.
    let junk = dir.path().join("junk.db");
    std::fs::write(&junk, vec![0x5a; 8192]).unwrap();
    let out = dir.path().join("from-junk.db");
    let o = run(&["recover", s(&junk), s(&out)]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("nothing could be recovered"), "{err}");
    assert!(!out.exists());
    // A missing DB names the path.
    let o = run(&["recover", s(&dir.path().join("nope.db")), s(&out)]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("nope.db"));
}

#[test]
fn backup_command_copies_a_live_database_and_refuses_to_overwrite() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("live.db");
    fixture(&path);
    let db = litelane::Database::open(&path, litelane::Options::default()).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let db = db.clone();
        let stop = Arc::clone(&stop);
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                db.write(|tx| {
                    tx.execute("INSERT INTO small VALUES ('live')", [])?;
                    tx.execute("UPDATE notes SET v = v + 1 WHERE k = 'k1'", [])?;
                    Ok(())
                })
                .unwrap();
            }
        })
    };
    let out = dir.path().join("copy.db");
    let o = run(&[
        "backup",
        s(&path),
        s(&out),
        "--pages-per-step",
        "7",
        "--json",
    ]);
    stop.store(true, Ordering::Relaxed);
    writer.join().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let r = stdout_json(&o);
    assert_eq!(r["integrity_check"], serde_json::json!(["ok"]));
    assert!(r["steps"].as_u64().unwrap() > 10, "{r}");
    // Consistent: each commit added one 'live' row and one to k1's v.
    let live = count(&out, "SELECT count(*) FROM small WHERE x = 'live'");
    let v = count(&out, "SELECT v FROM notes WHERE k = 'k1'");
    assert_eq!(v - 1, live, "copy mixes two moments");
    assert_eq!(items_ids(&out), all_items());
    // Refusals: the database itself, a non-empty file without --force.
    let o = run(&["backup", s(&path), s(&path), "--force"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("itself"));
    let copy_bytes = std::fs::read(&out).unwrap();
    let o = run(&["backup", s(&path), s(&out)]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("not empty"));
    assert_eq!(std::fs::read(&out).unwrap(), copy_bytes);
    let o = run(&["backup", s(&path), s(&out), "--force"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = run(&["backup", s(&path), s(&out), "--pages-per-step", "0"]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("--pages-per-step"));
}

#[test]
fn recover_includes_commits_still_in_the_wal_and_leaves_them_there() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("w.db");
    fixture(&db);
    let c = Connection::open(&db).unwrap();
    c.execute_batch(
        "PRAGMA journal_mode = WAL; PRAGMA wal_autocheckpoint = 0;
         INSERT INTO small VALUES ('only in the wal');",
    )
    .unwrap();
    let wal = dir.path().join("w.db-wal");
    assert!(std::fs::metadata(&wal).unwrap().len() > 0);
    let db_bytes = std::fs::read(&db).unwrap();
    let wal_bytes = std::fs::read(&wal).unwrap();
    // The writer is still open (its commits not checkpointed).
    let out = dir.path().join("r.db");
    let o = run(&["recover", s(&db), s(&out), "--json"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let r = stdout_json(&o);
    assert_eq!(r["outcome"], "complete", "{r}");
    assert_eq!(
        count(
            &out,
            "SELECT count(*) FROM small WHERE x = 'only in the wal'"
        ),
        1
    );
    assert_eq!(std::fs::read(&db).unwrap(), db_bytes);
    assert_eq!(std::fs::read(&wal).unwrap(), wal_bytes);
    drop(c);
}

#[test]
fn a_hostile_schema_entry_is_not_run_in_out() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("h.db");
    fixture(&db);
    let evil = dir.path().join("evil.db");
    let c = Connection::open(&db).unwrap();
    c.execute_batch("PRAGMA writable_schema = ON;").unwrap();
    c.execute(
        "UPDATE sqlite_schema SET sql = ?1 WHERE name = 'big'",
        [format!(
            "CREATE VIEW big AS SELECT 1; ATTACH '{}' AS e",
            evil.display()
        )],
    )
    .unwrap();
    c.execute(
        "UPDATE sqlite_schema SET sql = 'CREATE TRIGGER small_log AFTER INSERT ON small BEGIN SELECT 1; END; CREATE TABLE pwned(x)' WHERE name = 'small_log'",
        [],
    )
    .unwrap();
    drop(c);
    let out = dir.path().join("r.db");
    let o = run(&["recover", s(&db), s(&out), "--json"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let r = stdout_json(&o);
    assert!(!evil.exists(), "the ATTACH ran");
    assert_eq!(
        count(
            &out,
            "SELECT count(*) FROM sqlite_schema WHERE name = 'pwned'"
        ),
        0
    );
    for name in ["big", "small_log"] {
        let obj = r["objects"]
            .as_array()
            .unwrap()
            .iter()
            .find(|o| o["name"] == name)
            .unwrap_or_else(|| panic!("{name} not reported: {r}"));
        assert_eq!(obj["created"], false, "{obj}");
    }
    assert_eq!(r["outcome"], "partial");
    assert_eq!(items_ids(&out), all_items());
}

#[test]
fn autoincrement_counters_user_version_and_generated_columns_carry_over() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("a.db");
    Connection::open(&db)
        .unwrap()
        .execute_batch(
            "CREATE TABLE seq(id INTEGER PRIMARY KEY AUTOINCREMENT, x, y AS (x * 2) STORED, z AS (x + 1));
             INSERT INTO seq(x) VALUES (1), (2), (3), (4);
             DELETE FROM seq WHERE id >= 3;
             PRAGMA user_version = 42;",
        )
        .unwrap();
    let out = dir.path().join("r.db");
    let o = run(&["recover", s(&db), s(&out), "--json"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let r = stdout_json(&o);
    assert_eq!(r["outcome"], "complete", "{r}");
    assert_eq!(
        count(&out, "SELECT seq FROM sqlite_sequence WHERE name = 'seq'"),
        4
    );
    assert_eq!(count(&out, "PRAGMA user_version"), 42);
    assert_eq!(
        count(&out, "SELECT sum(y) + sum(z) FROM seq"),
        (2 + 4) + (2 + 3)
    );
    // A new row does not reuse a deleted id.
    let c = Connection::open(&out).unwrap();
    c.execute("INSERT INTO seq(x) VALUES (9)", []).unwrap();
    assert_eq!(c.last_insert_rowid(), 5);
}

#[test]
fn backup_and_recover_refuse_side_file_names_whether_or_not_they_exist() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("d.db");
    fixture(&db);
    let db_bytes = std::fs::read(&db).unwrap();
    let p = |n: &str| dir.path().join(n);
    // A stale side file beside a new OUT: the copy would be read through it.
    std::fs::write(p("stale-j.db-journal"), b"old journal").unwrap();
    std::fs::write(p("stale-w.db-wal"), b"old wal").unwrap();
    // (OUT, extra flags, stderr fragment)
    let cases: &[(&str, &[&str], &str)] = &[
        ("d.db-journal", &[], "it is the database's -journal file"),
        (
            "d.db-journal",
            &["--force"],
            "whether or not that file exists",
        ),
        ("d.db-wal", &[], "it is the database's -wal file"),
        ("d.db-shm", &["--force"], "it is the database's -shm file"),
        ("./d.db-journal", &[], "-journal file"),
        ("stale-j.db", &[], "stale-j.db-journal exists beside it"),
        (
            "stale-w.db",
            &["--force"],
            "stale-w.db-wal exists beside it",
        ),
    ];
    for command in ["backup", "recover"] {
        for (out, extra, want) in cases {
            let out_path = p(out);
            let mut args = vec![command, s(&db), s(&out_path)];
            args.extend_from_slice(extra);
            let o = run(&args);
            let err = String::from_utf8_lossy(&o.stderr);
            assert!(
                !o.status.success(),
                "{command} {out} {extra:?} must be refused"
            );
            assert!(err.contains(want), "{command} {out}: {err}");
            assert!(
                !err.contains("   "),
                "{command} {out}: a run of spaces in {err:?}"
            );
            assert!(!out_path.exists(), "{command} {out}: it was written");
            assert_eq!(std::fs::read(&db).unwrap(), db_bytes);
        }
    }
    assert_eq!(
        std::fs::read(p("stale-j.db-journal")).unwrap(),
        b"old journal"
    );
    assert_eq!(std::fs::read(p("stale-w.db-wal")).unwrap(), b"old wal");
    // The refusal of an existing destination names the flag that allows it.
    std::fs::write(p("taken.db"), b"user's file").unwrap();
    let o = run(&["backup", s(&db), s(&p("taken.db"))]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("--force"));
    assert_eq!(std::fs::read(p("taken.db")).unwrap(), b"user's file");
    // And a plain backup still works, its copy opening clean.
    let o = run(&["backup", s(&db), s(&p("copy.db"))]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(items_ids(&p("copy.db")), all_items());
}

/// Runs `litelane ARGS` and kills it after `limit`: `None` when it had to.
fn run_within(args: &[&str], limit: std::time::Duration) -> Option<Output> {
    let mut child = Command::new(env!("CARGO_BIN_EXE_litelane"))
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let start = std::time::Instant::now();
    loop {
        if child.try_wait().unwrap().is_some() {
            return Some(child.wait_with_output().unwrap());
        }
        if start.elapsed() > limit {
            child.kill().unwrap();
            child.wait().unwrap();
            return None;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// Tables whose pages interleave (inserted together, one with a UNIQUE
/// index, one WITHOUT ROWID, one with overflow pages), then the file cut at
/// every 40th of its length: a cut page read back as zeros sent the rowid
/// scan back to the table's start (a seek landing before its target), and
/// recover re-read the same rows forever, each refused by OUT as a
/// duplicate.
#[test]
fn recover_of_a_truncated_file_always_ends_and_every_row_it_keeps_is_exact() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("base.db");
    let c = Connection::open(&base).unwrap();
    c.execute_batch(
        "PRAGMA page_size = 4096;
         CREATE TABLE items(id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE,
                            qty INTEGER CHECK (qty >= 0));
         CREATE TABLE notes(k TEXT PRIMARY KEY, v INTEGER) WITHOUT ROWID;
         CREATE TABLE docs(id INTEGER PRIMARY KEY AUTOINCREMENT, body BLOB);
         CREATE TABLE plain(a, b);
         BEGIN;",
    )
    .unwrap();
    for i in 0..20_000i64 {
        c.execute("INSERT INTO items VALUES (?1 * 3, 'item' || ?1, ?1)", [i])
            .unwrap();
        c.execute(
            "INSERT INTO notes VALUES ('k' || ((?1 * 7919) % 20000) || '-' || ?1, ?1)",
            [i],
        )
        .unwrap();
        if i % 10 == 0 {
            c.execute(
                "INSERT INTO docs(body) VALUES (zeroblob(CASE ?1 % 3 WHEN 0 THEN 100 \
                 WHEN 1 THEN 3000 ELSE 9000 END))",
                [i / 10],
            )
            .unwrap();
        }
        c.execute(
            "INSERT INTO plain VALUES (?1, substr(hex(zeroblob(50)), 1, ?1 % 50))",
            [i],
        )
        .unwrap();
    }
    c.execute_batch("COMMIT").unwrap();
    drop(c);
    let bytes = std::fs::read(&base).unwrap();
    let db = dir.path().join("d.db");
    let out = dir.path().join("o.db");
    for k in 1..40 {
        let cut = bytes.len() * k / 40;
        std::fs::write(&db, &bytes[..cut]).unwrap();
        let _ = std::fs::remove_file(&out);
        let o = run_within(
            &["recover", s(&db), s(&out), "--json"],
            std::time::Duration::from_secs(60),
        )
        .unwrap_or_else(|| panic!("cut at {k}/40: recover did not end within 60 s"));
        assert!(
            o.status.success(),
            "cut at {k}/40: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let r = stdout_json(&o);
        let items = r["tables"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == "items")
            .unwrap()
            .clone();
        assert_eq!(items["rows_rejected"], 0, "cut at {k}/40: {items}");
        // Every row kept is exactly a row written, each once.
        let c = Connection::open(&out).unwrap();
        let bad: i64 = c
            .query_row(
                "SELECT count(*) FROM items WHERE id % 3 != 0 OR name != 'item' || (id / 3) \
                 OR qty != id / 3",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(bad, 0, "cut at {k}/40");
        let kept: i64 = c
            .query_row("SELECT count(*) FROM items", [], |r| r.get(0))
            .unwrap();
        assert_eq!(items["rows_recovered"], kept, "cut at {k}/40");
        // Every id not kept lies in a reported lost range.
        let ranges: Vec<(i64, i64)> = items["lost_rowid_ranges"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| (p[0].as_i64().unwrap(), p[1].as_i64().unwrap()))
            .collect();
        let got: BTreeSet<i64> = c
            .prepare("SELECT id FROM items")
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .map(|r| r.unwrap())
            .collect();
        for id in (0..20_000i64).map(|i| i * 3).filter(|id| !got.contains(id)) {
            assert!(
                ranges.iter().any(|(a, b)| *a <= id && id <= *b),
                "cut at {k}/40: lost id {id} not in a reported range {ranges:?}"
            );
        }
    }
    // No working directory left behind.
    let left: Vec<String> = dir_listing(dir.path())
        .into_iter()
        .filter(|n| n.starts_with(".litelane-recover-"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

/// SIGINT and SIGTERM stop a running recover, which removes its working
/// directory and writes no OUT; progress is shown while it runs; and a
/// working directory a killed run left behind is removed by the next run
/// (only the files recover makes, and only when no running recover holds
/// its lock).
#[test]
fn recover_shows_progress_and_leaves_no_working_directory_behind() {
    use std::io::{BufRead, BufReader};
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("big.db");
    let c = Connection::open(&db).unwrap();
    c.execute_batch(
        "CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT);
         WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < 2500000)
           INSERT INTO t SELECT i, 'value-' || i FROM s;",
    )
    .unwrap();
    drop(c);
    let scratch_dirs = || -> Vec<String> {
        dir_listing(dir.path())
            .into_iter()
            .filter(|n| n.starts_with(".litelane-recover-"))
            .collect()
    };
    for signal in ["INT", "TERM"] {
        let out = dir.path().join(format!("out-{signal}.db"));
        let mut child = Command::new(env!("CARGO_BIN_EXE_litelane"))
            .args(["recover", s(&db), s(&out)])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut err = BufReader::new(child.stderr.take().unwrap());
        let mut first = String::new();
        err.read_line(&mut first).unwrap();
        assert!(
            first.contains("litelane: recover: table \"t\":") && first.contains("rows recovered"),
            "no progress line: {first:?}"
        );
        assert_eq!(
            scratch_dirs().len(),
            1,
            "the working directory while it runs"
        );
        let k = Command::new("kill")
            .args([&format!("-{signal}"), &child.id().to_string()])
            .status()
            .unwrap();
        assert!(k.success());
        let mut rest = String::new();
        std::io::Read::read_to_string(&mut err, &mut rest).unwrap();
        let status = child.wait().unwrap();
        assert!(!status.success(), "SIG{signal}: {rest}");
        assert!(rest.contains("interrupted"), "SIG{signal}: {rest}");
        assert!(!out.exists(), "SIG{signal}: OUT was written");
        assert_eq!(scratch_dirs(), Vec::<String>::new(), "SIG{signal}");
    }
    // Left by killed runs: one with its lock free, one without a lock file
    // (an older litelane; aged past a minute), one holding a file recover
    // never makes, and one whose lock a running recover holds.
    let small = dir.path().join("small.db");
    fixture(&small);
    let mk = |name: &str, files: &[&str]| {
        let d = dir.path().join(name);
        std::fs::create_dir(&d).unwrap();
        for f in files {
            std::fs::write(d.join(f), b"x").unwrap();
        }
        d
    };
    mk(".litelane-recover-free", &["lock", "work.db", "out.db"]);
    let old = mk(".litelane-recover-old", &["work.db", "work.db-journal"]);
    let past = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
    std::fs::File::open(&old)
        .unwrap()
        .set_modified(past)
        .unwrap();
    let mine = mk(".litelane-recover-mine", &["lock", "work.db", "notes.txt"]);
    let held = mk(".litelane-recover-held", &["lock", "work.db"]);
    let lock = std::fs::OpenOptions::new()
        .write(true)
        .open(held.join("lock"))
        .unwrap();
    assert!(fs4::fs_std::FileExt::try_lock_exclusive(&lock).unwrap());
    let out = dir.path().join("out.db");
    let o = run(&["recover", s(&small), s(&out), "--json"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stderr).contains("removed 2 working directories"));
    assert_eq!(
        scratch_dirs(),
        vec![
            ".litelane-recover-held".to_string(),
            ".litelane-recover-mine".to_string()
        ]
    );
    assert_eq!(std::fs::read(mine.join("notes.txt")).unwrap(), b"x");
    assert!(mine.join("work.db").exists());
    assert!(held.join("work.db").exists());
}
