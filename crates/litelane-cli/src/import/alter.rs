//! `--alter`: input columns an existing table lacks are added to it
//! (`ALTER TABLE ... ADD COLUMN`, typed by the same inference as a new
//! table) instead of failing the import.

use litelane::quote_ident;

use super::table::{Existing, ExistingColumn};
use super::values::{ColType, Inference};
use crate::error::CliError;

/// The input columns (`names`, with what the sample says of each in
/// `inference`) that `table` lacks (compared ignoring ASCII case, as SQLite
/// does). With `alter`, returns one `ALTER TABLE ... ADD COLUMN` per missing
/// column and adds them to `table`, so that matching by name then finds
/// them; without, an error naming every missing column and suggesting
/// `--alter`. `text` types every added column TEXT (`--types text`).
pub fn add_missing(
    names: &[String],
    inference: &[Inference],
    text: bool,
    table: &mut Existing,
    alter: bool,
) -> Result<Vec<String>, CliError> {
    let missing: Vec<usize> = (0..names.len())
        .filter(|&i| {
            !table
                .columns
                .iter()
                .any(|c| c.name.eq_ignore_ascii_case(&names[i]))
        })
        .collect();
    if missing.is_empty() {
        return Ok(Vec::new());
    }
    if !alter {
        let list = missing
            .iter()
            .map(|&i| quote_ident(&names[i]))
            .collect::<Vec<_>>()
            .join(", ");
        return Err(CliError::Input(format!(
            "input column{} {list} {} not in table {} (its columns: {}); add {} with --alter",
            if missing.len() == 1 { "" } else { "s" },
            if missing.len() == 1 { "is" } else { "are" },
            quote_ident(&table.name),
            table
                .columns
                .iter()
                .map(|c| quote_ident(&c.name))
                .collect::<Vec<_>>()
                .join(", "),
            if missing.len() == 1 { "it" } else { "them" },
        )));
    }
    let mut sql = Vec::with_capacity(missing.len());
    for i in missing {
        let ty = if text {
            ColType::Text
        } else {
            inference.get(i).map_or(ColType::Text, Inference::decide)
        };
        sql.push(add_column_sql(&table.name, &names[i], ty));
        table.columns.push(ExistingColumn {
            name: names[i].clone(),
            declared: ty.sql().to_string(),
            rowid_alias: false,
        });
    }
    Ok(sql)
}

/// `ALTER TABLE "t" ADD COLUMN "c" TYPE`.
pub fn add_column_sql(table: &str, column: &str, ty: ColType) -> String {
    format!(
        "ALTER TABLE {} ADD COLUMN {} {}",
        quote_ident(table),
        quote_ident(column),
        ty.sql()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table() -> Existing {
        Existing {
            name: "t".into(),
            columns: vec![ExistingColumn {
                name: "ID".into(),
                declared: "INTEGER".into(),
                rowid_alias: true,
            }],
            strict: false,
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
        let inf = vec![
            inferred(&["1"]),
            inferred(&["1", "2"]),
            inferred(&["1.5"]),
            inferred(&["02134"]),
        ];
        let mut t = table();
        let sql = add_missing(&names, &inf, false, &mut t, true).unwrap();
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
        assert!(add_missing(&names, &inf, false, &mut t, true)
            .unwrap()
            .is_empty());
        // --types text.
        let mut t = table();
        let sql = add_missing(&names, &inf, true, &mut t, true).unwrap();
        assert!(sql.iter().all(|s| s.ends_with(" TEXT")), "{sql:?}");
        // Without --alter: every missing column named, and the flag.
        let mut t = table();
        let e = add_missing(&names, &inf, false, &mut t, false)
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
