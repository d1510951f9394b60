//! `synth`, `stats` and the `tokentap dataset` commands: synthesized data validates and has the
//! shapes of docs/benchmark.md#workload, is deterministic, and stats gives exact numbers on a
//! handcrafted dataset.

use serde_json::Value;
use std::collections::HashSet;
use tokentap_core::text::REASONING_PREAMBLE;
use tokentap_dataset::cli::{run_with, DatasetCommand};
use tokentap_dataset::stats::stats;
use tokentap_dataset::synth::{synth, SynthConfig, SynthSummary};
use tokentap_dataset::{Dataset, Role};

fn small(seed: u64) -> SynthConfig {
    SynthConfig {
        seed,
        coding: 6,
        workflow: 20,
        scale: 0.15,
        ..SynthConfig::default()
    }
}

fn generate(cfg: &SynthConfig) -> (Vec<u8>, SynthSummary) {
    let mut out = Vec::new();
    let summary = synth(cfg, &mut out).expect("writing to a Vec cannot fail");
    (out, summary)
}

fn load(bytes: &[u8]) -> Dataset {
    let text = std::str::from_utf8(bytes).expect("synth writes UTF-8");
    Dataset::parse("synth.jsonl", text)
        .unwrap_or_else(|e| panic!("synth output does not validate:\n{e}"))
}

/// A fresh directory, removed when the returned guard drops.
fn temp_dir(name: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(&format!("tokentap-dataset-{name}-"))
        .tempdir()
        .unwrap()
}

// ---------------------------------------------------------------------------------------------
// synth

#[test]
fn synth_output_validates_and_matches_its_summary() {
    let (bytes, sum) = generate(&small(7));
    let ds = load(&bytes);
    assert_eq!(sum.bytes, bytes.len() as u64);
    assert_eq!((sum.trajectories, sum.coding, sum.workflow), (26, 6, 20));
    assert_eq!(ds.conversations.len(), 26);
    assert_eq!(sum.client_turns, ds.client_turns() as u64);
    let rows: usize = ds.conversations.iter().map(|c| c.rows.len()).sum();
    assert_eq!(sum.rows, rows as u64);
    assert_eq!(sum.assistant_turns + sum.client_turns, sum.rows);
    // The first line is the metadata row, with the seed.
    let first: Value =
        serde_json::from_slice(bytes.split(|&b| b == b'\n').next().unwrap()).unwrap();
    assert_eq!(first["_type"], "dataset_metadata");
    assert_eq!(first["source"], "tokentap synth");
    assert_eq!(first["seed"], 7);
}

#[test]
fn synth_is_deterministic_per_seed() {
    let (a, _) = generate(&small(42));
    let (b, _) = generate(&small(42));
    assert!(a == b, "same seed must give identical bytes");
    let (c, _) = generate(&small(43));
    assert!(a != c, "a different seed must give different data");
    // Adding trajectories does not change the ones already there (per-trajectory streams):
    // with all coding first, 6 coding trajectories are a prefix of 7.
    let first = SynthConfig {
        interleave: false,
        workflow: 0,
        ..small(42)
    };
    let (six, _) = generate(&first);
    let (seven, _) = generate(&SynthConfig { coding: 7, ..first });
    let body = |b: &[u8]| b.splitn(2, |&x| x == b'\n').nth(1).unwrap().to_vec();
    assert!(body(&seven).starts_with(&body(&six)));
}

#[test]
fn synth_mix_counts_ids_and_order() {
    let (bytes, _) = generate(&small(1));
    let ds = load(&bytes);
    let workflow: Vec<&str> = ds
        .conversations
        .iter()
        .filter(|c| c.is_workflow())
        .map(|c| c.id.as_str())
        .collect();
    let expected: Vec<String> = (1..=20).map(|i| format!("sim_{i:06}")).collect();
    assert_eq!(workflow, expected);
    let coding: Vec<&str> = ds
        .conversations
        .iter()
        .filter(|c| !c.is_workflow())
        .map(|c| c.id.as_str())
        .collect();
    assert_eq!(coding.len(), 6);
    assert_eq!(
        coding.iter().collect::<HashSet<_>>().len(),
        6,
        "coding ids are unique"
    );
    for id in &coding {
        // `owner__repo-NNNNN`, like `django__django-16899`.
        let (owner, rest) = id.split_once("__").unwrap_or_else(|| panic!("{id}"));
        let (repo, number) = rest.rsplit_once('-').unwrap();
        assert!(
            !owner.is_empty() && !repo.is_empty() && number.parse::<u32>().is_ok(),
            "{id}"
        );
    }
    // Interleaved: 6 coding among 20 workflow, spread evenly, so no two coding ones are adjacent
    // and the first quarter of the file already has both.
    let kinds: Vec<bool> = ds.conversations.iter().map(|c| c.is_workflow()).collect();
    assert!(kinds.windows(2).all(|w| w[0] || w[1]), "{kinds:?}");
    assert!(kinds[..7].contains(&false) && kinds[..7].contains(&true));
    // Coding first on request.
    let (bytes, _) = generate(&SynthConfig {
        interleave: false,
        ..small(1)
    });
    let ds = load(&bytes);
    assert!(ds.conversations[..6].iter().all(|c| !c.is_workflow()));
    assert!(ds.conversations[6..].iter().all(|c| c.is_workflow()));
    // The default is the official mix.
    let d = SynthConfig::default();
    assert_eq!((d.coding, d.workflow, d.scale), (113, 500, 1.0));
}

#[test]
fn synth_coding_shape() {
    let cfg = SynthConfig {
        seed: 3,
        coding: 12,
        workflow: 0,
        scale: 1.0,
        ..SynthConfig::default()
    };
    let (bytes, _) = generate(&cfg);
    let ds = load(&bytes);
    let mut parallel = 0;
    let mut ends_on_tool = 0;
    let mut commands = HashSet::new();
    for c in &ds.conversations {
        let client = c.client_turns().count();
        assert!(
            (20..=60).contains(&client),
            "{}: {client} client turns",
            c.id
        );
        let first = &c.rows[0];
        assert!(first.system.as_ref().is_some_and(|s| s.len() > 1500));
        let tools = first
            .tools
            .as_ref()
            .and_then(Value::as_array)
            .expect("tools on the first row");
        assert_eq!(tools[0]["function"]["name"], "bash");
        let mut outputs = Vec::new();
        for (i, r) in c.rows.iter().enumerate() {
            match r.role {
                Role::Assistant => {
                    let reasoning = r
                        .reasoning_content
                        .as_deref()
                        .expect("reasoning on every assistant row");
                    assert!(reasoning.starts_with(REASONING_PREAMBLE));
                    let calls = r.tool_calls.as_deref().unwrap_or_default();
                    if calls.len() > 1 {
                        parallel += 1;
                    }
                    for call in calls {
                        if call["function"]["name"] == "bash" {
                            let args: Value = serde_json::from_str(
                                call["function"]["arguments"].as_str().unwrap(),
                            )
                            .unwrap();
                            let cmd = args["command"].as_str().unwrap();
                            commands.insert(cmd.split_whitespace().next().unwrap().to_string());
                        }
                    }
                    if calls.is_empty() {
                        assert!(
                            r.content_str().is_some_and(|s| !s.is_empty()),
                            "final answer has content"
                        );
                        assert_eq!(i, c.rows.len() - 1);
                    }
                }
                Role::Tool => {
                    let results = r.tool_results.as_ref().unwrap();
                    let calls = c.rows[i - 1].tool_calls.as_ref().unwrap();
                    assert_eq!(results.len(), calls.len(), "one result per call");
                    for (res, call) in results.iter().zip(calls) {
                        assert_eq!(res.tool_call_id, call["id"].as_str().unwrap());
                    }
                    let d = r
                        .delay_seconds
                        .expect("tool rows carry the tool's run time");
                    assert!((0.1..=60.0).contains(&d), "{d}");
                    outputs.push(
                        results
                            .iter()
                            .map(|t| t.content.as_ref().unwrap().as_str().unwrap().len())
                            .sum::<usize>(),
                    );
                }
                Role::User => assert_eq!(i, 0, "coding trajectories have one user row"),
            }
        }
        if c.rows.last().unwrap().role == Role::Tool {
            ends_on_tool += 1;
        }
        // Command output grows: the second half of the rounds prints more than the first.
        let half = outputs.len() / 2;
        let (early, late): (usize, usize) =
            (outputs[..half].iter().sum(), outputs[half..].iter().sum());
        assert!(late > early, "{}: output {early} then {late}", c.id);
    }
    assert!(parallel > 0, "some rounds have parallel tool calls");
    assert!(ends_on_tool < ds.conversations.len());
    for cmd in ["cd", "grep", "ls", "find"] {
        assert!(commands.contains(cmd), "{cmd} in {commands:?}");
    }
    assert!(commands.contains("cat") || commands.contains("sed"));
}

#[test]
fn synth_workflow_shape() {
    let cfg = SynthConfig {
        seed: 9,
        coding: 0,
        workflow: 30,
        scale: 1.0,
        ..SynthConfig::default()
    };
    let (bytes, _) = generate(&cfg);
    let ds = load(&bytes);
    let system = ds.conversations[0].system().unwrap();
    assert!(
        (8 * 1024..=17 * 1024).contains(&system.len()),
        "system prompt {} bytes",
        system.len()
    );
    let tools = ds.conversations[0]
        .default_tools()
        .unwrap()
        .as_array()
        .unwrap();
    assert!((20..=40).contains(&tools.len()), "{} tools", tools.len());
    assert!(tools
        .iter()
        .all(|t| t["function"]["parameters"]["type"] == "object"));
    let mut with_tool_rows = 0;
    for c in &ds.conversations {
        assert_eq!(c.system(), Some(system), "one shared system prompt");
        assert_eq!(
            c.default_tools().unwrap().as_array().unwrap(),
            tools,
            "one shared tool set"
        );
        let client = c.client_turns().count();
        assert!((2..=8).contains(&client), "{}: {client} client turns", c.id);
        for r in &c.rows {
            match r.role {
                Role::Assistant => {
                    let codes = r
                        .intent_codes
                        .as_ref()
                        .expect("intent codes on every assistant row");
                    let content = r.content_str().unwrap();
                    assert!(
                        content.starts_with(&format!("intent: {}", codes[0])),
                        "{content}"
                    );
                    assert!(codes.iter().all(|c| c.len() == 4 && c.starts_with('I')));
                }
                Role::User if r.turn > 1 => {
                    let d = r.delay_seconds.unwrap();
                    assert!((1.0..=20.0).contains(&d), "think time {d}");
                }
                Role::User => {}
                Role::Tool => with_tool_rows += 1,
            }
        }
    }
    assert!(with_tool_rows > 0);
}

#[test]
fn synth_scale_changes_sizes_and_depth() {
    let at = |scale| {
        let (bytes, sum) = generate(&SynthConfig { scale, ..small(5) });
        load(&bytes);
        sum
    };
    let (a, b) = (at(0.1), at(0.5));
    assert!(b.bytes > 2 * a.bytes, "{} vs {}", a.bytes, b.bytes);
    assert!(b.client_turns > a.client_turns);
    let coding = SynthConfig {
        workflow: 0,
        ..small(5)
    };
    let shallow = generate(&coding).1;
    let (deep_bytes, deep) = generate(&SynthConfig {
        depth_scale: 3.0,
        ..coding
    });
    load(&deep_bytes);
    assert!(
        deep.client_turns > 2 * shallow.client_turns,
        "{} vs {}",
        deep.client_turns,
        shallow.client_turns
    );
}

#[test]
fn synth_rejects_a_bad_scale() {
    for scale in [0.0, -1.0, f64::NAN, f64::INFINITY] {
        let e = synth(&SynthConfig { scale, ..small(1) }, &mut Vec::new()).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput);
        assert!(e.to_string().contains("scale must be a finite number > 0"));
    }
}

// ---------------------------------------------------------------------------------------------
// stats

/// Coding `c1`: system "SYS" (3 B), tools `[{"a":1}]` (9 B), user "hello" (5 B); an assistant
/// with reasoning "rr" and one call whose compact JSON is 72 B; a tool row with id "x" and
/// "0123456789"; a final "done". Workflow `sim_000001`: system "SYSTEM", three user rows and two
/// assistant rows, delays 2 and 4.
const HANDMADE: &str = r#"{"_type":"dataset_metadata"}
{"conversation_id":"c1","turn":1,"role":"user","system":"SYS","tools":[{"a":1}],"content":"hello"}
{"conversation_id":"c1","turn":2,"role":"assistant","reasoning_content":"rr","tool_calls":[{"id":"x","type":"function","function":{"name":"bash","arguments":"{}"}}]}
{"conversation_id":"c1","turn":3,"role":"tool","tool_results":[{"tool_call_id":"x","content":"0123456789"}],"delay_seconds":0.5}
{"conversation_id":"c1","turn":4,"role":"assistant","content":"done"}
{"conversation_id":"sim_000001","turn":1,"role":"user","system":"SYSTEM","content":"hi"}
{"conversation_id":"sim_000001","turn":2,"role":"assistant","content":"intent: I001","intent_codes":["I001"]}
{"conversation_id":"sim_000001","turn":3,"role":"user","content":"more","delay_seconds":2.0}
{"conversation_id":"sim_000001","turn":4,"role":"assistant","content":"ok","intent_codes":["I001"]}
{"conversation_id":"sim_000001","turn":5,"role":"user","content":"x","delay_seconds":4.0}
"#;

#[test]
fn stats_exact_numbers_on_a_handmade_dataset() {
    let ds = Dataset::parse("h.jsonl", HANDMADE).unwrap();
    let s = stats(&ds);
    let (c, w, t) = (&s.coding, &s.workflow, &s.total);

    assert_eq!(
        (
            c.trajectories,
            c.rows,
            c.client_turns,
            c.user_turns,
            c.tool_turns,
            c.assistant_turns
        ),
        (1, 4, 2, 1, 1, 2)
    );
    assert_eq!(
        (
            w.trajectories,
            w.rows,
            w.client_turns,
            w.user_turns,
            w.tool_turns,
            w.assistant_turns
        ),
        (1, 5, 3, 3, 0, 2)
    );
    assert_eq!(
        (t.trajectories, t.rows, t.client_turns, t.assistant_turns),
        (2, 9, 5, 4)
    );

    let tpt = t.turns_per_trajectory.unwrap();
    assert_eq!(
        (tpt.count, tpt.min, tpt.p50, tpt.max, tpt.mean, tpt.sum),
        (2, 2.0, 2.5, 3.0, 2.5, 5.0)
    );
    assert_eq!(tpt.p90, 2.9);

    // Coding requests: turn 1 = 3 + 5 + 9 = 17 B (5 tokens); turn 2 = 3 + 5 + (2 + 72) + (1 + 10)
    // + 9 = 102 B (26 tokens).
    let first = c.first_request.unwrap();
    assert_eq!((first.bytes.max, first.tokens.max), (17.0, 5.0));
    let fin = c.final_context.unwrap();
    assert_eq!((fin.bytes.max, fin.tokens.max), (102.0, 26.0));
    assert_eq!(c.growth_per_turn_bytes.unwrap().sum, 85.0);
    // Workflow requests: 6 + 2 = 8 B; 8 + 12 + 4 = 24 B; 24 + 2 + 1 = 27 B.
    assert_eq!(w.final_context.unwrap().bytes.max, 27.0);
    assert_eq!(w.final_context.unwrap().tokens.max, 7.0);
    let g = w.growth_per_turn_bytes.unwrap();
    assert_eq!((g.count, g.min, g.max), (2, 3.0, 16.0));

    // By client-turn index: turn 1 = {17, 8}, turn 2 = {102, 24}, turns 3-4 = {27}.
    let buckets: Vec<(u32, u32, u64, f64, f64)> = t
        .prompt_by_turn
        .iter()
        .map(|b| {
            (
                b.from,
                b.to,
                b.size.bytes.count,
                b.size.bytes.min,
                b.size.bytes.max,
            )
        })
        .collect();
    assert_eq!(
        buckets,
        [
            (1, 1, 2, 8.0, 17.0),
            (2, 2, 2, 24.0, 102.0),
            (3, 4, 1, 27.0, 27.0)
        ]
    );
    assert_eq!(t.prompt_by_turn[1].size.tokens.mean, 16.0); // (26 + 6) / 2

    // Delays: coding {0.5} and one row without; workflow {2, 4} and the first row without.
    assert_eq!((c.delays.count, c.delays.missing), (1, 1));
    let d = w.delays.seconds.unwrap();
    assert_eq!(
        (w.delays.count, w.delays.missing, d.sum, d.p50, d.max),
        (2, 1, 6.0, 3.0, 4.0)
    );
    assert_eq!((t.delays.count, t.delays.seconds.unwrap().sum), (3, 6.5));

    // System prompts and tools.
    assert_eq!(
        (
            t.system_prompts.trajectories_with,
            t.system_prompts.distinct
        ),
        (2, 2)
    );
    assert_eq!(
        t.system_prompts
            .top
            .iter()
            .map(|x| x.bytes)
            .collect::<Vec<_>>(),
        [6, 3],
        "ties: larger first"
    );
    assert_eq!((c.tools.trajectories_with, c.tools.distinct_sets), (1, 1));
    assert_eq!(
        (
            c.tools.per_trajectory.unwrap().max,
            c.tools.bytes.unwrap().max
        ),
        (1.0, 9.0)
    );
    assert_eq!(
        (w.tools.trajectories_with, w.tools.per_trajectory),
        (0, None)
    );

    // Assistant rows: coding 2 + 72 = 74 B (19 tokens) and "done" (1); workflow 12 B (3), 2 B (1).
    assert_eq!(
        (
            c.assistant.with_tool_calls,
            c.assistant.with_reasoning,
            c.assistant.with_parallel_tool_calls
        ),
        (1, 1, 0)
    );
    assert_eq!(c.assistant.output_tokens.unwrap().sum, 20.0);
    assert_eq!(
        (
            w.assistant.with_intent_codes,
            w.assistant.output_tokens.unwrap().sum
        ),
        (2, 4.0)
    );

    let text = s.render_text();
    for part in [
        "== coding ==",
        "== workflow ==",
        "== total ==",
        "trajectories 1",
        "client turns 5",
        "delays: 3 rows with",
    ] {
        assert!(text.contains(part), "{part:?} missing from:\n{text}");
    }
}

#[test]
fn stats_on_synth_agree_with_the_summary() {
    let (bytes, sum) = generate(&small(11));
    let s = stats(&load(&bytes));
    assert_eq!(s.total.trajectories, sum.trajectories);
    assert_eq!(s.total.client_turns, sum.client_turns);
    assert_eq!(s.total.assistant_turns, sum.assistant_turns);
    assert_eq!((s.coding.trajectories, s.workflow.trajectories), (6, 20));
    assert_eq!(s.workflow.system_prompts.distinct, 1);
    assert_eq!(s.workflow.tools.distinct_sets, 1);
    assert_eq!(s.coding.system_prompts.distinct, 1);
    // The workflow shape has a large shared prefix: its first request is bigger than coding's,
    // while coding contexts grow further.
    let (wf, cf) = (
        s.workflow.first_request.unwrap(),
        s.coding.first_request.unwrap(),
    );
    assert!(wf.bytes.mean > cf.bytes.mean);
    assert!(
        s.coding.growth_per_turn_bytes.unwrap().mean
            > s.workflow.growth_per_turn_bytes.unwrap().mean
    );
}

// ---------------------------------------------------------------------------------------------
// CLI

fn cli(cmd: DatasetCommand) -> (i32, String, String) {
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let code = run_with(cmd, &tokentap_dataset::cli::no_hooks(), &mut out, &mut err)
        .expect("command runs");
    (
        code,
        String::from_utf8(out).unwrap(),
        String::from_utf8(err).unwrap(),
    )
}

#[test]
fn cli_synth_validate_stats() {
    let tmp = temp_dir("cli");
    let dir = tmp.path();
    let file = dir.join("d.jsonl");
    let (code, out, err) = cli(DatasetCommand::Synth {
        out: Some(file.clone()),
        seed: 2,
        coding: 3,
        workflow: 9,
        scale: 0.1,
        depth_scale: 1.0,
        coding_first: false,
    });
    assert_eq!((code, out.as_str()), (0, ""));
    assert!(
        err.starts_with("wrote 12 trajectories (3 coding, 9 workflow)"),
        "{err}"
    );
    let ds = Dataset::load(&file).unwrap();

    let (code, out, err) = cli(DatasetCommand::Validate { file: file.clone() });
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        out,
        format!(
            "ok: 12 trajectories, {} client turns, {} assistant turns\n",
            ds.client_turns(),
            {
                ds.conversations
                    .iter()
                    .flat_map(|c| &c.rows)
                    .filter(|r| r.role == Role::Assistant)
                    .count()
            }
        )
    );

    let (code, out, _) = cli(DatasetCommand::Stats {
        against: None,
        html: None,
        file: file.clone(),
        json: true,
    });
    assert_eq!(code, 0);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["total"]["trajectories"], 12);
    assert_eq!(v["workflow"]["trajectories"], 9);
    let (code, out, _) = cli(DatasetCommand::Stats {
        against: None,
        html: None,
        file: file.clone(),
        json: false,
    });
    assert_eq!(code, 0);
    assert!(
        out.contains("== workflow ==") && out.contains("request size by client turn"),
        "{out}"
    );

    // Synth to stdout writes the same bytes as to a file.
    let (code, out, _) = cli(DatasetCommand::Synth {
        out: None,
        seed: 2,
        coding: 3,
        workflow: 9,
        scale: 0.1,
        depth_scale: 1.0,
        coding_first: false,
    });
    assert_eq!(code, 0);
    assert_eq!(out.as_bytes(), std::fs::read(&file).unwrap());
}

#[test]
fn cli_validate_prints_every_error_and_fails() {
    let tmp = temp_dir("invalid");
    let dir = tmp.path();
    let file = dir.join("bad.jsonl");
    // 60 bad rows: more than `DatasetErrors::SHOWN`, and every one must be printed.
    let rows: Vec<String> = (1..=60)
        .map(|i| {
            format!(r#"{{"conversation_id":"c{i}","turn":1,"role":"assistant","content":"x"}}"#)
        })
        .collect();
    std::fs::write(&file, rows.join("\n")).unwrap();
    for cmd in [
        DatasetCommand::Validate { file: file.clone() },
        DatasetCommand::Stats {
            against: None,
            html: None,
            file: file.clone(),
            json: false,
        },
    ] {
        let (code, out, err) = cli(cmd);
        assert_eq!((code, out.as_str()), (1, ""));
        let lines: Vec<&str> = err.lines().collect();
        assert_eq!(lines.len(), 61, "{err}");
        assert!(
            lines[59].starts_with(&format!(
                "{}:60: conversation \"c60\": field `role`: expected the first row to be \"user\"",
                file.display()
            )),
            "{}",
            lines[59]
        );
        assert_eq!(lines[60], "invalid: 60 errors");
    }
    // A missing file is a dataset error too (exit 1), not a crash.
    let (code, _, err) = cli(DatasetCommand::Validate {
        file: dir.join("nope.jsonl"),
    });
    assert_eq!(code, 1);
    assert!(err.contains("cannot read the file"), "{err}");
}

#[test]
fn cli_parses_with_clap() {
    use clap::Parser;
    #[derive(clap::Parser)]
    struct Top {
        #[command(subcommand)]
        cmd: DatasetCommand,
    }
    let t = Top::try_parse_from([
        "x",
        "synth",
        "--seed",
        "5",
        "--coding",
        "2",
        "--workflow",
        "3",
        "--scale",
        "0.5",
        "-o",
        "f.jsonl",
    ])
    .unwrap();
    assert_eq!(
        t.cmd,
        DatasetCommand::Synth {
            out: Some("f.jsonl".into()),
            seed: 5,
            coding: 2,
            workflow: 3,
            scale: 0.5,
            depth_scale: 1.0,
            coding_first: false
        }
    );
    let t = Top::try_parse_from(["x", "stats", "d.jsonl", "--json"]).unwrap();
    assert_eq!(
        t.cmd,
        DatasetCommand::Stats {
            against: None,
            html: None,
            file: "d.jsonl".into(),
            json: true
        }
    );
    let t = Top::try_parse_from(["x", "synth"]).unwrap();
    assert!(matches!(
        t.cmd,
        DatasetCommand::Synth {
            coding: 113,
            workflow: 500,
            seed: 1,
            out: None,
            ..
        }
    ));
}
