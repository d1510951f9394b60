//! The plan of a sweep: its points and the regions they fall in — given (`--concurrency`) or
//! proposed from C_min/C_max (`tokentap_mlperf::pareto::propose`).

use crate::error::SweepError;
use tokentap_mlperf::pareto::{self, RegionName, Regions};

/// The points and their regions.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// The regions, when C_min and C_max are known.
    pub regions: Option<Regions>,
    /// `given` or how C_min/C_max were inferred.
    pub regions_source: String,
    /// The points' concurrencies, ascending.
    pub concurrencies: Vec<u64>,
    /// What the plan itself lacks to make a valid curve (empty when valid).
    pub problems: Vec<String>,
}

impl Plan {
    /// The region of concurrency `c`, if any.
    pub fn region_of(&self, c: u64) -> Option<RegionName> {
        self.regions.as_ref().and_then(|r| r.region_of(c))
    }

    /// The plan for the terminal: regions, then the points by region.
    pub fn describe(&self) -> String {
        let mut s = String::new();
        match &self.regions {
            Some(r) => {
                s += &r.describe();
                if self.regions_source != "given" {
                    s += &format!("\n  ({})", self.regions_source);
                }
            }
            None => s += &format!("regions: unknown ({})", self.regions_source),
        }
        s += &format!("\nplan: {} points:", self.concurrencies.len());
        for c in &self.concurrencies {
            s += &format!(
                " {c}{}",
                self.region_of(*c)
                    .map_or(String::from("(outside)"), |r| format!("({r})"))
            );
        }
        if self.problems.is_empty() {
            s += "\n  a valid curve shape (7 to 32 points: one at 1–32, one in each of low, medium and high concurrency)";
        } else {
            for p in &self.problems {
                s += &format!("\n  not a valid curve: {p}");
            }
        }
        s
    }
}

/// The plan of a sweep: `--concurrency` as given (sorted, duplicates dropped), or proposed
/// from `--c-min`/`--c-max` (`--points`). The regions come from `--c-min`/`--c-max`; with a
/// list and without them, C_min is taken as the lowest point (when ≤ 32) and C_max as the
/// highest, and the plan says so.
pub fn plan(
    concurrency: &[usize],
    c_min: Option<u64>,
    c_max: Option<u64>,
    points: Option<usize>,
) -> Result<Plan, SweepError> {
    let cfg = |e: pareto::PlanError| SweepError::Config(e.to_string());
    let mut list: Vec<u64> = concurrency.iter().map(|&c| c as u64).collect();
    if list.contains(&0) {
        return Err(SweepError::Config(
            "--concurrency: every point needs at least 1".into(),
        ));
    }
    list.sort_unstable();
    list.dedup();
    if !list.is_empty() && points.is_some() {
        return Err(SweepError::Config(
            "--points proposes a plan from --c-min/--c-max; with --concurrency the points are given".into(),
        ));
    }
    let (regions, source) = match (c_min, c_max) {
        (Some(a), Some(b)) => (
            Some(pareto::regions(a, b).map_err(cfg)?),
            "given".to_string(),
        ),
        (Some(_), None) | (None, Some(_)) if list.is_empty() => {
            return Err(SweepError::Config(
                "a proposed plan needs both --c-min and --c-max".into(),
            ))
        }
        _ if list.is_empty() => {
            return Err(SweepError::Config(
                "no points: give --concurrency 1,4,16,64 or --c-min N --c-max M (a proposed plan)"
                    .into(),
            ))
        }
        _ => {
            let lo = c_min.unwrap_or(list[0]);
            let hi = c_max.unwrap_or(*list.last().unwrap_or(&1));
            match pareto::regions(lo, hi) {
                    Ok(r) => {
                        (
                            Some(r),
                            format!(
                        "C_min {lo} {} and C_max {hi} {}: give --c-min and --c-max to set them",
                        if c_min.is_some() { "given" } else { "= the lowest point" },
                        if c_max.is_some() { "given" } else { "= the highest point" }
                    ),
                        )
                    }
                    Err(e) => (
                    None,
                    format!("not from the points alone (taking C_min {lo}, C_max {hi}: {e}); give --c-min and --c-max"),
                ),
                }
        }
    };
    let concurrencies = if list.is_empty() {
        // Invariant: regions are known here (both bounds given).
        let r = regions
            .as_ref()
            .ok_or_else(|| SweepError::Internal("plan without regions".into()))?;
        pareto::propose(r, points.unwrap_or(pareto::MIN_POINTS)).map_err(cfg)?
    } else {
        list
    };
    let problems = match &regions {
        Some(r) => pareto::check_points(r, &concurrencies)
            .into_iter()
            .map(|(id, m)| format!("{id}: {m}"))
            .collect(),
        None => vec!["regions unknown".into()],
    };
    Ok(Plan {
        regions,
        regions_source: source,
        concurrencies,
        problems,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plans() {
        let p = plan(&[], Some(1), Some(256), None).unwrap();
        assert_eq!(p.concurrencies, [1, 4, 7, 17, 41, 102, 256]);
        assert!(p.problems.is_empty());
        assert_eq!(
            plan(&[], Some(1), Some(256), Some(10))
                .unwrap()
                .concurrencies
                .len(),
            10
        );
        let p = plan(&[16, 1, 4, 4], None, None, None).unwrap();
        assert_eq!(p.concurrencies, [1, 4, 16]);
        assert!(p.regions_source.contains("lowest point"));
        assert!(
            p.problems.iter().any(|m| m.contains("3 points")),
            "{:?}",
            p.problems
        );
        assert!(plan(&[], None, None, None).is_err());
        assert!(plan(&[], Some(1), None, None).is_err());
        assert!(plan(&[1, 2], None, None, Some(7)).is_err());
        assert!(plan(&[0, 2], None, None, None).is_err());
        // A list too narrow for regions still runs, regions unknown.
        let p = plan(&[1, 2], None, None, None).unwrap();
        assert!(p.regions.is_none());
        assert!(p.describe().contains("regions: unknown"));
    }
}
