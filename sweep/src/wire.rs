//! The wire's TTFT beside the client's, per point (`--wire DIR`: the records the proxy in the
//! path wrote). Each point reuses the dataset's session ids, so the proxy's records are taken
//! from the point's time span only and joined to the point's tracked, completed client turns by
//! session id (`X-Session-ID` = the replay's logical trajectory id) and turn index. The proxy
//! numbers a session's turns from its first sight of the id, which carries on across points, so
//! within the span the turns are renumbered by start time (each logical trajectory runs once
//! per point, its turns one after another).

use crate::file::{Point, WireView};
use std::collections::HashMap;
use std::path::Path;
use tokentap_core::record::{Status, TurnRecord};
use tokentap_core::stats::Samples;

/// The proxies' records (every file of each of `wire_dirs`, one wire view), loaded once per
/// call. A session's turns are ordered by their wall-clock start (the proxies may be on
/// different hosts), so records of several proxies for one session join in time order.
pub fn load(wire_dirs: &[std::path::PathBuf]) -> anyhow::Result<Vec<TurnRecord>> {
    let (turns, _ignored) = tokentap_compare::wire::load(wire_dirs)?;
    Ok(turns.into_iter().map(|t| t.record).collect())
}

/// The proxy's completed turns that started within `[t0, t1]` (wall ns), keyed by session id
/// and turn index renumbered within the span.
pub fn in_span(wire: &[TurnRecord], t0: u64, t1: u64) -> HashMap<(&str, u32), &TurnRecord> {
    let mut by_session: HashMap<&str, Vec<&TurnRecord>> = HashMap::new();
    for r in wire {
        let s = r.anchor.wall_of(r.start_mono_ns);
        if s < t0 || s > t1 {
            continue;
        }
        if let Some(id) = r.conversation_id.as_deref() {
            by_session.entry(id).or_default().push(r);
        }
    }
    let mut out = HashMap::new();
    for (id, mut turns) in by_session {
        turns.sort_by_key(|r| r.anchor.wall_of(r.start_mono_ns));
        for (i, r) in turns.into_iter().enumerate() {
            if r.status == Status::Ok {
                out.insert((id, i as u32), r);
            }
        }
    }
    out
}

/// The point's wire view; `None` without a time span.
pub fn view(
    point: &Point,
    point_dir: &Path,
    wire: &[TurnRecord],
) -> anyhow::Result<Option<WireView>> {
    let (Some(t0), Some(t1)) = (point.started_wall_ns, point.ended_wall_ns) else {
        return Ok(None);
    };
    let by_key = in_span(wire, t0, t1);
    let path = point_dir.join(tokentap_run::files::RECORDS);
    let mut lines = tokentap_core::jsonl::open(&path)
        .map_err(|e| anyhow::anyhow!("reading {}: {e}", path.display()))?;
    let (mut w, mut c) = (Samples::new(), Samples::new());
    let (mut joined, mut tracked) = (0, 0);
    loop {
        let (n, line) = match lines.next_line() {
            Ok(Some(l)) => l,
            Ok(None) => break,
            Err(e) => anyhow::bail!("{}:{}: {e}", path.display(), lines.line()),
        };
        let r: TurnRecord = serde_json::from_str(line)
            .map_err(|e| anyhow::anyhow!("{}:{n}: not a turn record: {e}", path.display()))?;
        if r.status != Status::Ok || r.in_window != Some(true) {
            continue;
        }
        tracked += 1;
        let Some(id) = r.conversation_id.as_deref() else {
            continue;
        };
        let Some(x) = by_key.get(&(id, r.turn_index)) else {
            continue;
        };
        if let (Some(a), Some(b)) = (r.measured.ttft_ns, x.measured.ttft_ns) {
            joined += 1;
            c.push(a as f64 / 1e6);
            w.push(b as f64 / 1e6);
        }
    }
    Ok(Some(WireView {
        turns_joined: joined,
        client_turns: tracked,
        ttft_p90_ms: w.quantile(0.9),
        client_ttft_p90_ms: c.quantile(0.9),
    }))
}
