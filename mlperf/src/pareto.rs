//! The Pareto curve (docs/benchmark.md#pareto; MLPerf Endpoints rules §5): regions of interest, a
//! proposed plan of measurement points, and the curve's verdict.
//!
//! A submission is 7 to 32 measurement points, each a run at one target concurrency. The
//! regions follow from the submitter's C_min (≤ 32) and C_max: ultra-low 1…C_min; then with
//! I = log2(C_max − C_min) / 3, low C_min+1 … round(C_min + 2^I), medium … round(C_min + 2^2I),
//! high … C_max, with Python's `round` (half to even). A point in the 10 % margin above C_max
//! is measured but covers no region (the v1.0 checker's `margin`, docs/rules.md).
//!
//! Decisions where the rules as we have them are silent (they give the algorithm, not the code;
//! docs/benchmark.md#pareto):
//! - **Margin**: ceil(1.1 · C_max) computed exactly, (11 · C_max + 9) div 10, not in binary
//!   floating point (which makes 1.1 · 10 = 11.000000000000002 and would let 12 in).
//! - **Collisions**: when rounding makes a region end at or before the previous one (small
//!   C_max − C_min), that end is moved to the previous end + 1, so each region holds at least
//!   one concurrency; C_max must leave room for that (C_max ≥ C_min + 3), else an error.
//! - **C_max − C_min < 6**: the regions exist but no valid curve does (1 + 3 + 3 needs six
//!   distinct concurrencies above C_min, margin included); [`propose`] says so.
//! - **Mandatory points**: the rules ask for accuracy "at the four mandatory points", one per
//!   region; the SWE-bench accuracy is given per region (one run each), and its mean over the
//!   four decides (the reference README's mean-of-N rule). Inline accuracy and the OSL gate are
//!   per point, in each point's own validity.

use serde::{Deserialize, Serialize};

/// Largest C_min the rules allow.
pub const MAX_C_MIN: u64 = 32;
/// Fewest and most points of a curve.
pub const MIN_POINTS: usize = 7;
/// The most points of a curve.
pub const MAX_POINTS: usize = 32;

tokentap_core::vocabulary! {
    /// A region of the curve, named as the checker spells it in a submission's files
    /// (`point.yaml`'s region); serde also reads the names tokentap used before.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
    #[serde(rename_all = "snake_case")]
    pub enum RegionName {
        /// 1 … C_min (the rules' "ultra-low" region).
        #[serde(alias = "ultra_low")]
        LowLatency = "low_latency",
        /// C_min … the low region's end.
        #[serde(alias = "low")]
        LowConcurrency = "low_concurrency",
        /// The medium region.
        #[serde(alias = "medium")]
        MedConcurrency = "med_concurrency",
        /// The high region, up to C_max.
        #[serde(alias = "high")]
        HighConcurrency = "high_concurrency",
        /// C_max + 1 … ceil(1.1 · C_max): measured, but it covers no region.
        Margin = "margin",
    }
}

impl RegionName {
    /// The four mandatory regions, in order.
    pub const MANDATORY: [RegionName; 4] = [
        RegionName::LowLatency,
        RegionName::LowConcurrency,
        RegionName::MedConcurrency,
        RegionName::HighConcurrency,
    ];

    /// The checker's name, or the names tokentap used before (`ultra_low`, `low`, `medium`,
    /// `high`), with `-` or `_`.
    pub fn read(s: &str) -> Option<RegionName> {
        let s = s.replace('-', "_");
        let old = |r: RegionName| match r {
            RegionName::LowLatency => "ultra_low",
            RegionName::LowConcurrency => "low",
            RegionName::MedConcurrency => "medium",
            RegionName::HighConcurrency => "high",
            RegionName::Margin => "margin",
        };
        RegionName::ALL
            .into_iter()
            .find(|r| r.as_str() == s || old(*r) == s)
    }
}

impl std::fmt::Display for RegionName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One region: concurrencies `start..=end`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Region {
    /// Which region.
    pub name: RegionName,
    /// Its first concurrency.
    pub start: u64,
    /// Its last concurrency.
    pub end: u64,
}

/// The four regions of a curve.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Regions {
    /// C_min: the ultra-low region's end.
    pub c_min: u64,
    /// C_max: the high region's end.
    pub c_max: u64,
    /// ultra_low, low, medium, high.
    pub regions: Vec<Region>,
    /// Highest concurrency the high region accepts: ceil(1.1 · C_max).
    pub margin_end: u64,
}

/// Why no plan can be made of C_min, C_max and a number of points.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    /// C_min out of 1 … [`MAX_C_MIN`].
    #[error("--c-min {0}: C_min must be 1 to {MAX_C_MIN} (the ultra-low region is 1…C_min)")]
    CMin(u64),
    /// C_max too close to C_min.
    #[error("--c-max {c_max}: must be at least C_min + 3 = {} (low, medium and high need one concurrency each)", c_min + 3)]
    CMax {
        /// C_min.
        c_min: u64,
        /// C_max.
        c_max: u64,
    },
    /// A number of points out of [`MIN_POINTS`] … [`MAX_POINTS`].
    #[error("--points {0}: a curve has {MIN_POINTS} to {MAX_POINTS} points")]
    Points(usize),
    /// Too few concurrencies between C_min and C_max for a valid curve.
    #[error("C_min {c_min} / C_max {c_max}: only {room} concurrencies above C_min (margin included), a valid curve needs six (one point in each of low, medium, high and three more)")]
    NoRoom {
        /// C_min.
        c_min: u64,
        /// C_max.
        c_max: u64,
        /// Concurrencies above C_min, the margin included.
        room: u64,
    },
}

/// Python's `round` on a float (half to even).
fn py_round(x: f64) -> u64 {
    x.round_ties_even().max(0.0) as u64
}

/// The regions for `c_min`, `c_max` (docs/benchmark.md#pareto).
pub fn regions(c_min: u64, c_max: u64) -> Result<Regions, PlanError> {
    if !(1..=MAX_C_MIN).contains(&c_min) {
        return Err(PlanError::CMin(c_min));
    }
    if c_max < c_min + 3 {
        return Err(PlanError::CMax { c_min, c_max });
    }
    let i = ((c_max - c_min) as f64).log2() / 3.0;
    let low_end = py_round(c_min as f64 + i.exp2()).max(c_min + 1);
    let medium_end = py_round(c_min as f64 + (2.0 * i).exp2()).max(low_end + 1);
    // Invariant: c_max ≥ c_min + 3 and 2^(2I) ≤ C_max − C_min keep medium_end < c_max unless
    // a collision pushed it; clamp so high keeps at least C_max.
    let medium_end = medium_end.min(c_max - 1);
    let low_end = low_end.min(medium_end - 1);
    Ok(Regions {
        c_min,
        c_max,
        regions: vec![
            Region {
                name: RegionName::LowLatency,
                start: 1,
                end: c_min,
            },
            Region {
                name: RegionName::LowConcurrency,
                start: c_min + 1,
                end: low_end,
            },
            Region {
                name: RegionName::MedConcurrency,
                start: low_end + 1,
                end: medium_end,
            },
            Region {
                name: RegionName::HighConcurrency,
                start: medium_end + 1,
                end: c_max,
            },
        ],
        margin_end: (11 * c_max).div_ceil(10),
    })
}

impl Regions {
    /// The region called `name`.
    pub fn get(&self, name: RegionName) -> Region {
        self.regions[name as usize]
    }

    /// The region a concurrency belongs to (`margin` above C_max up to the margin's end);
    /// `None` above the margin or for 0.
    pub fn region_of(&self, c: u64) -> Option<RegionName> {
        if c == 0 || c > self.margin_end {
            return None;
        }
        self.regions
            .iter()
            .find(|r| c <= r.end)
            .map_or(Some(RegionName::Margin), |r| Some(r.name))
    }

    /// Whether a curve over these regions can be official: C_max must exceed 32 (the
    /// checker's `region-computation`); below that it is a tuning plan.
    pub fn official(&self) -> bool {
        self.c_max > MAX_C_MIN
    }

    /// One line per region, for the terminal.
    pub fn describe(&self) -> String {
        let mut s = format!("regions (C_min {}, C_max {}):", self.c_min, self.c_max);
        for r in &self.regions {
            s += &format!("  {} {}–{}", r.name, r.start, r.end);
        }
        s += &format!(" (+ margin to {})", self.margin_end);
        s
    }
}

/// A plan of `points` concurrencies (7 to 32): C_min in the ultra-low region, and the rest
/// spread evenly in log2(C − C_min) — the space the regions divide in thirds — so each of low,
/// medium and high gets an equal share (the remainder goes to high, then medium) and each
/// region's last point sits at its end (C_max is always measured). Valid by construction (checked by [`check_points`]).
pub fn propose(r: &Regions, points: usize) -> Result<Vec<u64>, PlanError> {
    if !(MIN_POINTS..=MAX_POINTS).contains(&points) {
        return Err(PlanError::Points(points));
    }
    let room = r.margin_end - r.c_min;
    if room < 6 {
        return Err(PlanError::NoRoom {
            c_min: r.c_min,
            c_max: r.c_max,
            room,
        });
    }
    let rest = points - 1;
    let mut share = [rest / 3; 3];
    for k in 0..rest % 3 {
        share[2 - k] += 1;
    }
    let span = ((r.c_max - r.c_min) as f64).log2();
    let mut plan = vec![r.c_min];
    for (k, name) in [
        RegionName::LowConcurrency,
        RegionName::MedConcurrency,
        RegionName::HighConcurrency,
    ]
    .into_iter()
    .enumerate()
    {
        let reg = r.get(name);
        // The high region may use the margin when it has fewer concurrencies than its share.
        let end =
            if name == RegionName::HighConcurrency && reg.end - reg.start + 1 < share[k] as u64 {
                r.margin_end
            } else {
                reg.end
            };
        let n = share[k];
        let mut chosen: Vec<u64> = Vec::with_capacity(n);
        for j in 1..=n {
            let u = (k as f64 + j as f64 / n as f64) / 3.0;
            let c = r.c_min + py_round((u * span).exp2());
            chosen.push(c.clamp(reg.start, end));
        }
        chosen.sort_unstable();
        chosen.dedup();
        // Small regions: fill with unused concurrencies from the top down.
        let mut c = end;
        while chosen.len() < n && c >= reg.start {
            if !chosen.contains(&c) {
                chosen.push(c);
            }
            c -= 1;
        }
        plan.extend(chosen);
    }
    plan.sort_unstable();
    plan.dedup();
    // A region narrower than its share leaves points over: put them where the plan is
    // sparsest (the widest ratio between neighbours), until none fits.
    while plan.len() < points {
        let gap = plan
            .windows(2)
            .filter(|w| w[1] - w[0] >= 2)
            .max_by(|a, b| (a[1] as f64 / a[0] as f64).total_cmp(&(b[1] as f64 / b[0] as f64)));
        let Some(w) = gap else { break };
        let mid = py_round((w[0] as f64 * w[1] as f64).sqrt()).clamp(w[0] + 1, w[1] - 1);
        let at = plan.partition_point(|&c| c < mid);
        plan.insert(at, mid);
    }
    Ok(plan)
}

/// What the curve needs of its points' concurrencies, as the official checker judges them:
/// each unmet rule as (checker rule id, message); empty when the set is a valid curve shape.
/// Used for a proposed plan and for the finished curve. The checker's own C_min is the lowest
/// point (at most 32), and its ultra-low coverage is 1–32 whatever C_min is; a point in the
/// 10 % margin covers no region.
pub fn check_points(r: &Regions, concurrencies: &[u64]) -> Vec<(&'static str, String)> {
    let mut out = Vec::new();
    if !r.official() {
        out.push((
            "region-computation",
            format!(
                "C_max {} must be greater than {MAX_C_MIN} for an official curve (a tuning plan)",
                r.c_max
            ),
        ));
    }
    let mut per = [0usize; 4];
    let mut outside = Vec::new();
    for &c in concurrencies {
        match r.region_of(c) {
            Some(RegionName::Margin) => {}
            Some(n) => per[n as usize] += 1,
            None => outside.push(c),
        }
    }
    if !outside.is_empty() {
        out.push((
            "concurrency-in-range",
            format!(
                "concurrency {} outside every region (1 … {} with the 10 % margin)",
                join(&outside),
                r.margin_end
            ),
        ));
    }
    if !concurrencies.iter().any(|&c| (1..=MAX_C_MIN).contains(&c)) {
        out.push((
            "ultra-low-concurrency-coverage",
            format!("no point at concurrency 1–{MAX_C_MIN} (mandatory)"),
        ));
    }
    for (name, id) in [
        (RegionName::LowConcurrency, "low-concurrency-coverage"),
        (RegionName::MedConcurrency, "med-concurrency-coverage"),
        (RegionName::HighConcurrency, "high-concurrency-coverage"),
    ] {
        if per[name as usize] == 0 {
            let reg = r.get(name);
            out.push((
                id,
                format!("no point in the {name} region ({}–{})", reg.start, reg.end),
            ));
        }
    }
    let total = concurrencies.len();
    if total > MAX_POINTS {
        out.push((
            "point-cap",
            format!("{total} points; a curve has at most {MAX_POINTS}"),
        ));
    } else if total < MIN_POINTS {
        out.push((
            "point-count",
            format!("{total} points; a curve has at least {MIN_POINTS}"),
        ));
    }
    out
}

fn join(v: &[u64]) -> String {
    v.iter().map(u64::to_string).collect::<Vec<_>>().join(", ")
}

/// What the curve's verdict looks at for one point.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PointFacts {
    /// The point's concurrency.
    pub concurrency: u64,
    /// Finished (not interrupted, not failed to run).
    pub finished: bool,
    /// The point's own verdict and failed rules (its `summary.json` validity).
    pub verdict: crate::validity::Verdict,
    /// Its failed rules.
    pub reasons: Vec<String>,
    /// Its inline accuracy.
    pub inline_accuracy: Option<f64>,
}

/// One rule of the curve.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CurveRule {
    /// The rule's id.
    pub rule: String,
    /// Its outcome.
    pub status: crate::validity::Status,
    /// What was found.
    pub message: String,
}

/// The curve's verdict and every rule.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CurveVerdict {
    /// `valid`, `invalid`, `incomplete` (no rule failed but one was not evaluated, or points
    /// are still to run) or `no_gates` (no official model preset).
    pub verdict: crate::validity::Verdict,
    /// Every rule of the curve.
    pub rules: Vec<CurveRule>,
}

impl CurveVerdict {
    /// The failed rules, `rule: message` each.
    pub fn reasons(&self) -> Vec<String> {
        self.rules
            .iter()
            .filter(|r| r.status == crate::validity::Status::Fail)
            .map(|r| format!("{}: {}", r.rule, r.message))
            .collect()
    }
}

/// The curve's verdict (docs/benchmark.md#pareto): its points' concurrencies against the regions,
/// every point's own validity, and the SWE-bench accuracy's mean over the four mandatory regions
/// (`swe_bench`: one value per region, from the separate SWE-bench phase). One function a rule.
pub fn verdict(
    regions: Option<&Regions>,
    official: Option<&crate::validity::Official>,
    points: &[PointFacts],
    swe_bench: &[(RegionName, f64)],
) -> CurveVerdict {
    use crate::validity::{Status, Verdict};
    let finished: Vec<&PointFacts> = points.iter().filter(|p| p.finished).collect();
    let unfinished: Vec<u64> = points
        .iter()
        .filter(|p| !p.finished)
        .map(|p| p.concurrency)
        .collect();
    let mut rules = shape_rules(regions, &finished);
    if !unfinished.is_empty() {
        rules.push(curve_rule(
            "finished",
            Status::NotEvaluated,
            format!("points not finished: concurrency {}", join(&unfinished)),
        ));
    }
    rules.extend(point_validity(&finished));
    rules.push(swe_bench_mean(official, swe_bench));
    let any = |s: Status| rules.iter().any(|r| r.status == s);
    let verdict = if any(Status::Fail) {
        Verdict::Invalid
    } else if official.is_none() {
        Verdict::NoGates
    } else if any(Status::NotEvaluated) {
        Verdict::Incomplete
    } else {
        Verdict::Valid
    };
    CurveVerdict { verdict, rules }
}

fn curve_rule(rule: &str, status: crate::validity::Status, message: String) -> CurveRule {
    CurveRule {
        rule: rule.into(),
        status,
        message,
    }
}

/// The shape rules of the finished points (the checker's ids, [`check_points`]), over the
/// regions the checker derives: C_min = the lowest point, at most 32, and the plan's C_max.
fn shape_rules(regions: Option<&Regions>, finished: &[&PointFacts]) -> Vec<CurveRule> {
    use crate::validity::Status;
    let cs: Vec<u64> = finished.iter().map(|p| p.concurrency).collect();
    let Some(planned) = regions else {
        return vec![curve_rule(
            "region-basis",
            Status::NotEvaluated,
            "regions unknown (give --c-min and --c-max)".into(),
        )];
    };
    let derived = cs
        .iter()
        .min()
        .and_then(|&lo| self::regions(lo.min(MAX_C_MIN), planned.c_max).ok());
    let r = derived.as_ref().unwrap_or(planned);
    let fails = check_points(r, &cs);
    if fails.is_empty() {
        return vec![curve_rule(
            "point-count",
            Status::Pass,
            format!("{} points cover every region", cs.len()),
        )];
    }
    fails
        .into_iter()
        .map(|(id, m)| curve_rule(id, Status::Fail, m))
        .collect()
}

/// `point_validity`: every finished point valid; each failed rule named once, with the points
/// it failed at. `None` without a finished point.
fn point_validity(finished: &[&PointFacts]) -> Option<CurveRule> {
    use crate::validity::{Status, Verdict};
    let mut bad: Vec<(String, Vec<u64>)> = Vec::new();
    let invalid = finished
        .iter()
        .filter(|p| p.verdict == Verdict::Invalid)
        .count();
    for p in finished.iter().filter(|p| p.verdict == Verdict::Invalid) {
        let reasons = if p.reasons.is_empty() {
            vec!["invalid".to_string()]
        } else {
            p.reasons.clone()
        };
        for r in reasons {
            match bad.iter_mut().find(|(m, _)| *m == r) {
                Some((_, cs)) => cs.push(p.concurrency),
                None => bad.push((r, vec![p.concurrency])),
            }
        }
    }
    let bad: Vec<String> = bad
        .into_iter()
        .map(|(m, cs)| {
            let at: Vec<String> = cs.iter().map(|c| format!("r{c}")).collect();
            format!("{}: {m}", at.join(", "))
        })
        .collect();
    let unknown = finished
        .iter()
        .filter(|p| matches!(p.verdict, Verdict::Incomplete | Verdict::NoGates))
        .count();
    if !bad.is_empty() {
        Some(curve_rule(
            "point_validity",
            Status::Fail,
            format!(
                "{invalid} of {} points invalid — {}",
                finished.len(),
                bad.join("; ")
            ),
        ))
    } else if unknown > 0 {
        Some(curve_rule(
            "point_validity",
            Status::NotEvaluated,
            format!(
                "{unknown} of {} points without a full verdict (gates not evaluated)",
                finished.len()
            ),
        ))
    } else if !finished.is_empty() {
        Some(curve_rule(
            "point_validity",
            Status::Pass,
            format!("all {} points valid", finished.len()),
        ))
    } else {
        None
    }
}

/// `swe_bench_mean`: the mean SWE-bench accuracy of the four mandatory regions against the
/// official gate (the latest value given per region).
fn swe_bench_mean(
    official: Option<&crate::validity::Official>,
    swe_bench: &[(RegionName, f64)],
) -> CurveRule {
    use crate::validity::Status;
    let Some(o) = official else {
        return curve_rule(
            crate::validity::ids::SWE_BENCH,
            Status::NotEvaluated,
            "no official model preset: no SWE-bench gate".into(),
        );
    };
    let mut per: Vec<(RegionName, f64)> = Vec::new();
    for name in RegionName::MANDATORY {
        if let Some((_, v)) = swe_bench.iter().rev().find(|(n, _)| *n == name) {
            per.push((name, *v));
        }
    }
    if per.len() < 4 {
        let missing: Vec<&str> = RegionName::MANDATORY
            .iter()
            .filter(|n| !per.iter().any(|(m, _)| m == *n))
            .map(|n| n.as_str())
            .collect();
        return curve_rule(
            crate::validity::ids::SWE_BENCH,
            Status::NotEvaluated,
            format!(
                "SWE-bench accuracy missing for {} (--swe-bench-accuracy REGION=FRACTION, one run per mandatory region; gate ≥ {:.1} %)",
                missing.join(", "),
                o.min_swe_bench_accuracy * 100.0
            ),
        );
    }
    let mean = per.iter().map(|(_, v)| v).sum::<f64>() / 4.0;
    curve_rule(
        crate::validity::ids::SWE_BENCH,
        if mean >= o.min_swe_bench_accuracy {
            Status::Pass
        } else {
            Status::Fail
        },
        format!(
            "mean of the four mandatory regions {:.2} % (gate ≥ {:.1} %)",
            mean * 100.0,
            o.min_swe_bench_accuracy * 100.0
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::validity::{Status, Verdict};

    /// The regions and the verdicts are written by serde under their one name, and read back
    /// (the regions also under the names tokentap used before).
    #[test]
    fn serde_names_are_the_vocabularys() {
        for r in RegionName::ALL {
            assert_eq!(serde_json::to_value(r).unwrap(), r.as_str());
            assert_eq!(
                serde_json::from_value::<RegionName>(r.as_str().into()).unwrap(),
                r
            );
            assert_eq!(RegionName::read(r.as_str()), Some(r));
        }
        assert_eq!(RegionName::read("ultra-low"), Some(RegionName::LowLatency));
        for v in Verdict::ALL {
            assert_eq!(serde_json::to_value(v).unwrap(), v.as_str());
            assert_eq!(
                serde_json::from_value::<Verdict>(v.as_str().into()).unwrap(),
                v
            );
        }
    }

    fn ends(r: &Regions) -> Vec<(u64, u64)> {
        r.regions.iter().map(|x| (x.start, x.end)).collect()
    }

    #[test]
    fn worked_examples() {
        // The examples of docs/benchmark.md#pareto, from the algorithm.
        let r = regions(1, 256).unwrap();
        assert_eq!(ends(&r), [(1, 1), (2, 7), (8, 41), (42, 256)]);
        assert_eq!(r.margin_end, 282);
        let r = regions(32, 8192).unwrap();
        assert_eq!(ends(&r), [(1, 32), (33, 52), (53, 437), (438, 8192)]);
        assert_eq!(r.margin_end, 9012);
        // The rules print 116 for the medium end; their algorithm (Python's round of
        // 16 + 100.53) gives 117, and the algorithm is what we follow.
        let r = regions(16, 1024).unwrap();
        assert_eq!(ends(&r), [(1, 16), (17, 26), (27, 117), (118, 1024)]);
    }

    #[test]
    fn rounding_is_half_to_even() {
        // C_max − C_min = 64: 2^I = 4 and 2^2I = 16 exactly — no rounding; then a value
        // landing on .5: Python's round(2.5) = 2, round(3.5) = 4.
        assert_eq!(
            ends(&regions(1, 65).unwrap())[1..],
            [(2, 5), (6, 17), (18, 65)]
        );
        assert_eq!(py_round(2.5), 2);
        assert_eq!(py_round(3.5), 4);
        assert_eq!(py_round(116.53), 117);
    }

    #[test]
    fn margin_is_exact() {
        assert_eq!(regions(1, 10).unwrap().margin_end, 11);
        assert_eq!(regions(1, 11).unwrap().margin_end, 13);
        let r = regions(1, 10).unwrap();
        assert_eq!(r.region_of(11), Some(RegionName::Margin));
        assert_eq!(r.region_of(12), None);
        assert_eq!(r.region_of(0), None);
        assert_eq!(r.region_of(1), Some(RegionName::LowLatency));
    }

    #[test]
    fn collisions_and_small_ranges() {
        // C_max − C_min = 3: 2^I ≈ 1.44, 2^2I ≈ 2.08 → both round to C_min + 1 and + 2 …
        let r = regions(32, 35).unwrap();
        assert_eq!(ends(&r)[1..], [(33, 33), (34, 34), (35, 35)]);
        // … and the collision case: C_max − C_min = 4 rounds low to C_min + 2 = medium's.
        let r = regions(32, 36).unwrap();
        for w in r.regions.windows(2) {
            assert_eq!(w[1].start, w[0].end + 1, "{r:?}");
            assert!(w[1].end >= w[1].start, "{r:?}");
        }
        // C_max ≤ C_min + 2 (e.g. C_min 32, C_max ≤ 34): no three regions.
        assert!(matches!(regions(32, 34), Err(PlanError::CMax { .. })));
        assert!(matches!(regions(32, 33), Err(PlanError::CMax { .. })));
        assert!(matches!(regions(0, 100), Err(PlanError::CMin(0))));
        assert!(matches!(regions(33, 100), Err(PlanError::CMin(33))));
        // Regions exist but a curve does not fit: 32…36 has 5 above C_min (margin 40 → 8).
        let r = regions(1, 4).unwrap();
        assert!(matches!(propose(&r, 7), Err(PlanError::NoRoom { .. })));
    }

    #[test]
    fn every_region_partition_is_contiguous() {
        for c_min in 1..=32 {
            for c_max in (c_min + 3)..(c_min + 300) {
                let r = regions(c_min, c_max).unwrap();
                assert_eq!(r.regions[0].start, 1);
                for w in r.regions.windows(2) {
                    assert_eq!(w[1].start, w[0].end + 1, "{c_min}/{c_max}: {r:?}");
                }
                for x in &r.regions {
                    assert!(x.end >= x.start, "{c_min}/{c_max}: {r:?}");
                }
                assert_eq!(r.regions[3].end, c_max);
            }
        }
    }

    #[test]
    fn proposals_are_valid_by_construction() {
        for (c_min, c_max) in [
            (1, 256),
            (32, 8192),
            (16, 1024),
            (1, 10),
            (4, 64),
            (2, 9),
            (32, 40),
        ] {
            let r = regions(c_min, c_max).unwrap();
            for k in MIN_POINTS..=MAX_POINTS {
                let Ok(p) = propose(&r, k) else {
                    // Only ranges too small for k distinct points may fall short.
                    panic!("{c_min}/{c_max} k={k}");
                };
                // A C_max of 32 or less is a tuning plan: valid in shape, never official.
                let problems: Vec<_> = check_points(&r, &p)
                    .into_iter()
                    .filter(|(id, _)| r.official() || *id != "region-computation")
                    .collect();
                assert!(
                    problems.is_empty(),
                    "{c_min}/{c_max} k={k}: {p:?} {problems:?}"
                );
                assert_eq!(r.official(), c_max > 32);
                assert!(p.len() <= k);
                if r.margin_end - c_min >= k as u64 * 3 {
                    assert_eq!(p.len(), k, "{c_min}/{c_max}: {p:?}");
                }
                assert!(p.windows(2).all(|w| w[0] < w[1]));
            }
        }
        assert_eq!(
            propose(&regions(1, 256).unwrap(), 7).unwrap(),
            [1, 4, 7, 17, 41, 102, 256]
        );
        assert!(matches!(
            propose(&regions(1, 256).unwrap(), 33),
            Err(PlanError::Points(33))
        ));
        assert!(matches!(
            propose(&regions(1, 256).unwrap(), 6),
            Err(PlanError::Points(6))
        ));
    }

    fn point(c: u64, verdict: Verdict) -> PointFacts {
        PointFacts {
            concurrency: c,
            finished: true,
            verdict,
            reasons: if verdict == Verdict::Invalid {
                vec![
                    "min_duration: steady state 10.0 s (minimum 1200 s, low/medium/high region)"
                        .into(),
                ]
            } else {
                vec![]
            },
            inline_accuracy: Some(0.6),
        }
    }

    fn curve(cs: &[u64]) -> Vec<PointFacts> {
        cs.iter().map(|&c| point(c, Verdict::Valid)).collect()
    }

    const ALL4: [(RegionName, f64); 4] = [
        (RegionName::LowLatency, 0.95),
        (RegionName::LowConcurrency, 0.94),
        (RegionName::MedConcurrency, 0.94),
        (RegionName::HighConcurrency, 0.93),
    ];

    #[test]
    fn curve_verdicts() {
        let r = regions(1, 256).unwrap();
        let k3 = crate::validity::kimi_k3();
        let good = curve(&[1, 4, 7, 17, 41, 102, 256]);
        let v = verdict(Some(&r), Some(&k3), &good, &ALL4);
        assert_eq!(v.verdict, Verdict::Valid, "{v:?}");

        // A missing region.
        let v = verdict(
            Some(&r),
            Some(&k3),
            &curve(&[1, 3, 5, 7, 14, 30, 41]),
            &ALL4,
        );
        assert_eq!(v.verdict, Verdict::Invalid);
        assert!(
            v.reasons().iter().any(|m| m
                .starts_with("high-concurrency-coverage: no point in the high_concurrency region")),
            "{v:?}"
        );
        // The checker's C_min is the lowest point: a curve from 3 up is a curve with C_min 3.
        let v = verdict(
            Some(&r),
            Some(&k3),
            &curve(&[3, 7, 14, 41, 95, 256, 200]),
            &ALL4,
        );
        assert_eq!(v.verdict, Verdict::Valid, "{v:?}");
        // No point at 1–32: the ultra-low coverage fails whatever C_min was planned.
        let r1024 = regions(32, 1024).unwrap();
        let v = verdict(
            Some(&r1024),
            Some(&k3),
            &curve(&[40, 60, 100, 200, 400, 800, 1024]),
            &ALL4,
        );
        assert!(
            v.reasons()
                .iter()
                .any(|m| m.starts_with("ultra-low-concurrency-coverage") && m.contains("mandatory")),
            "{v:?}"
        );

        // Too many points.
        let many: Vec<u64> = (1..=33).map(|i| i * 7).chain([1]).collect();
        let v = verdict(Some(&r), Some(&k3), &curve(&many), &ALL4);
        assert!(
            v.reasons().iter().any(|m| m.contains("at most 32")),
            "{v:?}"
        );

        // A point below its minimum duration.
        let mut short = good.clone();
        short[3] = point(14, Verdict::Invalid);
        let v = verdict(Some(&r), Some(&k3), &short, &ALL4);
        assert_eq!(v.verdict, Verdict::Invalid);
        assert!(
            v.reasons()
                .iter()
                .any(|m| m.starts_with("point_validity") && m.contains("r14: min_duration")),
            "{v:?}"
        );

        // The SWE-bench mean below the gate (each region ≥ 90 %, the mean 92.75 % < 93.5 %).
        let low = [
            (RegionName::LowLatency, 0.95),
            (RegionName::LowConcurrency, 0.93),
            (RegionName::MedConcurrency, 0.92),
            (RegionName::HighConcurrency, 0.91),
        ];
        let v = verdict(Some(&r), Some(&k3), &good, &low);
        assert_eq!(v.verdict, Verdict::Invalid);
        assert!(
            v.reasons()
                .iter()
                .any(|m| m.contains(crate::validity::ids::SWE_BENCH) && m.contains("92.75")),
            "{v:?}"
        );
        // Missing values: not evaluated, the curve incomplete.
        let v = verdict(Some(&r), Some(&k3), &good, &ALL4[..3]);
        assert_eq!(v.verdict, Verdict::Incomplete);
        let rule = v
            .rules
            .iter()
            .find(|r| r.rule == crate::validity::ids::SWE_BENCH)
            .unwrap();
        assert_eq!(rule.status, Status::NotEvaluated);
        assert!(rule.message.contains("high"));

        // No preset: no gates; unfinished points are named.
        let mut open = good.clone();
        open[6].finished = false;
        let v = verdict(Some(&r), None, &open, &[]);
        assert_eq!(
            v.verdict,
            Verdict::Invalid,
            "the finished six miss the high region"
        );
        assert!(v
            .rules
            .iter()
            .any(|r| r.rule == "finished" && r.message.contains("256")));
        let v = verdict(Some(&r), None, &good, &[]);
        assert_eq!(v.verdict, Verdict::NoGates);
    }
}
