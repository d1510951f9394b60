//! The session table: per-session turn history for the admin endpoints.
//!
//! Touched twice per LLM request — once at the start (to number the turn) and once at the end
//! (to append the turn's summary) — never per chunk. Bounded by count and by bytes: sessions
//! idle longer than the TTL are swept (by a periodic task and whenever the table is full), and
//! when the table is still over `--max-sessions` or `--max-session-bytes` the least recently
//! active sixteenth is evicted at once, so an insert into a full table costs O(n/16) amortised
//! instead of O(n) each. Evictions are counted. Each session keeps at most [`MAX_TURNS`] turn
//! summaries (the count of turns keeps going); ids longer than `--max-session-id-bytes` are cut
//! by [`cap_id`] before they get here (a 60 KB id once made the table hold gigabytes).
//!
//! `/sessions` pages in id order (`?limit=&after=`), so a client can walk a large table.

use dashmap::DashMap;
use serde::Serialize;
use std::sync::atomic::{AtomicU64, Ordering};
use tokentap_core::clock::{self, MonoNs};
use tokentap_core::record::{Status, TurnRecord};
use tokentap_core::stats::Samples;

/// Turn summaries kept per session.
pub const MAX_TURNS: usize = 4096;
/// Bytes a session costs besides its id and turns (its map entry, the table's slots, the
/// allocator's share under churn), for the byte bound. Measured (the test
/// `unknown_previous_ids_stay_under_the_byte_bound_at_the_defaults`): 200,000 sessions of one
/// turn and one link through a table of 100,000 held ~975 B of heap each, of which the ids and
/// the turn are ~250.
const SESSION_BYTES: u64 = 512;
/// Bytes a link (a Responses response id → its session) or a chat prefix entry costs besides
/// its ids, measured the same way.
const LINK_BYTES: u64 = 256;
/// Smallest `--max-session-id-bytes` (the hash suffix alone is 17).
pub const MIN_ID_BYTES: usize = 32;
/// Most sessions one `/sessions` page returns.
pub const MAX_PAGE: usize = 10_000;

/// An id of at most `max` bytes: the id itself, or its first bytes (cut at a character
/// boundary) followed by `~` and 16 hex digits of a 64-bit FNV-1a hash of the whole id — stable
/// across processes, so a long id stays one session. `true` when it was cut.
pub fn cap_id(id: String, max: usize) -> (String, bool) {
    if id.len() <= max {
        return (id, false);
    }
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in id.as_bytes() {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    let mut keep = max.saturating_sub(17);
    while !id.is_char_boundary(keep) {
        keep -= 1;
    }
    (format!("{}~{h:016x}", &id[..keep]), true)
}

/// One turn, as `GET /sessions/{id}` shows it. Times in ns on the proxy's monotonic clock,
/// offsets from the turn's first request byte.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct TurnSummary {
    /// The turn's index in the session.
    pub turn_index: u32,
    /// How it ended.
    pub status: Status,
    /// The response's status.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub http_status: Option<u16>,
    /// Wall-clock ns since the epoch at the turn's first request byte.
    pub start_wall_ns: u64,
    /// Time to first token.
    pub ttft_ns: Option<u64>,
    /// Inter-token latency, median.
    pub itl_p50_ns: Option<f64>,
    /// Inter-token latency, 99th percentile.
    pub itl_p99_ns: Option<f64>,
    /// End to end.
    pub e2e_ns: Option<u64>,
    /// Prompt tokens.
    pub prompt_tokens: Option<u64>,
    /// Cached prompt tokens.
    pub cached_tokens: Option<u64>,
    /// Output tokens.
    pub output_tokens: Option<u64>,
    /// Messages in the request.
    pub messages: Option<u32>,
    /// The replica it went to.
    pub upstream: Option<String>,
}

impl TurnSummary {
    /// The summary of a finished request's record.
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
    /// What this entry counts toward the byte bound.
    bytes: u64,
    first_wall_ns: u64,
    last_mono: MonoNs,
    last_wall_ns: u64,
    started: u32,
    in_flight: u32,
    turns: Vec<TurnSummary>,
    split: TimeSplit,
}

/// Where a session's time goes: waiting on the model (at least one of its requests in flight)
/// or between turns (none in flight: the agent's own tools and thinking, or a person).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct TimeSplit {
    model_ns: u64,
    between_ns: u64,
    /// Since when a request has been in flight (while one is).
    busy_since: Option<MonoNs>,
    /// When the last request in flight ended.
    idle_since: Option<MonoNs>,
}

impl TimeSplit {
    fn start(&mut self, now: MonoNs, in_flight_before: u32) {
        if in_flight_before == 0 {
            if let Some(t) = self.idle_since.take() {
                self.between_ns += now.saturating_sub(t);
            }
            self.busy_since = Some(now);
        }
    }

    fn end(&mut self, now: MonoNs, in_flight_after: u32) {
        if in_flight_after == 0 {
            if let Some(t) = self.busy_since.take() {
                self.model_ns += now.saturating_sub(t);
            }
            self.idle_since = Some(now);
        }
    }

    /// (seconds waiting on the model, seconds between turns), up to `now`: a request in flight
    /// counts to now; the time since the last one ended is not counted until the next starts
    /// (it may be the session's end).
    fn secs(&self, now: MonoNs) -> (f64, f64) {
        let open = self.busy_since.map_or(0, |t| now.saturating_sub(t));
        (
            clock::secs(self.model_ns + open),
            clock::secs(self.between_ns),
        )
    }
}

/// One line of `GET /sessions`.
#[derive(Debug, Clone, Serialize)]
pub struct SessionBrief {
    /// The session's id.
    pub id: String,
    /// Turns started.
    pub turns: u32,
    /// Requests in flight.
    pub in_flight: u32,
    /// First request, wall clock ns.
    pub first_seen_wall_ns: u64,
    /// Last request started or ended, wall clock ns.
    pub last_activity_wall_ns: u64,
    /// Seconds since the last request started or ended.
    pub idle_s: f64,
    /// Seconds with at least one of the session's requests in flight: waiting on the model.
    pub model_s: f64,
    /// Seconds between its turns with none in flight: the agent's own time (tools, thinking, a
    /// person), from a turn's end to the next turn's start.
    pub between_turns_s: f64,
}

impl SessionBrief {
    fn of(id: &str, e: &Session, now: u64) -> SessionBrief {
        let (model_s, between_turns_s) = e.split.secs(now);
        SessionBrief {
            id: id.to_string(),
            turns: e.started,
            in_flight: e.in_flight,
            first_seen_wall_ns: e.first_wall_ns,
            last_activity_wall_ns: e.last_wall_ns,
            idle_s: clock::secs(now.saturating_sub(e.last_mono)),
            model_s,
            between_turns_s,
        }
    }
}

/// `GET /sessions/{id}`.
#[derive(Debug, Clone, Serialize)]
pub struct SessionDetail {
    /// The session's id.
    pub id: String,
    /// Turns started.
    pub turns_started: u32,
    /// Requests in flight.
    pub in_flight: u32,
    /// First request, wall clock ns.
    pub first_seen_wall_ns: u64,
    /// Last request started or ended, wall clock ns.
    pub last_activity_wall_ns: u64,
    /// As in [`SessionBrief`]: waiting on the model, and between turns.
    pub model_s: f64,
    /// Seconds between turns: the agent's own time.
    pub between_turns_s: f64,
    /// Its turns, in order.
    pub turns: Vec<TurnSummary>,
}

/// The bounded table.
pub struct Sessions {
    map: DashMap<String, Session>,
    ttl_ns: u64,
    max: usize,
    max_bytes: u64,
    /// Bytes the entries count (ids, turn summaries, overhead).
    bytes: AtomicU64,
    /// Sessions evicted (TTL or bounds).
    pub evictions: AtomicU64,
    /// Responses API chains: a response's id → the session it belongs to, so a request that
    /// names it in `previous_response_id` continues that session. At most `max` links; past
    /// that (or the TTL) the oldest go, and a turn chained to a lost link starts a session
    /// named by its `previous_response_id`.
    links: DashMap<String, (String, MonoNs)>,
    /// Chat conversations without an id: the hash of a request's messages → its session, so the
    /// next request, whose messages begin with them, continues it. One entry per open
    /// conversation (its last request's), bounded like `links`.
    prefixes: DashMap<u64, (String, MonoNs)>,
    /// Numbers the sessions `by_prefix` opens.
    opened: AtomicU64,
}

/// What a link-table entry counts toward the byte bound.
trait EntryBytes {
    fn entry_bytes(&self, session: &str) -> u64;
}

impl EntryBytes for String {
    fn entry_bytes(&self, session: &str) -> u64 {
        (self.len() + session.len()) as u64 + LINK_BYTES
    }
}

impl EntryBytes for u64 {
    fn entry_bytes(&self, session: &str) -> u64 {
        8 + session.len() as u64 + LINK_BYTES
    }
}

/// Removes a link table's entries idle past the TTL; their bytes leave `bytes`.
fn sweep_links<K: Eq + std::hash::Hash + EntryBytes>(
    map: &DashMap<K, (String, MonoNs)>,
    ttl: u64,
    now: MonoNs,
    bytes: &AtomicU64,
) {
    map.retain(|k, (s, t)| {
        let keep = now.saturating_sub(*t) < ttl;
        if !keep {
            bytes.fetch_sub(k.entry_bytes(s), Ordering::Relaxed);
        }
        keep
    });
}

/// Keeps a link table under `max` entries and the whole table under its byte bound (`over`):
/// past either, the entries older than the TTL go, then the oldest sixteenth.
fn make_room_in<K: Eq + std::hash::Hash + Clone + EntryBytes>(
    map: &DashMap<K, (String, MonoNs)>,
    max: usize,
    ttl: u64,
    now: MonoNs,
    bytes: &AtomicU64,
    over: impl Fn() -> bool,
) {
    if map.len() < max && !over() {
        return;
    }
    sweep_links(map, ttl, now, bytes);
    if map.len() < max && !over() {
        return;
    }
    let mut ages: Vec<(MonoNs, K)> = map.iter().map(|e| (e.value().1, e.key().clone())).collect();
    if ages.is_empty() {
        return;
    }
    let k = (ages.len() / 16).max(1);
    ages.select_nth_unstable_by_key(k - 1, |a| a.0);
    for (_, id) in ages.into_iter().take(k) {
        if let Some((k, (s, _))) = map.remove(&id) {
            bytes.fetch_sub(k.entry_bytes(&s), Ordering::Relaxed);
        }
    }
}

/// A turn summary's place in its session's list.
const TURN_SIZE: u64 = std::mem::size_of::<TurnSummary>() as u64;

/// What a turn summary holds outside its list: its upstream's name.
fn extra_bytes(t: Option<&TurnSummary>) -> u64 {
    t.and_then(|t| t.upstream.as_ref())
        .map_or(0, |u| u.len() as u64)
}

/// The session table's bounds: `--session-ttl`, `--max-sessions`, `--max-session-bytes`.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// A session idle this long is forgotten, ns.
    pub ttl_ns: u64,
    /// Most sessions kept.
    pub max: usize,
    /// Most bytes the table holds, each entry at its measured heap cost.
    pub max_bytes: u64,
}

impl Limits {
    /// The proxy's configured bounds.
    pub fn of(cfg: &crate::Config) -> Limits {
        Limits {
            ttl_ns: cfg.session_ttl.as_nanos().min(u64::MAX as u128) as u64,
            max: cfg.max_sessions,
            max_bytes: cfg.max_session_bytes,
        }
    }
}

impl Sessions {
    /// An empty table within `limits`.
    pub fn new(
        Limits {
            ttl_ns,
            max,
            max_bytes,
        }: Limits,
    ) -> Self {
        Sessions {
            map: DashMap::new(),
            ttl_ns,
            max: max.max(1),
            max_bytes: max_bytes.max(1),
            bytes: AtomicU64::new(0),
            evictions: AtomicU64::new(0),
            links: DashMap::new(),
            prefixes: DashMap::new(),
            opened: AtomicU64::new(0),
        }
    }

    /// Response `response_id` belongs to `session`.
    pub fn link(&self, response_id: &str, session: &str) {
        let now = clock::now();
        make_room_in(&self.links, self.max, self.ttl_ns, now, &self.bytes, || {
            self.over_bytes()
        });
        let key = response_id.to_string();
        self.bytes
            .fetch_add(key.entry_bytes(session), Ordering::Relaxed);
        if let Some((k, (old, _))) = self.links.remove(&key) {
            self.bytes.fetch_sub(k.entry_bytes(&old), Ordering::Relaxed);
        }
        self.links.insert(key, (session.to_string(), now));
    }

    /// The session of a chat request without an id, from its message prefixes
    /// ([`crate::sniff::message_prefixes`]): the session whose last request's messages are the
    /// longest prefix of these (all of them: a retry), else a new one (`chat-` and 16 hex digits). This request
    /// then stands for its session. `None` for a request without messages.
    pub fn by_prefix(&self, prefixes: &[u64]) -> Option<String> {
        let &whole = prefixes.last()?;
        let now = clock::now();
        // Longest first; the whole list itself is a retry of the same request.
        let found = prefixes.iter().rev().find_map(|h| {
            self.prefixes.remove(h).map(|(k, (s, _))| {
                self.bytes.fetch_sub(k.entry_bytes(&s), Ordering::Relaxed);
                s
            })
        });
        let session = found.unwrap_or_else(|| {
            let n = self.opened.fetch_add(1, Ordering::Relaxed);
            format!(
                "chat-{:016x}",
                tokentap_core::rng::mix(whole ^ n.rotate_left(32))
            )
        });
        make_room_in(
            &self.prefixes,
            self.max,
            self.ttl_ns,
            now,
            &self.bytes,
            || self.over_bytes(),
        );
        self.bytes
            .fetch_add(whole.entry_bytes(&session), Ordering::Relaxed);
        if let Some((k, (old, _))) = self.prefixes.remove(&whole) {
            self.bytes.fetch_sub(k.entry_bytes(&old), Ordering::Relaxed);
        }
        self.prefixes.insert(whole, (session.clone(), now));
        Some(session)
    }

    /// Conversations followed by their messages now (one entry each).
    pub fn prefix_entries(&self) -> usize {
        self.prefixes.len()
    }

    /// The session a request continuing response `previous` belongs to: the linked one, else
    /// one named by `previous` itself.
    pub fn chained(&self, previous: &str) -> String {
        self.links
            .get(previous)
            .map_or_else(|| previous.to_string(), |e| e.value().0.clone())
    }

    /// Bytes the table counts now.
    pub fn bytes(&self) -> u64 {
        self.bytes.load(Ordering::Relaxed)
    }

    fn full(&self) -> bool {
        self.map.len() >= self.max || self.over_bytes()
    }

    fn over_bytes(&self) -> bool {
        self.bytes() >= self.max_bytes
    }

    /// Sessions in the table.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// No session.
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
            let before = s.in_flight;
            s.split.start(now, before);
            s.in_flight += 1;
            s.started += 1;
            return s.started - 1;
        }
        if self.full() {
            self.make_room(now);
        }
        let mut s = self.map.entry(id.to_string()).or_insert_with(|| {
            let bytes = id.len() as u64 + SESSION_BYTES;
            self.bytes.fetch_add(bytes, Ordering::Relaxed);
            Session {
                bytes,
                first_wall_ns: wall,
                last_mono: now,
                last_wall_ns: wall,
                started: 0,
                in_flight: 0,
                turns: Vec::new(),
                split: TimeSplit::default(),
            }
        });
        let before = s.in_flight;
        s.split.start(now, before);
        s.in_flight += 1;
        s.started += 1;
        s.started - 1
    }

    /// The turn ended (any status): appends its summary.
    pub fn end_turn(&self, id: &str, r: &TurnRecord) {
        let summary = TurnSummary::from_record(r);
        if let Some(mut s) = self.map.get_mut(id) {
            let now = clock::now();
            s.last_mono = now;
            s.last_wall_ns = clock::wall_now();
            s.in_flight = s.in_flight.saturating_sub(1);
            let after = s.in_flight;
            s.split.end(now, after);
            if s.turns.len() < MAX_TURNS {
                // The list's allocation, not its length: growth doubles it (the first push
                // would take four).
                if s.turns.capacity() == 0 {
                    s.turns.reserve_exact(1);
                }
                let cap = s.turns.capacity();
                s.turns.push(summary);
                let grown = (s.turns.capacity() - cap) as u64 * TURN_SIZE;
                let b = grown + extra_bytes(s.turns.last());
                s.bytes += b;
                self.bytes.fetch_add(b, Ordering::Relaxed);
            }
        }
        if self.bytes() > self.max_bytes {
            self.make_room(clock::now());
        }
    }

    /// Removes sessions idle longer than the TTL (none with a request in flight).
    pub fn sweep(&self) -> usize {
        let now = clock::now();
        let ttl = self.ttl_ns;
        // Links and prefixes idle past the TTL (their entries' bytes leave the count).
        sweep_links(&self.links, ttl, now, &self.bytes);
        sweep_links(&self.prefixes, ttl, now, &self.bytes);
        let mut n = 0;
        self.map.retain(|_, s| {
            let keep = s.in_flight > 0 || now.saturating_sub(s.last_mono) < self.ttl_ns;
            if !keep {
                n += 1;
                self.bytes.fetch_sub(s.bytes, Ordering::Relaxed);
            }
            keep
        });
        self.evictions.fetch_add(n as u64, Ordering::Relaxed);
        n
    }

    /// Sweeps, then evicts the least recently active sixteenth while the table is over a bound
    /// (a few rounds at most: each takes a sixteenth of what is left).
    fn make_room(&self, now: MonoNs) {
        if self.sweep() > 0 && !self.full() {
            return;
        }
        for _ in 0..64 {
            let evicted = self.evict_sixteenth();
            if self.over_bytes() {
                // Links and chat prefixes share the byte bound: their oldest sixteenth too.
                let ttl = self.ttl_ns;
                make_room_in(&self.links, 0, ttl, now, &self.bytes, || true);
                make_room_in(&self.prefixes, 0, ttl, now, &self.bytes, || true);
            }
            if !evicted || !self.full() {
                return;
            }
        }
    }

    /// Evicts the least recently active sixteenth; false when the table is empty.
    fn evict_sixteenth(&self) -> bool {
        let mut ages: Vec<(MonoNs, String)> = self
            .map
            .iter()
            .map(|e| (e.value().last_mono, e.key().clone()))
            .collect();
        let k = (ages.len() / 16).max(1).min(ages.len());
        if k == 0 {
            return false;
        }
        ages.select_nth_unstable(k - 1);
        for (_, id) in ages.into_iter().take(k) {
            if let Some((_, s)) = self.map.remove(&id) {
                self.bytes.fetch_sub(s.bytes, Ordering::Relaxed);
                self.evictions.fetch_add(1, Ordering::Relaxed);
            }
        }
        true
    }

    /// Sessions in the table and the turns they started: the scrape-time gauges, without
    /// copying an id.
    pub fn stats(&self) -> (usize, u64) {
        let mut turns = 0u64;
        let mut n = 0;
        for e in self.map.iter() {
            n += 1;
            turns += u64::from(e.started);
        }
        (n, turns)
    }

    /// One page of sessions in id order: at most `limit` (≤ [`MAX_PAGE`]) with an id after
    /// `after`; the second value is the id to continue after when more remain.
    pub fn page(&self, after: Option<&str>, limit: usize) -> (Vec<SessionBrief>, Option<String>) {
        let limit = limit.clamp(1, MAX_PAGE);
        // Ids first (no brief built for what the page skips), then the page's briefs.
        let mut ids: Vec<String> = self
            .map
            .iter()
            .filter(|e| after.is_none_or(|a| e.key().as_str() > a))
            .map(|e| e.key().clone())
            .collect();
        ids.sort_unstable();
        let more = ids.len() > limit;
        ids.truncate(limit);
        let now = clock::now();
        let page: Vec<SessionBrief> = ids
            .iter()
            .filter_map(|id| self.map.get(id).map(|e| SessionBrief::of(id, &e, now)))
            .collect();
        let next = more.then(|| ids.last().cloned()).flatten();
        (page, next)
    }

    /// Active sessions, most recently active first.
    pub fn list(&self) -> Vec<SessionBrief> {
        let now = clock::now();
        let mut v: Vec<SessionBrief> = self
            .map
            .iter()
            .map(|e| SessionBrief::of(e.key(), &e, now))
            .collect();
        v.sort_by_key(|s| std::cmp::Reverse(s.last_activity_wall_ns));
        v
    }

    /// The session `id`, with its turns.
    pub fn detail(&self, id: &str) -> Option<SessionDetail> {
        let now = clock::now();
        self.map.get(id).map(|s| SessionDetail {
            id: id.to_string(),
            turns_started: s.started,
            in_flight: s.in_flight,
            model_s: s.split.secs(now).0,
            between_turns_s: s.split.secs(now).1,
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

    fn rss_bytes() -> u64 {
        let s = std::fs::read_to_string("/proc/self/statm").expect("/proc/self/statm");
        let pages: u64 = s.split_whitespace().nth(1).unwrap().parse().unwrap();
        pages * 4096
    }

    /// A client naming 200,000 unknown `previous_response_id`s, each a session with a turn and
    /// a link, at the default limits: the table counts what it really allocates and stays under
    /// `--max-session-bytes` (before, it counted a third of it and held ~110 MB at 100,000).
    #[test]
    fn unknown_previous_ids_stay_under_the_byte_bound_at_the_defaults() {
        use crate::config::defaults;
        let t = Sessions::new(Limits {
            ttl_ns: u64::MAX / 2,
            max: defaults::MAX_SESSIONS,
            max_bytes: defaults::MAX_SESSION_BYTES,
        });
        let rec: TurnRecord = serde_json::from_value(serde_json::json!({
            "v": 1, "origin": "proxy", "status": "ok", "turn_index": 0, "start_mono_ns": 0,
            "anchor": {"wall_ns": 0, "mono_ns": 0}, "measured": {}
        }))
        .expect("a record");
        let before = rss_bytes();
        for i in 0..200_000u64 {
            let session = t.chained(&format!("resp_{i:032x}"));
            t.start_turn(&session);
            t.link(&format!("resp_{i:032x}_next"), &session);
            t.end_turn(&session, &rec);
        }
        let grown = rss_bytes().saturating_sub(before);
        assert!(
            t.bytes() <= defaults::MAX_SESSION_BYTES + 4096,
            "{}",
            t.bytes()
        );
        assert!(t.evictions.load(Ordering::Relaxed) > 0);
        // The heap's own growth: within a quarter of what the table counts.
        assert!(
            grown <= defaults::MAX_SESSION_BYTES * 5 / 4,
            "{} MB resident for a {} MB bound",
            grown >> 20,
            defaults::MAX_SESSION_BYTES >> 20
        );
    }

    #[test]
    fn numbers_turns_and_bounds_size() {
        let t = Sessions::new(Limits {
            ttl_ns: u64::MAX / 2,
            max: 32,
            max_bytes: u64::MAX,
        });
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
    fn long_ids_are_cut_stably_and_the_table_is_bounded_by_bytes() {
        let long = "é".repeat(30_000); // 60 KB, two-byte characters
        let (a, cut) = cap_id(long.clone(), 256);
        assert!(cut && a.len() <= 256, "{}", a.len());
        assert_eq!(cap_id(long.clone(), 256).0, a, "stable");
        let (b, _) = cap_id(format!("{long}x"), 256);
        assert_ne!(a, b, "different ids stay different");
        assert_eq!(cap_id("short".into(), 256), ("short".to_string(), false));

        // 1 MB of table for ids of 10 KB: about a hundred sessions, never more than the bound.
        let t = Sessions::new(Limits {
            ttl_ns: u64::MAX / 2,
            max: 1_000_000,
            max_bytes: 1 << 20,
        });
        for i in 0..2_000 {
            let id = format!("{i:05}{}", "x".repeat(10_000));
            t.start_turn(&id);
            t.end_turn(&id, &TurnRecord::new(Origin::Proxy, Anchor::now()));
            assert!(
                t.bytes() <= (1 << 20) + 20_000,
                "{} bytes at {i}",
                t.bytes()
            );
        }
        assert!(t.len() < 110 && t.len() > 50, "{}", t.len());
        assert!(t.evictions.load(Ordering::Relaxed) >= 1_890);
        // The byte count is exact: evicting everything brings it back to 0.
        let all = Sessions::new(Limits {
            ttl_ns: 0,
            max: 1_000_000,
            max_bytes: 1 << 20,
        });
        all.start_turn("a");
        all.end_turn("a", &TurnRecord::new(Origin::Proxy, Anchor::now()));
        all.sweep();
        assert_eq!(all.bytes(), 0);
    }

    #[test]
    fn pages_walk_the_table_in_id_order() {
        let t = Sessions::new(Limits {
            ttl_ns: u64::MAX / 2,
            max: 1000,
            max_bytes: u64::MAX,
        });
        for i in 0..25 {
            t.start_turn(&format!("s{i:02}"));
        }
        let mut seen = Vec::new();
        let mut after: Option<String> = None;
        loop {
            let (page, next) = t.page(after.as_deref(), 10);
            seen.extend(page.into_iter().map(|b| b.id));
            match next {
                Some(n) => after = Some(n),
                None => break,
            }
        }
        let want: Vec<String> = (0..25).map(|i| format!("s{i:02}")).collect();
        assert_eq!(seen, want);
    }

    #[test]
    fn chat_conversations_are_followed_by_their_prefix() {
        let t = Sessions::new(Limits {
            ttl_ns: u64::MAX,
            max: 100,
            max_bytes: u64::MAX,
        });
        let p = |msgs: &[&str]| {
            let body = serde_json::json!({ "messages": msgs.iter().map(|m| serde_json::json!({"role": "user", "content": m})).collect::<Vec<_>>() });
            crate::sniff::message_prefixes(body.to_string().as_bytes())
        };
        // Two conversations sharing a system prompt, interleaved.
        let a1 = t.by_prefix(&p(&["sys", "a"])).unwrap();
        let b1 = t.by_prefix(&p(&["sys", "b"])).unwrap();
        assert_ne!(a1, b1);
        assert_eq!(
            t.by_prefix(&p(&["sys", "b", "ans", "b2"])),
            Some(b1.clone())
        );
        assert_eq!(
            t.by_prefix(&p(&["sys", "a", "ans", "a2"])),
            Some(a1.clone())
        );
        assert_eq!(
            t.by_prefix(&p(&["sys", "a", "ans", "a2", "ans", "a3"])),
            Some(a1.clone())
        );
        // One entry per open conversation.
        assert_eq!(t.prefix_entries(), 2);
        // The same first message again is a new conversation.
        let a_again = t.by_prefix(&p(&["sys", "a"])).unwrap();
        assert_ne!(a_again, a1);
        assert!(t.by_prefix(&[]).is_none());
    }

    #[test]
    fn time_splits_into_model_and_between_turns() {
        let mut t = TimeSplit::default();
        // Turn 1: 0..10; two overlapping requests 15..30 and 20..40; then 45..50 still open.
        t.start(0, 0);
        t.end(10, 0);
        t.start(15, 0);
        t.start(20, 1);
        t.end(30, 1);
        t.end(40, 0);
        t.start(45, 0);
        let (m, b) = t.secs(50);
        assert_eq!((m, b), (clock::secs(10 + 25 + 5), clock::secs(5 + 5)));
    }

    #[test]
    fn ttl_sweep_spares_in_flight() {
        let t = Sessions::new(Limits {
            ttl_ns: 0,
            max: 10,
            max_bytes: u64::MAX,
        });
        t.start_turn("busy");
        t.start_turn("idle");
        t.end_turn("idle", &TurnRecord::new(Origin::Proxy, Anchor::now()));
        assert_eq!(t.sweep(), 1);
        assert!(t.detail("busy").is_some());
    }
}
