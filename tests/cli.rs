//! End-to-end tests of the `tokentap` binary: the commands a user types, over real sockets and
//! real processes (the simulated server in-process where the test needs its ground-truth log).

use serde_json::Value;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;
use tokio::time::Instant;

const BIN: &str = env!("CARGO_BIN_EXE_tokentap");

fn tokentap(args: &[&str]) -> std::process::Output {
    Command::new(BIN)
        .args(args)
        .output()
        .expect("the tokentap binary runs")
}

fn signal(pid: u32, sig: &str) {
    let st = Command::new("kill")
        .args([sig, &pid.to_string()])
        .status()
        .expect("kill runs");
    assert!(st.success(), "kill {sig} {pid} failed");
}

type StdoutLines = tokentap_testkit::spawn::Stdout;

/// The `host:port` a server subcommand printed first (`listening on http://ADDR`), and the rest
/// of its stdout: keep it alive, or the server's next line hits a closed pipe.
fn listening_addr(child: &mut std::process::Child) -> (String, StdoutLines) {
    tokentap_testkit::spawn::listening_addr(child)
}

/// POSTs a chat completion to `addr` over one raw HTTP/1.1 connection (`headers`: extra header
/// lines, each ending in CRLF) and returns every byte of the response.
fn post_raw(addr: &str, headers: &str, body: &str) -> Vec<u8> {
    let mut s = TcpStream::connect(addr).unwrap();
    write!(
        s,
        "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n{headers}Connection: close\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut got = Vec::new();
    s.read_to_end(&mut got).unwrap();
    got
}

/// Writes a synthesized dataset to `path`; returns its client turns.
fn synth_file(path: &Path, coding: usize, workflow: usize, scale: f64) -> usize {
    let mut f = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    let made = tokentap_dataset::synth::synth(
        &tokentap_dataset::synth::SynthConfig {
            coding,
            workflow,
            scale,
            ..Default::default()
        },
        &mut f,
    )
    .unwrap();
    f.flush().unwrap();
    made.client_turns as usize
}

fn read_jsonl(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
        .lines()
        .map(|l| serde_json::from_str(l).expect("every record line is JSON"))
        .collect()
}

#[test]
fn help_lists_every_subcommand_and_each_help_works() {
    let out = tokentap(&["--help"]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    for sub in [
        "demo", "replay", "sweep", "merge", "proxy", "sim", "dataset", "compare", "report",
    ] {
        assert!(text.contains(sub), "--help does not mention {sub}:\n{text}");
        let out = tokentap(&[sub, "--help"]);
        assert!(out.status.success(), "{sub} --help failed");
        assert!(!out.stdout.is_empty());
    }
    for sub in ["validate", "stats", "synth"] {
        assert!(tokentap(&["dataset", sub, "--help"]).status.success());
    }
}

#[test]
fn dataset_validate_names_file_line_field_and_exits_nonzero() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.jsonl");
    std::fs::write(
        &path,
        concat!(
            r#"{"conversation_id":"c1","turn":1,"role":"user","content":"hi","system":"s"}"#, "\n",
            r#"{"conversation_id":"c1","turn":2,"role":"assistant","tool_calls":[{"id":"","type":"function","function":{"name":"bash","arguments":"{}"}}]}"#, "\n",
        ),
    )
    .unwrap();
    let out = tokentap(&["dataset", "validate", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("bad.jsonl:2"), "{err}");
    assert!(err.contains("\"c1\""), "{err}");
    assert!(err.contains("tool_calls[0].id"), "{err}");

    let good = dir.path().join("good.jsonl");
    let out = tokentap(&[
        "dataset",
        "synth",
        "--coding",
        "1",
        "--workflow",
        "2",
        "--scale",
        "0.1",
        "--out",
        good.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = tokentap(&["dataset", "validate", good.to_str().unwrap()]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A tokenizer folder that cannot be used is an error before anything is sent, naming the file
/// and what was expected; so is a bad chat template, with its place in the file.
#[test]
fn a_bad_tokenizer_folder_is_named_before_anything_is_sent() {
    let dir = tempfile::tempdir().unwrap();
    let ds = dir.path().join("d.jsonl");
    std::fs::write(
        &ds,
        r#"{"conversation_id":"c1","turn":1,"role":"user","content":"hi","system":"s"}"#,
    )
    .unwrap();
    let tok = dir.path().join("tok");
    std::fs::create_dir(&tok).unwrap();
    let replay = |tok: &Path| {
        tokentap(&[
            "replay",
            "--endpoint",
            "http://127.0.0.1:9",
            "--dataset",
            ds.to_str().unwrap(),
            "--model",
            "m",
            "--tokenizer",
            tok.to_str().unwrap(),
            "--quiet",
        ])
    };
    let out = replay(&tok);
    assert_ne!(out.status.code(), Some(0));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("tokenizer.json") && err.contains("not found"),
        "{err}"
    );
    let golden =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/golden/mlperf-ea33275/tokenizer");
    std::fs::copy(golden.join("tokenizer.json"), tok.join("tokenizer.json")).unwrap();
    std::fs::write(
        tok.join("tokenizer_config.json"),
        r#"{"chat_template": "{% for m in messages %}{{ m.role }"}"#,
    )
    .unwrap();
    let out = replay(&tok);
    assert_ne!(out.status.code(), Some(0));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("tokenizer_config.json") && err.contains("does not compile"),
        "{err}"
    );
}

#[test]
fn sim_cli_prints_its_address_serves_and_stops_on_sigterm() {
    let mut child = Command::new(BIN)
        .args(["sim", "--listen", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let (addr, _stdout) = listening_addr(&mut child);
    let mut s = TcpStream::connect(addr).unwrap();
    s.write_all(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut resp = String::new();
    s.read_to_string(&mut resp).unwrap();
    assert!(resp.starts_with("HTTP/1.1 200"), "{resp}");
    signal(child.id(), "-TERM");
    let status = child.wait().unwrap();
    assert!(status.success(), "sim exited with {status}");
}

#[test]
fn demo_runs_end_to_end_and_writes_a_complete_run() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(BIN)
        .args([
            "demo",
            "--coding",
            "1",
            "--workflow",
            "3",
            "--scale",
            "0.1",
            "--decode",
            "0.2ms",
        ])
        .args(["--delay-scale", "0", "--concurrency", "1,2", "--out"])
        .arg(dir.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("TTFT"), "{stdout}");
    // The demo is a sweep: the curve in the terminal, the wire beside every point.
    assert!(stdout.contains("curve: INVALID"), "{stdout}");
    assert!(stdout.contains("wire p90"), "{stdout}");
    // One value per column: the curve's rows line up with the header (no column left out).
    let header = stdout.lines().find(|l| l.contains("wire p90")).unwrap();
    let row = stdout
        .lines()
        .find(|l| l.trim_start().starts_with("2 "))
        .unwrap();
    assert_eq!(
        // Four two-word headings: TTFT p90, wire p90, engine p90, point verdict.
        header.split_whitespace().count() - 4,
        row.split_whitespace().count(),
        "{header}\n{row}"
    );
    let sweep: Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("sweep/sweep.json")).unwrap(),
    )
    .unwrap();
    for p in sweep["points"].as_array().unwrap() {
        assert_eq!(p["status"], "done", "{p}");
        assert!(p["wire"]["turns_joined"].as_u64() > Some(0), "{p}");
        assert!(p["engine"]["ttft"]["count"].as_f64() > Some(0.0), "{p}");
    }
    assert!(dir.path().join("sweep/report.html").is_file());
    let summary: Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("sweep/r2/summary.json")).unwrap(),
    )
    .unwrap();
    let records = read_jsonl(&dir.path().join("sweep/r2/records.jsonl"));
    let client_turns = records.len() as u64;
    assert!(
        client_turns >= 4,
        "one record per client turn, got {client_turns}"
    );
    assert!(
        records.iter().all(|r| r["status"] == "ok"),
        "all turns ok against the sim"
    );
    assert!(records.iter().all(|r| r["ttft_ns"].as_u64().is_some()));
    assert_eq!(
        summary["counts"]["turns"]["ok"].as_u64(),
        Some(client_turns),
        "{summary}"
    );
    // Salting on: every request of one conversation shares its system prompt, so later turns reuse
    // the cache.
    let cached: u64 = records
        .iter()
        .filter_map(|r| r["cached_tokens"].as_u64())
        .sum();
    assert!(
        cached > 0,
        "no cached tokens at all across {client_turns} turns"
    );
    // The sim answers with the dataset's recorded assistant messages: every scorable turn agrees
    // with its ground truth.
    assert!(
        summary["accuracy"]["scored_turns"].as_u64() > Some(0),
        "{summary}"
    );
    assert_eq!(summary["accuracy"]["inline_accuracy"], 1.0, "{summary}");
}

#[test]
fn replay_interrupted_stops_cancels_in_flight_and_writes_every_record() {
    replay_stopped_by("-INT");
}

/// A closed terminal or SSH session sends SIGHUP: the same clean stop, nothing lost.
#[test]
fn replay_hung_up_stops_like_interrupted_and_writes_every_record() {
    replay_stopped_by("-HUP");
}

fn replay_stopped_by(sig: &str) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let mut cfg = tokentap_sim::SimConfig::zero_delay();
    cfg.timing.decode_ms = 20.0; // slow enough that turns are in flight when the signal comes
    cfg.output.mean_tokens = 500.0;
    cfg.output.max_tokens = 1000;
    let sim = rt.block_on(tokentap_sim::SimServer::start(cfg)).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("d.jsonl");
    let st = Command::new(BIN)
        .args([
            "dataset",
            "synth",
            "--coding",
            "2",
            "--workflow",
            "4",
            "--scale",
            "0.1",
            "--out",
        ])
        .arg(&data)
        .status()
        .unwrap();
    assert!(st.success());
    let out_dir = dir.path().join("run");
    let child = Command::new(BIN)
        .args([
            "replay",
            "--endpoint",
            &sim.base_url(),
            "--model",
            "m",
            "--concurrency",
            "3",
            "--quiet",
        ])
        .arg("--dataset")
        .arg(&data)
        .arg("--out")
        .arg(&out_dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Wait for the real event: three responses have started (head sent, body not finished).
    // The sim hands a request's chunk stamps to its log only at the end, so the head is what
    // can be seen while streaming; the prelude chunk follows the head at once.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let streaming = sim
            .log()
            .iter()
            .filter(|r| r.status == 200 && !r.finished)
            .count();
        if streaming >= 3 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the replay never had 3 streams in flight"
        );
        std::thread::yield_now();
    }
    signal(child.id(), sig);
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(130),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let records = read_jsonl(&out_dir.join("records.jsonl"));
    let cancelled: Vec<_> = records
        .iter()
        .filter(|r| r["status"] == "cancelled")
        .collect();
    assert_eq!(
        cancelled.len(),
        3,
        "the three in-flight turns are recorded as cancelled"
    );
    // The sim had the three requests; a response head may not have reached the client yet when
    // the signal came (a loaded machine): what had arrived is kept, and at least one had.
    assert!(
        cancelled
            .iter()
            .all(|r| r["events"].as_u64().unwrap_or(0) == 0 || r["ttfb_ns"].as_u64().is_some())
            && cancelled.iter().any(|r| r["ttfb_ns"].as_u64().is_some()),
        "cancelled records keep what had arrived: {cancelled:?}"
    );
    // Every request the server saw has a record.
    assert_eq!(
        records.iter().filter(|r| r["status"] != "aborted").count(),
        sim.log().len()
    );
    let summary: Value =
        serde_json::from_str(&std::fs::read_to_string(out_dir.join("summary.json")).unwrap())
            .unwrap();
    assert_eq!(
        summary["counts"]["turns"]["cancelled"].as_u64(),
        Some(3),
        "{summary}"
    );
    rt.block_on(sim.shutdown());
}

/// `tokentap proxy` as a real process: SIGTERM with a stream in flight stops accepting, lets the
/// stream finish within `--grace`, writes its record and exits 0.
#[test]
fn proxy_cli_drains_a_stream_in_flight_on_sigterm_and_records_it() {
    proxy_drains_on("-TERM");
}

/// SIGHUP (the terminal closed) drains like SIGTERM: the stream finishes, its record is written.
#[test]
fn proxy_cli_drains_a_stream_in_flight_on_sighup_and_records_it() {
    proxy_drains_on("-HUP");
}

fn proxy_drains_on(sig: &str) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let mut cfg = tokentap_sim::SimConfig::zero_delay();
    cfg.timing.decode_ms = 10.0; // ~0.4 s of streaming: in flight when the signal comes
    cfg.output.mean_tokens = 40.0;
    cfg.output.sigma = 0.0;
    let sim = rt.block_on(tokentap_sim::SimServer::start(cfg)).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new(BIN)
        .args([
            "proxy",
            "--listen",
            "127.0.0.1:0",
            "--admin",
            "127.0.0.1:0",
            "--grace",
            "30",
        ])
        .args(["--upstream", &sim.base_url(), "--records"])
        .arg(dir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let (addr, _stdout) = listening_addr(&mut child);
    let client = std::thread::spawn(move || {
        let body = r#"{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true,"max_completion_tokens":40}"#;
        String::from_utf8(post_raw(&addr, "X-Session-ID: drain-1\r\n", body)).unwrap()
    });
    // The real event: the sim has sent the response head and the body is not finished.
    let deadline = Instant::now() + Duration::from_secs(30);
    while !sim.log().iter().any(|r| r.status == 200 && !r.finished) {
        assert!(Instant::now() < deadline, "the stream never started");
        std::thread::yield_now();
    }
    signal(child.id(), sig);
    let resp = client.join().unwrap();
    assert!(resp.starts_with("HTTP/1.1 200"), "{resp}");
    assert!(
        resp.contains("data: [DONE]"),
        "the stream finished through the drain:\n{resp}"
    );
    let status = child.wait().unwrap();
    assert!(status.success(), "proxy exited with {status}");
    let records: Vec<Value> = std::fs::read_dir(dir.path())
        .unwrap()
        .flat_map(|e| read_jsonl(&e.unwrap().path()))
        .collect();
    assert_eq!(records.len(), 1, "{records:?}");
    assert_eq!(records[0]["status"], "ok");
    assert_eq!(records[0]["conversation_id"], "drain-1");
    assert_eq!(records[0]["output_tokens"].as_u64(), Some(40));
    rt.block_on(sim.shutdown());
}

#[test]
fn the_proxy_keeps_serving_when_nobody_reads_its_stdout() {
    // A supervisor that closed its end of the pipe: the status lines hit a closed pipe, which
    // must not stop the proxy (`println!` would panic on EPIPE).
    let free = |_| {
        std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .to_string()
    };
    let (listen, admin) = (free(0), free(1));
    let mut child = Command::new(BIN)
        .args(["proxy", "--listen", &listen, "--admin", &admin])
        .args(["--upstream", "http://127.0.0.1:9"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    // The admin listener answers /health once the proxy is up (bounded wait for start-up).
    let deadline = Instant::now() + Duration::from_secs(20);
    let health = loop {
        if let Ok(mut s) = TcpStream::connect(&admin) {
            s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            write!(
                s,
                "GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
            )
            .unwrap();
            let mut body = String::new();
            let _ = s.read_to_string(&mut body);
            if !body.is_empty() {
                break body;
            }
        }
        assert!(
            child.try_wait().unwrap().is_none(),
            "the proxy exited with its stdout closed"
        );
        assert!(Instant::now() < deadline, "the proxy did not come up");
        std::thread::yield_now();
    };
    assert!(health.starts_with("HTTP/1.1 "), "{health}");
    // Still running, and it stops cleanly when told to: exit 0 (a panic on the closed pipe
    // exits 101, before or after the signal).
    signal(child.id(), "-TERM");
    let status = child.wait().unwrap();
    assert!(status.success(), "the proxy ended {status:?}");
}

#[test]
fn every_option_has_a_help_line() {
    for sub in [
        &["replay"][..],
        &["sweep"],
        &["merge"],
        &["proxy"],
        &["sim"],
        &["compare"],
        &["report"],
        &["demo"],
        &["dataset", "validate"],
        &["dataset", "stats"],
        &["dataset", "synth"],
    ] {
        let mut args = sub.to_vec();
        args.push("--help");
        let out = tokentap(&args);
        assert!(out.status.success(), "{sub:?} --help");
        let text = String::from_utf8_lossy(&out.stdout);
        let lines: Vec<&str> = text.lines().collect();
        for w in lines.windows(2) {
            // An option line: indented 2 to 6 spaces, then `-` (descriptions are indented 10).
            let indent = w[0].len() - w[0].trim_start().len();
            let option = (2..=6).contains(&indent) && w[0].trim_start().starts_with('-');
            assert!(
                !(option && w[1].trim().is_empty()),
                "{sub:?}: `{}` has no help line",
                w[0].trim()
            );
        }
    }
}

#[test]
fn long_running_commands_take_every_option_from_the_environment() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("ds.jsonl");
    assert!(tokentap(&[
        "dataset",
        "synth",
        "--coding",
        "1",
        "--workflow",
        "1",
        "--scale",
        "0.05",
        "-o",
        data.to_str().unwrap()
    ])
    .status
    .success());
    let out_dir = dir.path().join("curve");
    let out = Command::new(BIN)
        .args(["sweep", "--plan"])
        .env("TOKENTAP_REPLAY_ENDPOINT", "http://127.0.0.1:9")
        .env("TOKENTAP_REPLAY_DATASET", &data)
        .env("TOKENTAP_SWEEP_CONCURRENCY", "1,2,4")
        .env("TOKENTAP_REPLAY_MODEL", "m")
        .env("TOKENTAP_REPLAY_OUT", &out_dir)
        .env("TOKENTAP_REPLAY_SALT", "true")
        .env("TOKENTAP_SWEEP_ENGINE_INTERVAL", "2s")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let f: Value =
        serde_json::from_slice(&std::fs::read(out_dir.join("sweep.json")).unwrap()).unwrap();
    let points: Vec<u64> = f["points"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["concurrency"].as_u64().unwrap())
        .collect();
    assert_eq!(points, [1, 2, 4]);
    assert_eq!(f["config"]["salt"], true);
    assert_eq!(f["config"]["model"], "m");
    // The sim too.
    let mut child = Command::new(BIN)
        .arg("sim")
        .env("TOKENTAP_SIM_LISTEN", "127.0.0.1:0")
        .env("TOKENTAP_SIM_PRESET", "zero-delay")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let (addr, _stdout) = listening_addr(&mut child);
    assert!(
        addr.starts_with("127.0.0.1:") && !addr.ends_with(":8000"),
        "{addr}"
    );
    signal(child.id(), "-TERM");
    assert!(child.wait().unwrap().success());
}

/// The replay's records reach the file while the run goes on (flushed when the record channel
/// runs empty, and every 100 ms under load), so `kill -9` loses at most the last moments: here
/// the records of finished turns are on disk, whole lines, before the kill.
#[test]
fn a_killed_replay_keeps_every_record_already_written() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let mut cfg = tokentap_sim::SimConfig::zero_delay();
    cfg.timing.decode_ms = 5.0;
    cfg.output.mean_tokens = 40.0;
    cfg.output.sigma = 0.0;
    let sim = rt.block_on(tokentap_sim::SimServer::start(cfg)).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("d.jsonl");
    let total = synth_file(&data, 4, 4, 0.5);
    let out_dir = dir.path().join("run");
    let mut child = Command::new(BIN)
        .args([
            "replay",
            "--endpoint",
            &sim.base_url(),
            "--model",
            "m",
            "--concurrency",
            "1",
        ])
        .args(["--quiet", "--dataset"])
        .arg(&data)
        .arg("--out")
        .arg(&out_dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let records = out_dir.join("records.jsonl");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let lines = std::fs::read_to_string(&records)
            .map(|t| t.lines().count())
            .unwrap_or(0);
        if lines >= 3 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no records on disk while the replay runs ({lines} lines)"
        );
        std::thread::yield_now();
    }
    let answered = sim.log().len();
    assert!(
        answered < total / 2,
        "records reach the file as the run goes, not at its end ({answered} of {total} turns answered)"
    );
    child.kill().unwrap(); // SIGKILL: no chance to flush anything more
    child.wait().unwrap();
    let text = std::fs::read_to_string(&records).unwrap();
    assert!(text.ends_with('\n'), "no torn line: {text:?}");
    for l in text.lines() {
        serde_json::from_str::<Value>(l).expect("every line a whole record");
    }
    assert!(text.lines().count() >= 3);
    rt.block_on(sim.shutdown());
}

/// `report` refuses files that are not one run's: records emptied or replaced beside their
/// summary, and a summary.json that is not tokentap's.
#[test]
fn report_refuses_records_and_summaries_that_are_not_one_run() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let sim = rt
        .block_on(tokentap_sim::SimServer::start(
            tokentap_sim::SimConfig::zero_delay(),
        ))
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("d.jsonl");
    synth_file(&data, 1, 2, 0.1);
    let run = dir.path().join("run");
    let st = Command::new(BIN)
        .args([
            "replay",
            "--endpoint",
            &sim.base_url(),
            "--model",
            "m",
            "--quiet",
            "--dataset",
        ])
        .arg(&data)
        .arg("--out")
        .arg(&run)
        .status()
        .unwrap();
    assert!(st.code().is_some_and(|c| c == 0 || c == 3));
    let report = || Command::new(BIN).arg("report").arg(&run).output().unwrap();
    assert!(report().status.success());
    std::fs::write(run.join("records.jsonl"), "").unwrap();
    let o = report();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("0 records, but summary.json counts") && err.contains("not this run's"),
        "{err}"
    );
    std::fs::write(run.join("summary.json"), "[1, 2]").unwrap();
    let o = report();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("not a tokentap summary.json"), "{err}");
    rt.block_on(sim.shutdown());
}

/// Peak resident memory of a process (`VmHWM`, kB), from /proc.
fn peak_rss_kb(pid: u32) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    s.lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM in /proc/PID/status")
}

/// A 50 MB SSE event through the proxy: every byte forwarded, but the proxy holds at most
/// `--max-event-bytes` of it (peak RSS bounded, measured from /proc), the next event is still
/// measured, and the record says one event was too big to parse — with `--inject-usage` too.
#[test]
fn a_huge_event_is_forwarded_but_not_held() {
    const BIG: usize = 50 << 20;
    for inject in [false, true] {
        // The upstream: a raw HTTP/1.1 server that sends one 50 MB event, then a normal one.
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let upstream = format!("http://{}", l.local_addr().unwrap());
        std::thread::spawn(move || {
            for s in l.incoming() {
                let Ok(mut s) = s else { return };
                let mut head = Vec::new();
                let mut b = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") {
                    if s.read(&mut b).unwrap_or(0) == 0 {
                        break;
                    }
                    head.push(b[0]);
                }
                let text = String::from_utf8_lossy(&head).to_lowercase();
                let len: usize = text
                    .lines()
                    .find_map(|l| l.strip_prefix("content-length:"))
                    .map_or(0, |v| v.trim().parse().unwrap());
                let mut body = vec![0u8; len];
                let _ = s.read_exact(&mut body);
                let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n");
                let _ = s.write_all(b"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"");
                let chunk = vec![b'x'; 64 << 10];
                for _ in 0..BIG / chunk.len() {
                    if s.write_all(&chunk).is_err() {
                        return;
                    }
                }
                let _ = s.write_all(b"\"}}]}\n\ndata: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"ok\"}}],\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":2,\"total_tokens\":3}}\n\ndata: [DONE]\n\n");
            }
        });
        let dir = tempfile::tempdir().unwrap();
        let mut cmd = Command::new(BIN);
        cmd.args(["proxy", "--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0"])
            .args([
                "--upstream",
                &upstream,
                "--max-event-bytes",
                "1048576",
                "--records",
            ])
            .arg(dir.path());
        if inject {
            cmd.arg("--inject-usage");
        }
        let mut child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let (addr, _stdout) = listening_addr(&mut child);
        let body = r#"{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true}"#;
        let got = post_raw(&addr, "", body);
        assert!(got.len() > BIG, "every byte forwarded: {}", got.len());
        let end = String::from_utf8_lossy(&got[got.len() - 200..]).to_string();
        assert!(end.contains("data: [DONE]"), "{end}");
        let peak_mb = peak_rss_kb(child.id()) / 1024;
        eprintln!(
            "proxy peak RSS with a {} MB event (inject {inject}): {peak_mb} MB",
            BIG >> 20
        );
        signal(child.id(), "-TERM");
        assert!(child.wait().unwrap().success());
        // Without the bound the proxy held the whole event (~110 MB peak; 216 MB with
        // --inject-usage, measured before the change).
        assert!(peak_mb < 48, "peak RSS {peak_mb} MB (inject {inject})");
        let records: Vec<Value> = std::fs::read_dir(dir.path())
            .unwrap()
            .flat_map(|e| read_jsonl(&e.unwrap().path()))
            .collect();
        assert_eq!(records.len(), 1, "{records:?}");
        assert_eq!(records[0]["status"], "ok");
        assert_eq!(records[0]["oversized_events"], 1, "inject {inject}");
        assert_eq!(
            records[0]["output_tokens"], 2,
            "the event after it is measured"
        );
    }
}

/// What a user meets first on the command line says what happened, each cause once: a replay
/// whose endpoint is down says no turn completed and why (not empty latency tables), a missing
/// dataset is named once, a port in use names the address.
#[test]
fn errors_on_the_command_line_say_what_happened_once() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("d.jsonl");
    synth_file(&data, 1, 2, 0.05);
    // Nothing listens on port 9 of loopback (discard; never served here).
    let out = tokentap(&[
        "replay",
        "--endpoint",
        "http://127.0.0.1:9",
        "--dataset",
        data.to_str().unwrap(),
        "--model",
        "m",
        "--quiet",
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(4), "{stdout}");
    let first = stdout.lines().nth(1).unwrap_or_default();
    assert!(first.starts_with("NO TURN COMPLETED"), "{stdout}");
    assert!(
        stdout.contains("× connect: ") && stdout.contains("Connection refused"),
        "{stdout}"
    );
    assert!(!stdout.contains("qps"), "no empty metrics: {stdout}");
    assert!(
        !stdout.contains("latency (ms)"),
        "no empty tables: {stdout}"
    );

    let out = tokentap(&[
        "replay",
        "--endpoint",
        "http://127.0.0.1:9",
        "--dataset",
        "/nope.jsonl",
        "--model",
        "m",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("/nope.jsonl"), "{err}");
    assert_eq!(
        err.matches("No such file or directory").count(),
        1,
        "the cause once: {err}"
    );

    // Wrong flag combinations and unreadable files name the flags and the file.
    let d = data.to_str().unwrap();
    for (args, want) in [
        (
            vec!["--http1", "--http2"],
            vec!["--http1", "--http2", "cannot be used with"],
        ),
        (
            vec!["--warmup-concurrency", "2"],
            vec![
                "--warmup-concurrency",
                "--warmup-trajectories N or --warmup-duration D",
            ],
        ),
        (vec!["--delay-scale", "-1"], vec!["--delay-scale"]),
        (vec!["--concurrency", "0"], vec!["--concurrency"]),
    ] {
        let mut argv = vec!["replay", "--endpoint", "http://127.0.0.1:9", "--dataset", d];
        argv.extend(&args);
        let out = tokentap(&argv);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_ne!(out.status.code(), Some(0), "{args:?}: {err}");
        for w in want {
            assert!(err.contains(w), "{args:?}: {w:?} not in {err}");
        }
    }
    // Negative numbers are values, not flags: a negative penalty is OpenAI's own range (-2..2).
    let out = tokentap(&[
        "replay",
        "--endpoint",
        "http://127.0.0.1:9",
        "--dataset",
        d,
        "--model",
        "m",
        "--quiet",
        "--presence-penalty",
        "-0.5",
        "--frequency-penalty",
        "-1",
    ]);
    assert_eq!(
        out.status.code(),
        Some(4),
        "parsed and ran: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let folder = dir.path().display().to_string();
    let out = tokentap(&[
        "replay",
        "--endpoint",
        "http://127.0.0.1:9",
        "--dataset",
        &folder,
        "--model",
        "m",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains(&folder), "the file named: {err}");

    // The sim answers a model it does not serve as vLLM does: 404, "does not exist".
    let mut sim = Command::new(BIN)
        .args(["sim", "--listen", "127.0.0.1:0", "--preset", "zero-delay"])
        .args(["--model", "served"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let (sim_addr, _sim_out) = listening_addr(&mut sim);
    let url = format!("http://{sim_addr}");
    let replay = |model: &str| {
        tokentap(&[
            "replay",
            "--endpoint",
            &url,
            "--dataset",
            data.to_str().unwrap(),
            "--model",
            model,
            "--quiet",
        ])
    };
    let out = replay("m");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(4), "{stdout}");
    assert!(
        stdout.contains("× http_status: HTTP 404")
            && stdout.contains("The model `m` does not exist."),
        "{stdout}"
    );
    // The served name: every turn ok (exit 3 only because a tuning point is not valid).
    let out = replay("served");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(3), "{stdout}");
    assert!(!stdout.contains("turns not ok"), "{stdout}");
    signal(sim.id(), "-TERM");
    assert!(sim.wait().unwrap().success());

    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    for args in [
        vec!["sim", "--listen", &addr],
        vec![
            "proxy",
            "--listen",
            &addr,
            "--admin",
            "127.0.0.1:0",
            "--upstream",
            "http://127.0.0.1:9",
        ],
    ] {
        let out = tokentap(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert!(err.contains(&addr), "{args:?}: the address named: {err}");
        assert_eq!(
            err.matches("Address already in use").count(),
            1,
            "{args:?}: the cause once: {err}"
        );
    }
}
