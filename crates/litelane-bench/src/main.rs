//! `litelane-bench SCENARIO`: the benchmarks of litelane beside their
//! peers (see `docs/benchmarks.md`). Kept out of the `litelane` command
//! users install, with its chart, table and async-runtime dependencies.
//!
//! Exit status: 0 success, 1 an error (printed on stderr), 2 bad arguments.
//! Two hidden forms serve the scenarios that start processes of their own:
//! `litelane-bench bench-worker ...` (one writer process of `threads
//! --processes`) and `litelane-bench import-child ...` (`litelane import`
//! as a child process, for the `import` scenario).
//!
//! Two more forms are the lab's long runs, with options of their own (see
//! their modules): `litelane-bench soak ...` (`scripts/soak`) and
//! `litelane-bench kill-proof ...` (`scripts/durability-proof`); 1 there
//! means that what they check failed.

#![deny(unsafe_code)]

mod bench;
mod error;
mod lab;

use std::ffi::OsString;

use clap::{Args, Parser};

use error::BenchError;

/// Run a benchmark scenario beside its peers.
#[derive(Parser)]
#[command(name = "litelane-bench", version, about)]
struct Cli<A: Args> {
    #[command(flatten)]
    args: A,
}

fn main() {
    std::process::exit(run(std::env::args_os().collect()));
}

/// Parses `argv` (the program's name first) as `A`, or prints clap's
/// message and returns its exit status.
fn parse<A: Args>(argv: &[OsString]) -> Result<A, i32> {
    Cli::<A>::try_parse_from(argv).map(|c| c.args).map_err(|e| {
        let _ = e.print();
        e.exit_code()
    })
}

/// Runs `litelane-bench` with `argv`; returns the exit status.
fn run(argv: Vec<OsString>) -> i32 {
    let hidden = argv.get(1).and_then(|a| a.to_str());
    let mut code = 0;
    let result = match hidden {
        Some("soak") => return lab_run("soak", &argv[2..], lab::soak::main),
        Some("kill-proof") => return lab_run("kill-proof", &argv[2..], lab::kill_proof::main),
        Some("bench-worker") => match parse::<bench::WorkerArgs>(&argv[1..]) {
            Ok(a) => bench::worker_main(a),
            Err(code) => return code,
        },
        Some("import-child") => match parse::<litelane_cli::import::ImportFlags>(&argv[1..]) {
            Ok(a) => import(a).map(|status| code = status),
            Err(code) => return code,
        },
        _ => match parse::<bench::BenchArgs>(&argv) {
            Ok(a) => bench::run(a),
            Err(code) => return code,
        },
    };
    match result {
        Ok(()) => code,
        Err(e) => {
            eprintln!("litelane-bench: error: {e}");
            1
        }
    }
}

/// One of the lab's long runs with `args` (its options, as text); returns
/// its exit status (2 for an option that is not UTF-8).
fn lab_run(name: &str, args: &[OsString], main: fn(&[String]) -> i32) -> i32 {
    match args
        .iter()
        .map(|a| a.clone().into_string())
        .collect::<Result<Vec<String>, _>>()
    {
        Ok(args) => main(&args),
        Err(a) => {
            eprintln!("{name}: {a:?} is not UTF-8");
            2
        }
    }
}

/// `litelane import ... --json`, for the `import` scenario's child process:
/// the same library the command runs, its summary on stdout; returns the
/// exit status the command gives.
fn import(flags: litelane_cli::import::ImportFlags) -> Result<i32, BenchError> {
    let outcome = litelane_import::run(flags.options(), &mut litelane_import::Silent)?;
    if let Some(summary) = &outcome.summary {
        println!("{}", litelane_cli::import::json(summary));
    }
    Ok(outcome.status)
}
