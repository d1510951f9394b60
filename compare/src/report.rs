//! The comparison itself: per metric, the distribution of client − wire over joined turns, the
//! client's claimed percentiles against the wire's, and a verdict per claim. [`Report`] is also
//! the `--json` schema (documented in `docs/compare.md`; `schema` names its version).
//!
//! Decisions:
//! - Only pairs where both sides saw a successful turn are compared; pairs where one side
//!   failed are counted (`status_differs`).
//! - Claims: the client's published percentiles when it publishes them (AIPerf's summary),
//!   otherwise recomputed from its per-turn values over the compared pairs. The wire's
//!   percentiles are always over the compared pairs: same turns, same definition.
//! - A claim passes when |client − wire| ≤ max(absolute tolerance, pct × |wire|): the absolute
//!   part covers the loopback hop and clock reads that every client pays on small values, the
//!   relative part scales with long turns. Defaults and their measured basis: `docs/compare.md`.
//! - Percentiles are numpy-`linear` ([`tokentap_core::stats`]), the method AIPerf uses too.

pub use crate::client::Verdict;
use crate::client::{ClientRun, Clock, Metric};
use crate::formats::Format;
use crate::join::{JoinConfig, JoinMethod, Joined, Pair};
use crate::wire::WireTurn;
use serde::Serialize;
use tokentap_core::stats::Samples;

/// JSON schema id, bumped on any incompatible change.
pub const SCHEMA: &str = "tokentap-compare/1";

/// The percentiles a claim is checked at.
pub const STATS: [(&str, f64); 3] = [("p50", 0.50), ("p90", 0.90), ("p99", 0.99)];

/// `--tolerance-*`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Tolerance {
    /// Absolute tolerance for time metrics, ms.
    pub ms: f64,
    /// Relative tolerance, percent of the wire's value.
    pub pct: f64,
    /// Absolute tolerance for output tokens.
    pub tokens: f64,
}

impl Default for Tolerance {
    fn default() -> Self {
        Tolerance {
            ms: 1.0,
            pct: 5.0,
            tokens: 0.0,
        }
    }
}

impl Tolerance {
    /// The largest |client − wire| that passes for a wire value `wire`.
    pub fn allowed(&self, m: Metric, wire: f64) -> f64 {
        let abs = match m {
            Metric::OutputTokens => self.tokens,
            _ => self.ms,
        };
        abs.max(self.pct / 100.0 * wire.abs())
    }
}

/// Order statistics of client − wire over the compared turns (and of the TTFT split).
pub use tokentap_core::stats::Dist;

/// The distribution of `s`, or `None` without samples.
fn dist_of(mut s: Samples) -> Option<Dist> {
    s.dist()
}

/// A claimed percentile against the wire's.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Claim {
    /// `p50`, `p90` or `p99`.
    pub stat: &'static str,
    /// The client's value.
    pub client: f64,
    /// The wire's, over the same turns.
    pub wire: f64,
    /// client − wire.
    pub diff: f64,
    /// The |diff| that passes.
    pub tolerance: f64,
    /// Its outcome.
    pub verdict: Verdict,
}

/// One metric's comparison.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MetricReport {
    /// The metric.
    pub metric: Metric,
    /// `ms` or `tokens`.
    pub unit: &'static str,
    /// Compared turns that have the metric on both sides.
    pub turns: usize,
    /// client − wire per turn; `None` without turns.
    pub diff: Option<Dist>,
    /// Turns whose own |client − wire| exceeds the tolerance.
    pub turns_beyond_tolerance: usize,
    /// `published` (read from the client's summary) or `recomputed` (from its per-turn values).
    pub claims_source: &'static str,
    /// One claim per percentile judged.
    pub claims: Vec<Claim>,
}

/// How the turns were joined.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Counts {
    /// Client turns read (aborted, never-sent turns excluded).
    pub client_turns: usize,
    /// Wire turns read (completion requests only).
    pub wire_turns: usize,
    /// Wire records that were not completion requests (ignored).
    pub wire_ignored: usize,
    /// Pairs joined.
    pub joined: usize,
    /// Joined by the server's response id.
    pub by_response_id: usize,
    /// Joined by a request id header.
    pub by_request_id: usize,
    /// Joined by the output's text.
    pub by_output_text: usize,
    /// Joined by session and turn order.
    pub by_session_order: usize,
    /// Joined by time.
    pub by_time: usize,
    /// Client turns joined to nothing.
    pub client_only: usize,
    /// Wire turns joined to nothing.
    pub wire_only: usize,
    /// Joined pairs where one side succeeded and the other did not.
    pub status_differs: usize,
    /// Joined pairs compared (both sides successful).
    pub compared: usize,
}

/// One metric of one side of a pair (`null` when not measured).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Side {
    /// The turn ended ok.
    pub ok: bool,
    /// Time to first token, ms.
    pub ttft_ms: Option<f64>,
    /// Inter-token latency, ms.
    pub itl_ms: Option<f64>,
    /// End to end, ms.
    pub e2e_ms: Option<f64>,
    /// Output tokens.
    pub output_tokens: Option<f64>,
    /// The MLPerf reference's TPOT.
    pub tpot_ms: Option<f64>,
    /// Mean gap between chunks after the first, ms.
    pub chunk_gap_ms: Option<f64>,
}

impl Side {
    fn of(ok: bool, v: &crate::client::Values) -> Side {
        Side {
            ok,
            ttft_ms: v.get(Metric::Ttft),
            itl_ms: v.get(Metric::Itl),
            e2e_ms: v.get(Metric::E2e),
            output_tokens: v.get(Metric::OutputTokens),
            tpot_ms: v.get(Metric::Tpot),
            chunk_gap_ms: v.get(Metric::ChunkGap),
        }
    }
}

/// A joined pair, for plots (client vs wire TTFT scatter) and for finding a turn in both files.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PairOut {
    /// Line (or list position) in the client file.
    pub client_at: usize,
    /// `file:line` of the proxy record.
    pub wire_at: String,
    /// How it was joined.
    pub join: JoinMethod,
    /// The session id, when known.
    pub session: Option<String>,
    /// The turn, when known.
    pub turn: Option<u32>,
    /// The request id, when known.
    pub request_id: Option<String>,
    /// Wire start − client start, ms, on the client's clock (`null` if the client has no start).
    pub start_offset_ms: Option<f64>,
    /// Which `--wire` path (proxy) the wire turn came from, and the replica that proxy sent it
    /// to (its record's `upstream`).
    pub wire_source: usize,
    /// The replica the proxy sent it to.
    pub replica: Option<String>,
    /// The server's response id the wire recorded.
    pub response_id: Option<String>,
    /// The client's side.
    pub client: Side,
    /// The wire's side.
    pub wire: Side,
    /// The wire's TTFT split by the engine's own timing (`--inject-metrics`): queue, engine,
    /// outside the engine as the proxy saw it.
    pub ttft_split: Option<tokentap_core::timeline::TtftSplit>,
    /// The client's TTFT less the engine's queue and first-token time: what the engine did
    /// not see, from the client's side (network both ways, the proxy, the client itself).
    pub client_outside_ms: Option<f64>,
}

/// One benchmark level's judgement (its turns' pairs, its published claims).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LevelReport {
    /// As the client names the level.
    pub name: String,
    /// The level's verdict.
    pub verdict: Verdict,
    /// The verdict in one line.
    pub headline: String,
    /// Why it is not PASS.
    pub reasons: Vec<String>,
    /// The level's join counts.
    pub counts: Counts,
    /// The level's metrics.
    pub metrics: Vec<MetricReport>,
}

/// The TTFT of the joined pairs split by the engine's own per-request timing (vLLM `metrics`,
/// recorded by `tokentap proxy --inject-metrics`), over the pairs that have it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TtftSplitReport {
    /// Pairs with the engine's timing.
    pub turns: usize,
    /// The engine's queue.
    pub queue_ms: Dist,
    /// Scheduling to the first token inside the engine.
    pub engine_ms: Dist,
    /// The wire's TTFT less both: the server's front end and the path to the proxy.
    pub wire_outside_ms: Dist,
    /// The client's TTFT less both (pairs where the client has a TTFT).
    pub client_outside_ms: Option<Dist>,
}

/// One `--wire` path (one proxy): its turns, how many were joined, and per replica.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WireSource {
    /// The path as given.
    pub path: String,
    /// Its turns.
    pub turns: usize,
    /// Its turns joined to a client turn.
    pub joined: usize,
    /// Turns per replica (the records' `upstream`; `?` when a record has none).
    pub replicas: std::collections::BTreeMap<String, usize>,
}

/// A client turn joined to no wire turn.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ClientOnly {
    /// Its line (or list position) in the client file.
    pub client_at: usize,
    /// Its session id, when known.
    pub session: Option<String>,
    /// Its turn, when known.
    pub turn: Option<u32>,
    /// Its request id, when known.
    pub request_id: Option<String>,
    /// It ended ok.
    pub ok: bool,
}

/// A wire turn joined to no client turn.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WireOnly {
    /// `file:line` of the proxy record.
    pub wire_at: String,
    /// Its session id.
    pub session: Option<String>,
    /// Its turn index in the session.
    pub turn_index: u32,
    /// Its request id, when recorded.
    pub request_id: Option<String>,
    /// It ended ok.
    pub ok: bool,
    /// Wall clock of the proxy's first request byte, ns since the epoch.
    pub start_wall_ns: u64,
}

/// The join settings, echoed in the report.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct JoinSettings {
    /// The headers whose value joins by request id.
    pub id_headers: Vec<String>,
    /// How far apart two start instants may be to join by time, ms.
    pub slack_ms: f64,
    /// How far a time join looks, ms.
    pub window_ms: f64,
}

/// The comparison (`--json`'s schema, docs/compare.md).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    /// [`SCHEMA`].
    pub schema: &'static str,
    /// The client file's format.
    pub format: Format,
    /// The client file.
    pub client_file: String,
    /// The proxies' records (`--wire`).
    pub wire: Vec<String>,
    /// Per `--wire` path: the records of several proxies are one wire view.
    pub wire_sources: Vec<WireSource>,
    /// The clock the client's start instants are on.
    pub clock: Clock,
    /// The tolerances.
    pub tolerance: Tolerance,
    /// The join's settings.
    pub join: JoinSettings,
    /// How the turns were joined.
    pub counts: Counts,
    /// Per metric: the differences and the claims.
    pub metrics: Vec<MetricReport>,
    /// TTFT split by the engine's own timing, when the wire recorded it.
    pub ttft_split: Option<TtftSplitReport>,
    /// One judgement per benchmark level of the client file (guidellm: one benchmark per
    /// concurrency or rate), each over its own turns and its own published percentiles; the
    /// file's verdict fails when a level's does. Empty for a file of one level.
    pub levels: Vec<LevelReport>,
    /// PASS when every judged claim passes (and, with `--require-all-joined`, every turn joined).
    pub verdict: Verdict,
    /// Why the verdict is not PASS.
    pub reasons: Vec<String>,
    /// The verdict in one line, as the terminal prints it: `FAIL: 1 check failed, 12 of 12
    /// claims within tolerance`.
    pub headline: String,
    /// The joined pairs.
    pub pairs: Vec<PairOut>,
    /// Client turns joined to nothing.
    pub client_only: Vec<ClientOnly>,
    /// Wire turns joined to nothing.
    pub wire_only: Vec<WireOnly>,
    /// Checks of what the client published (its summary against its own events, impossible
    /// values, reference counts and scores); a failed check fails the verdict.
    pub checks: Vec<crate::client::Check>,
    /// The client's totals over a session (an agent's usage and API time) against the wire's;
    /// a failed one fails the verdict.
    pub totals: Vec<crate::totals::TotalReport>,
    /// Facts worth telling the reader.
    pub notes: Vec<String>,
}

/// What [`build`] needs besides the data.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The client file's format.
    pub format: Format,
    /// The client file.
    pub client_file: String,
    /// The proxies' records.
    pub wire: Vec<String>,
    /// The tolerances.
    pub tolerance: Tolerance,
    /// The join's settings.
    pub join: JoinConfig,
    /// Fail when a turn is left unjoined.
    pub require_all_joined: bool,
}

/// Per metric: the (client, wire, tracked) values of the pairs compared on it.
type Values = [Vec<(f64, f64, bool)>; 6];

/// Builds the report from a client run, the wire and their join, in its steps: the pairs and
/// their values, each metric's claims against the wire, the checks, the verdict, what was not
/// joined, and where the wire came from.
pub fn build(
    client: &ClientRun,
    wire: &[WireTurn],
    wire_ignored: usize,
    joined: &Joined,
    s: &Settings,
) -> Report {
    let mut counts = Counts {
        client_turns: client.turns.len(),
        wire_turns: wire.len(),
        wire_ignored,
        joined: joined.pairs.len(),
        client_only: joined.client_only.len(),
        wire_only: joined.wire_only.len(),
        ..Counts::default()
    };
    let (pairs, values) = compare_pairs(client, wire, joined, &mut counts);
    let mut reasons = Vec::new();
    let mut judged = 0;
    let metrics: Vec<MetricReport> = Metric::ALL
        .into_iter()
        .map(|m| judge_metric(m, &values[m.idx()], client, s, &mut reasons, &mut judged))
        .collect();
    let totals = crate::totals::judge(
        &client.totals,
        wire,
        &|w| s.tolerance.allowed(Metric::E2e, w),
        s.tolerance.tokens,
    );
    judged += totals
        .iter()
        .filter(|t| t.verdict != Verdict::NoData)
        .count();
    reasons.extend(totals.iter().filter_map(crate::totals::TotalReport::reason));
    let mut checks = client.checks.clone();
    checks.extend(ttft_check(&values[Metric::Ttft.idx()]));
    for c in checks.iter().filter(|c| c.verdict == Verdict::Fail) {
        reasons.push(format!("{}: {}", c.name, c.detail));
    }
    if s.require_all_joined && (counts.client_only > 0 || counts.wire_only > 0) {
        reasons.push(format!(
            "--require-all-joined: {} client turns and {} wire turns are not joined",
            counts.client_only, counts.wire_only
        ));
    }
    let levels = level_reports(client, wire, joined, s);
    for l in levels.iter().filter(|l| l.verdict == Verdict::Fail) {
        reasons.push(format!("level {}: {}", l.name, l.headline));
    }
    let verdict = if !reasons.is_empty() {
        Verdict::Fail
    } else if judged == 0 {
        reasons.push("no claim could be checked: no joined turn has a value on both sides".into());
        Verdict::NoData
    } else {
        Verdict::Pass
    };
    let headline = headline(
        verdict,
        &metrics,
        &totals,
        &checks,
        s.require_all_joined && (counts.client_only > 0 || counts.wire_only > 0),
    );
    let (client_only, wire_only) = unjoined(client, wire, joined, s);
    let mut notes = client.notes.clone();
    notes.extend(joined.notes.iter().cloned());
    if let Some(p) = &client.published {
        notes.push(format!("published claims read from {}", p.source));
    }
    Report {
        schema: SCHEMA,
        format: s.format,
        client_file: s.client_file.clone(),
        wire: s.wire.clone(),
        wire_sources: wire_sources(wire, joined, s),
        clock: client.clock,
        tolerance: s.tolerance,
        join: JoinSettings {
            id_headers: s.join.id_headers.clone(),
            slack_ms: s.join.slack_ns as f64 / 1e6,
            window_ms: s.join.window_ns as f64 / 1e6,
        },
        counts,
        metrics,
        ttft_split: split_report(&pairs),
        levels,
        verdict,
        reasons,
        headline,
        pairs,
        client_only,
        wire_only,
        checks,
        totals,
        notes,
    }
}

/// Each level of the client file judged on its own: its turns, the pairs of those turns, its
/// published claims.
fn level_reports(
    client: &ClientRun,
    wire: &[WireTurn],
    joined: &Joined,
    s: &Settings,
) -> Vec<LevelReport> {
    client
        .levels
        .iter()
        .map(|level| {
            let r = level.turns.clone();
            let sub = ClientRun {
                clock: client.clock,
                turns: client.turns[r.clone()].to_vec(),
                published: level.published.clone(),
                notes: Vec::new(),
                checks: Vec::new(),
                levels: Vec::new(),
                relative_starts: false,
                totals: Vec::new(),
            };
            let sub_joined = Joined {
                pairs: joined
                    .pairs
                    .iter()
                    .filter(|p| r.contains(&p.client))
                    .map(|p| Pair {
                        client: p.client - r.start,
                        ..*p
                    })
                    .collect(),
                client_only: joined
                    .client_only
                    .iter()
                    .filter(|c| r.contains(c))
                    .map(|c| c - r.start)
                    .collect(),
                wire_only: Vec::new(),
                notes: Vec::new(),
            };
            let rep = build(&sub, wire, 0, &sub_joined, s);
            LevelReport {
                name: level.name.clone(),
                verdict: rep.verdict,
                headline: rep.headline,
                reasons: rep.reasons,
                counts: rep.counts,
                metrics: rep.metrics,
            }
        })
        .collect()
}

/// The pairs' TTFT splits as distributions, when any pair has one.
fn split_report(pairs: &[PairOut]) -> Option<TtftSplitReport> {
    let with: Vec<(&PairOut, tokentap_core::timeline::TtftSplit)> = pairs
        .iter()
        .filter_map(|p| p.ttft_split.map(|sp| (p, sp)))
        .collect();
    if with.is_empty() {
        return None;
    }
    let dist = |xs: Vec<f64>| dist_of(xs.into_iter().collect());
    Some(TtftSplitReport {
        turns: with.len(),
        queue_ms: dist(with.iter().map(|(_, s)| s.queue_ms).collect())?,
        engine_ms: dist(with.iter().map(|(_, s)| s.engine_ms).collect())?,
        wire_outside_ms: dist(with.iter().map(|(_, s)| s.outside_ms).collect())?,
        client_outside_ms: dist(
            with.iter()
                .filter_map(|(p, _)| p.client_outside_ms)
                .collect(),
        ),
    })
}

/// The verdict and what decided it, in one line: the failed checks, the claims within
/// tolerance, the unjoined turns `--require-all-joined` refuses — each said only when it counts.
fn headline(
    verdict: Verdict,
    metrics: &[MetricReport],
    totals: &[crate::totals::TotalReport],
    checks: &[crate::client::Check],
    unjoined_refused: bool,
) -> String {
    let total: usize = metrics.iter().map(|m| m.claims.len()).sum::<usize>() + totals.len();
    let within: usize = metrics
        .iter()
        .flat_map(|m| &m.claims)
        .filter(|c| c.verdict != Verdict::Fail)
        .count()
        + totals.iter().filter(|t| t.verdict != Verdict::Fail).count();
    let failed_checks = checks.iter().filter(|c| c.verdict == Verdict::Fail).count();
    let mut parts = Vec::new();
    if failed_checks > 0 {
        parts.push(format!(
            "{failed_checks} check{} failed",
            if failed_checks == 1 { "" } else { "s" }
        ));
    }
    if unjoined_refused {
        parts.push("not every turn joined".to_string());
    }
    parts.push(format!("{within} of {total} claims within tolerance"));
    format!("{}: {}", verdict.as_str(), parts.join(", "))
}

/// Every joined pair as the report shows it, counted by join method and status, and the values
/// of the pairs that both sides saw succeed.
fn compare_pairs(
    client: &ClientRun,
    wire: &[WireTurn],
    joined: &Joined,
    counts: &mut Counts,
) -> (Vec<PairOut>, Values) {
    let mut pairs = Vec::with_capacity(joined.pairs.len());
    let mut values: Values = Default::default();
    for p in &joined.pairs {
        match p.how {
            JoinMethod::ResponseId => counts.by_response_id += 1,
            JoinMethod::RequestId => counts.by_request_id += 1,
            JoinMethod::OutputText => counts.by_output_text += 1,
            JoinMethod::SessionOrder => counts.by_session_order += 1,
            JoinMethod::Time => counts.by_time += 1,
        }
        let c = &client.turns[p.client];
        let w = &wire[p.wire];
        let wv = w.values();
        if c.ok != w.ok() {
            counts.status_differs += 1;
        } else if c.ok {
            counts.compared += 1;
            for m in Metric::ALL {
                if let (Some(a), Some(b)) = (c.values.get(m), wv.get(m)) {
                    values[m.idx()].push((a, b, c.tracked));
                }
            }
        }
        pairs.push(PairOut {
            client_at: c.at,
            wire_at: w.at.clone(),
            join: p.how,
            session: c.session.clone(),
            turn: c.turn,
            request_id: c.request_id.clone(),
            start_offset_ms: c
                .start_ns
                .map(|cs| (w.start_on(client.clock) as f64 - cs as f64) / 1e6),
            wire_source: w.source,
            replica: w.record.upstream.clone(),
            response_id: w.record.measured.response_id.clone(),
            client: Side::of(c.ok, &c.values),
            wire: Side::of(w.ok(), &wv),
            ttft_split: w.record.measured.ttft_split,
            client_outside_ms: w.record.measured.ttft_split.and_then(|sp| {
                c.values
                    .get(Metric::Ttft)
                    .map(|t| t - sp.queue_ms - sp.engine_ms)
            }),
        });
    }
    (pairs, values)
}

/// One metric: the per-turn differences, and each claim (published, or recomputed from the
/// client's turns) against the wire's value of the same statistic. A claim beyond the
/// tolerance adds its reason; every claim judged counts in `judged`.
fn judge_metric(
    m: Metric,
    vals: &[(f64, f64, bool)],
    client: &ClientRun,
    s: &Settings,
    reasons: &mut Vec<String>,
    judged: &mut usize,
) -> MetricReport {
    let diff = dist_of(vals.iter().map(|(a, b, _)| a - b).collect());
    let beyond = vals
        .iter()
        .filter(|(a, b, _)| (a - b).abs() > s.tolerance.allowed(m, *b))
        .count();
    let pubd = client.published.as_ref();
    let published = pubd.and_then(|p| p.get(m));
    // A published claim is judged against the wire over the population the client
    // published (its performance window), with its percentile method.
    let tracked_only = published.is_some() && pubd.is_some_and(|p| p.tracked_only);
    let lower = published.is_some() && pubd.is_some_and(|p| p.lower);
    let nearest = published.is_some() && pubd.is_some_and(|p| p.nearest_rank);
    let in_pop = |t: &bool| !tracked_only || *t;
    let mut wire_s: Samples = vals.iter().filter(|v| in_pop(&v.2)).map(|v| v.1).collect();
    let mut client_s: Samples = vals.iter().map(|v| v.0).collect();
    let claims_source = if published.is_some() {
        "published"
    } else {
        "recomputed"
    };
    let mut claims = Vec::new();
    for (i, (stat, q)) in STATS.iter().enumerate() {
        let claimed = match published {
            Some(row) => row[i],
            None => client_s.quantile(*q),
        };
        let wire_q = if lower {
            wire_s.quantile_lower(*q)
        } else if nearest {
            wire_s.quantile_nearest_rank(*q)
        } else {
            wire_s.quantile(*q)
        };
        let (Some(cv), Some(wv)) = (claimed, wire_q) else {
            continue;
        };
        let tol = s.tolerance.allowed(m, wv);
        let d = cv - wv;
        let verdict = if d.abs() <= tol {
            Verdict::Pass
        } else {
            Verdict::Fail
        };
        *judged += 1;
        if verdict == Verdict::Fail {
            reasons.push(format!(
                "{} {stat}: client {} vs wire {} ({:+.3} {}, tolerance ±{:.3})",
                m.label(),
                fmt_num(cv),
                fmt_num(wv),
                d,
                m.unit(),
                tol
            ));
        }
        claims.push(Claim {
            stat,
            client: cv,
            wire: wv,
            diff: d,
            tolerance: tol,
            verdict,
        });
    }
    MetricReport {
        metric: m,
        unit: m.unit(),
        turns: vals.len(),
        diff,
        turns_beyond_tolerance: beyond,
        claims_source,
        claims,
    }
}

/// The impossible value only the wire can show: a client that saw its first token before the
/// proxy forwarded it started its clock late. `None` without a compared TTFT.
fn ttft_check(ttft: &[(f64, f64, bool)]) -> Option<crate::client::Check> {
    if ttft.is_empty() {
        return None;
    }
    let below: Vec<f64> = ttft
        .iter()
        .map(|(a, b, _)| a - b)
        .filter(|d| *d < 0.0)
        .collect();
    Some(crate::client::Check {
        name: "ttft never shorter than the wire's".into(),
        verdict: if below.is_empty() {
            Verdict::Pass
        } else {
            Verdict::Fail
        },
        detail: if below.is_empty() {
            format!(
                "every one of {} joined turns saw its first token after the proxy forwarded it",
                ttft.len()
            )
        } else {
            format!(
                "impossible: {} of {} joined turns claim a TTFT shorter than the wire's (worst {:.3} ms): the client's clock started after its request left, or it stamped before the bytes arrived",
                below.len(),
                ttft.len(),
                below.iter().cloned().fold(0.0, f64::min)
            )
        },
    })
}

/// The turns of either side that found no partner.
fn unjoined(
    client: &ClientRun,
    wire: &[WireTurn],
    joined: &Joined,
    s: &Settings,
) -> (Vec<ClientOnly>, Vec<WireOnly>) {
    let client_only = joined
        .client_only
        .iter()
        .map(|&c| {
            let t = &client.turns[c];
            ClientOnly {
                client_at: t.at,
                session: t.session.clone(),
                turn: t.turn,
                request_id: t.request_id.clone(),
                ok: t.ok,
            }
        })
        .collect();
    let wire_only = joined
        .wire_only
        .iter()
        .map(|&w| {
            let r = &wire[w];
            WireOnly {
                wire_at: r.at.clone(),
                session: r.record.conversation_id.clone(),
                turn_index: r.record.turn_index,
                request_id: s
                    .join
                    .id_headers
                    .iter()
                    .find_map(|h| r.header(h).map(String::from)),
                ok: r.ok(),
                start_wall_ns: r.start_on(Clock::Wall),
            }
        })
        .collect();
    (client_only, wire_only)
}

/// Each `--wire` file: its turns, how many joined, and the replicas they went to.
fn wire_sources(wire: &[WireTurn], joined: &Joined, s: &Settings) -> Vec<WireSource> {
    let mut sources: Vec<WireSource> = s
        .wire
        .iter()
        .map(|p| WireSource {
            path: p.clone(),
            turns: 0,
            joined: 0,
            replicas: Default::default(),
        })
        .collect();
    for w in wire {
        if let Some(src) = sources.get_mut(w.source) {
            src.turns += 1;
            *src.replicas
                .entry(w.record.upstream.clone().unwrap_or_else(|| "?".into()))
                .or_default() += 1;
        }
    }
    for p in &joined.pairs {
        if let Some(src) = sources.get_mut(wire[p.wire].source) {
            src.joined += 1;
        }
    }
    sources
}

/// A number with 3 decimals, trailing zeros kept short for integers.
pub fn fmt_num(x: f64) -> String {
    if x.fract() == 0.0 && x.abs() < 1e15 {
        format!("{x:.0}")
    } else {
        format!("{x:.3}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::{ClientTurn, Published};
    use crate::join::Pair;
    use tokentap_core::clock::Anchor;
    use tokentap_core::record::{Origin, TurnRecord};

    fn wire_turn(ttft_ms: f64) -> WireTurn {
        let mut r = TurnRecord::new(
            Origin::Proxy,
            Anchor {
                wall_ns: 5,
                mono_ns: 5,
            },
        );
        r.measured.ttft_ns = Some((ttft_ms * 1e6) as u64);
        WireTurn::new("w:1".into(), 0, r)
    }

    fn client_turn(at: usize, ttft_ms: f64) -> ClientTurn {
        let mut t = ClientTurn::new(at);
        t.values.set(Metric::Ttft, Some(ttft_ms));
        t
    }

    fn settings() -> Settings {
        Settings {
            format: Format::Tokentap,
            client_file: "c".into(),
            wire: vec!["w".into()],
            tolerance: Tolerance::default(),
            join: JoinConfig::default(),
            require_all_joined: false,
        }
    }

    /// A client run of `turns` on `clock`, nothing published, no check.
    fn client_run(clock: Clock, turns: Vec<ClientTurn>) -> ClientRun {
        ClientRun {
            clock,
            turns,
            published: None,
            notes: vec![],
            checks: vec![],
            levels: Vec::new(),
            relative_starts: false,
            totals: Vec::new(),
        }
    }

    /// Client turn i joined to wire turn i, for `n` turns.
    fn one_to_one(n: usize, how: JoinMethod) -> Joined {
        Joined {
            pairs: (0..n)
                .map(|i| Pair {
                    client: i,
                    wire: i,
                    how,
                })
                .collect(),
            ..Joined::default()
        }
    }

    #[test]
    fn verdicts_use_the_larger_of_absolute_and_relative_tolerance() {
        // Wire TTFT 10..=109 ms; the client adds 0.5 ms everywhere, and 30 ms to the slowest
        // two turns (a stall the client saw that the wire did not).
        let wire: Vec<WireTurn> = (0..100).map(|i| wire_turn(10.0 + i as f64)).collect();
        let turns: Vec<ClientTurn> = (0..100)
            .map(|i| client_turn(i + 1, 10.5 + i as f64 + if i >= 98 { 30.0 } else { 0.0 }))
            .collect();
        let client = client_run(Clock::Mono, turns);
        let joined = one_to_one(100, JoinMethod::SessionOrder);
        let r = build(&client, &wire, 0, &joined, &settings());
        let ttft = &r.metrics[0];
        assert_eq!(ttft.turns, 100);
        assert_eq!(
            ttft.turns_beyond_tolerance, 2,
            "30 ms on a ~108 ms turn exceeds 5 %"
        );
        let d = ttft.diff.unwrap();
        assert_eq!(d.p50, 0.5);
        assert_eq!(d.max, 30.5);
        assert_eq!(
            ttft.claims[0].verdict,
            Verdict::Pass,
            "{:?}",
            ttft.claims[0]
        );
        // p99: client ≈ 138.5 ms vs wire ≈ 108.0 ms, 5.4 ms allowed.
        assert_eq!(
            ttft.claims[2].verdict,
            Verdict::Fail,
            "{:?}",
            ttft.claims[2]
        );
        assert_eq!(r.verdict, Verdict::Fail);
        assert!(r.reasons[0].starts_with("TTFT p99"), "{:?}", r.reasons);
        // The other metrics are not claimed: no verdict, no failure.
        assert!(r.metrics[1].claims.is_empty());
        let text = r.render_text();
        assert!(
            text.contains("verdict: FAIL: 2 of 3 claims within tolerance\n"),
            "{text}"
        );
    }

    /// Every claim within tolerance but a check failed: the line says the check failed, the
    /// reason names it with its number, and `compare.json` carries the same line.
    #[test]
    fn a_check_alone_fails_the_verdict_and_says_so() {
        let wire: Vec<WireTurn> = (0..20).map(|i| wire_turn(10.0 + i as f64)).collect();
        let turns: Vec<ClientTurn> = (0..20)
            .map(|i| client_turn(i + 1, 10.2 + i as f64))
            .collect();
        let mut client = client_run(Clock::Mono, turns);
        client.checks = vec![crate::client::Check {
            name: "output tokens never negative".into(),
            verdict: Verdict::Fail,
            detail: "1 turn reports -3 tokens".into(),
        }];
        let joined = one_to_one(20, JoinMethod::ResponseId);
        let r = build(&client, &wire, 0, &joined, &settings());
        assert_eq!(r.verdict, Verdict::Fail);
        assert_eq!(
            r.headline,
            "FAIL: 1 check failed, 3 of 3 claims within tolerance"
        );
        assert_eq!(
            r.reasons,
            ["output tokens never negative: 1 turn reports -3 tokens"]
        );
        let text = r.render_text();
        assert!(
            text.contains(
                "verdict: FAIL: 1 check failed, 3 of 3 claims within tolerance\n  - output tokens never negative: 1 turn reports -3 tokens\n"
            ),
            "{text}"
        );
        assert!(
            text.contains("(20 by response id, 0 by request id"),
            "{text}"
        );
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(json["headline"], r.headline.as_str());
        assert_eq!(json["counts"]["by_response_id"], 20);
    }

    #[test]
    fn published_claims_replace_recomputed_ones_and_status_mismatch_is_not_compared() {
        let wire = vec![wire_turn(10.0), wire_turn(20.0)];
        let mut failed = client_turn(2, 99.0);
        failed.ok = false;
        let mut client = client_run(Clock::Wall, vec![client_turn(1, 10.2), failed]);
        client.published = Some(Published {
            source: "s.json".into(),
            stats: [
                Some([Some(10.3), Some(10.4), None]),
                None,
                None,
                None,
                None,
                None,
            ],
            ..Published::default()
        });
        let joined = Joined {
            pairs: vec![
                Pair {
                    client: 0,
                    wire: 0,
                    how: JoinMethod::RequestId,
                },
                Pair {
                    client: 1,
                    wire: 1,
                    how: JoinMethod::RequestId,
                },
            ],
            ..Joined::default()
        };
        let r = build(&client, &wire, 0, &joined, &settings());
        assert_eq!(r.counts.status_differs, 1);
        assert_eq!(r.counts.compared, 1);
        let ttft = &r.metrics[0];
        assert_eq!(ttft.claims_source, "published");
        assert_eq!(ttft.claims.len(), 2, "p99 was not published");
        assert!((ttft.claims[0].client - 10.3).abs() < 1e-12);
        assert_eq!(r.verdict, Verdict::Pass);
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(json["schema"], SCHEMA);
        assert_eq!(json["pairs"][0]["client"]["ttft_ms"], 10.2);
        assert_eq!(json["pairs"][0]["wire"]["ttft_ms"], 10.0);
        assert_eq!(json["pairs"][0]["join"], "request_id");
    }

    /// The run's report reads `compare.json` through the run directory's own type: the same
    /// schema id, and every field it shows reads back as compare wrote it.
    #[test]
    fn the_run_directory_reads_the_report_back() {
        use tokentap_run::compare::CompareFile;
        assert_eq!(SCHEMA, tokentap_run::compare::SCHEMA);
        let wire = vec![wire_turn(10.0), wire_turn(20.0)];
        let client = client_run(
            Clock::Wall,
            vec![client_turn(1, 10.2), client_turn(2, 25.0)],
        );
        let joined = Joined {
            pairs: (0..2)
                .map(|i| Pair {
                    client: i,
                    wire: i,
                    how: JoinMethod::RequestId,
                })
                .collect(),
            ..Joined::default()
        };
        let r = build(&client, &wire, 0, &joined, &settings());
        let back: CompareFile = serde_json::from_value(serde_json::to_value(&r).unwrap()).unwrap();
        assert_eq!(back.headline.as_deref(), Some(r.headline.as_str()));
        assert_eq!(
            back.verdict.as_deref(),
            serde_json::to_value(r.verdict).unwrap().as_str()
        );
        assert_eq!(back.reasons, r.reasons);
        assert_eq!(back.metrics.len(), r.metrics.len());
        for (b, m) in back.metrics.iter().zip(&r.metrics) {
            assert_eq!(
                serde_json::to_value(m.metric).unwrap().as_str(),
                Some(b.metric.as_str())
            );
            assert_eq!(b.unit, m.unit);
            assert_eq!(b.claims.len(), m.claims.len());
            for (bc, c) in b.claims.iter().zip(&m.claims) {
                assert_eq!(bc.stat, c.stat);
                assert_eq!((bc.client, bc.wire), (Some(c.client), Some(c.wire)));
                assert_eq!((bc.diff, bc.tolerance), (Some(c.diff), Some(c.tolerance)));
            }
        }
        assert_eq!(back.pairs.len(), r.pairs.len());
        for (b, p) in back.pairs.iter().zip(&r.pairs) {
            assert_eq!(
                (b.client.ttft_ms, b.wire.ttft_ms),
                (p.client.ttft_ms, p.wire.ttft_ms)
            );
            assert_eq!(b.ttft_split, p.ttft_split);
        }
    }
}
