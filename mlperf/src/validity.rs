//! Validity of an official measurement point (SPEC §10.4; the reference README for the agentic
//! benchmark, `examples/10_Agentic_Inference/README.md` at ea33275).
//!
//! Every rule is evaluated separately and reported with the value measured, so a user sees all
//! that stands between a run and a valid point, not the first thing. A rule is `pass`, `fail`
//! or `not_evaluated` (the run lacks what it needs: no `--tokenizer` for the OSL gate; the
//! SWE-bench accuracy, a separate phase with its own harness, is never evaluated here). A failed
//! turn does not invalidate a run: it scores 0 in the accuracy.
//!
//! Verdict: `invalid` when any rule fails; else `no_gates` without an official model preset;
//! else `incomplete` when a gate that decides validity was not evaluated (OSL); else `valid`
//! (SWE-bench accuracy is still listed as not evaluated: a point also needs it, from the
//! separate SWE-bench phase, as the mean of the four mandatory regions).

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

/// The official settings and gates of one model.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Official {
    pub model: &'static str,
    /// The exact sampling fields of every request, and nothing else.
    pub sampling: Value,
    pub turn_timeout_s: f64,
    /// Inline accuracy gate, a fraction.
    pub min_inline_accuracy: f64,
    /// Inclusive OSL per-turn mean range.
    pub osl_min: f64,
    pub osl_max: f64,
    /// SWE-bench gate (mean of one run in each of the four mandatory regions).
    pub min_swe_bench_accuracy: f64,
}

/// Kimi K3 (it replaced K2.6 in the reference).
pub fn kimi_k3() -> Official {
    Official {
        model: "Kimi K3",
        sampling: json!({"temperature": 1.0, "top_p": 1.0, "max_completion_tokens": 8192}),
        turn_timeout_s: 86_400.0,
        min_inline_accuracy: 0.5832,
        osl_min: 390.0,
        osl_max: 475.0,
        min_swe_bench_accuracy: 0.935,
    }
}

/// Qwen3.6-35B-A3B.
pub fn qwen36() -> Official {
    Official {
        model: "Qwen3.6-35B-A3B",
        sampling: json!({
            "temperature": 1.0, "max_completion_tokens": 8192, "top_p": 0.95, "top_k": 20,
            "repetition_penalty": 1.0, "presence_penalty": 1.5,
            "chat_template_kwargs": {"preserve_thinking": true}
        }),
        turn_timeout_s: 14_400.0,
        min_inline_accuracy: 0.5586,
        osl_min: 355.0,
        osl_max: 434.0,
        min_swe_bench_accuracy: 0.69,
    }
}

/// Minimum steady-state duration of a point (rules §5; the rules' example values): 600 s in
/// the ultra-low region, 1200 s elsewhere.
pub fn min_duration_s(ultra_low: bool) -> f64 {
    if ultra_low {
        600.0
    } else {
        1200.0
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Pass,
    Fail,
    NotEvaluated,
}

/// One rule's outcome.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Rule {
    /// Stable identifier: `salting`, `delays`, `trajectories`, `stop_issuing`, `sampling`,
    /// `request_body`, `streaming`, `inline_accuracy`, `osl`, `min_duration`, `swe_bench`.
    pub rule: String,
    pub status: Status,
    /// What was measured and what the rule requires.
    pub message: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Valid,
    Invalid,
    /// No rule failed, but a gate that decides validity was not evaluated.
    Incomplete,
    /// No official model preset: the gates are unknown; the rules that need none are listed.
    NoGates,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Valid => "valid",
            Verdict::Invalid => "invalid",
            Verdict::Incomplete => "incomplete",
            Verdict::NoGates => "no_gates",
        }
    }
}

/// What the rules look at.
#[derive(Debug, Clone, Default)]
pub struct Facts {
    pub salt: bool,
    pub delays: bool,
    pub delay_scale: f64,
    pub dataset_size: u64,
    /// Trajectories the run was to issue (all shards together).
    pub budget: u64,
    /// Trajectories started / finished by this run.
    pub trajectories_started: u64,
    pub trajectories_finished: u64,
    /// The run was sharded: the trajectory rule applies to the union (merge).
    pub shards: u64,
    pub stop_issuing_on_first_user_complete: bool,
    /// Issuing stopped early (`--max-duration`, Ctrl-C).
    pub stopped_early: Option<String>,
    /// The sampling fields every request carried (run level), as sent.
    pub sampling: Value,
    /// Per-row overrides found in the dataset's client rows, other than `model`.
    pub row_overrides: Vec<String>,
    /// Options that change the request bodies (`--include-usage`, `--clear-generated`).
    pub body_changes: Vec<String>,
    pub inline_accuracy: Option<f64>,
    /// OSL per-turn mean with the reference tokenizer over the performance window; `None`
    /// without a tokenizer.
    pub osl_mean: Option<f64>,
    /// Where the OSL came from when not from the tokenizer (for the message).
    pub osl_without_tokenizer: Option<String>,
    /// Tracked duration (the performance window), seconds.
    pub tracked_duration_s: Option<f64>,
    /// The point is in the ultra-low region (`None`: unknown, assumed not).
    pub ultra_low: Option<bool>,
    /// Multiplier on the minimum duration (tuning runs); anything but 1 is not official.
    pub min_duration_scale: f64,
}

/// The verdict and every rule.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Validity {
    pub verdict: Verdict,
    pub rules: Vec<Rule>,
}

impl Validity {
    /// The failed rules' messages.
    pub fn reasons(&self) -> Vec<String> {
        self.rules
            .iter()
            .filter(|r| r.status == Status::Fail)
            .map(|r| format!("{}: {}", r.rule, r.message))
            .collect()
    }

    pub fn rule(&self, id: &str) -> Option<&Rule> {
        self.rules.iter().find(|r| r.rule == id)
    }
}

fn rule(id: &str, ok: bool, message: String) -> Rule {
    Rule {
        rule: id.into(),
        status: if ok { Status::Pass } else { Status::Fail },
        message,
    }
}

fn not_evaluated(id: &str, message: String) -> Rule {
    Rule {
        rule: id.into(),
        status: Status::NotEvaluated,
        message,
    }
}

/// Evaluates every rule, one function a rule, in the order the verdict lists them.
pub fn evaluate(official: Option<&Official>, f: &Facts) -> Validity {
    let mut rules = vec![
        salting(f),
        delays(f),
        trajectories(f),
        stop_issuing(f),
        request_body(f),
    ];
    match official {
        Some(o) => rules.extend([sampling(o, f), inline_accuracy(o, f), osl(o, f)]),
        None => rules.push(not_evaluated(
            "sampling",
            format!(
                "no official model preset (--preset kimi|qwen); sent {}",
                f.sampling
            ),
        )),
    }
    rules.push(min_duration(f));
    rules.push(swe_bench(official));
    Validity {
        verdict: verdict(official, &rules),
        rules,
    }
}

/// Salting on (`--salt`).
fn salting(f: &Facts) -> Rule {
    rule(
        "salting",
        f.salt,
        if f.salt {
            "salting on".into()
        } else {
            "salting is off; official points salt (--salt)".into()
        },
    )
}

/// Every row's recorded delay, unscaled (`--delays`).
fn delays(f: &Facts) -> Rule {
    let delays_ok = f.delays && f.delay_scale == 1.0;
    rule(
        "delays",
        delays_ok,
        if !f.delays {
            "inter-turn delays are off; official points sleep every row's delay_seconds (--delays)"
                .into()
        } else if f.delay_scale != 1.0 {
            format!(
                "delays are scaled by {}; official points use them as recorded",
                f.delay_scale
            )
        } else {
            "inter-turn delays on, unscaled".into()
        },
    )
}

/// A whole number of passes over the dataset, every trajectory finished.
fn trajectories(f: &Facts) -> Rule {
    let multiple = f.dataset_size > 0 && f.budget > 0 && f.budget.is_multiple_of(f.dataset_size);
    let all_done =
        f.shards > 1 || (f.trajectories_finished == f.budget && f.stopped_early.is_none());
    rule(
        "trajectories",
        multiple && all_done,
        if !multiple {
            format!(
                "{} trajectories is not a positive multiple of the dataset's {} (official: {} × k)",
                f.budget, f.dataset_size, f.dataset_size
            )
        } else if !all_done {
            format!(
                "{} of {} trajectories finished{}",
                f.trajectories_finished,
                f.budget,
                f.stopped_early
                    .as_ref()
                    .map_or(String::new(), |s| format!(" (issuing stopped early: {s})"))
            )
        } else if f.shards > 1 {
            format!(
                "{} trajectories = {} × the dataset, over {} shards (checked on the merged run)",
                f.budget,
                f.budget / f.dataset_size.max(1),
                f.shards
            )
        } else {
            format!(
                "{} trajectories = {} × the dataset, all finished",
                f.budget,
                f.budget / f.dataset_size.max(1)
            )
        },
    )
}

/// No early stop of issuing (a tuning mode).
fn stop_issuing(f: &Facts) -> Rule {
    rule(
        "stop_issuing",
        !f.stop_issuing_on_first_user_complete,
        if f.stop_issuing_on_first_user_complete {
            "stop_issuing_on_first_user_complete is on: a tuning mode, not valid for submission"
                .into()
        } else {
            "every started trajectory ran to its end".into()
        },
    )
}

/// The reference client's request bodies, no row overriding a sampling field.
fn request_body(f: &Facts) -> Rule {
    rule(
        "request_body",
        f.body_changes.is_empty() && f.row_overrides.is_empty(),
        if !f.body_changes.is_empty() {
            format!(
                "request bodies differ from the reference client's ({})",
                f.body_changes.join(", ")
            )
        } else if !f.row_overrides.is_empty() {
            format!(
                "dataset rows override sampling fields ({})",
                f.row_overrides.join(", ")
            )
        } else {
            "request bodies are the reference client's, streamed with every chunk delivered".into()
        },
    )
}

/// The model's official sampling settings, exactly.
fn sampling(o: &Official, f: &Facts) -> Rule {
    let same = f.sampling == o.sampling;
    rule(
        "sampling",
        same,
        if same {
            format!("{} sampling settings, exactly", o.model)
        } else {
            format!(
                "sampling {} differs from {}'s official {}",
                f.sampling, o.model, o.sampling
            )
        },
    )
}

/// The inline accuracy gate.
fn inline_accuracy(o: &Official, f: &Facts) -> Rule {
    match f.inline_accuracy {
        Some(a) => rule(
            "inline_accuracy",
            a >= o.min_inline_accuracy,
            format!(
                "inline accuracy {:.2} % (gate ≥ {:.2} %)",
                a * 100.0,
                o.min_inline_accuracy * 100.0
            ),
        ),
        None => rule(
            "inline_accuracy",
            false,
            "no scorable turn was issued".into(),
        ),
    }
}

/// The mean output length gate, counted with the model's tokenizer.
fn osl(o: &Official, f: &Facts) -> Rule {
    match f.osl_mean {
        Some(m) => rule(
            "osl",
            m >= o.osl_min && m <= o.osl_max,
            format!(
                "mean OSL {m:.1} tokens per turn with the reference tokenizer (gate {}–{})",
                o.osl_min, o.osl_max
            ),
        ),
        None => not_evaluated(
            "osl",
            format!(
                "not evaluated: the gate counts tokens with the model's tokenizer (--tokenizer DIR){}",
                f.osl_without_tokenizer
                    .as_ref()
                    .map_or(String::new(), |s| format!("; {s}"))
            ),
        ),
    }
}

/// The steady state lasted the region's minimum (unscaled).
fn min_duration(f: &Facts) -> Rule {
    let ultra = f.ultra_low.unwrap_or(false);
    let need = min_duration_s(ultra) * f.min_duration_scale;
    let region = match f.ultra_low {
        Some(true) => "ultra-low region",
        Some(false) => "low/medium/high region",
        None => "region unknown, assumed above C_min (--c-min)",
    };
    match f.tracked_duration_s {
        Some(d) => rule(
            "min_duration",
            d >= need && f.min_duration_scale == 1.0,
            if f.min_duration_scale != 1.0 {
                // The same words at every point of a tuning sweep (the measured duration is in
                // the point's own numbers), so a curve's verdict names the rule once.
                format!(
                    "minimum duration scaled by {} for tuning: not official (scaled minimum {} s{})",
                    f.min_duration_scale,
                    if need.fract() == 0.0 {
                        format!("{need:.0}")
                    } else {
                        format!("{need:.1}")
                    },
                    if d >= need { ", reached" } else { ", NOT reached" }
                )
            } else {
                format!("steady state {d:.1} s (minimum {need:.0} s, {region})")
            },
        ),
        None => rule("min_duration", false, "no tracked turn completed".into()),
    }
}

/// The SWE-bench accuracy phase: never evaluated here.
fn swe_bench(official: Option<&Official>) -> Rule {
    not_evaluated(
        "swe_bench",
        official.map_or(
            "not evaluated: a separate accuracy phase with the SWE-bench harness".into(),
            |o| {
                format!(
                    "not evaluated: a separate phase with the SWE-bench harness (gate ≥ {:.1} %, mean over the four mandatory regions)",
                    o.min_swe_bench_accuracy * 100.0
                )
            },
        ),
    )
}

/// Invalid on any failed rule; without an official preset no gates; incomplete while a rule
/// (other than SWE-bench) is not evaluated; else valid.
fn verdict(official: Option<&Official>, rules: &[Rule]) -> Verdict {
    let any_fail = rules.iter().any(|r| r.status == Status::Fail);
    if any_fail {
        Verdict::Invalid
    } else if official.is_none() {
        Verdict::NoGates
    } else if rules
        .iter()
        .any(|r| r.status == Status::NotEvaluated && r.rule != "swe_bench")
    {
        Verdict::Incomplete
    } else {
        Verdict::Valid
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn official_facts() -> Facts {
        Facts {
            salt: true,
            delays: true,
            delay_scale: 1.0,
            dataset_size: 613,
            budget: 1226,
            trajectories_started: 1226,
            trajectories_finished: 1226,
            shards: 1,
            sampling: qwen36().sampling,
            inline_accuracy: Some(0.6),
            osl_mean: Some(400.0),
            tracked_duration_s: Some(1300.0),
            ultra_low: Some(false),
            min_duration_scale: 1.0,
            ..Facts::default()
        }
    }

    #[test]
    fn each_rule_passes_and_fails() {
        let q = qwen36();
        let v = evaluate(Some(&q), &official_facts());
        assert_eq!(v.verdict, Verdict::Valid, "{:?}", v.reasons());
        let fails = |f: &dyn Fn(&mut Facts), id: &str| {
            let mut facts = official_facts();
            f(&mut facts);
            let v = evaluate(Some(&q), &facts);
            assert_eq!(v.verdict, Verdict::Invalid, "{id}");
            assert_eq!(
                v.rule(id).unwrap().status,
                Status::Fail,
                "{id}: {:?}",
                v.rules
            );
            assert_eq!(v.reasons().len(), 1, "{id}: {:?}", v.reasons());
        };
        fails(&|f| f.salt = false, "salting");
        fails(&|f| f.delays = false, "delays");
        fails(&|f| f.delay_scale = 0.5, "delays");
        fails(&|f| f.budget = 1000, "trajectories");
        fails(&|f| f.trajectories_finished = 1200, "trajectories");
        fails(
            &|f| f.stop_issuing_on_first_user_complete = true,
            "stop_issuing",
        );
        fails(&|f| f.sampling = kimi_k3().sampling, "sampling");
        fails(
            &|f| f.body_changes = vec!["--include-usage".into()],
            "request_body",
        );
        fails(&|f| f.inline_accuracy = Some(0.5585), "inline_accuracy");
        fails(&|f| f.osl_mean = Some(435.0), "osl");
        fails(&|f| f.osl_mean = Some(354.9), "osl");
        fails(&|f| f.tracked_duration_s = Some(1199.0), "min_duration");
        let mut ultra = official_facts();
        ultra.ultra_low = Some(true);
        ultra.tracked_duration_s = Some(601.0);
        assert_eq!(evaluate(Some(&q), &ultra).verdict, Verdict::Valid);
    }

    #[test]
    fn osl_without_tokenizer_is_never_passed() {
        let mut f = official_facts();
        f.osl_mean = None;
        let v = evaluate(Some(&qwen36()), &f);
        assert_eq!(v.verdict, Verdict::Incomplete);
        assert_eq!(v.rule("osl").unwrap().status, Status::NotEvaluated);
        assert_eq!(v.rule("swe_bench").unwrap().status, Status::NotEvaluated);
        assert_eq!(evaluate(None, &official_facts()).verdict, Verdict::NoGates);
    }
}
