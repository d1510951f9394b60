//! `tokentap dataset …` without the rest of the binary: the same commands, for working on this
//! crate alone (`cargo run -p tokentap-dataset --release --example dataset -- synth --out d.jsonl`).

use clap::Parser;
use tokentap_dataset::cli::{run, DatasetCommand};

#[derive(Parser)]
struct Opts {
    #[command(subcommand)]
    cmd: DatasetCommand,
}

fn main() -> std::process::ExitCode {
    match run(Opts::parse().cmd, &tokentap_dataset::cli::no_hooks()) {
        Ok(code) => std::process::ExitCode::from(code.clamp(0, 255) as u8),
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::from(1)
        }
    }
}
