//! The submitter file: what only a submitter knows (organisation, system, division, model
//! precision, links, cohort, the system description, power), in YAML. tokentap never invents
//! one of these facts: a missing one is listed with the checker rule that needs it.
//!
//! Validation follows the official checker's file models (`submission_checker/models/file/
//! system.py`, `system_power.py`, `point_config.py`) for the fields they require, so a file
//! that loads here gives no schema error there; whatever the checker would reject is said here
//! first, naming the file and field.

use crate::Missing;
use serde::Deserialize;
use serde_json::{Map, Value};
use std::path::{Path, PathBuf};

/// The `point.yaml` fields tokentap writes from the run; a submitter file may not set them.
pub const POINT_KEYS_TOKENTAP_WRITES: [&str; 18] = [
    "concurrency",
    "region",
    "dataset",
    "runtime_settings",
    "warmup",
    "division",
    "max_supported_concurrency",
    "model_name",
    "model_precision",
    "link_to_model",
    "dataset_name",
    "dataset_type",
    "dataset_link",
    "shared_src",
    "shared_docs",
    "seed_set",
    "target_cohort",
    "steady_state",
];

/// The divisions of the rules.
pub const DIVISIONS: [&str; 3] = ["Standardized", "Serviced", "RDI"];

/// The submitter file, as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Submitter {
    /// `<organization>/`: the submitting organisation's directory (and `submitter_org_names`).
    pub organization: String,
    /// `<submission>/`: the submission's directory (and `submission_id`).
    pub submission: String,
    /// `results/<system>/`: the system's directory (and `system_name` unless the description
    /// names it).
    pub system: String,
    /// `Standardized`, `Serviced` or `RDI`.
    pub division: String,
    /// `YYYY-MM-C0` or `YYYY-MM-C1`.
    pub target_cohort: String,
    /// The lowest precision of the weights, e.g. `bf16`, `fp8`.
    pub model_precision: String,
    /// Where the model's weights are published.
    pub link_to_model: String,
    /// How the weights were transformed, if they were.
    #[serde(default)]
    pub link_to_model_transformation: Option<String>,
    /// Notes on the model.
    #[serde(default)]
    pub model_notes: Option<String>,
    /// Display name of the dataset; default: the dataset file's name.
    #[serde(default)]
    pub dataset_name: Option<String>,
    /// Where the dataset is published.
    pub dataset_link: String,
    /// `system_desc.json` without what tokentap measures or derives (`max_supported_concurrency`
    /// is the curve's C_max, `tps_utilization` each point's share of the curve's peak).
    pub system_desc: Map<String, Value>,
    /// `system_power.json` (the rules' Appendix E descriptor), required for Standardized.
    #[serde(default)]
    pub system_power: Option<Map<String, Value>>,
    /// A folder copied to the submission's `docs/`.
    #[serde(default)]
    pub docs: Option<PathBuf>,
    /// Files copied into every point's `server_configs/` (launch scripts, engine configs).
    #[serde(default)]
    pub server_configs: Vec<PathBuf>,
    /// Extra `point.yaml` fields for every point: `nodes_used`, `speculative_decoding`,
    /// `dp_shortfall`, `offline` …
    #[serde(default)]
    pub point: Map<String, Value>,
}

/// A submitter file that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum SubmitterError {
    /// It could not be read.
    #[error("{file}: cannot read: {error}")]
    Read {
        /// The file.
        file: String,
        /// The system's error.
        error: std::io::Error,
    },
    /// It is not a submitter file, or a field is wrong.
    #[error("{file}: {problem}")]
    Invalid {
        /// The file.
        file: String,
        /// The field and what was expected.
        problem: String,
    },
}

/// A field the checker's models require of the system description, and the message id.
const SYSTEM_DESC_REQUIRED: [&str; 6] = [
    "system_availability_status",
    "system_size",
    "system_node_ensemble_count",
    "system_node_ensemble_total",
    "shortened_system_name",
    "node_types",
];

const NODE_REQUIRED_STR: [&str; 4] = [
    "host_memory_configuration",
    "host_network_card_count",
    "driver",
    "filesystem",
];

impl Submitter {
    /// Reads and checks the file; every problem found, each naming the field.
    pub fn load(path: &Path) -> Result<Submitter, SubmitterError> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|error| SubmitterError::Read {
            file: file.clone(),
            error,
        })?;
        let s: Submitter =
            serde_yaml_ng::from_str(&text).map_err(|e| SubmitterError::Invalid {
                file: file.clone(),
                problem: format!(
                    "not a tokentap submitter file ({e}); `tokentap submission template` prints one to fill in"
                ),
            })?;
        let base = path.parent().unwrap_or(Path::new("."));
        let problems = s.problems(base);
        if problems.is_empty() {
            Ok(s.resolved(base))
        } else {
            Err(SubmitterError::Invalid {
                file,
                problem: problems.join("; "),
            })
        }
    }

    /// Relative paths are relative to the submitter file.
    fn resolved(mut self, base: &Path) -> Submitter {
        self.docs = self.docs.map(|d| base.join(d));
        self.server_configs = self.server_configs.iter().map(|p| base.join(p)).collect();
        self
    }

    fn problems(&self, base: &Path) -> Vec<String> {
        let mut out = Vec::new();
        for (field, v) in [
            ("organization", &self.organization),
            ("submission", &self.submission),
            ("system", &self.system),
        ] {
            if !dir_name_ok(v) {
                let shown: String = v.chars().take(80).collect();
                out.push(format!(
                    "`{field}`: {shown:?}{} is a directory name: letters, digits, `.`, `_`, `-`, not empty, not `.` or `..`, at most {MAX_DIR_NAME} bytes (it has {})",
                    if v.chars().count() > 80 { "…" } else { "" },
                    v.len()
                ));
            }
        }
        if !DIVISIONS.contains(&self.division.as_str()) {
            out.push(format!(
                "`division`: {:?} is not one of {} (system-description-valid)",
                self.division,
                DIVISIONS.join(", ")
            ));
        }
        if !cohort_ok(&self.target_cohort) {
            out.push(format!(
                "`target_cohort`: {:?} is not YYYY-MM-C0 or YYYY-MM-C1 (point-config-valid)",
                self.target_cohort
            ));
        }
        for (field, v) in [
            ("model_precision", &self.model_precision),
            ("link_to_model", &self.link_to_model),
            ("dataset_link", &self.dataset_link),
        ] {
            if v.trim().is_empty() {
                out.push(format!("`{field}` is empty (point-disclosure-complete)"));
            }
        }
        out.extend(system_desc_problems(&self.system_desc));
        match &self.system_power {
            Some(p) => out.extend(system_power_problems(p)),
            None if self.division == "Standardized" => out.push(
                "`system_power` is missing: a Standardized system needs its system_power.json (power-descriptor)"
                    .into(),
            ),
            None => {}
        }
        if let Some(d) = &self.docs {
            if !base.join(d).is_dir() {
                out.push(format!(
                    "`docs`: {} is not a folder",
                    base.join(d).display()
                ));
            }
        }
        for f in &self.server_configs {
            if !base.join(f).is_file() {
                out.push(format!(
                    "`server_configs`: {} is not a file",
                    base.join(f).display()
                ));
            }
        }
        for k in self.point.keys() {
            if POINT_KEYS_TOKENTAP_WRITES.contains(&k.as_str()) {
                out.push(format!(
                    "`point.{k}`: tokentap writes this field of point.yaml from the run itself"
                ));
            }
        }
        out
    }

    /// A commented file to fill in.
    pub fn template() -> &'static str {
        TEMPLATE
    }
}

/// The longest directory name the tree's names may be: a file name's limit on Linux filesystems
/// (NAME_MAX, 255 bytes), where writing a longer one fails.
const MAX_DIR_NAME: usize = 255;

fn dir_name_ok(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= MAX_DIR_NAME
        && s != "."
        && s != ".."
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}

/// `YYYY-MM-C0` / `YYYY-MM-C1` (the checker's `\d{4}-\d{2}-C[01]`).
pub fn cohort_ok(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 10
        && b[..4].iter().all(u8::is_ascii_digit)
        && b[4] == b'-'
        && b[5..7].iter().all(u8::is_ascii_digit)
        && &b[7..9] == b"-C"
        && matches!(b[9], b'0' | b'1')
}

/// What the checker's `SystemDescription` model would reject, by field.
fn system_desc_problems(d: &Map<String, Value>) -> Vec<String> {
    let mut out = Vec::new();
    let rule = "system-description-valid";
    for f in SYSTEM_DESC_REQUIRED {
        if d.get(f).is_none_or(Value::is_null) {
            out.push(format!("`system_desc.{f}` is missing ({rule})"));
        }
    }
    for f in ["max_supported_concurrency", "tps_utilization", "division"] {
        if d.contains_key(f) {
            out.push(format!(
                "`system_desc.{f}`: tokentap writes this from the sweep (the curve's C_max, each point's share of the peak, `division`)"
            ));
        }
    }
    let str_of = |k: &str| d.get(k).and_then(Value::as_str);
    for f in ["system_size", "shortened_system_name"] {
        if d.get(f).is_some_and(|v| !v.is_string()) {
            out.push(format!("`system_desc.{f}` must be a string ({rule})"));
        }
    }
    if let Some(n) = str_of("shortened_system_name") {
        if n.trim().is_empty() || n.chars().count() > 20 {
            out.push(format!(
                "`system_desc.shortened_system_name`: {n:?} must be 1 to 20 characters ({rule})"
            ));
        }
    }
    for f in ["system_node_ensemble_count", "system_node_ensemble_total"] {
        if d.get(f).is_some_and(|v| !v.is_u64()) {
            out.push(format!("`system_desc.{f}` must be an integer ({rule})"));
        }
    }
    match str_of("system_availability_status").map(str::to_ascii_lowercase) {
        Some(s)
            if s == "available"
                && str_of("availability_url").is_none_or(|u| u.trim().is_empty()) =>
        {
            out.push(format!(
                "`system_desc.availability_url` is missing: an Available system needs one ({rule})"
            ));
        }
        Some(s) if s == "preview" && str_of("target_availability_date").is_none() => {
            out.push(format!(
                "`system_desc.target_availability_date` (YYYY-MM-DD) is missing: a Preview system needs one ({rule})"
            ));
        }
        Some(s) if matches!(s.as_str(), "available" | "preview" | "rdi") => {}
        Some(s) => out.push(format!(
            "`system_desc.system_availability_status`: {s:?} is not Available, Preview or RDI ({rule})"
        )),
        None => {}
    }
    match d.get("node_types") {
        Some(Value::Array(nodes)) if !nodes.is_empty() => {
            for (i, n) in nodes.iter().enumerate() {
                let Some(n) = n.as_object() else {
                    out.push(format!(
                        "`system_desc.node_types[{i}]` must be a mapping ({rule})"
                    ));
                    continue;
                };
                for f in NODE_REQUIRED_STR {
                    if !n.get(f).is_some_and(Value::is_string) {
                        out.push(format!(
                            "`system_desc.node_types[{i}].{f}` is missing or not a string ({rule})"
                        ));
                    }
                }
                if !n.contains_key("host_processor_core_count")
                    && !n.contains_key("host_processor_vcpu_count")
                {
                    out.push(format!(
                        "`system_desc.node_types[{i}]`: needs host_processor_core_count or host_processor_vcpu_count ({rule})"
                    ));
                }
            }
        }
        Some(_) => out.push(format!(
            "`system_desc.node_types` must be a non-empty list ({rule})"
        )),
        None => {}
    }
    out
}

/// What the checker's `SystemPower` model requires at its top level (the arithmetic of
/// Appendix E is the checker's to judge).
fn system_power_problems(p: &Map<String, Value>) -> Vec<String> {
    let mut out = Vec::new();
    let rule = "power-descriptor";
    if !p.get("system_desc_id").is_some_and(Value::is_string) {
        out.push(format!("`system_power.system_desc_id` is missing ({rule})"));
    }
    match p.get("cooling").and_then(Value::as_str) {
        Some("liquid" | "air") => {}
        _ => out.push(format!(
            "`system_power.cooling` must be `liquid` or `air` ({rule})"
        )),
    }
    if p.get("node_sets")
        .and_then(Value::as_array)
        .is_none_or(Vec::is_empty)
    {
        out.push(format!(
            "`system_power.node_sets` must be a non-empty list ({rule})"
        ));
    }
    if !p.get("scale_out").is_some_and(Value::is_object) {
        out.push(format!("`system_power.scale_out` is missing ({rule})"));
    }
    out
}

/// The facts a tree written without a submitter file lacks, each with the rule that needs it.
pub fn missing_without_submitter() -> Vec<Missing> {
    [
        (
            "organization, submission, system (directory names)",
            "path-exists",
        ),
        ("division", "point-disclosure-complete"),
        ("model_precision", "point-disclosure-complete"),
        ("link_to_model", "point-disclosure-complete"),
        ("dataset_link", "point-disclosure-complete"),
        ("target_cohort", "point-disclosure-complete"),
        (
            "the system description (system_desc.json)",
            "system-description-valid",
        ),
        ("provisioned power (system_power.json)", "power-descriptor"),
        ("documentation (docs/)", "required-dir"),
    ]
    .into_iter()
    .map(|(fact, rule)| Missing {
        fact: fact.into(),
        rule,
    })
    .collect()
}

const TEMPLATE: &str = r#"# tokentap submitter file: the facts only you know about this submission. tokentap writes
# everything it measured itself (every point's point.yaml, config.yaml, result_summary.json,
# accuracy_results.json, the curve's C_max, each point's tps_utilization) and never invents
# one of these. Relative paths are relative to this file. See docs/submission.md.

organization: my-org            # <organization>/ directory
submission: my-org-2026-10      # <submission>/ directory
system: my-system               # results/<system>/ directory
division: Standardized          # Standardized | Serviced | RDI
target_cohort: 2026-10-C1       # YYYY-MM-C0 or YYYY-MM-C1
model_precision: bf16           # lowest precision of the weights
link_to_model: https://huggingface.co/Qwen/Qwen3.6-35B-A3B
# link_to_model_transformation: https://…   # quantisation / calibration write-up, if any
# model_notes: …
# dataset_name: MLPerf agentic inference    # default: the dataset file's name
dataset_link: https://…

# system_desc.json (rules §8.2), all but max_supported_concurrency, tps_utilization and division.
system_desc:
  system_name: My system
  system_availability_status: Available     # Available (needs availability_url) | Preview (needs target_availability_date) | RDI
  availability_url: https://…
  system_size: "1 node"
  system_node_ensemble_count: 1
  system_node_ensemble_total: 1
  shortened_system_name: my-system          # at most 20 characters
  serving_framework: sglang
  tensor_parallel: 8
  pipeline_parallel: 1
  expert_parallel: 1
  data_parallel: 1
  node_types:
    - system_node_ensemble_id: 0
      number_of_nodes: 1
      host_processor_model_name: …
      host_processor_core_count: 64
      host_memory_configuration: …
      host_network_card_count: "1"
      driver: …
      filesystem: …
      accelerator_info:
        - accelerator_model_name: …
          accelerators_per_node: 8

# system_power.json (rules Appendix E); required for Standardized.
system_power:
  system_desc_id: my-system
  cooling: air                    # air | liquid
  node_sets:
    - node_set_id: 0
      system_node_ensemble_id: 0
      nodes_provisioned: 1
      power_method: published_system
      published_power: {value_kw: 10.2, source_type: vendor_spec, source: https://…}
  scale_out: {present: false}

# docs: ./docs                   # copied to the submission's docs/
# server_configs: [./launch.sh]  # copied to every point's server_configs/
# point: {}                      # extra point.yaml fields: nodes_used, speculative_decoding, dp_shortfall
"#;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_template_is_a_valid_file_once_filled() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("s.yaml");
        std::fs::write(&p, TEMPLATE).unwrap();
        let s = Submitter::load(&p).unwrap();
        assert_eq!(s.organization, "my-org");
        // Each problem names its field and the checker's rule.
        let bad = TEMPLATE
            .replace("division: Standardized", "division: Open")
            .replace("  availability_url: https://…\n", "")
            .replace(
                "  shortened_system_name: my-system",
                "  shortened_system_name: a-name-far-longer-than-twenty",
            );
        std::fs::write(&p, bad).unwrap();
        let e = Submitter::load(&p).unwrap_err().to_string();
        for want in [
            "`division`: \"Open\"",
            "`system_desc.availability_url` is missing",
            "`system_desc.shortened_system_name`",
            "system-description-valid",
        ] {
            assert!(e.contains(want), "{want}: {e}");
        }
        std::fs::write(&p, "organization: x\n").unwrap();
        let e = Submitter::load(&p).unwrap_err().to_string();
        assert!(e.contains("tokentap submission template"), "{e}");
    }

    /// A name longer than a file name may be is refused when the file is loaded, not when the
    /// tree is written (ENAMETOOLONG).
    #[test]
    fn a_name_too_long_for_a_directory_is_refused_at_load() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("s.yaml");
        let long = "o".repeat(5000);
        std::fs::write(
            &p,
            TEMPLATE.replacen("organization: my-org", &format!("organization: {long}"), 1),
        )
        .unwrap();
        let e = Submitter::load(&p).unwrap_err().to_string();
        assert!(
            e.contains("`organization`") && e.contains("at most 255 bytes (it has 5000)"),
            "{e}"
        );
        assert!(
            e.len() < 1000,
            "the name is not echoed whole: {} bytes",
            e.len()
        );
        assert!(dir_name_ok(&"o".repeat(255)));
    }

    #[test]
    fn cohorts() {
        assert!(cohort_ok("2026-10-C1"));
        assert!(!cohort_ok("2026-10-C2"));
        assert!(!cohort_ok("2026-1-C1"));
    }
}
