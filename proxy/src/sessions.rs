//! The session table: per-session turn history for the admin endpoints.
//!
//! Touched twice per LLM request — once at the start (to number the turn) and once at the end
//! (to append the turn's summary) — never per chunk. Bounded two ways: sessions idle longer than
//! the TTL are swept (by a periodic task and whenever the table is full), and when the table is
//! still full the least recently active sixteenth is evicted at once, so an insert into a full
//! table costs O(n/16) amortised instead of O(n) each. Evictions are counted. Each session keeps
//! at most [`MAX_TURNS`] turn summaries (the count of turns keeps going).

use dashmap::DashMap;
use serde::Serialize;
use std::sync::atomic::{AtomicU64, Ordering};
use tokentap_core::clock::{self, MonoNs};
use tokentap_core::record::{Status, TurnRecord};
use tokentap_core::stats::Samples;

/// Turn summaries kept per session.
pub const MAX_TURNS: usize = 4096;

/// One turn, as `GET /sessions/{id}` shows it. Times in ns on the proxy's monotonic clock,
/// offsets from the turn's first request byte.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct TurnSummary {
    pub turn_index: u32,
    pub status: Status,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub http_status: Option<u16>,
    /// Wall-clock ns since the epoch at the turn's first request byte.
    pub start_wall_ns: u64,
    pub ttft_ns: Option<u64>,
    pub itl_p50_ns: Option<f64>,
    pub itl_p99_ns: Option<f64>,
    pub e2e_ns: Option<u64>,
    pub prompt_tokens: Option<u64>,
    pub cached_tokens: Option<u64>,
    pub output_tokens: Option<u64>,
    pub messages: Option<u32>,
    pub upstream: Option<String>,
}

impl TurnSummary {
    pub fn from_record(r: &TurnRecord) -> Self {
        let mut itl: Samples = r.measured.itl_samples().collect();
        TurnSummary {
            turn_index: r.turn_index,
            status: r.status,
            http_status: r.http_status,
            start_wall_ns: r.anchor.wall_ns,
            ttft_ns: r.measured.ttft_ns,
            itl_p50_ns: itl.quantile(0.5),
            itl_p99_ns: itl.quantile(0.99),
            e2e_ns: r.measured.e2e_ns,
            prompt_tokens: r.measured.prompt_tokens,
            cached_tokens: r.measured.cached_tokens,
            output_tokens: r.measured.output_tokens,
            messages: r.messages,
            upstream: r.upstream.clone(),
        }
    }
}

#[derive(Debug)]
struct Session {
    first_wall_ns: u64,
    last_mono: MonoNs,
    last_wall_ns: u64,
    started: u32,
    in_flight: u32,
    turns: Vec<TurnSummary>,
}

/// One line of `GET /sessions`.
#[derive(Debug, Clone, Serialize)]
pub struct SessionBrief {
    pub id: String,
    pub turns: u32,
    pub in_flight: u32,
    pub first_seen_wall_ns: u64,
    pub last_activity_wall_ns: u64,
    /// Seconds since the last request started or ended.
    pub idle_s: f64,
}

/// `GET /sessions/{id}`.
#[derive(Debug, Clone, Serialize)]
pub struct SessionDetail {
    pub id: String,
    pub turns_started: u32,
    pub in_flight: u32,
    pub first_seen_wall_ns: u64,
    pub last_activity_wall_ns: u64,
    pub turns: Vec<TurnSummary>,
}

/// The bounded table.
pub struct Sessions {
    map: DashMap<String, Session>,
    ttl_ns: u64,
    max: usize,
    pub evictions: AtomicU64,
}

impl Sessions {
    pub fn new(ttl_ns: u64, max: usize) -> Self {
        Sessions {
            map: DashMap::new(),
            ttl_ns,
            max: max.max(1),
            evictions: AtomicU64::new(0),
        }
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// A new LLM request of session `id` starts: returns its 0-based turn index.
    pub fn start_turn(&self, id: &str) -> u32 {
        let now = clock::now();
        let wall = clock::wall_now();
        if let Some(mut s) = self.map.get_mut(id) {
            s.last_mono = now;
            s.last_wall_ns = wall;
            s.in_flight += 1;
            s.started += 1;
            return s.started - 1;
        }
        if self.map.len() >= self.max {
            self.make_room(now);
        }
        let mut s = self.map.entry(id.to_string()).or_insert_with(|| Session {
            first_wall_ns: wall,
            last_mono: now,
            last_wall_ns: wall,
            started: 0,
            in_flight: 0,
            turns: Vec::new(),
        });
        s.in_flight += 1;
        s.started += 1;
        s.started - 1
    }

    /// The turn ended (any status): appends its summary.
    pub fn end_turn(&self, id: &str, r: &TurnRecord) {
        let summary = TurnSummary::from_record(r);
        if let Some(mut s) = self.map.get_mut(id) {
            s.last_mono = clock::now();
            s.last_wall_ns = clock::wall_now();
            s.in_flight = s.in_flight.saturating_sub(1);
            if s.turns.len() < MAX_TURNS {
                s.turns.push(summary);
            }
        }
    }

    /// Removes sessions idle longer than the TTL (none with a request in flight).
    pub fn sweep(&self) -> usize {
        let now = clock::now();
        let before = self.map.len();
        self.map
            .retain(|_, s| s.in_flight > 0 || now.saturating_sub(s.last_mono) < self.ttl_ns);
        let n = before.saturating_sub(self.map.len());
        self.evictions.fetch_add(n as u64, Ordering::Relaxed);
        n
    }

    fn make_room(&self, now: MonoNs) {
        let _ = now;
        if self.sweep() > 0 && self.map.len() < self.max {
            return;
        }
        let mut ages: Vec<(MonoNs, String)> = self
            .map
            .iter()
            .map(|e| (e.value().last_mono, e.key().clone()))
            .collect();
        let k = (self.max / 16).max(1).min(ages.len());
        if k == 0 {
            return;
        }
        ages.select_nth_unstable(k - 1);
        for (_, id) in ages.into_iter().take(k) {
            if self.map.remove(&id).is_some() {
                self.evictions.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Active sessions, most recently active first.
    pub fn list(&self) -> Vec<SessionBrief> {
        let now = clock::now();
        let mut v: Vec<SessionBrief> = self
            .map
            .iter()
            .map(|e| SessionBrief {
                id: e.key().clone(),
                turns: e.started,
                in_flight: e.in_flight,
                first_seen_wall_ns: e.first_wall_ns,
                last_activity_wall_ns: e.last_wall_ns,
                idle_s: clock::secs(now.saturating_sub(e.last_mono)),
            })
            .collect();
        v.sort_by_key(|s| std::cmp::Reverse(s.last_activity_wall_ns));
        v
    }

    pub fn detail(&self, id: &str) -> Option<SessionDetail> {
        self.map.get(id).map(|s| SessionDetail {
            id: id.to_string(),
            turns_started: s.started,
            in_flight: s.in_flight,
            first_seen_wall_ns: s.first_wall_ns,
            last_activity_wall_ns: s.last_wall_ns,
            turns: s.turns.clone(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokentap_core::clock::Anchor;
    use tokentap_core::record::Origin;

    #[test]
    fn numbers_turns_and_bounds_size() {
        let t = Sessions::new(u64::MAX / 2, 32);
        assert_eq!(t.start_turn("a"), 0);
        assert_eq!(t.start_turn("a"), 1);
        let mut r = TurnRecord::new(Origin::Proxy, Anchor::now());
        r.turn_index = 1;
        t.end_turn("a", &r);
        let d = t.detail("a").unwrap();
        assert_eq!((d.turns_started, d.in_flight, d.turns.len()), (2, 1, 1));
        for i in 0..100 {
            t.start_turn(&format!("s{i}"));
        }
        assert!(t.len() <= 32, "{}", t.len());
        assert!(t.evictions.load(Ordering::Relaxed) >= 69);
    }

    #[test]
    fn ttl_sweep_spares_in_flight() {
        let t = Sessions::new(0, 10);
        t.start_turn("busy");
        t.start_turn("idle");
        t.end_turn("idle", &TurnRecord::new(Origin::Proxy, Anchor::now()));
        assert_eq!(t.sweep(), 1);
        assert!(t.detail("busy").is_some());
    }
}
