//! Seeded synthesis of MLPerf-format trajectories: the shapes of docs/benchmark.md#workload in
//! the format of docs/benchmark.md#dataset.
//!
//! Why: the official dataset is not redistributable with the project, yet every part of tokentap
//! (replay, proxy, sim, demo, benches) needs trajectories of the right *shape* — deep coding
//! sessions whose context grows fast with command output, shallow workflow sessions that share one
//! big system prompt and tool list. [`synth`] writes such a dataset as JSONL that
//! [`crate::Dataset::parse`] accepts, byte-for-byte the same for the same [`SynthConfig`].
//!
//! ## Shapes at `scale = 1`
//! - **coding** (ids like `django__django-16899`): a shared agent system prompt (~3 KB) and a
//!   `bash` + `str_replace_editor` tool set on the first user row; a SWE-style task (~1.5 KB);
//!   then 20–60 client turns (skewed short): assistant rows with `reasoning_content` opening with
//!   [`REASONING_PREAMBLE`] and one bash call (12 % of rounds: 2–3 parallel calls, answered by one
//!   tool row with 2–3 results), tool rows whose output (test logs, file contents, grep hits)
//!   grows with the round (median ~600 B × (1 + round/8)), tool delays of 0.1–2.5 s with a 3 % tail
//!   of 10–60 s; a final assistant answer with content. One in 16 trajectories ends on a tool row
//!   (no final answer) — the official set also has a few more client than assistant turns.
//! - **workflow** (ids `sim_000001`…): ONE system prompt shared by every workflow trajectory
//!   (business rules, policies, the intent-code table; 8–16 KB) and one tool set of 20–40
//!   functions with JSON-schema parameters, both on the first user row; 2–8 client turns of
//!   customer messages (think time 1–20 s) and tool rows (0.05–1 s); every assistant row carries
//!   `intent_codes` and content starting `intent: I0NN`.
//! - a first `dataset_metadata` row; no per-row sampling overrides.
//!
//! `scale` multiplies text sizes and depth (client turns per trajectory); `depth_scale` multiplies
//! depth only. For reference, the official set has 30,335 client turns over 613 trajectories —
//! about 246 per coding trajectory if workflow ones average 5 — so `depth_scale ≈ 6` approaches
//! the official depth at scale-1 text sizes.
//!
//! ## Determinism
//! Randomness is a splitmix64 stream per trajectory, keyed by (seed, domain, index): a trajectory
//! does not change when others are added. Distributions use only `+ - * /` and `sqrt` (IEEE
//! exact) and a quantile table instead of `exp`/`ln`, so the bytes do not depend on the
//! platform's libm. The default set's size and how long it takes to write, validate and read:
//! docs/benchmarks.md, "Synthetic dataset".

use serde::Serialize;
use serde_json::value::RawValue;
use serde_json::{json, Value};
use std::collections::HashSet;
use std::io::{self, Write};
use tokentap_core::text::{filler, REASONING_PREAMBLE};

/// What to generate.
#[derive(Debug, Clone, PartialEq)]
pub struct SynthConfig {
    /// Same seed (and other fields) → same bytes.
    pub seed: u64,
    /// Number of coding trajectories.
    pub coding: usize,
    /// Number of workflow trajectories.
    pub workflow: usize,
    /// Multiplies text sizes and depth; must be finite and > 0. Tests use ~0.1, benches > 1.
    pub scale: f64,
    /// Multiplies depth only (on top of `scale`); must be finite and > 0.
    pub depth_scale: f64,
    /// Spread the two domains evenly through the file (default), or write all coding trajectories
    /// first. File order is trajectory order (docs/benchmark.md#load), so interleaving gives every
    /// prefix of the file — what a short run replays — the official mix.
    pub interleave: bool,
}

impl Default for SynthConfig {
    /// The official mix: 113 coding + 500 workflow.
    fn default() -> Self {
        SynthConfig {
            seed: 1,
            coding: 113,
            workflow: 500,
            scale: 1.0,
            depth_scale: 1.0,
            interleave: true,
        }
    }
}

/// What [`synth`] wrote.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct SynthSummary {
    /// Trajectories written.
    pub trajectories: u64,
    /// Of them, coding.
    pub coding: u64,
    /// Of them, workflow.
    pub workflow: u64,
    /// Message rows (the metadata row not counted).
    pub rows: u64,
    /// Client rows (`user` and `tool`).
    pub client_turns: u64,
    /// Assistant rows.
    pub assistant_turns: u64,
    /// Bytes written, metadata row included.
    pub bytes: u64,
}

/// Writes the dataset described by `cfg` to `out` as JSONL.
pub fn synth(cfg: &SynthConfig, out: &mut (impl Write + ?Sized)) -> io::Result<SynthSummary> {
    for (name, v) in [("scale", cfg.scale), ("depth_scale", cfg.depth_scale)] {
        if !(v.is_finite() && v > 0.0) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{name} must be a finite number > 0, got {v}"),
            ));
        }
    }
    let mut w = RowWriter {
        out: io::BufWriter::with_capacity(
            1 << 16,
            Counting {
                inner: out,
                bytes: 0,
            },
        ),
        sum: SynthSummary::default(),
    };
    w.line(&json!({
        "_type": "dataset_metadata",
        "source": "tokentap synth",
        "format": "MLPerf agentic JSONL (one row per chat message)",
        "seed": cfg.seed,
        "coding": cfg.coding,
        "workflow": cfg.workflow,
        "scale": cfg.scale,
        "depth_scale": cfg.depth_scale,
        "license": "synthetic text, no third-party content",
    }))?;

    let g = Gen {
        scale: cfg.scale,
        depth: cfg.scale * cfg.depth_scale,
    };
    let coding_shared = g.coding_shared(cfg.seed)?;
    let workflow_shared = g.workflow_shared(cfg.seed)?;
    let mut ids = HashSet::new();
    let (c, wf) = (cfg.coding as u128, cfg.workflow as u128);
    let (mut i, mut j) = (0usize, 0usize);
    while i < cfg.coding || j < cfg.workflow {
        // Interleaved: coding i sits at (i + ½)/C of the file, workflow j at (j + ½)/W; take the
        // earlier (integer cross-multiplication, ties to coding).
        let coding_next = j >= cfg.workflow
            || (i < cfg.coding
                && (!cfg.interleave || (2 * i as u128 + 1) * wf <= (2 * j as u128 + 1) * c));
        if coding_next {
            let mut rng = Rng::new(cfg.seed, 1, i as u64);
            g.coding(&mut rng, &coding_shared, &mut ids, &mut w)?;
            w.sum.coding += 1;
            i += 1;
        } else {
            let mut rng = Rng::new(cfg.seed, 2, j as u64);
            g.workflow(&mut rng, &workflow_shared, j + 1, &mut w)?;
            w.sum.workflow += 1;
            j += 1;
        }
        w.sum.trajectories += 1;
    }
    w.out.flush()?;
    w.sum.bytes = w.out.get_ref().bytes;
    Ok(w.sum)
}

// ---------------------------------------------------------------------------------------------
// Output rows

#[derive(Serialize, Default)]
struct OutRow<'a> {
    conversation_id: &'a str,
    turn: u32,
    role: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    content: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    system: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tools: Option<&'a RawValue>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reasoning_content: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_calls: Option<&'a [Call<'a>]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_results: Option<&'a [ToolOut]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    intent_codes: Option<&'a [String]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    delay_seconds: Option<f64>,
}

#[derive(Serialize)]
struct Call<'a> {
    id: String,
    #[serde(rename = "type")]
    kind: &'static str,
    function: Function<'a>,
}

#[derive(Serialize)]
struct Function<'a> {
    name: &'a str,
    /// A JSON object, as a string (OpenAI format).
    arguments: String,
}

#[derive(Serialize)]
struct ToolOut {
    tool_call_id: String,
    content: String,
}

impl<'a> Call<'a> {
    /// A function call `id` of `name` with `args`, and the tool's answer to it.
    fn with_result(
        id: String,
        name: &'a str,
        args: &serde_json::Value,
        content: String,
    ) -> (Call<'a>, ToolOut) {
        let call = Call {
            id: id.clone(),
            kind: "function",
            function: Function {
                name,
                arguments: args.to_string(),
            },
        };
        (
            call,
            ToolOut {
                tool_call_id: id,
                content,
            },
        )
    }
}

struct Counting<'a, W: Write + ?Sized> {
    inner: &'a mut W,
    bytes: u64,
}

impl<W: Write + ?Sized> Write for Counting<'_, W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.bytes += n as u64;
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

struct RowWriter<'a, W: Write + ?Sized> {
    out: io::BufWriter<Counting<'a, W>>,
    sum: SynthSummary,
}

impl<W: Write + ?Sized> RowWriter<'_, W> {
    fn line(&mut self, v: &impl Serialize) -> io::Result<()> {
        serde_json::to_writer(&mut self.out, v)?;
        self.out.write_all(b"\n")
    }

    fn row(&mut self, r: &OutRow<'_>) -> io::Result<()> {
        self.sum.rows += 1;
        if r.role == "assistant" {
            self.sum.assistant_turns += 1;
        } else {
            self.sum.client_turns += 1;
        }
        self.line(r)
    }
}

// ---------------------------------------------------------------------------------------------
// Randomness

/// A trajectory's stream: [`tokentap_core::rng::SplitMix64`] (fully specified: no dependency
/// whose stream could change between versions).
struct Rng(tokentap_core::rng::SplitMix64);

impl Rng {
    fn new(seed: u64, domain: u64, index: u64) -> Rng {
        let mut r = Rng(tokentap_core::rng::SplitMix64::new(
            seed ^ domain.wrapping_mul(0xA076_1D64_78BD_642F)
                ^ index.wrapping_mul(0xE703_7ED1_A0B4_28DB),
        ));
        r.next();
        r
    }

    fn next(&mut self) -> u64 {
        self.0.next_u64()
    }

    /// Uniform in [0, 1).
    fn unit(&mut self) -> f64 {
        self.0.unit()
    }

    /// Uniform integer in `lo..=hi` (modulo bias < 2^-40 for our ranges).
    fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next() % (hi - lo + 1)
    }

    fn chance(&mut self, p: f64) -> bool {
        self.unit() < p
    }

    fn pick<'a, T>(&mut self, xs: &'a [T]) -> &'a T {
        &xs[self.next() as usize % xs.len()]
    }

    /// A log-normal multiplier of the median (σ = 0.6), 0.21–4.7, by linear interpolation in a
    /// quantile table (`exp(0.6·Φ⁻¹(u))` at u = 0.005, 1/16, …, 15/16, 0.995).
    fn lognormal(&mut self) -> f64 {
        const Q: [f64; 17] = [
            0.2132, 0.3983, 0.5015, 0.5873, 0.6672, 0.7458, 0.8260, 0.9099, 1.0000, 1.0990, 1.2107,
            1.3408, 1.4988, 1.7028, 1.9941, 2.5105, 4.6903,
        ];
        let x = self.unit() * 16.0;
        let k = (x as usize).min(15);
        let f = x - k as f64;
        Q[k] + (Q[k + 1] - Q[k]) * f
    }

    /// Seed for [`filler`].
    fn seed(&mut self) -> u64 {
        self.next()
    }
}

/// Seconds rounded to milliseconds (short, exact-looking numbers in the file).
fn ms(s: f64) -> f64 {
    (s * 1000.0).round() / 1000.0
}

// ---------------------------------------------------------------------------------------------
// Generators

struct Gen {
    /// Text size multiplier.
    scale: f64,
    /// Depth multiplier (scale × depth_scale).
    depth: f64,
}

/// Text and tools shared by every coding trajectory of a dataset.
struct CodingShared {
    system: String,
    tools: Box<RawValue>,
}

/// Text and tools shared by every workflow trajectory of a dataset.
struct WorkflowShared {
    system: String,
    tools: Box<RawValue>,
    /// Tool names, for calls.
    tool_names: Vec<String>,
}

/// The facts one workflow conversation keeps across its turns.
struct Customer<'a> {
    id: &'a str,
    /// The main intent code's number.
    intent: u64,
    customer: String,
    order: String,
}

const REPOS: &[(&str, &str, &str)] = &[
    ("django", "django", "django"),
    ("sympy", "sympy", "sympy"),
    ("astropy", "astropy", "astropy"),
    ("scikit-learn", "scikit-learn", "sklearn"),
    ("matplotlib", "matplotlib", "lib/matplotlib"),
    ("pytest-dev", "pytest", "src/_pytest"),
    ("sphinx-doc", "sphinx", "sphinx"),
    ("pydata", "xarray", "xarray"),
    ("psf", "requests", "requests"),
    ("pylint-dev", "pylint", "pylint"),
];

const SUBDIRS: &[&str] = &[
    "core", "utils", "models", "io", "backends", "forms", "db", "checkers", "config", "util",
];
const FILES: &[&str] = &[
    "base",
    "fields",
    "query",
    "handlers",
    "cache",
    "parser",
    "options",
    "validators",
    "compat",
    "formats",
    "main",
    "registry",
];
const VERBS: &[&str] = &[
    "get", "lookup", "update", "cancel", "create", "list", "issue", "check", "schedule",
    "transfer", "verify", "apply", "escalate", "send", "search",
];
const NOUNS: &[&str] = &[
    "order",
    "customer",
    "refund",
    "shipment",
    "invoice",
    "subscription",
    "ticket",
    "address",
    "payment",
    "return",
    "coupon",
    "account",
    "warranty",
    "appointment",
    "inventory",
];
const PARAMS: &[(&str, &str)] = &[
    ("order_id", "string"),
    ("customer_id", "string"),
    ("email", "string"),
    ("reason", "string"),
    ("amount", "number"),
    ("date", "string"),
    ("sku", "string"),
    ("quantity", "integer"),
    ("note", "string"),
    ("ticket_id", "string"),
];
/// Intent codes listed in the workflow system prompt: `I001` ..= `I080`.
const INTENTS: u64 = 80;

/// The kind of a bash command, which decides its output.
#[derive(Clone, Copy)]
enum Cmd {
    Pytest,
    Grep,
    Ls,
    Cat,
    Find,
    GitDiff,
    Python,
}

impl Gen {
    /// `base` bytes scaled, at least 1.
    fn sz(&self, base: f64) -> usize {
        (base * self.scale).round().max(1.0) as usize
    }

    fn coding_shared(&self, seed: u64) -> io::Result<CodingShared> {
        let mut rng = Rng::new(seed, 3, 0);
        let mut system = String::from(
            "You are a software engineering agent. You work in a Python repository checked out at /testbed \
             and resolve the issue the user describes by running shell commands and editing files.\n\n\
             Rules:\n",
        );
        let rules = self.sz(12.0).max(1);
        for i in 1..=rules {
            system.push_str(&format!("{i}. {}.\n", filler(rng.seed(), self.sz(200.0))));
        }
        system.push_str(
            "\nUse the bash tool for every command; use str_replace_editor to view and edit files. \
             Reproduce the issue first, make the smallest change that fixes it, run the relevant tests, \
             and finish with a short summary of the change.",
        );
        let tools = json!([
            {"type": "function", "function": {
                "name": "bash",
                "description": "Run a bash command in the repository container and return its stdout and stderr.",
                "parameters": {"type": "object", "properties": {
                    "command": {"type": "string", "description": "The command to run."}},
                    "required": ["command"]}}},
            {"type": "function", "function": {
                "name": "str_replace_editor",
                "description": "View a file, or replace one exact occurrence of old_str with new_str in it.",
                "parameters": {"type": "object", "properties": {
                    "command": {"type": "string", "enum": ["view", "str_replace", "create"]},
                    "path": {"type": "string", "description": "Absolute path of the file."},
                    "old_str": {"type": "string"},
                    "new_str": {"type": "string"}},
                    "required": ["command", "path"]}}}
        ]);
        Ok(CodingShared {
            system,
            tools: serde_json::value::to_raw_value(&tools)?,
        })
    }

    fn workflow_shared(&self, seed: u64) -> io::Result<WorkflowShared> {
        let mut rng = Rng::new(seed, 4, 0);
        let target = self.sz(rng.range(8 * 1024, 16 * 1024) as f64);
        let mut system = String::from(
            "You are the customer support assistant of Northwind Outfitters, an online retailer. Follow the \
             business rules and policies below exactly. Use the tools to look up and change orders, accounts \
             and tickets; never invent data a tool did not return.\n\n\
             Every reply must begin with `intent: <code>`, where <code> is the intent code below that best \
             describes what the customer wants.\n\n# Intent codes\n",
        );
        for i in 1..=INTENTS {
            system.push_str(&format!("I{i:03}: {}\n", filler(rng.seed(), self.sz(40.0))));
        }
        system.push_str("\n# Business rules\n");
        let mut n = 1;
        while system.len() < target * 3 / 5 {
            system.push_str(&format!("{n}. {}.\n", filler(rng.seed(), self.sz(220.0))));
            n += 1;
        }
        for section in [
            "Refund policy",
            "Shipping policy",
            "Account security",
            "Escalation",
        ] {
            system.push_str(&format!("\n## {section}\n"));
            let part = target.saturating_sub(system.len()) / 2;
            system.push_str(&filler(rng.seed(), part.max(1).min(self.sz(1200.0))));
            system.push_str(".\n");
        }
        if system.len() < target {
            system.push_str(&format!(
                "\n## Notes\n{}.\n",
                filler(rng.seed(), target - system.len())
            ));
        }

        let count = rng.range(20, 40) as usize;
        let mut names = Vec::with_capacity(count);
        let mut taken = HashSet::new();
        let mut tools = Vec::with_capacity(count);
        while tools.len() < count {
            let (v, o) = (
                rng.range(0, VERBS.len() as u64 - 1),
                rng.range(0, NOUNS.len() as u64 - 1),
            );
            if !taken.insert((v, o)) {
                continue;
            }
            let name = format!("{}_{}", VERBS[v as usize], NOUNS[o as usize]);
            let mut props = serde_json::Map::new();
            let mut required = Vec::new();
            for _ in 0..rng.range(1, 4) {
                let (p, ty) = *rng.pick(PARAMS);
                if props.contains_key(p) {
                    continue;
                }
                props.insert(
                    p.into(),
                    json!({"type": ty, "description": filler(rng.seed(), self.sz(50.0))}),
                );
                if rng.chance(0.6) {
                    required.push(p);
                }
            }
            tools.push(json!({"type": "function", "function": {
                "name": name,
                "description": filler(rng.seed(), self.sz(160.0)),
                "parameters": {"type": "object", "properties": props, "required": required}}}));
            names.push(name);
        }
        Ok(WorkflowShared {
            system,
            tools: serde_json::value::to_raw_value(&tools)?,
            tool_names: names,
        })
    }

    fn coding<W: Write + ?Sized>(
        &self,
        rng: &mut Rng,
        shared: &CodingShared,
        ids: &mut HashSet<String>,
        w: &mut RowWriter<'_, W>,
    ) -> io::Result<()> {
        let &(owner, repo, pkg) = rng.pick(REPOS);
        let id = coding_id(rng, ids, owner, repo);
        // 20–60 client turns, skewed towards the short end (u^1.5), times the depth multiplier.
        let u = rng.unit();
        let depth = (((20.0 + 40.0 * u * u.sqrt()) * self.depth).round() as u32).max(2);
        let truncated = rng.chance(1.0 / 16.0);
        let task = self.coding_task(rng);
        let mut turn = 1;
        w.row(&OutRow {
            conversation_id: &id,
            turn,
            role: "user",
            content: Some(&task),
            system: Some(&shared.system),
            tools: Some(&shared.tools),
            ..OutRow::default()
        })?;
        for round in 1..depth {
            turn = self.coding_round(rng, &id, turn, round, pkg, w)?;
        }
        if !truncated {
            self.coding_answer(rng, &id, turn + 1, pkg, w)?;
        }
        Ok(())
    }

    /// The SWE-style task of a coding trajectory's first user row.
    fn coding_task(&self, rng: &mut Rng) -> String {
        format!(
            "<uploaded_files>\n/testbed\n</uploaded_files>\nI've uploaded a python code repository in the directory \
             /testbed. Consider the following issue description:\n\n<issue_description>\n{}\n</issue_description>\n\n\
             Can you help me implement the necessary changes to the repository so that the requirements specified \
             in the issue are met? The tests are already updated; do not modify them.",
            filler(rng.seed(), (self.sz(1500.0) as f64 * rng.lognormal()) as usize)
        )
    }

    /// One round after turn `turn`: an assistant row with its tool calls, then the tool row with
    /// their results after the tools' run time; returns the last turn written.
    fn coding_round<W: Write + ?Sized>(
        &self,
        rng: &mut Rng,
        id: &str,
        turn: u32,
        round: u32,
        pkg: &str,
        w: &mut RowWriter<'_, W>,
    ) -> io::Result<u32> {
        let reasoning = self.reasoning(rng, 600.0);
        let (calls, results) = self.coding_calls(rng, round, pkg);
        w.row(&OutRow {
            conversation_id: id,
            turn: turn + 1,
            role: "assistant",
            reasoning_content: Some(&reasoning),
            tool_calls: Some(&calls),
            ..OutRow::default()
        })?;
        let delay = tool_run_time(rng);
        w.row(&OutRow {
            conversation_id: id,
            turn: turn + 2,
            role: "tool",
            tool_results: Some(&results),
            delay_seconds: Some(ms(delay)),
            ..OutRow::default()
        })?;
        Ok(turn + 2)
    }

    /// The tool calls of one round (12 % of rounds: 2–3 parallel ones) and their results.
    fn coding_calls(
        &self,
        rng: &mut Rng,
        round: u32,
        pkg: &str,
    ) -> (Vec<Call<'static>>, Vec<ToolOut>) {
        let n_calls = if rng.chance(0.12) { rng.range(2, 3) } else { 1 };
        let mut calls = Vec::with_capacity(n_calls as usize);
        let mut results = Vec::with_capacity(n_calls as usize);
        for _ in 0..n_calls {
            let (call, result) = self.coding_call(rng, round, n_calls, pkg);
            calls.push(call);
            results.push(result);
        }
        (calls, results)
    }

    /// One call (an editor call when alone, 15 % of the time; else a bash command) and its
    /// output, which grows with the round.
    fn coding_call(
        &self,
        rng: &mut Rng,
        round: u32,
        n_calls: u64,
        pkg: &str,
    ) -> (Call<'static>, ToolOut) {
        let call_id = format!("call_{:016x}", rng.next());
        let file = source_path(rng, pkg);
        // Output grows with the round: later commands read more files and longer logs.
        let size = (self.sz(600.0) as f64 * rng.lognormal() * (1.0 + f64::from(round) / 8.0))
            .min(self.sz(32.0 * 1024.0) as f64) as usize;
        let (name, args, output) = if n_calls == 1 && rng.chance(0.15) {
            self.editor(rng, &file, size)
        } else {
            let cmd = *rng.pick(&BASH_MIX);
            let (command, output) = self.bash(rng, cmd, pkg, &file, size);
            ("bash", json!({ "command": command }), output)
        };
        Call::with_result(call_id, name, &args, output)
    }

    /// The final assistant answer (turn `turn`): reasoning and a summary of the fix.
    fn coding_answer<W: Write + ?Sized>(
        &self,
        rng: &mut Rng,
        id: &str,
        turn: u32,
        pkg: &str,
        w: &mut RowWriter<'_, W>,
    ) -> io::Result<()> {
        let reasoning = self.reasoning(rng, 400.0);
        let answer = format!(
            "I fixed the issue in {}: {}. The reproduction script now passes and the related tests succeed.",
            source_path(rng, pkg),
            filler(rng.seed(), self.sz(400.0))
        );
        w.row(&OutRow {
            conversation_id: id,
            turn,
            role: "assistant",
            content: Some(&answer),
            reasoning_content: Some(&reasoning),
            ..OutRow::default()
        })
    }

    /// Recorded reasoning: the shared preamble (see `tokentap_core::text`), then filler.
    fn reasoning(&self, rng: &mut Rng, median: f64) -> String {
        let extra = (self.sz(median) as f64 * rng.lognormal()) as usize;
        let mut s = String::with_capacity(REASONING_PREAMBLE.len() + extra + 16);
        s.push_str(REASONING_PREAMBLE);
        s.push(' ');
        s.push_str(&filler(rng.seed(), extra));
        s.push('.');
        s
    }

    /// A bash command of kind `cmd` and its output of about `size` bytes.
    fn bash(
        &self,
        rng: &mut Rng,
        cmd: Cmd,
        pkg: &str,
        file: &str,
        size: usize,
    ) -> (String, String) {
        let word = *rng.pick(tokentap_core::text::WORDS);
        let test = file
            .replace(&format!("{pkg}/"), "tests/")
            .replace(".py", "_test.py");
        match cmd {
            Cmd::Pytest => pytest_run(rng, &test, word, size),
            Cmd::Grep => grep_run(rng, pkg, file, word, size),
            Cmd::Ls => ls_run(rng, pkg, file, size),
            Cmd::Cat => cat_run(rng, file, size),
            Cmd::Find => find_run(rng, pkg, word, size),
            Cmd::GitDiff => git_diff_run(rng, file, size),
            Cmd::Python => python_run(rng, file, size),
        }
    }

    /// A `str_replace_editor` call (view or edit) and its output.
    fn editor(&self, rng: &mut Rng, file: &str, size: usize) -> (&'static str, Value, String) {
        let path = format!("/testbed/{file}");
        let mut out;
        let args = if rng.chance(0.5) {
            out = format!("Here's the result of running `cat -n` on {path}:\n");
            json!({"command": "view", "path": path})
        } else {
            out = format!("The file {path} has been edited. Here's the result of running `cat -n` on a snippet of {path}:\n");
            json!({"command": "str_replace", "path": path,
                   "old_str": filler(rng.seed(), self.sz(120.0)), "new_str": filler(rng.seed(), self.sz(140.0))})
        };
        let start = rng.range(1, 300);
        lines(rng, &mut out, size, |rng, i| {
            format!("{:>6}\t{}", start + i, filler(rng.seed(), 50))
        });
        ("str_replace_editor", args, out)
    }

    fn workflow<W: Write + ?Sized>(
        &self,
        rng: &mut Rng,
        shared: &WorkflowShared,
        n: usize,
        w: &mut RowWriter<'_, W>,
    ) -> io::Result<()> {
        let id = format!("sim_{n:06}");
        // At least 2 even when scaled down: a workflow trajectory is a conversation, and tests
        // with tiny scales still need multi-turn ones.
        let client_turns = ((rng.range(2, 8) as f64 * self.depth).round() as u32).max(2);
        let conv = Customer {
            id: &id,
            intent: rng.range(1, INTENTS),
            customer: format!("C{:07}", rng.range(1, 9_999_999)),
            order: format!("A{:06}", rng.range(1, 999_999)),
        };
        let mut turn = 0;
        let mut used = 0;
        while used < client_turns {
            // One customer message …
            let message = self.customer_message(rng, &conv, used);
            turn += 1;
            used += 1;
            // The first message opens the conversation: no think time before it.
            let delay = (turn > 1).then(|| ms((5.0 * rng.lognormal()).clamp(1.0, 20.0)));
            w.row(&OutRow {
                conversation_id: &id,
                turn,
                role: "user",
                content: Some(&message),
                system: (turn == 1).then_some(shared.system.as_str()),
                tools: (turn == 1).then_some(&*shared.tools),
                delay_seconds: delay,
                ..OutRow::default()
            })?;
            // … answered after a tool round (when the depth allows one) or directly.
            if used < client_turns && rng.chance(0.6) {
                turn = self.workflow_tool_round(rng, shared, &conv, turn, w)?;
                used += 1;
            }
            turn += 1;
            self.workflow_reply(rng, &conv, turn, w)?;
        }
        Ok(())
    }

    /// A customer message: the opening one names the customer and the order.
    fn customer_message(&self, rng: &mut Rng, conv: &Customer, used: u32) -> String {
        let opening = match used {
            0 => format!(
                "Hi, this is customer {}. I have a question about order {}.",
                conv.customer, conv.order
            ),
            _ => "Thanks. One more thing:".to_string(),
        };
        format!(
            "{opening} {}?",
            filler(
                rng.seed(),
                (self.sz(250.0) as f64 * rng.lognormal()) as usize
            )
        )
    }

    /// A tool round after turn `turn`: an assistant row with one or two calls (and the intent),
    /// then the tool row with their results; returns the last turn written.
    fn workflow_tool_round<W: Write + ?Sized>(
        &self,
        rng: &mut Rng,
        shared: &WorkflowShared,
        conv: &Customer,
        turn: u32,
        w: &mut RowWriter<'_, W>,
    ) -> io::Result<u32> {
        let codes = self.intent_codes(rng, conv.intent);
        let n_calls = if rng.chance(0.2) { 2 } else { 1 };
        let mut calls = Vec::new();
        let mut results = Vec::new();
        for _ in 0..n_calls {
            let (call, result) = self.workflow_call(rng, shared, conv);
            calls.push(call);
            results.push(result);
        }
        let content = format!("intent: {}\nLet me check that for you.", codes[0]);
        w.row(&OutRow {
            conversation_id: conv.id,
            turn: turn + 1,
            role: "assistant",
            content: Some(&content),
            tool_calls: Some(&calls),
            intent_codes: Some(&codes),
            ..OutRow::default()
        })?;
        w.row(&OutRow {
            conversation_id: conv.id,
            turn: turn + 2,
            role: "tool",
            tool_results: Some(&results),
            delay_seconds: Some(ms(0.05 + 0.95 * rng.unit() * rng.unit())),
            ..OutRow::default()
        })?;
        Ok(turn + 2)
    }

    /// One call of a shared tool on the conversation's order and customer, and its result.
    fn workflow_call<'a>(
        &self,
        rng: &mut Rng,
        shared: &'a WorkflowShared,
        conv: &Customer,
    ) -> (Call<'a>, ToolOut) {
        let (customer, order) = (&conv.customer, &conv.order);
        let call_id = format!("call_{:016x}", rng.next());
        let name = rng.pick(&shared.tool_names).as_str();
        let args = json!({"order_id": order, "customer_id": customer});
        let result = json!({"status": "ok", "tool": name, "order_id": order,
                            "details": filler(rng.seed(), (self.sz(400.0) as f64 * rng.lognormal()) as usize)});
        Call::with_result(call_id, name, &args, result.to_string())
    }

    /// The assistant's reply at turn `turn`, opening with its intent code.
    fn workflow_reply<W: Write + ?Sized>(
        &self,
        rng: &mut Rng,
        conv: &Customer,
        turn: u32,
        w: &mut RowWriter<'_, W>,
    ) -> io::Result<()> {
        let codes = self.intent_codes(rng, conv.intent);
        let reply = format!(
            "intent: {}\n{}.",
            codes[0],
            filler(
                rng.seed(),
                (self.sz(450.0) as f64 * rng.lognormal()) as usize
            )
        );
        w.row(&OutRow {
            conversation_id: conv.id,
            turn,
            role: "assistant",
            content: Some(&reply),
            intent_codes: Some(&codes),
            ..OutRow::default()
        })
    }

    /// The conversation's main intent, sometimes a neighbouring one, and 10 % of the time a second
    /// acceptable code.
    fn intent_codes(&self, rng: &mut Rng, main: u64) -> Vec<String> {
        let code = if rng.chance(0.8) {
            main
        } else {
            rng.range(1, INTENTS)
        };
        let mut codes = vec![format!("I{code:03}")];
        if rng.chance(0.1) {
            let other = code % INTENTS + 1;
            codes.push(format!("I{other:03}"));
        }
        codes
    }
}

/// The mix of bash commands a coding round draws from (tests and file reads the most common).
const BASH_MIX: [Cmd; 9] = [
    Cmd::Pytest,
    Cmd::Pytest,
    Cmd::Grep,
    Cmd::Ls,
    Cmd::Cat,
    Cmd::Cat,
    Cmd::Find,
    Cmd::GitDiff,
    Cmd::Python,
];

/// A unique coding trajectory id, `owner__repo-NUMBER` (the next free number on a clash).
fn coding_id(rng: &mut Rng, ids: &mut HashSet<String>, owner: &str, repo: &str) -> String {
    let mut number = rng.range(1000, 29999);
    loop {
        let id = format!("{owner}__{repo}-{number}");
        if ids.insert(id.clone()) {
            return id;
        }
        number += 1;
    }
}

/// A source file of package `pkg`: `pkg/<subdir>/<file>.py`.
fn source_path(rng: &mut Rng, pkg: &str) -> String {
    format!("{pkg}/{}/{}.py", rng.pick(SUBDIRS), rng.pick(FILES))
}

/// Tool execution time in seconds: 0.1–2.5 s, and 3 % long runs (a full test suite, a build).
fn tool_run_time(rng: &mut Rng) -> f64 {
    if rng.chance(0.03) {
        10.0 + 50.0 * rng.unit() * rng.unit()
    } else {
        (0.5 * rng.lognormal()).max(0.1)
    }
}

/// `pytest` on `test`: a session with one failure and its assertion lines.
fn pytest_run(rng: &mut Rng, test: &str, word: &str, size: usize) -> (String, String) {
    let n = rng.range(3, 60);
    let mut out = format!(
        "============================= test session starts ==============================\n\
         platform linux -- Python 3.9.20, pytest-7.4.4, pluggy-1.5.0\nrootdir: /testbed\ncollected {n} items\n\n{test} "
    );
    out.push_str(&".".repeat(n as usize - 1));
    out.push_str(
        "F\n\n=================================== FAILURES ===================================\n",
    );
    lines(rng, &mut out, size, |rng, i| {
        format!("E   {} (line {})", filler(rng.seed(), 70), 10 + i)
    });
    out.push_str(&format!(
        "=========================== short test summary info ============================\n\
         FAILED {test}::test_{word} - AssertionError\n========================= 1 failed, {} passed in 0.{:02}s =========================",
        n - 1,
        rng.range(5, 99)
    ));
    (format!("cd /testbed && python -m pytest {test} -x -q"), out)
}

/// `grep -rn` for `word` in the package: hits in `file`.
fn grep_run(rng: &mut Rng, pkg: &str, file: &str, word: &str, size: usize) -> (String, String) {
    let mut out = String::new();
    lines(rng, &mut out, size, |rng, i| {
        format!("{file}:{}:    {}", 3 + 7 * i, filler(rng.seed(), 60))
    });
    (
        format!("grep -rn \"{word}\" /testbed/{pkg} --include=*.py | head -200"),
        out,
    )
}

/// `ls -la` of `file`'s directory.
fn ls_run(rng: &mut Rng, pkg: &str, file: &str, size: usize) -> (String, String) {
    let mut out = String::from("total 128\n");
    lines(rng, &mut out, size, |rng, _| {
        format!(
            "-rw-r--r-- 1 root root {:>6} Jan  1 00:00 {}.py",
            rng.range(200, 90000),
            rng.pick(FILES)
        )
    });
    let dir = file.rsplit_once('/').map_or(pkg, |(d, _)| d);
    (format!("ls -la /testbed/{dir}"), out)
}

/// `cat` of `file`, or `sed -n` of 80 of its lines, numbered.
fn cat_run(rng: &mut Rng, file: &str, size: usize) -> (String, String) {
    let mut out = String::new();
    lines(rng, &mut out, size, |rng, i| {
        format!("{:>6}\t{}", i + 1, filler(rng.seed(), 50))
    });
    if rng.chance(0.5) {
        (format!("cat /testbed/{file}"), out)
    } else {
        let a = rng.range(1, 400);
        (format!("sed -n '{a},{}p' /testbed/{file}", a + 80), out)
    }
}

/// `find` of the Python files whose path has `word`.
fn find_run(rng: &mut Rng, pkg: &str, word: &str, size: usize) -> (String, String) {
    let mut out = String::new();
    lines(rng, &mut out, size, |rng, _| {
        format!(
            "/testbed/{pkg}/{}/{}.py",
            rng.pick(SUBDIRS),
            rng.pick(FILES)
        )
    });
    (
        format!("find /testbed -name \"*.py\" -path \"*{word}*\" | head -100"),
        out,
    )
}

/// `git diff`: one hunk of `file`.
fn git_diff_run(rng: &mut Rng, file: &str, size: usize) -> (String, String) {
    let mut out =
        format!("diff --git a/{file} b/{file}\n--- a/{file}\n+++ b/{file}\n@@ -10,7 +10,8 @@\n");
    lines(rng, &mut out, size, |rng, _| {
        format!(
            "{}    {}",
            *rng.pick(&[" ", " ", "+", "-"]),
            filler(rng.seed(), 50)
        )
    });
    ("cd /testbed && git diff".into(), out)
}

/// The reproduction script: a traceback through `file` ending in a `ValueError`.
fn python_run(rng: &mut Rng, file: &str, size: usize) -> (String, String) {
    let mut out = String::from("Traceback (most recent call last):\n");
    lines(rng, &mut out, size, |rng, i| {
        format!(
            "  File \"/testbed/{file}\", line {}, in {}\n    {}",
            20 + 13 * i,
            rng.pick(FILES),
            filler(rng.seed(), 50)
        )
    });
    out.push_str(&format!("ValueError: {}", filler(rng.seed(), 40)));
    ("cd /testbed && python reproduce_issue.py".into(), out)
}

/// Appends lines made by `line(rng, index)` to `out` until it reaches `size` bytes.
fn lines(
    rng: &mut Rng,
    out: &mut String,
    size: usize,
    mut line: impl FnMut(&mut Rng, u64) -> String,
) {
    let target = out.len() + size;
    let mut i = 0;
    while out.len() < target {
        out.push_str(&line(rng, i));
        out.push('\n');
        i += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rng_stream_is_fixed() {
        // Golden values: a change here changes every synthesized dataset of every seed, which
        // must be a deliberate decision (benchmarks compare runs on "seed N").
        // (Computed independently with a 6-line Python splitmix64.)
        let mut r = Rng::new(1, 1, 0);
        let first: Vec<u64> = (0..3).map(|_| r.next()).collect();
        assert_eq!(
            first,
            [
                0x6d86_a80a_ec7e_07f6,
                0xa805_5d73_43e1_4e85,
                0xd47e_0ea0_ea1b_cdbb
            ]
        );
        assert_ne!(Rng::new(1, 1, 1).next(), Rng::new(1, 1, 0).next());
        assert_ne!(Rng::new(1, 2, 0).next(), Rng::new(1, 1, 0).next());
    }

    #[test]
    fn lognormal_stays_in_its_table_and_has_median_one() {
        let mut r = Rng::new(7, 0, 0);
        let mut v: Vec<f64> = (0..10_000).map(|_| r.lognormal()).collect();
        assert!(v.iter().all(|x| (0.2132..=4.6903).contains(x)));
        v.sort_by(f64::total_cmp);
        let median = v[v.len() / 2];
        assert!((0.95..1.05).contains(&median), "{median}");
        for _ in 0..1000 {
            let u = r.range(3, 5);
            assert!((3..=5).contains(&u));
        }
    }
}
