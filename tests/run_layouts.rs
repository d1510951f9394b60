//! Run directories written by earlier tokentap versions (testdata/run-layouts: the demo's sweep
//! at three earlier commits) still read: the run report in every format, and the submission
//! tree of the sweep, with the numbers each file holds.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_tokentap");

fn layouts() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/run-layouts");
    let mut v: Vec<PathBuf> = std::fs::read_dir(&root)
        .expect("testdata/run-layouts")
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    v.sort();
    assert_eq!(v.len(), 3, "the committed layouts in {}", root.display());
    v
}

fn json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn run(args: &[&std::ffi::OsStr]) -> (String, String) {
    run_exit(args, 0)
}

fn run_exit(args: &[&std::ffi::OsStr], code: i32) -> (String, String) {
    let out = Command::new(BIN)
        .args(args)
        .output()
        .expect("tokentap runs");
    let (so, se) = (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    );
    assert_eq!(out.status.code(), Some(code), "tokentap {args:?}: {se}");
    (so, se)
}

#[test]
fn earlier_run_directories_report_and_submit() {
    let tmp = tempfile::tempdir().unwrap();
    for layout in layouts() {
        let name = layout.file_name().unwrap().to_string_lossy().into_owned();
        let sweep = layout.join("sweep");
        for c in [1, 2] {
            let point = sweep.join(format!("r{c}"));
            let summary = json(&point.join("summary.json"));
            // JSON: the summary's own numbers, as written.
            let (js, _) = run(&[
                "report".as_ref(),
                "--format".as_ref(),
                "json".as_ref(),
                point.as_os_str(),
            ]);
            let v: Value = serde_json::from_str(&js).unwrap();
            assert_eq!(v["verdict"], summary["validity"]["verdict"], "{name} r{c}");
            assert_eq!(
                v["mlperf"]["system_tps"], summary["mlperf"]["system_tps"],
                "{name} r{c}"
            );
            assert_eq!(
                v["latency_ms"]["ttft"]["p99"], summary["latency_ms"]["ttft"]["p99"],
                "{name} r{c}"
            );
            assert_eq!(
                v["accuracy"]["inline_accuracy"],
                summary["accuracy"]["inline_accuracy"]
            );
            // Markdown and the page.
            let (md, _) = run(&[
                "report".as_ref(),
                "--format".as_ref(),
                "md".as_ref(),
                point.as_os_str(),
            ]);
            assert!(
                md.contains("| ttft |") && md.contains("**Verdict:"),
                "{name} r{c}: {md}"
            );
            let page = tmp.path().join(format!("{name}-r{c}.html"));
            run(&[
                "report".as_ref(),
                "--out".as_ref(),
                page.as_os_str(),
                point.as_os_str(),
            ]);
            let html = std::fs::read_to_string(&page).unwrap();
            let model = summary["config"]["model"].as_str().unwrap();
            assert!(
                html.contains(&format!("model <b>{model}</b>")),
                "{name} r{c}"
            );
            assert!(html.contains("data-metric=\"system_tps\""), "{name} r{c}");
        }
        // The sweep's submission tree: both points, each with its run's configuration (exit 3:
        // a demo sweep lacks the facts of a submission, and says which).
        let out = tmp.path().join(format!("tree-{name}"));
        let (so, _) = run_exit(
            &[
                "submission".as_ref(),
                "write".as_ref(),
                sweep.as_os_str(),
                "--out".as_ref(),
                out.as_os_str(),
            ],
            3,
        );
        assert!(so.contains("(2 points: r1 r2)"), "{name}: {so}");
        let curves: Vec<PathBuf> = walk(&out)
            .into_iter()
            .filter(|p| p.ends_with("point.yaml"))
            .collect();
        assert_eq!(curves.len(), 2, "{name}: {curves:?}");
        for p in curves {
            let dir = p.parent().unwrap();
            let c: u64 = dir.file_name().unwrap().to_str().unwrap()[1..]
                .parse()
                .unwrap();
            let summary = json(&sweep.join(format!("r{c}/summary.json")));
            let cfg: Value =
                serde_yaml_ng::from_str(&std::fs::read_to_string(dir.join("config.yaml")).unwrap())
                    .unwrap();
            assert_eq!(
                cfg["model_params"]["name"], summary["config"]["model"],
                "{name} r{c}"
            );
            assert_eq!(
                cfg["datasets"][0]["agentic_inference"]["num_trajectories_to_issue"],
                summary["run"]["trajectory_budget"],
                "{name} r{c}"
            );
            let acc = json(&dir.join("accuracy_results.json"));
            assert_eq!(
                acc["accuracy_scores"][0]["score"], summary["accuracy"]["inline_accuracy"],
                "{name} r{c}"
            );
        }
    }
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}
