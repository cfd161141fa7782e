//! `--alter`: input columns an existing table lacks are added to it
//! (`ALTER TABLE ... ADD COLUMN`, typed by the same inference as a new
//! table) instead of failing the import.

use litelane::quote_ident;

use crate::error::Error;
use crate::plan::columns::ColumnPlan;
use crate::plan::table::{Existing, ExistingColumn};
use crate::values::ColType;

/// The input columns (`names`, each with the type it would get in a new
/// table in `types`) that `table` lacks (compared ignoring ASCII case, as
/// SQLite does). With `alter`, returns one `ALTER TABLE ... ADD COLUMN` per
/// missing column (a name repeated in another case, once) and adds them to
/// `table`, so that matching by name then finds them; without, an error
/// naming every missing column and suggesting `--alter`.
pub fn add_missing(
    names: &[String],
    types: &[ColType],
    table: &mut Existing,
    alter: bool,
) -> Result<Vec<String>, Error> {
    // A name repeated in another case (NDJSON keys `a` and `A`) is added
    // once: its values go to that one column, as they would to an existing
    // one (names are matched ignoring ASCII case).
    let mut missing: Vec<usize> = Vec::new();
    for (i, name) in names.iter().enumerate() {
        let present = table.column(name).is_some();
        if !present && !missing.iter().any(|&j| names[j].eq_ignore_ascii_case(name)) {
            missing.push(i);
        }
    }
    if missing.is_empty() {
        return Ok(Vec::new());
    }
    if !alter {
        let list = missing
            .iter()
            .map(|&i| quote_ident(&names[i]))
            .collect::<Vec<_>>()
            .join(", ");
        return Err(Error::Input(format!(
            "input column{} {list} {} not in table {} (its columns: {}); add {} with --alter",
            if missing.len() == 1 { "" } else { "s" },
            if missing.len() == 1 { "is" } else { "are" },
            quote_ident(&table.name),
            table.listed(),
            if missing.len() == 1 { "it" } else { "them" },
        )));
    }
    let mut sql = Vec::with_capacity(missing.len());
    for i in missing {
        let ty = types.get(i).copied().unwrap_or(ColType::Text);
        sql.push(add_column_sql(&table.name, &names[i], ty, table.strict));
        table.columns.push(ExistingColumn {
            name: names[i].clone(),
            declared: ty.declared(table.strict).to_string(),
            rowid_alias: false,
        });
    }
    Ok(sql)
}

/// `ALTER TABLE "t" ADD COLUMN "c" TYPE`, TYPE as declared in a table that
/// is `strict` or not ([`ColType::declared`]).
pub fn add_column_sql(table: &str, column: &str, ty: ColType, strict: bool) -> String {
    format!(
        "ALTER TABLE {} ADD COLUMN {} {}",
        quote_ident(table),
        quote_ident(column),
        ty.declared(strict)
    )
}

/// The statement that adds `--source-column` NAME (TEXT) to the table,
/// when it lacks it (`table`: the existing table appended to; `None`: a new
/// table). An error when the input has a column of that name.
pub fn source_column_sql(
    table_name: &str,
    name: &str,
    columns: &[ColumnPlan],
    table: Option<&Existing>,
) -> Result<Option<String>, Error> {
    if name.is_empty() {
        return Err(Error::Input("--source-column needs a name".into()));
    }
    if columns.iter().any(|c| c.name.eq_ignore_ascii_case(name)) {
        return Err(Error::Input(format!(
            "--source-column {}: the input has a column of that name; give another",
            quote_ident(name)
        )));
    }
    let present = table.is_some_and(|t| t.column(name).is_some());
    Ok((!present)
        .then(|| crate::plan::alter::add_column_sql(table_name, name, ColType::Text, false)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::values::Inference;

    fn table() -> Existing {
        Existing {
            name: "t".into(),
            columns: vec![ExistingColumn {
                name: "ID".into(),
                declared: "INTEGER".into(),
                rowid_alias: true,
            }],
            strict: false,
            generated: Vec::new(),
        }
    }

    fn inferred(values: &[&str]) -> Inference {
        let mut i = Inference::default();
        for v in values {
            i.observe_bytes(v.as_bytes());
        }
        i
    }

    #[test]
    fn missing_columns_are_added_typed_or_named_in_the_error() {
        let names: Vec<String> = ["id", "n", "x\"y", "zip"].map(String::from).to_vec();
        let inf = [
            inferred(&["1"]),
            inferred(&["1", "2"]),
            inferred(&["1.5"]),
            inferred(&["02134"]),
        ];
        let types: Vec<ColType> = inf.iter().map(Inference::decide).collect();
        let mut t = table();
        let sql = add_missing(&names, &types, &mut t, true).unwrap();
        assert_eq!(
            sql,
            vec![
                "ALTER TABLE \"t\" ADD COLUMN \"n\" INTEGER",
                "ALTER TABLE \"t\" ADD COLUMN \"x\"\"y\" REAL",
                "ALTER TABLE \"t\" ADD COLUMN \"zip\" TEXT",
            ]
        );
        assert_eq!(t.columns.len(), 4);
        // Again: nothing left to add.
        assert!(add_missing(&names, &types, &mut t, true)
            .unwrap()
            .is_empty());
        // --types text.
        let mut t = table();
        let text = vec![ColType::Text; names.len()];
        let sql = add_missing(&names, &text, &mut t, true).unwrap();
        assert!(sql.iter().all(|s| s.ends_with(" TEXT")), "{sql:?}");
        // Without --alter: every missing column named, and the flag.
        let mut t = table();
        let e = add_missing(&names, &types, &mut t, false)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("input columns \"n\", \"x\"\"y\", \"zip\" are not in table \"t\"")
                && e.contains("--alter"),
            "{e}"
        );
        assert_eq!(t.columns.len(), 1);
    }
}
