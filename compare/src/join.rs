//! Joining client turns to wire turns (docs/benchmark.md#client-formats).
//!
//! Four passes, each over what the previous ones left:
//! 0. **Response id.** The server's response id (`chatcmpl-…`, the `id` of its stream's chunks)
//!    as the client kept it equals the one the proxy recorded (`response_id`). Exact: the
//!    server gave one response one id, whatever the concurrency or the clocks.
//! 1. **Request id.** The client's request id equals a recorded request header of a wire turn
//!    (`X-Request-ID` by default; the proxy records it with `--record-header X-Request-ID`).
//!    Exact, whatever the concurrency.
//! 2. **Session + order.** Client turns and wire turns of one session (the wire's session is the
//!    proxy's `conversation_id`, or a recorded `X-Correlation-ID` / `X-Session-ID` header), each
//!    in order, merged like two sorted lists: a wire turn that starts more than `slack` before the
//!    client turn is one the client never reported, a client turn with no wire turn within
//!    `window` after it never reached the wire; otherwise the pair is taken unless the next
//!    client turn (or the next wire turn) is closer in time — the wall-clock or monotonic
//!    anchors break the ties that plain order cannot (a turn the proxy never saw, a retry the
//!    client never reported). Without start instants: plain order.
//! 3. **Time.** Client turns that have no session, or whose session the wire never saw, are
//!    matched to the remaining wire turns by start and end instants: the pair with the smallest
//!    |Δstart| + |Δend| first, within [−slack, window] — but only when the pair is clear: a
//!    client turn with another free wire turn, or a wire turn with another loose client turn,
//!    within `slack` of the pair's distance is ambiguous, and both are left unpaired (counted in
//!    a note) rather than risk a mispair.
//!
//! Everything not joined is reported as a turn only one side has.

use crate::client::{ClientRun, ClientTurn, Metric};
use crate::wire::WireTurn;
use serde::Serialize;
use std::collections::{HashMap, HashSet};

/// How pairs are found.
#[derive(Debug, Clone)]
pub struct JoinConfig {
    /// Request headers whose recorded value is the client's request id.
    pub id_headers: Vec<String>,
    /// How far the wire's start may precede the client's (clock read order, a client clock that
    /// starts after connection setup), ns.
    pub slack_ns: u64,
    /// How far the wire's start may follow the client's, ns.
    pub window_ns: u64,
}

impl Default for JoinConfig {
    fn default() -> Self {
        JoinConfig {
            id_headers: vec!["x-request-id".into()],
            slack_ns: 50_000_000,
            window_ns: 10_000_000_000,
        }
    }
}

/// How a pair was joined.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum JoinMethod {
    /// The server's response id, on both sides.
    ResponseId,
    /// The request id the client sent in a header.
    RequestId,
    /// The output's text.
    OutputText,
    /// Session id and turn order.
    SessionOrder,
    /// Start instants, within the slack.
    Time,
}

/// One client turn and the wire turn it was joined to (indices into the inputs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pair {
    /// The client turn (index).
    pub client: usize,
    /// The wire turn (index).
    pub wire: usize,
    /// How they were joined.
    pub how: JoinMethod,
}

/// The join's outcome.
#[derive(Debug, Clone, Default)]
pub struct Joined {
    /// In client order.
    pub pairs: Vec<Pair>,
    /// Client turns joined to nothing.
    pub client_only: Vec<usize>,
    /// Wire turns joined to nothing.
    pub wire_only: Vec<usize>,
    /// What the join could not decide, for the reader.
    pub notes: Vec<String>,
}

/// Joins the client's turns to the wire's in three passes, each on what the one before left:
/// by request id, by session and order, by time.
pub fn join(client: &ClientRun, wire: &[WireTurn], cfg: &JoinConfig) -> Joined {
    let mut j = Joiner {
        client,
        wire,
        cfg,
        c_used: vec![false; client.turns.len()],
        w_used: vec![false; wire.len()],
        pairs: Vec::new(),
        notes: Vec::new(),
    };
    j.by_response_id();
    j.by_request_id();
    j.by_output_text();
    let seen_sessions = j.by_session_order();
    j.by_time(&seen_sessions);
    let Joiner {
        mut pairs,
        notes,
        c_used,
        w_used,
        ..
    } = j;
    pairs.sort_by_key(|p| p.client);
    Joined {
        pairs,
        client_only: (0..c_used.len()).filter(|&c| !c_used[c]).collect(),
        wire_only: (0..w_used.len()).filter(|&w| !w_used[w]).collect(),
        notes,
    }
}

/// The join in progress: which turns of each side are taken, the pairs so far.
struct Joiner<'a> {
    client: &'a ClientRun,
    wire: &'a [WireTurn],
    cfg: &'a JoinConfig,
    c_used: Vec<bool>,
    w_used: Vec<bool>,
    pairs: Vec<Pair>,
    notes: Vec<String>,
}

impl<'a> Joiner<'a> {
    /// A wire turn's start on the client's clock.
    fn wstart(&self, w: usize) -> u64 {
        self.wire[w].start_on(self.client.clock)
    }

    fn pair(&mut self, client: usize, wire: usize, how: JoinMethod) {
        (self.c_used[client], self.w_used[wire]) = (true, true);
        self.pairs.push(Pair { client, wire, how });
    }

    /// Pass 0, response id: the server's id of the response, kept by both sides.
    fn by_response_id(&mut self) {
        let (client, wire) = (self.client, self.wire);
        if !client.turns.iter().any(|t| t.response_id.is_some()) {
            return;
        }
        let mut by_id: HashMap<&str, usize> = HashMap::new();
        let mut repeated = 0usize;
        for (i, w) in wire.iter().enumerate() {
            if let Some(id) = w.record.measured.response_id.as_deref() {
                if by_id.insert(id, i).is_some() {
                    repeated += 1;
                }
            }
        }
        if by_id.is_empty() {
            self.notes.push("the client kept the server's response ids but no proxy record has one (records of a tokentap older than response_id): joined by the other keys".into());
            return;
        }
        if repeated > 0 {
            // A server that reuses ids (or records of two runs): the id is no key for those.
            let mut seen: HashMap<&str, usize> = HashMap::new();
            for w in wire {
                if let Some(id) = w.record.measured.response_id.as_deref() {
                    *seen.entry(id).or_default() += 1;
                }
            }
            by_id.retain(|id, _| seen[id] == 1);
            self.notes.push(format!(
                "{repeated} wire records repeat another's response id: those ids are not used for the join"
            ));
        }
        for (ci, t) in client.turns.iter().enumerate() {
            let Some(&wi) = t.response_id.as_deref().and_then(|id| by_id.get(id)) else {
                continue;
            };
            if !self.w_used[wi] {
                self.pair(ci, wi, JoinMethod::ResponseId);
            }
        }
    }

    /// Pass 1, request id: a client turn's id found in a recorded `--id-header` of the wire.
    fn by_request_id(&mut self) {
        let (client, wire, cfg) = (self.client, self.wire, self.cfg);
        let mut by_id: HashMap<&str, Vec<usize>> = HashMap::new();
        for (i, w) in wire.iter().enumerate() {
            for h in &cfg.id_headers {
                if let Some(v) = w.header(h) {
                    by_id.entry(v).or_default().push(i);
                }
            }
        }
        let client_has_ids = client.turns.iter().any(|t| t.request_id.is_some());
        if client_has_ids && by_id.is_empty() {
            self.notes.push(format!(
                "the client sent request ids but no proxy record has a {} header: run the proxy with --record-header {} for exact joins",
                cfg.id_headers.join(" / "),
                cfg.id_headers.first().map(String::as_str).unwrap_or("X-Request-ID")
            ));
        }
        for (ci, t) in client.turns.iter().enumerate() {
            let Some(id) = t.request_id.as_deref() else {
                continue;
            };
            if let Some(ws) = by_id.get(id) {
                if let Some(&wi) = ws.iter().find(|&&w| !self.w_used[w]) {
                    self.pair(ci, wi, JoinMethod::RequestId);
                }
            }
        }
    }

    /// Pass 1b, output text: a client that keeps its outputs and nothing else the wire has
    /// (SGLang's bench_serving) pairs by the text, when the proxy recorded it
    /// (`--record-content`) and it is unique on both sides.
    fn by_output_text(&mut self) {
        let (client, wire) = (self.client, self.wire);
        if !client.turns.iter().any(|t| t.output_text.is_some()) {
            return;
        }
        let mut by_text: HashMap<u64, Vec<usize>> = HashMap::new();
        for (i, w) in wire.iter().enumerate() {
            if let (false, Some(h)) = (self.w_used[i], w.output_hash) {
                by_text.entry(h).or_default().push(i);
            }
        }
        if by_text.is_empty() {
            self.notes.push("the client kept its outputs but no proxy record has its output text: run the proxy with --record-content to join on it".into());
            return;
        }
        let hash = |t: &ClientTurn| t.output_text.as_deref().map(crate::wire::output_hash);
        let mut client_count: HashMap<u64, usize> = HashMap::new();
        for t in &client.turns {
            if let Some(x) = hash(t) {
                *client_count.entry(x).or_default() += 1;
            }
        }
        let mut ambiguous = 0;
        for (ci, t) in client.turns.iter().enumerate() {
            let Some(x) = hash(t) else {
                continue;
            };
            if self.c_used[ci] {
                continue;
            }
            match by_text.get(&x).map(Vec::as_slice) {
                Some([wi]) if client_count[&x] == 1 && !self.w_used[*wi] => {
                    self.pair(ci, *wi, JoinMethod::OutputText)
                }
                Some([_, _, ..]) => ambiguous += 1,
                Some([_]) if client_count[&x] > 1 => ambiguous += 1,
                _ => {}
            }
        }
        if ambiguous > 0 {
            self.notes.push(format!(
                "{ambiguous} client turns share their output text with another turn: not joined by it"
            ));
        }
    }

    /// Pass 2, session + order: within one session, client turns and wire turns merged in order,
    /// skipping a turn the other side never saw. Returns the sessions the wire knows.
    fn by_session_order(&mut self) -> HashSet<&'a str> {
        let (client, wire) = (self.client, self.wire);
        let mut sessions: HashMap<&'a str, Vec<usize>> = HashMap::new();
        for (i, w) in wire.iter().enumerate() {
            if self.w_used[i] {
                continue;
            }
            let mut keys: Vec<&str> = Vec::with_capacity(3);
            keys.extend(w.record.conversation_id.as_deref());
            keys.extend(w.header("x-correlation-id"));
            keys.extend(w.header("x-session-id"));
            keys.sort_unstable();
            keys.dedup();
            for k in keys {
                sessions.entry(k).or_default().push(i);
            }
        }
        // A session's wire turns in time order. From several proxies (hosts of their own) the
        // monotonic clocks do not compare: their wall clocks do.
        let several = wire.iter().any(|w| w.source != 0);
        for v in sessions.values_mut() {
            if several {
                v.sort_by_key(|&w| (wire[w].start_on(crate::client::Clock::Wall), w));
            } else {
                v.sort_by_key(|&w| (self.wstart(w), w));
            }
        }
        if several && client.clock == crate::client::Clock::Mono {
            self.notes.push("records of several proxies joined to a client on the monotonic clock: time distances compare across hosts only if every proxy ran on the client's host (give the client's wall clock, --clock wall, otherwise)".into());
        }
        let mut groups: HashMap<&str, Vec<usize>> = HashMap::new();
        for (ci, t) in client.turns.iter().enumerate() {
            if let (false, Some(s)) = (self.c_used[ci], t.session.as_deref()) {
                groups.entry(s).or_default().push(ci);
            }
        }
        let mut group_keys: Vec<&str> = groups.keys().copied().collect();
        group_keys.sort_unstable();
        for key in group_keys {
            let Some(cands) = sessions.get(key) else {
                continue;
            };
            let mut g = groups.remove(key).unwrap_or_default();
            let by_turn = g.iter().all(|&c| client.turns[c].turn.is_some());
            g.sort_by_key(|&c| {
                let t = &client.turns[c];
                (if by_turn { t.turn } else { None }, t.start_ns, c)
            });
            let cands: Vec<usize> = cands.iter().copied().filter(|&w| !self.w_used[w]).collect();
            self.merge_session(&g, &cands);
        }
        sessions.keys().copied().collect()
    }

    /// One session's merge: client turns `g` and wire turns `cands`, both in order.
    fn merge_session(&mut self, g: &[usize], cands: &[usize]) {
        let client = self.client;
        let (mut k, mut j) = (0, 0);
        while k < g.len() && j < cands.len() {
            let (ci, wi) = (g[k], cands[j]);
            let step = match client.turns[ci].start_ns {
                // No anchors: plain order.
                None => Step::Pair,
                Some(s) => {
                    let d = self.wstart(wi) as i128 - s as i128;
                    // In range, the next client turn may fit this wire turn better (this
                    // client turn never reached the wire), or the next wire turn may fit this
                    // client turn better (this wire turn is one the client never reported).
                    let dist = |c: usize, w: usize| {
                        client.turns[c]
                            .start_ns
                            .map(|cs| self.wstart(w).abs_diff(cs))
                            .unwrap_or(u64::MAX)
                    };
                    let here = d.unsigned_abs() as u64;
                    // A wire turn before this client turn (never reported), or a better wire
                    // turn next.
                    let skip_wire = d < -(self.cfg.slack_ns as i128);
                    // The wire never saw this client turn, or a better client turn next.
                    let skip_client = d > self.cfg.window_ns as i128;
                    if skip_wire {
                        Step::SkipWire
                    } else if skip_client || g.get(k + 1).is_some_and(|&c2| dist(c2, wi) < here) {
                        Step::SkipClient
                    } else if cands.get(j + 1).is_some_and(|&w2| dist(ci, w2) < here) {
                        Step::SkipWire
                    } else {
                        Step::Pair
                    }
                }
            };
            match step {
                Step::SkipWire => j += 1,
                Step::SkipClient => k += 1,
                Step::Pair => {
                    self.pair(ci, wi, JoinMethod::SessionOrder);
                    (k, j) = (k + 1, j + 1);
                }
            }
        }
    }

    /// Pass 3, time: for client turns the session pass could not place (no session, or one the
    /// wire never saw): nearest start (and end), globally best pairs first.
    fn by_time(&mut self, seen_sessions: &HashSet<&str>) {
        let (client, wire, cfg) = (self.client, self.wire, self.cfg);
        let loose: Vec<usize> = (0..client.turns.len())
            .filter(|&c| {
                let t = &client.turns[c];
                !self.c_used[c]
                    && t.start_ns.is_some()
                    && t.session
                        .as_deref()
                        .is_none_or(|s| !seen_sessions.contains(s))
            })
            .collect();
        if loose.is_empty() {
            return;
        }
        let mut free: Vec<usize> = (0..wire.len()).filter(|&w| !self.w_used[w]).collect();
        free.sort_by_key(|&w| (self.wstart(w), w));
        let starts: Vec<u64> = free.iter().map(|&w| self.wstart(w)).collect();
        let mut cands: Vec<(u64, usize, usize)> = Vec::new();
        for &ci in &loose {
            let t: &ClientTurn = &client.turns[ci];
            let Some(s) = t.start_ns else { continue };
            let lo = starts.partition_point(|&x| x.saturating_add(cfg.slack_ns) < s);
            let hi = starts.partition_point(|&x| x <= s.saturating_add(cfg.window_ns));
            // The 64 nearest starts are plenty: closed-loop clients never have more turns
            // starting within one join window than they have connections.
            for (x, &wi) in free.iter().enumerate().take(hi.min(lo + 64)).skip(lo) {
                let ds = starts[x].abs_diff(s);
                let de = match (t.values.get(Metric::E2e), wire[wi].record.measured.e2e_ns) {
                    (Some(ce), Some(we)) => {
                        let cend = s as f64 + ce * 1e6;
                        let wend = starts[x] as f64 + we as f64;
                        (cend - wend).abs() as u64
                    }
                    _ => 0,
                };
                cands.push((ds + de, ci, wi));
            }
        }
        cands.sort_unstable();
        let ambiguous = self.take_clear_pairs(&cands);
        if ambiguous > 0 {
            self.notes.push(format!(
                "{ambiguous} client turns left unpaired by the time join: another turn's start and end were within {:.0} ms of theirs, so the pair was not certain (a session or request-id header, or the server's response id, pairs them exactly)",
                cfg.slack_ns as f64 / 1e6
            ));
        }
    }

    /// Takes the time pass's candidates (sorted by distance) best first, each only when clear:
    /// no other candidate of either side, its other side still free, lies within `slack` of its
    /// distance (a nearer one was taken or refused already). Returns the client turns left
    /// unpaired as ambiguous.
    fn take_clear_pairs(&mut self, cands: &[(u64, usize, usize)]) -> usize {
        let slack = self.cfg.slack_ns;
        let mut ambiguous: HashSet<usize> = HashSet::new();
        let mut blocked_c = vec![false; self.c_used.len()];
        let mut blocked_w = vec![false; self.w_used.len()];
        for (k, &(d, ci, wi)) in cands.iter().enumerate() {
            if self.c_used[ci] || self.w_used[wi] || blocked_c[ci] || blocked_w[wi] {
                continue;
            }
            let near = cands[k + 1..]
                .iter()
                .take_while(|&&(d2, _, _)| d2 <= d.saturating_add(slack));
            let rival = near.clone().any(|&(_, c2, w2)| {
                (c2 == ci && w2 != wi && !self.w_used[w2] && !blocked_w[w2])
                    || (w2 == wi && c2 != ci && !self.c_used[c2] && !blocked_c[c2])
            });
            if !rival {
                self.pair(ci, wi, JoinMethod::Time);
                continue;
            }
            // Neither side is paired by time: each could be the other's.
            (blocked_c[ci], blocked_w[wi]) = (true, true);
            ambiguous.insert(ci);
            for &(_, c2, w2) in near {
                if c2 == ci || w2 == wi {
                    (blocked_c[c2], blocked_w[w2]) = (true, true);
                    ambiguous.insert(c2);
                }
            }
        }
        ambiguous.retain(|&c| !self.c_used[c]);
        ambiguous.len()
    }
}

/// One step of the session-order merge.
enum Step {
    Pair,
    SkipWire,
    SkipClient,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::Clock;
    use tokentap_core::clock::Anchor;
    use tokentap_core::record::{Origin, TurnRecord};

    fn wire(session: &str, start: u64, id: Option<&str>) -> WireTurn {
        let mut r = TurnRecord::new(
            Origin::Proxy,
            Anchor {
                wall_ns: start + 1_000_000_000,
                mono_ns: start,
            },
        );
        r.conversation_id = Some(session.into());
        if let Some(id) = id {
            r.headers.insert("x-request-id".into(), id.into());
        }
        r.measured.e2e_ns = Some(5_000_000);
        WireTurn::new(String::new(), 0, r)
    }

    fn client(session: Option<&str>, turn: u32, start: u64, id: Option<&str>) -> ClientTurn {
        let mut t = ClientTurn::new(turn as usize + 1);
        t.session = session.map(Into::into);
        t.turn = Some(turn);
        t.start_ns = Some(start);
        t.request_id = id.map(Into::into);
        t.values.set(Metric::E2e, Some(5.0));
        t
    }

    fn run(turns: Vec<ClientTurn>) -> ClientRun {
        ClientRun {
            clock: Clock::Mono,
            turns,
            published: None,
            notes: vec![],
            checks: vec![],
            levels: Vec::new(),
            relative_starts: false,
            totals: Vec::new(),
        }
    }

    const MS: u64 = 1_000_000;

    #[test]
    fn request_id_beats_order() {
        // Same session, ids crossed relative to time order: the ids win.
        let w = vec![
            wire("s", 100 * MS, Some("b")),
            wire("s", 200 * MS, Some("a")),
        ];
        let c = run(vec![
            client(Some("s"), 0, 99 * MS, Some("a")),
            client(Some("s"), 1, 199 * MS, Some("b")),
        ]);
        let j = join(&c, &w, &JoinConfig::default());
        assert_eq!(j.pairs.len(), 2);
        assert_eq!((j.pairs[0].client, j.pairs[0].wire), (0, 1));
        assert_eq!((j.pairs[1].client, j.pairs[1].wire), (1, 0));
        assert!(j.pairs.iter().all(|p| p.how == JoinMethod::RequestId));
    }

    #[test]
    fn session_order_uses_anchors_for_missing_turns() {
        // The wire never saw the client's turn 1 (e.g. refused before the proxy), and saw a
        // retry the client never reported between turns 2 and 3.
        let w = vec![
            wire("s", 101 * MS, None),
            wire("s", 301 * MS, None),
            wire("s", 350 * MS, None),
            wire("t", 102 * MS, None),
        ];
        let c = run(vec![
            client(Some("s"), 0, 100 * MS, None),
            client(Some("s"), 1, 200 * MS, None),
            client(Some("s"), 2, 300 * MS, None),
            client(Some("t"), 0, 101 * MS, None),
        ]);
        let cfg = JoinConfig {
            slack_ns: 10 * MS,
            ..JoinConfig::default()
        };
        let j = join(&c, &w, &cfg);
        let got: Vec<(usize, usize)> = j.pairs.iter().map(|p| (p.client, p.wire)).collect();
        assert_eq!(got, [(0, 0), (2, 1), (3, 3)]);
        assert_eq!(j.client_only, [1]);
        assert_eq!(j.wire_only, [2]);
    }

    #[test]
    fn turns_closer_together_than_the_slack_still_join_in_order() {
        // Fast turns: 40 ms apart, less than the 50 ms default slack.
        let w: Vec<WireTurn> = (0..4).map(|i| wire("s", (i * 40 + 1) * MS, None)).collect();
        let c = run((0..4)
            .map(|i| client(Some("s"), i as u32, i * 40 * MS, None))
            .collect());
        let j = join(&c, &w, &JoinConfig::default());
        let got: Vec<(usize, usize)> = j.pairs.iter().map(|p| (p.client, p.wire)).collect();
        assert_eq!(got, [(0, 0), (1, 1), (2, 2), (3, 3)]);
    }

    #[test]
    fn time_join_for_sessionless_clients() {
        let w = vec![wire("x", 100 * MS, None), wire("y", 300 * MS, None)];
        let c0 = client(None, 0, 300 * MS - 200_000, None);
        let c1 = client(None, 1, 99 * MS + 900_000, None);
        let j = join(&run(vec![c0, c1]), &w, &JoinConfig::default());
        let got: Vec<(usize, usize)> = j.pairs.iter().map(|p| (p.client, p.wire)).collect();
        assert_eq!(got, [(0, 1), (1, 0)]);
        assert!(j.pairs.iter().all(|p| p.how == JoinMethod::Time));
    }

    /// Concurrency 8 without sessions or ids: the turns whose start and end lie within the slack
    /// of another's could be either's — they are left unpaired and counted, never mispaired; the
    /// clear ones are paired.
    #[test]
    fn time_join_leaves_ambiguous_turns_unpaired() {
        // Wire starts (ms) and each client turn's truth: the client sends 0.2 ms earlier.
        // 100/100.3 and 700/700.4 are two pairs of look-alikes (same E2E); the rest are clear.
        let starts = [
            100_000, 100_300, 300_000, 500_000, 700_000, 700_400, 900_000, 1_100_000,
        ];
        let w: Vec<WireTurn> = starts
            .iter()
            .map(|&us| wire("x", us * 1_000, None))
            .collect();
        // Client order shuffled against the wire's.
        let order = [5, 2, 0, 7, 1, 4, 6, 3];
        let c = run(order
            .iter()
            .map(|&i| client(None, 0, starts[i] * 1_000 - 200_000, None))
            .collect());
        let j = join(&c, &w, &JoinConfig::default());
        for p in &j.pairs {
            assert_eq!(order[p.client], p.wire, "mispaired: {:?}", j.pairs);
        }
        let paired: Vec<usize> = j.pairs.iter().map(|p| p.wire).collect();
        assert_eq!(paired.len(), 4, "{:?}", j.pairs);
        let mut unpaired: Vec<usize> = j.client_only.iter().map(|&c| order[c]).collect();
        unpaired.sort_unstable();
        assert_eq!(unpaired, [0, 1, 4, 5]);
        assert!(
            j.notes
                .iter()
                .any(|n| n.starts_with("4 client turns left unpaired by the time join")),
            "{:?}",
            j.notes
        );
    }

    /// The server's response id pairs exactly, ahead of request ids, sessions and time: here
    /// every other key would mislead.
    #[test]
    fn response_id_is_exact_and_first() {
        let mut w = vec![
            wire("s", 100 * MS, Some("b")),
            wire("s", 200 * MS, Some("a")),
            wire("t", 300 * MS, None),
        ];
        for (x, id) in w.iter_mut().zip(["chatcmpl-2", "chatcmpl-1", "chatcmpl-3"]) {
            x.record.measured.response_id = Some(id.into());
        }
        let mut c = vec![
            client(Some("s"), 0, 99 * MS, Some("b")),
            client(Some("s"), 1, 199 * MS, Some("a")),
            client(None, 2, 150 * MS, None),
        ];
        for (t, id) in c.iter_mut().zip(["chatcmpl-1", "chatcmpl-2", "chatcmpl-3"]) {
            t.response_id = Some(id.into());
        }
        let j = join(&run(c), &w, &JoinConfig::default());
        let got: Vec<(usize, usize, JoinMethod)> =
            j.pairs.iter().map(|p| (p.client, p.wire, p.how)).collect();
        assert_eq!(
            got,
            [
                (0, 1, JoinMethod::ResponseId),
                (1, 0, JoinMethod::ResponseId),
                (2, 2, JoinMethod::ResponseId)
            ]
        );
    }

    #[test]
    fn ids_without_recorded_headers_say_how_to_fix() {
        let w = vec![wire("s", 100 * MS, None)];
        let c = run(vec![client(Some("s"), 0, 99 * MS, Some("a"))]);
        let j = join(&c, &w, &JoinConfig::default());
        assert_eq!(j.pairs.len(), 1);
        assert_eq!(j.pairs[0].how, JoinMethod::SessionOrder);
        assert!(j.notes[0].contains("--record-header"), "{:?}", j.notes);
    }
}
