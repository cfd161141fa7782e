//! What the sniffer decided about a CSV/TSV file's layout, as the import
//! plan keeps it (and `--resume` reuses it): delimiter, quote, preamble
//! lines, index column, per-column null tokens and padding.

use serde::{Deserialize, Serialize};

use crate::read::records::Records;
use crate::read::source::Format;

/// A CSV/TSV layout beyond the format's defaults. See `docs/import.md`,
/// "Sniffing".
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Sniffed {
    /// The field delimiter (one of `,` `;` `|` and tab).
    pub delimiter: char,
    /// The quote character, or `None` for no quoting (TSV).
    pub quote: Option<char>,
    /// Records before the header (or the first data record) that are not
    /// part of the table: a title, notes, a count line.
    #[serde(default)]
    pub skip_rows: u64,
    /// The header has one field fewer than every record: the first field of
    /// each record is a row name (R's `write.table`), imported as the column
    /// [`INDEX_COLUMN`].
    #[serde(default)]
    pub index_column: bool,
    /// The header ends with a delimiter the records lack: its last field,
    /// empty, names no column.
    #[serde(default)]
    pub header_trailing_delimiter: bool,
    /// The records end with a delimiter the header lacks: their last
    /// field is a column the header does not name.
    #[serde(default)]
    pub records_trailing_delimiter: bool,
    /// Why the first record was taken for a header or for data (in words,
    /// for the summary; `None` when flags decided).
    #[serde(default)]
    pub header_reason: Option<String>,
    /// Null tokens per input field (by position in the record, the row name
    /// first when there is one); `None` for a field: the plan's tokens.
    #[serde(default)]
    pub column_nulls: Vec<Option<Vec<String>>>,
    /// Per input field: values are space-padded numbers, stored as their
    /// number without the spaces.
    #[serde(default)]
    pub trim: Vec<bool>,
}

/// The name given to the row-name column of a file whose header is one
/// field short (the name RSQLite's `dbWriteTable` uses).
pub const INDEX_COLUMN: &str = "row_names";

impl Sniffed {
    /// The delimiter as a byte (the sniffer only picks ASCII ones).
    pub fn delimiter_byte(&self) -> u8 {
        u8::try_from(self.delimiter).unwrap_or(b',')
    }

    /// The quote as a byte.
    pub fn quote_byte(&self) -> Option<u8> {
        self.quote.and_then(|q| u8::try_from(q).ok())
    }

    /// A record reader with this dialect.
    pub fn records(&self, format: Format, input: Box<dyn std::io::BufRead + Send>) -> Records {
        Records::with_dialect(format, input, self.delimiter_byte(), self.quote_byte())
    }
}
