//! The `litelane` command; everything is in the library (`src/lib.rs`).

fn main() {
    litelane_cli::main()
}
