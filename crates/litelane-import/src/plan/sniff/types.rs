//! Each column's type and null tokens, from what the sample showed of it
//! ([`ColumnStats`]), and the `--type` overrides.

use std::collections::BTreeMap;

use crate::error::Error;
use crate::values::{
    is_iso_date, is_iso_timestamp, parse_bool, parse_int, parse_real, trim_spaces, ColType,
    Inference,
};

use super::{Options, Rec, SniffColumn, NULL_CANDIDATES};

/// What the sample showed about one column: its values' types (the
/// import's one inferer, [`Inference`]) and the sniffer's null tokens met.
#[derive(Debug, Clone, Default)]
pub struct ColumnStats {
    inference: Inference,
    tokens: BTreeMap<String, u64>,
}

impl ColumnStats {
    /// Notes one field. `nulls`: the user's tokens (then nothing else is
    /// null), or `None` for the sniffer's (the empty field, and
    /// [`NULL_CANDIDATES`] counted apart).
    pub fn observe(&mut self, f: &[u8], nulls: Option<&[String]>) {
        match nulls {
            Some(ns) => {
                if ns.iter().any(|n| n.as_bytes() == f) {
                    return;
                }
            }
            None => {
                if f.is_empty() {
                    return;
                }
                if let Some(t) = NULL_CANDIDATES.iter().find(|t| t.as_bytes() == f) {
                    *self.tokens.entry((*t).to_string()).or_default() += 1;
                    return;
                }
            }
        }
        self.inference.observe_text(f);
    }

    /// The column's type: BOOLEAN, INTEGER, REAL, DATE, TIMESTAMP when every
    /// non-null value is one, else TEXT (also for a column with no value).
    pub fn decide(&self) -> ColType {
        self.inference.decide()
    }

    /// The value `f` could be data of a column of type `ty` (for telling a
    /// header from data).
    pub(super) fn fits(ty: ColType, f: &[u8], nulls: Option<&[String]>) -> bool {
        let null = match nulls {
            Some(ns) => ns.iter().any(|n| n.as_bytes() == f),
            None => f.is_empty() || NULL_CANDIDATES.iter().any(|t| t.as_bytes() == f),
        };
        let t = trim_spaces(f);
        null || match ty {
            ColType::Boolean => parse_bool(f).is_some(),
            // Any number fits a numeric column here: `-0.55` above a
            // column of integers is data, not a header (names are not
            // numbers).
            ColType::Integer | ColType::Real => parse_real(t).is_some() || parse_int(t).is_some(),
            ColType::Date => is_iso_date(f),
            ColType::Timestamp => is_iso_date(f) || is_iso_timestamp(f),
            _ => true,
        }
    }
}

/// Types of the columns of `rows` (only rows with `fields` fields count).
pub(super) fn infer<'a>(
    rows: impl Iterator<Item = &'a Rec>,
    fields: usize,
    nulls: Option<&[String]>,
) -> (Vec<ColumnStats>, u64) {
    let mut stats = vec![ColumnStats::default(); fields];
    let mut n = 0;
    for r in rows.filter(|r| r.len() == fields) {
        n += 1;
        for (s, f) in stats.iter_mut().zip(r.iter()) {
            s.observe(f, nulls);
        }
    }
    (stats, n)
}

/// One column of the plan from what the sample showed of it (`s`): its
/// type, the null tokens it stores as NULL, whether numbers are trimmed;
/// what was decided is said in `notes`.
pub(super) fn sniff_column(
    name: String,
    s: &ColumnStats,
    opts: &Options,
    notes: &mut Vec<String>,
) -> SniffColumn {
    let ty = if opts.types_text {
        ColType::Text
    } else {
        s.decide()
    };
    let mut nulls = None;
    if opts.nulls.is_none() && !s.tokens.is_empty() {
        let toks = s
            .tokens
            .keys()
            .map(|t| format!("{t:?}"))
            .collect::<Vec<_>>()
            .join(", ");
        if ty != ColType::Text {
            let mut ns = vec![String::new()];
            ns.extend(s.tokens.keys().cloned());
            notes.push(format!(
                "column {name:?}: {toks} stored as NULL (every other value is {})",
                ty.sql()
            ));
            nulls = Some(ns);
        } else {
            notes.push(format!(
                "column {name:?}: {toks} kept as text (the column holds other text, and NA is \
                 also a code, e.g. Namibia); give --null to store NULL"
            ));
        }
    }
    let trim = s.inference.padded() > 0 && matches!(ty, ColType::Integer | ColType::Real);
    if trim {
        notes.push(format!(
            "column {name:?}: {} space-padded number(s), stored as the number without the \
             spaces",
            s.inference.padded()
        ));
    }
    SniffColumn {
        name,
        ty,
        nulls,
        trim,
        tokens_seen: s.tokens.clone(),
    }
}

/// Parses `--type COL=TYPE` flags.
pub fn type_overrides(flags: &[String]) -> Result<Vec<(String, ColType)>, Error> {
    flags
        .iter()
        .map(|f| {
            let (col, ty) = f.rsplit_once('=').ok_or_else(|| {
                Error::Input(format!(
                    "--type {f:?}: write COLUMN=TYPE, e.g. --type zip=TEXT"
                ))
            })?;
            let t = ColType::parse_name(ty.trim()).ok_or_else(|| {
                Error::Input(format!(
                    "--type {f:?}: unknown type {ty:?} (use TEXT, INTEGER, REAL, BOOLEAN, \
                     DATE, TIMESTAMP or NUMERIC)"
                ))
            })?;
            Ok((col.to_string(), t))
        })
        .collect()
}

/// Applies `--type` overrides to the columns of a new table; an unknown
/// column is an error naming the columns there are.
pub fn apply_overrides(
    cols: &mut [crate::plan::columns::ColumnPlan],
    overrides: &[(String, ColType)],
) -> Result<(), Error> {
    for (name, ty) in overrides {
        let i = cols
            .iter()
            .position(|c| c.name == *name)
            .or_else(|| cols.iter().position(|c| c.name.eq_ignore_ascii_case(name)))
            .ok_or_else(|| {
                Error::Input(format!(
                    "--type {name}=...: no such column (columns: {})",
                    cols.iter()
                        .map(|c| litelane::quote_ident(&c.name))
                        .collect::<Vec<_>>()
                        .join(", ")
                ))
            })?;
        cols[i].ty = *ty;
    }
    Ok(())
}
