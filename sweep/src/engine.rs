//! The engine's view of a point (`--engine-metrics URL`, repeatable): the server's own
//! Prometheus endpoint (vLLM `vllm:*`, SGLang `sglang:*`, TensorRT-LLM `trtllm_*` at
//! `/prometheus/metrics`) scraped at the start and the end of
//! the point and every `--engine-interval` in between. The raw engine samples (only the
//! `vllm:`/`sglang:` lines of each scrape) go to `r<C>/engine-metrics.jsonl`; the point's view is
//! the change between the first and the last good scrape of each endpoint, summed over
//! endpoints (several replicas) and label sets: the engine's TTFT, ITL, E2E and queue-time
//! quantiles from its histograms, and its prefix-cache hit rate.
//!
//! Quantiles from histogram buckets interpolate linearly inside the bucket, as PromQL's
//! `histogram_quantile` does; they are as coarse as the engine's buckets. The engine's TTFT
//! starts at tokenization and excludes HTTP and network time (docs/benchmark.md#prometheus): the
//! client's TTFT minus the engine's is the time spent outside the engine.

use bytes::Bytes;
use serde::Serialize;
use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::PathBuf;
use std::time::Duration;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

pub use tokentap_run::sweep::{EngineView, Quantiles, ScrapeCost};

/// The raw engine samples of a point, in its directory.
pub const SAMPLES_FILE: &str = "engine-metrics.jsonl";

/// One sample line of the text exposition format.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// The series' name.
    pub name: String,
    /// Its labels, in order.
    pub labels: Vec<(String, String)>,
    /// Its value.
    pub value: f64,
}

/// Parses the Prometheus text format (0.0.4): comments and blank lines skipped, label values
/// unescaped, timestamps ignored. Lines that do not parse are skipped (a scrape is evidence,
/// not input we own); the count of skipped lines is returned.
pub fn parse(text: &str) -> (Vec<Sample>, usize) {
    let mut out = Vec::new();
    let mut bad = 0;
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        match parse_line(line) {
            Some(s) => out.push(s),
            None => bad += 1,
        }
    }
    (out, bad)
}

fn parse_line(line: &str) -> Option<Sample> {
    let name_end = line.find(['{', ' ', '\t'])?;
    let name = &line[..name_end];
    let mut rest = &line[name_end..];
    let mut labels = Vec::new();
    if rest.starts_with('{') {
        let mut chars = rest.char_indices().skip(1).peekable();
        let mut key = String::new();
        loop {
            let (_, c) = chars.next()?;
            match c {
                '}' => break,
                ',' | ' ' => continue,
                '=' => {
                    let (_, q) = chars.next()?;
                    if q != '"' {
                        return None;
                    }
                    let mut val = String::new();
                    loop {
                        let (_, c) = chars.next()?;
                        match c {
                            '\\' => match chars.next()?.1 {
                                'n' => val.push('\n'),
                                other => val.push(other),
                            },
                            '"' => break,
                            c => val.push(c),
                        }
                    }
                    labels.push((std::mem::take(&mut key), val));
                }
                c => key.push(c),
            }
        }
        let at = chars.peek().map_or(rest.len(), |(i, _)| *i);
        rest = &rest[at..];
    }
    let value = rest.split_whitespace().next()?;
    let value = match value {
        "+Inf" | "Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        v => v.parse().ok()?,
    };
    Some(Sample {
        name: name.to_string(),
        labels,
        value,
    })
}

/// One scrape reduced to what the view needs: histograms by family (buckets by bound, count,
/// sum) and counters, summed over label sets.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Snapshot {
    /// family → (le → cumulative count).
    buckets: BTreeMap<String, Vec<(f64, f64)>>,
    counts: BTreeMap<String, f64>,
    sums: BTreeMap<String, f64>,
    counters: BTreeMap<String, f64>,
}

impl Snapshot {
    /// The counters and histograms of one scrape's samples.
    pub fn of(samples: &[Sample]) -> Snapshot {
        let mut s = Snapshot::default();
        for x in samples {
            if let Some(f) = x.name.strip_suffix("_bucket") {
                let Some(le) = x.labels.iter().find(|(k, _)| k == "le") else {
                    continue;
                };
                let le = match le.1.as_str() {
                    "+Inf" | "Inf" => f64::INFINITY,
                    v => match v.parse::<f64>() {
                        // A bound is a finite number (or +Inf): anything else is not a bucket.
                        Ok(v) if v.is_finite() => v,
                        _ => continue,
                    },
                };
                let b = s.buckets.entry(f.to_string()).or_default();
                match b.iter_mut().find(|(l, _)| *l == le) {
                    Some(e) => e.1 += x.value,
                    None => b.push((le, x.value)),
                }
            } else if let Some(f) = x.name.strip_suffix("_count") {
                *s.counts.entry(f.to_string()).or_default() += x.value;
            } else if let Some(f) = x.name.strip_suffix("_sum") {
                *s.sums.entry(f.to_string()).or_default() += x.value;
            } else {
                *s.counters.entry(x.name.clone()).or_default() += x.value;
            }
        }
        for b in s.buckets.values_mut() {
            b.sort_by(|a, b| a.0.total_cmp(&b.0));
        }
        s
    }

    /// `later − self` (a counter that went down — an engine restart — counts from 0).
    pub fn delta(&self, later: &Snapshot) -> Snapshot {
        let d = |a: Option<&f64>, b: f64| {
            let a = a.copied().unwrap_or(0.0);
            if b >= a {
                b - a
            } else {
                b
            }
        };
        let map = |a: &BTreeMap<String, f64>, b: &BTreeMap<String, f64>| {
            b.iter()
                .map(|(k, v)| (k.clone(), d(a.get(k), *v)))
                .collect()
        };
        let mut buckets = BTreeMap::new();
        for (k, bs) in &later.buckets {
            let before = self.buckets.get(k);
            let v: Vec<(f64, f64)> = bs
                .iter()
                .map(|(le, c)| {
                    let a = before
                        .and_then(|b| b.iter().find(|(l, _)| l == le))
                        .map(|x| &x.1);
                    (*le, d(a, *c))
                })
                .collect();
            buckets.insert(k.clone(), v);
        }
        Snapshot {
            buckets,
            counts: map(&self.counts, &later.counts),
            sums: map(&self.sums, &later.sums),
            counters: map(&self.counters, &later.counters),
        }
    }

    /// Adds another endpoint's delta.
    pub fn add(&mut self, o: &Snapshot) {
        for (k, bs) in &o.buckets {
            let b = self.buckets.entry(k.clone()).or_default();
            for (le, c) in bs {
                match b.iter_mut().find(|(l, _)| l == le) {
                    Some(e) => e.1 += c,
                    None => b.push((*le, *c)),
                }
            }
            b.sort_by(|a, b| a.0.total_cmp(&b.0));
        }
        for (dst, src) in [
            (&mut self.counts, &o.counts),
            (&mut self.sums, &o.sums),
            (&mut self.counters, &o.counters),
        ] {
            for (k, v) in src {
                *dst.entry(k.clone()).or_default() += v;
            }
        }
    }

    fn quantiles(&self, families: &[&str]) -> Option<Quantiles> {
        let (f, b) = families
            .iter()
            .find_map(|f| self.buckets.get(*f).map(|b| (*f, b)))?;
        let count = self
            .counts
            .get(f)
            .copied()
            .or_else(|| b.last().map(|x| x.1))?;
        let sum = self.sums.get(f).copied();
        let q = |q: f64| histogram_quantile(b, q).map(|s| s * 1e3);
        Some(Quantiles {
            count,
            mean_ms: sum.filter(|_| count > 0.0).map(|s| s / count * 1e3),
            p50_ms: q(0.5),
            p90_ms: q(0.9),
            p99_ms: q(0.99),
            series: f.to_string(),
        })
    }

    fn counter(&self, names: &[&str]) -> Option<f64> {
        names.iter().find_map(|n| self.counters.get(*n).copied())
    }

    /// The view (cost and file filled in by the scraper).
    pub fn view(&self) -> EngineView {
        let has = |p: &str| {
            self.buckets
                .keys()
                .chain(self.counters.keys())
                .any(|k| k.starts_with(p))
        };
        let flavor = if has("vllm:") {
            "vllm"
        } else if has("sglang:") {
            "sglang"
        } else if has("trtllm_") {
            "trtllm"
        } else if has("llamacpp:") {
            // llama.cpp's server: counters and gauges only, no latency histograms.
            "llamacpp"
        } else {
            "unknown"
        };
        let ratio = |a: Option<f64>, b: Option<f64>| match (a, b) {
            (Some(a), Some(b)) if b > 0.0 => Some(a / b),
            _ => None,
        };
        let hit_rate = match flavor {
            "vllm" => ratio(
                self.counter(&[
                    "vllm:prefix_cache_hits_total",
                    "vllm:gpu_prefix_cache_hits_total",
                ]),
                self.counter(&[
                    "vllm:prefix_cache_queries_total",
                    "vllm:gpu_prefix_cache_queries_total",
                ]),
            ),
            "sglang" => ratio(
                self.counter(&["sglang:cached_tokens_total"]),
                self.counter(&["sglang:prompt_tokens_total"]),
            ),
            "trtllm" => ratio(
                self.counter(&["trtllm_prompt_cached_tokens_total"]),
                self.counter(&["trtllm_prompt_tokens_total"]),
            ),
            // llama.cpp counts prompt tokens excluding the cached ones.
            "llamacpp" => {
                let cached = self.counter(&["llamacpp:prompt_tokens_cached_total"]);
                let fresh = self.counter(&["llamacpp:prompt_tokens_total"]);
                ratio(cached, cached.zip(fresh).map(|(c, f)| c + f))
            }
            _ => None,
        };
        // llama.cpp has no latency histograms; its generation-time counter gives the mean time
        // per generated token (per slot), which is the mean ITL.
        let llama_itl = (flavor == "llamacpp")
            .then(|| {
                let n = self.counter(&["llamacpp:tokens_predicted_total"])?;
                let t = self.counter(&["llamacpp:tokens_predicted_seconds_total"])?;
                (n > 0.0).then(|| Quantiles {
                    count: n,
                    mean_ms: Some(t / n * 1e3),
                    p50_ms: None,
                    p90_ms: None,
                    p99_ms: None,
                    series: "llamacpp:tokens_predicted_seconds_total".into(),
                })
            })
            .flatten();
        EngineView {
            flavor: flavor.into(),
            endpoints: Vec::new(),
            ttft: self.quantiles(&[
                "vllm:time_to_first_token_seconds",
                "sglang:time_to_first_token_seconds",
                "trtllm_time_to_first_token_seconds",
            ]),
            itl: self
                .quantiles(&[
                    "vllm:inter_token_latency_seconds",
                    "vllm:time_per_output_token_seconds",
                    "sglang:inter_token_latency_seconds",
                    "trtllm_time_per_output_token_seconds",
                ])
                .or(llama_itl),
            e2e: self.quantiles(&[
                "vllm:e2e_request_latency_seconds",
                "sglang:e2e_request_latency_seconds",
                "trtllm_e2e_request_latency_seconds",
            ]),
            queue: self.quantiles(&[
                "vllm:request_queue_time_seconds",
                "sglang:queue_time_seconds",
                "trtllm_request_queue_time_seconds",
            ]),
            prefix_cache_hit_rate: hit_rate,
            cost: ScrapeCost::default(),
            samples_file: SAMPLES_FILE.into(),
            last_error: None,
        }
    }
}

/// PromQL's `histogram_quantile` over cumulative `(le, count)` pairs sorted by `le`: linear
/// interpolation inside the bucket the rank falls in (from 0 for the first bucket); a rank in
/// the +Inf bucket gives the highest finite bound. `None` without observations.
pub fn histogram_quantile(buckets: &[(f64, f64)], q: f64) -> Option<f64> {
    let total = buckets.last()?.1;
    if total <= 0.0 {
        return None;
    }
    let rank = q * total;
    let mut prev = (0.0, 0.0);
    for &(le, c) in buckets {
        if c >= rank {
            if le.is_infinite() {
                return Some(prev.0);
            }
            let width = c - prev.1;
            let f = if width > 0.0 {
                (rank - prev.1) / width
            } else {
                1.0
            };
            return Some(prev.0 + (le - prev.0) * f);
        }
        prev = (le, c);
    }
    Some(prev.0)
}

/// Engine lines of a scrape: `vllm:`, `sglang:`, `trtllm_` and `llamacpp:` series only (a real
/// server's endpoint also serves Python process metrics we do not keep).
fn engine_lines(text: &str) -> String {
    let mut o = String::new();
    for l in text.lines() {
        let t = l
            .trim_start_matches("# HELP ")
            .trim_start_matches("# TYPE ");
        let engine = ["vllm:", "sglang:", "trtllm_", "llamacpp:"]
            .iter()
            .any(|p| t.starts_with(p));
        if engine && !l.starts_with("# HELP") {
            o.push_str(l);
            o.push('\n');
        }
    }
    o
}

/// `GET url`, the body (replay's one small-GET client: hyper-util's, its connection kept
/// alive between scrapes, the answer bounded to [`MAX_SCRAPE_BYTES`]).
pub async fn get(url: &http::Uri, timeout: Duration) -> Result<Bytes, String> {
    static GETTER: std::sync::OnceLock<Result<tokentap_replay::get::Getter, String>> =
        std::sync::OnceLock::new();
    let getter = GETTER
        .get_or_init(|| tokentap_replay::get::Getter::new(&Default::default()))
        .as_ref()
        .map_err(Clone::clone)?;
    let answer = getter.get(url, &[], MAX_SCRAPE_BYTES, timeout).await?;
    if !answer.status.is_success() {
        return Err(format!("HTTP {}", answer.status));
    }
    Ok(answer.body)
}

/// The largest metrics page read (vLLM's is tens of kB; SGLang's with many series a few MB).
pub const MAX_SCRAPE_BYTES: usize = 64 << 20;

/// Checks and normalizes `--engine-metrics` URLs (http only; a bare host:port gets
/// `http://…/metrics`).
pub fn parse_url(s: &str) -> Result<http::Uri, String> {
    let full = if s.contains("://") {
        s.to_string()
    } else {
        format!("http://{s}")
    };
    let mut uri: http::Uri = full
        .parse()
        .map_err(|e| format!("--engine-metrics {s:?}: not a URL: {e}"))?;
    if uri.scheme_str() != Some("http") {
        return Err(format!(
            "--engine-metrics {s:?}: only http:// is supported (TLS comes with the https replay)"
        ));
    }
    if uri.host().is_none() {
        return Err(format!("--engine-metrics {s:?}: no host"));
    }
    if uri.path() == "/" || uri.path().is_empty() {
        uri = format!("{}/metrics", full.trim_end_matches('/'))
            .parse()
            .map_err(|e| format!("--engine-metrics {s:?}: {e}"))?;
    }
    Ok(uri)
}

#[derive(Serialize)]
struct Line<'a> {
    url: &'a str,
    wall_ns: u64,
    mono_ns: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    bytes: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    text: Option<&'a str>,
}

/// Scrapes `urls` once `start` fires (the measured phase begins; a warmup before it is not in
/// the view), every `interval` until `stop`, and once more after it; writes every scrape to
/// `dir/engine-metrics.jsonl` and returns the point's view. `None` when no endpoint answered
/// twice, or the measured phase never started.
pub async fn scrape_point(
    urls: Vec<http::Uri>,
    interval: Duration,
    start: tokio::sync::oneshot::Receiver<()>,
    stop: CancellationToken,
    dir: PathBuf,
) -> Result<Option<EngineView>, crate::error::SweepError> {
    tokio::select! {
        r = start => if r.is_err() { return Ok(None) },
        _ = stop.cancelled() => return Ok(None),
    }
    let path = dir.join(SAMPLES_FILE);
    let mut file = std::io::BufWriter::new(std::fs::File::create(&path).map_err(|source| {
        crate::error::SweepError::Io {
            what: "cannot create",
            path: path.clone(),
            source,
        }
    })?);
    let mut gathered = Gathered::new(urls.len());
    let mut ticker = tokio::time::interval(interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut stopping = false;
    loop {
        if !stopping {
            tokio::select! {
                _ = ticker.tick() => {}
                _ = stop.cancelled() => stopping = true,
            }
        }
        for (i, url) in urls.iter().enumerate() {
            let line = gathered.scrape(i, url).await?;
            writeln!(file, "{line}").map_err(|source| crate::error::SweepError::Io {
                what: "cannot write",
                path: path.clone(),
                source,
            })?;
        }
        if stopping {
            break;
        }
    }
    file.flush()
        .map_err(|source| crate::error::SweepError::Io {
            what: "cannot write",
            path: path.clone(),
            source,
        })?;
    Ok(gathered.view(&urls))
}

/// What a point's scrapes have gathered: each endpoint's first and last snapshot, what
/// scraping cost, and the last failure.
struct Gathered {
    first: Vec<Option<Snapshot>>,
    last: Vec<Option<Snapshot>>,
    cost: ScrapeCost,
    last_error: Option<String>,
}

impl Gathered {
    /// Nothing gathered yet from `n` endpoints.
    fn new(n: usize) -> Gathered {
        Gathered {
            first: vec![None; n],
            last: vec![None; n],
            cost: ScrapeCost::default(),
            last_error: None,
        }
    }

    /// Scrapes endpoint `i` (`url`) once and keeps its snapshot; returns the scrape's line for
    /// the samples file.
    async fn scrape(
        &mut self,
        i: usize,
        url: &http::Uri,
    ) -> Result<String, crate::error::SweepError> {
        let t0 = Instant::now();
        let got = get(url, Duration::from_secs(5)).await;
        let anchor = tokentap_core::clock::Anchor::now();
        let u = url.to_string();
        self.cost.scrapes += 1;
        let line = match &got {
            Ok(body) => {
                self.cost.bytes += body.len() as u64;
                let text = String::from_utf8_lossy(body);
                let kept = engine_lines(&text);
                let snap = Snapshot::of(&parse(&kept).0);
                if self.first[i].is_none() {
                    self.first[i] = Some(snap.clone());
                }
                self.last[i] = Some(snap);
                serde_json::to_string(&Line {
                    url: &u,
                    wall_ns: anchor.wall_ns,
                    mono_ns: anchor.mono_ns,
                    bytes: Some(body.len()),
                    error: None,
                    text: Some(&kept),
                })
            }
            Err(e) => {
                self.cost.failed += 1;
                self.last_error = Some(format!("{u}: {e}"));
                serde_json::to_string(&Line {
                    url: &u,
                    wall_ns: anchor.wall_ns,
                    mono_ns: anchor.mono_ns,
                    bytes: None,
                    error: Some(e),
                    text: None,
                })
            }
        };
        self.cost.busy_ms += t0.elapsed().as_secs_f64() * 1e3;
        line.map_err(|e| crate::error::SweepError::Internal(e.to_string()))
    }

    /// The point's view: what changed between each endpoint's first and last snapshot, summed;
    /// `None` when no endpoint answered.
    fn view(self, urls: &[http::Uri]) -> Option<EngineView> {
        let mut total: Option<Snapshot> = None;
        for (a, b) in self.first.iter().zip(&self.last) {
            if let (Some(a), Some(b)) = (a, b) {
                total.get_or_insert_with(Snapshot::default).add(&a.delta(b));
            }
        }
        total.map(|t| {
            let mut v = t.view();
            v.endpoints = urls.iter().map(|u| u.to_string()).collect();
            v.cost = self.cost;
            v.last_error = self.last_error;
            v
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = r#"# HELP vllm:time_to_first_token_seconds Histogram of time to first token in seconds.
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{le="0.01",model_name="m"} 0.0
vllm:time_to_first_token_seconds_bucket{le="0.1",model_name="m"} 10.0
vllm:time_to_first_token_seconds_bucket{le="1.0",model_name="m"} 20.0
vllm:time_to_first_token_seconds_bucket{le="+Inf",model_name="m"} 20.0
vllm:time_to_first_token_seconds_count{model_name="m"} 20.0
vllm:time_to_first_token_seconds_sum{model_name="m"} 5.0
vllm:prefix_cache_queries_total{model_name="m"} 1000.0
vllm:prefix_cache_hits_total{model_name="m"} 100.0
vllm:request_queue_time_seconds_bucket{le="0.5",model_name="m"} 20.0
vllm:request_queue_time_seconds_bucket{le="+Inf",model_name="m"} 20.0
vllm:request_queue_time_seconds_count{model_name="m"} 20.0
vllm:request_queue_time_seconds_sum{model_name="m"} 1.0
process_cpu_seconds_total 3.5
"#;
    const B: &str = r#"vllm:time_to_first_token_seconds_bucket{le="0.01",model_name="m"} 0.0
vllm:time_to_first_token_seconds_bucket{le="0.1",model_name="m"} 110.0
vllm:time_to_first_token_seconds_bucket{le="1.0",model_name="m"} 120.0
vllm:time_to_first_token_seconds_bucket{le="+Inf",model_name="m"} 120.0
vllm:time_to_first_token_seconds_count{model_name="m"} 120.0
vllm:time_to_first_token_seconds_sum{model_name="m"} 10.0
vllm:prefix_cache_queries_total{model_name="m"} 3000.0
vllm:prefix_cache_hits_total{model_name="m"} 1600.0
vllm:request_queue_time_seconds_bucket{le="0.5",model_name="m"} 30.0
vllm:request_queue_time_seconds_bucket{le="+Inf",model_name="m"} 40.0
vllm:request_queue_time_seconds_count{model_name="m"} 40.0
vllm:request_queue_time_seconds_sum{model_name="m"} 21.0
"#;

    #[test]
    fn parses_labels_escapes_and_specials() {
        let (s, bad) =
            parse("a{x=\"1,}\\\"2\",le=\"+Inf\"} 3 1700000000\nb 4.5\nc{} NaN\nbroken{x=1} 2\n");
        assert_eq!(bad, 1);
        assert_eq!(
            s[0].labels,
            [("x".into(), "1,}\"2".into()), ("le".into(), "+Inf".into())]
        );
        assert_eq!(s[0].value, 3.0);
        assert_eq!(s[1].value, 4.5);
        assert!(s[2].value.is_nan());
    }

    #[test]
    fn delta_view_and_quantiles() {
        let a = Snapshot::of(&parse(&engine_lines(A)).0);
        let b = Snapshot::of(&parse(B).0);
        let v = a.delta(&b).view();
        assert_eq!(v.flavor, "vllm");
        let t = v.ttft.unwrap();
        assert_eq!(t.count, 100.0);
        // 100 observations all in (0.01, 0.1]: p50 at rank 50 → 0.01 + 0.09 · 50/100.
        assert!((t.p50_ms.unwrap() - 55.0).abs() < 1e-9, "{t:?}");
        assert!((t.mean_ms.unwrap() - 50.0).abs() < 1e-9);
        assert!((v.prefix_cache_hit_rate.unwrap() - 0.75).abs() < 1e-12);
        assert!(v.itl.is_none());
        // Queue time: 20 more, 10 of them above the last finite bound (→ that bound, 0.5 s).
        let q = v.queue.unwrap();
        assert_eq!(q.count, 20.0);
        assert_eq!(q.mean_ms, Some(1000.0));
        assert_eq!(q.p90_ms, Some(500.0));
        assert_eq!(q.series, "vllm:request_queue_time_seconds");
        // process_* series are not kept in the raw samples.
        assert!(!engine_lines(A).contains("process_cpu"));
        // Two replicas add up; a reset counter counts from zero.
        let mut two = a.delta(&b);
        two.add(&b.delta(&a));
        assert_eq!(two.view().ttft.unwrap().count, 120.0);
    }

    /// Outside input (an engine's response): mutated scrapes never panic, and a quantile is
    /// always one of the finite bucket bounds' span.
    #[test]
    fn mutated_scrapes_never_panic() {
        let seeds = [A.as_bytes(), B.as_bytes()];
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let alphabet = b"{}=\",\\ \n#+-.0123456789eEInfNa_le:";
        for round in 0..3000 {
            let mut v = seeds[round % 2].to_vec();
            for _ in 0..(1 + next() % 8) {
                let at = (next() % v.len() as u64) as usize;
                match next() % 3 {
                    0 => v[at] = alphabet[(next() % alphabet.len() as u64) as usize],
                    1 => {
                        v.remove(at);
                    }
                    _ => v.insert(at, alphabet[(next() % alphabet.len() as u64) as usize]),
                }
            }
            let text = String::from_utf8_lossy(&v);
            let a = Snapshot::of(&parse(&engine_lines(&text)).0);
            let view = Snapshot::default().delta(&a).view();
            for q in [&view.ttft, &view.queue].into_iter().flatten() {
                for p in [q.p50_ms, q.p90_ms, q.p99_ms].into_iter().flatten() {
                    assert!(!p.is_infinite(), "{text}");
                }
            }
        }
    }

    #[test]
    fn llama_cpp_counters() {
        let a = "llamacpp:prompt_tokens_total 100\nllamacpp:prompt_tokens_cached_total 0\nllamacpp:tokens_predicted_total 10\nllamacpp:tokens_predicted_seconds_total 0.5\n";
        let b = "llamacpp:prompt_tokens_total 200\nllamacpp:prompt_tokens_cached_total 300\nllamacpp:tokens_predicted_total 110\nllamacpp:tokens_predicted_seconds_total 1.5\n";
        let snap = |t: &str| Snapshot::of(&parse(&engine_lines(t)).0);
        let v = snap(a).delta(&snap(b)).view();
        assert_eq!(v.flavor, "llamacpp");
        assert_eq!(v.prefix_cache_hit_rate, Some(0.75));
        let itl = v.itl.unwrap();
        assert_eq!(
            (itl.count, itl.mean_ms, itl.p50_ms),
            (100.0, Some(10.0), None)
        );
        assert!(v.ttft.is_none());
    }

    #[test]
    fn quantile_edges() {
        assert_eq!(
            histogram_quantile(&[(1.0, 0.0), (f64::INFINITY, 0.0)], 0.5),
            None
        );
        assert_eq!(
            histogram_quantile(&[(1.0, 1.0), (f64::INFINITY, 10.0)], 0.9),
            Some(1.0)
        );
        assert_eq!(
            histogram_quantile(&[(2.0, 4.0), (f64::INFINITY, 4.0)], 0.5),
            Some(1.0)
        );
    }

    #[test]
    fn urls() {
        assert_eq!(
            parse_url("127.0.0.1:8000").unwrap().to_string(),
            "http://127.0.0.1:8000/metrics"
        );
        assert_eq!(parse_url("http://h:1/m").unwrap().path(), "/m");
        assert!(parse_url("https://h/metrics").is_err());
    }
}
