//! The proxy never loses records silently (issue 13): a read-only records directory stops the
//! start with an error naming it; on a full disk every record ends written or counted failed
//! (no torn line on disk), `/health` says degraded, `/metrics` counts the failures, and the
//! proxy's stop says what was lost and exits non-zero.
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
    let rt = tokio::runtime::Runtime::new().unwrap();
    let sim = rt
        .block_on(tokentap_sim::SimServer::start(
            tokentap_sim::SimConfig::zero_delay(),
        ))
        .unwrap();
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
    let mut next = || lines.next().expect("a line from the proxy").unwrap();
    let pid: i32 = next().strip_prefix("pid ").unwrap().parse().unwrap();
    let listen = next().strip_prefix("listening on ").unwrap().to_string();
    let admin = next().strip_prefix("admin on http://").unwrap().to_string();

    // A replay through the proxy: far more record bytes than 48 KiB.
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
    let ds =
        tokentap_dataset::Dataset::parse("d.jsonl", std::str::from_utf8(&buf).unwrap()).unwrap();
    let mut rc = tokentap_replay::ReplayConfig::new(&listen).unwrap();
    rc.model = Some("m".into());
    rc.concurrency = 4;
    let o = rt
        .block_on(tokentap_replay::run_with(
            rc,
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
