//! `compare.json` as the run's report reads it: what `tokentap compare --json
//! RUN_DIR/compare.json` leaves in a run directory (compare's report, schema
//! `tokentap-compare/1`, docs/compare.md), typed as far as a run's report shows it — the
//! verdict, the claims, the wire's sources, the joined pairs' TTFTs and the TTFT split.
//!
//! compare writes the whole report; this is the part a reader of the run directory needs, so
//! compare's many other fields may grow without touching the run's readers. Every field a
//! later compare added has its default (an earlier file still reads); the schema id is
//! required, so a JSON file of another tool is refused, not read as an empty comparison.
//! compare's own tests read its report back through this type.

use serde::{Deserialize, Deserializer};
use std::collections::BTreeMap;
use tokentap_core::stats::Dist;

/// The schema ids this reader knows (`schema`'s value): compare bumps it on an incompatible
/// change.
pub const SCHEMA: &str = "tokentap-compare/1";

/// A comparison of a client's file against the wire.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct CompareFile {
    /// [`SCHEMA`].
    #[serde(deserialize_with = "known_schema")]
    pub schema: String,
    /// The client file's format (`--format`).
    #[serde(default)]
    pub format: Option<String>,
    /// `pass`, `fail` or `no_data`.
    #[serde(default)]
    pub verdict: Option<String>,
    /// The verdict in one line, as the terminal prints it.
    #[serde(default)]
    pub headline: Option<String>,
    /// Why the verdict is not a pass.
    #[serde(default)]
    pub reasons: Vec<String>,
    /// Per proxy (`--wire` path): its turns, how many were joined, its replicas' turns.
    #[serde(default)]
    pub wire_sources: Vec<WireSource>,
    /// Per metric: the client's claims against the wire's.
    #[serde(default)]
    pub metrics: Vec<MetricClaims>,
    /// The joined pairs.
    #[serde(default)]
    pub pairs: Vec<Pair>,
    /// TTFT split by the engine's own timing, when the wire recorded it.
    #[serde(default)]
    pub ttft_split: Option<TtftSplit>,
}

/// One `--wire` path (one proxy).
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct WireSource {
    /// The proxy's records directory as given.
    pub path: String,
    /// Its turns.
    pub turns: u64,
    /// Its turns joined to a client turn.
    pub joined: u64,
    /// Turns per replica (the records' `upstream`).
    #[serde(default)]
    pub replicas: BTreeMap<String, u64>,
}

/// One metric's claims.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct MetricClaims {
    /// The metric's name (`ttft`, `itl`, `e2e`, `output_tokens`, `tpot`, `chunk_gap`).
    pub metric: String,
    /// `ms` or `tokens`.
    pub unit: String,
    /// One claim per percentile judged.
    #[serde(default)]
    pub claims: Vec<Claim>,
}

/// A claimed percentile against the wire's.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Claim {
    /// `p50`, `p90` or `p99`.
    pub stat: String,
    /// The client's value (`null`: not a number).
    pub client: Option<f64>,
    /// The wire's value over the same turns.
    pub wire: Option<f64>,
    /// client − wire.
    pub diff: Option<f64>,
    /// The |diff| that passes.
    pub tolerance: Option<f64>,
    /// `pass`, `fail` or `no_data`.
    pub verdict: String,
}

/// A joined pair: each side's TTFT and the wire's TTFT split.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Pair {
    /// The client's side.
    pub client: Side,
    /// The wire's side.
    pub wire: Side,
    /// The wire's TTFT split by the engine's own timing, when recorded.
    #[serde(default)]
    pub ttft_split: Option<tokentap_core::timeline::TtftSplit>,
}

/// One side of a pair, as far as the report plots it.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
pub struct Side {
    /// Time to first token, ms (`null`: not measured).
    #[serde(default)]
    pub ttft_ms: Option<f64>,
}

/// The joined pairs' TTFT split's distributions.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct TtftSplit {
    /// Pairs with the engine's timing.
    pub turns: u64,
    /// The engine's queue, ms.
    pub queue_ms: Option<Dist>,
    /// Scheduling to the first token inside the engine, ms.
    pub engine_ms: Option<Dist>,
    /// The wire's TTFT less both, ms.
    pub wire_outside_ms: Option<Dist>,
    /// The client's TTFT less both, ms.
    #[serde(default)]
    pub client_outside_ms: Option<Dist>,
}

fn known_schema<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    let s = String::deserialize(d)?;
    if s == SCHEMA {
        Ok(s)
    } else {
        Err(serde::de::Error::custom(format!(
            "schema {s:?}: expected {SCHEMA:?} (a tokentap compare --json report)"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Another tool's JSON object is refused by its schema, naming what was expected.
    #[test]
    fn another_schema_is_refused() {
        let e = serde_json::from_str::<CompareFile>(r#"{"schema": "aiperf/2", "pairs": []}"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("tokentap-compare/1"), "{e}");
        let e = serde_json::from_str::<CompareFile>(r#"{"pairs": []}"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("schema"), "{e}");
    }
}
