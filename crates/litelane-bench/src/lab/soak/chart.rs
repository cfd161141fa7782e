//! soak.svg: one panel per series against time, one line per profile;
//! dashed grey lines mark the kills of the writer process, an orange band
//! the disk-full phase, a dashed green line each panel's bound. Drawn with
//! plotters, in the style of the benchmarks' charts (`bench::report`).

use std::path::Path;

use plotters::coord::ranged1d::ValueFormatter;
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;
use plotters::style::text_anchor::HPos;

use litelane::Profile;

use super::measure::Sample;
use super::{LIMIT_PAGES, PAGE_BYTES, SLOW_WRITE_MS};
use crate::bench::report::{anchored, short_num, text, Area, Drawn, GREY, GRID, INK, LIGHT};

/// Chart width, and the height of one panel, in pixels.
const WIDTH: u32 = 900;
const PANEL_H: u32 = 230;
/// Height of the note under the panels.
const FOOT_H: u32 = 34;
/// The log panels start at 10 µs.
const LOG_FLOOR_MS: f64 = 0.01;
/// A long run is drawn with about this many points per line.
const POINTS: f64 = 300.0;
/// Line colours, one per profile (safe, balanced).
const PROFILE_COLOURS: [RGBColor; 2] = [RGBColor(0xd6, 0x27, 0x28), RGBColor(0x1f, 0x77, 0xb4)];
const KILL: RGBColor = RGBColor(0xbb, 0xbb, 0xbb);
const FULL: RGBColor = RGBColor(0xff, 0xd8, 0xa8);
const BOUND: RGBColor = RGBColor(0x2c, 0xa0, 0x2c);
/// The WAL file is kept allocated up to `journal_size_limit` (64 MiB by
/// default), in MiB.
const FILE_BOUND_MIB: f64 = 64.0;

/// How the seconds of one plotted point are summarised.
#[derive(Clone, Copy)]
enum Agg {
    Max,
    Min,
    Median,
}

impl Agg {
    fn name(self) -> &'static str {
        match self {
            Agg::Max => "highest",
            Agg::Min => "lowest",
            Agg::Median => "median",
        }
    }

    /// `None` for no values.
    fn of(self, v: &mut [f64]) -> Option<f64> {
        if v.is_empty() {
            return None;
        }
        v.sort_by(f64::total_cmp);
        Some(match self {
            Agg::Max => v[v.len() - 1],
            Agg::Min => v[0],
            Agg::Median => v[v.len() / 2],
        })
    }
}

/// One panel: a series of the samples against time.
struct Panel {
    title: &'static str,
    /// The y axis's label, with its unit.
    unit: &'static str,
    series: fn(&Sample) -> f64,
    /// A logarithmic y axis (when the values span more than a decade).
    log: bool,
    /// How a long run's seconds are summarised per point.
    agg: Agg,
    /// A bound drawn as a dashed line, and its label.
    bound: Option<(f64, &'static str)>,
}

/// The panels, top to bottom.
fn panels() -> [Panel; 8] {
    let limit_mib = f64::from(LIMIT_PAGES) * PAGE_BYTES as f64 / 1048576.0;
    [
        Panel {
            title: "WAL file size",
            unit: "MiB",
            series: |s| s.wal_bytes as f64 / 1048576.0,
            log: false,
            agg: Agg::Max,
            bound: Some((FILE_BOUND_MIB, "journal_size_limit")),
        },
        Panel {
            title: "WAL in use (pages × 4 KiB)",
            unit: "MiB",
            // Older CSVs have no WAL pages (and no hold): no line.
            series: |s| {
                if s.hold_max_ms.is_nan() {
                    f64::NAN
                } else {
                    s.wal_pages as f64 * PAGE_BYTES as f64 / 1048576.0
                }
            },
            log: false,
            agg: Agg::Max,
            bound: Some((limit_mib, "limit_pages")),
        },
        Panel {
            title: "commit latency p50 per second",
            unit: "ms (log)",
            series: |s| s.p50_ms,
            log: true,
            agg: Agg::Median,
            bound: None,
        },
        Panel {
            title: "commit latency p99 per second",
            unit: "ms (log)",
            series: |s| s.p99_ms,
            log: true,
            agg: Agg::Median,
            bound: None,
        },
        Panel {
            title: "longest write in each second",
            unit: "ms (log)",
            series: |s| s.max_stall_ms,
            log: true,
            agg: Agg::Max,
            bound: Some((SLOW_WRITE_MS, "50 ms")),
        },
        Panel {
            title: "writers held back by checkpoints, in all, in each second",
            unit: "ms",
            series: |s| s.hold_ms,
            log: false,
            agg: Agg::Max,
            bound: None,
        },
        Panel {
            title: "resident memory of the soak process",
            unit: "MiB",
            series: |s| s.rss_kib as f64 / 1024.0,
            log: false,
            agg: Agg::Max,
            bound: None,
        },
        Panel {
            title: "free space on the databases' filesystem",
            unit: "MiB",
            series: |s| {
                if s.disk_free_mib.is_nan() {
                    0.0
                } else {
                    s.disk_free_mib
                }
            },
            log: false,
            agg: Agg::Min,
            bound: None,
        },
    ]
}

/// What every panel marks: the run's length, the kills of the writer
/// process and the disk-full phase (from the first profile), and how many
/// seconds one point stands for.
struct Marks<'a> {
    samples: &'a [Sample],
    profiles: &'a [Profile],
    max_t: f64,
    kills: Vec<f64>,
    /// The first and last second of the disk-full phase.
    full: Option<(f64, f64)>,
    bucket: usize,
}

impl<'a> Marks<'a> {
    fn new(samples: &'a [Sample], profiles: &'a [Profile]) -> Marks<'a> {
        let first: Vec<&Sample> = samples
            .iter()
            .filter(|s| Some(&s.profile) == profiles.first())
            .collect();
        let kills = first
            .windows(2)
            .filter(|p| p[1].kills > p[0].kills)
            .map(|p| p[1].second as f64)
            .collect();
        let full: Vec<f64> = first
            .iter()
            .filter(|s| s.disk_nearly_full)
            .map(|s| s.second as f64)
            .collect();
        let full = full.first().zip(full.last()).map(|(&a, &b)| (a, b));
        let max_t = samples.iter().map(|s| s.second).max().unwrap_or(1).max(1) as f64;
        Marks {
            samples,
            profiles,
            max_t,
            kills,
            full,
            bucket: ((max_t / POINTS).ceil() as usize).max(1),
        }
    }

    /// One profile's line on `panel`: (second, value) per point, split
    /// where a point has no value (a second without a finished write).
    fn lines(&self, panel: &Panel, profile: Profile) -> Vec<Vec<(f64, f64)>> {
        let mine: Vec<&Sample> = self
            .samples
            .iter()
            .filter(|s| s.profile == profile)
            .collect();
        let mut lines = vec![Vec::new()];
        for chunk in mine.chunks(self.bucket) {
            let mut v: Vec<f64> = chunk
                .iter()
                .map(|s| (panel.series)(s))
                .filter(|v| v.is_finite())
                .collect();
            let t = chunk.last().map_or(0.0, |s| s.second as f64);
            match panel.agg.of(&mut v) {
                Some(v) => lines.last_mut().expect("one line").push((t, v)),
                None if lines.last().is_some_and(|l| !l.is_empty()) => lines.push(Vec::new()),
                None => {}
            }
        }
        lines.retain(|l| !l.is_empty());
        lines
    }

    /// The highest value on `panel` (0 when it has none).
    fn max_value(&self, panel: &Panel) -> f64 {
        self.samples
            .iter()
            .map(panel.series)
            .filter(|v| v.is_finite())
            .fold(0.0, f64::max)
    }
}

/// Writes the chart of `samples` (`profiles` in the order of their lines)
/// to `path`.
pub fn write(path: &Path, samples: &[Sample], profiles: &[Profile]) -> std::io::Result<()> {
    let svg = svg(samples, profiles).map_err(|e| std::io::Error::other(format!("drawing: {e}")))?;
    std::fs::write(path, svg)
}

/// The chart, as SVG text.
fn svg(samples: &[Sample], profiles: &[Profile]) -> Result<String, String> {
    let panels = panels();
    let marks = Marks::new(samples, profiles);
    let height = PANEL_H * panels.len() as u32 + FOOT_H;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, height)).into_drawing_area();
        let drawn = (|| -> Drawn {
            root.fill(&WHITE)?;
            let (body, foot) = root.split_vertically(PANEL_H * panels.len() as u32);
            let areas = body.split_evenly((panels.len(), 1));
            for (panel, area) in panels.iter().zip(&areas) {
                draw_panel(area, panel, &marks)?;
            }
            foot.draw(&Text::new(
                "dashed grey: the writer process killed (SIGKILL); orange: the disk-full phase \
                 (filling, held nearly full, 2 s after); dashed green: the panel's bound",
                (20, 10),
                text(11.0, GREY),
            ))?;
            root.present()?;
            Ok(())
        })();
        drawn.map_err(|e| e.to_string())?;
    }
    Ok(svg)
}

/// A panel: its title, the profiles' legend, then the plot.
fn draw_panel(area: &Area, panel: &Panel, marks: &Marks) -> Drawn {
    let max_v = marks.max_value(panel);
    // The axis shows the bound too, with some room above.
    let top = max_v.max(panel.bound.map_or(0.0, |b| b.0)).max(1e-9) * 1.1;
    let mut title = format!(
        "{} ({})",
        panel.title,
        panel.unit.trim_end_matches(" (log)")
    );
    if marks.bucket > 1 {
        title += &format!("; {} of each {} s", panel.agg.name(), marks.bucket);
    }
    title += &format!("; max {}", short_num(max_v));
    area.draw(&Text::new(
        title,
        (20, 8),
        ("sans-serif", 12.0 * 1.24)
            .into_font()
            .style(FontStyle::Bold)
            .color(&INK),
    ))?;
    for (k, p) in marks.profiles.iter().enumerate() {
        let colour = PROFILE_COLOURS[k % PROFILE_COLOURS.len()];
        let x = WIDTH as i32 - 170 + 80 * k as i32;
        area.draw(&PathElement::new(
            vec![(x, 15), (x + 16, 15)],
            colour.stroke_width(2),
        ))?;
        area.draw(&Text::new(
            p.name(),
            (x + 20, 15),
            anchored(11.0, INK, HPos::Left),
        ))?;
    }
    let (_, plot) = area.split_vertically(26);
    let mut builder = ChartBuilder::on(&plot);
    builder
        .margin_left(10)
        .margin_right(24)
        .margin_bottom(6)
        .x_label_area_size(34)
        .y_label_area_size(62);
    if panel.log && top > LOG_FLOOR_MS * 10.0 {
        let chart =
            builder.build_cartesian_2d(0.0..marks.max_t, (LOG_FLOOR_MS..top).log_scale())?;
        plot_panel(chart, panel, marks, LOG_FLOOR_MS, top)
    } else {
        let chart = builder.build_cartesian_2d(0.0..marks.max_t, 0.0..top)?;
        plot_panel(chart, panel, marks, 0.0, top)
    }
}

/// The axes, the marks and the profiles' lines on a panel whose y axis
/// runs from `lo` to `hi`.
fn plot_panel<Y>(
    mut chart: ChartContext<'_, SVGBackend<'_>, Cartesian2d<RangedCoordf64, Y>>,
    panel: &Panel,
    marks: &Marks,
    lo: f64,
    hi: f64,
) -> Drawn
where
    Y: Ranged<ValueType = f64> + ValueFormatter<f64>,
{
    chart
        .configure_mesh()
        .x_desc("seconds since the start")
        .y_desc(panel.unit)
        .x_labels(10)
        .y_labels(5)
        .x_label_formatter(&|t| format!("{t:.0}"))
        .y_label_formatter(&|v| tick(*v))
        .bold_line_style(GRID)
        .light_line_style(TRANSPARENT)
        .axis_style(LIGHT)
        .label_style(text(10.0, GREY))
        .axis_desc_style(text(11.0, GREY))
        .draw()?;
    if let Some((a, b)) = marks.full {
        chart.draw_series([Rectangle::new([(a - 1.0, lo), (b, hi)], FULL.filled())])?;
    }
    for &k in &marks.kills {
        chart.draw_series(DashedLineSeries::new(
            [(k, lo), (k, hi)],
            3,
            3,
            KILL.stroke_width(1),
        ))?;
    }
    if let Some((b, label)) = panel.bound {
        chart.draw_series(DashedLineSeries::new(
            [(0.0, b), (marks.max_t, b)],
            6,
            3,
            BOUND.stroke_width(1),
        ))?;
        chart.plotting_area().draw(
            &(EmptyElement::at((marks.max_t, b))
                + Text::new(label, (-4, -8), anchored(10.0, BOUND, HPos::Right))),
        )?;
    }
    for (k, &p) in marks.profiles.iter().enumerate() {
        let colour = PROFILE_COLOURS[k % PROFILE_COLOURS.len()];
        for line in marks.lines(panel, p) {
            let clipped = line.into_iter().map(|(t, v)| (t, v.max(lo)));
            if let [(t, v)] = clipped.clone().collect::<Vec<_>>()[..] {
                chart.draw_series([Circle::new((t, v), 1, colour.filled())])?;
            } else {
                chart.draw_series(LineSeries::new(clipped, colour.stroke_width(1)))?;
            }
        }
    }
    Ok(())
}

/// A value as an axis shows it: 0.01, 0.5, 2, 64, 1.5k, 47.1k.
fn tick(v: f64) -> String {
    if v.abs() >= 1e4 {
        return short_num(v);
    }
    let s = format!("{v:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(profile: Profile, second: u64) -> Sample {
        Sample {
            profile,
            second,
            wal_bytes: second << 20,
            p50_ms: if second == 5 { f64::NAN } else { 0.2 },
            p99_ms: 3.0,
            max_stall_ms: 40.0 + second as f64,
            writes: 100,
            bulk_rows: 5000,
            reads: 40,
            child_acks: 90,
            errors: 0,
            full_errors: 0,
            kills: second / 4,
            lost: 0,
            checkpoints: second,
            escalated: 0,
            wal_pages: 100 * second,
            over_limit: false,
            hold_max_ms: 2.0,
            hold_ms: 0.5,
            rss_kib: 20_000,
            disk_free_mib: 900.0,
            disk_nearly_full: (6..=8).contains(&second),
        }
    }

    #[test]
    fn the_chart_has_every_panel_axis_and_profile() {
        let profiles = [Profile::Safe, Profile::Balanced];
        let samples: Vec<Sample> = profiles
            .iter()
            .flat_map(|&p| (1..=12).map(move |s| sample(p, s)))
            .collect();
        let svg = svg(&samples, &profiles).unwrap();
        let doc = roxmltree::Document::parse(&svg).expect("well-formed SVG");
        let texts: Vec<&str> = doc
            .descendants()
            .filter(|n| n.has_tag_name("text"))
            .filter_map(|n| n.text())
            .map(str::trim)
            .collect();
        for panel in panels() {
            assert!(
                texts.iter().any(|t| t.starts_with(panel.title)),
                "{}",
                panel.title
            );
        }
        assert_eq!(
            texts
                .iter()
                .filter(|t| **t == "seconds since the start")
                .count(),
            8
        );
        assert_eq!(texts.iter().filter(|t| **t == "safe").count(), 8);
        assert_eq!(texts.iter().filter(|t| **t == "balanced").count(), 8);
        assert!(texts.iter().any(|t| t.contains("SIGKILL")));
        // The p50 panel's gap at second 5 splits each profile's line.
        let marks = Marks::new(&samples, &profiles);
        assert_eq!(marks.lines(&panels()[2], Profile::Safe).len(), 2);
        assert_eq!(marks.kills, [4.0, 8.0, 12.0]);
        assert_eq!(marks.full, Some((6.0, 8.0)));
        assert_eq!(
            [0.01, 0.1, 1.0, 20.0, 62.5, 47_104.0].map(tick),
            ["0.01", "0.1", "1", "20", "62.5", "47.1k"]
        );
    }
}
