//! soak.md: the summary tables on stdout, one row per profile (the run's
//! figures, then checkpoints' holds, slow seconds and the WAL's stretches
//! over its limit), and the verdict.

use litelane::Profile;

use super::measure::Sample;
use super::run::Run;
use super::{PAGE_BYTES, SLOW_WRITE_MS};

/// Prints the tables and what failed; true when nothing did: no error, no
/// acknowledged row lost, no problem at a run's end, and no checkpoint
/// that held writers back longer than `max_hold_ms`.
pub fn print(runs: &[(Profile, Run)], disk_note: Option<&str>, max_hold_ms: u64) -> bool {
    println!(
        "| profile | seconds | WAL max (MiB) | commit p50 / p99 / max (ms) | writes | bulk rows | reads \
         | process kills | process rows acknowledged | lost | errors | SQLITE_FULL while nearly full | RSS at 10% → max → last (MiB) |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for (p, run) in runs {
        if let Some(row) = run_row(*p, run) {
            println!("{row}");
        }
    }
    println!(
        "\n| profile | longest checkpoint hold (ms) | seconds with a write over {SLOW_WRITE_MS} ms (outside kills, disk full) | longest write there (ms) \
         | seconds over the WAL limit | stretches over it | longest stretch (s) | over it at the end | WAL in use max (MiB) |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---|---:|");
    for (p, run) in runs {
        if let Some(last) = run.samples.last() {
            println!("{}", checkpoint_row(*p, &run.samples, last.hold_max_ms));
        }
    }
    if let Some(note) = disk_note {
        println!("\n{note}");
    }
    verdict(runs, max_hold_ms)
}

/// Prints what failed (the runs' problems, then holds over the bound);
/// true when nothing did.
fn verdict(runs: &[(Profile, Run)], max_hold_ms: u64) -> bool {
    let mut passed = true;
    for (_, run) in runs {
        if let Some(last) = run.samples.last() {
            passed &= last.errors == 0 && last.lost == 0;
        }
        if let Some(why) = &run.problem {
            println!("\n**{why}**");
            passed = false;
        }
    }
    for (p, run) in runs {
        let Some(hold) = run.samples.last().map(|s| s.hold_max_ms) else {
            continue;
        };
        if hold > max_hold_ms as f64 {
            let why = format!(
                "{p}: a checkpoint held writers back {hold:.1} ms, over the bound of {max_hold_ms} ms \
                 (--max-checkpoint-hold-ms)"
            );
            println!("\n**{why}**");
            eprintln!("soak: {why}");
            passed = false;
        }
    }
    passed
}

/// One profile's row of the first table (`None`: no sample).
fn run_row(p: Profile, run: &Run) -> Option<String> {
    let s = &run.samples;
    let last = s.last()?;
    let wal = s.iter().map(|s| s.wal_bytes).max().unwrap_or(0) as f64 / 1048576.0;
    let stall = s.iter().map(|s| s.max_stall_ms).fold(0.0, f64::max);
    let writes: u64 = s.iter().map(|s| s.writes).sum();
    let bulk: u64 = s.iter().map(|s| s.bulk_rows).sum();
    let reads: u64 = s.iter().map(|s| s.reads).sum();
    let acks: u64 = s.iter().map(|s| s.child_acks).sum();
    let mib = |k: u64| k as f64 / 1024.0;
    let rss_early = s[s.len() / 10].rss_kib;
    let rss_max = s.iter().map(|s| s.rss_kib).max().unwrap_or(0);
    let q = |x: f64| run.latency.value_at_quantile(x) as f64 / 1000.0;
    Some(format!(
        "| {p} | {} | {wal:.1} | {:.2} / {:.2} / {stall:.0} | {writes} | {bulk} | {reads} | {} | {acks} | {} | {} | {} | {:.1} → {:.1} → {:.1} |",
        s.len(),
        q(0.5),
        q(0.99),
        last.kills,
        last.lost,
        last.errors,
        last.full_errors,
        mib(rss_early),
        mib(rss_max),
        mib(last.rss_kib)
    ))
}

/// One profile's row of the summary's second table: checkpoints' holds,
/// slow seconds outside the kill and disk-full moments, and the WAL's
/// stretches over its limit.
fn checkpoint_row(p: Profile, s: &[Sample], hold_ms: f64) -> String {
    // A second within 2 s of a kill of the writer process, or in the
    // disk-full phase (which includes 2 s after it).
    let kills: Vec<u64> = s
        .windows(2)
        .filter(|w| w[1].kills > w[0].kills)
        .map(|w| w[1].second)
        .collect();
    let quiet = |x: &Sample| {
        !x.disk_nearly_full
            && !kills
                .iter()
                .any(|&k| x.second + 2 >= k && x.second <= k + 2)
    };
    let slow: Vec<f64> = s
        .iter()
        .filter(|x| quiet(x) && x.max_stall_ms > SLOW_WRITE_MS)
        .map(|x| x.max_stall_ms)
        .collect();
    let longest_slow = slow.iter().copied().fold(0.0, f64::max);
    let over = s.iter().filter(|x| x.over_limit).count();
    let mut stretches = Vec::new();
    let mut run = 0u64;
    for x in s {
        if x.over_limit {
            run += 1;
        } else if run > 0 {
            stretches.push(run);
            run = 0;
        }
    }
    let at_end = run > 0;
    if at_end {
        stretches.push(run);
    }
    let in_use = s.iter().map(|x| x.wal_pages).max().unwrap_or(0) * PAGE_BYTES;
    format!(
        "| {p} | {hold_ms:.1} | {} | {longest_slow:.0} | {over} | {} | {} | {} | {:.1} |",
        slow.len(),
        stretches.len(),
        stretches.iter().max().unwrap_or(&0),
        if at_end { "yes" } else { "no" },
        in_use as f64 / 1048576.0
    )
}
