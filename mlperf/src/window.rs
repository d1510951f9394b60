//! The reference's view of a performance window, folded from turn records (the replay's, or a
//! report reading them back): the samples of `result_summary.json` and the primary metrics.
//!
//! A record is a sample when the reference would have issued its turn — sent, or aborted after
//! a failure (the reference issues those and completes them at once with an error) — and it was
//! issued while the window was open. A turn never sent because issuing stopped is not.

use crate::result_summary::Primary;
use crate::result_summary::{self, Inputs};
use std::collections::BTreeMap;
use tokentap_core::clock::MonoNs;
use tokentap_core::record::{CountSource, Status, TurnRecord};

/// The reference would have issued this turn.
pub fn issued(r: &TurnRecord) -> bool {
    r.status != Status::Aborted
        || r.error.as_ref().is_some_and(|e| {
            e.kind == tokentap_core::record::ErrorKind::PreviousTurnFailed.as_str()
        })
}

/// The folded window.
#[derive(Debug, Default, Clone)]
pub struct Window {
    /// The samples, in the reference's terms.
    pub inputs: Inputs,
    /// Last completion of a tracked turn, absolute monotonic ns.
    pub last_complete: Option<MonoNs>,
    /// Tracked ok turns by the source of their OSL.
    pub osl_sources: BTreeMap<CountSource, u64>,
    /// Tracked turns by the source of their ISL.
    pub isl_sources: BTreeMap<CountSource, u64>,
    /// Every tracked sample, for the steady-state detector ([`crate::steady_state`]).
    pub steady_samples: Vec<crate::steady_state::Sample>,
}

impl Window {
    /// Folds one record if it is a tracked sample (issued while the window was open).
    pub fn fold(&mut self, r: &TurnRecord) {
        if r.status == Status::Ok && r.osl_source.is_some() {
            if let Some(osl) = r.osl {
                self.inputs.osl_full_run.push(osl as i64);
            }
        }
        if r.in_window != Some(true) || !issued(r) {
            return;
        }
        self.steady_samples.push(steady_sample(r));
        let inp = &mut self.inputs;
        inp.issued += 1;
        let m = &r.measured;
        if let Some(t) = m.ttft_ns {
            inp.ttft_ns.push(t as i64);
        }
        if let (Some(isl), Some(src)) = (r.isl, r.isl_source) {
            inp.isl.push(isl as i64);
            *self.isl_sources.entry(src).or_default() += 1;
        }
        if r.status == Status::Cancelled {
            // In flight when the run stopped: issued, never completed.
            return;
        }
        inp.completed += 1;
        let end = r.end_ns.unwrap_or(0);
        inp.latency_ns.push(end as i64);
        let complete = r.start_mono_ns + end;
        self.last_complete = Some(self.last_complete.map_or(complete, |c| c.max(complete)));
        if r.status != Status::Ok {
            inp.failed += 1;
            return;
        }
        if let Some(f) = m.finish_reason {
            inp.finish_reasons[result_summary::finish_reason_index(f.as_str())] += 1;
        }
        if let (Some(osl), Some(src)) = (r.osl, r.osl_source) {
            inp.osl.push(osl as i64);
            inp.interactivity.add(osl, end);
            *self.osl_sources.entry(src).or_default() += 1;
        }
        if let (Some(first), Some(tokens)) = (m.ttft_ns, r.tpot_tokens) {
            if let Some(v) = result_summary::tpot_ns(end as i64 - first as i64, tokens) {
                inp.tpot_ns.push(v);
            }
        }
    }

    /// Sets the tracked duration from the window's start (tracking starts at the run's start).
    pub fn close(&mut self, start_mono_ns: MonoNs) {
        self.inputs.duration_ns = self.last_complete.map(|c| c.saturating_sub(start_mono_ns));
    }

    /// Every OSL is the reference tokenizer's.
    pub fn reference_tokens(&self) -> bool {
        !self.osl_sources.is_empty() && self.osl_sources.keys().all(|s| s.is_reference())
    }

    /// The full-run OSL per-turn mean (the OSL gate's value); `None` without a completed turn.
    pub fn full_run_osl_mean(&self) -> Option<f64> {
        crate::result_summary::Series::Int(self.inputs.osl_full_run.clone())
            .rollup()
            .map(|r| r.avg)
    }

    /// The steady-state view of the tracked samples (an agentic run: the reference's
    /// experimental NATL and its window detector as tokentap's diagnostic), `concurrency`
    /// trajectories at a time over `dataset_size` trajectories a pass.
    pub fn steady_state(
        &self,
        concurrency: u64,
        dataset_size: u64,
    ) -> crate::steady_state::AgenticSteadyState {
        crate::steady_state::AgenticSteadyState::of(&self.steady_samples, concurrency, dataset_size)
    }

    /// The primary metrics of the window.
    pub fn primary(&self) -> Primary {
        Primary::compute(&self.inputs)
    }
}

fn steady_sample(r: &TurnRecord) -> crate::steady_state::Sample {
    let m = &r.measured;
    let done = r.status != Status::Cancelled;
    let end = r.end_ns.filter(|_| done);
    let ok = r.status == Status::Ok;
    crate::steady_state::Sample {
        issue_ns: r.start_mono_ns,
        ttft_ns: m.ttft_ns.map(|t| t as f64),
        latency_ns: end.map(|e| e as f64),
        tpot: match (ok, m.ttft_ns, end, r.tpot_tokens) {
            (true, Some(first), Some(e), Some(tokens)) if e > first => {
                Some(((e - first) as f64, tokens))
            }
            _ => None,
        },
        trajectory: format!(
            "{}#{}",
            r.conversation_id.as_deref().unwrap_or(""),
            r.pass.unwrap_or(0)
        ),
        output_tokens: if ok { r.osl } else { None },
    }
}
