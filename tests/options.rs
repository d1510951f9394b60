//! Every `tokentap replay` option reaches the two places that decide whether two runs are the
//! same run: a resumed sweep's check against its `sweep.json` (`tokentap_sweep::compared_config`)
//! and merge's check that shards belong together (`tokentap_replay::merge::shared`). An option
//! that changes what is measured but is missing from either would let a sweep resume, or shards
//! merge, across different settings without a word. A new option needs a sample value here (the
//! test says so), or a place in one of the lists of options that rightly do not count.

use clap::Args as _;
use std::path::Path;
use tokentap_replay::{Opts, RunConfig};

const BASE: [&str; 4] = ["--endpoint", "http://127.0.0.1:1", "--dataset", "d.jsonl"];

/// Options that are not the run's settings at all: how this process reports (`quiet`,
/// `exit-zero`), or the dataset, which both comparisons see through its content hash once the
/// run has read it (not in a configuration built without the file).
const NOT_SETTINGS: [&str; 3] = ["quiet", "exit-zero", "dataset"];

/// Per point of a sweep: the point's own concurrency, this process's output directory and
/// metrics address.
const PER_POINT: [&str; 3] = ["concurrency", "out", "metrics"];

fn repo(p: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(p)
        .display()
        .to_string()
}

/// A value for `--flag` other than its default, and what the baseline needs for it to parse
/// (an option that requires another).
fn sample(flag: &str, seed_sets: &str) -> Option<(Vec<String>, Vec<String>)> {
    let v = |s: &[&str]| s.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    let none = Vec::new();
    Some(match flag {
        "endpoint" => (v(&["http://127.0.0.1:2"]), none),
        "ca" => (vec![repo("proxy/tests/certs/ca.pem")], none),
        "insecure"
        | "http2"
        | "http1"
        | "salt"
        | "delays"
        | "clear-generated"
        | "include-usage"
        | "stop-issuing-on-first-user-complete"
        | "user-rx-timestamps"
        | "record-outputs" => (none.clone(), none),
        "concurrency" => (v(&["2"]), none),
        "trajectories" => (v(&["5"]), none),
        "delay-scale" => (v(&["0.5"]), none),
        "model" => (v(&["other"]), none),
        "max-tokens" => (v(&["7"]), none),
        "preset" => (v(&["qwen"]), none),
        "temperature" => (v(&["0.3"]), none),
        "top-p" => (v(&["0.9"]), none),
        "top-k" => (v(&["5"]), none),
        "presence-penalty" => (v(&["0.1"]), none),
        "repetition-penalty" => (v(&["1.1"]), none),
        "frequency-penalty" => (v(&["0.2"]), none),
        "seed" => (v(&["3"]), none),
        "chat-template-kwargs" => (v(&[r#"{"enable_thinking":false}"#]), none),
        "routing-header" => (v(&["X-Other"]), none),
        "api-key" => (v(&["secret"]), none),
        "turn-timeout" => (v(&["5s"]), none),
        "max-duration" => (v(&["5s"]), none),
        "out" => (v(&["elsewhere"]), none),
        "shard" => (v(&["1/2"]), none),
        "tokenizer" => (vec![repo("testdata/golden/mlperf-ea33275/tokenizer")], none),
        "c-min" => (v(&["2"]), none),
        "min-duration-scale" => (v(&["0.5"]), none),
        "seed-set" => (v(&["A"]), none),
        // A newer file whose set A has other seeds than the bundled one.
        "seed-sets" => (vec![seed_sets.to_string()], v(&["--seed-set", "A"])),
        "max-event-bytes" => (v(&["4096"]), none),
        "warmup-trajectories" => (v(&["2"]), none),
        "warmup-duration" => (v(&["5s"]), none),
        "warmup-dataset" => (v(&["w.jsonl"]), v(&["--warmup-trajectories", "2"])),
        "warmup-concurrency" => (v(&["3"]), v(&["--warmup-trajectories", "2"])),
        "metrics" => (v(&["127.0.0.1:9"]), none),
        _ => return None,
    })
}

fn config(args: &[String]) -> RunConfig {
    let opts = Opts::try_parse_from_args(args)
        .unwrap_or_else(|e| panic!("tokentap replay {}: {e}", args.join(" ")));
    opts.resolve()
        .unwrap_or_else(|e| panic!("tokentap replay {}: {e}", args.join(" ")))
}

#[test]
fn every_replay_option_reaches_the_sweep_and_merge_comparisons() {
    let dir = tempfile::tempdir().unwrap();
    let seed_sets = dir.path().join("seed_sets.yaml");
    std::fs::write(
        &seed_sets,
        tokentap_mlperf::seeds::BUNDLED.replace(
            "model_seed:            9315206023656308754",
            "model_seed:            1",
        ),
    )
    .unwrap();
    assert_ne!(
        std::fs::read_to_string(&seed_sets).unwrap(),
        tokentap_mlperf::seeds::BUNDLED,
        "the sample seed-set file must differ from the bundled one"
    );
    let seed_sets = seed_sets.display().to_string();
    let cmd = Opts::augment_args(clap::Command::new("replay"));
    let mut checked = 0;
    for arg in cmd.get_arguments() {
        let Some(flag) = arg.get_long() else {
            continue;
        };
        if flag == "help" || NOT_SETTINGS.contains(&flag) {
            continue;
        }
        let (value, needs) = sample(flag, &seed_sets).unwrap_or_else(|| {
            panic!(
                "no sample value for --{flag}: add one to tests/options.rs (or name it among the \
                 options that are not a run's settings, with the reason)"
            )
        });
        let mut base: Vec<String> = BASE.iter().map(|s| s.to_string()).collect();
        base.extend(needs);
        let mut with = base.clone();
        with.push(format!("--{flag}"));
        with.extend(value);
        let a = config(&base);
        let b = config(&with);
        if !PER_POINT.contains(&flag) {
            assert_ne!(
                tokentap_sweep::compared_config(&a),
                tokentap_sweep::compared_config(&b),
                "--{flag} does not reach a sweep's resume check"
            );
        }
        // Per shard of a merged run: the keys merge leaves out of its same-run check.
        if !tokentap_replay::merge::PER_SHARD.contains(&flag) {
            assert_ne!(
                tokentap_replay::merge::shared(&a),
                tokentap_replay::merge::shared(&b),
                "--{flag} does not reach merge's same-run check"
            );
        }
        checked += 1;
    }
    assert!(checked >= 40, "only {checked} options checked");
}

/// `tokentap sweep` takes every `tokentap replay` option from the same declaration: the same
/// flag, environment variable, default, value name and help heading — all but `--concurrency`,
/// which is one number for a run and a list for a sweep (each command declares its own).
#[test]
fn sweep_declares_no_replay_option_again() {
    let replay = Opts::augment_args(clap::Command::new("replay"));
    let sweep = tokentap_sweep::Opts::augment_args(clap::Command::new("sweep"));
    let facts = |a: &clap::Arg| {
        (
            a.get_env().map(|e| e.to_string_lossy().into_owned()),
            a.get_default_values().to_vec(),
            a.get_value_names().map(|v| v.to_vec()),
            a.get_help_heading().map(str::to_string),
        )
    };
    let mut shared = 0;
    for r in replay.get_arguments() {
        let Some(flag) = r.get_long() else { continue };
        let Some(s) = sweep.get_arguments().find(|s| s.get_long() == Some(flag)) else {
            panic!("--{flag} is a replay option that tokentap sweep does not take");
        };
        if flag == "concurrency" {
            assert_eq!(
                s.get_env()
                    .map(|e| e.to_string_lossy().into_owned())
                    .as_deref(),
                Some("TOKENTAP_SWEEP_CONCURRENCY")
            );
            continue;
        }
        assert_eq!(
            facts(r),
            facts(s),
            "--{flag} differs between replay and sweep"
        );
        shared += 1;
    }
    assert!(shared >= 40, "only {shared} shared options");
}
