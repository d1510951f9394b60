//! deploy/replay-job.yaml: valid against Kubernetes' own schemas (1.25 and 1.37, strict, with
//! the PyPI `kubernetes-validate` that `scripts/install-test-deps` installs), wired consistently
//! (shard count, index, volume, paths), and its two commands run as written — N shards against a
//! real server, then the merge step — with Kubernetes' `$(VAR)` expansion done here.

use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_tokentap");

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn manifest() -> PathBuf {
    repo().join("deploy/replay-job.yaml")
}

fn tool(args: &[&str]) -> std::process::Output {
    let out = Command::new(repo().join("scripts/kubernetes-validate"))
        .args(args)
        .output()
        .expect("scripts/kubernetes-validate runs");
    assert!(
        out.status.success(),
        "scripts/kubernetes-validate {args:?} failed (install it with scripts/install-test-deps):\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn docs() -> Vec<Value> {
    let out = tool(&["json", manifest().to_str().unwrap()]);
    serde_json::from_slice(&out.stdout).expect("the manifest as JSON")
}

fn by_name<'a>(docs: &'a [Value], kind: &str, name: &str) -> &'a Value {
    docs.iter()
        .find(|d| d["kind"] == kind && d["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind} {name} in the manifest"))
}

/// A container's env as name → value (`valueFrom` ones as their field path).
fn env(c: &Value) -> BTreeMap<String, String> {
    c["env"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            let v = e["value"].as_str().map(str::to_string).unwrap_or_else(|| {
                e["valueFrom"]["fieldRef"]["fieldPath"]
                    .as_str()
                    .unwrap()
                    .to_string()
            });
            (e["name"].as_str().unwrap().to_string(), v)
        })
        .collect()
}

/// Kubernetes' `$(VAR)` expansion in args.
fn expand(arg: &str, vars: &BTreeMap<String, String>) -> String {
    let mut out = arg.to_string();
    for (k, v) in vars {
        out = out.replace(&format!("$({k})"), v);
    }
    assert!(!out.contains("$("), "unexpanded variable in {arg:?}");
    out
}

#[test]
fn the_manifest_passes_kubernetes_schemas() {
    for version in ["1.25.0", "1.37.0"] {
        let out = tool(&[
            "run",
            "--strict",
            "-k",
            version,
            manifest().to_str().unwrap(),
        ]);
        let text = String::from_utf8_lossy(&out.stderr).to_string()
            + &String::from_utf8_lossy(&out.stdout);
        for r in [
            "persistentvolumeclaim/tokentap-results",
            "job/tokentap-replay",
            "job/tokentap-merge",
        ] {
            assert!(text.contains(&format!("passed for resource {r}")), "{text}");
        }
    }
    // The checker does reject what Kubernetes would.
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.yaml");
    let text = std::fs::read_to_string(manifest()).unwrap();
    std::fs::write(
        &bad,
        text.replace(
            "completionMode: Indexed",
            "completionMode: Indexed\n  shards: 4",
        ),
    )
    .unwrap();
    let out = Command::new(repo().join("scripts/kubernetes-validate"))
        .args(["run", "--strict", "-k", "1.25.0", bad.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(!out.status.success());
}

#[test]
fn the_jobs_are_wired_consistently() {
    let d = docs();
    let claim = by_name(&d, "PersistentVolumeClaim", "tokentap-results");
    assert_eq!(claim["spec"]["accessModes"][0], "ReadWriteMany");
    let job = by_name(&d, "Job", "tokentap-replay");
    let spec = &job["spec"];
    assert_eq!(spec["completionMode"], "Indexed");
    assert_eq!(
        spec["completions"], spec["parallelism"],
        "every shard at once"
    );
    assert_eq!(spec["backoffLimit"], 0, "a shard is never issued twice");
    let pod = &spec["template"]["spec"];
    assert_eq!(pod["restartPolicy"], "Never");
    let c = &pod["containers"][0];
    let e = env(c);
    assert_eq!(
        e["SHARDS"],
        spec["completions"].as_u64().unwrap().to_string(),
        "SHARDS = completions"
    );
    assert_eq!(
        e["SHARD"],
        "metadata.annotations['batch.kubernetes.io/job-completion-index']"
    );
    let args: Vec<&str> = c["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    let after = |flag: &str| args[args.iter().position(|a| *a == flag).unwrap() + 1];
    assert_eq!(args[0], "replay");
    assert_eq!(after("--shard"), "$(SHARD)/$(SHARDS)");
    assert!(after("--out").starts_with("$(RESULTS)/"));
    assert_eq!(
        c["volumeMounts"][0]["mountPath"].as_str().unwrap(),
        e["RESULTS"]
    );
    assert_eq!(
        pod["volumes"][0]["persistentVolumeClaim"]["claimName"],
        "tokentap-results"
    );
    let merge = by_name(&d, "Job", "tokentap-merge");
    let mc = &merge["spec"]["template"]["spec"]["containers"][0];
    let me = env(mc);
    assert_eq!(me["SHARDS"], e["SHARDS"]);
    assert_eq!(me["RESULTS"], e["RESULTS"]);
    assert_eq!(
        merge["spec"]["template"]["spec"]["volumes"][0]["persistentVolumeClaim"]["claimName"],
        "tokentap-results"
    );
}

/// A small dataset with short tool delays (the manifest runs with `--delays`).
fn dataset(path: &Path) {
    let out = Command::new(BIN)
        .args(["dataset", "synth", "--coding", "6", "--workflow", "6"])
        .args(["--scale", "0.05", "-o"])
        .arg(path)
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = std::fs::read_to_string(path).unwrap();
    let mut lines = Vec::new();
    for l in text.lines() {
        let mut v: Value = serde_json::from_str(l).unwrap();
        if v.get("delay_seconds").is_some_and(|d| !d.is_null()) {
            v["delay_seconds"] = serde_json::json!(0.01);
        }
        lines.push(serde_json::to_string(&v).unwrap());
    }
    std::fs::write(path, lines.join("\n") + "\n").unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_jobs_commands_run_as_written_and_merge() {
    let d = docs();
    let job = by_name(&d, "Job", "tokentap-replay");
    let c = &job["spec"]["template"]["spec"]["containers"][0];
    let mut vars = env(c);
    let shards: u64 = vars["SHARDS"].parse().unwrap();
    let sim = tokentap_sim::SimServer::start(tokentap_sim::SimConfig::zero_delay())
        .await
        .unwrap();
    let results = tempfile::tempdir().unwrap();
    dataset(&results.path().join("dataset.jsonl"));
    vars.insert("ENDPOINT".into(), sim.base_url());
    vars.insert("RESULTS".into(), results.path().display().to_string());

    // The merge step starts first, as `kubectl apply` starts both Jobs: it must wait.
    let merge = by_name(&d, "Job", "tokentap-merge");
    let mc = &merge["spec"]["template"]["spec"]["containers"][0];
    let command: Vec<String> = mc["command"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().to_string())
        .collect();
    assert_eq!(command, ["/bin/sh", "-c"]);
    let script = mc["args"][0].as_str().unwrap().to_string();
    let bin_dir = Path::new(BIN).parent().unwrap().to_path_buf();
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let merge_env = env(mc);
    let mut merger = std::process::Command::new(&command[0]);
    merger
        .arg(&command[1])
        .arg(&script)
        .env("PATH", &path)
        .env("SHARDS", &merge_env["SHARDS"])
        .env("RESULTS", results.path())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let merger = merger.spawn().unwrap();

    // The N pods of the Indexed Job, side by side.
    let mut pods = Vec::new();
    for i in 0..shards {
        vars.insert("SHARD".into(), i.to_string());
        let args: Vec<String> = c["args"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| expand(a.as_str().unwrap(), &vars))
            .collect();
        pods.push(
            std::process::Command::new(BIN)
                .args(&args)
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap(),
        );
    }
    for (i, p) in pods.into_iter().enumerate() {
        let out = tokio::task::spawn_blocking(move || p.wait_with_output())
            .await
            .unwrap()
            .unwrap();
        assert!(
            out.status.success(),
            "shard {i}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let out = tokio::task::spawn_blocking(move || merger.wait_with_output())
        .await
        .unwrap()
        .unwrap();
    // Exit codes as the replay's: no preset means no gates, and a short point is a warning (as the
    // official checker has it), not a failure — 0, with the warning printed.
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(&format!("merged from {shards} of {shards} shards")),
        "{text}"
    );
    assert!(text.contains("verdict: no official gates"), "{text}");
    assert!(
        text.contains("! point-duration: tracked duration"),
        "{text}"
    );
    let summary: Value =
        serde_json::from_slice(&std::fs::read(results.path().join("merged/summary.json")).unwrap())
            .unwrap();
    assert_eq!(summary["run"]["trajectories_finished"], 12);
    assert_eq!(summary["config"]["model_discovered"], true);
    assert_eq!(
        summary["throughput"]["concurrency"].as_u64().unwrap(),
        shards * vars["CONCURRENCY"].parse::<u64>().unwrap()
    );
    assert!(results.path().join("merged/report.html").is_file());
}
