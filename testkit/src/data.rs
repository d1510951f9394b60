//! Datasets and directories for a test run.

use std::path::PathBuf;
use std::sync::Arc;
use tokentap_dataset::synth::{synth, SynthConfig};
use tokentap_dataset::Dataset;

/// A dataset parsed from JSONL text (named `test.jsonl` in errors).
pub fn dataset(text: &str) -> Arc<Dataset> {
    Arc::new(Dataset::parse("test.jsonl", text).unwrap())
}

/// A synthesized dataset: `coding` and `workflow` trajectories, lengths scaled by `scale`
/// (`tokentap_dataset::synth`, the demo's generator).
pub fn synth_dataset(coding: usize, workflow: usize, scale: f64) -> Arc<Dataset> {
    let mut buf = Vec::new();
    let cfg = SynthConfig {
        coding,
        workflow,
        scale,
        ..SynthConfig::default()
    };
    synth(&cfg, &mut buf).unwrap();
    Arc::new(Dataset::parse("synth.jsonl", std::str::from_utf8(&buf).unwrap()).unwrap())
}

/// A fresh, empty directory under the system temp dir (`tempfile`), named after the test.
/// Kept after the test (a run's output is worth reading when it fails).
pub fn temp_dir(name: &str) -> PathBuf {
    tempfile::Builder::new()
        .prefix(&format!("tokentap-test-{name}-"))
        .tempdir()
        .expect("a temp dir")
        .keep()
}
