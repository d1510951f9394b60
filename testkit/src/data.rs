//! Datasets and directories for a test run.

use serde_json::{json, Value};
use std::path::{Path, PathBuf};
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

/// Writes a synthesized dataset to `path` (`tokentap_dataset::synth` with `cfg`).
pub fn write_synth(path: &Path, cfg: &SynthConfig) {
    let mut w = std::io::BufWriter::new(std::fs::File::create(path).expect("a writable path"));
    synth(cfg, &mut w).expect("synth writes");
    std::io::Write::flush(&mut w).expect("flush");
}

/// Chat messages as `tokentap dataset capture` keeps them (docs/usage.md, dataset capture):
/// every system message joined, in order, into the one system prompt first; consecutive user
/// messages one, their texts as content parts.
pub fn captured_form(messages: Vec<Value>) -> Value {
    let text = |m: &Value| match &m["content"] {
        Value::String(s) => s.clone(),
        Value::Array(p) => p.iter().filter_map(|x| x["text"].as_str()).collect(),
        _ => String::new(),
    };
    let parts = |m: &Value| match &m["content"] {
        Value::String(s) => vec![json!({"type": "text", "text": s})],
        Value::Array(p) => p.clone(),
        _ => Vec::new(),
    };
    let system: Vec<String> = messages
        .iter()
        .filter(|m| m["role"] == "system")
        .map(text)
        .filter(|t| !t.is_empty())
        .collect();
    let mut out: Vec<Value> = Vec::new();
    if !system.is_empty() {
        out.push(json!({"role": "system", "content": system.join(tokentap_dataset::capture::SYSTEM_JOIN)}));
    }
    for m in messages.into_iter().filter(|m| m["role"] != "system") {
        match out.last_mut() {
            Some(last) if last["role"] == "user" && m["role"] == "user" => {
                let mut p = parts(last);
                p.extend(parts(&m));
                last["content"] = Value::Array(p);
            }
            _ => out.push(m),
        }
    }
    Value::Array(out)
}
