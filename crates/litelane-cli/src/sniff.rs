//! `litelane sniff`: print the plan an import of a CSV/TSV file would use.

use litelane_import::plan::sniff;
use litelane_import::read::records;
use litelane_import::read::source::{self, Format};
use litelane_import::Error;

/// Arguments of `litelane sniff`.
#[derive(clap::Args, Debug)]
pub struct SniffArgs {
    /// The CSV or TSV file (optionally gzip- or zstd-compressed); `-` reads
    /// stdin.
    pub source: String,
    /// Print the plan as JSON (the form `import --plan` reads).
    #[arg(long)]
    pub json: bool,
    /// The input format (default: from the extension; CSV when unknown).
    #[arg(long, value_enum)]
    pub format: Option<crate::import::FormatArg>,
    /// The field delimiter (default: sniffed among , ; | and tab).
    #[arg(long, value_name = "CHAR")]
    pub delimiter: Option<char>,
    /// The first record (after skipped ones) is a header.
    #[arg(long, conflicts_with = "no_header")]
    pub header: bool,
    /// The first record is data.
    #[arg(long)]
    pub no_header: bool,
    /// A field equal to TOKEN is NULL in every column (repeatable), as well
    /// as the empty field unless --no-default-nulls is given.
    #[arg(long = "null", value_name = "TOKEN")]
    pub nulls: Vec<String>,
    /// With --null: the empty field is not NULL; only the --null tokens are.
    #[arg(long, requires = "nulls")]
    pub no_default_nulls: bool,
}

/// Runs `litelane sniff`.
pub fn run(args: SniffArgs) -> Result<(), Error> {
    let format = args
        .format
        .map(Format::from)
        .or_else(|| Format::from_name(&args.source))
        .unwrap_or(Format::Csv);
    let mut input = source::open(&args.source)?;
    let json = format == Format::Ndjson
        || (args.format.is_none()
            && Format::from_name(&args.source).is_none()
            && records::starts_json(&mut input.reader)
                .map_err(|e| Error::io(format!("reading {}", args.source), e))?);
    if json {
        let array = records::starts_json_array(&mut input.reader)
            .map_err(|e| Error::io(format!("reading {}", args.source), e))?;
        let what = if array {
            "a JSON array of objects (one record per element)"
        } else {
            "NDJSON (one JSON object per line)"
        };
        if args.json {
            return Err(Error::Input(format!(
                "{}: {what}; a plan (--json) is for CSV and TSV: JSON names its columns \
                 itself, and `litelane import` reads it as it is",
                args.source
            )));
        }
        println!("file:        {}", input.display);
        println!("format:      {what}");
        println!("columns:     the keys of the objects (import takes them from the first {SAMPLE} records)",
            SAMPLE = litelane_import::SAMPLE_RECORDS);
        return Ok(());
    }
    let opts = sniff::options(
        format,
        args.delimiter,
        args.header,
        args.no_header,
        &sniff::null_tokens(&args.nulls, args.no_default_nulls),
        false,
    )?;
    let plan = sniff::sniff_input(&mut input, &args.source, &opts)?;
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&plan).map_err(|e| Error::Input(e.to_string()))?
        );
        return Ok(());
    }
    print!("{}", sniff::describe(&plan, &input.display));
    Ok(())
}
