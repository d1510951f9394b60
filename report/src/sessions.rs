//! Where an agent's time goes: `tokentap report RECORDS_DIR` on a proxy's records directory
//! (`tokentap proxy --records DIR`, an agent in front of it). Per session, the time waiting on
//! the model — at least one of its requests in flight — beside the time between its turns, none in
//! flight: the agent's own tools, its thinking, a person. The same split as the proxy's live
//! `GET /sessions` (docs/usage.md#sessions), from the records after the fact.
//!
//! ```text
//!  records*.jsonl ─► per session: each request [start, start + e2e] (wall clock)
//!        └─► union of the intervals = model time; the gaps between them = between turns
//!              └─► SessionsReport ─┬─► html (a table, the split per session, a timeline)
//!                                  └─► markdown / JSON
//! ```

use crate::error::ReportError;
use crate::html::{CSS, SCRIPT};
use crate::svg::{esc, num, Span, Swimlane};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use tokentap_core::record::{Origin, Status, TurnRecord};

/// The name requests without a session are grouped under (each one is its own span of model
/// time; their gaps are nobody's).
pub const NO_SESSION: &str = "(no session)";

/// A proxy's records directory: no `summary.json` (a replay run's), at least one
/// `records*.jsonl`.
pub fn is_records_dir(dir: &Path) -> bool {
    dir.is_dir()
        && !dir.join(tokentap_run::files::SUMMARY).exists()
        && tokentap_core::record::files_in(dir).is_ok_and(|f| !f.is_empty())
}

/// One session's time and tokens.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct SessionTime {
    /// The session's id.
    pub session: String,
    /// The routes its requests took (`/v1/messages`, …).
    pub routes: Vec<String>,
    /// The models its requests named.
    pub models: Vec<String>,
    /// Its requests.
    pub requests: u64,
    /// Requests that did not end `ok`.
    pub not_ok: u64,
    /// Its first request's start, wall clock ns.
    pub first_wall_ns: u64,
    /// From its first request's start to its last request's end.
    pub span_s: f64,
    /// At least one request in flight.
    pub model_s: f64,
    /// None in flight, between its first and last request: the agent's own time. Not computed
    /// for requests without a session.
    pub between_turns_s: Option<f64>,
    /// `between_turns_s / span_s`.
    pub agent_share: Option<f64>,
    /// Σ prompt tokens.
    pub prompt_tokens: u64,
    /// Σ cached prompt tokens.
    pub cached_tokens: u64,
    /// Σ output tokens.
    pub output_tokens: u64,
    /// Median time to first token of its streamed requests, ms.
    pub ttft_p50_ms: Option<f64>,
    /// The model's time as merged intervals (wall ns), for the timeline.
    #[serde(skip)]
    pub model_spans: Vec<(u64, u64)>,
}

/// Every session of a records directory, in first-request order.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct SessionsReport {
    /// The proxy's records directory.
    pub records_dir: PathBuf,
    /// Record files read.
    pub files: usize,
    /// Records read.
    pub records: u64,
    /// Per session, first request first.
    pub sessions: Vec<SessionTime>,
    /// Sums over the sessions (the requests without a session included in model time).
    pub model_s: f64,
    /// Σ time between turns (the agent's own), s.
    pub between_turns_s: f64,
}

/// One request: wall start and end (ns).
struct Req {
    start: u64,
    end: u64,
}

#[derive(Default)]
struct Acc {
    reqs: Vec<Req>,
    routes: BTreeSet<String>,
    models: BTreeSet<String>,
    not_ok: u64,
    tokens: [u64; 3],
    ttfts: Vec<f64>,
}

impl SessionsReport {
    /// Reads the proxy records of `dir` (records of a replay are refused: its run directory has
    /// its own report).
    pub fn load(dir: &Path) -> Result<SessionsReport, ReportError> {
        let files = tokentap_core::record::files_in(dir).map_err(|source| ReportError::Read {
            path: dir.to_owned(),
            source,
        })?;
        let mut by: BTreeMap<String, Acc> = BTreeMap::new();
        let mut records = 0u64;
        for f in &files {
            read(f, |r| {
                records += 1;
                let id = r
                    .conversation_id
                    .clone()
                    .unwrap_or_else(|| NO_SESSION.into());
                add(by.entry(id).or_default(), r);
            })?;
        }
        let mut sessions: Vec<SessionTime> = by.into_iter().map(|(id, a)| finish(id, a)).collect();
        sessions.sort_by(|a, b| (a.first_wall_ns, &a.session).cmp(&(b.first_wall_ns, &b.session)));
        Ok(SessionsReport {
            records_dir: dir.to_owned(),
            files: files.len(),
            records,
            model_s: sessions.iter().map(|s| s.model_s).sum(),
            between_turns_s: sessions.iter().filter_map(|s| s.between_turns_s).sum(),
            sessions,
        })
    }

    /// Markdown: the totals, then a line per session.
    pub fn markdown(&self) -> String {
        let mut o = String::new();
        let _ = writeln!(
            o,
            "# Where the agents' time goes\n\n`{}`: {} records, {} sessions; waiting on the model {} s, between turns (the agents' own time) {} s\n",
            self.records_dir.display(),
            self.records,
            self.sessions.len(),
            num(self.model_s),
            num(self.between_turns_s)
        );
        o.push_str("| session | API | requests | span s | model s | between turns s | agent's share | prompt / cached / output tokens | TTFT p50 ms |\n|---|---|---:|---:|---:|---:|---:|---:|---:|\n");
        for s in &self.sessions {
            let _ = writeln!(
                o,
                "| {} | {} | {}{} | {} | {} | {} | {} | {} / {} / {} | {} |",
                s.session.replace('|', "\\|"),
                s.routes.join(" "),
                s.requests,
                if s.not_ok > 0 {
                    format!(" ({} not ok)", s.not_ok)
                } else {
                    String::new()
                },
                num(s.span_s),
                num(s.model_s),
                s.between_turns_s.map_or("–".into(), num),
                s.agent_share
                    .map_or("–".into(), |x| format!("{:.0} %", x * 100.0)),
                s.prompt_tokens,
                s.cached_tokens,
                s.output_tokens,
                s.ttft_p50_ms.map_or("–".into(), num)
            );
        }
        o
    }

    /// One self-contained page: the table, the split per session, the timeline.
    pub fn html(&self) -> String {
        let mut o = String::with_capacity(64 * 1024);
        let _ = write!(
            o,
            r#"<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width"><title>tokentap sessions (script did not run)</title><style>{CSS}</style></head><body data-verdict="sessions"><h1>Where the agents' time goes</h1><div class="muted">{} · {} records · {} sessions · waiting on the model <b>{} s</b> · between turns, the agents' own time <b>{} s</b></div>"#,
            esc(&self.records_dir.display().to_string()),
            self.records,
            self.sessions.len(),
            num(self.model_s),
            num(self.between_turns_s)
        );
        o.push_str(r#"<table class="summary"><tr><th>session</th><th>API</th><th>requests</th><th>span s</th><th>model s</th><th>between turns s</th><th>agent's share</th><th>prompt / cached / output tokens</th><th>TTFT p50 ms</th></tr>"#);
        for s in &self.sessions {
            let _ = write!(
                o,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{} / {} / {}</td><td>{}</td></tr>",
                esc(&s.session),
                esc(&s.routes.join(" ")),
                s.requests,
                num(s.span_s),
                num(s.model_s),
                s.between_turns_s.map_or("–".into(), num),
                s.agent_share.map_or("–".into(), |x| format!("{:.0} %", x * 100.0)),
                s.prompt_tokens,
                s.cached_tokens,
                s.output_tokens,
                s.ttft_p50_ms.map_or("–".into(), num)
            );
        }
        o.push_str("</table>");
        o.push_str(&self.timeline());
        let _ = write!(o, "<script>{SCRIPT}</script></body></html>");
        o
    }

    /// A lane per session (the first 200): its requests (waiting on the model) and the gaps
    /// between them (the agent's own time).
    fn timeline(&self) -> String {
        let t0 = self
            .sessions
            .iter()
            .map(|s| s.first_wall_ns)
            .min()
            .unwrap_or(0);
        let mut spans = Vec::new();
        let shown: Vec<&SessionTime> = self.sessions.iter().take(200).collect();
        let sec = |ns: u64| ns.saturating_sub(t0) as f64 / 1e9;
        for (lane, s) in shown.iter().enumerate() {
            let lane = lane as u32;
            let start = sec(s.first_wall_ns);
            spans.push(Span {
                lane,
                t0: start,
                t1: start + s.span_s,
                color: AGENT,
                tip: format!(
                    "{}: between turns {} s of {} s",
                    s.session,
                    s.between_turns_s.map_or("–".into(), num),
                    num(s.span_s)
                ),
            });
            for &(a, b) in &s.model_spans {
                spans.push(Span {
                    lane,
                    t0: sec(a),
                    t1: sec(b),
                    color: MODEL,
                    tip: format!(
                        "{}: waiting on the model {} s",
                        s.session,
                        num((b - a) as f64 / 1e9)
                    ),
                });
            }
        }
        Swimlane {
            name: "sessions",
            title: "Sessions over time (blue: waiting on the model; grey: the agent's own time)",
            lanes: shown.len() as u32,
            spans,
            legend: &[("model", MODEL), ("agent", AGENT)],
        }
        .render()
    }
}

const MODEL: &str = "#1f77b4";
const AGENT: &str = "#c7c7c7";

fn add(a: &mut Acc, r: TurnRecord) {
    let start = r.anchor.wall_ns;
    let end = start + r.measured.e2e_ns.unwrap_or(0);
    a.reqs.push(Req { start, end });
    if let Some(x) = r.route {
        a.routes.insert(x);
    }
    if let Some(x) = r.model {
        a.models.insert(x);
    }
    if r.status != Status::Ok {
        a.not_ok += 1;
    }
    let m = &r.measured;
    for (i, v) in [m.prompt_tokens, m.cached_tokens, m.output_tokens]
        .into_iter()
        .enumerate()
    {
        a.tokens[i] += v.unwrap_or(0);
    }
    if let Some(t) = m.ttft_ns {
        a.ttfts.push(t as f64 / 1e6);
    }
}

/// The union of the requests' intervals is the model's time; its gaps are the agent's.
fn finish(session: String, mut a: Acc) -> SessionTime {
    let merged =
        tokentap_core::stats::merge_spans(a.reqs.iter().map(|r| (r.start, r.end)).collect());
    let model: u64 = merged.iter().map(|(s, e)| e - s).sum();
    let between: u64 = merged.windows(2).map(|w| w[1].0 - w[0].1).sum();
    let first = merged.first().map_or(0, |m| m.0);
    let last = a.reqs.iter().map(|r| r.end).max().unwrap_or(first);
    let span = (last - first) as f64 / 1e9;
    let grouped = session != NO_SESSION;
    let between_s = grouped.then_some(between as f64 / 1e9);
    a.ttfts.sort_by(f64::total_cmp);
    SessionTime {
        routes: a.routes.into_iter().collect(),
        models: a.models.into_iter().collect(),
        requests: a.reqs.len() as u64,
        not_ok: a.not_ok,
        first_wall_ns: first,
        span_s: span,
        model_s: model as f64 / 1e9,
        between_turns_s: between_s,
        agent_share: between_s.filter(|_| span > 0.0).map(|b| b / span),
        prompt_tokens: a.tokens[0],
        cached_tokens: a.tokens[1],
        output_tokens: a.tokens[2],
        ttft_p50_ms: (!a.ttfts.is_empty()).then(|| a.ttfts[(a.ttfts.len() - 1) / 2]),
        model_spans: merged,
        session,
    }
}

/// Each proxy record of `path`, content left out.
fn read(path: &Path, mut each: impl FnMut(TurnRecord)) -> Result<(), ReportError> {
    let mut lines = tokentap_core::jsonl::open(path).map_err(|source| ReportError::Read {
        path: path.to_owned(),
        source,
    })?;
    loop {
        let (line, text) = match lines.next_line() {
            Ok(Some(l)) => l,
            Ok(None) => return Ok(()),
            Err(e) => {
                return Err(ReportError::Record {
                    path: path.to_owned(),
                    line: lines.line(),
                    message: e.to_string(),
                })
            }
        };
        let mut r: TurnRecord = serde_json::from_str(text).map_err(|e| ReportError::Record {
            path: path.to_owned(),
            line,
            message: format!("expected a tokentap proxy record (`tokentap proxy --records`): {e}"),
        })?;
        if r.origin != Origin::Proxy {
            return Err(ReportError::Record {
                path: path.to_owned(),
                line,
                message: "field `origin`: expected \"proxy\", found \"replay\": a replay's records are reported from its run directory (`tokentap report RUN_DIR`)".into(),
            });
        }
        r.content = None;
        r.measured.chunks = Vec::new();
        each(r);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn acc(spans: &[(u64, u64)]) -> Acc {
        Acc {
            reqs: spans
                .iter()
                .map(|&(start, end)| Req { start, end })
                .collect(),
            ..Acc::default()
        }
    }

    #[test]
    fn overlapping_requests_are_model_time_once_and_gaps_the_agents() {
        // Two requests overlapping (a title request beside the main loop), a gap, one more.
        let s = finish(
            "s".into(),
            acc(&[
                (0, 4_000_000_000),
                (1_000_000_000, 5_000_000_000),
                (8_000_000_000, 10_000_000_000),
            ]),
        );
        assert_eq!(s.model_s, 7.0);
        assert_eq!(s.between_turns_s, Some(3.0));
        assert_eq!(s.span_s, 10.0);
        assert_eq!(s.agent_share, Some(0.3));
        let n = finish(NO_SESSION.into(), acc(&[(0, 1), (5, 6)]));
        assert_eq!(n.between_turns_s, None);
    }
}
