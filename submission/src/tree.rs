//! Writing the tree: one curve of a finished (or partly finished) sweep directory, laid out as
//! the rules' submission tree and named as the official checker reads it.

use crate::owner;
use crate::submitter::Submitter;
use crate::{Missing, SubmissionError, Written};
use serde_json::{json, Map, Value};
use std::path::{Path, PathBuf};
use tokentap_mlperf::pareto::{self, RegionName, Regions};
use tokentap_mlperf::validity::{min_duration_s, ULTRA_LOW_CONCURRENCY_MAX};
use tokentap_run::config::{Preset, RunConfig, Warmup};
use tokentap_run::files;
use tokentap_run::summary::Summary;
use tokentap_run::sweep::{PointStatus, SweepFile};

/// Where tokentap's own implementation notes go, under the submission's `src/`.
pub const SRC_DIR: &str = "src/tokentap";
/// Where the submitter's own docs go, under the submission.
pub const DOCS_DIR: &str = "docs";

/// The checker's model directory name for each preset (its `model-name-valid` list).
fn model_dir_name(preset: Option<Preset>) -> Option<&'static str> {
    Some(match preset? {
        Preset::Kimi => "kimi-k3",
        Preset::Qwen => "qwen3_6-35b-a3b",
        Preset::Deepseek => "deepseek-v4_1-flash",
    })
}

/// The checker's canonical spelling of a model name (`layout.canonical_model_name`): the part
/// after the last `/`, every character other than a letter, digit, `_` or `-` as `_`, runs of
/// `_` folded, at most 64 characters.
pub fn canonical_model_name(name: &str) -> String {
    let part = name.rsplit('/').next().unwrap_or(name).trim();
    let mut out = String::new();
    for c in part.chars() {
        let c = if c.is_alphanumeric() || c == '_' || c == '-' {
            c
        } else {
            '_'
        };
        if !(c == '_' && out.ends_with('_')) {
            out.push(c);
        }
    }
    out.trim_matches('_').chars().take(64).collect()
}

/// A JSON file of the sweep's run directories, into its type (`Value` for the reference's
/// `result_summary.json`, which is copied as it is).
fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Result<T, SubmissionError> {
    let text = std::fs::read_to_string(path).map_err(|e| SubmissionError::Read {
        file: path.display().to_string(),
        error: e.to_string(),
    })?;
    serde_json::from_str(&text).map_err(|e| SubmissionError::Read {
        file: format!("{}:{}", path.display(), e.line()),
        error: format!("not the file tokentap writes: {e}"),
    })
}

/// `sweep.json`, into its type.
fn read_sweep(dir: &Path) -> Result<SweepFile, SubmissionError> {
    SweepFile::load(dir).map_err(|e| SubmissionError::Read {
        file: dir.join(files::SWEEP).display().to_string(),
        error: e.to_string(),
    })
}

fn write(path: &Path, bytes: &[u8]) -> Result<(), SubmissionError> {
    if let Some(d) = path.parent() {
        std::fs::create_dir_all(d).map_err(|e| SubmissionError::write(d, e))?;
    }
    std::fs::write(path, bytes).map_err(|e| SubmissionError::write(path, e))
}

fn yaml(v: &Value) -> Vec<u8> {
    // Invariant: a serde_json::Value always serialises to YAML.
    serde_yaml_ng::to_string(v)
        .expect("a JSON value is YAML")
        .into_bytes()
}

fn pretty(v: &Value) -> Vec<u8> {
    let mut s = serde_json::to_string_pretty(v).expect("a JSON value serialises");
    s.push('\n');
    s.into_bytes()
}

/// One finished point of the sweep, read back from its directory.
struct Point {
    concurrency: u64,
    dir: PathBuf,
    summary: Summary,
    /// The reference's schema, copied as it is.
    result_summary: Value,
    /// Σ OSL / duration, as the checker derives `system_tps` from `result_summary.json`.
    system_tps: Option<f64>,
}

fn derived_system_tps(rs: &Value) -> Option<f64> {
    let d = rs["duration_ns"].as_f64().filter(|d| *d > 0.0)?;
    let total = rs["output_sequence_lengths"]["total"].as_f64()?;
    Some(total / (d / 1e9))
}

/// The SWE-bench result of each mandatory region, placed at one point of that region the way
/// the checker assigns accuracy results to its four bands: the low-latency band is any point
/// at 1–32 (the lowest), the others the highest point of their region; no point carries two.
fn place_swe_bench(
    concurrencies: &[u64],
    c_max: Option<u64>,
    given: &[(RegionName, f64)],
) -> (Vec<(u64, f64)>, Vec<Missing>) {
    let mut placed: Vec<(u64, f64)> = Vec::new();
    let mut missing = Vec::new();
    let derived = match (concurrencies.iter().min(), c_max) {
        (Some(&lo), Some(hi)) => pareto::regions(lo.min(ULTRA_LOW_CONCURRENCY_MAX), hi).ok(),
        _ => None,
    };
    for name in RegionName::MANDATORY {
        let Some((_, v)) = given.iter().rev().find(|(n, _)| *n == name) else {
            missing.push(Missing {
                fact: format!(
                    "the SWE-bench accuracy of the {name} region (--swe-bench-accuracy {name}=FRACTION)"
                ),
                rule: "accuracy-coverage",
            });
            continue;
        };
        let free = |c: &&u64| !placed.iter().any(|(p, _)| p == *c);
        let at = if name == RegionName::LowLatency {
            concurrencies
                .iter()
                .filter(|c| **c <= ULTRA_LOW_CONCURRENCY_MAX)
                .filter(free)
                .min()
                .copied()
        } else {
            derived.as_ref().and_then(|r| {
                concurrencies
                    .iter()
                    .filter(|c| r.region_of(**c) == Some(name))
                    .filter(free)
                    .max()
                    .copied()
            })
        };
        match at {
            Some(c) => placed.push((c, *v)),
            None => missing.push(Missing {
                fact: format!(
                    "a finished point in the {name} region to carry its SWE-bench result"
                ),
                rule: "accuracy-coverage",
            }),
        }
    }
    (placed, missing)
}

/// `config.yaml`: the configuration the point ran, in the reference client's resolved-config
/// shape for an agentic run (its example configs: `model_params`, `datasets` with
/// `agentic_inference` and `accuracy_config`, `settings`, `endpoint_config`), plus tokentap's
/// own settings under `tokentap`.
fn config_yaml(p: &Point, model: &str, swe_bench: Option<f64>) -> Value {
    let cfg = &p.summary.config;
    let mut model_params = Map::new();
    model_params.insert("name".into(), json!(cfg.model));
    if let Ok(Value::Object(s)) = serde_json::to_value(&cfg.sampling) {
        for (k, v) in s {
            // The reference's YAML names the token budget max_new_tokens.
            let k = if k == "max_completion_tokens" {
                "max_new_tokens"
            } else {
                k.as_str()
            };
            model_params.insert(k.into(), v);
        }
    }
    let dataset_name = dataset_stem(cfg);
    let mut datasets = vec![json!({
        "name": dataset_name,
        "type": "performance",
        "path": cfg.dataset.as_ref().map(|d| &d.path),
        "accuracy_config": {"eval_method": "agentic_inference_inline"},
        "agentic_inference": {
            "turn_timeout_s": cfg.turn_timeout.map(|d| d.as_secs_f64()),
            "enable_salt": cfg.salt,
            "inject_tool_delay": cfg.delays,
            "num_trajectories_to_issue": p.summary.run.trajectory_budget,
            "stop_issuing_on_first_user_complete": cfg.stop_issuing_on_first_user_complete,
        },
    })];
    if let Some(v) = swe_bench {
        datasets.push(json!({
            "name": "swe_bench",
            "type": "accuracy",
            "accuracy_config": {"eval_method": "swe_bench_scorer", "num_repeats": 1},
            "tokentap": {"score_given": v, "note": "scored by the SWE-bench harness, given to tokentap with --swe-bench-accuracy"},
        }));
    }
    let seeds = cfg.seed_set.as_ref();
    json!({
        "name": format!("tokentap-{model}-r{}", p.concurrency),
        "version": "1.0",
        "type": "online",
        "model_params": model_params,
        "datasets": datasets,
        "settings": {
            "runtime": {
                "max_issue_duration_ms": cfg.max_duration.map(|d| (d.as_secs_f64() * 1000.0).round() as u64),
                "scheduler_rng_seed": seeds.map(|s| s.scheduler_rng_seed),
                "sample_index_rng_seed": seeds.map(|s| s.sample_index_rng_seed),
                "model_seed": seeds.map(|s| s.model_seed),
            },
            "load_pattern": {"type": "agentic_inference", "target_concurrency": p.concurrency},
            "warmup": (cfg.warmup != Warmup::default()).then_some(&cfg.warmup),
        },
        "endpoint_config": {
            "endpoints": cfg.endpoints.iter().map(|e| &e.base).collect::<Vec<_>>(),
            "api_type": "openai",
        },
        "report_dir": p.dir.file_name().map(|n| n.to_string_lossy().into_owned()),
        "tokentap": {
            "version": p.summary.tokentap_version,
            "delay_scale": cfg.delay_scale,
            "min_duration_scale": cfg.min_duration_scale,
            "dataset_hash": cfg.dataset.as_ref().and_then(|d| d.hash.as_ref()),
            "tokenizer": cfg.tokenizer,
            "shard": cfg.shard,
            "routing_headers": cfg.routing_headers,
        },
    })
}

fn dataset_stem(cfg: &RunConfig) -> String {
    cfg.dataset
        .as_ref()
        .and_then(|d| d.path.file_stem())
        .map_or("dataset".into(), |s| s.to_string_lossy().into_owned())
}

/// `accuracy_results.json`: the inline score of the performance run (`dataset_type:
/// performance`, a fraction, as the reference scorer reports it), and the SWE-bench result
/// placed at this point.
fn accuracy_results(p: &Point, swe_bench: Option<f64>) -> Value {
    let acc = &p.summary.accuracy;
    let mut entries = vec![json!({
        "dataset_name": dataset_stem(&p.summary.config),
        "dataset_type": "performance",
        "eval_method": "agentic_inference_inline",
        "score": acc.inline_accuracy,
        "num_samples": acc.scored_turns,
        "issued": acc.issued,
        "observed": acc.observed,
        "missing": acc.missing,
    })];
    if let Some(v) = swe_bench {
        entries.push(json!({
            "dataset_name": "swe_bench",
            "eval_method": "swe_bench_scorer",
            "score": v,
        }));
    }
    json!({ "accuracy_scores": entries })
}

/// `point.yaml`'s warmup declaration (rules §6.3.3): the declared warmup, its records kept
/// beside the point and linked; a point without one declares none.
fn warmup(p: &Point) -> (Value, bool) {
    if let Some(w) = &p.summary.warmup {
        (
            json!({
                "duration_s": w.duration_s,
                "requests_issued": w.requests_issued,
                "requests_completed": w.requests_completed,
                "data_source": w.source,
                "concurrency": w.concurrency,
                "initialization_steps": [],
                "logs_retained": true,
                "link_logs": tokentap_run::files::WARMUP_RECORDS,
            }),
            true,
        )
    } else {
        (
            json!({
                "duration_s": 0, "requests_issued": 0, "requests_completed": 0,
                "data_source": "none: no warmup was run", "concurrency": 0,
            }),
            false,
        )
    }
}

pub(crate) struct Plan<'a> {
    pub sweep_dir: &'a Path,
    pub out: &'a Path,
    pub submitter: Option<&'a Submitter>,
    /// Remove the points of the tree that are not this sweep's instead of refusing.
    pub replace: bool,
}

/// Every concurrency the sweep planned, done or not.
fn planned(sweep: &SweepFile) -> Vec<u64> {
    sweep.points.iter().map(|p| p.concurrency).collect()
}

/// Checks, before anything runs or is written, that the tree under `plan.out` holds no point of
/// another sweep (or, with `plan.replace`, that it may remove them): the model is the sweep's
/// configured one, as its points will be written.
pub(crate) fn preflight(plan: &Plan) -> Result<(), SubmissionError> {
    if plan.replace {
        return Ok(());
    }
    let sweep = read_sweep(plan.sweep_dir)?;
    let model = model_name(&sweep_config(plan.sweep_dir, &sweep)?, &mut Vec::new());
    let (root, system) = submission_root(plan.out, plan.submitter);
    let curve = Path::new("results").join(&system).join(&model);
    let id = owner::sweep_id(plan.sweep_dir, &sweep);
    let planned = planned(&sweep);
    let claim = owner::Claim {
        root: &root,
        sweep_id: &id,
        curve: &curve,
        planned: &planned,
    };
    owner::claim(&claim, false).map(|_| ())
}

pub(crate) fn write_tree(plan: &Plan) -> Result<Written, SubmissionError> {
    let sweep = read_sweep(plan.sweep_dir)?;
    let c_max = sweep.regions.as_ref().map(|r| r.c_max);
    let mut missing = Vec::new();
    if c_max.is_none() {
        missing.push(Missing {
            fact: "the curve's C_max (--c-max)".into(),
            rule: "max-concurrency-declared",
        });
    }
    let (points, skipped) = read_points(plan.sweep_dir, &sweep)?;
    let model = model_name(&points[0].summary.config, &mut missing);
    let s = plan.submitter;
    if s.is_none() {
        missing.extend(crate::submitter::missing_without_submitter());
    }
    let (root, system) = submission_root(plan.out, s);
    let curve_rel = Path::new("results").join(&system).join(&model);
    let curve = root.join(&curve_rel);
    let sweep_id = owner::sweep_id(plan.sweep_dir, &sweep);
    let replaced = owner::claim(
        &owner::Claim {
            root: &root,
            sweep_id: &sweep_id,
            curve: &curve_rel,
            planned: &planned(&sweep),
        },
        plan.replace,
    )?;

    let concurrencies: Vec<u64> = points.iter().map(|p| p.concurrency).collect();
    let (swe, swe_missing) = place_swe_bench(&concurrencies, c_max, &sweep.swe_bench);
    missing.extend(swe_missing);
    if points.iter().any(|p| p.summary.config.seed_set.is_none()) {
        missing.push(Missing {
            fact: "a published seed set (--seed-set ID)".into(),
            rule: "seed-set-membership",
        });
    }
    let max_tps = points
        .iter()
        .filter_map(|p| p.system_tps)
        .fold(0.0f64, f64::max);
    let curve_facts = CurveFacts {
        model: &model,
        c_max,
        regions: sweep.regions.as_ref(),
        submitter: s,
        max_tps,
    };
    for p in &points {
        let swe_here = swe
            .iter()
            .find(|(c, _)| *c == p.concurrency)
            .map(|(_, v)| *v);
        write_point(&curve, p, &curve_facts, swe_here)?;
    }
    write_submission_files(&root, &system, &sweep, &points, s)?;
    owner::mark(
        &root,
        &owner::WrittenBy {
            sweep_id,
            sweep_dir: plan.sweep_dir.to_path_buf(),
            curve: curve_rel,
            points: concurrencies.clone(),
        },
    )?;
    Ok(Written {
        submission_dir: root,
        curve_dir: curve,
        points: concurrencies,
        skipped,
        replaced,
        missing,
    })
}

/// The points of the sweep left out of the tree: each one's concurrency and why.
type Skipped = Vec<(u64, String)>;

/// The finished points of the sweep, read back from their directories, and the points skipped;
/// an error when none is finished.
fn read_points(
    sweep_dir: &Path,
    sweep: &SweepFile,
) -> Result<(Vec<Point>, Skipped), SubmissionError> {
    let mut points = Vec::new();
    let mut skipped = Vec::new();
    for p in &sweep.points {
        let c = p.concurrency;
        if p.status != PointStatus::Done {
            skipped.push((c, format!("status {}", json!(p.status))));
            continue;
        }
        let dir = sweep_dir.join(&p.dir);
        let result_summary: Value = read_json(&dir.join(files::RESULT_SUMMARY))?;
        points.push(Point {
            concurrency: c,
            summary: read_json(&dir.join(files::SUMMARY))?,
            system_tps: derived_system_tps(&result_summary),
            result_summary,
            dir,
        });
    }
    if points.is_empty() {
        return Err(SubmissionError::NoPoints(
            sweep_dir.join(files::SWEEP).display().to_string(),
        ));
    }
    Ok((points, skipped))
}

/// The curve's model directory name: the official one of the preset, else the canonical
/// spelling of the served model's (and a missing fact). `config` is a run's (or the sweep's)
/// configuration.
fn model_name(config: &RunConfig, missing: &mut Vec<Missing>) -> String {
    match model_dir_name(config.preset) {
        Some(m) => m.to_string(),
        None => {
            missing.push(Missing {
                fact: "one of the official models (--preset kimi|qwen|deepseek)".into(),
                rule: "model-name-valid",
            });
            canonical_model_name(config.model.as_deref().unwrap_or("model"))
        }
    }
}

/// The submission's directory (`out/<organization>/<submission>`) and its system's name, with
/// placeholders when no submitter is given.
fn submission_root(out: &Path, s: Option<&Submitter>) -> (PathBuf, String) {
    let name = |f: fn(&Submitter) -> &String, default: &str| {
        s.map_or(default.to_string(), |s| f(s).clone())
    };
    let root = out
        .join(name(|s| &s.organization, "unnamed-organization"))
        .join(name(|s| &s.submission, "unnamed-submission"));
    (root, name(|s| &s.system, "unnamed-system"))
}

/// The configuration every point of the sweep shares (`sweep.json`'s `config`), as a run's.
fn sweep_config(sweep_dir: &Path, sweep: &SweepFile) -> Result<RunConfig, SubmissionError> {
    sweep.run_config().map_err(|e| SubmissionError::Read {
        file: sweep_dir.join(files::SWEEP).display().to_string(),
        error: format!("config: {e}"),
    })
}

/// What every point of the curve is written with.
struct CurveFacts<'a> {
    model: &'a str,
    c_max: Option<u64>,
    /// The sweep's regions, when it declared them.
    regions: Option<&'a Regions>,
    submitter: Option<&'a Submitter>,
    max_tps: f64,
}

impl CurveFacts<'_> {
    /// The region of concurrency `c` on the curve, if the sweep declared its regions.
    fn region_of(&self, c: u64) -> Option<RegionName> {
        self.regions?.region_of(c)
    }
}

/// Writes one point's directory `curve/r<C>`: its summary, config, accuracy, point and system
/// files, its server configs and its warmup records.
fn write_point(
    curve: &Path,
    p: &Point,
    f: &CurveFacts,
    swe_here: Option<f64>,
) -> Result<(), SubmissionError> {
    let s = f.submitter;
    let dir = curve.join(format!("r{}", p.concurrency));
    write(&dir.join(files::RESULT_SUMMARY), &pretty(&p.result_summary))?;
    write(
        &dir.join("config.yaml"),
        &yaml(&config_yaml(p, f.model, swe_here)),
    )?;
    write(
        &dir.join("accuracy_results.json"),
        &pretty(&accuracy_results(p, swe_here)),
    )?;
    write(
        &dir.join("point.yaml"),
        &yaml(&point_yaml(
            p,
            f.model,
            f.c_max,
            f.region_of(p.concurrency),
            s,
        )),
    )?;
    write(
        &dir.join("system_desc.json"),
        &pretty(&system_desc(s, f.c_max, p, f.max_tps)),
    )?;
    let configs = dir.join("server_configs");
    std::fs::create_dir_all(&configs).map_err(|e| SubmissionError::write(&configs, e))?;
    let engine = p.dir.join("engine-metrics.jsonl");
    if engine.is_file() {
        copy(&engine, &configs.join("engine-metrics.jsonl"))?;
    }
    for file in s.map(|s| s.server_configs.as_slice()).unwrap_or_default() {
        if let Some(n) = file.file_name() {
            copy(file, &configs.join(n))?;
        }
    }
    let warm = p.dir.join(tokentap_run::files::WARMUP_RECORDS);
    if warm.is_file() {
        copy(&warm, &dir.join(tokentap_run::files::WARMUP_RECORDS))?;
    }
    Ok(())
}

/// Writes the files of the submission beside its curves: the system's power, tokentap's notes
/// under `src/`, and the docs.
fn write_submission_files(
    root: &Path,
    system: &str,
    sweep: &SweepFile,
    points: &[Point],
    s: Option<&Submitter>,
) -> Result<(), SubmissionError> {
    if let Some(power) = s.and_then(|s| s.system_power.as_ref()) {
        write(
            &root.join("results").join(system).join("system_power.json"),
            &pretty(&Value::Object(power.clone())),
        )?;
    }
    write(
        &root.join(SRC_DIR).join("README.md"),
        src_readme(sweep, points).as_bytes(),
    )?;
    match s.and_then(|s| s.docs.as_ref()) {
        Some(d) => copy_dir(d, &root.join(DOCS_DIR))?,
        None => {
            std::fs::create_dir_all(root.join(DOCS_DIR))
                .map_err(|e| SubmissionError::write(&root.join(DOCS_DIR), e))?;
        }
    }
    Ok(())
}

fn point_yaml(
    p: &Point,
    model: &str,
    c_max: Option<u64>,
    region: Option<RegionName>,
    s: Option<&Submitter>,
) -> Value {
    let cfg = &p.summary.config;
    let (warmup, warmed) = warmup(p);
    let scale = cfg.min_duration_scale.unwrap_or(1.0);
    let mut runtime = Map::new();
    if let Some(ss) = &cfg.seed_set {
        runtime.insert("scheduler_rng_seed".into(), json!(ss.scheduler_rng_seed));
        runtime.insert(
            "sample_index_rng_seed".into(),
            json!(ss.sample_index_rng_seed),
        );
        runtime.insert("model_seed".into(), json!(ss.model_seed));
    }
    let mut o = Map::new();
    o.insert("concurrency".into(), json!(p.concurrency));
    if let Some(r) = region {
        o.insert("region".into(), json!(r.as_str()));
    }
    o.insert("dataset".into(), json!(dataset_stem(cfg)));
    o.insert(
        "runtime_settings".into(),
        json!({
            "load_pattern": "agentic_inference",
            "min_duration_ms": (min_duration_s(p.concurrency) * scale * 1000.0).round() as u64,
            "stream_all_chunks": true,
            "runtime": runtime,
            "warmup": {"salt": warmed && cfg.salt},
        }),
    );
    o.insert("warmup".into(), warmup);
    o.insert("max_supported_concurrency".into(), json!(c_max));
    o.insert("model_name".into(), json!(model));
    o.insert("dataset_type".into(), json!("Performance"));
    o.insert("shared_src".into(), json!(SRC_DIR));
    o.insert("shared_docs".into(), json!(DOCS_DIR));
    o.insert(
        "seed_set".into(),
        json!(cfg.seed_set.as_ref().map(|s| &s.id)),
    );
    if let Some(s) = s {
        o.insert("division".into(), json!(s.division));
        o.insert("model_precision".into(), json!(s.model_precision));
        o.insert("link_to_model".into(), json!(s.link_to_model));
        for (k, v) in [
            (
                "link_to_model_transformation",
                &s.link_to_model_transformation,
            ),
            ("model_notes", &s.model_notes),
        ] {
            if let Some(v) = v {
                o.insert(k.into(), json!(v));
            }
        }
        o.insert(
            "dataset_name".into(),
            json!(s.dataset_name.clone().unwrap_or_else(|| dataset_stem(cfg))),
        );
        o.insert("dataset_link".into(), json!(s.dataset_link));
        o.insert("target_cohort".into(), json!(s.target_cohort));
        for (k, v) in &s.point {
            o.insert(k.clone(), v.clone());
        }
    } else {
        o.insert("dataset_name".into(), json!(dataset_stem(cfg)));
    }
    Value::Object(o)
}

fn system_desc(s: Option<&Submitter>, c_max: Option<u64>, p: &Point, max_tps: f64) -> Value {
    let mut d = s.map_or_else(Map::new, |s| s.system_desc.clone());
    if let Some(s) = s {
        d.entry("system_name").or_insert_with(|| json!(s.system));
        d.entry("submitter_org_names")
            .or_insert_with(|| json!(s.organization));
        d.entry("submission_id")
            .or_insert_with(|| json!(s.submission));
        d.insert("division".into(), json!(s.division));
        d.entry("model_precision")
            .or_insert_with(|| json!(s.model_precision));
        d.entry("link_to_model")
            .or_insert_with(|| json!(s.link_to_model));
        d.entry("dataset_link")
            .or_insert_with(|| json!(s.dataset_link));
    }
    d.insert("max_supported_concurrency".into(), json!(c_max));
    if let (Some(t), true) = (p.system_tps, max_tps > 0.0) {
        d.insert("tps_utilization".into(), json!(t / max_tps));
    }
    d.entry("dataset_type")
        .or_insert_with(|| json!("Performance"));
    Value::Object(d)
}

fn src_readme(sweep: &SweepFile, points: &[Point]) -> String {
    format!(
        "# tokentap\n\nThe measurement points of this curve were run by tokentap {}, the closed-loop \
         replay client whose request bodies are the MLPerf Endpoints reference client's, one run per \
         concurrency (`tokentap sweep`). Each point's `config.yaml` is the configuration it ran; the \
         sweep's own configuration:\n\n```json\n{}\n```\n\nPoints: {}.\n",
        sweep.tokentap_version,
        serde_json::to_string_pretty(&sweep.config).unwrap_or_default(),
        points
            .iter()
            .map(|p| format!("r{}", p.concurrency))
            .collect::<Vec<_>>()
            .join(", ")
    )
}

fn copy(from: &Path, to: &Path) -> Result<(), SubmissionError> {
    std::fs::copy(from, to)
        .map(|_| ())
        .map_err(|e| SubmissionError::Write {
            file: format!("{} → {}", from.display(), to.display()),
            error: e.to_string(),
        })
}

fn copy_dir(from: &Path, to: &Path) -> Result<(), SubmissionError> {
    std::fs::create_dir_all(to).map_err(|e| SubmissionError::write(to, e))?;
    let entries = std::fs::read_dir(from).map_err(|e| SubmissionError::Read {
        file: from.display().to_string(),
        error: e.to_string(),
    })?;
    for e in entries {
        let e = e.map_err(|e| SubmissionError::Read {
            file: from.display().to_string(),
            error: e.to_string(),
        })?;
        let path = e.path();
        if path.is_dir() {
            copy_dir(&path, &to.join(e.file_name()))?;
        } else {
            copy(&path, &to.join(e.file_name()))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_names_are_the_checkers() {
        assert_eq!(
            canonical_model_name("Qwen/Qwen3.6-35B-A3B"),
            "Qwen3_6-35B-A3B"
        );
        assert_eq!(canonical_model_name("llama3.1-8b"), "llama3_1-8b");
        assert_eq!(canonical_model_name("a..b"), "a_b");
    }

    #[test]
    fn swe_bench_results_go_one_per_band() {
        let given = [
            (RegionName::LowLatency, 0.9),
            (RegionName::LowConcurrency, 0.8),
            (RegionName::MedConcurrency, 0.7),
            (RegionName::HighConcurrency, 0.6),
        ];
        // C_min 1, C_max 36: low 2–4, medium 5–12, high 13–36.
        let (placed, missing) = place_swe_bench(&[1, 2, 4, 8, 12, 20, 36, 40], Some(36), &given);
        assert!(missing.is_empty(), "{missing:?}");
        assert_eq!(placed, [(1, 0.9), (4, 0.8), (12, 0.7), (36, 0.6)]);
        let (_, missing) = place_swe_bench(&[1, 2, 4], Some(36), &given[..1]);
        assert_eq!(missing.len(), 3);
        assert!(missing.iter().all(|m| m.rule == "accuracy-coverage"));
    }
}
