//! The plan: the target table's columns and everything that decides how
//! records become rows (stored with a resumable import).

use serde::{Deserialize, Serialize};

use crate::read::dialect::Sniffed;
use crate::read::source::Format;
use crate::values::ColType;

/// What a row whose key is already in the table does.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OnConflict {
    /// The row is rejected, naming its key (the default).
    #[default]
    Fail,
    /// The stored row's imported columns are updated from the row; its
    /// other columns are kept (`ON CONFLICT (key) DO UPDATE`).
    Upsert,
    /// The row is skipped and counted (`ON CONFLICT (key) DO NOTHING`).
    Ignore,
    /// The stored row is deleted and the new one inserted (`INSERT OR
    /// REPLACE`): delete triggers and foreign-key cascades fire, and the
    /// columns the input lacks take their defaults.
    Replace,
}

impl OnConflict {
    /// The flag's spelling.
    pub fn name(self) -> &'static str {
        match self {
            OnConflict::Fail => "fail",
            OnConflict::Upsert => "upsert",
            OnConflict::Ignore => "ignore",
            OnConflict::Replace => "replace",
        }
    }
}

/// The recurring-load part of a plan, recorded with a resumable import so
/// that `--resume` writes rows the way the first run did.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Recurring {
    /// The key columns (`--pk`), as named in the table; empty: none.
    #[serde(default)]
    pub key: Vec<String>,
    /// `--on-conflict` (default: fail).
    #[serde(default)]
    pub on_conflict: OnConflict,
    /// `--source-column`: the column that holds each row's source file.
    #[serde(default)]
    pub source_column: Option<String>,
}

/// One column of the target table that the input fills.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ColumnPlan {
    /// The column's name in the table.
    pub name: String,
    /// How its values are stored.
    pub ty: ColType,
    /// Values that do not fit `ty` are rejected instead of stored as they
    /// are (`--strict`, a STRICT table, or an `INTEGER PRIMARY KEY`).
    pub strict: bool,
    /// Index of the field in a CSV/TSV record.
    pub src: usize,
    /// The header name or NDJSON key it comes from (the column name may
    /// differ: de-duplicated, or the existing column's spelling).
    pub key: String,
}

/// Everything that decides how records become rows; stored with a resumable
/// import so that `--resume` converts exactly as the first run did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    /// The input format.
    pub format: Format,
    /// The first CSV/TSV record is a header.
    pub header: bool,
    /// Fields every CSV/TSV record must have.
    pub fields: usize,
    /// Fields equal to one of these are NULL (CSV/TSV only).
    pub nulls: Vec<String>,
    /// Target columns, in insert order.
    pub columns: Vec<ColumnPlan>,
    /// Rows per commit (`--commit-every`), kept for `--resume`.
    #[serde(default)]
    pub commit_every: Option<u64>,
    /// `--rejects-table`, kept for `--resume`.
    #[serde(default)]
    pub rejects_table: Option<String>,
    /// `--pk`, `--on-conflict`, `--source-column`, kept for `--resume`.
    #[serde(default)]
    pub recurring: Recurring,
    /// The sniffed (or planned) CSV dialect, preamble, index column and
    /// per-column null tokens; `None`: the format's defaults.
    #[serde(default)]
    pub sniffed: Option<Sniffed>,
}

/// The null tokens of each of the plan's columns: the column's own (sniffed
/// `NA` and the like in a typed column), else the plan's (CSV/TSV; NDJSON
/// has none that apply).
pub fn column_nulls(plan: &Plan) -> Vec<Vec<String>> {
    let sniffed = plan.sniffed.as_ref();
    (0..plan.columns.len())
        .map(|i| {
            sniffed
                .and_then(|s| s.column_nulls.get(plan.columns[i].src).cloned().flatten())
                .unwrap_or_else(|| plan.nulls.clone())
        })
        .collect()
}
