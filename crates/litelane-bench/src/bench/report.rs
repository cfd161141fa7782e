//! What a scenario produces ([`Outcome`], [`Row`]) and the three ways it is
//! shown: a plain table on stdout (comfy-table), one JSON object, and a
//! Markdown report with one SVG chart per scenario (plotters).

use std::fmt::Write as _;
use std::path::Path;
use std::time::Duration;

use comfy_table::{CellAlignment, Table};
use indicatif::HumanCount;
use plotters::coord::ranged1d::ValueFormatter;
use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use serde_json::{json, Map, Value};

use crate::error::BenchError;

/// Whether a row counts rows written or operations done.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// `rows` and `rows_per_sec`.
    Rows,
    /// `ops` and `ops_per_sec`.
    Ops,
}

impl Unit {
    fn count_key(self) -> &'static str {
        match self {
            Unit::Rows => "rows",
            Unit::Ops => "ops",
        }
    }
    fn rate_key(self) -> &'static str {
        match self {
            Unit::Rows => "rows_per_sec",
            Unit::Ops => "ops_per_sec",
        }
    }
}

/// Latency percentiles of one variant, in milliseconds, and a sketch of the
/// whole distribution for the chart.
#[derive(Debug, Clone, PartialEq)]
pub struct Latency {
    /// Median.
    pub p50_ms: f64,
    /// 99th percentile.
    pub p99_ms: f64,
    /// Longest.
    pub max_ms: f64,
    /// `(quantile, ms)` points of the distribution (for the CDF chart).
    pub curve: Vec<(f64, f64)>,
}

impl Latency {
    /// Percentiles of `samples` (sorted in place); `None` when empty.
    pub fn from_samples(samples: &mut [Duration]) -> Option<Latency> {
        if samples.is_empty() {
            return None;
        }
        samples.sort_unstable();
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        let at = |q: f64| ms(samples[((samples.len() - 1) as f64 * q).round() as usize]);
        let mut qs: Vec<f64> = (0..=100).map(|i| f64::from(i) / 100.0).collect();
        qs.extend([0.995, 0.999]);
        qs.sort_by(f64::total_cmp);
        Some(Latency {
            p50_ms: at(0.50),
            p99_ms: at(0.99),
            max_ms: ms(samples[samples.len() - 1]),
            curve: qs.into_iter().map(|q| (q, at(q))).collect(),
        })
    }
}

/// One variant's figures: one line of the table, one object of `results`.
#[derive(Debug, Clone)]
pub struct Row {
    /// The variant's name (`litelane`, `raw-ffi`, ...).
    pub name: String,
    /// Rows or operations.
    pub unit: Unit,
    /// How many rows or operations.
    pub count: u64,
    /// Wall-clock seconds.
    pub seconds: f64,
    /// Errors seen (`SQLITE_BUSY` retries, failed operations...).
    pub errors: u64,
    /// Latency per operation, where it applies.
    pub latency: Option<Latency>,
    /// Scenario-specific fields, in insertion order.
    pub extra: Map<String, Value>,
}

impl Row {
    /// A row of `count` `unit`s done in `elapsed`.
    pub fn new(name: impl Into<String>, unit: Unit, count: u64, elapsed: Duration) -> Row {
        Row {
            name: name.into(),
            unit,
            count,
            seconds: elapsed.as_secs_f64(),
            errors: 0,
            latency: None,
            extra: Map::new(),
        }
    }

    /// Rows or operations per second.
    pub fn rate(&self) -> f64 {
        if self.seconds > 0.0 {
            self.count as f64 / self.seconds
        } else {
            0.0
        }
    }

    /// Sets the error count.
    pub fn errors(mut self, errors: u64) -> Row {
        self.errors = errors;
        self
    }

    /// Sets the latency.
    pub fn latency(mut self, latency: Option<Latency>) -> Row {
        self.latency = latency;
        self
    }

    /// Adds an extra field.
    pub fn with(mut self, key: &str, value: impl Into<Value>) -> Row {
        self.extra.insert(key.to_string(), value.into());
        self
    }

    /// Adds or replaces an extra field in place.
    pub fn set(&mut self, key: &str, value: impl Into<Value>) {
        self.extra.insert(key.to_string(), value.into());
    }

    /// An extra field as a number.
    pub fn num(&self, key: &str) -> Option<f64> {
        match key {
            "rate" => Some(self.rate()),
            "seconds" => Some(self.seconds),
            "errors" => Some(self.errors as f64),
            _ => self.extra.get(key).and_then(Value::as_f64),
        }
    }

    /// The row as a JSON object.
    pub fn to_json(&self) -> Value {
        let mut m = Map::new();
        m.insert("name".into(), json!(self.name));
        m.insert(self.unit.count_key().into(), json!(self.count));
        m.insert("seconds".into(), json!(round(self.seconds, 6)));
        m.insert(self.unit.rate_key().into(), json!(round(self.rate(), 1)));
        m.insert("errors".into(), json!(self.errors));
        if let Some(l) = &self.latency {
            m.insert("p50_ms".into(), json!(round(l.p50_ms, 4)));
            m.insert("p99_ms".into(), json!(round(l.p99_ms, 4)));
            m.insert("max_ms".into(), json!(round(l.max_ms, 4)));
        }
        for (k, v) in &self.extra {
            m.insert(k.clone(), v.clone());
        }
        Value::Object(m)
    }
}

/// Rounds to `digits` decimals (keeps the JSON readable).
pub fn round(x: f64, digits: i32) -> f64 {
    let f = 10f64.powi(digits);
    (x * f).round() / f
}

/// An extra column of the table: header, the extra field it shows, and how.
#[derive(Debug, Clone)]
pub struct Column {
    /// Header text.
    pub header: &'static str,
    /// Key in [`Row::extra`].
    pub key: &'static str,
    /// Decimals shown.
    pub decimals: usize,
}

/// A bar series of the chart: which number of each row, and its legend.
#[derive(Debug, Clone)]
pub struct Series {
    /// Key for [`Row::num`] (`"rate"` for rows/s or ops/s).
    pub key: &'static str,
    /// Legend and axis text.
    pub label: &'static str,
}

impl Series {
    /// Two bar series: writes/s and reads/s of each variant (the WAL
    /// scenario's chart).
    pub fn writes_and_reads() -> Vec<Series> {
        vec![
            Series {
                key: "writes_per_sec",
                label: "writes/s",
            },
            Series {
                key: "reads_per_sec",
                label: "reads/s",
            },
        ]
    }
}

/// Everything one scenario measured.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// The scenario's name (`insert`, `threads`...).
    pub scenario: &'static str,
    /// One line saying what ran, e.g. "1,000,000 rows, profile balanced".
    pub title: String,
    /// The report it reproduces.
    pub reproduces: &'static str,
    /// The parameters used.
    pub params: Map<String, Value>,
    /// Caveats printed under the table (sampling, skipped variants...).
    pub notes: Vec<String>,
    /// One row per variant.
    pub rows: Vec<Row>,
    /// Extra table columns.
    pub columns: Vec<Column>,
    /// Bars of the chart (one group per row, one bar per series).
    pub series: Vec<Series>,
    /// Wall-clock seconds the whole scenario took.
    pub wall_seconds: f64,
}

impl Outcome {
    /// An outcome with no rows yet.
    pub fn new(scenario: &'static str, reproduces: &'static str, title: String) -> Outcome {
        Outcome {
            scenario,
            title,
            reproduces,
            params: Map::new(),
            notes: Vec::new(),
            rows: Vec::new(),
            columns: Vec::new(),
            series: vec![Series {
                key: "rate",
                label: "rows/s",
            }],
            wall_seconds: 0.0,
        }
    }

    /// Records a parameter.
    pub fn param(&mut self, key: &str, value: impl Into<Value>) {
        self.params.insert(key.to_string(), value.into());
    }

    /// Adds a table column.
    pub fn column(&mut self, header: &'static str, key: &'static str, decimals: usize) {
        self.columns.push(Column {
            header,
            key,
            decimals,
        });
    }

    /// The scenario as one JSON object (without machine information).
    pub fn to_json(&self) -> Value {
        json!({
            "scenario": self.scenario,
            "title": self.title,
            "reproduces": self.reproduces,
            "params": self.params,
            "notes": self.notes,
            "wall_seconds": round(self.wall_seconds, 3),
            "results": self.rows.iter().map(Row::to_json).collect::<Vec<_>>(),
        })
    }
}

/// What the benchmarks ran on.
#[derive(Debug, Clone)]
pub struct Machine {
    /// Logical cores available to the process.
    pub cores: usize,
    /// `linux`, `macos`, ...
    pub os: &'static str,
    /// `x86_64`, `aarch64`, ...
    pub arch: &'static str,
    /// CPU model name, when the OS says.
    pub cpu: String,
    /// Where the databases were written.
    pub temp_dir: String,
}

impl Machine {
    /// Looks at this machine; `temp_dir` is where the databases go.
    pub fn detect(temp_dir: &Path) -> Machine {
        let cpu = std::fs::read_to_string("/proc/cpuinfo")
            .ok()
            .and_then(|s| {
                s.lines()
                    .find(|l| l.starts_with("model name"))
                    .and_then(|l| l.split_once(':'))
                    .map(|(_, v)| v.trim().to_string())
            })
            .unwrap_or_else(|| "unknown".to_string());
        Machine {
            cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
            os: std::env::consts::OS,
            arch: std::env::consts::ARCH,
            cpu,
            temp_dir: temp_dir.display().to_string(),
        }
    }

    /// As JSON.
    pub fn to_json(&self) -> Value {
        json!({
            "cores": self.cores,
            "os": self.os,
            "arch": self.arch,
            "cpu": self.cpu,
            "temp_dir": self.temp_dir,
        })
    }

    fn one_line(&self) -> String {
        format!(
            "{} cores, {} {}, {}, SQLite {}",
            self.cores,
            self.os,
            self.arch,
            self.cpu,
            litelane::sqlite_version()
        )
    }
}

/// The JSON printed by `--json` for one scenario.
pub fn scenario_json(outcome: &Outcome, machine: &Machine) -> Value {
    let mut v = outcome.to_json();
    if let Value::Object(m) = &mut v {
        m.insert("machine".into(), machine.to_json());
        m.insert("sqlite_version".into(), json!(litelane::sqlite_version()));
        m.insert("litelane_version".into(), json!(env!("CARGO_PKG_VERSION")));
    }
    v
}

/// The JSON printed by `bench all --json`: every scenario, plus `results`
/// with every row tagged with its scenario.
pub fn all_json(outcomes: &[Outcome], machine: &Machine, seconds: f64) -> Value {
    let results: Vec<Value> = outcomes
        .iter()
        .flat_map(|o| {
            o.rows.iter().map(move |r| {
                let mut v = r.to_json();
                if let Value::Object(m) = &mut v {
                    m.insert("scenario".into(), json!(o.scenario));
                }
                v
            })
        })
        .collect();
    json!({
        "scenario": "all",
        "machine": machine.to_json(),
        "sqlite_version": litelane::sqlite_version(),
        "litelane_version": env!("CARGO_PKG_VERSION"),
        "wall_seconds": round(seconds, 3),
        "scenarios": outcomes.iter().map(Outcome::to_json).collect::<Vec<_>>(),
        "results": results,
    })
}

/// Formats `x` with thousands separators and `decimals` decimals; `-` when
/// `x` is not finite.
pub fn group_digits(x: f64, decimals: usize) -> String {
    if !x.is_finite() {
        return "-".into();
    }
    // indicatif groups the integer part; the decimals stay fixed (its
    // `HumanFloatCount` trims trailing zeros, which misaligns a column).
    let fixed = format!("{:.*}", decimals, x.abs());
    let (int, frac) = fixed.split_once('.').unwrap_or((fixed.as_str(), ""));
    let sign = if x < 0.0 && fixed.bytes().any(|b| (b'1'..=b'9').contains(&b)) {
        "-"
    } else {
        ""
    };
    match int.parse::<u64>() {
        Ok(n) if frac.is_empty() => format!("{sign}{}", HumanCount(n)),
        Ok(n) => format!("{sign}{}.{frac}", HumanCount(n)),
        Err(_) => format!("{sign}{fixed}"),
    }
}

/// A number for a table cell: large ones grouped, small ones with a few
/// significant digits.
fn cell_num(x: f64, decimals: usize) -> String {
    group_digits(x, decimals)
}

fn ms_cell(x: f64) -> String {
    if x >= 100.0 {
        format!("{x:.0}")
    } else if x >= 10.0 {
        format!("{x:.1}")
    } else if x >= 1.0 {
        format!("{x:.2}")
    } else {
        format!("{x:.3}")
    }
}

/// The table's header and cells, shared by the text and Markdown forms.
fn table_cells(o: &Outcome) -> (Vec<String>, Vec<Vec<String>>) {
    let unit = o.rows.first().map_or(Unit::Rows, |r| r.unit);
    let latency = o.rows.iter().any(|r| r.latency.is_some());
    let mut header: Vec<String> = vec![
        "variant".into(),
        unit.count_key().into(),
        "seconds".into(),
        format!("{}/s", unit.count_key()),
        "errors".into(),
    ];
    if latency {
        header.extend(["p50 ms".into(), "p99 ms".into(), "max ms".into()]);
    }
    header.extend(o.columns.iter().map(|c| c.header.to_string()));
    let body = o
        .rows
        .iter()
        .map(|r| {
            let mut cells = vec![
                r.name.clone(),
                group_digits(r.count as f64, 0),
                format!("{:.3}", r.seconds),
                cell_num(r.rate(), 0),
                r.errors.to_string(),
            ];
            if latency {
                match &r.latency {
                    Some(l) => {
                        cells.extend([ms_cell(l.p50_ms), ms_cell(l.p99_ms), ms_cell(l.max_ms)])
                    }
                    None => cells.extend(["-".into(), "-".into(), "-".into()]),
                }
            }
            for c in &o.columns {
                cells.push(match r.extra.get(c.key) {
                    Some(Value::Number(n)) => cell_num(n.as_f64().unwrap_or(f64::NAN), c.decimals),
                    Some(Value::String(s)) => s.clone(),
                    Some(Value::Bool(b)) => b.to_string(),
                    _ => "-".into(),
                });
            }
            cells
        })
        .collect();
    (header, body)
}

/// The table's frame: only a rule under the header (comfy-table's preset
/// characters, in its documented order; a space draws nothing).
const TABLE_STYLE: &str = "     --            ";

/// The plain-text table printed on stdout.
pub fn text_table(o: &Outcome) -> String {
    let (header, body) = table_cells(o);
    let mut table = Table::new();
    table
        .load_preset(TABLE_STYLE)
        .set_header(header)
        .add_rows(body);
    let last = table.column_count().saturating_sub(1);
    for (i, column) in table.column_iter_mut().enumerate() {
        // With the blank column separator: two spaces between columns.
        column.set_padding((0, if i == last { 0 } else { 1 }));
        if i > 0 {
            column.set_cell_alignment(CellAlignment::Right);
        }
    }
    let mut out = String::new();
    let _ = writeln!(out, "{}: {}", o.scenario, o.title);
    for line in table.lines() {
        let _ = writeln!(out, "{}", line.trim_end());
    }
    for n in &o.notes {
        let _ = writeln!(out, "note: {n}");
    }
    let _ = writeln!(out, "({:.1} s)", o.wall_seconds);
    out
}

/// The scenario's section of `report.md`.
pub fn markdown_section(o: &Outcome) -> String {
    let (header, body) = table_cells(o);
    let mut out = String::new();
    let _ = writeln!(out, "## `{}`\n", o.scenario);
    let _ = writeln!(out, "{}. Reproduces {}.\n", o.title, o.reproduces);
    let _ = writeln!(out, "| {} |", header.join(" | "));
    let _ = writeln!(
        out,
        "|{}|",
        header
            .iter()
            .enumerate()
            .map(|(i, _)| if i == 0 { "---" } else { "---:" })
            .collect::<Vec<_>>()
            .join("|")
    );
    for row in &body {
        let cells: Vec<String> = row.iter().map(|c| c.replace('|', "\\|")).collect();
        let _ = writeln!(out, "| {} |", cells.join(" | "));
    }
    out.push('\n');
    for n in &o.notes {
        let _ = writeln!(out, "- {n}");
    }
    if !o.notes.is_empty() {
        out.push('\n');
    }
    let _ = writeln!(out, "![{} chart]({}.svg)\n", o.scenario, o.scenario);
    out
}

/// Writes `DIR/report.md` and `DIR/<scenario>.svg` for every outcome.
pub fn write_report(
    dir: &Path,
    outcomes: &[Outcome],
    machine: &Machine,
    seconds: f64,
) -> Result<(), BenchError> {
    std::fs::create_dir_all(dir)
        .map_err(|e| BenchError::io(format!("creating {}", dir.display()), e))?;
    let mut md = String::new();
    let _ = writeln!(md, "# litelane benchmarks\n");
    let _ = writeln!(
        md,
        "- machine: {} cores, {} {}, {}",
        machine.cores, machine.os, machine.arch, machine.cpu
    );
    let _ = writeln!(md, "- SQLite {}", litelane::sqlite_version());
    let _ = writeln!(md, "- databases in `{}`", machine.temp_dir);
    let _ = writeln!(md, "- total wall time {seconds:.1} s\n");
    for o in outcomes {
        md.push_str(&markdown_section(o));
        let svg = svg_chart(o, machine)?;
        let path = dir.join(format!("{}.svg", o.scenario));
        std::fs::write(&path, svg)
            .map_err(|e| BenchError::io(format!("writing {}", path.display()), e))?;
    }
    let path = dir.join("report.md");
    std::fs::write(&path, md).map_err(|e| BenchError::io(format!("writing {}", path.display()), e))
}

// ---------------------------------------------------------------- SVG ----
//
// The charts are drawn with `plotters` and its SVG backend. Without the
// `ttf` feature plotters estimates text widths itself (no system fonts, no
// fontconfig) and writes `<text>` elements the viewer lays out, so the label
// columns below are sized from the longest label with some slack.

/// Chart width in pixels.
const WIDTH: u32 = 900;
/// Estimated width of one character, as a share of the font size (a
/// generous figure for sans-serif text, so labels do not collide).
const CHAR_W: f64 = 0.62;
/// Longest variant label on a chart, in characters.
const LABEL_CHARS: usize = 48;
/// Bar colours per series, for plain variants and for litelane's own.
const PLAIN: [RGBColor; 3] = [
    RGBColor(0x8a, 0xa4, 0xc8),
    RGBColor(0xc8, 0xa9, 0x8a),
    RGBColor(0xa9, 0xc8, 0x8a),
];
const OURS: [RGBColor; 3] = [
    RGBColor(0x0f, 0x7b, 0x6c),
    RGBColor(0xb5, 0x65, 0x1d),
    RGBColor(0x4c, 0x8a, 0x1e),
];
/// Latency curve colours, one per variant.
const CURVES: [RGBColor; 12] = [
    RGBColor(0x0f, 0x7b, 0x6c),
    RGBColor(0xd1, 0x49, 0x5b),
    RGBColor(0x30, 0x66, 0xbe),
    RGBColor(0xed, 0xae, 0x49),
    RGBColor(0x7b, 0x2c, 0xbf),
    RGBColor(0x5c, 0x94, 0x6e),
    RGBColor(0x8d, 0x6a, 0x9f),
    RGBColor(0x44, 0x44, 0x44),
    RGBColor(0xe0, 0x7a, 0x1f),
    RGBColor(0x00, 0x9e, 0xd8),
    RGBColor(0x9c, 0x64, 0x1c),
    RGBColor(0xd6, 0x5d, 0xb1),
];
pub(crate) const INK: RGBColor = RGBColor(0x22, 0x22, 0x22);
pub(crate) const GREY: RGBColor = RGBColor(0x55, 0x55, 0x55);
pub(crate) const LIGHT: RGBColor = RGBColor(0x88, 0x88, 0x88);
pub(crate) const GRID: RGBColor = RGBColor(0xe4, 0xe4, 0xe4);
const ALERT: RGBColor = RGBColor(0xc0, 0x39, 0x2b);
/// The frame budget marked on the latency chart (report 001's stall
/// threshold), in milliseconds.
const FRAME_MS: f64 = 16.0;

pub(crate) type Area<'a> = DrawingArea<SVGBackend<'a>, Shift>;
pub(crate) type Drawn = Result<(), Box<dyn std::error::Error>>;

/// A text style of `px` CSS pixels. plotters' SVG backend writes
/// `font-size = size / 1.24`, hence the factor.
pub(crate) fn text(px: f64, colour: RGBColor) -> TextStyle<'static> {
    ("sans-serif", px * 1.24).into_font().color(&colour)
}

/// Like [`text`], anchored at (`h`, vertical centre).
pub(crate) fn anchored(px: f64, colour: RGBColor, h: HPos) -> TextStyle<'static> {
    text(px, colour).pos(Pos::new(h, VPos::Center))
}

/// Estimated width in pixels of `s` at `px`.
fn text_width(s: &str, px: f64) -> f64 {
    s.chars().count() as f64 * px * CHAR_W
}

/// `s` wrapped to the chart's width at `px` (at an average character
/// width: running prose is narrower than the labels [`CHAR_W`] sizes).
fn wrapped(s: &str, px: f64) -> Vec<String> {
    let chars = ((f64::from(WIDTH) - 40.0) / (px * 0.55)) as usize;
    textwrap::wrap(s, chars.max(20))
        .into_iter()
        .map(|l| l.into_owned())
        .collect()
}

/// A short human number: 1.23M, 45.6k, 789.
pub fn short_num(x: f64) -> String {
    let a = x.abs();
    if a >= 1e9 {
        format!("{:.2}G", x / 1e9)
    } else if a >= 1e6 {
        format!("{:.2}M", x / 1e6)
    } else if a >= 1e4 {
        format!("{:.1}k", x / 1e3)
    } else if a >= 100.0 {
        format!("{x:.0}")
    } else if a >= 1.0 {
        format!("{x:.1}")
    } else if a == 0.0 {
        "0".to_string()
    } else {
        format!("{x:.3}")
    }
}

fn is_ours(name: &str) -> bool {
    name.starts_with("litelane")
}

/// The bars' values: one per row and series, 0 where missing or not finite.
fn bar_values(o: &Outcome) -> Vec<Vec<f64>> {
    o.rows
        .iter()
        .map(|r| {
            o.series
                .iter()
                .map(|s| r.num(s.key).filter(|v| v.is_finite()).unwrap_or(0.0))
                .collect()
        })
        .collect()
}

/// The label of each row's bar group: its name, followed by its `profile`
/// when several rows share a name (the insert scenario runs every variant
/// under each profile).
/// Labels longer than [`LABEL_CHARS`] are cut with an ellipsis (the tables
/// keep the whole name).
fn bar_labels(o: &Outcome) -> Vec<String> {
    o.rows
        .iter()
        .map(|r| {
            let shared = o.rows.iter().filter(|x| x.name == r.name).count() > 1;
            let label = match r.extra.get("profile").and_then(Value::as_str) {
                Some(p) if shared => format!("{} ({p})", r.name),
                _ => r.name.clone(),
            };
            if label.chars().count() > LABEL_CHARS {
                let cut: String = label.chars().take(LABEL_CHARS - 1).collect();
                format!("{cut}…")
            } else {
                label
            }
        })
        .collect()
}

/// Height in pixels of one variant's group of bars.
fn group_height(o: &Outcome) -> f64 {
    let bar = if o.series.len() > 1 { 15.0 } else { 22.0 };
    bar * o.series.len() as f64 + 12.0
}

/// Rows that have a latency distribution to draw.
fn latency_rows(o: &Outcome) -> Vec<(&Row, &Latency)> {
    o.rows
        .iter()
        .filter_map(|r| r.latency.as_ref().map(|l| (r, l)))
        .filter(|(_, l)| l.curve.iter().any(|p| p.1 > 0.0 && p.1.is_finite()))
        .collect()
}

/// One SVG per scenario: a header (scenario, what ran, machine), grouped
/// horizontal bars (one group per variant, one bar per series) on a linear
/// or, when values span more than 30×, a log axis; then, when the variants
/// have latencies, their distributions as cumulative curves on a log time
/// axis with the 16 ms frame budget marked.
pub fn svg_chart(o: &Outcome, machine: &Machine) -> Result<String, BenchError> {
    let title = wrapped(&o.title, 12.0);
    let about = wrapped(
        &format!("{} · reproduces {}", machine.one_line(), o.reproduces),
        11.0,
    );
    let header_h = 40.0 + 17.0 * title.len() as f64 + 15.0 * about.len() as f64 + 10.0;
    let bars_h = 30.0 + group_height(o) * o.rows.len().max(1) as f64 + 30.0;
    let curves = latency_rows(o);
    let cdf_h = if curves.is_empty() {
        0.0
    } else {
        30.0 + (34.0 * curves.len() as f64 + 20.0).max(240.0) + 34.0
    };
    let height = (header_h + bars_h + cdf_h + 10.0).ceil() as u32;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, height)).into_drawing_area();
        let drawn = (|| -> Drawn {
            root.fill(&WHITE)?;
            let (head, rest) = root.split_vertically(header_h as u32);
            header(&head, o, &title, &about)?;
            let (bar_area, cdf_area) = rest.split_vertically(bars_h as u32);
            bars(&bar_area, o)?;
            if !curves.is_empty() {
                cdf(&cdf_area, &curves)?;
            }
            root.present()?;
            Ok(())
        })();
        drawn.map_err(|e| BenchError::Input(format!("drawing the {} chart: {e}", o.scenario)))?;
    }
    Ok(svg)
}

/// Scenario name, what ran, and the machine.
fn header(area: &Area, o: &Outcome, title: &[String], about: &[String]) -> Drawn {
    let bold = ("sans-serif", 18.0 * 1.24)
        .into_font()
        .style(FontStyle::Bold)
        .color(&INK);
    area.draw(&Text::new(
        format!("litelane-bench {}", o.scenario),
        (20, 14),
        bold,
    ))?;
    let mut y = 46;
    for l in title {
        area.draw(&Text::new(l.as_str(), (20, y), text(12.0, GREY)))?;
        y += 17;
    }
    for l in about {
        area.draw(&Text::new(l.as_str(), (20, y), text(11.0, LIGHT)))?;
        y += 15;
    }
    Ok(())
}

/// The bar groups, one per variant.
fn bars(area: &Area, o: &Outcome) -> Drawn {
    let values = bar_values(o);
    let positive: Vec<f64> = values
        .iter()
        .flatten()
        .copied()
        .filter(|v| *v > 0.0)
        .collect();
    if positive.is_empty() {
        area.draw(&Text::new(
            "no figures to chart",
            (20, 12),
            text(12.0, ALERT),
        ))?;
        return Ok(());
    }
    let max = positive.iter().copied().fold(f64::MIN, f64::max);
    let min = positive.iter().copied().fold(f64::MAX, f64::min);
    let log = max / min > 30.0;
    let labels = bar_labels(o);
    let label_w = labels
        .iter()
        .map(|l| text_width(l, 12.0))
        .fold(0.0, f64::max)
        .max(80.0)
        + 24.0;
    let value_w = o
        .series
        .iter()
        .map(|s| text_width(&format!("8.88M {}", s.label), 11.0))
        .fold(0.0, f64::max)
        + 20.0;
    // Caption and, for several series, their legend.
    let caption = o
        .series
        .iter()
        .map(|s| s.label)
        .collect::<Vec<_>>()
        .join(" and ");
    let caption = format!(
        "{caption} {}(longer is better)",
        if log { "— log scale " } else { "" }
    );
    let x0 = label_w as i32;
    area.draw(&Text::new(caption.as_str(), (x0, 6), text(11.0, GREY)))?;
    if o.series.len() > 1 {
        // Prose is narrower than the label estimate: place the keys after
        // the caption at an average character width.
        let mut lx = x0 + (caption.chars().count() as f64 * 11.0 * 0.55) as i32 + 24;
        for (i, s) in o.series.iter().enumerate() {
            area.draw(&Rectangle::new(
                [(lx, 7), (lx + 10, 17)],
                OURS[i % OURS.len()].filled(),
            ))?;
            area.draw(&Text::new(s.label, (lx + 14, 6), text(11.0, GREY)))?;
            lx += text_width(s.label, 11.0) as i32 + 34;
        }
    }
    let (_, plot) = area.split_vertically(26);
    let mut builder = ChartBuilder::on(&plot);
    builder
        .margin_left(label_w as u32)
        .margin_right(value_w as u32)
        .x_label_area_size(24);
    let n = o.rows.len() as f64;
    if log {
        let lo = 10f64.powf(min.log10().floor());
        let hi = 10f64.powf(max.log10().ceil());
        let mut chart = builder.build_cartesian_2d((lo..hi).log_scale(), 0.0..n)?;
        draw_bars(&mut chart, o, &labels, &values, lo)
    } else {
        let mut chart = builder.build_cartesian_2d(0.0..nice_ceiling(max), 0.0..n)?;
        draw_bars(&mut chart, o, &labels, &values, 0.0)
    }
}

/// Draws the grid, the bars, their values and the variants' names on a
/// chart whose y axis counts variants from the bottom.
fn draw_bars<X>(
    chart: &mut ChartContext<'_, SVGBackend<'_>, Cartesian2d<X, RangedCoordf64>>,
    o: &Outcome,
    labels: &[String],
    values: &[Vec<f64>],
    floor: f64,
) -> Drawn
where
    X: Ranged<ValueType = f64> + ValueFormatter<f64>,
{
    chart
        .configure_mesh()
        .disable_y_mesh()
        .y_labels(0)
        .x_labels(6)
        .x_label_formatter(&|v| short_num(*v))
        .bold_line_style(GRID)
        .light_line_style(TRANSPARENT)
        .axis_style(GRID)
        .label_style(text(10.0, LIGHT))
        .draw()?;
    let n = o.rows.len();
    let series = o.series.len().max(1) as f64;
    let band = 0.8 / series;
    for (i, ((r, label), vals)) in o.rows.iter().zip(labels).zip(values).enumerate() {
        let ours = is_ours(&r.name);
        let top = (n - i) as f64;
        let name_style = if ours {
            ("sans-serif", 12.0 * 1.24)
                .into_font()
                .style(FontStyle::Bold)
                .color(&INK)
                .pos(Pos::new(HPos::Right, VPos::Center))
        } else {
            anchored(12.0, INK, HPos::Right)
        };
        let name_dy = if r.errors > 0 { -6 } else { 0 };
        chart.plotting_area().draw(
            &(EmptyElement::at((floor, top - 0.5))
                + Text::new(label.clone(), (-10, name_dy), name_style)),
        )?;
        if r.errors > 0 {
            chart.plotting_area().draw(
                &(EmptyElement::at((floor, top - 0.5))
                    + Text::new(
                        format!("{} errors", group_digits(r.errors as f64, 0)),
                        (-10, 8),
                        anchored(10.0, ALERT, HPos::Right),
                    )),
            )?;
        }
        for (k, v) in vals.iter().enumerate() {
            let y1 = top - 0.1 - band * k as f64;
            let y2 = y1 - band * 0.85;
            let colour = if ours { OURS[k % 3] } else { PLAIN[k % 3] };
            if *v > 0.0 {
                chart
                    .plotting_area()
                    .draw(&Rectangle::new([(floor, y1), (*v, y2)], colour.filled()))?;
            }
            let label = if *v > 0.0 {
                format!("{} {}", short_num(*v), o.series[k].label)
            } else {
                "—".to_string()
            };
            chart.plotting_area().draw(
                &(EmptyElement::at((v.max(floor), (y1 + y2) / 2.0))
                    + Text::new(label, (6, 0), anchored(11.0, GREY, HPos::Left))),
            )?;
        }
    }
    Ok(())
}

/// Rounds `x` up to 1, 2, 2.5 or 5 times a power of ten.
fn nice_ceiling(x: f64) -> f64 {
    if x <= 0.0 {
        return 1.0;
    }
    let p = 10f64.powf(x.log10().floor());
    for m in [1.0, 2.0, 2.5, 5.0, 10.0] {
        if m * p >= x {
            return m * p;
        }
    }
    10.0 * p
}

/// Latency CDFs with a legend on the right.
fn cdf(area: &Area, rows: &[(&Row, &Latency)]) -> Drawn {
    area.draw(&Text::new(
        "Latency per operation: share of operations done within t (higher and further left is better)",
        (20, 6),
        ("sans-serif", 13.0 * 1.24)
            .into_font()
            .style(FontStyle::Bold)
            .color(&INK),
    ))?;
    let (_, rest) = area.split_vertically(30);
    let legend_w = rows
        .iter()
        .map(|(r, _)| text_width(&r.name, 11.0))
        .fold(200.0, f64::max)
        .min(420.0)
        + 40.0;
    let (plot, legend) = rest.split_horizontally(WIDTH - legend_w as u32);
    let points = rows
        .iter()
        .flat_map(|(_, l)| l.curve.iter().map(|p| p.1))
        .filter(|v| *v > 0.0 && v.is_finite());
    let min = points.clone().fold(f64::MAX, f64::min).max(1e-3);
    let max = points.fold(f64::MIN, f64::max).max(FRAME_MS * 1.25);
    let lo = 10f64.powf(min.log10().floor());
    let hi = 10f64.powf(max.log10().ceil());
    let mut chart = ChartBuilder::on(&plot)
        .margin_left(20)
        .margin_right(16)
        .margin_top(16)
        .margin_bottom(6)
        .x_label_area_size(26)
        .y_label_area_size(44)
        .build_cartesian_2d((lo..hi).log_scale(), 0.0..1.0)?;
    chart
        .configure_mesh()
        .x_label_formatter(&|v| format!("{} ms", short_num(*v)))
        .y_label_formatter(&|q| format!("{:.0}%", q * 100.0))
        .bold_line_style(GRID)
        .light_line_style(TRANSPARENT)
        .axis_style(LIGHT)
        .label_style(text(10.0, LIGHT))
        .draw()?;
    chart.draw_series(DashedLineSeries::new(
        [(FRAME_MS, 0.0), (FRAME_MS, 1.0)],
        4,
        3,
        ALERT.stroke_width(1),
    ))?;
    chart.plotting_area().draw(
        &(EmptyElement::at((FRAME_MS, 1.0))
            + Text::new(
                "16 ms (one frame)",
                (0, -8),
                anchored(10.0, ALERT, HPos::Center),
            )),
    )?;
    for (i, (r, l)) in rows.iter().enumerate() {
        let colour = CURVES[i % CURVES.len()];
        let width = if is_ours(&r.name) { 3 } else { 2 };
        chart.draw_series(LineSeries::new(
            l.curve
                .iter()
                .filter(|p| p.1.is_finite())
                .map(|&(q, ms)| (ms.max(lo), q)),
            colour.stroke_width(width),
        ))?;
        let y = 14 + 34 * i as i32;
        legend.draw(&PathElement::new(
            vec![(4, y), (22, y)],
            colour.stroke_width(3),
        ))?;
        legend.draw(&Text::new(
            r.name.clone(),
            (28, y),
            anchored(11.0, INK, HPos::Left),
        ))?;
        legend.draw(&Text::new(
            format!(
                "p50 {} · p99 {} · max {} ms",
                ms_cell(l.p50_ms),
                ms_cell(l.p99_ms),
                ms_cell(l.max_ms)
            ),
            (28, y + 14),
            anchored(10.0, GREY, HPos::Left),
        ))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome() -> Outcome {
        let mut o = Outcome::new("insert", "report 000", "10 rows".into());
        let mut samples: Vec<Duration> = (1..=100).map(Duration::from_millis).collect();
        o.rows.push(
            Row::new("litelane", Unit::Rows, 10, Duration::from_secs(1))
                .latency(Latency::from_samples(&mut samples))
                .with("ratio_vs_raw_ffi", 0.95),
        );
        o.rows
            .push(Row::new("raw-ffi <&>", Unit::Rows, 10, Duration::from_secs(2)).errors(3));
        o.column("× raw-ffi", "ratio_vs_raw_ffi", 2);
        o
    }

    #[test]
    fn digits_are_grouped_by_thousands() {
        assert_eq!(group_digits(1_234_567.0, 0), "1,234,567");
        assert_eq!(group_digits(999.0, 0), "999");
        assert_eq!(group_digits(1234.5, 1), "1,234.5");
        assert_eq!(group_digits(-1000.0, 0), "-1,000");
        assert_eq!(group_digits(-1234.567, 2), "-1,234.57");
        assert_eq!(group_digits(1.0, 3), "1.000");
        assert_eq!(group_digits(999.96, 1), "1,000.0");
        assert_eq!(group_digits(0.0, 0), "0");
        assert_eq!(group_digits(-0.4, 0), "0");
        assert_eq!(group_digits(f64::NAN, 0), "-");
        assert_eq!(group_digits(f64::INFINITY, 2), "-");
    }

    #[test]
    fn latency_percentiles_come_from_the_samples() {
        let mut s: Vec<Duration> = (1..=100).rev().map(Duration::from_millis).collect();
        let l = Latency::from_samples(&mut s).unwrap();
        assert_eq!(l.p50_ms, 51.0);
        assert_eq!(l.p99_ms, 99.0);
        assert_eq!(l.max_ms, 100.0);
        assert!(Latency::from_samples(&mut []).is_none());
    }

    #[test]
    fn json_rows_have_the_brief_fields() {
        let o = outcome();
        let v = o.rows[0].to_json();
        for k in [
            "name",
            "rows",
            "seconds",
            "rows_per_sec",
            "errors",
            "p50_ms",
            "p99_ms",
            "max_ms",
        ] {
            assert!(v.get(k).is_some(), "{k} missing in {v}");
        }
        assert_eq!(v["rows_per_sec"], 10.0);
    }

    /// The SVG parsed (it must be well-formed XML) and checked for a root
    /// `<svg>`.
    fn parse(svg: &str) -> roxmltree::Document<'_> {
        let doc = roxmltree::Document::parse(svg)
            .unwrap_or_else(|e| panic!("SVG is not well-formed XML ({e}):\n{svg}"));
        assert_eq!(doc.root_element().tag_name().name(), "svg");
        doc
    }

    /// The trimmed contents of every `<text>`.
    fn texts(doc: &roxmltree::Document<'_>) -> Vec<String> {
        doc.descendants()
            .filter(|n| n.has_tag_name("text"))
            .map(|n| n.text().unwrap_or("").trim().to_string())
            .collect()
    }

    /// Fill colours of the bars (every rect in a bar colour).
    fn bar_fills(doc: &roxmltree::Document<'_>) -> Vec<String> {
        let colours: Vec<String> = OURS
            .iter()
            .chain(&PLAIN)
            .map(|c| format!("#{:02X}{:02X}{:02X}", c.0, c.1, c.2))
            .collect();
        doc.descendants()
            .filter(|n| n.has_tag_name("rect"))
            .filter_map(|n| n.attribute("fill"))
            .filter(|f| colours.iter().any(|c| c == f))
            .map(str::to_string)
            .collect()
    }

    #[test]
    fn tables_and_svg_escape_and_show_every_variant() {
        let o = outcome();
        let text = text_table(&o);
        assert!(text.contains("litelane") && text.contains("0.95"), "{text}");
        let md = markdown_section(&o);
        assert!(md.contains("| litelane |"), "{md}");
        let m = Machine::detect(Path::new("/tmp"));
        let svg = svg_chart(&o, &m).unwrap();
        let doc = parse(&svg);
        assert!(svg.contains("raw-ffi &lt;&amp;&gt;"), "{svg}");
        assert!(!svg.contains("<&>"));
        let t = texts(&doc);
        for name in ["litelane", "raw-ffi <&>"] {
            assert!(t.iter().any(|x| x == name), "{name} not in {t:?}");
        }
        assert!(t.iter().any(|x| x == "3 errors"), "{t:?}");
        assert!(
            t.iter().any(|x| x.contains(&m.cpu)),
            "no machine line in {t:?}"
        );
        assert!(t.iter().any(|x| x == "litelane-bench insert"), "{t:?}");
        // One bar per variant (one series), litelane's in its own colour.
        assert_eq!(bar_fills(&doc), ["#0F7B6C", "#8AA4C8"]);
        // The latency curve of the one variant that has latencies.
        let curves = doc
            .descendants()
            .filter(|n| n.has_tag_name("polyline"))
            .filter(|n| n.attribute("points").unwrap_or("").split(' ').count() > 10)
            .count();
        assert_eq!(curves, 1, "{svg}");
    }

    #[test]
    fn svg_has_a_bar_per_variant_per_series_for_hostile_names() {
        // (variant name, writes/s, reads/s): a bar for every positive value.
        let cases: &[(&str, f64, f64)] = &[
            ("litelane", 5_000.0, 50_000.0),
            ("a\"quoted\" 'name'", 10.0, 0.0),
            ("]]><script>x</script>", 1.0, 1e7),
            ("日本語 & ünïcödé", 0.0, 0.0),
            ("", 3.0, 4.0),
            (&"very-long-variant-name-".repeat(6), 123.0, 456.0),
        ];
        let mut o = Outcome::new("wal", "report 002", "hostile".into());
        o.series = Series::writes_and_reads();
        for (name, w, r) in cases {
            o.rows.push(
                Row::new(*name, Unit::Ops, 1, Duration::from_secs(1))
                    .with("writes_per_sec", *w)
                    .with("reads_per_sec", *r),
            );
        }
        let m = Machine::detect(Path::new("/tmp"));
        let svg = svg_chart(&o, &m).unwrap();
        let doc = parse(&svg);
        let t = texts(&doc);
        for (name, _, _) in cases.iter().filter(|c| !c.0.is_empty()) {
            let shown = if name.chars().count() > LABEL_CHARS {
                format!("{}…", &name[..LABEL_CHARS - 1])
            } else {
                name.to_string()
            };
            assert!(t.contains(&shown), "{shown:?} not in {t:?}");
        }
        assert!(!svg.contains("<script>") && !svg.contains("]]>"));
        let positive = cases
            .iter()
            .map(|c| usize::from(c.1 > 0.0) + usize::from(c.2 > 0.0))
            .sum::<usize>();
        // A bar per positive value, and a legend key per series.
        assert_eq!(bar_fills(&doc).len(), positive + 2, "{svg}");
        assert!(t.iter().any(|x| x == "5000 writes/s"), "{t:?}");
        assert!(t.iter().any(|x| x == "50.0k reads/s"), "{t:?}");
        // Values spanning 1 to 10M: a log axis, said in the caption.
        assert!(t.iter().any(|x| x.contains("log scale")), "{t:?}");
    }

    #[test]
    fn svg_without_figures_says_so() {
        let m = Machine::detect(Path::new("/tmp"));
        let empty = Outcome::new("insert", "report 000", "nothing".into());
        let mut zero = empty.clone();
        zero.rows
            .push(Row::new("litelane", Unit::Rows, 0, Duration::from_secs(1)));
        for o in [empty, zero] {
            let svg = svg_chart(&o, &m).unwrap();
            let doc = parse(&svg);
            assert!(bar_fills(&doc).is_empty(), "{svg}");
            assert!(texts(&doc).iter().any(|x| x == "no figures to chart"));
        }
    }

    #[test]
    fn repeated_names_are_told_apart_by_profile() {
        let mut o = Outcome::new("insert", "report 000", "x".into());
        for p in ["safe", "fast"] {
            o.rows.push(
                Row::new("litelane", Unit::Rows, 10, Duration::from_secs(1)).with("profile", p),
            );
        }
        o.rows.push(
            Row::new("raw-ffi", Unit::Rows, 10, Duration::from_secs(1)).with("profile", "safe"),
        );
        assert_eq!(
            bar_labels(&o),
            ["litelane (safe)", "litelane (fast)", "raw-ffi"]
        );
    }

    #[test]
    fn text_and_markdown_tables_hold_every_value() {
        let mut o = outcome();
        o.rows[1].set("ratio_vs_raw_ffi", 1.0);
        o.notes.push("a note".into());
        let text = text_table(&o);
        let md = markdown_section(&o);
        let lat = o.rows[0].latency.clone().unwrap();
        for cell in [
            "litelane",
            "raw-ffi <&>",
            "1.000",
            "2.000",
            "10",
            "5",
            "3",
            "0.95",
            "1.00",
            &ms_cell(lat.p50_ms),
            &ms_cell(lat.p99_ms),
            &ms_cell(lat.max_ms),
            "× raw-ffi",
            "p50 ms",
        ] {
            let in_text = text
                .lines()
                .any(|l| l.split("  ").any(|c| c.trim() == cell));
            assert!(in_text, "{cell:?} not a cell of\n{text}");
            assert!(
                md.contains(&format!("| {cell} |")),
                "{cell:?} not a cell of\n{md}"
            );
        }
        assert!(text.contains("note: a note") && md.contains("- a note"));
        // Header rule as wide as the table; columns right-aligned after the first.
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[2].chars().all(|c| c == '-'), "{text}");
        let width = lines[3..5].iter().map(|l| l.chars().count()).max().unwrap();
        assert_eq!(lines[2].chars().count(), width, "{text}");
        assert!(md.contains("|---|---:|"), "{md}");
    }
}
