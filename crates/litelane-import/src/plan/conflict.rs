//! Recurring loads: the key (`--pk COL[,COL]`), what a row whose key is
//! already in the table does (`--on-conflict`), and the statement that does
//! it. Every name is quoted with [`litelane::quote_ident`].

use litelane::{quote_ident, Database};

use crate::error::Error;
use crate::plan::columns::ColumnPlan;
pub use crate::plan::columns::{OnConflict, Recurring};
use crate::plan::table::Existing;
use crate::values::ColType;

/// Splits `--pk a,b` into its column names; an empty name is an error.
pub fn parse_key(pk: &str) -> Result<Vec<String>, Error> {
    let names: Vec<String> = pk.split(',').map(str::to_string).collect();
    if names.iter().any(String::is_empty) {
        return Err(Error::Input(format!(
            "--pk {pk:?}: an empty column name (give COL or COL1,COL2)"
        )));
    }
    Ok(names)
}

/// Positions of the key columns among `cols` (exact name first, then
/// ignoring ASCII case, as SQLite compares names).
pub fn key_positions(
    cols: &[ColumnPlan],
    key: &[String],
    display: &str,
) -> Result<Vec<usize>, Error> {
    let mut out = Vec::with_capacity(key.len());
    for k in key {
        let i = cols
            .iter()
            .position(|c| c.name == *k)
            .or_else(|| cols.iter().position(|c| c.name.eq_ignore_ascii_case(k)))
            .ok_or_else(|| {
                Error::Input(format!(
                    "--pk {}: no such column in {display} (columns: {})",
                    quote_ident(k),
                    cols.iter()
                        .map(|c| quote_ident(&c.name))
                        .collect::<Vec<_>>()
                        .join(", ")
                ))
            })?;
        if out.contains(&i) {
            return Err(Error::Input(format!(
                "--pk names column {} twice",
                quote_ident(&cols[i].name)
            )));
        }
        out.push(i);
    }
    Ok(out)
}

/// `CREATE TABLE` with `key` (positions in `cols`) as the primary key. One
/// INTEGER column becomes the `INTEGER PRIMARY KEY` (the rowid); other keys
/// are `NOT NULL` (SQLite would otherwise let NULLs into a primary key).
pub fn create_sql(table: &str, cols: &[ColumnPlan], key: &[usize], strict: bool) -> String {
    if key.len() <= 1 {
        return crate::plan::table::create_sql(table, cols, key.first().copied(), strict);
    }
    let mut defs: Vec<String> = cols
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let nn = if key.contains(&i) { " NOT NULL" } else { "" };
            format!("{} {}{nn}", quote_ident(&c.name), c.ty.declared(strict))
        })
        .collect();
    defs.push(format!(
        "PRIMARY KEY ({})",
        key.iter()
            .map(|&i| quote_ident(&cols[i].name))
            .collect::<Vec<_>>()
            .join(", ")
    ));
    format!(
        "CREATE TABLE {} ({}){}",
        quote_ident(table),
        defs.join(", "),
        if strict { " STRICT" } else { "" }
    )
}

/// The engine's conflict handling for `on` with the key `key` (names as the
/// table spells them); the inserter builds and quotes the statement.
pub fn engine(on: OnConflict, key: &[String]) -> litelane::OnConflict {
    match on {
        OnConflict::Fail => litelane::OnConflict::Fail,
        OnConflict::Ignore => litelane::OnConflict::Ignore(key.to_vec()),
        OnConflict::Replace => litelane::OnConflict::Replace,
        OnConflict::Upsert => litelane::OnConflict::Update(key.to_vec()),
    }
}

/// The key's columns as `table` spells them; an error naming a column the
/// table lacks.
pub fn spell_key(table: &Existing, key: &[String]) -> Result<Vec<String>, Error> {
    let mut spelled = Vec::with_capacity(key.len());
    for k in key {
        match table.column(k) {
            Some(c) => spelled.push(c.name.clone()),
            None => {
                return Err(Error::Input(format!(
                    "--pk {}: table {} has no such column (its columns: {})",
                    quote_ident(k),
                    quote_ident(&table.name),
                    table.listed()
                )))
            }
        }
    }
    Ok(spelled)
}

/// The unique indexes (not partial, the primary key's included) of the
/// table named `table`: for each, its columns as `pragma_index_info` names
/// them (`None` for an expression). Read before planning, for
/// [`existing_key`].
pub fn unique_indexes(db: &Database, table: &str) -> Result<Vec<Vec<Option<String>>>, Error> {
    let name = table.to_string();
    Ok(db.read(move |c| {
        let mut list = c.prepare(
            "SELECT name FROM pragma_index_list(?1) WHERE \"unique\" = 1 AND partial = 0",
        )?;
        let names = list
            .query_map([&name], |r| r.get::<_, String>(0))?
            .collect::<Result<Vec<_>, _>>()?;
        let mut info = c.prepare("SELECT name FROM pragma_index_info(?1)")?;
        let mut out = Vec::new();
        for n in names {
            out.push(
                info.query_map([&n], |r| r.get::<_, Option<String>>(0))?
                    .collect::<Result<Vec<_>, _>>()?,
            );
        }
        Ok(out)
    })?)
}

/// Checks that an existing table has a PRIMARY KEY or a UNIQUE index (not
/// partial) on exactly the columns of `key` (compared ignoring ASCII case and
/// order), as `ON CONFLICT (key)` and a meaningful `--on-conflict` need;
/// `indexes` are the table's [`unique_indexes`]. An `INTEGER PRIMARY KEY`
/// (the rowid) has no index and is accepted as it is. Returns the key as the
/// table spells it.
pub fn existing_key(
    table: &Existing,
    key: &[String],
    on: OnConflict,
    indexes: &[Vec<Option<String>>],
) -> Result<Vec<String>, Error> {
    let spelled = spell_key(table, key)?;
    if spelled.len() == 1
        && table
            .columns
            .iter()
            .any(|c| c.rowid_alias && c.name == spelled[0])
    {
        return Ok(spelled);
    }
    let mut want: Vec<String> = spelled.iter().map(|s| s.to_ascii_lowercase()).collect();
    want.sort();
    let found = indexes.iter().any(|cols| {
        let mut have: Vec<String> = cols
            .iter()
            .map(|c| c.as_deref().unwrap_or("").to_ascii_lowercase())
            .collect();
        have.sort();
        have == want
    });
    if found {
        return Ok(spelled);
    }
    let list = spelled
        .iter()
        .map(|c| quote_ident(c))
        .collect::<Vec<_>>()
        .join(", ");
    Err(Error::Input(format!(
        "--on-conflict {} needs a PRIMARY KEY or UNIQUE index on ({list}) of table {}, and \
         it has none; create one first, e.g. CREATE UNIQUE INDEX {} ON {} ({list})",
        on.name(),
        quote_ident(&table.name),
        quote_ident(&format!("{}_key", table.name)),
        quote_ident(&table.name),
    )))
}

/// A `ColType` for a key column is the column's own: nothing to change.
/// An INTEGER PRIMARY KEY takes integers only, STRICT or not.
pub fn mark_key_strict(cols: &mut [ColumnPlan], key: &[usize]) {
    if let [i] = key {
        if cols[*i].ty == ColType::Integer {
            cols[*i].strict = true;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn col(name: &str, ty: ColType) -> ColumnPlan {
        ColumnPlan {
            name: name.into(),
            ty,
            strict: false,
            src: 0,
            key: name.into(),
        }
    }

    #[test]
    fn each_mode_maps_to_the_engine_with_its_key() {
        let key = vec!["id".to_string()];
        let cases = [
            (OnConflict::Fail, litelane::OnConflict::Fail),
            (
                OnConflict::Ignore,
                litelane::OnConflict::Ignore(key.clone()),
            ),
            (OnConflict::Replace, litelane::OnConflict::Replace),
            (
                OnConflict::Upsert,
                litelane::OnConflict::Update(key.clone()),
            ),
        ];
        for (on, want) in cases {
            assert_eq!(engine(on, &key), want, "{on:?}");
        }
    }

    #[test]
    fn keys_are_parsed_and_found_or_refused() {
        assert_eq!(parse_key("a,b").unwrap(), vec!["a", "b"]);
        for bad in ["", "a,", ",a", "a,,b"] {
            assert!(parse_key(bad).is_err(), "{bad:?}");
        }
        let cols = vec![col("id", ColType::Integer), col("Day", ColType::Text)];
        assert_eq!(
            key_positions(&cols, &["day".into(), "id".into()], "f").unwrap(),
            vec![1, 0]
        );
        let e = key_positions(&cols, &["nope".into()], "f.csv").unwrap_err();
        assert!(
            e.to_string().contains("\"nope\": no such column in f.csv"),
            "{e}"
        );
        assert!(key_positions(&cols, &["id".into(), "ID".into()], "f").is_err());
    }

    proptest::proptest! {
        #[test]
        fn any_key_list_round_trips(names in proptest::collection::vec("[^,]{1,8}", 1..5)) {
            proptest::prop_assert_eq!(parse_key(&names.join(",")).unwrap(), names);
        }

        #[test]
        fn parse_key_never_panics_and_refuses_only_empty_names(s in ".{0,20}") {
            let ok = parse_key(&s).is_ok();
            proptest::prop_assert_eq!(ok, s.split(',').all(|p| !p.is_empty()));
        }
    }

    #[test]
    fn composite_keys_are_not_null() {
        let cols = vec![col("a", ColType::Integer), col("b", ColType::Text)];
        assert_eq!(
            create_sql("t", &cols, &[0, 1], false),
            "CREATE TABLE \"t\" (\"a\" INTEGER NOT NULL, \"b\" TEXT NOT NULL, PRIMARY KEY (\"a\", \"b\"))"
        );
        assert_eq!(
            create_sql("t", &cols, &[0], true),
            "CREATE TABLE \"t\" (\"a\" INTEGER PRIMARY KEY, \"b\" TEXT) STRICT"
        );
    }

    #[test]
    fn a_strict_table_with_a_composite_key_declares_strict_types() {
        // BOOLEAN, DATE and ANY are not types of a STRICT table: they were
        // declared as such with a composite key, and CREATE TABLE failed.
        let cols = vec![
            col("a", ColType::Boolean),
            col("b", ColType::Date),
            col("c", ColType::Any),
        ];
        for strict in [true, false] {
            let sql = create_sql("t", &cols, &[0, 1], strict);
            let c = rusqlite::Connection::open_in_memory().unwrap();
            c.execute_batch(&sql)
                .unwrap_or_else(|e| panic!("{sql}: {e}"));
            c.execute("INSERT INTO t VALUES (1, '2024-01-05', '00123')", [])
                .unwrap();
            // ANY keeps text as written (declared BLOB outside STRICT).
            let t: String = c
                .query_row("SELECT typeof(c) FROM t", [], |r| r.get(0))
                .unwrap();
            assert_eq!(t, "text", "{sql}");
        }
    }
}
