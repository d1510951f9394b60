//! `tokentap sweep` against the real sim on 127.0.0.1:0: a curve with the expected
//! shape, every point's files, the engine's view scraped from the sim's `/metrics`, resume after
//! an interrupted point, the sweep report in headless Chromium, and the CLI (`--plan`,
//! `report --format md|json` on a sweep directory, the exit code of a curve that is not valid).

use serde_json::Value;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use tokentap_dataset::synth::{synth, SynthConfig};
use tokentap_sim::{SimConfig, SimServer};
use tokentap_sweep::{PointStatus, Sweep};
use tokentap_testkit::page::assert_reads_well;

const BIN: &str = env!("CARGO_BIN_EXE_tokentap");

/// Writes a small synthesized dataset (`coding` + `workflow` trajectories); returns its client
/// turns.
fn write_dataset(path: &Path, coding: usize, workflow: usize) -> usize {
    let mut f = std::io::BufWriter::new(std::fs::File::create(path).expect("create dataset"));
    let made = synth(
        &SynthConfig {
            coding,
            workflow,
            scale: 0.1,
            ..SynthConfig::default()
        },
        &mut f,
    )
    .expect("synth");
    std::io::Write::flush(&mut f).expect("flush");
    made.client_turns as usize
}

/// A sim whose decode slows by 15 % per extra concurrent request: throughput rises with
/// concurrency, per-user speed falls.
fn sim_config() -> SimConfig {
    let mut c = SimConfig::zero_delay();
    c.timing.prefill_base_ms = 2.0;
    c.timing.decode_ms = 1.0;
    c.timing.decode_slowdown = 0.15;
    c.output.mean_tokens = 40.0;
    c.output.sigma = 0.0;
    c.output.max_tokens = 64;
    c
}

fn args(sim: &SimServer, data: &Path, out: &Path, points: &str) -> Vec<String> {
    [
        "--endpoint",
        &sim.base_url(),
        "--dataset",
        &data.display().to_string(),
        "--concurrency",
        points,
        "--salt",
        "--model",
        "tokentap-sim",
        "--min-duration-scale",
        "0",
        "--quiet",
        "--out",
        &out.display().to_string(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

async fn sweep(args: &[String]) -> Sweep {
    let opts = tokentap_sweep::Opts::try_parse_from_args(args).expect("sweep options parse");
    Sweep::from_opts(&opts).await.expect("the sweep is set up")
}

fn read(path: &Path) -> Value {
    serde_json::from_str(
        &std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display())),
    )
    .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sweep_on_the_sim_gives_the_curve_the_engine_view_and_a_report() {
    let dir = tempfile::tempdir().expect("temp dir");
    let data = dir.path().join("d.jsonl");
    write_dataset(&data, 2, 6);
    let sim = SimServer::start(sim_config()).await.expect("sim starts");
    // The measurement proxy in the path; its records are joined after the sweep.
    let wire_dir = dir.path().join("wire");
    let mut pc = tokentap_proxy::Config::new([sim.base_url()]);
    pc.records_dir = Some(wire_dir.clone());
    let proxy = tokentap_proxy::Proxy::start(pc)
        .await
        .expect("proxy starts");
    let out = dir.path().join("sweep");
    let mut a = args(&sim, &data, &out, "1,2,4,8");
    a[1] = proxy.base_url();
    a.extend(
        [
            "--engine-metrics",
            &format!("{}/metrics", sim.base_url()),
            "--engine-interval",
            "100ms",
            "--warmup-trajectories",
            "2",
        ]
        .map(String::from),
    );
    let s = sweep(&a).await;
    let o = tokentap_sweep::run_with(s, std::future::pending())
        .await
        .expect("the sweep runs");
    assert!(!o.interrupted);
    assert_eq!(o.ran, [1, 2, 4, 8]);

    // The curve's shape: throughput rises with concurrency, per-user speed falls.
    let p = &o.file.points;
    assert!(p.iter().all(|p| p.status == PointStatus::Done), "{p:?}");
    let tps: Vec<f64> = p
        .iter()
        .map(|p| p.primary.unwrap().system_tps.unwrap())
        .collect();
    let per_user: Vec<f64> = p
        .iter()
        .map(|p| p.primary.unwrap().tps_per_user.unwrap())
        .collect();
    let inter: Vec<f64> = p
        .iter()
        .map(|p| p.primary.unwrap().e2e_interactivity.unwrap())
        .collect();
    assert!(tps.windows(2).all(|w| w[1] > w[0]), "system_tps {tps:?}");
    assert!(
        per_user.windows(2).all(|w| w[1] < w[0]),
        "tps_per_user {per_user:?}"
    );
    assert!(inter[3] < inter[0], "e2e_interactivity {inter:?}");

    // Regions inferred from the points and said so; each point in one.
    let f: Value = read(&out.join("sweep.json"));
    assert_eq!(f["regions"]["c_min"], 1);
    assert_eq!(f["regions"]["c_max"], 8);
    assert!(f["regions_source"]
        .as_str()
        .unwrap()
        .contains("lowest point"));
    let regions: Vec<&str> = f["points"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["region"].as_str().unwrap())
        .collect();
    assert_eq!(
        regions,
        [
            "low_latency",
            "low_concurrency",
            "med_concurrency",
            "high_concurrency"
        ]
    );
    // Not valid: four points, a tuning sweep; both named.
    assert_eq!(f["verdict"]["verdict"], "invalid");
    let reasons = serde_json::to_string(&f["verdict"]["rules"]).unwrap();
    assert!(reasons.contains("at least 7"), "{reasons}");
    assert!(reasons.contains("official_length"), "{reasons}");

    // Every point's directory is a whole run plus its metadata and the engine's samples.
    for c in [1, 2, 4, 8] {
        let d = out.join(format!("r{c}"));
        for file in [
            "records.jsonl",
            "summary.json",
            "result_summary.json",
            "scores.json",
            "config.json",
            "report.html",
            "point.json",
            "engine-metrics.jsonl",
        ] {
            assert!(d.join(file).is_file(), "r{c}/{file} missing");
        }
        let meta = read(&d.join("point.json"));
        assert_eq!(meta["concurrency"], c);
        assert_eq!(meta["config"]["concurrency"], c);
        assert_eq!(meta["official_length"], false);
        assert!(meta["end"]["wall_ns"].as_u64() > meta["start"]["wall_ns"].as_u64());
        // The declared warmup ran at the point's concurrency, before it.
        assert_eq!(meta["warmup"]["concurrency"], c);
        assert!(
            meta["warmup"]["requests_issued"].as_u64() > Some(0),
            "{meta}"
        );
        let summary = read(&d.join("summary.json"));
        assert_eq!(summary["config"]["concurrency"], c);
        // The engine's view: the sim served exactly the point's turns while it was scraped
        // (the warmup before them is not in it).
        let point = o.file.points.iter().find(|p| p.concurrency == c).unwrap();
        let e = point.engine.as_ref().expect("engine view");
        assert_eq!(e.flavor, "vllm");
        let turns = point.turns_ok.unwrap() as f64;
        assert_eq!(e.ttft.as_ref().unwrap().count, turns, "r{c}");
        assert_eq!(e.e2e.as_ref().unwrap().count, turns, "r{c}");
        assert!(e.itl.as_ref().unwrap().p50_ms.unwrap() > 0.0);
        assert!(e.prefix_cache_hit_rate.is_some());
        assert!(e.cost.scrapes >= 2 && e.cost.failed == 0 && e.cost.bytes > 0);
        let lines = std::fs::read_to_string(d.join("engine-metrics.jsonl")).unwrap();
        assert_eq!(lines.lines().count() as u64, e.cost.scrapes);
        assert!(lines.contains("vllm:time_to_first_token_seconds_bucket"));
    }

    // The sweep report: every plot has points, in a real browser.
    let page = out.join("report.html");
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.contains("r8/report.html"), "points link their reports");
    let dom = tokentap_testkit::page::dom_at_1280(&page);
    assert!(
        dom.contains("data-report-ready=\"1\""),
        "the page's script did not run"
    );
    assert!(
        dom.contains("data-empty-plots=\"\""),
        "a plot has no data marks"
    );
    assert_reads_well(&dom);
    assert!(dom.contains("data-plots=\"5\""));
    for plot in [
        "pareto_interactivity",
        "pareto_tps_per_user",
        "system_tps_by_concurrency",
        "ttft_p90_by_concurrency",
        "tps_per_user_by_concurrency",
    ] {
        let at = dom
            .find(&format!("data-plot=\"{plot}\""))
            .unwrap_or_else(|| panic!("plot {plot} missing"));
        assert!(
            !dom[at..].starts_with(&format!("data-plot=\"{plot}\" data-points=\"0\"")),
            "{plot} has no points"
        );
    }
    assert!(
        dom.contains("class=\"frontier\""),
        "the step function is drawn"
    );
    assert!(
        dom.contains("C=8 high"),
        "points are labelled by concurrency and region"
    );
    assert!(dom.contains("id=\"engine\""), "the engine's view is shown");

    // `tokentap report` reads a sweep directory: md and json; `--wire` joins the proxy's
    // records (complete once the proxy has stopped) to every point.
    let report = proxy.shutdown(std::time::Duration::from_secs(5)).await;
    assert_eq!(report.dropped, 0);
    let md = Command::new(BIN)
        .args(["report", "--format", "md", "--wire"])
        .arg(&wire_dir)
        .arg(&out)
        .output()
        .unwrap();
    assert!(
        md.status.success(),
        "{}",
        String::from_utf8_lossy(&md.stderr)
    );
    let md = String::from_utf8_lossy(&md.stdout);
    assert!(md.contains("| r8 | high_concurrency |"), "{md}");
    let f = read(&out.join("sweep.json"));
    for p in f["points"].as_array().unwrap() {
        let w = &p["wire"];
        assert_eq!(
            w["turns_joined"], w["client_turns"],
            "every tracked turn seen on the wire: {p}"
        );
        assert!(w["turns_joined"].as_u64() > Some(0));
        // Both sides measured the same turns. (Not ordered: the proxy stamps a chunk after
        // writing it, the client at the kernel's receive time, so under load either p90 can
        // be the larger.)
        assert!(w["ttft_p90_ms"].as_f64() > Some(0.0), "{w}");
        assert!(w["client_ttft_p90_ms"].as_f64() > Some(0.0), "{w}");
    }
    let js = Command::new(BIN)
        .args(["report", "--format", "json"])
        .arg(&out)
        .output()
        .unwrap();
    assert!(js.status.success());
    let js: Value = serde_json::from_slice(&js.stdout).unwrap();
    assert_eq!(js["points"].as_array().unwrap().len(), 4);
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupted_sweep_resumes_where_it_stopped() {
    let dir = tempfile::tempdir().expect("temp dir");
    let data = dir.path().join("d.jsonl");
    let turns = write_dataset(&data, 1, 4);
    let mut cfg = sim_config();
    cfg.timing.decode_ms = 3.0;
    let sim = Arc::new(SimServer::start(cfg).await.expect("sim starts"));
    let out = dir.path().join("sweep");
    let a = args(&sim, &data, &out, "1,2,4");

    // Ctrl-C once the second point has had two requests answered.
    let stop = {
        let sim = sim.clone();
        async move { sim.wait_finished(turns + 2).await }
    };
    let o = tokentap_sweep::run_with(sweep(&a).await, stop)
        .await
        .expect("the sweep stops cleanly");
    assert!(o.interrupted);
    assert_eq!(o.ran, [1, 2]);
    let st: Vec<PointStatus> = o.file.points.iter().map(|p| p.status).collect();
    assert_eq!(
        st,
        [
            PointStatus::Done,
            PointStatus::Interrupted,
            PointStatus::Pending
        ]
    );
    let on_disk = read(&out.join("sweep.json"));
    assert_eq!(on_disk["points"][1]["status"], "interrupted");
    // What the interrupted point recorded is on disk.
    let r2 = std::fs::read_to_string(out.join("r2/records.jsonl")).unwrap();
    assert!(r2.lines().count() >= 2, "{r2}");
    assert!(out.join("r2/summary.json").is_file());
    let r1_before = std::fs::read(out.join("r1/records.jsonl")).unwrap();

    // The rerun skips the finished point and reruns the interrupted one.
    let o = tokentap_sweep::run_with(sweep(&a).await, std::future::pending())
        .await
        .expect("the resumed sweep runs");
    assert!(!o.interrupted);
    assert_eq!(o.ran, [2, 4]);
    assert!(o.file.points.iter().all(|p| p.done()));
    assert_eq!(
        std::fs::read(out.join("r1/records.jsonl")).unwrap(),
        r1_before
    );
    assert!(
        out.join("r2.interrupted/records.jsonl").is_file(),
        "the interrupted attempt is kept beside"
    );
    let r2 = std::fs::read_to_string(out.join("r2/records.jsonl")).unwrap();
    assert_eq!(r2.lines().count(), turns, "the rerun point is whole");

    // A resume with other settings is refused, naming what differs.
    let mut other = a.clone();
    other.extend(["--max-tokens".to_string(), "9".to_string()]);
    let opts = tokentap_sweep::Opts::try_parse_from_args(&other).unwrap();
    let err = match tokentap_sweep::run_with(
        Sweep::from_opts(&opts).await.unwrap(),
        std::future::pending(),
    )
    .await
    {
        Ok(_) => panic!("a mismatched resume ran"),
        Err(e) => format!("{e:#}"),
    };
    assert!(
        err.contains("other settings") && err.contains("sampling"),
        "{err}"
    );
}

#[test]
fn plan_prints_the_regions_and_writes_the_plan_without_running() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("d.jsonl");
    write_dataset(&data, 1, 1);
    let out = dir.path().join("plan");
    let o = Command::new(BIN)
        .args([
            "sweep",
            // Nothing listens here: --plan must not connect.
            "--endpoint",
            "http://127.0.0.1:9",
            "--model",
            "m",
            "--dataset",
        ])
        .arg(&data)
        .args([
            "--c-min", "32", "--c-max", "8192", "--points", "10", "--plan", "--out",
        ])
        .arg(&out)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(
        stdout
            .contains("low_latency 1–32  low_concurrency 33–52  med_concurrency 53–437  high_concurrency 438–8192 (+ margin to 9012)"),
        "{stdout}"
    );
    assert!(
        stdout.contains("plan: 10 points: 32(low_latency)"),
        "{stdout}"
    );
    assert!(stdout.contains("a valid curve shape"), "{stdout}");
    let f = read(&out.join("sweep.json"));
    assert_eq!(f["points"].as_array().unwrap().len(), 10);
    assert!(f["points"]
        .as_array()
        .unwrap()
        .iter()
        .all(|p| p["status"] == "pending"));
    assert_eq!(f["points"][9]["concurrency"], 8192);
    // The rules' official lengths: 600 s at concurrency ≤ 32, 2,400 s above.
    assert_eq!(f["points"][0]["min_duration_s"], 600.0);
    assert_eq!(f["points"][1]["min_duration_s"], 2400.0);
    assert!(!out.join("r32").exists());

    // Bad plans are named before anything runs.
    for (extra, want) in [
        (
            &["--c-min", "40", "--c-max", "100"][..],
            "C_min must be 1 to 32",
        ),
        (
            &["--c-min", "1", "--c-max", "256", "--points", "40"][..],
            "7 to 32 points",
        ),
        (&["--c-min", "4"][..], "needs both --c-min and --c-max"),
        (
            &["--concurrency", "1,2", "--points", "8"][..],
            "with --concurrency the points are given",
        ),
        (&["--swe-bench-accuracy", "mid=0.9"][..], "not a region"),
    ] {
        let o = Command::new(BIN)
            .args([
                "sweep",
                "--endpoint",
                "http://127.0.0.1:9",
                "--model",
                "m",
                "--dataset",
            ])
            .arg(&data)
            .args(extra)
            .args(["--plan", "--out"])
            .arg(dir.path().join("bad"))
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{extra:?} was accepted");
        assert!(err.contains(want), "{extra:?}: {err}");
    }
    // A list is a sweep, not a replay.
    let o = Command::new(BIN)
        .args(["replay", "--endpoint", "http://127.0.0.1:9", "--dataset"])
        .arg(&data)
        .args(["--concurrency", "1,4"])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&o.stderr).contains("tokentap sweep --concurrency 1,4"));
}

#[test]
fn a_curve_that_is_not_valid_exits_3_and_says_why() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let sim = rt.block_on(SimServer::start(sim_config())).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("d.jsonl");
    write_dataset(&data, 1, 2);
    let out = dir.path().join("s");
    let o = Command::new(BIN)
        .arg("sweep")
        .args(args(&sim, &data, &out, "1,2"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert_eq!(
        o.status.code(),
        Some(3),
        "{stdout}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(stdout.contains("curve: INVALID"), "{stdout}");
    assert!(stdout.contains("FAIL official_length"), "{stdout}");
    assert!(stdout.contains("regions: unknown"), "{stdout}");
    rt.block_on(sim.shutdown());
}

#[test]
fn a_point_where_nothing_completes_stops_the_sweep_and_names_the_cause() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("d.jsonl");
    write_dataset(&data, 1, 2);
    let out = dir.path().join("s");
    let o = Command::new(BIN)
        .args([
            "sweep",
            "--endpoint",
            "http://127.0.0.1:9",
            "--model",
            "m",
            "--dataset",
        ])
        .arg(&data)
        .args([
            "--concurrency",
            "1,2",
            "--min-duration-scale",
            "0",
            "--quiet",
            "--out",
        ])
        .arg(&out)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("no turn completed at concurrency 1"), "{err}");
    assert!(err.contains("127.0.0.1:9"), "{err}");
    let f = read(&out.join("sweep.json"));
    assert_eq!(f["points"][0]["status"], "failed");
    assert!(f["points"][0]["error"]
        .as_str()
        .unwrap()
        .contains("connect"));
    assert_eq!(
        f["points"][1]["status"], "pending",
        "the sweep stopped at the dead point"
    );
    assert!(
        out.join("r1/records.jsonl").is_file(),
        "the failed point's records are kept"
    );
}

/// A point's length by the rules: whole passes of the dataset until the region's minimum
/// duration (scaled down here) has passed — the trajectory count stays a multiple of the dataset
/// and the tracked duration reaches the minimum.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_point_runs_whole_passes_until_its_minimum_duration() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("d.jsonl");
    write_dataset(&data, 1, 3);
    let (ds, hash) = tokentap_replay::load_dataset(&data).await.unwrap();
    let n = ds.conversations.len() as u64;
    let sim = SimServer::start(sim_config()).await.unwrap();
    let opts = tokentap_replay::Opts::try_parse_from_args([
        "--endpoint",
        &sim.base_url(),
        "--dataset",
        &data.display().to_string(),
        "--model",
        "m",
        "--concurrency",
        "2",
        "--c-min",
        "1",
        // 600 s (concurrency ≤ 32) × 0.001 = 0.6 s: several passes of this small dataset.
        "--min-duration-scale",
        "0.001",
    ])
    .unwrap();
    let mut cfg = opts.resolve().unwrap();
    cfg.bind_dataset(&ds, Some(hash)).unwrap();
    let o = tokentap_replay::run_with(
        cfg,
        Arc::new(ds),
        tokentap_replay::ProgressMode::Off,
        std::future::pending(),
    )
    .await
    .unwrap();
    let s = &o.summary;
    let done = s.run.trajectories_finished;
    assert!(
        done >= 2 * n,
        "{done} trajectories of a {n}-trajectory dataset"
    );
    assert_eq!(done % n, 0, "{done} is not whole passes of {n}");
    assert_eq!(s.run.trajectory_budget, done);
    let tracked = s.mlperf.primary.tracked_duration_s.unwrap();
    assert!(tracked >= 0.6, "tracked {tracked} s");
    let rule = s
        .validity
        .rules
        .iter()
        .find(|r| r.rule == "point-duration")
        .unwrap();
    assert!(
        rule.message.contains("scaled minimum 0.6 s, reached"),
        "{}",
        rule.message
    );
    assert!(rule.message.contains("not official"));
    // The trajectory rule sees the whole, extended budget.
    let t = s
        .validity
        .rules
        .iter()
        .find(|r| r.rule == "trajectories")
        .unwrap();
    assert!(t.message.contains("all finished"), "{}", t.message);
    sim.shutdown().await;
}

/// The args of shard `i` of 2 of a sharded sweep (no --min-duration-scale: its length is
/// --trajectories).
fn shard_args(
    sim: &SimServer,
    data: &Path,
    out: &Path,
    i: u64,
    trajectories: usize,
    barrier: &Path,
) -> Vec<String> {
    let mut a = args(sim, data, out, "1,2");
    let at = a.iter().position(|x| x == "--min-duration-scale").unwrap();
    a.drain(at..at + 2);
    a.extend([
        "--shard".to_string(),
        format!("{i}/2"),
        "--trajectories".to_string(),
        trajectories.to_string(),
        "--barrier".to_string(),
        barrier.display().to_string(),
    ]);
    a
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sharded_sweep_runs_its_points_together_and_merges_point_by_point() {
    let sim = SimServer::start(sim_config()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("ds.jsonl");
    write_dataset(&data, 3, 5);
    let barrier = dir.path().join("barrier");
    let (o0, o1) = (dir.path().join("shard-0"), dir.path().join("shard-1"));

    // Without --trajectories or --barrier a sharded sweep is refused, with the reason.
    let mut a = shard_args(&sim, &data, &o0, 0, 8, &barrier);
    let at = a.iter().position(|x| x == "--barrier").unwrap();
    a.drain(at..at + 2);
    let opts = tokentap_sweep::Opts::try_parse_from_args(&a).unwrap();
    let e = Sweep::from_opts(&opts).await.err().unwrap().to_string();
    assert!(e.contains("needs --barrier DIR"), "{e}");
    let mut a = shard_args(&sim, &data, &o0, 0, 8, &barrier);
    let at = a.iter().position(|x| x == "--trajectories").unwrap();
    a.drain(at..at + 2);
    let opts = tokentap_sweep::Opts::try_parse_from_args(&a).unwrap();
    let e = Sweep::from_opts(&opts).await.err().unwrap().to_string();
    assert!(e.contains("needs --trajectories T"), "{e}");

    // Two machines, side by side.
    let s0 = sweep(&shard_args(&sim, &data, &o0, 0, 8, &barrier)).await;
    let s1 = sweep(&shard_args(&sim, &data, &o1, 1, 8, &barrier)).await;
    let (r0, r1) = tokio::join!(
        tokentap_sweep::run_with(s0, std::future::pending()),
        tokentap_sweep::run_with(s1, std::future::pending())
    );
    let (f0, f1) = (r0.unwrap().file, r1.unwrap().file);
    // The barrier: no shard starts a point before every shard has finished the one before.
    let span = |f: &tokentap_sweep::file::SweepFile, c: u64| {
        let p = f.points.iter().find(|p| p.concurrency == c).unwrap();
        (p.started_wall_ns.unwrap(), p.ended_wall_ns.unwrap())
    };
    for (a, b) in [(&f0, &f1), (&f1, &f0)] {
        assert!(
            span(a, 2).0 >= span(b, 1).1,
            "a shard started point 2 before the other finished point 1"
        );
    }

    let merged = dir.path().join("merged");
    let f = tokentap_sweep::merge::merge(&tokentap_replay::merge::MergeOpts {
        dirs: vec![o0.clone(), o1.clone()],
        out: merged.clone(),
        partial: false,
    })
    .unwrap();
    assert!(f.points.iter().all(|p| p.status == PointStatus::Done));
    for c in [1u64, 2] {
        let s = read(&merged.join(format!("r{c}/summary.json")));
        assert_eq!(s["merge"]["shards"], 2, "r{c}");
        assert_eq!(
            s["run"]["trajectories_finished"], 8,
            "r{c}: the union is the point"
        );
        assert_eq!(s["throughput"]["concurrency"], 2 * c, "r{c}");
        let p = f.points.iter().find(|p| p.concurrency == c).unwrap();
        assert_eq!(p.trajectories, Some(8));
        assert_eq!(
            p.primary.unwrap().system_tps,
            s["mlperf"]["system_tps"].as_f64(),
            "the curve's point is the merged run's"
        );
    }
    assert!(merged.join("sweep.json").is_file() && merged.join("report.html").is_file());
    // The CLI dispatches sweep directories to the sweep merge.
    let out = Command::new(BIN)
        .arg("merge")
        .arg(&o0)
        .arg(&o1)
        .arg("--out")
        .arg(dir.path().join("merged-cli"))
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("merged 2 shard sweeps"));
}

/// SIGHUP (a closed terminal) mid-point: the same clean stop as Ctrl-C — exit 130, the point
/// marked interrupted in `sweep.json`, every turn it started recorded, its summary written.
#[test]
fn a_hung_up_sweep_stops_cleanly_and_loses_nothing() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let mut cfg = sim_config();
    cfg.timing.decode_ms = 20.0; // in flight when the signal comes
    cfg.output.mean_tokens = 100.0;
    cfg.output.max_tokens = 200;
    let sim = rt.block_on(SimServer::start(cfg)).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("d.jsonl");
    write_dataset(&data, 1, 4);
    let out = dir.path().join("s");
    let child = Command::new(BIN)
        .arg("sweep")
        .args(args(&sim, &data, &out, "2,4"))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // The real event: two responses of the first point are streaming.
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(30);
    while sim
        .log()
        .iter()
        .filter(|r| r.status == 200 && !r.finished)
        .count()
        < 2
    {
        assert!(tokio::time::Instant::now() < deadline, "no stream started");
        std::thread::yield_now();
    }
    let st = Command::new("kill")
        .args(["-HUP", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(st.success());
    let o = child.wait_with_output().unwrap();
    assert_eq!(
        o.status.code(),
        Some(130),
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    let f = read(&out.join("sweep.json"));
    assert_eq!(f["points"][0]["status"], "interrupted", "{f}");
    assert_eq!(f["points"][1]["status"], "pending", "{f}");
    let records = std::fs::read_to_string(out.join("r2/records.jsonl")).unwrap();
    let cancelled = records
        .lines()
        .filter(|l| l.contains("\"cancelled\""))
        .count();
    assert_eq!(
        cancelled, 2,
        "the two streams in flight are recorded: {records}"
    );
    assert!(out.join("r2/summary.json").is_file());
    // Every request the server saw has a record.
    let sent = records
        .lines()
        .filter(|l| !l.contains("\"aborted\""))
        .count();
    assert_eq!(sent, sim.log().len());
    rt.block_on(sim.shutdown());
}

/// One sweep per directory: a second sweep on a directory another one holds is refused, naming
/// the holder; an interrupted point's earlier copy is never replaced (`.interrupted`,
/// `.interrupted.2`); point directories without their `sweep.json` are refused, not renamed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sweep_directory_has_one_writer_and_keeps_every_attempt() {
    let dir = tempfile::tempdir().expect("temp dir");
    let data = dir.path().join("d.jsonl");
    let turns = write_dataset(&data, 1, 4);
    let mut cfg = sim_config();
    cfg.timing.decode_ms = 3.0;
    let sim = Arc::new(SimServer::start(cfg).await.expect("sim starts"));
    let out = dir.path().join("sweep");
    let a = args(&sim, &data, &out, "1,2");

    // Another process's sweep holds the directory: refused, the holder named.
    std::fs::create_dir_all(&out).unwrap();
    let held = tokentap_sweep::lock::acquire(&out).expect("lock");
    let o = Command::new(BIN).arg("sweep").args(&a).output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("in use by another tokentap sweep")
            && err.contains(&format!("pid {}", std::process::id())),
        "{err}"
    );
    assert!(
        !out.join("sweep.json").exists(),
        "the refused sweep wrote nothing"
    );
    drop(held);

    // Interrupted three times at point 2: the two earlier attempts are kept beside the third.
    for n in 1..=3 {
        let stop = {
            let sim = sim.clone();
            let done = sim.log().len();
            let want = if n == 1 { turns + 2 } else { done + 2 };
            async move { sim.wait_finished(want).await }
        };
        let o = tokentap_sweep::run_with(sweep(&a).await, stop)
            .await
            .expect("the sweep stops cleanly");
        assert!(o.interrupted);
    }
    assert!(out.join("r2.interrupted/records.jsonl").is_file());
    assert!(out.join("r2.interrupted.2/records.jsonl").is_file());

    // sweep.json deleted: the points left are refused, not renamed aside.
    std::fs::remove_file(out.join("sweep.json")).unwrap();
    let e = match tokentap_sweep::run_with(sweep(&a).await, std::future::pending()).await {
        Ok(_) => panic!("a directory of orphan points must be refused"),
        Err(e) => e.to_string(),
    };
    assert!(
        e.contains(
            "holds point directories (r1, r2, r2.interrupted, r2.interrupted.2) but no sweep.json"
        ),
        "{e}"
    );
    assert!(out.join("r1/records.jsonl").is_file(), "nothing moved");
}

/// TensorRT-LLM's names: the sim speaking `trtllm-serve`'s dialect at `/prometheus/metrics`
/// gives the sweep's engine view its TTFT, ITL and E2E histograms, and its prefix-cache hit rate
/// from `trtllm_prompt_cached_tokens_total` over `trtllm_prompt_tokens_total`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_engine_view_reads_tensorrt_llm_names() {
    use tokentap_sweep::engine;
    let sim = tokentap_testkit::replay::sim_with(|c| {
        c.engine_metrics = tokentap_sim::config::EngineFlavor::Trtllm;
        c.timing.prefill_base_ms = 2.0;
        c.timing.decode_ms = 1.0;
    })
    .await;
    let url = engine::parse_url(&format!("{}/prometheus/metrics", sim.base_url())).unwrap();
    let scrape = || async {
        let text = engine::get(&url, std::time::Duration::from_secs(5))
            .await
            .expect("scrape");
        let (samples, _) = engine::parse(std::str::from_utf8(&text).unwrap());
        engine::Snapshot::of(&samples)
    };
    let before = scrape().await;
    let mut c = tokentap_testkit::replay::config(&sim, "trtllm");
    c.concurrency = 2;
    let ds = tokentap_testkit::data::synth_dataset(1, 2, 0.05);
    let (out, recs) = tokentap_testkit::replay::run(c, ds).await;
    let turns = out.summary.counts.total as f64;
    assert!(turns > 0.0 && recs.len() as f64 == turns);
    let view = before.delta(&scrape().await).view();
    assert_eq!(view.flavor, "trtllm");
    let ttft = view
        .ttft
        .expect("TTFT from trtllm_time_to_first_token_seconds");
    assert_eq!(ttft.series, "trtllm_time_to_first_token_seconds");
    assert_eq!(ttft.count, turns);
    assert_eq!(view.e2e.expect("E2E").count, turns);
    assert!(view.itl.expect("ITL").count > 0.0);
    // Later turns of a conversation find its earlier prompt in the cache.
    assert!(view
        .prefix_cache_hit_rate
        .is_some_and(|r| r > 0.0 && r < 1.0));
}
