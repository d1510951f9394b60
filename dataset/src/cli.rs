//! `tokentap dataset …`: validate, describe and synthesize datasets.
//!
//! The root binary parses [`DatasetCommand`] as a subcommand and calls [`run`]; tests call
//! [`run_with`] with their own output buffers. Exit codes: 0 ok, 1 the dataset is invalid (every
//! error printed to stderr, one per line: `file:line: conversation "id": field `f`: expected …`).
//! Errors that are not about the dataset's content (cannot write the output file …) are returned
//! as `Err`.

use crate::error::DatasetErrors;
use crate::load::read;
use crate::stats::StatsBuilder;
use crate::synth::{synth, SynthConfig};
use anyhow::Context as _;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// `tokentap dataset` subcommands.
#[derive(Debug, Clone, PartialEq, clap::Subcommand)]
pub enum DatasetCommand {
    /// Check a dataset against every rule of the MLPerf agentic format; prints every error (file,
    /// line, conversation, field, what was expected) and exits non-zero if there is any.
    Validate {
        /// JSONL dataset file.
        file: PathBuf,
    },
    /// Describe a dataset: trajectories, turns, prompt growth per turn, delays, system prompts
    /// and tool definitions, split into coding and workflow.
    Stats {
        /// JSONL dataset file.
        file: PathBuf,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Write a deterministic synthetic dataset in the two shapes of the official one (deep coding
    /// trajectories, shallow workflow trajectories with a large shared system prompt).
    Synth {
        /// Output file (default: stdout).
        #[arg(long, short)]
        out: Option<PathBuf>,
        /// Random seed: the same seed and options give the same bytes.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Number of coding trajectories.
        #[arg(long, default_value_t = 113)]
        coding: usize,
        /// Number of workflow trajectories.
        #[arg(long, default_value_t = 500)]
        workflow: usize,
        /// Multiplies text sizes and depth (turns per trajectory).
        #[arg(long, default_value_t = 1.0)]
        scale: f64,
        /// Multiplies depth only (about 6 approaches the official coding depth).
        #[arg(long, default_value_t = 1.0)]
        depth_scale: f64,
        /// Write all coding trajectories first instead of spreading both domains through the file.
        #[arg(long)]
        coding_first: bool,
    },
}

/// Runs `cmd` on the process's stdout and stderr; returns the exit code.
pub fn run(cmd: DatasetCommand) -> anyhow::Result<i32> {
    let stdout = io::stdout();
    let stderr = io::stderr();
    run_with(cmd, &mut stdout.lock(), &mut stderr.lock())
}

/// Runs `cmd`, writing results to `out` and diagnostics to `err`; returns the exit code.
pub fn run_with(
    cmd: DatasetCommand,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> anyhow::Result<i32> {
    match cmd {
        DatasetCommand::Validate { file } => {
            // Streamed: one conversation in memory at a time.
            let (mut trajectories, mut client, mut assistant) = (0usize, 0usize, 0usize);
            let read = stream(&file, err, |c| {
                trajectories += 1;
                let n = c.client_turns().count();
                client += n;
                assistant += c.rows.len() - n;
            })?;
            if !read {
                return Ok(1);
            }
            writeln!(
                out,
                "ok: {trajectories} trajectories, {client} client turns, {assistant} assistant turns"
            )?;
            Ok(0)
        }
        DatasetCommand::Stats { file, json } => {
            let mut b = StatsBuilder::default();
            if !stream(&file, err, |c| b.add(&c))? {
                return Ok(1);
            }
            let s = b.finish(&file);
            if json {
                serde_json::to_writer_pretty(&mut *out, &s)?;
                writeln!(out)?;
            } else {
                out.write_all(s.render_text().as_bytes())?;
            }
            Ok(0)
        }
        DatasetCommand::Synth {
            out: path,
            seed,
            coding,
            workflow,
            scale,
            depth_scale,
            coding_first,
        } => {
            let cfg = SynthConfig {
                seed,
                coding,
                workflow,
                scale,
                depth_scale,
                interleave: !coding_first,
            };
            let summary = match &path {
                Some(p) => {
                    let mut f = io::BufWriter::new(
                        std::fs::File::create(p)
                            .with_context(|| format!("cannot create {}", p.display()))?,
                    );
                    let s = synth(&cfg, &mut f)
                        .with_context(|| format!("cannot write {}", p.display()))?;
                    f.flush()
                        .with_context(|| format!("cannot write {}", p.display()))?;
                    s
                }
                None => synth(&cfg, &mut *out).context("cannot write the dataset")?,
            };
            // The summary goes to stderr so that stdout can be the dataset itself.
            writeln!(
                err,
                "wrote {} trajectories ({} coding, {} workflow), {} rows, {} client turns, {} bytes{}",
                summary.trajectories,
                summary.coding,
                summary.workflow,
                summary.rows,
                summary.client_turns,
                summary.bytes,
                path.map(|p| format!(" to {}", p.display())).unwrap_or_default()
            )?;
            Ok(0)
        }
    }
}

/// Reads `file` a conversation at a time into `each`; on failure prints every error to `err`
/// and returns `false`.
fn stream(
    file: &Path,
    err: &mut dyn Write,
    each: impl FnMut(crate::model::Conversation),
) -> anyhow::Result<bool> {
    let result = std::fs::File::open(file)
        .map_err(|e| {
            DatasetErrors(vec![crate::error::DatasetError {
                path: file.to_path_buf(),
                line: None,
                conversation: None,
                field: None,
                message: format!("cannot read the file: {e}"),
            }])
        })
        .and_then(|f| read(file, std::io::BufReader::with_capacity(256 << 10, f), each));
    match result {
        Ok(_) => Ok(true),
        Err(errors) => {
            // Every error, not the 50 that `Display` shows: this is the command whose job is to
            // list them.
            for e in &errors.0 {
                writeln!(err, "{e}")?;
            }
            writeln!(
                err,
                "invalid: {} error{}",
                errors.0.len(),
                if errors.0.len() == 1 { "" } else { "s" }
            )?;
            Ok(false)
        }
    }
}
