//! What the replay's tests import (`use tokentap_testkit::replay::*;`): a real sim, a replay
//! run with an output directory, and the records read back.

pub use crate::data::{dataset, synth_dataset, temp_dir};

use serde_json::Value;
use std::sync::Arc;
use tokentap_dataset::Dataset;
use tokentap_replay::{ProgressMode, RunOpts, RunOutcome};
use tokentap_sim::{SimConfig, SimServer};

/// A zero-delay sim that keeps request bodies, 8-token outputs, then `f`.
pub async fn sim_with(f: impl FnOnce(&mut SimConfig)) -> SimServer {
    let mut c = SimConfig::zero_delay();
    c.capture_bodies = true;
    c.output.mean_tokens = 8.0;
    c.output.sigma = 0.0;
    f(&mut c);
    SimServer::start(c).await.unwrap()
}

/// Options aimed at `sim` with model "m", writing into a fresh directory.
pub fn config(sim: &SimServer, name: &str) -> RunOpts {
    let mut c = RunOpts::new(&sim.base_url()).unwrap();
    c.model = Some("m".into());
    c.out = Some(temp_dir(name));
    c
}

/// Runs a replay of `opts`, resolved, to its end (no progress output, never interrupted) and
/// reads its records.
pub async fn run(opts: RunOpts, ds: Arc<Dataset>) -> (RunOutcome, Vec<Value>) {
    let config = opts.resolve().expect("the options resolve");
    let out = tokentap_replay::run_with(config, ds, ProgressMode::Off, std::future::pending())
        .await
        .unwrap();
    let recs = records(&out);
    (out, recs)
}

/// The run's `records.jsonl`, parsed.
pub fn records(out: &RunOutcome) -> Vec<Value> {
    let path = out
        .out_dir
        .as_ref()
        .unwrap()
        .join(tokentap_run::files::RECORDS);
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// A record's `status`.
pub fn status(r: &Value) -> &str {
    r["status"].as_str().unwrap()
}

/// A record's `conversation_id`.
pub fn conv(r: &Value) -> &str {
    r["conversation_id"].as_str().unwrap()
}

/// Records sorted by (trajectory, turn_index).
pub fn sorted(mut recs: Vec<Value>) -> Vec<Value> {
    recs.sort_by_key(|r| (r["trajectory"].as_u64(), r["turn_index"].as_u64()));
    recs
}

/// A number of a record.
pub fn u(v: &Value) -> u64 {
    v.as_u64().unwrap()
}
