//! The progress bar of `litelane import`: rows, MB, rows/s and ETA on a
//! terminal; nothing when stderr is not a terminal or with `--quiet`.

use std::io::IsTerminal;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use litelane_import::load::group;

/// A progress bar that may be hidden.
pub struct Bar {
    pb: Option<ProgressBar>,
    start: Instant,
}

impl Bar {
    /// A bar over `total` input bytes (a spinner when unknown), shown only
    /// when `wanted` and stderr is a terminal.
    pub fn new(wanted: bool, total: Option<u64>) -> Bar {
        let start = Instant::now();
        if !wanted || !std::io::stderr().is_terminal() {
            return Bar { pb: None, start };
        }
        let pb = match total {
            Some(n) => ProgressBar::with_draw_target(Some(n), ProgressDrawTarget::stderr()),
            None => ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr()),
        };
        let template = if total.is_some() {
            "{spinner} [{elapsed_precise}] [{wide_bar}] {binary_bytes}/{binary_total_bytes} ETA {eta} {msg}"
        } else {
            "{spinner} [{elapsed_precise}] {binary_bytes} {msg}"
        };
        if let Ok(style) = ProgressStyle::with_template(template) {
            pb.set_style(style.progress_chars("=> "));
        }
        pb.enable_steady_tick(Duration::from_millis(200));
        Bar {
            pb: Some(pb),
            start,
        }
    }

    /// The bar is shown (stderr is a terminal and the import is not quiet).
    pub fn visible(&self) -> bool {
        self.pb.is_some()
    }

    /// Shows `rows` stored so far and `bytes` of the input read.
    pub fn update(&self, rows: u64, bytes: u64) {
        if let Some(pb) = &self.pb {
            pb.set_position(bytes);
            let secs = self.start.elapsed().as_secs_f64().max(1e-6);
            pb.set_message(format!(
                "{} rows, {} rows/s",
                group(rows),
                group((rows as f64 / secs) as u64)
            ));
        }
    }

    /// Removes the bar.
    pub fn finish(&self) {
        if let Some(pb) = &self.pb {
            pb.finish_and_clear();
        }
    }
}
