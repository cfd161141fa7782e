//! The writer processes of the kill proof: the same binary run as
//! `litelane-bench kill-proof --child ...`, writing until killed and
//! printing each acknowledged id; the parent reads what they printed.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;

use litelane::{Database, Options, Profile};

use crate::lab::ack::{ack_line, print_or_exit};

/// How a writer writes and when it prints an id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum How {
    /// `Database::write`, the id printed once acknowledged.
    After,
    /// `Database::execute`, the id printed once acknowledged; an unknown
    /// outcome printed as `UNKNOWN <message>`.
    Execute,
    /// The self-test: each id printed *before* its write, so the checker
    /// must find acknowledged rows missing.
    Early,
}

impl How {
    fn name(self) -> &'static str {
        match self {
            How::After => "after",
            How::Execute => "execute",
            How::Early => "early",
        }
    }
}

/// `--child PATH PROFILE THREADS BASE after|execute|early`: runs a writer
/// process until it is killed; returns only on a bad command line, with
/// what is wrong.
pub fn child_main(argv: &[String]) -> String {
    let usage = "--child PATH PROFILE THREADS BASE after|execute|early".to_string();
    let [path, profile, threads, base, how] = argv else {
        return usage;
    };
    let (Ok(profile), Ok(threads), Ok(base)) = (profile.parse(), threads.parse(), base.parse())
    else {
        return usage;
    };
    let how = match how.as_str() {
        "early" => How::Early,
        "execute" => How::Execute,
        _ => How::After,
    };
    child(path, profile, threads, base, how)
}

/// The writer process: `threads` threads writing one row per transaction,
/// ids `base + thread * 10^8 + i`, each printed once acknowledged; an error
/// is printed as `ERR <SQLite code or -1> <message>`. Runs until killed.
fn child(path: &str, profile: Profile, threads: i64, base: i64, how: How) -> ! {
    let db = Database::open(path, Options::with_profile(profile)).expect("open the database");
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let db = db.clone();
            thread::spawn(move || write_rows(&db, base + t * 100_000_000, how))
        })
        .collect();
    for h in handles {
        let _ = h.join();
    }
    std::process::exit(0);
}

/// One writer thread: rows from id `first` up, forever.
fn write_rows(db: &Database, first: i64, how: How) {
    let mut id = first;
    loop {
        if how == How::Early {
            print_or_exit(&format!("{id}\n"));
        }
        let sql = "INSERT INTO acked VALUES (?1, randomblob(500))";
        let r = if how == How::Execute {
            db.execute(sql, &[litelane::Value::Integer(id)]).map(|_| ())
        } else {
            db.write(|tx| Ok(tx.execute(sql, [id]).map(drop)?))
        };
        match &r {
            Err(e) if e.is_outcome_unknown() => print_or_exit(&format!("UNKNOWN {e}\n")),
            Ok(()) if how == How::Early => {}
            _ => print_or_exit(&ack_line(id, &r)),
        }
        id += 1;
    }
}

/// What a writer process printed, once it is gone.
#[derive(Default)]
pub struct Printed {
    /// Acknowledged ids.
    pub ids: Vec<i64>,
    /// Errors: `<SQLite code or -1> <message>`.
    pub errors: Vec<String>,
    /// Writes told their outcome is unknown.
    pub unknown: u64,
}

/// One writer process and what it prints.
pub struct Writer {
    pub child: Child,
    /// Acknowledgements so far.
    pub acks: Arc<AtomicU64>,
    lines: thread::JoinHandle<Printed>,
}

impl Writer {
    /// Starts a writer process of `threads` threads on `path`.
    pub fn spawn(
        path: &Path,
        profile: Profile,
        threads: i64,
        base: i64,
        how: How,
    ) -> Result<Writer, String> {
        let mut child = Command::new(std::env::current_exe().map_err(|e| e.to_string())?)
            .args(["kill-proof", "--child"])
            .arg(path)
            .arg(profile.name())
            .arg(threads.to_string())
            .arg(base.to_string())
            .arg(how.name())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("spawning a writer: {e}"))?;
        let stdout = child.stdout.take().expect("piped");
        let acks = Arc::new(AtomicU64::new(0));
        let lines = {
            let acks = Arc::clone(&acks);
            thread::spawn(move || read_lines(stdout, &acks))
        };
        Ok(Writer { child, acks, lines })
    }

    /// Acknowledgements so far.
    pub fn acked(&self) -> u64 {
        self.acks.load(Ordering::Relaxed)
    }

    /// Kills the process with SIGKILL unless it has ended; true if it
    /// was killed here.
    pub fn kill(&mut self) -> bool {
        let killed = self.child.try_wait().ok().flatten().is_none() && self.child.kill().is_ok();
        let _ = self.child.wait();
        killed
    }

    /// What it printed (once its stdout is closed: after the kill).
    pub fn printed(self) -> Result<Printed, String> {
        self.lines
            .join()
            .map_err(|_| "a reader thread panicked".into())
    }
}

/// Reads a writer's lines until its stdout closes, counting its
/// acknowledgements in `acks` as they come.
fn read_lines(stdout: impl std::io::Read, acks: &AtomicU64) -> Printed {
    let mut p = Printed::default();
    for line in BufReader::new(stdout).lines().map_while(Result::ok) {
        if line.starts_with("UNKNOWN ") {
            p.unknown += 1;
        } else if let Some(e) = line.strip_prefix("ERR ") {
            p.errors.push(e.to_string());
        } else if let Ok(id) = line.parse() {
            p.ids.push(id);
            acks.fetch_add(1, Ordering::Relaxed);
        }
    }
    p
}
