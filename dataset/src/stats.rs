//! Dataset statistics: the numbers `tokentap dataset stats` prints.
//!
//! Why: before a benchmark run, one wants to know what load a dataset implies — how deep the
//! trajectories are, how fast context grows (prefill cost, KV-cache pressure), how much time the
//! recorded delays add, and how much of every request is a shared prefix (system prompt, tool
//! definitions). The two shapes of docs/benchmark.md#workload differ on every one of these, so
//! everything is reported per domain (coding = ids not starting with `sim_`, workflow =
//! `sim_NNNNNN`) and in total.
//!
//! Data flow: one pass over the conversations ([`StatsBuilder`], fed by the streaming reader or a
//! loaded [`Dataset`]); each conversation adds raw samples to a per-domain accumulator and to the total; percentiles come from the raw samples through
//! [`tokentap_core::stats::Samples`] (exact, numpy `linear`).
//!
//! ## Request size (approximate, by design)
//! The size of the request for client turn *t* is the **sum of the text bytes** that
//! docs/benchmark.md#requests puts in it, not the size of the JSON body:
//! - the conversation's system prompt (its first non-empty `system`),
//! - for every row up to and including *t*: `content` (a string's bytes; a content-part array's
//!   compact JSON), `reasoning_content`, `name`, the compact JSON of `tool_calls`, and for tool
//!   rows each result's `tool_call_id` and `content` (a string's bytes, else compact JSON),
//! - the compact JSON of the `tools` the request carries (the row's own, else the first user
//!   row's).
//!
//! JSON quoting/escaping and the role keys are left out: they are a few dozen bytes per message
//! and not what grows. Tokens are `tokentap_core::tokenize::count` of that many bytes (the 4-byte
//! stand-in tokenizer), i.e. `ceil(bytes / 4)`; the simulated server's rendering adds a handful of
//! marker tokens per message on top.

use crate::model::{Conversation, Dataset, Role, Row};
use serde::Serialize;
use serde_json::Value;
use std::collections::HashMap;
use std::fmt::Write as _;
use tokentap_core::stats::Samples;
use tokentap_core::tokenize;

/// Client-turn index buckets for the prompt growth table: `[from, to]`, 1-based, inclusive.
/// Powers of two, so deep coding trajectories and shallow workflow ones both read well.
pub const TURN_BUCKETS: &[(u32, u32)] = &[
    (1, 1),
    (2, 2),
    (3, 4),
    (5, 8),
    (9, 16),
    (17, 32),
    (33, 64),
    (65, 128),
    (129, 256),
    (257, u32::MAX),
];

/// Statistics of one dataset.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DatasetStats {
    /// The file the dataset came from.
    pub path: String,
    /// The whole dataset.
    pub total: DomainStats,
    /// Conversations whose id does not start with `sim_`.
    pub coding: DomainStats,
    /// Conversations with `sim_NNNNNN` ids.
    pub workflow: DomainStats,
}

/// Statistics of one domain (or of the whole dataset).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DomainStats {
    /// Conversations.
    pub trajectories: u64,
    /// All rows (every role).
    pub rows: u64,
    /// `user` + `tool` rows: each one is a request.
    pub client_turns: u64,
    /// `user` rows.
    pub user_turns: u64,
    /// `tool` rows.
    pub tool_turns: u64,
    /// Recorded responses (never sent).
    pub assistant_turns: u64,
    /// Client turns per trajectory.
    pub turns_per_trajectory: Option<CountedDist>,
    /// Rows of every role per trajectory.
    pub rows_per_trajectory: Option<CountedDist>,
    /// Request size by client-turn index (see [`TURN_BUCKETS`]); empty buckets are left out.
    pub prompt_by_turn: Vec<TurnBucket>,
    /// Size of the first request of each trajectory (system prompt + tools + first user row).
    pub first_request: Option<Size>,
    /// Size of the last request of each trajectory: the largest context it reaches.
    pub final_context: Option<Size>,
    /// Growth of the request from one client turn to the next, in bytes (one sample per client
    /// turn after the first of its trajectory).
    pub growth_per_turn_bytes: Option<CountedDist>,
    /// `delay_seconds` of client rows that have one.
    pub delays: Delays,
    /// System prompts.
    pub system_prompts: SystemPrompts,
    /// Tool definitions.
    pub tools: Tools,
    /// Recorded assistant turns.
    pub assistant: Assistant,
}

/// Order statistics of one quantity (core's [`tokentap_core::stats::Dist`], numpy `linear`
/// percentiles) with its count and sum.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct CountedDist {
    /// Values.
    pub count: u64,
    /// Their sum.
    pub sum: f64,
    /// Their order statistics.
    #[serde(flatten)]
    pub of: tokentap_core::stats::Dist,
}

impl std::ops::Deref for CountedDist {
    type Target = tokentap_core::stats::Dist;
    fn deref(&self) -> &Self::Target {
        &self.of
    }
}

impl CountedDist {
    /// `None` when there are no samples.
    fn of(col: &mut Col) -> Option<CountedDist> {
        let p = col.samples.percentiles()?;
        Some(CountedDist {
            count: p.count,
            sum: col.sum,
            of: p.into(),
        })
    }
}

/// A size in bytes and in stand-in tokens.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Size {
    /// In bytes.
    pub bytes: CountedDist,
    /// In stand-in tokens.
    pub tokens: CountedDist,
}

/// Request sizes of the client turns whose index falls in `[from, to]`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct TurnBucket {
    /// First client-turn index of the bucket (1-based).
    pub from: u32,
    /// Last client-turn index of the bucket (`u32::MAX` for the open last bucket).
    pub to: u32,
    /// The requests' size.
    pub size: Size,
}

/// Recorded inter-turn delays (docs/benchmark.md#load: slept before issuing, excluded from
/// latency).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Delays {
    /// Client rows that carry a `delay_seconds`.
    pub count: u64,
    /// Client rows without one (no pause).
    pub missing: u64,
    /// Seconds; `None` without delays.
    pub seconds: Option<CountedDist>,
}

/// System prompts (message 0 of every request of a trajectory).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SystemPrompts {
    /// Trajectories that have a system prompt.
    pub trajectories_with: u64,
    /// Distinct system prompt texts.
    pub distinct: u64,
    /// Bytes of each distinct prompt.
    pub distinct_bytes: Option<CountedDist>,
    /// The most shared prompts (up to 5), most trajectories first.
    pub top: Vec<SharedText>,
}

/// A text (system prompt or tool set) shared by several trajectories.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct SharedText {
    /// Its bytes.
    pub bytes: u64,
    /// Its stand-in tokens.
    pub tokens: u64,
    /// Trajectories that share it.
    pub trajectories: u64,
}

/// Tool definitions (the first user row's `tools`, which client rows inherit).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Tools {
    /// Trajectories whose first user row has `tools`.
    pub trajectories_with: u64,
    /// Distinct tool sets (compact JSON text).
    pub distinct_sets: u64,
    /// Tool definitions per trajectory (trajectories with tools).
    pub per_trajectory: Option<CountedDist>,
    /// Compact JSON bytes of the tool set per trajectory (trajectories with tools).
    pub bytes: Option<CountedDist>,
}

/// Recorded assistant turns (the response sizes a compatible run is compared with).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Assistant {
    /// Assistant rows with a tool call.
    pub with_tool_calls: u64,
    /// Assistant rows with two or more tool calls.
    pub with_parallel_tool_calls: u64,
    /// Assistant rows with reasoning.
    pub with_reasoning: u64,
    /// Assistant rows with intent codes.
    pub with_intent_codes: u64,
    /// Stand-in tokens of content + reasoning + tool calls, per assistant row.
    pub output_tokens: Option<CountedDist>,
}

/// Raw samples plus their exact running sum (`Samples` only exposes the mean).
#[derive(Default, Clone)]
struct Col {
    samples: Samples,
    sum: f64,
}

impl Col {
    fn push(&mut self, x: f64) {
        self.samples.push(x);
        self.sum += x;
    }
}

impl FromIterator<f64> for Col {
    fn from_iter<I: IntoIterator<Item = f64>>(iter: I) -> Self {
        let mut c = Col::default();
        for x in iter {
            c.push(x);
        }
        c
    }
}

/// Statistics of `ds`.
pub fn stats(ds: &Dataset) -> DatasetStats {
    let mut b = StatsBuilder::default();
    for conv in &ds.conversations {
        b.add(conv);
    }
    b.finish(&ds.path)
}

/// The statistics folded one conversation at a time, so `dataset stats` reads a file of any
/// size holding one conversation ([`crate::load::read`]) and these samples.
#[derive(Default)]
pub struct StatsBuilder {
    total: Acc,
    coding: Acc,
    workflow: Acc,
}

impl StatsBuilder {
    /// Adds one conversation.
    pub fn add(&mut self, conv: &Conversation) {
        let domain = if conv.is_workflow() {
            &mut self.workflow
        } else {
            &mut self.coding
        };
        domain.add(conv);
        self.total.add(conv);
    }

    /// The statistics of everything added, for the file at `path`.
    pub fn finish(self, path: &std::path::Path) -> DatasetStats {
        DatasetStats {
            path: path.display().to_string(),
            total: self.total.finish(),
            coding: self.coding.finish(),
            workflow: self.workflow.finish(),
        }
    }
}

/// A text's identity without keeping the text: a 64-bit hash (distinct texts of one dataset
/// colliding is not a practical concern for a count).
fn text_key(text: &str) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    text.hash(&mut h);
    h.finish()
}

/// Raw samples of one domain.
#[derive(Default)]
struct Acc {
    trajectories: u64,
    rows: u64,
    user_turns: u64,
    tool_turns: u64,
    assistant_turns: u64,
    turns_per_traj: Col,
    rows_per_traj: Col,
    by_turn: Vec<(Col, Col)>,
    first: (Col, Col),
    last: (Col, Col),
    growth: Col,
    delays: Col,
    no_delay: u64,
    /// System prompts by [`text_key`]: (bytes, trajectories).
    systems: HashMap<u64, (usize, u64)>,
    /// Tool sets by [`text_key`] of their JSON: trajectories.
    tool_sets: HashMap<u64, u64>,
    tools_count: Col,
    tools_bytes: Col,
    with_tool_calls: u64,
    with_parallel: u64,
    with_reasoning: u64,
    with_intents: u64,
    output_tokens: Col,
}

impl Acc {
    fn add(&mut self, conv: &Conversation) {
        self.trajectories += 1;
        self.rows += conv.rows.len() as u64;
        self.rows_per_traj.push(conv.rows.len() as f64);
        if self.by_turn.is_empty() {
            self.by_turn = vec![(Col::default(), Col::default()); TURN_BUCKETS.len()];
        }

        let system = conv.system();
        if let Some(s) = system {
            self.systems.entry(text_key(s)).or_insert((s.len(), 0)).1 += 1;
        }
        let default_tools = conv.default_tools();
        if let Some(t) = default_tools {
            let text = t.to_string();
            self.tools_count
                .push(t.as_array().map_or(0, Vec::len) as f64);
            self.tools_bytes.push(text.len() as f64);
            *self.tool_sets.entry(text_key(&text)).or_default() += 1;
        }
        let default_tools_bytes = default_tools.map_or(0, json_len);

        let mut history = system.map_or(0, str::len);
        let mut client_index = 0u32;
        let mut prev_request: Option<usize> = None;
        for row in &conv.rows {
            history += row_bytes(row);
            match row.role {
                Role::Assistant => {
                    self.assistant_turns += 1;
                    self.assistant(row);
                    continue;
                }
                Role::User => self.user_turns += 1,
                Role::Tool => self.tool_turns += 1,
            }
            client_index += 1;
            match row.delay_seconds {
                Some(d) => self.delays.push(d),
                None => self.no_delay += 1,
            }
            let tools = row.tools.as_ref().map_or(default_tools_bytes, json_len);
            let request = history + tools;
            let tokens = tokenize_len(request);
            if let Some(b) = TURN_BUCKETS
                .iter()
                .position(|&(from, to)| (from..=to).contains(&client_index))
            {
                self.by_turn[b].0.push(request as f64);
                self.by_turn[b].1.push(tokens);
            }
            match prev_request {
                None => {
                    self.first.0.push(request as f64);
                    self.first.1.push(tokens);
                }
                Some(p) => self.growth.push(request as f64 - p as f64),
            }
            prev_request = Some(request);
        }
        self.turns_per_traj.push(f64::from(client_index));
        if let Some(last) = prev_request {
            self.last.0.push(last as f64);
            self.last.1.push(tokenize_len(last));
        }
    }

    fn assistant(&mut self, row: &Row) {
        let calls = row.tool_calls.as_ref().map_or(0, Vec::len);
        self.with_tool_calls += u64::from(calls > 0);
        self.with_parallel += u64::from(calls > 1);
        self.with_reasoning += u64::from(
            row.reasoning_content
                .as_ref()
                .is_some_and(|r| !r.is_empty()),
        );
        self.with_intents += u64::from(row.intent_codes.as_ref().is_some_and(|c| !c.is_empty()));
        let out = row.content.as_ref().map_or(0, text_len)
            + row.reasoning_content.as_ref().map_or(0, String::len)
            + row
                .tool_calls
                .as_ref()
                .map_or(0, |c| c.iter().map(json_len).sum());
        self.output_tokens.push(tokenize_len(out));
    }

    fn finish(mut self) -> DomainStats {
        let size = |(b, t): &mut (Col, Col)| {
            Some(Size {
                bytes: CountedDist::of(b)?,
                tokens: CountedDist::of(t)?,
            })
        };
        let prompt_by_turn = TURN_BUCKETS
            .iter()
            .zip(self.by_turn.iter_mut())
            .filter_map(|(&(from, to), s)| {
                Some(TurnBucket {
                    from,
                    to,
                    size: size(s)?,
                })
            })
            .collect();
        let mut systems: Vec<(usize, u64)> = self.systems.into_values().collect();
        // Most shared first, ties by size (equal entries print the same, so the order is
        // deterministic).
        systems.sort_by(|a, b| b.1.cmp(&a.1).then(b.0.cmp(&a.0)));
        let mut distinct_bytes: Col = systems.iter().map(|&(bytes, _)| bytes as f64).collect();
        DomainStats {
            trajectories: self.trajectories,
            rows: self.rows,
            client_turns: self.user_turns + self.tool_turns,
            user_turns: self.user_turns,
            tool_turns: self.tool_turns,
            assistant_turns: self.assistant_turns,
            turns_per_trajectory: CountedDist::of(&mut self.turns_per_traj),
            rows_per_trajectory: CountedDist::of(&mut self.rows_per_traj),
            prompt_by_turn,
            first_request: size(&mut self.first),
            final_context: size(&mut self.last),
            growth_per_turn_bytes: CountedDist::of(&mut self.growth),
            delays: Delays {
                count: self.delays.samples.len() as u64,
                missing: self.no_delay,
                seconds: CountedDist::of(&mut self.delays),
            },
            system_prompts: SystemPrompts {
                trajectories_with: systems.iter().map(|(_, n)| n).sum(),
                distinct: systems.len() as u64,
                distinct_bytes: CountedDist::of(&mut distinct_bytes),
                top: systems
                    .iter()
                    .take(5)
                    .map(|&(bytes, n)| SharedText {
                        bytes: bytes as u64,
                        tokens: tokenize_len(bytes) as u64,
                        trajectories: n,
                    })
                    .collect(),
            },
            tools: Tools {
                trajectories_with: self.tool_sets.values().sum(),
                distinct_sets: self.tool_sets.len() as u64,
                per_trajectory: CountedDist::of(&mut self.tools_count),
                bytes: CountedDist::of(&mut self.tools_bytes),
            },
            assistant: Assistant {
                with_tool_calls: self.with_tool_calls,
                with_parallel_tool_calls: self.with_parallel,
                with_reasoning: self.with_reasoning,
                with_intent_codes: self.with_intents,
                output_tokens: CountedDist::of(&mut self.output_tokens),
            },
        }
    }
}

/// Text bytes a row adds to every later request (see the module docs).
fn row_bytes(row: &Row) -> usize {
    row.content.as_ref().map_or(0, text_len)
        + row.reasoning_content.as_ref().map_or(0, String::len)
        + row.name.as_ref().map_or(0, String::len)
        + row
            .tool_calls
            .as_ref()
            .map_or(0, |c| c.iter().map(json_len).sum())
        + row.tool_results.as_ref().map_or(0, |r| {
            r.iter()
                .map(|t| t.tool_call_id.len() + t.content.as_ref().map_or(0, text_len))
                .sum()
        })
}

/// A string's bytes, anything else's compact JSON bytes.
fn text_len(v: &Value) -> usize {
    match v {
        Value::String(s) => s.len(),
        other => json_len(other),
    }
}

/// Compact JSON length, without building the string.
fn json_len(v: &Value) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0 += b.len();
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut c = Count(0);
    // Serializing a `Value` into a writer that never fails cannot fail.
    let _ = serde_json::to_writer(&mut c, v);
    c.0
}

/// Stand-in tokens of `bytes` bytes of text (`tokenize::count` without the text).
fn tokenize_len(bytes: usize) -> f64 {
    bytes.div_ceil(tokenize::BYTES_PER_TOKEN) as f64
}

impl DatasetStats {
    /// A human-readable report, one section per non-empty domain, then the total.
    pub fn render_text(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "dataset {}", self.path);
        let both = self.coding.trajectories > 0 && self.workflow.trajectories > 0;
        for (name, d) in [("coding", &self.coding), ("workflow", &self.workflow)] {
            if d.trajectories > 0 {
                render_domain(&mut out, name, d);
            }
        }
        if both || self.total.trajectories == 0 {
            render_domain(&mut out, "total", &self.total);
        }
        out
    }
}

/// One domain's section of the report.
fn render_domain(out: &mut String, name: &str, d: &DomainStats) {
    render_sizes(out, name, d);
    render_prompt_by_turn(out, d);
    render_delays(out, d);
    render_shared_context(out, d);
    render_assistant(out, d);
}

/// The domain's heading, its counts and its size distributions.
fn render_sizes(out: &mut String, name: &str, d: &DomainStats) {
    let _ = writeln!(out, "\n== {name} ==");
    let _ = writeln!(
        out,
        "trajectories {}   rows {}   client turns {} (user {}, tool {})   assistant turns {}",
        d.trajectories, d.rows, d.client_turns, d.user_turns, d.tool_turns, d.assistant_turns
    );
    line(
        out,
        "client turns/trajectory",
        d.turns_per_trajectory.as_ref(),
        1.0,
    );
    line(out, "rows/trajectory", d.rows_per_trajectory.as_ref(), 1.0);
    if let Some(s) = &d.first_request {
        line(out, "first request (tokens)", Some(&s.tokens), 1.0);
    }
    if let Some(s) = &d.final_context {
        line(out, "final context (tokens)", Some(&s.tokens), 1.0);
        line(out, "final context (KiB)", Some(&s.bytes), 1024.0);
    }
    line(
        out,
        "growth/client turn (bytes)",
        d.growth_per_turn_bytes.as_ref(),
        1.0,
    );
}

/// The table of request sizes by client turn, if there is one.
fn render_prompt_by_turn(out: &mut String, d: &DomainStats) {
    if !d.prompt_by_turn.is_empty() {
        let _ = writeln!(out, "request size by client turn (stand-in tokens):");
        let _ = writeln!(
            out,
            "  {:>9} {:>8} {:>9} {:>9} {:>9} {:>9}",
            "turn", "requests", "mean", "p50", "p90", "max"
        );
        for b in &d.prompt_by_turn {
            let range = match (b.from, b.to) {
                (f, t) if f == t => format!("{f}"),
                (f, u32::MAX) => format!("{f}+"),
                (f, t) => format!("{f}-{t}"),
            };
            let t = &b.size.tokens;
            let _ = writeln!(
                out,
                "  {range:>9} {:>8} {:>9.0} {:>9.0} {:>9.0} {:>9.0}",
                t.count, t.mean, t.p50, t.p90, t.max
            );
        }
    }
}

/// How many rows carry a delay, and the delays' distribution.
fn render_delays(out: &mut String, d: &DomainStats) {
    let _ = write!(
        out,
        "delays: {} rows with, {} without",
        d.delays.count, d.delays.missing
    );
    match &d.delays.seconds {
        Some(s) => {
            let _ = writeln!(
                out,
                "; sum {:.1} s, p50 {:.2} s, p90 {:.2} s, p99 {:.2} s, max {:.2} s",
                s.sum, s.p50, s.p90, s.p99, s.max
            );
        }
        None => out.push('\n'),
    }
}

/// The system prompts and tool definitions the trajectories share.
fn render_shared_context(out: &mut String, d: &DomainStats) {
    let sp = &d.system_prompts;
    let _ = write!(
        out,
        "system prompts: {} trajectories with one, {} distinct",
        sp.trajectories_with, sp.distinct
    );
    for t in &sp.top {
        let _ = write!(
            out,
            "; {} B / {} tok × {} traj",
            t.bytes, t.tokens, t.trajectories
        );
    }
    out.push('\n');
    let tl = &d.tools;
    let _ = write!(
        out,
        "tool definitions: {} trajectories with, {} distinct sets",
        tl.trajectories_with, tl.distinct_sets
    );
    if let (Some(n), Some(b)) = (&tl.per_trajectory, &tl.bytes) {
        let _ = write!(
            out,
            "; {:.0}-{:.0} tools ({:.0} B mean)",
            n.min, n.max, b.mean
        );
    }
    out.push('\n');
}

/// What the assistant rows carry, and their output sizes.
fn render_assistant(out: &mut String, d: &DomainStats) {
    let a = &d.assistant;
    let _ = writeln!(
        out,
        "assistant: {} with tool calls ({} parallel), {} with reasoning, {} with intent codes",
        a.with_tool_calls, a.with_parallel_tool_calls, a.with_reasoning, a.with_intent_codes
    );
    line(
        out,
        "assistant output (tokens)",
        a.output_tokens.as_ref(),
        1.0,
    );
}

fn line(out: &mut String, label: &str, d: Option<&CountedDist>, div: f64) {
    let Some(d) = d else { return };
    let _ = writeln!(
        out,
        "{label:<28} min {:>9.1}  p50 {:>9.1}  p90 {:>9.1}  p99 {:>9.1}  max {:>9.1}  mean {:>9.1}",
        d.min / div,
        d.p50 / div,
        d.p90 / div,
        d.p99 / div,
        d.max / div,
        d.mean / div
    );
}

/// Two datasets side by side (`tokentap dataset stats A --against B`): the shape of each, all
/// rows of each (coding and workflow together), in the stand-in tokens both are measured in.
pub fn render_comparison(a: &DatasetStats, b: &DatasetStats) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "A: {}\nB: {}", a.path, b.path);
    let _ = writeln!(out, "(stand-in tokens: 4 bytes a token; p50 / p90 / max)\n");
    let _ = writeln!(out, "{:<34} {:>28} {:>28}", "", "A", "B");
    for (name, f) in comparison_rows() {
        let _ = writeln!(out, "{name:<34} {:>28} {:>28}", f(&a.total), f(&b.total));
    }
    let _ = writeln!(out, "\nrequest size by client turn (stand-in tokens, p50):");
    let _ = writeln!(out, "  {:>9} {:>12} {:>12}", "turn", "A", "B");
    for &(from, to) in TURN_BUCKETS {
        let find = |d: &DomainStats| {
            d.prompt_by_turn
                .iter()
                .find(|x| x.from == from)
                .map_or("-".to_string(), |x| {
                    format!("{:.0} ({})", x.size.tokens.p50, x.size.tokens.count)
                })
        };
        let (x, y) = (find(&a.total), find(&b.total));
        if x == "-" && y == "-" {
            continue;
        }
        let range = match (from, to) {
            (f, t) if f == t => format!("{f}"),
            (f, u32::MAX) => format!("{f}+"),
            (f, t) => format!("{f}-{t}"),
        };
        let _ = writeln!(out, "  {range:>9} {x:>12} {y:>12}");
    }
    out
}

type Cell = fn(&DomainStats) -> String;

/// The comparison's rows: a name and how to show one dataset's value.
pub fn comparison_rows() -> Vec<(&'static str, Cell)> {
    fn d3(d: Option<&CountedDist>, div: f64) -> String {
        d.map_or("-".into(), |d| {
            format!(
                "{:.0} / {:.0} / {:.0}",
                d.p50 / div,
                d.p90 / div,
                d.max / div
            )
        })
    }
    fn s3(d: Option<&CountedDist>) -> String {
        d.map_or("-".into(), |d| {
            format!("{:.2} / {:.2} / {:.2}", d.p50, d.p90, d.max)
        })
    }
    fn pct(n: u64, of: u64) -> String {
        if of == 0 {
            "-".into()
        } else {
            format!("{:.0}%", 100.0 * n as f64 / of as f64)
        }
    }
    vec![
        ("trajectories", |d| d.trajectories.to_string()),
        ("client turns", |d| {
            format!(
                "{} (user {}, tool {})",
                d.client_turns, d.user_turns, d.tool_turns
            )
        }),
        ("client turns / trajectory", |d| {
            d3(d.turns_per_trajectory.as_ref(), 1.0)
        }),
        ("first request (tokens)", |d| {
            d3(d.first_request.as_ref().map(|s| &s.tokens), 1.0)
        }),
        ("final context (tokens)", |d| {
            d3(d.final_context.as_ref().map(|s| &s.tokens), 1.0)
        }),
        ("growth / client turn (tokens)", |d| {
            d3(
                d.growth_per_turn_bytes.as_ref(),
                tokenize::BYTES_PER_TOKEN as f64,
            )
        }),
        ("output / assistant turn (tokens)", |d| {
            d3(d.assistant.output_tokens.as_ref(), 1.0)
        }),
        ("assistant turns with tool calls", |d| {
            pct(d.assistant.with_tool_calls, d.assistant_turns)
        }),
        ("assistant turns with reasoning", |d| {
            pct(d.assistant.with_reasoning, d.assistant_turns)
        }),
        ("client turns with a delay", |d| {
            pct(d.delays.count, d.delays.count + d.delays.missing)
        }),
        ("delay (s)", |d| s3(d.delays.seconds.as_ref())),
        ("distinct system prompts", |d| {
            d.system_prompts.distinct.to_string()
        }),
        ("tools / trajectory", |d| {
            d3(d.tools.per_trajectory.as_ref(), 1.0)
        }),
    ]
}
