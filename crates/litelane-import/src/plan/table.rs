//! The target table: column names from the header, what an existing table
//! looks like, and the `CREATE TABLE` statement. Every name is quoted with
//! [`litelane::quote_ident`].

use std::collections::HashSet;

use litelane::{quote_ident, Database};

use crate::error::Error;
use crate::plan::columns::ColumnPlan;
use crate::values::ColType;

/// Column names from a header: kept as written, except that an empty name
/// becomes `cN` (its 1-based position), a NUL character becomes `_`, and a
/// name equal (ignoring ASCII case, as SQLite compares) to an earlier one gets
/// `_2`, `_3`... Without a header, the names are `c1`...`cN`.
pub fn column_names(header: Option<Vec<String>>, n: usize) -> Vec<String> {
    let raw = header.unwrap_or_else(|| (1..=n).map(|i| format!("c{i}")).collect());
    let mut seen = HashSet::new();
    let mut out = Vec::with_capacity(raw.len());
    for (i, name) in raw.into_iter().enumerate() {
        let mut name = name.replace('\0', "_");
        if name.is_empty() {
            name = format!("c{}", i + 1);
        }
        let mut candidate = name.clone();
        let mut k = 2;
        while !seen.insert(candidate.to_ascii_lowercase()) {
            candidate = format!("{name}_{k}");
            k += 1;
        }
        out.push(candidate);
    }
    out
}

/// A column of an existing table.
#[derive(Debug, Clone)]
pub struct ExistingColumn {
    /// Its name.
    pub name: String,
    /// Its declared type.
    pub declared: String,
    /// It is the table's `INTEGER PRIMARY KEY` (the rowid).
    pub rowid_alias: bool,
}

/// An existing table.
#[derive(Debug, Clone)]
pub struct Existing {
    /// Its name as stored.
    pub name: String,
    /// Its insertable columns (generated columns excluded).
    pub columns: Vec<ExistingColumn>,
    /// It is a STRICT table.
    pub strict: bool,
    /// Its generated columns (`GENERATED ALWAYS AS ...`, virtual or
    /// stored): SQLite computes their values; nothing can be imported into
    /// them.
    pub generated: Vec<String>,
}

impl Existing {
    /// The column named `name`, ignoring ASCII case (as SQLite compares
    /// names).
    pub fn column(&self, name: &str) -> Option<&ExistingColumn> {
        self.columns
            .iter()
            .find(|c| c.name.eq_ignore_ascii_case(name))
    }

    /// Its columns, quoted, for messages: `"a", "b"`.
    pub fn listed(&self) -> String {
        let names: Vec<String> = self.columns.iter().map(|c| quote_ident(&c.name)).collect();
        names.join(", ")
    }
}

/// Looks `table` up in the main schema; an error when it is a view or a
/// virtual table (litelane imports only into ordinary tables).
pub fn existing(db: &Database, table: &str) -> Result<Option<Existing>, Error> {
    let found = db.read(|c| {
        let row = c
            .query_row(
                "SELECT name, type, strict FROM pragma_table_list \
                 WHERE schema = 'main' AND name = ?1 COLLATE NOCASE",
                [table],
                |r| {
                    Ok((
                        r.get::<_, String>(0)?,
                        r.get::<_, String>(1)?,
                        r.get::<_, bool>(2)?,
                    ))
                },
            )
            .ok();
        let Some((name, kind, strict)) = row else {
            return Ok(None);
        };
        if kind != "table" {
            return Ok(Some(Err(kind)));
        }
        let mut stmt = c.prepare("SELECT name, type, pk FROM pragma_table_info(?1)")?;
        let cols = stmt
            .query_map([&name], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, i64>(2)?,
                ))
            })?
            .collect::<Result<Vec<_>, _>>()?;
        let generated = c
            .prepare("SELECT name FROM pragma_table_xinfo(?1) WHERE hidden IN (2, 3)")?
            .query_map([&name], |r| r.get::<_, String>(0))?
            .collect::<Result<Vec<_>, _>>()?;
        let pk_cols = cols.iter().filter(|c| c.2 > 0).count();
        let columns = cols
            .into_iter()
            .map(|(name, declared, pk)| ExistingColumn {
                rowid_alias: pk == 1 && pk_cols == 1 && declared.eq_ignore_ascii_case("INTEGER"),
                name,
                declared,
            })
            .collect();
        Ok(Some(Ok(Existing {
            name,
            columns,
            strict,
            generated,
        })))
    })?;
    match found {
        None => Ok(None),
        Some(Ok(e)) => Ok(Some(e)),
        Some(Err(kind)) => Err(Error::Input(format!(
            "{} is a {kind}, not an ordinary table: cannot import into it",
            quote_ident(table)
        ))),
    }
}

/// Fails when an input column (`names`, matched ignoring ASCII case) is a
/// generated column of `table`: its values are computed by SQLite and
/// cannot be imported (adding it with `--alter` would fail too: the name
/// is taken).
pub fn check_not_generated(names: &[String], table: &Existing) -> Result<(), Error> {
    let hit: Vec<String> = names
        .iter()
        .filter(|n| table.generated.iter().any(|g| g.eq_ignore_ascii_case(n)))
        .map(|n| quote_ident(n))
        .collect();
    if hit.is_empty() {
        return Ok(());
    }
    let one = hit.len() == 1;
    Err(Error::Input(format!(
        "input column{} {} {} a generated column of table {} (GENERATED ALWAYS AS ...): SQLite \
         computes {} values, so {} cannot be imported; remove {} from the input, or import into \
         another table",
        if one { "" } else { "s" },
        hit.join(", "),
        if one { "is" } else { "are" },
        quote_ident(&table.name),
        if one { "its" } else { "their" },
        if one { "it" } else { "they" },
        if one { "it" } else { "them" },
    )))
}

/// Matches input columns (by name, ignoring ASCII case) to the columns of
/// an existing table. `names[i]` is the name of input field `i`.
pub fn match_columns(
    names: &[String],
    table: &Existing,
    strict: bool,
) -> Result<Vec<ColumnPlan>, Error> {
    let mut plan = Vec::with_capacity(names.len());
    for (src, name) in names.iter().enumerate() {
        let col = table.column(name).ok_or_else(|| {
            Error::Input(format!(
                "input column {} is not a column of table {} (its columns: {})",
                quote_ident(name),
                quote_ident(&table.name),
                table.listed()
            ))
        })?;
        let ty = ColType::from_declared(&col.declared);
        plan.push(ColumnPlan {
            name: col.name.clone(),
            ty,
            strict: (strict || table.strict || col.rowid_alias)
                && matches!(ty, ColType::Integer | ColType::Real),
            src,
            key: name.clone(),
        });
    }
    Ok(plan)
}

/// `CREATE TABLE "t" (...)`, with `pk` (an index into `cols`) as the
/// primary key, and `STRICT` when asked.
pub fn create_sql(table: &str, cols: &[ColumnPlan], pk: Option<usize>, strict: bool) -> String {
    let defs: Vec<String> = cols
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let mut d = format!("{} {}", quote_ident(&c.name), c.ty.declared(strict));
            if pk == Some(i) {
                d.push_str(if c.ty == ColType::Integer {
                    " PRIMARY KEY"
                } else {
                    " PRIMARY KEY NOT NULL"
                });
            }
            d
        })
        .collect();
    format!(
        "CREATE TABLE {} ({}){}",
        quote_ident(table),
        defs.join(", "),
        if strict { " STRICT" } else { "" }
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_kept_deduplicated_and_never_empty() {
        let names = column_names(
            Some(vec![
                "id".into(),
                "".into(),
                "ID".into(),
                "id_2".into(),
                "\"; DROP TABLE x; --".into(),
                "a\0b".into(),
            ]),
            6,
        );
        assert_eq!(
            names,
            vec!["id", "c2", "ID_2", "id_2_2", "\"; DROP TABLE x; --", "a_b"]
        );
        assert_eq!(column_names(None, 2), vec!["c1", "c2"]);
    }

    #[test]
    fn create_sql_quotes_every_name() {
        let cols = vec![
            ColumnPlan {
                name: "a\"b".into(),
                ty: ColType::Integer,
                strict: false,
                src: 0,
                key: "a\"b".into(),
            },
            ColumnPlan {
                name: "t".into(),
                ty: ColType::Text,
                strict: false,
                src: 1,
                key: "t".into(),
            },
        ];
        assert_eq!(
            create_sql("x y", &cols, Some(0), true),
            "CREATE TABLE \"x y\" (\"a\"\"b\" INTEGER PRIMARY KEY, \"t\" TEXT) STRICT"
        );
    }
}
