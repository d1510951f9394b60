//! Published seed sets (the v1.0 rules' seed rotation): a submission binds one set, by id, and
//! every point declares its three seeds — `scheduler_rng_seed`, `sample_index_rng_seed`,
//! `model_seed` — which the official checker compares with the published values.
//!
//! The set the checker ships (set A of cohort 2026-10-C1) is bundled (`mlperf/data/seed_sets.yaml`,
//! the checker's file unchanged); `--seed-sets FILE` reads a newer file of the same shape, the
//! `cohort:` mapping with `cohort-id` and `seed_sets`, or a flat top-level `seed_sets` list.

use serde::{Deserialize, Serialize};
use std::path::Path;

/// The bundled file, as the checker ships it.
pub const BUNDLED: &str = include_str!("../data/seed_sets.yaml");

/// One published set.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SeedSet {
    /// The set's id (`A`, …).
    pub id: String,
    /// The scheduler's seed.
    pub scheduler_rng_seed: u64,
    /// The sample order's seed.
    pub sample_index_rng_seed: u64,
    /// The model's sampling seed (every request's `seed`).
    pub model_seed: u64,
    /// The cohort the set was published for, when the file says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cohort: Option<String>,
}

/// Why a seed set could not be found.
#[derive(Debug, thiserror::Error)]
pub enum SeedSetError {
    /// The seed-set file is not one.
    #[error("{file}: {problem}")]
    Bad {
        /// The file.
        file: String,
        /// What is wrong.
        problem: String,
    },
    /// No set of that id.
    #[error("seed set {id:?} is not in {file} (published: {known})")]
    Unknown {
        /// The id asked for.
        id: String,
        /// The file looked in.
        file: String,
        /// The ids it has.
        known: String,
    },
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    id: String,
    scheduler_rng_seed: u64,
    sample_index_rng_seed: u64,
    model_seed: u64,
    #[serde(default)]
    #[allow(dead_code)]
    cohorts: Option<Vec<String>>,
}

#[derive(Deserialize)]
struct Cohort {
    #[serde(default)]
    #[allow(dead_code)]
    version: Option<serde_yaml_ng::Value>,
    #[serde(rename = "cohort-id")]
    cohort_id: Option<String>,
    seed_sets: Vec<Entry>,
}

#[derive(Deserialize)]
struct File {
    cohort: Option<Cohort>,
    seed_sets: Option<Vec<Entry>>,
}

/// Every set of a seed-set file's text; `file` names it in errors.
pub fn parse(text: &str, file: &str) -> Result<Vec<SeedSet>, SeedSetError> {
    let bad = |problem: String| SeedSetError::Bad {
        file: file.into(),
        problem,
    };
    let f: File = serde_yaml_ng::from_str(text).map_err(|e| {
        bad(format!(
            "not a seed-set file (expected `cohort: {{cohort-id, seed_sets: [{{id, scheduler_rng_seed, sample_index_rng_seed, model_seed}}]}}`): {e}"
        ))
    })?;
    let (entries, cohort) = match (f.cohort, f.seed_sets) {
        (Some(c), _) => (c.seed_sets, c.cohort_id),
        (None, Some(s)) => (s, None),
        (None, None) => return Err(bad("no `cohort.seed_sets` and no `seed_sets` list".into())),
    };
    if entries.is_empty() {
        return Err(bad("defines no seed sets".into()));
    }
    let mut out: Vec<SeedSet> = Vec::new();
    for e in entries {
        if e.id.is_empty() {
            return Err(bad("a seed set has an empty `id`".into()));
        }
        if out.iter().any(|s| s.id == e.id) {
            return Err(bad(format!("seed set {:?} is defined twice", e.id)));
        }
        out.push(SeedSet {
            id: e.id,
            scheduler_rng_seed: e.scheduler_rng_seed,
            sample_index_rng_seed: e.sample_index_rng_seed,
            model_seed: e.model_seed,
            cohort: cohort.clone(),
        });
    }
    Ok(out)
}

/// The set `id` from `file` (or the bundled sets).
pub fn find(id: &str, file: Option<&Path>) -> Result<SeedSet, SeedSetError> {
    let (sets, name) = match file {
        Some(p) => {
            let name = p.display().to_string();
            let text = std::fs::read_to_string(p).map_err(|e| SeedSetError::Bad {
                file: name.clone(),
                problem: format!("cannot read: {e}"),
            })?;
            (parse(&text, &name)?, name)
        }
        None => (
            parse(BUNDLED, "the bundled seed sets")?,
            "the bundled seed sets".to_string(),
        ),
    };
    sets.iter()
        .find(|s| s.id == id)
        .cloned()
        .ok_or_else(|| SeedSetError::Unknown {
            id: id.into(),
            file: name,
            known: sets
                .iter()
                .map(|s| s.id.as_str())
                .collect::<Vec<_>>()
                .join(", "),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bundled_set_is_the_checkers() {
        let a = find("A", None).unwrap();
        assert_eq!(a.scheduler_rng_seed, 10487924139932647040);
        assert_eq!(a.sample_index_rng_seed, 586478644936801402);
        assert_eq!(a.model_seed, 9315206023656308754);
        assert_eq!(a.cohort.as_deref(), Some("2026-10-C1"));
        let e = find("B", None).unwrap_err().to_string();
        assert!(e.contains("\"B\"") && e.contains("published: A"), "{e}");
    }

    #[test]
    fn flat_files_and_bad_files() {
        let s = parse(
            "seed_sets:\n  - {id: X, scheduler_rng_seed: 1, sample_index_rng_seed: 2, model_seed: 3}\n",
            "f.yaml",
        )
        .unwrap();
        assert_eq!(s[0].model_seed, 3);
        assert_eq!(s[0].cohort, None);
        let e = parse("seed_sets:\n  - {id: X, model_seed: 3}\n", "f.yaml")
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("f.yaml:") && e.contains("scheduler_rng_seed"),
            "{e}"
        );
        let e = parse("[1, 2]", "g.yaml").unwrap_err().to_string();
        assert!(e.starts_with("g.yaml: not a seed-set file"), "{e}");
    }
}
