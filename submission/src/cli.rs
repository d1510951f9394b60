//! `tokentap submission`: the submitter file's template, and the tree of a finished sweep.

use std::path::PathBuf;

/// `tokentap submission`'s subcommands.
#[derive(clap::Subcommand, Debug, Clone)]
pub enum Command {
    /// Print a commented submitter file to fill in.
    Template,
    /// Write the submission tree of a sweep directory (`tokentap sweep --out DIR`) without
    /// running anything, then judge the curve again from the sweep's files. Exit 0 when the tree
    /// lacks no fact and the curve is not invalid, 3 when facts are missing (listed with the
    /// checker rule that needs each) or the curve is invalid (each failed rule under its id), 1 on
    /// an error.
    Write(WriteOpts),
}

/// `tokentap submission write`.
#[derive(clap::Args, Debug, Clone)]
pub struct WriteOpts {
    /// The sweep directory (its `sweep.json` and `r<C>/` runs).
    pub sweep: PathBuf,
    /// Where to write the tree: `OUT/<organization>/<submission>/…`.
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// The submitter file (YAML).
    #[arg(long, value_name = "FILE")]
    pub submitter: Option<PathBuf>,
    /// Remove the points of the tree that another sweep wrote (each is named) instead of
    /// refusing to write: a submission holds one sweep's points.
    #[arg(long)]
    pub replace: bool,
}

/// Exit code when the tree was written but facts are missing.
pub const EXIT_MISSING: i32 = 3;

/// Runs a subcommand; its exit code.
pub fn run(c: Command) -> anyhow::Result<i32> {
    match c {
        Command::Template => {
            print!("{}", crate::Submitter::template());
            Ok(0)
        }
        Command::Write(o) => {
            let s = o
                .submitter
                .as_deref()
                .map(crate::Submitter::load)
                .transpose()?;
            let w = crate::write(&o.sweep, &o.out, s.as_ref(), o.replace)?;
            println!("{}", w.describe());
            Ok(if w.missing.is_empty() {
                0
            } else {
                EXIT_MISSING
            })
        }
    }
}
