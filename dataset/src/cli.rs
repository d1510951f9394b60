//! `tokentap dataset …`: validate, describe and synthesize datasets.
//!
//! The root binary parses [`DatasetCommand`] as a subcommand and calls [`run`]; tests call
//! [`run_with`] with their own output buffers. Exit codes: 0 ok, 1 the dataset is invalid (every
//! error printed to stderr, one per line: `file:line: conversation "id": field `f`: expected …`).
//! Errors that are not about the dataset's content (cannot write the output file …) are returned
//! as `Err`.

use crate::capture::Tokens;
use crate::error::DatasetErrors;
use crate::load::read;
use crate::stats::{DatasetStats, StatsBuilder};
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
        /// Compare with this dataset (e.g. the MLPerf set): turns, context growth, output lengths
        /// and delays side by side.
        #[arg(long, value_name = "FILE")]
        against: Option<PathBuf>,
        /// Also write the comparison's plots (an HTML page in the run report's style).
        #[arg(long, value_name = "FILE")]
        html: Option<PathBuf>,
    },
    /// Write the sessions the proxy recorded with --record-content as an MLPerf agentic dataset
    /// (one trajectory per session; chat completions, Responses and Messages API sessions alike,
    /// in the dataset's chat form), ready for `tokentap dataset validate` and `tokentap replay`.
    Capture {
        /// The proxy's --records directory (its records*.jsonl) or record files (repeatable).
        #[arg(long, required = true, value_name = "DIR")]
        records: Vec<PathBuf>,
        /// The dataset to write.
        #[arg(long, short)]
        out: PathBuf,
        /// Only this session (repeatable).
        #[arg(long = "session", value_name = "ID")]
        sessions: Vec<String>,
        /// Only sessions whose first turn started at or after this time (RFC 3339, UTC:
        /// `2026-12-04T10:00:00Z`).
        #[arg(long, value_name = "TIME", value_parser = wall_ns)]
        since: Option<u64>,
        /// Only sessions whose first turn started before this time (RFC 3339).
        #[arg(long, value_name = "TIME", value_parser = wall_ns)]
        until: Option<u64>,
        /// Leave out trajectories with fewer client turns.
        #[arg(long, value_name = "N", default_value_t = 1)]
        min_turns: usize,
        /// Replace every text (prompts, answers, tool results, tool arguments' values and
        /// descriptions) with filler of the same token count: the shape of the traffic without
        /// its content.
        #[arg(long)]
        anonymize: bool,
        /// The model's tokenizer folder, for --anonymize's token counts (default: the stand-in,
        /// 4 bytes a token).
        #[arg(long, value_name = "DIR", requires = "anonymize")]
        tokenizer: Option<PathBuf>,
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

/// An RFC 3339 time as ns since the epoch.
fn wall_ns(s: &str) -> Result<u64, String> {
    let t = humantime::parse_rfc3339_weak(s)
        .map_err(|e| format!("expected an RFC 3339 time like 2026-12-04T10:00:00Z: {e}"))?;
    t.duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .map_err(|_| "a time before 1970".to_string())
}

/// What the commands need from crates this one cannot depend on (the model's tokenizer, the
/// report's plots): the `tokentap` binary passes them in.
pub struct Hooks<'a> {
    /// Loads a tokenizer folder.
    pub tokenizer: &'a dyn Fn(&Path) -> anyhow::Result<Box<dyn Tokens>>,
    /// The comparison's HTML page: this dataset's statistics, the other's.
    pub html: &'a dyn Fn(&DatasetStats, &DatasetStats) -> String,
}

/// Hooks for a caller without them: `--tokenizer` and `--html` say where to find them.
pub fn no_hooks() -> Hooks<'static> {
    Hooks {
        tokenizer: &|_| {
            anyhow::bail!("--tokenizer needs the `tokentap` binary's tokenizer support")
        },
        html: &|_, _| String::new(),
    }
}

/// Runs `cmd` on the process's stdout and stderr; returns the exit code.
pub fn run(cmd: DatasetCommand, hooks: &Hooks<'_>) -> anyhow::Result<i32> {
    let stdout = io::stdout();
    let stderr = io::stderr();
    run_with(cmd, hooks, &mut stdout.lock(), &mut stderr.lock())
}

/// Runs `cmd`, writing results to `out` and diagnostics to `err`; returns the exit code.
pub fn run_with(
    cmd: DatasetCommand,
    hooks: &Hooks<'_>,
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
        cmd @ DatasetCommand::Stats { .. } => stats_cmd(cmd, hooks, out, err),
        cmd @ DatasetCommand::Capture { .. } => capture_cmd(cmd, hooks, err),
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

/// `dataset stats`: one dataset's numbers, or two side by side (`--against`, `--html`).
fn stats_cmd(
    cmd: DatasetCommand,
    hooks: &Hooks<'_>,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> anyhow::Result<i32> {
    let DatasetCommand::Stats {
        file,
        json,
        against,
        html,
    } = cmd
    else {
        return Ok(2);
    };
    let mut b = StatsBuilder::default();
    if !stream(&file, err, |c| b.add(&c))? {
        return Ok(1);
    }
    let s = b.finish(&file);
    if let Some(other) = against {
        let mut b = StatsBuilder::default();
        if !stream(&other, err, |c| b.add(&c))? {
            return Ok(1);
        }
        let o = b.finish(&other);
        if let Some(h) = html {
            std::fs::write(&h, (hooks.html)(&s, &o))
                .with_context(|| format!("cannot write {}", h.display()))?;
        }
        if json {
            serde_json::to_writer_pretty(
                &mut *out,
                &serde_json::json!({"dataset": s, "against": o}),
            )?;
            writeln!(out)?;
        } else {
            out.write_all(crate::stats::render_comparison(&s, &o).as_bytes())?;
        }
        return Ok(0);
    }
    if html.is_some() {
        anyhow::bail!("--html draws a comparison: give --against FILE too");
    }
    if json {
        serde_json::to_writer_pretty(&mut *out, &s)?;
        writeln!(out)?;
    } else {
        out.write_all(s.render_text().as_bytes())?;
    }
    Ok(0)
}

fn capture_cmd(cmd: DatasetCommand, hooks: &Hooks<'_>, err: &mut dyn Write) -> anyhow::Result<i32> {
    let DatasetCommand::Capture {
        records,
        out,
        sessions,
        since,
        until,
        min_turns,
        anonymize,
        tokenizer,
    } = cmd
    else {
        return Ok(2);
    };
    let tok: Box<dyn Tokens> = match &tokenizer {
        Some(dir) => (hooks.tokenizer)(dir)?,
        None => Box::new(crate::capture::StandIn),
    };
    let opts = crate::capture::Options {
        records,
        sessions,
        since_ns: since,
        until_ns: until,
        min_turns,
        anonymize,
        // The rows wait beside the output they will be copied into.
        spill_dir: Some(match out.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
            _ => PathBuf::from("."),
        }),
    };
    // Written next to the target and renamed into place: a failed capture leaves no half file.
    let tmp = out.with_extension("jsonl.partial");
    let mut f = io::BufWriter::new(
        std::fs::File::create(&tmp).with_context(|| format!("cannot create {}", tmp.display()))?,
    );
    let report = match crate::capture::capture(&opts, tok.as_ref(), &mut f) {
        Ok(r) => r,
        Err(e) => {
            drop(f);
            let _ = std::fs::remove_file(&tmp);
            writeln!(err, "error: {e}")?;
            return Ok(1);
        }
    };
    f.flush()
        .with_context(|| format!("cannot write {}", tmp.display()))?;
    drop(f);
    err.write_all(report.render().as_bytes())?;
    if report.trajectories == 0 {
        // Nothing kept: no file, and the reasons above.
        let _ = std::fs::remove_file(&tmp);
        writeln!(
            err,
            "error: no trajectory captured, {} not written (the counts above say why)",
            out.display()
        )?;
        return Ok(1);
    }
    std::fs::rename(&tmp, &out).with_context(|| format!("cannot write {}", out.display()))?;
    if anonymize {
        writeln!(err, "anonymized: token counts of {}", tok.describe())?;
    }
    writeln!(err, "wrote {}", out.display())?;
    Ok(0)
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
