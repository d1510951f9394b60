//! The wire's side: the proxy's [`TurnRecord`]s (origin `proxy`), read from the files
//! `tokentap proxy --records DIR` writes (`DIR/records-*.jsonl`) or from any `.jsonl` of records,
//! and reduced to the per-turn values [`crate::client::Metric`] names.

use crate::client::{Clock, Metric, Values};
use crate::error::CompareError;
use std::path::{Path, PathBuf};
use tokentap_core::record::{Status, TurnRecord};

/// One record the proxy wrote, with where it came from.
#[derive(Debug, Clone)]
pub struct WireTurn {
    /// `file:line`, for the reader.
    pub at: String,
    /// Which `--wire` path (one per proxy: a sidecar beside each replica) it came from.
    pub source: usize,
    /// The record without what the comparison does not read (its chunk stamps, reduced to
    /// [`WireTurn::values`], and any recorded content): memory is per turn, not per chunk.
    pub record: TurnRecord,
    values: Values,
    /// A hash of the recorded output text (`--record-content`), kept when the content is let go:
    /// the join key of a client that keeps only its outputs.
    pub output_hash: Option<u64>,
}

impl WireTurn {
    /// The turn's start (the proxy's first request byte) on `clock`.
    pub fn start_on(&self, clock: Clock) -> u64 {
        match clock {
            Clock::Mono => self.record.start_mono_ns,
            Clock::Wall => self.record.anchor.wall_of(self.record.start_mono_ns),
        }
    }

    /// The turn ended ok.
    pub fn ok(&self) -> bool {
        self.record.status == Status::Ok
    }

    /// The value of a recorded request header (names are stored lower-case by the proxy).
    pub fn header(&self, name: &str) -> Option<&str> {
        let lower = name.to_ascii_lowercase();
        self.record
            .headers
            .get(&lower)
            .or_else(|| self.record.headers.get(name))
            .map(String::as_str)
    }

    /// A wire turn of `record`: its values computed, then its chunks and content let go.
    pub fn new(at: String, source: usize, mut record: TurnRecord) -> WireTurn {
        let values = values_of(&record);
        let output_hash = record
            .content
            .as_ref()
            .and_then(|c| c.get("output")?.as_str().map(output_hash));
        record.measured.chunks = Vec::new();
        record.content = None;
        WireTurn {
            at,
            source,
            record,
            values,
            output_hash,
        }
    }

    /// The per-turn values, in the units of [`Metric`].
    pub fn values(&self) -> Values {
        self.values
    }
}

/// Per-turn values of a [`TurnRecord`] (the proxy's, or our replay client's): TTFT and E2E from
/// the timeline offsets, ITL as the mean of the per-token samples of docs/benchmark.md#metrics (a
/// chunk of k tokens after a gap g gives k samples of g/k), output tokens as recorded.
pub fn values_of(r: &TurnRecord) -> Values {
    let ms = |ns: Option<u64>| ns.map(|v| v as f64 / 1e6);
    let mut v = Values::default();
    v.set(Metric::Ttft, ms(r.measured.ttft_ns));
    v.set(Metric::E2e, ms(r.measured.e2e_ns));
    let (mut sum, mut n) = (0.0, 0u64);
    for s in r.measured.itl_samples() {
        sum += s;
        n += 1;
    }
    v.set(Metric::Itl, (n > 0).then(|| sum / n as f64 / 1e6));
    v.set(
        Metric::OutputTokens,
        r.osl.or(r.measured.output_tokens).map(|t| t as f64),
    );
    // The reference's TPOT needs the reference's count of the tokens after the first chunk.
    if let (Some(e2e), Some(ttft), Some(n)) = (r.measured.e2e_ns, r.measured.ttft_ns, r.tpot_tokens)
    {
        if n > 0 {
            v.set(
                Metric::Tpot,
                Some((e2e as f64 - ttft as f64) / n as f64 / 1e6),
            );
        }
    }
    let (mut gsum, mut gn) = (0.0, 0u64);
    for g in r.measured.inter_chunk_samples() {
        gsum += g;
        gn += 1;
    }
    v.set(Metric::ChunkGap, (gn > 0).then(|| gsum / gn as f64 / 1e6));
    v
}

/// Reads proxy records from each path: a directory (its `records-*.jsonl`, in name order) or a
/// file. Several paths are one wire view (one proxy beside each replica): each turn keeps the
/// index of its path in [`WireTurn::source`]. Requests that are not completions (`/v1/models`, health checks) are dropped and
/// counted, since no client reports them as turns.
pub fn load(paths: &[PathBuf]) -> Result<(Vec<WireTurn>, usize), CompareError> {
    let mut out = Vec::new();
    let mut ignored = 0;
    for (source, p) in paths.iter().enumerate() {
        let files = if p.is_dir() {
            let files = tokentap_core::record::files_in(p).map_err(|source| CompareError::Io {
                what: "cannot read the records directory",
                path: p.clone(),
                source,
            })?;
            if files.is_empty() {
                return Err(CompareError::NoWire { path: p.clone() });
            }
            files
        } else {
            vec![p.clone()]
        };
        for f in files {
            ignored += read_file(&f, source, &mut out)?;
        }
    }
    Ok((out, ignored))
}

fn read_file(path: &Path, source: usize, out: &mut Vec<WireTurn>) -> Result<usize, CompareError> {
    let mut ignored = 0;
    crate::formats::json::each_line(path, "cannot read proxy records", |line, text| {
        let record: TurnRecord =
            crate::formats::json::object_line(path, line, text, "a tokentap turn record")?;
        if !is_completion(&record) {
            ignored += 1;
            return Ok(());
        }
        out.push(WireTurn::new(
            format!("{}:{}", path.display(), line),
            source,
            record,
        ));
        Ok(())
    })?;
    Ok(ignored)
}

/// A generation request: its route ends in `completions` (chat or legacy), `responses` (the
/// Responses API) or `messages` (the Messages API). Records without a route are kept (older
/// files, replay records used as a wire).
fn is_completion(r: &TurnRecord) -> bool {
    match &r.route {
        Some(route) => route
            .split('?')
            .next()
            .is_some_and(|p| tokentap_core::api::Api::of_path(p.trim_end_matches('/')).is_some()),
        None => true,
    }
}

/// The hash an output text is joined by ([`WireTurn::output_hash`]).
pub fn output_hash(text: &str) -> u64 {
    tokentap_core::route::hash64(text.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokentap_core::clock::Anchor;
    use tokentap_core::record::Origin;
    use tokentap_core::timeline::ChunkStamp;

    #[test]
    fn values_use_per_token_itl_and_skip_non_completions() {
        let mut r = TurnRecord::new(
            Origin::Proxy,
            Anchor {
                wall_ns: 1_000,
                mono_ns: 10,
            },
        );
        r.measured.ttft_ns = Some(2_000_000);
        r.measured.e2e_ns = Some(10_000_000);
        r.measured.output_tokens = Some(5);
        // First chunk at 2 ms; then 2 tokens after 4 ms, 2 tokens after 2 ms: 4 samples 2,2,1,1.
        for (at, k) in [(2, 1), (6, 2), (8, 2)] {
            r.measured.chunks.push(ChunkStamp {
                at_ns: at * 1_000_000,
                tokens: k,
                text: true,
            });
        }
        let v = values_of(&r);
        assert_eq!(v.get(Metric::Ttft), Some(2.0));
        assert_eq!(v.get(Metric::E2e), Some(10.0));
        assert_eq!(v.get(Metric::Itl), Some(1.5));
        assert_eq!(v.get(Metric::OutputTokens), Some(5.0));

        r.route = Some("/v1/models".into());
        assert!(!is_completion(&r));
        r.route = Some("/v1/chat/completions".into());
        assert!(is_completion(&r));
        for (route, generates) in [
            ("/v1/messages", true),
            ("/v1/responses", true),
            ("/v1/messages/count_tokens", false),
            ("/v1/responses/resp_1", false),
        ] {
            r.route = Some(route.into());
            assert_eq!(is_completion(&r), generates, "{route}");
        }
        r.route = Some("/v1/chat/completions".into());
        let w = WireTurn::new("x:1".into(), 0, r);
        assert_eq!(w.start_on(Clock::Mono), 10);
        assert_eq!(w.start_on(Clock::Wall), 1_000);
    }
}
