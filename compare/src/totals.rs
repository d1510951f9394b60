//! A client's totals over a session (an agent's own usage and API time) against the same totals
//! of the wire's records of that session: tokens must be equal, a time passes within the time
//! tolerance. The wire's model time is the union of the session's requests' spans (at least one
//! in flight), as `tokentap report RECORDS_DIR` computes it.

use crate::client::{TotalClaim, Verdict, WireTotal};
use crate::wire::WireTurn;
use serde::Serialize;

/// One judged total.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TotalReport {
    /// The client's field(s).
    pub name: String,
    /// The session, or every record.
    pub session: Option<String>,
    /// What of the wire it is held against.
    pub of: WireTotal,
    /// `ms` or `tokens`.
    pub unit: &'static str,
    /// The client's value.
    pub client: f64,
    /// `None` when the wire has no record of the session.
    pub wire: Option<f64>,
    /// The wire's records summed.
    pub wire_requests: usize,
    /// client − wire.
    pub diff: Option<f64>,
    /// The |diff| that passes.
    pub tolerance: f64,
    /// Its outcome.
    pub verdict: Verdict,
}

impl TotalReport {
    /// Why it fails the verdict, if it does.
    pub fn reason(&self) -> Option<String> {
        (self.verdict == Verdict::Fail).then(|| {
            format!(
                "{}: the client says {:.3} {}, the wire {} (client − wire {:+.3})",
                self.name,
                self.client,
                self.unit,
                self.wire.map_or("–".into(), |w| format!("{w:.3}")),
                self.diff.unwrap_or(0.0)
            )
        })
    }
}

/// Judges each claimed total against the wire: a time within `time_allowed(wire value)`, tokens
/// within `tokens_allowed`.
pub fn judge(
    claims: &[TotalClaim],
    wire: &[WireTurn],
    time_allowed: &dyn Fn(f64) -> f64,
    tokens_allowed: f64,
) -> Vec<TotalReport> {
    claims
        .iter()
        .map(|c| {
            let of: Vec<&WireTurn> = wire
                .iter()
                .filter(|w| {
                    c.session.is_none()
                        || w.record.conversation_id.as_deref() == c.session.as_deref()
                })
                .collect();
            let value = (!of.is_empty()).then(|| total(c.of, &of));
            let tolerance = match c.of {
                WireTotal::ModelTimeMs => time_allowed(value.unwrap_or(0.0)),
                _ => tokens_allowed,
            };
            let diff = value.map(|w| c.client - w);
            TotalReport {
                name: c.name.clone(),
                session: c.session.clone(),
                of: c.of,
                unit: c.of.unit(),
                client: c.client,
                wire: value,
                wire_requests: of.len(),
                diff,
                tolerance,
                verdict: match diff {
                    None => Verdict::NoData,
                    Some(d) if d.abs() <= tolerance + 1e-9 => Verdict::Pass,
                    Some(_) => Verdict::Fail,
                },
            }
        })
        .collect()
}

fn total(of: WireTotal, turns: &[&WireTurn]) -> f64 {
    let sum =
        |f: fn(&WireTurn) -> Option<u64>| turns.iter().filter_map(|w| f(w)).sum::<u64>() as f64;
    match of {
        WireTotal::PromptTokens => sum(|w| w.record.measured.prompt_tokens),
        WireTotal::CachedTokens => sum(|w| w.record.measured.cached_tokens),
        WireTotal::OutputTokens => sum(|w| w.record.measured.output_tokens),
        WireTotal::ModelTimeMs => {
            let spans: Vec<(u64, u64)> = turns
                .iter()
                .map(|w| {
                    let s = w.record.anchor.wall_of(w.record.start_mono_ns);
                    (s, s + w.record.measured.e2e_ns.unwrap_or(0))
                })
                .collect();
            let busy: u64 = tokentap_core::stats::merge_spans(spans)
                .iter()
                .map(|(a, b)| b - a)
                .sum();
            busy as f64 / 1e6
        }
    }
}

/// The terminal lines.
pub fn render(totals: &[TotalReport], o: &mut String) {
    if totals.is_empty() {
        return;
    }
    *o += &format!(
        "\n{:<60}{:>12}{:>12}{:>14}{:>11}  {:<8} {}\n",
        "the client's totals",
        "client",
        "wire",
        "client − wire",
        "tolerance",
        "verdict",
        "session (wire requests)"
    );
    for t in totals {
        let f = |v: Option<f64>| v.map_or("–".to_string(), |x| format!("{x:.3}"));
        *o += &format!(
            "{:<60}{:>12.3}{:>12}{:>14}{:>11.3}  {:<8} {} ({})\n",
            format!("{} ({})", t.name, t.unit),
            t.client,
            f(t.wire),
            t.diff.map_or("–".to_string(), |d| format!("{d:+.3}")),
            t.tolerance,
            t.verdict.as_str(),
            t.session.as_deref().unwrap_or("all"),
            t.wire_requests
        );
    }
}
