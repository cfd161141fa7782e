//! What a scenario produces ([`Outcome`], [`Row`]) and the three ways it is
//! shown: a plain table on stdout, one JSON object, and a Markdown report with
//! one hand-written SVG chart per scenario.

use std::fmt::Write as _;
use std::path::Path;
use std::time::Duration;

use serde_json::{json, Map, Value};

use crate::error::CliError;

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

/// Formats `x` with thousands separators and `decimals` decimals.
pub fn group_digits(x: f64, decimals: usize) -> String {
    if !x.is_finite() {
        return "-".into();
    }
    let s = format!("{:.*}", decimals, x.abs());
    let (int, frac) = s
        .split_once('.')
        .map_or((s.as_str(), None), |(a, b)| (a, Some(b)));
    let mut out = String::new();
    for (i, c) in int.chars().enumerate() {
        if i > 0 && (int.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    if let Some(f) = frac {
        out.push('.');
        out.push_str(f);
    }
    if x < 0.0 {
        out.insert(0, '-');
    }
    out
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

/// The plain-text table printed on stdout.
pub fn text_table(o: &Outcome) -> String {
    let (header, body) = table_cells(o);
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in &body {
        for (w, c) in widths.iter_mut().zip(row) {
            *w = (*w).max(c.chars().count());
        }
    }
    let line = |cells: &[String]| -> String {
        let mut s = String::new();
        for (i, (c, w)) in cells.iter().zip(&widths).enumerate() {
            if i == 0 {
                let _ = write!(s, "{c:<w$}");
            } else {
                let _ = write!(s, "  {c:>w$}");
            }
        }
        s.trim_end().to_string()
    };
    let mut out = String::new();
    let _ = writeln!(out, "{}: {}", o.scenario, o.title);
    let _ = writeln!(out, "{}", line(&header));
    let total: usize = widths.iter().sum::<usize>() + 2 * (widths.len() - 1);
    let _ = writeln!(out, "{}", "-".repeat(total));
    for row in &body {
        let _ = writeln!(out, "{}", line(row));
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
) -> Result<(), CliError> {
    std::fs::create_dir_all(dir)
        .map_err(|e| CliError::io(format!("creating {}", dir.display()), e))?;
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
        let svg = svg_chart(o, machine);
        let path = dir.join(format!("{}.svg", o.scenario));
        std::fs::write(&path, svg)
            .map_err(|e| CliError::io(format!("writing {}", path.display()), e))?;
    }
    let path = dir.join("report.md");
    std::fs::write(&path, md).map_err(|e| CliError::io(format!("writing {}", path.display()), e))
}

// ---------------------------------------------------------------- SVG ----

const WIDTH: f64 = 860.0;
const LABEL_W: f64 = 230.0;
const VALUE_W: f64 = 150.0;
const FONT: &str = "font-family=\"-apple-system, 'Segoe UI', Helvetica, Arial, sans-serif\"";
/// Bar colours per series, for plain variants and for litelane's own.
const PLAIN: [&str; 3] = ["#8aa4c8", "#c8a98a", "#a9c88a"];
const OURS: [&str; 3] = ["#0f7b6c", "#b5651d", "#4c8a1e"];
const CURVES: [&str; 8] = [
    "#0f7b6c", "#d1495b", "#3066be", "#edae49", "#7b2cbf", "#5c946e", "#8d6a9f", "#444444",
];

/// Escapes text for SVG.
fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
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
    } else {
        format!("{x:.3}")
    }
}

fn is_ours(name: &str) -> bool {
    name.starts_with("litelane")
}

/// One SVG per scenario: grouped horizontal bars (one group per variant, one
/// bar per series) on a linear or, when values span more than 30×, a log
/// axis; then, when the variants have latencies, their distributions as
/// cumulative curves on a log time axis with the 16 ms frame budget marked.
pub fn svg_chart(o: &Outcome, machine: &Machine) -> String {
    let mut body = String::new();
    let mut y = 20.0;
    let _ = writeln!(
        body,
        "<text x=\"20\" y=\"{}\" font-size=\"18\" font-weight=\"600\" fill=\"#222\">{}</text>",
        y + 10.0,
        esc(&format!("litelane bench {}", o.scenario))
    );
    y += 30.0;
    let _ = writeln!(
        body,
        "<text x=\"20\" y=\"{y}\" font-size=\"12\" fill=\"#555\">{}</text>",
        esc(&o.title)
    );
    y += 16.0;
    let _ = writeln!(
        body,
        "<text x=\"20\" y=\"{y}\" font-size=\"11\" fill=\"#888\">{}</text>",
        esc(&format!(
            "{} · reproduces {}",
            machine.one_line(),
            o.reproduces
        ))
    );
    y += 22.0;
    y = bars(&mut body, o, y);
    if o.rows.iter().any(|r| r.latency.is_some()) {
        y = cdf(&mut body, o, y + 16.0);
    }
    let height = y + 16.0;
    format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{WIDTH}\" height=\"{height}\" \
         viewBox=\"0 0 {WIDTH} {height}\" {FONT}>\n\
         <rect width=\"100%\" height=\"100%\" fill=\"#ffffff\"/>\n{body}</svg>\n"
    )
}

/// Draws the bar groups from `y`; returns the y below them.
fn bars(out: &mut String, o: &Outcome, mut y: f64) -> f64 {
    let values: Vec<Vec<f64>> = o
        .rows
        .iter()
        .map(|r| {
            o.series
                .iter()
                .map(|s| r.num(s.key).unwrap_or(0.0))
                .collect()
        })
        .collect();
    let positive: Vec<f64> = values
        .iter()
        .flatten()
        .copied()
        .filter(|v| *v > 0.0)
        .collect();
    if positive.is_empty() {
        let _ = writeln!(
            out,
            "<text x=\"20\" y=\"{}\" font-size=\"12\" fill=\"#a00\">no figures to chart</text>",
            y + 12.0
        );
        return y + 24.0;
    }
    let max = positive.iter().copied().fold(f64::MIN, f64::max);
    let min = positive.iter().copied().fold(f64::MAX, f64::min);
    let log = max / min > 30.0;
    let x0 = LABEL_W;
    let span = WIDTH - LABEL_W - VALUE_W;
    let (lo, hi) = if log {
        (
            10f64.powf(min.log10().floor()),
            10f64.powf(max.log10().ceil()),
        )
    } else {
        (0.0, nice_ceiling(max))
    };
    let scale = |v: f64| -> f64 {
        if v <= 0.0 {
            0.0
        } else if log {
            ((v.max(lo).log10() - lo.log10()) / (hi.log10() - lo.log10())) * span
        } else {
            v / hi * span
        }
    };
    // Legend / axis caption.
    let caption = o
        .series
        .iter()
        .map(|s| s.label)
        .collect::<Vec<_>>()
        .join(" and ");
    let _ = writeln!(
        out,
        "<text x=\"{x0}\" y=\"{y}\" font-size=\"11\" fill=\"#555\">{} {}(longer is better)</text>",
        esc(&caption),
        if log { "— log scale " } else { "" }
    );
    if o.series.len() > 1 {
        let mut lx = x0 + 330.0;
        for (i, s) in o.series.iter().enumerate() {
            let _ = writeln!(
                out,
                "<rect x=\"{lx}\" y=\"{}\" width=\"10\" height=\"10\" fill=\"{}\"/>\
                 <text x=\"{}\" y=\"{y}\" font-size=\"11\" fill=\"#555\">{}</text>",
                y - 9.0,
                OURS[i % OURS.len()],
                lx + 14.0,
                esc(s.label)
            );
            lx += 110.0;
        }
    }
    y += 10.0;
    let bar_h = if o.series.len() > 1 { 14.0 } else { 20.0 };
    let group_h = bar_h * o.series.len() as f64 + 12.0;
    let top = y;
    let bottom = y + group_h * o.rows.len() as f64;
    // Grid lines with tick labels.
    let ticks: Vec<f64> = if log {
        let mut t = Vec::new();
        let mut v = lo;
        while v <= hi * 1.0001 {
            t.push(v);
            v *= 10.0;
        }
        t
    } else {
        (0..=4).map(|i| hi * f64::from(i) / 4.0).collect()
    };
    for t in ticks {
        let x = x0 + scale(t).max(0.0);
        let _ = writeln!(
            out,
            "<line x1=\"{x:.1}\" y1=\"{top}\" x2=\"{x:.1}\" y2=\"{bottom}\" stroke=\"#e4e4e4\"/>\
             <text x=\"{x:.1}\" y=\"{}\" font-size=\"10\" fill=\"#999\" text-anchor=\"middle\">{}</text>",
            bottom + 13.0,
            short_num(t)
        );
    }
    for (r, vals) in o.rows.iter().zip(&values) {
        let ours = is_ours(&r.name);
        let label_y = y + group_h / 2.0 - 2.0;
        let _ = writeln!(
            out,
            "<text x=\"{}\" y=\"{label_y}\" font-size=\"12\" text-anchor=\"end\" fill=\"#222\"{}>{}</text>",
            x0 - 8.0,
            if ours { " font-weight=\"600\"" } else { "" },
            esc(&r.name)
        );
        if r.errors > 0 {
            let _ = writeln!(
                out,
                "<text x=\"{}\" y=\"{}\" font-size=\"10\" text-anchor=\"end\" fill=\"#c0392b\">{} errors</text>",
                x0 - 8.0,
                label_y + 12.0,
                group_digits(r.errors as f64, 0)
            );
        }
        for (i, v) in vals.iter().enumerate() {
            let by = y + 4.0 + bar_h * i as f64;
            let w = scale(*v).max(if *v > 0.0 { 1.0 } else { 0.0 });
            let colour = if ours { OURS[i % 3] } else { PLAIN[i % 3] };
            let _ = writeln!(
                out,
                "<rect x=\"{x0}\" y=\"{by}\" width=\"{w:.1}\" height=\"{:.1}\" rx=\"2\" fill=\"{colour}\">\
                 <title>{}: {}</title></rect>",
                bar_h - 3.0,
                esc(&r.name),
                group_digits(*v, 0)
            );
            let text = if *v > 0.0 {
                format!("{} {}", short_num(*v), o.series[i].label)
            } else {
                "—".to_string()
            };
            let _ = writeln!(
                out,
                "<text x=\"{:.1}\" y=\"{:.1}\" font-size=\"11\" fill=\"#333\">{}</text>",
                x0 + w + 6.0,
                by + bar_h - 5.0,
                esc(&text)
            );
        }
        y += group_h;
    }
    bottom + 24.0
}

/// Rounds `x` up to 1, 2 or 5 times a power of ten.
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

/// Draws latency CDFs from `y`; returns the y below them.
fn cdf(out: &mut String, o: &Outcome, y: f64) -> f64 {
    let rows: Vec<&Row> = o.rows.iter().filter(|r| r.latency.is_some()).collect();
    let points: Vec<f64> = rows
        .iter()
        .flat_map(|r| {
            r.latency
                .as_ref()
                .map(|l| l.curve.iter().map(|p| p.1))
                .into_iter()
                .flatten()
        })
        .filter(|v| *v > 0.0)
        .collect();
    if points.is_empty() {
        return y;
    }
    let min = points.iter().copied().fold(f64::MAX, f64::min).max(1e-3);
    let max = points.iter().copied().fold(f64::MIN, f64::max).max(20.0);
    let lo = 10f64.powf(min.log10().floor());
    let hi = 10f64.powf(max.log10().ceil());
    let (x0, w, h) = (70.0, WIDTH - 70.0 - 250.0, 220.0);
    let top = y + 22.0;
    let xs = |ms: f64| x0 + (ms.max(lo).log10() - lo.log10()) / (hi.log10() - lo.log10()) * w;
    let ys = |q: f64| top + h - q * h;
    let _ = writeln!(
        out,
        "<text x=\"20\" y=\"{}\" font-size=\"13\" font-weight=\"600\" fill=\"#222\">\
         Latency per operation: share of operations done within t (higher and further left is better)</text>",
        y + 6.0
    );
    let _ = writeln!(
        out,
        "<rect x=\"{x0}\" y=\"{top}\" width=\"{w}\" height=\"{h}\" fill=\"#fafafa\" stroke=\"#ddd\"/>"
    );
    let mut t = lo;
    while t <= hi * 1.0001 {
        let x = xs(t);
        let _ = writeln!(
            out,
            "<line x1=\"{x:.1}\" y1=\"{top}\" x2=\"{x:.1}\" y2=\"{}\" stroke=\"#e4e4e4\"/>\
             <text x=\"{x:.1}\" y=\"{}\" font-size=\"10\" fill=\"#999\" text-anchor=\"middle\">{} ms</text>",
            top + h,
            top + h + 13.0,
            short_num(t)
        );
        t *= 10.0;
    }
    for q in [0.0, 0.5, 0.9, 0.99, 1.0] {
        let yy = ys(q);
        let _ = writeln!(
            out,
            "<line x1=\"{x0}\" y1=\"{yy:.1}\" x2=\"{}\" y2=\"{yy:.1}\" stroke=\"#eee\"/>\
             <text x=\"{}\" y=\"{:.1}\" font-size=\"10\" fill=\"#999\" text-anchor=\"end\">{}%</text>",
            x0 + w,
            x0 - 6.0,
            yy + 3.0,
            q * 100.0
        );
    }
    // The 16 ms frame budget (report 001's stall threshold).
    let fx = xs(16.0);
    let _ = writeln!(
        out,
        "<line x1=\"{fx:.1}\" y1=\"{top}\" x2=\"{fx:.1}\" y2=\"{}\" stroke=\"#c0392b\" stroke-dasharray=\"4 3\"/>\
         <text x=\"{:.1}\" y=\"{}\" font-size=\"10\" fill=\"#c0392b\">16 ms (one frame)</text>",
        top + h,
        fx + 4.0,
        top + 12.0
    );
    for (i, r) in rows.iter().enumerate() {
        let Some(l) = &r.latency else { continue };
        let colour = CURVES[i % CURVES.len()];
        let mut d = String::new();
        for (j, (q, ms)) in l.curve.iter().enumerate() {
            let _ = write!(
                d,
                "{}{:.1},{:.1} ",
                if j == 0 { "M" } else { "L" },
                xs(*ms),
                ys(*q)
            );
        }
        let width = if is_ours(&r.name) { 2.6 } else { 1.6 };
        let _ = writeln!(
            out,
            "<path d=\"{}\" fill=\"none\" stroke=\"{colour}\" stroke-width=\"{width}\"/>",
            d.trim_end()
        );
        let ly = top + 8.0 + 30.0 * i as f64;
        let lx = x0 + w + 14.0;
        let _ = writeln!(
            out,
            "<line x1=\"{lx}\" y1=\"{ly}\" x2=\"{}\" y2=\"{ly}\" stroke=\"{colour}\" stroke-width=\"3\"/>\
             <text x=\"{}\" y=\"{}\" font-size=\"11\" fill=\"#222\">{}</text>\
             <text x=\"{}\" y=\"{}\" font-size=\"10\" fill=\"#666\">p50 {} · p99 {} · max {} ms</text>",
            lx + 18.0,
            lx + 24.0,
            ly + 4.0,
            esc(&r.name),
            lx + 24.0,
            ly + 17.0,
            ms_cell(l.p50_ms),
            ms_cell(l.p99_ms),
            ms_cell(l.max_ms)
        );
    }
    top + h + 24.0
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

    #[test]
    fn tables_and_svg_escape_and_show_every_variant() {
        let o = outcome();
        let text = text_table(&o);
        assert!(text.contains("litelane") && text.contains("0.95"), "{text}");
        let md = markdown_section(&o);
        assert!(md.contains("| litelane |"), "{md}");
        let m = Machine::detect(Path::new("/tmp"));
        let svg = svg_chart(&o, &m);
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        assert!(svg.contains("raw-ffi &lt;&amp;&gt;"));
        assert!(!svg.contains("<&>"));
    }
}
