//! Validity of an official measurement point (docs/benchmark.md#validity; the reference README for
//! the agentic benchmark, `examples/10_Agentic_Inference/README.md` at ea33275).
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
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Official {
    /// The model's name.
    pub model: std::borrow::Cow<'static, str>,
    /// The exact sampling fields of every request, and nothing else; `None` where the reference
    /// has published none for the model (the gates still apply; the sampling rule is then not
    /// evaluated).
    pub sampling: Option<Value>,
    /// The reference's turn timeout, where it publishes one.
    pub turn_timeout_s: Option<f64>,
    /// Inline accuracy gate, a fraction.
    pub min_inline_accuracy: f64,
    /// Inclusive range of the full-run OSL per-turn mean: its low end.
    pub osl_min: f64,
    /// Its high end.
    pub osl_max: f64,
    /// SWE-bench gate (mean of one run in each of the four mandatory regions).
    pub min_swe_bench_accuracy: f64,
}

/// Kimi K3 (it replaced K2.6 in the reference). Gates as the v1.0 checker has them.
pub fn kimi_k3() -> Official {
    Official {
        model: std::borrow::Cow::Borrowed("Kimi K3"),
        sampling: Some(json!({"temperature": 1.0, "top_p": 1.0, "max_completion_tokens": 8192})),
        turn_timeout_s: Some(86_400.0),
        min_inline_accuracy: 0.5832,
        osl_min: 425.0,
        osl_max: 520.0,
        min_swe_bench_accuracy: 0.935,
    }
}

/// Qwen3.6-35B-A3B. Gates as the v1.0 checker has them.
pub fn qwen36() -> Official {
    Official {
        model: std::borrow::Cow::Borrowed("Qwen3.6-35B-A3B"),
        sampling: Some(json!({
            "temperature": 1.0, "max_completion_tokens": 8192, "top_p": 0.95, "top_k": 20,
            "repetition_penalty": 1.0, "presence_penalty": 1.5,
            "chat_template_kwargs": {"preserve_thinking": true}
        })),
        turn_timeout_s: Some(14_400.0),
        min_inline_accuracy: 0.5586,
        osl_min: 344.0,
        osl_max: 422.0,
        min_swe_bench_accuracy: 0.69,
    }
}

/// DeepSeek-V4.1-Flash (it replaced DeepSeek-V4-Pro in the reference). Gates as the v1.0
/// checker has them.
// 52.36 % is the published gate, not an approximation of π/6.
#[allow(clippy::approx_constant)]
pub fn deepseek_v41_flash() -> Official {
    Official {
        model: std::borrow::Cow::Borrowed("DeepSeek-V4.1-Flash"),
        // The reference's published agentic example still names DeepSeek-V4-Pro with its
        // thresholds "TBD"; the v1.0 checker gates DeepSeek-V4.1-Flash but no sampling
        // settings or turn timeout of it are public: the preset sets the gates only.
        sampling: None,
        turn_timeout_s: None,
        min_inline_accuracy: 0.5236,
        osl_min: 793.0,
        osl_max: 970.0,
        min_swe_bench_accuracy: 0.964,
    }
}

/// The three agentic models, for lookups by name.
pub fn officials() -> [Official; 3] {
    [kimi_k3(), qwen36(), deepseek_v41_flash()]
}

/// The largest concurrency of the ultra-low band that the minimum durations are keyed to
/// (1–32, whatever the curve's C_min).
pub const ULTRA_LOW_CONCURRENCY_MAX: u64 = 32;

/// Minimum steady-state duration of an agentic point (rules §6.2, as the v1.0 checker keys
/// it): 600 s at concurrency 1–32, 2,400 s above — by the point's concurrency, not by the
/// curve's computed ultra-low band.
pub fn min_duration_s(concurrency: u64) -> f64 {
    if concurrency <= ULTRA_LOW_CONCURRENCY_MAX {
        600.0
    } else {
        2400.0
    }
}

tokentap_core::vocabulary! {
    /// A rule's outcome.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
    #[serde(rename_all = "snake_case")]
    pub enum Status {
        /// The rule holds.
        Pass = "pass",
        /// The rule fails: the point is invalid.
        Fail = "fail",
        /// Reported as the official checker reports it, as a warning: it does not make the
        /// point invalid (a point shorter than the minimum duration).
        Warn = "warn",
        /// A fact the rule needs is missing (the OSL gate without a tokenizer).
        NotEvaluated = "not_evaluated",
    }
}

impl Status {}

/// Rule ids of the official submission checker (`endpoints-submission-cli`) for the rules it
/// and tokentap both evaluate; the other rules of a point come from the reference README
/// (salting, delays, trajectories, `stop_issuing`, sampling, request bodies), which the
/// checker cannot see in a submission's files, and keep tokentap's names.
pub mod ids {
    /// `--salt`.
    pub const SALTING: &str = "salting";
    /// `--delays`.
    pub const DELAYS: &str = "delays";
    /// A multiple of the dataset's trajectories.
    pub const TRAJECTORIES: &str = "trajectories";
    /// `--stop-issuing-on-first-user-complete` off.
    pub const STOP_ISSUING: &str = "stop_issuing";
    /// The official sampling settings.
    pub const SAMPLING: &str = "sampling";
    /// Request bodies as the reference sends them.
    pub const REQUEST_BODY: &str = "request_body";
    /// The inline accuracy gate.
    pub const INLINE_ACCURACY: &str = "agentic-accuracy-inline";
    /// The OSL range gate.
    pub const OSL_RANGE: &str = "agentic-osl-range";
    /// The point's minimum duration.
    pub const POINT_DURATION: &str = "point-duration";
    /// The SWE-bench gate.
    pub const SWE_BENCH: &str = "agentic-accuracy-swebench";
}

/// One rule's outcome.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Rule {
    /// Stable identifier, the official checker's where it has the rule ([`ids`]).
    pub rule: String,
    /// Its outcome.
    pub status: Status,
    /// What was measured and what the rule requires.
    pub message: String,
}

tokentap_core::vocabulary! {
    /// A run's verdict under the rules.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
    #[serde(rename_all = "snake_case")]
    pub enum Verdict {
        /// Every rule and gate passed.
        Valid = "valid",
        /// A rule or gate failed.
        Invalid = "invalid",
        /// No rule failed, but a gate that decides validity was not evaluated.
        Incomplete = "incomplete",
        /// No official model preset: the gates are unknown; the rules that need none are listed.
        NoGates = "no_gates",
    }
}

/// What the rules look at.
#[derive(Debug, Clone, Default)]
pub struct Facts {
    /// `--salt` was on.
    pub salt: bool,
    /// `--delays` was on.
    pub delays: bool,
    /// `--delay-scale`.
    pub delay_scale: f64,
    /// Trajectories in the dataset.
    pub dataset_size: u64,
    /// Trajectories the run was to issue (all shards together).
    pub budget: u64,
    /// Trajectories started by this run.
    pub trajectories_started: u64,
    /// Trajectories finished by this run.
    pub trajectories_finished: u64,
    /// The run was sharded: the trajectory rule applies to the union (merge).
    pub shards: u64,
    /// `--stop-issuing-on-first-user-complete`.
    pub stop_issuing_on_first_user_complete: bool,
    /// Issuing stopped early (`--max-duration`, Ctrl-C).
    pub stopped_early: Option<String>,
    /// The sampling fields every request carried (run level), as sent.
    pub sampling: Value,
    /// Per-row overrides found in the dataset's client rows, other than `model`.
    pub row_overrides: Vec<String>,
    /// Options that change the request bodies (`--include-usage`, `--clear-generated`).
    pub body_changes: Vec<String>,
    /// The inline accuracy.
    pub inline_accuracy: Option<f64>,
    /// OSL per-turn mean with the reference tokenizer over every completed turn of the run
    /// (`output_sequence_lengths_full_run`, the field the gate reads); `None` without a
    /// tokenizer.
    pub osl_mean_full_run: Option<f64>,
    /// Where the OSL came from when not from the tokenizer (for the message).
    pub osl_without_tokenizer: Option<String>,
    /// The point's duration that the minimum applies to, seconds: the steady-state window's
    /// when one was detected, else the tracked duration (the performance window).
    pub duration_s: Option<f64>,
    /// Which duration `duration_s` is, for the message (`steady-state`, `tracked`).
    pub duration_basis: &'static str,
    /// The point's concurrency (all shards together): the minimum duration is keyed to it.
    pub concurrency: u64,
    /// Multiplier on the minimum duration (tuning runs); anything but 1 is not official.
    pub min_duration_scale: f64,
}

/// The verdict and every rule.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Validity {
    /// The verdict.
    pub verdict: Verdict,
    /// Every rule.
    pub rules: Vec<Rule>,
}

impl Validity {
    /// The failed rules' messages.
    pub fn reasons(&self) -> Vec<String> {
        self.with(Status::Fail)
    }

    /// The rules' messages that the checker gives as warnings.
    pub fn warnings(&self) -> Vec<String> {
        self.with(Status::Warn)
    }

    fn with(&self, status: Status) -> Vec<String> {
        self.rules
            .iter()
            .filter(|r| r.status == status)
            .map(|r| format!("{}: {}", r.rule, r.message))
            .collect()
    }

    /// The rule `id`'s outcome, if evaluated.
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
            ids::SAMPLING,
            format!(
                "no official model preset (--preset kimi|qwen|deepseek); sent {}",
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
        ids::SALTING,
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
        ids::DELAYS,
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
        ids::TRAJECTORIES,
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
        ids::STOP_ISSUING,
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
        ids::REQUEST_BODY,
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

/// The model's official sampling settings, exactly; not evaluated where none are published.
fn sampling(o: &Official, f: &Facts) -> Rule {
    let Some(want) = &o.sampling else {
        return not_evaluated(
            ids::SAMPLING,
            format!(
                "not evaluated: {} has no published sampling settings (sent {})",
                o.model, f.sampling
            ),
        );
    };
    let same = &f.sampling == want;
    rule(
        ids::SAMPLING,
        same,
        if same {
            format!("{} sampling settings, exactly", o.model)
        } else {
            format!(
                "sampling {} differs from {}'s official {}",
                f.sampling, o.model, want
            )
        },
    )
}

/// The inline accuracy gate (every point).
fn inline_accuracy(o: &Official, f: &Facts) -> Rule {
    match f.inline_accuracy {
        Some(a) => rule(
            ids::INLINE_ACCURACY,
            a >= o.min_inline_accuracy,
            format!(
                "inline accuracy {:.2} % (gate ≥ {:.2} %)",
                a * 100.0,
                o.min_inline_accuracy * 100.0
            ),
        ),
        None => rule(
            ids::INLINE_ACCURACY,
            false,
            "no scorable turn was issued".into(),
        ),
    }
}

/// The OSL gate: the per-turn mean over every completed turn of the run (not the window),
/// counted with the model's tokenizer.
fn osl(o: &Official, f: &Facts) -> Rule {
    match f.osl_mean_full_run {
        Some(m) => rule(
            ids::OSL_RANGE,
            m >= o.osl_min && m <= o.osl_max,
            format!(
                "full-run OSL per-turn mean {m:.1} tokens with the reference tokenizer (gate {}–{})",
                o.osl_min, o.osl_max
            ),
        ),
        None => not_evaluated(
            ids::OSL_RANGE,
            format!(
                "not evaluated: the gate counts tokens with the model's tokenizer (--tokenizer DIR){}",
                f.osl_without_tokenizer
                    .as_ref()
                    .map_or(String::new(), |s| format!("; {s}"))
            ),
        ),
    }
}

/// The minimum duration of the point's concurrency (unscaled). Short is a warning, as the
/// official checker reports it; a scaled minimum is a tuning run, never official.
fn min_duration(f: &Facts) -> Rule {
    let need = min_duration_s(f.concurrency) * f.min_duration_scale;
    let warn = |message| Rule {
        rule: ids::POINT_DURATION.into(),
        status: Status::Warn,
        message,
    };
    let Some(d) = f.duration_s else {
        return rule(
            ids::POINT_DURATION,
            false,
            "no tracked turn completed".into(),
        );
    };
    if f.min_duration_scale != 1.0 {
        // The same words at every point of a tuning sweep (the measured duration is in the
        // point's own numbers), so a curve's verdict names the rule once.
        return warn(format!(
            "minimum duration scaled by {} for tuning: not official (scaled minimum {} s{})",
            f.min_duration_scale,
            if need.fract() == 0.0 {
                format!("{need:.0}")
            } else {
                format!("{need:.1}")
            },
            if d >= need {
                ", reached"
            } else {
                ", NOT reached"
            }
        ));
    }
    let message = format!(
        "{} duration {d:.1} s (minimum {need:.0} s at concurrency {}{})",
        f.duration_basis,
        f.concurrency,
        if f.concurrency <= ULTRA_LOW_CONCURRENCY_MAX {
            " ≤ 32"
        } else {
            " > 32"
        }
    );
    if d >= need {
        rule(ids::POINT_DURATION, true, message)
    } else {
        warn(message)
    }
}

/// The SWE-bench accuracy phase: judged on the curve (the mean of the four mandatory
/// regions), never at one point.
fn swe_bench(official: Option<&Official>) -> Rule {
    not_evaluated(
        ids::SWE_BENCH,
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

/// Invalid on any failed rule; without an official preset no gates; incomplete while a gate
/// (other than SWE-bench, and the sampling of a model without published settings) is not
/// evaluated; else valid. Warnings never change the verdict.
fn verdict(official: Option<&Official>, rules: &[Rule]) -> Verdict {
    let any_fail = rules.iter().any(|r| r.status == Status::Fail);
    if any_fail {
        Verdict::Invalid
    } else if official.is_none() {
        Verdict::NoGates
    } else if rules.iter().any(|r| {
        r.status == Status::NotEvaluated && r.rule != ids::SWE_BENCH && r.rule != ids::SAMPLING
    }) {
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
            sampling: qwen36().sampling.unwrap(),
            inline_accuracy: Some(0.6),
            osl_mean_full_run: Some(400.0),
            duration_s: Some(2500.0),
            duration_basis: "tracked",
            concurrency: 64,
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
        fails(&|f| f.sampling = kimi_k3().sampling.unwrap(), "sampling");
        fails(
            &|f| f.body_changes = vec!["--include-usage".into()],
            "request_body",
        );
        fails(&|f| f.inline_accuracy = Some(0.5585), ids::INLINE_ACCURACY);
        fails(&|f| f.osl_mean_full_run = Some(422.1), ids::OSL_RANGE);
        fails(&|f| f.osl_mean_full_run = Some(343.9), ids::OSL_RANGE);
        // Short is a warning, as the checker has it: the verdict stays valid.
        let mut short = official_facts();
        short.duration_s = Some(2399.0);
        let v = evaluate(Some(&q), &short);
        assert_eq!(v.verdict, Verdict::Valid);
        assert_eq!(v.rule(ids::POINT_DURATION).unwrap().status, Status::Warn);
        assert_eq!(v.warnings().len(), 1, "{:?}", v.warnings());
        // Keyed to the concurrency: 600 s up to 32, 2,400 s above.
        assert_eq!(min_duration_s(32), 600.0);
        assert_eq!(min_duration_s(33), 2400.0);
        let mut c32 = official_facts();
        c32.concurrency = 32;
        c32.duration_s = Some(601.0);
        let v = evaluate(Some(&q), &c32);
        assert_eq!(v.rule(ids::POINT_DURATION).unwrap().status, Status::Pass);
    }

    #[test]
    fn osl_without_tokenizer_is_never_passed() {
        let mut f = official_facts();
        f.osl_mean_full_run = None;
        let v = evaluate(Some(&qwen36()), &f);
        assert_eq!(v.verdict, Verdict::Incomplete);
        assert_eq!(v.rule(ids::OSL_RANGE).unwrap().status, Status::NotEvaluated);
        assert_eq!(v.rule(ids::SWE_BENCH).unwrap().status, Status::NotEvaluated);
        assert_eq!(evaluate(None, &official_facts()).verdict, Verdict::NoGates);
    }

    #[test]
    fn a_model_without_published_sampling_is_gated_but_its_sampling_not_evaluated() {
        let d = deepseek_v41_flash();
        let mut f = official_facts();
        f.osl_mean_full_run = Some(800.0);
        f.inline_accuracy = Some(0.53);
        let v = evaluate(Some(&d), &f);
        assert_eq!(v.rule(ids::SAMPLING).unwrap().status, Status::NotEvaluated);
        assert_eq!(v.verdict, Verdict::Valid, "{:?}", v.rules);
        f.osl_mean_full_run = Some(400.0);
        assert_eq!(evaluate(Some(&d), &f).verdict, Verdict::Invalid);
    }
}
