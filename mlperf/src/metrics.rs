//! The primary metrics of a measurement point (docs/benchmark.md#primary-metrics, the MLPerf
//! Endpoints rules' Pareto axes), derived from the same samples as `result_summary.json`.
//!
//! - `ttft_p90_ms`: p90 (numpy `lower`) of the tracked TTFTs.
//! - `tps_per_user` = 1000 / `tpot_p90_ms`, TPOT being the reference's (time after the first
//!   chunk over the tokens after it, counted with the reference tokenizer).
//! - `e2e_interactivity` = Σ OSL / Σ turn latency in seconds, over the tracked turns that
//!   completed with output (a failed turn has no output tokens; counting its latency would make
//!   failures look like slowness). tokentap's decision: the rules name the quantity, not the
//!   population.
//! - `system_tps` = Σ OSL / tracked duration (= `result_summary.json` `tps`);
//!   `qps` = completed / tracked duration (`qps`).

use crate::result_summary::{Inputs, Series};
use serde::{Deserialize, Serialize};

/// The rules' primary metrics of one point.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct Primary {
    pub system_tps: Option<f64>,
    pub tps_per_user: Option<f64>,
    pub e2e_interactivity: Option<f64>,
    pub ttft_p90_ms: Option<f64>,
    pub qps: Option<f64>,
    /// The TPOT p90 behind `tps_per_user`, ms.
    pub tpot_p90_ms: Option<f64>,
    /// The tracked duration the rates are over, s.
    pub tracked_duration_s: Option<f64>,
    /// Mean OSL per tracked turn (the OSL gate's value), tokens.
    pub osl_mean: Option<f64>,
}

/// Σ output tokens and Σ latency (ns) of the tracked turns that completed with output.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Interactivity {
    pub tokens: u64,
    pub latency_ns: u128,
}

impl Interactivity {
    pub fn add(&mut self, tokens: u64, latency_ns: u64) {
        self.tokens += tokens;
        self.latency_ns += u128::from(latency_ns);
    }

    pub fn value(&self) -> Option<f64> {
        (self.latency_ns > 0).then(|| self.tokens as f64 / (self.latency_ns as f64 / 1e9))
    }
}

impl Primary {
    pub fn compute(inputs: &Inputs) -> Primary {
        let t = inputs.throughput();
        let ttft = Series::Int(inputs.ttft_ns.clone()).rollup();
        let tpot = Series::Float(inputs.tpot_ns.clone()).rollup();
        let osl = Series::Int(inputs.osl.clone()).rollup();
        let tpot_p90_ms = tpot.and_then(|r| r.percentile(90.0)).map(|v| v / 1e6);
        Primary {
            system_tps: t.tps,
            tps_per_user: tpot_p90_ms.filter(|v| *v > 0.0).map(|v| 1000.0 / v),
            e2e_interactivity: inputs.interactivity.value(),
            ttft_p90_ms: ttft.and_then(|r| r.percentile(90.0)).map(|v| v / 1e6),
            qps: t.qps,
            tpot_p90_ms,
            tracked_duration_s: inputs
                .duration_ns
                .filter(|d| *d > 0)
                .map(|d| d as f64 / 1e9),
            osl_mean: osl.map(|r| r.avg),
        }
    }
}
