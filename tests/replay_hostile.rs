//! The replay against servers that misbehave: an SSE line that never ends is cut at
//! `--max-event-bytes` instead of growing the buffer, a stream cut inside an event or ended
//! without `[DONE]` is a failed turn with a kind that says so, a turn that times out after its
//! head keeps the head's status, and the exit codes tell a clean run, an invalid point and
//! failed turns apart.
//!
//! The server here is a raw TCP script on 127.0.0.1:0 (each connection: read the request, write
//! the scripted bytes, then close or hold the connection open): the hostile upstream itself,
//! not a stand-in for anything of ours.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::Command;
use std::sync::Arc;
use tokentap_core::record::Status;

const BIN: &str = env!("CARGO_BIN_EXE_tokentap");

#[derive(Clone, Copy)]
enum After {
    Close,
    /// Keep the connection open, writing nothing more.
    Hold,
    /// Write `data: ` and then this many bytes without a newline, then close.
    EndlessLine(usize),
}

/// Serves every connection with `head_and_body`, then `after`. Returns the base URL.
fn script(head_and_body: &'static [u8], after: After) -> String {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", l.local_addr().unwrap());
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for s in l.incoming() {
            let Ok(mut s) = s else { return };
            read_request(&mut s);
            let _ = s.write_all(head_and_body);
            match after {
                After::Close => {}
                After::Hold => held.push(s),
                After::EndlessLine(n) => {
                    let block = vec![b'x'; 64 * 1024];
                    let mut sent = 0;
                    let _ = s.write_all(b"data: ");
                    // The client cuts the stream once over its bound: stop at the first error.
                    while sent < n && s.write_all(&block).is_ok() {
                        sent += block.len();
                    }
                }
            }
        }
    });
    url
}

fn read_request(s: &mut TcpStream) {
    let mut buf = Vec::new();
    let mut b = [0u8; 4096];
    loop {
        let n = s.read(&mut b).unwrap_or(0);
        if n == 0 {
            return;
        }
        buf.extend_from_slice(&b[..n]);
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
            let len: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(0);
            while buf.len() < end + 4 + len {
                let n = s.read(&mut b).unwrap_or(0);
                if n == 0 {
                    return;
                }
                buf.extend_from_slice(&b[..n]);
            }
            return;
        }
    }
}

fn dataset_file(dir: &std::path::Path) -> std::path::PathBuf {
    let p = dir.join("d.jsonl");
    let mut f = std::fs::File::create(&p).unwrap();
    tokentap_dataset::synth::synth(
        &tokentap_dataset::synth::SynthConfig {
            coding: 0,
            workflow: 1,
            scale: 0.1,
            ..Default::default()
        },
        &mut f,
    )
    .unwrap();
    p
}

/// One replay against `url`; the first turn's record.
fn first_turn(url: &str, extra: &[&str]) -> tokentap_core::record::TurnRecord {
    let dir = tempfile::tempdir().unwrap();
    let data = dataset_file(dir.path());
    let mut args = vec![
        "--endpoint",
        url,
        "--dataset",
        data.to_str().unwrap(),
        "--model",
        "m",
    ];
    args.extend_from_slice(extra);
    let opts = tokentap_replay::Opts::try_parse_from_args(args).unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let o = rt
        .block_on(async {
            let (ds, hash) = tokentap_replay::load_dataset(&data).await?;
            let mut cfg = opts.resolve()?;
            cfg.bind_dataset(&ds, Some(hash))?;
            cfg.out = Some(dir.path().join("out"));
            tokentap_replay::run_with(
                cfg,
                Arc::new(ds),
                tokentap_replay::ProgressMode::Off,
                std::future::pending(),
            )
            .await
        })
        .unwrap();
    let text = std::fs::read_to_string(o.out_dir.unwrap().join("records.jsonl")).unwrap();
    serde_json::from_str(text.lines().next().unwrap()).unwrap()
}

const SSE_HEAD_CLOSE: &str =
    "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n";
const CHUNK: &str = "data: {\"id\":\"x\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hello\"}}]}\n\n";

#[test]
fn an_endless_sse_line_fails_the_turn_at_the_bound() {
    let head: &'static str = Box::leak(format!("{SSE_HEAD_CLOSE}{CHUNK}").into_boxed_str());
    // 40 MiB without a newline against a 1 MiB bound (the default is 16 MiB).
    let url = script(head.as_bytes(), After::EndlessLine(40 << 20));
    let r = first_turn(&url, &["--max-event-bytes", "1048576"]);
    assert_eq!(r.status, Status::Failed);
    let e = r.error.unwrap();
    assert_eq!(e.kind, "event_too_large", "{}", e.message);
    assert!(e.message.contains("1048576"), "{}", e.message);
    assert_eq!(r.http_status, Some(200));
}

#[test]
fn a_stream_cut_inside_an_event_is_failed() {
    let body: &'static str = Box::leak(
        format!("{SSE_HEAD_CLOSE}{CHUNK}data: {{\"choices\":[{{\"delta\":{{\"content\":\"hi")
            .into_boxed_str(),
    );
    let r = first_turn(&script(body.as_bytes(), After::Close), &[]);
    assert_eq!(r.status, Status::Failed);
    assert_eq!(r.error.unwrap().kind, "stream_cut_mid_event");
    assert_eq!(r.http_status, Some(200));
}

#[test]
fn a_stream_without_done_is_failed() {
    // Close-delimited, every event whole, no [DONE].
    let body: &'static str = Box::leak(format!("{SSE_HEAD_CLOSE}{CHUNK}{CHUNK}").into_boxed_str());
    let r = first_turn(&script(body.as_bytes(), After::Close), &[]);
    assert_eq!(r.status, Status::Failed);
    assert_eq!(r.error.unwrap().kind, "stream_without_done");
    // Chunked, properly terminated, still no [DONE].
    let chunked: &'static str = Box::leak(
        format!(
            "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n{:x}\r\n{CHUNK}\r\n0\r\n\r\n",
            CHUNK.len()
        )
        .into_boxed_str(),
    );
    let r = first_turn(&script(chunked.as_bytes(), After::Close), &[]);
    assert_eq!(r.status, Status::Failed);
    assert_eq!(r.error.unwrap().kind, "stream_without_done");
    // The same with [DONE] is ok (the check is not a false alarm).
    let good: &'static str =
        Box::leak(format!("{SSE_HEAD_CLOSE}{CHUNK}data: [DONE]\n\n").into_boxed_str());
    let r = first_turn(&script(good.as_bytes(), After::Close), &[]);
    assert_eq!(r.status, Status::Ok, "{:?}", r.error);
}

#[test]
fn a_turn_timed_out_after_its_head_keeps_the_status() {
    let head: &'static str = Box::leak(format!("{SSE_HEAD_CLOSE}{CHUNK}").into_boxed_str());
    let r = first_turn(
        &script(head.as_bytes(), After::Hold),
        &["--turn-timeout", "300ms"],
    );
    assert_eq!(r.status, Status::TimedOut);
    assert_eq!(r.http_status, Some(200));
}

#[test]
fn exit_codes_tell_failed_turns_and_invalid_points_apart() {
    let dir = tempfile::tempdir().unwrap();
    let data = dataset_file(dir.path());
    let run = |url: &str, extra: &[&str]| {
        Command::new(BIN)
            .args([
                "replay",
                "--endpoint",
                url,
                "--model",
                "m",
                "--quiet",
                "--dataset",
            ])
            .arg(&data)
            .args(extra)
            .output()
            .unwrap()
    };
    // Every turn failed (no [DONE]): 4.
    let body: &'static str = Box::leak(format!("{SSE_HEAD_CLOSE}{CHUNK}").into_boxed_str());
    let url = script(body.as_bytes(), After::Close);
    let o = run(&url, &[]);
    assert_eq!(
        o.status.code(),
        Some(4),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(run(&url, &["--exit-zero"]).status.code(), Some(0));
    // Clean turns, an invalid point (a tuning run: no salting, no delays, short): 3.
    let rt = tokio::runtime::Runtime::new().unwrap();
    let sim = rt
        .block_on(tokentap_sim::SimServer::start(
            tokentap_sim::SimConfig::zero_delay(),
        ))
        .unwrap();
    let o = run(&sim.base_url(), &[]);
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(3), "{stdout}");
    assert!(stdout.contains("INVALID"), "{stdout}");
    assert_eq!(
        run(&sim.base_url(), &["--exit-zero"]).status.code(),
        Some(0)
    );
    rt.block_on(sim.shutdown());
}

/// A delay no timer can represent (`1e308` seconds) is refused where the dataset is read — by
/// `dataset validate` and by `replay`, with one message naming the file, line and field — and
/// so is a `--delay-scale` past its bound: nothing that validates can make a slot panic.
#[test]
fn an_impossible_delay_is_refused_by_validate_and_replay_alike() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("d.jsonl");
    std::fs::write(
        &data,
        concat!(
            r#"{"conversation_id":"c1","turn":1,"role":"user","content":"hi"}"#,
            "\n",
            r#"{"conversation_id":"c1","turn":2,"role":"assistant","content":"yo"}"#,
            "\n",
            r#"{"conversation_id":"c1","turn":3,"role":"user","content":"more","delay_seconds":1e308}"#,
            "\n",
        ),
    )
    .unwrap();
    let want = "field `delay_seconds`: expected a number of seconds from 0 to 86400 (one day), found 1e+308";
    let (code, text) = validate(&data);
    assert_ne!(code, Some(0), "{text}");
    assert!(text.contains(want) && text.contains("d.jsonl:3:"), "{text}");
    assert!(text.contains("delay_seconds"), "{text}");
    let (code, err) = replay_nowhere(&data, &["--delays"]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains(want) && err.contains("d.jsonl:3:"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    let (code, err) = replay_nowhere(&data, &["--delays", "--delay-scale", "1e308"]);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("--delay-scale must be a number from 0 to 1000, found"),
        "{err}"
    );
}

/// A dataset with a byte that is not UTF-8: `validate` and `replay` name its line and column,
/// once.
#[test]
fn a_non_utf8_dataset_is_refused_at_its_line_once() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("d.jsonl");
    let mut bytes = br#"{"conversation_id":"c1","turn":1,"role":"user","content":"hi"}"#.to_vec();
    bytes.extend_from_slice(
        b"\n{\"conversation_id\":\"c1\",\"turn\":2,\"role\":\"assistant\",\"content\":\"\xff\"}\n",
    );
    std::fs::write(&data, bytes).unwrap();
    let want = "d.jsonl:2: not UTF-8: byte 0xff at column 64";
    let (_, text) = validate(&data);
    assert!(text.contains(want), "{text}");
    let (code, err) = replay_nowhere(&data, &[]);
    assert_eq!(code, Some(1), "{err}");
    assert_eq!(err.matches(want).count(), 1, "named once: {err}");
}

/// `tokentap dataset validate FILE`: its exit code and everything it printed.
fn validate(data: &std::path::Path) -> (Option<i32>, String) {
    let o = Command::new(BIN)
        .args(["dataset", "validate"])
        .arg(data)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&o.stdout).to_string() + &String::from_utf8_lossy(&o.stderr);
    (o.status.code(), text)
}

/// `tokentap replay` of `data` at an endpoint nothing listens on (the dataset is refused before
/// any request): its exit code and stderr.
fn replay_nowhere(data: &std::path::Path, extra: &[&str]) -> (Option<i32>, String) {
    let o = Command::new(BIN)
        .args(["replay", "--endpoint", "http://127.0.0.1:9", "--model", "m"])
        .args(extra)
        .arg("--dataset")
        .arg(data)
        .output()
        .unwrap();
    (
        o.status.code(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}
