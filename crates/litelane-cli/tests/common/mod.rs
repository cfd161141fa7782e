//! Helpers shared by the import tests: `litelane import` as a child process.
#![allow(dead_code)]

use std::process::{Command, Output};

/// Runs `litelane import ARGS...` and waits for it.
pub fn litelane(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_litelane"))
        .arg("import")
        .args(args)
        .output()
        .expect("run litelane")
}

/// The child's standard error, as text.
pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}
