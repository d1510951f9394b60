//! The proxy never loses records silently: a read-only records directory stops the
//! start with an error naming it; on a full disk every record ends written or counted failed
//! (no torn line on disk), `/health` says degraded, `/metrics` counts the failures, and the
//! proxy's stop says what was lost and exits non-zero. The replay's `records.jsonl` goes
//! through the same whole-line writer: on a full disk it too ends on a whole line, counts what
//! it could not write and exits 1.
//!
//! The disks are real: a tmpfs mounted read-only, and a 48 KiB tmpfs, each in a private mount
//! namespace made with `unshare -rm` (util-linux; a user namespace, so no root is needed where
//! unprivileged user namespaces are enabled — and as root it works anyway). The proxy runs in
//! that namespace; its files are copied out when it exits.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;

const BIN: &str = env!("CARGO_BIN_EXE_tokentap");

/// Runs `script` under `sh` in a new user + mount namespace.
fn in_namespace(script: &str) -> Command {
    let mut c = Command::new("unshare");
    c.args(["-rm", "sh", "-c", script]);
    c
}

fn unshare_works() {
    let ok = Command::new("unshare")
        .args(["-rm", "true"])
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        ok,
        "`unshare -rm` failed: these tests mount a tmpfs in a private namespace. Install util-linux and \
         allow unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1), or run as root"
    );
}

#[test]
fn a_read_only_records_directory_stops_the_start_and_is_named() {
    unshare_works();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().display().to_string();
    let out = in_namespace(&format!(
        "mount -t tmpfs -o ro,size=64k none '{d}' || exit 90; exec '{BIN}' proxy --listen 127.0.0.1:0 --admin 127.0.0.1:0 --upstream http://127.0.0.1:9 --records '{d}'"
    ))
    .output()
    .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(90), "mount failed: {err}");
    assert!(
        !out.status.success(),
        "the proxy started on a read-only disk: {err}"
    );
    assert!(err.contains(&format!("records directory {d}")), "{err}");
    assert!(err.contains("Read-only file system"), "{err}");
    assert!(
        !String::from_utf8_lossy(&out.stdout).contains("listening on"),
        "it must not serve"
    );
}

/// A runtime and a zero-delay sim on it.
fn zero_delay_sim() -> (tokio::runtime::Runtime, tokentap_sim::SimServer) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let sim = rt
        .block_on(tokentap_sim::SimServer::start(
            tokentap_sim::SimConfig::zero_delay(),
        ))
        .unwrap();
    (rt, sim)
}

/// A synthetic dataset whose records take far more than 48 KiB.
fn dataset_bytes() -> Vec<u8> {
    let mut buf = Vec::new();
    tokentap_dataset::synth::synth(
        &tokentap_dataset::synth::SynthConfig {
            coding: 4,
            workflow: 30,
            scale: 0.1,
            ..Default::default()
        },
        &mut buf,
    )
    .unwrap();
    buf
}

fn get(addr: &str, path: &str) -> String {
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut r = String::new();
    s.read_to_string(&mut r).unwrap();
    r
}

#[test]
fn on_a_full_disk_every_record_is_written_or_counted_and_the_stop_fails() {
    unshare_works();
    let (rt, sim) = zero_delay_sim();
    let disk = tempfile::tempdir().unwrap();
    let copy = tempfile::tempdir().unwrap();
    let (d, c) = (disk.path().display(), copy.path().display());
    let mut child = in_namespace(&format!(
        "mount -t tmpfs -o size=48k none '{d}' || exit 90
         '{BIN}' proxy --listen 127.0.0.1:0 --admin 127.0.0.1:0 --upstream {} --records '{d}' &
         echo \"pid $!\"
         wait $!; rc=$?
         cp -a '{d}'/. '{c}'/
         exit $rc",
        sim.base_url()
    ))
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    use tokentap_testkit::spawn::announced;
    let pid: i32 = announced(&mut lines, "pid ").parse().unwrap();
    let listen = announced(&mut lines, "listening on ");
    let admin = announced(&mut lines, "admin on http://");

    // A replay through the proxy: far more record bytes than 48 KiB.
    let buf = dataset_bytes();
    let ds =
        tokentap_dataset::Dataset::parse("d.jsonl", std::str::from_utf8(&buf).unwrap()).unwrap();
    let mut rc = tokentap_replay::RunOpts::new(&listen).unwrap();
    rc.model = Some("m".into());
    rc.concurrency = 4;
    let o = rt
        .block_on(tokentap_replay::run_with(
            rc.resolve().unwrap(),
            Arc::new(ds),
            tokentap_replay::ProgressMode::Off,
            std::future::pending(),
        ))
        .unwrap();
    let sent = o.summary.counts.total;
    assert!(sent > 60, "{sent} turns");

    // Degraded, and counted, while it runs.
    let health = get(&admin, "/health");
    assert!(health.contains("\"status\":\"degraded\""), "{health}");
    assert!(health.contains("No space left on device"), "{health}");
    let metrics = get(&admin, "/metrics");
    let failed: u64 = metrics
        .lines()
        .find(|l| l.starts_with("tokentap_proxy_records_failed_total{"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no failed counter:\n{metrics}"));
    assert!(failed > 0);

    // The stop says what was lost and fails.
    let _ = Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status();
    let status = child.wait().unwrap();
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert_ne!(status.code(), Some(90), "mount failed: {err}");
    assert_eq!(
        status.code(),
        Some(1),
        "the proxy must fail when records were lost: {err}"
    );
    assert!(err.contains("records were lost"), "{err}");
    assert!(err.contains("No space left on device"), "{err}");
    let summary = err
        .lines()
        .find(|l| l.starts_with("proxy stopped: "))
        .unwrap_or_else(|| panic!("{err}"));
    let nums: Vec<u64> = summary
        .split(|ch: char| !ch.is_ascii_digit())
        .filter_map(|t| t.parse().ok())
        .collect();
    let (seen, written, dropped, failed) = (nums[0], nums[1], nums[2], nums[3]);
    assert_eq!(seen, sent, "{summary}");
    assert_eq!(
        seen,
        written + dropped + failed,
        "every record accounted for: {summary}"
    );
    assert!(failed > 0 && written > 0, "{summary}");

    // On disk: exactly the written records, whole lines only.
    let mut on_disk = 0;
    for f in std::fs::read_dir(copy.path()).unwrap() {
        let p = f.unwrap().path();
        let text = std::fs::read_to_string(&p).unwrap();
        assert!(
            text.is_empty() || text.ends_with('\n'),
            "{}: torn last line",
            p.display()
        );
        for l in text.lines() {
            let _: tokentap_core::record::TurnRecord = serde_json::from_str(l)
                .unwrap_or_else(|e| panic!("{}: a torn or broken line: {e}", p.display()));
            on_disk += 1;
        }
    }
    assert_eq!(on_disk, written, "{summary}");
    let _ = Path::new(&listen);
    rt.block_on(sim.shutdown());
}

/// The replay's records go through the same whole-line writer as the proxy's: on a disk that
/// fills mid-run, `records.jsonl` ends on a whole line, every record is on disk or counted in
/// `summary.json`'s `run.records_failed`, the terminal says RECORDS LOST, and the run exits 1.
/// Only `records.jsonl` is on the small disk (a 48 KiB tmpfs file bind-mounted over it), so the
/// summary has room to say what was lost.
#[test]
fn the_replay_on_a_full_disk_leaves_whole_lines_counts_the_rest_and_exits_1() {
    unshare_works();
    let (rt, sim) = zero_delay_sim();
    let work = tempfile::tempdir().unwrap();
    let buf = dataset_bytes();
    let data = work.path().join("d.jsonl");
    std::fs::write(&data, &buf).unwrap();
    let disk = work.path().join("disk");
    let out = work.path().join("run");
    let copy = work.path().join("copy.jsonl");
    std::fs::create_dir_all(&disk).unwrap();
    std::fs::create_dir_all(&out).unwrap();
    let (d, o, c, ds) = (
        disk.display(),
        out.display(),
        copy.display(),
        data.display(),
    );
    let run = in_namespace(&format!(
        "mount -t tmpfs -o size=48k none '{d}' || exit 90
         touch '{d}/records.jsonl' '{o}/records.jsonl'
         mount --bind '{d}/records.jsonl' '{o}/records.jsonl' || exit 91
         '{BIN}' replay --endpoint {} --dataset '{ds}' --model m --concurrency 4 --quiet --out '{o}'
         rc=$?
         cp '{d}/records.jsonl' '{c}'
         exit $rc",
        sim.base_url()
    ))
    .output()
    .unwrap();
    let stdout = String::from_utf8_lossy(&run.stdout);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(
        !matches!(run.status.code(), Some(90 | 91)),
        "mount failed: {stderr}"
    );
    assert_eq!(
        run.status.code(),
        Some(1),
        "records were lost, the replay must exit 1:\n{stdout}\n{stderr}"
    );
    assert!(stdout.contains("RECORDS LOST"), "{stdout}");
    assert!(stdout.contains("No space left on device"), "{stdout}");

    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    let total = summary["counts"]["total"].as_u64().unwrap();
    let failed = summary["run"]["records_failed"].as_u64().unwrap();
    assert!(
        summary["run"]["records_error"]
            .as_str()
            .unwrap()
            .contains("No space left on device"),
        "{}",
        summary["run"]
    );
    let text = std::fs::read_to_string(&copy).unwrap();
    assert!(
        text.is_empty() || text.ends_with('\n'),
        "records.jsonl ends in a torn line"
    );
    let mut on_disk = 0;
    for l in text.lines() {
        let _: serde_json::Value =
            serde_json::from_str(l).unwrap_or_else(|e| panic!("a torn or broken line: {e}"));
        on_disk += 1;
    }
    assert!(
        failed > 0 && on_disk > 0,
        "{on_disk} on disk, {failed} failed"
    );
    assert_eq!(
        on_disk + failed,
        total,
        "every record on disk or counted failed"
    );
    // merge refuses a run whose records are incomplete, saying why.
    std::fs::copy(&copy, out.join("records.jsonl")).unwrap();
    let merged = Command::new(BIN)
        .arg("merge")
        .arg(&out)
        .arg("--out")
        .arg(work.path().join("merged"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&merged.stderr);
    assert_eq!(merged.status.code(), Some(1), "{err}");
    assert!(
        err.contains("were NOT written") && err.contains("run the shard again"),
        "{err}"
    );
    rt.block_on(sim.shutdown());
}
