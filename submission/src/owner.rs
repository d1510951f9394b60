//! One sweep per tree: which sweep wrote a submission tree, and the points it may not hold.
//!
//! The official checker judges every `results/<system>/<model>/r<C>/` it finds, so a point left
//! behind by an earlier sweep (or put there by hand) would be submitted with the new curve as if
//! it were part of it. The writer therefore records the sweep that wrote the tree in
//! `src/tokentap/written-by.json` ([`MARKER`]: the sweep's id, its directory and its points) and,
//! before writing, finds every point directory of the tree. A point is the writer's own when the
//! marker names this sweep and the point is at this curve's path with one of the sweep's planned
//! concurrencies; any other point is foreign. Foreign points refuse the write, each named, unless
//! the caller asks to replace them: then exactly those directories are removed (and the model
//! and system directories they leave empty), nothing else.

use crate::SubmissionError;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The marker's path under the submission directory (beside tokentap's README under `src/`,
/// which the checker does not read as results).
pub const MARKER: &str = "src/tokentap/written-by.json";

/// The marker: the sweep that wrote the tree.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WrittenBy {
    /// The sweep's id (`sweep.json` `sweep_id`; `dir:<path>` for a sweep written before ids).
    pub sweep_id: String,
    /// The sweep directory, as given to the writer.
    pub sweep_dir: PathBuf,
    /// The curve's directory, relative to the submission directory.
    pub curve: PathBuf,
    /// The concurrencies of the points written.
    pub points: Vec<u64>,
}

/// The id of the sweep in `sweep_dir`: `sweep.json`'s `sweep_id`, or for a sweep written by a
/// tokentap that gave none, `dir:` and the directory's canonical path (stable for that sweep).
pub fn sweep_id(sweep_dir: &Path, sweep: &tokentap_run::sweep::SweepFile) -> String {
    match &sweep.sweep_id {
        Some(id) => id.to_string(),
        None => {
            let dir = sweep_dir
                .canonicalize()
                .unwrap_or_else(|_| sweep_dir.to_path_buf());
            format!("dir:{}", dir.display())
        }
    }
}

/// Reads the marker of the tree at `root`, if it has one.
pub fn written_by(root: &Path) -> Result<Option<WrittenBy>, SubmissionError> {
    let path = root.join(MARKER);
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => {
            return Err(SubmissionError::Read {
                file: path.display().to_string(),
                error: e.to_string(),
            })
        }
    };
    serde_json::from_str(&text)
        .map(Some)
        .map_err(|e| SubmissionError::Read {
            file: path.display().to_string(),
            error: format!(
                "not tokentap's record of the sweep that wrote this tree ({e}); \
                 expected {{\"sweep_id\", \"sweep_dir\", \"curve\", \"points\"}}"
            ),
        })
}

/// Every point directory of the tree at `root` (`results/<system>/<model>/r<digits>`), relative
/// to `root`, sorted.
pub fn point_dirs(root: &Path) -> Result<Vec<PathBuf>, SubmissionError> {
    let mut found = Vec::new();
    for system in subdirs(&root.join("results"))? {
        for model in subdirs(&system)? {
            for point in subdirs(&model)? {
                let name = point.file_name().and_then(|n| n.to_str()).unwrap_or("");
                let is_point = name.len() > 1
                    && name.starts_with('r')
                    && name[1..].bytes().all(|b| b.is_ascii_digit());
                if is_point {
                    // Invariant: `point` was found under `root`.
                    found.push(point.strip_prefix(root).unwrap_or(&point).to_path_buf());
                }
            }
        }
    }
    found.sort();
    Ok(found)
}

/// The directories directly under `dir` (none when it does not exist).
fn subdirs(dir: &Path) -> Result<Vec<PathBuf>, SubmissionError> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => {
            return Err(SubmissionError::Read {
                file: dir.display().to_string(),
                error: e.to_string(),
            })
        }
    };
    let mut out = Vec::new();
    for e in entries {
        let e = e.map_err(|e| SubmissionError::Read {
            file: dir.display().to_string(),
            error: e.to_string(),
        })?;
        if e.file_type().is_ok_and(|t| t.is_dir()) {
            out.push(e.path());
        }
    }
    Ok(out)
}

/// What the writer is about to write: the sweep, and where its points go.
pub struct Claim<'a> {
    /// The submission's root directory.
    pub root: &'a Path,
    /// The sweep's id.
    pub sweep_id: &'a str,
    /// The curve's directory, relative to `root`.
    pub curve: &'a Path,
    /// Every concurrency the sweep planned (done or not).
    pub planned: &'a [u64],
}

/// The points of the tree that are not this sweep's (relative to the root), and the marker
/// found, if any.
pub fn foreign_points(c: &Claim) -> Result<(Vec<PathBuf>, Option<WrittenBy>), SubmissionError> {
    let marker = written_by(c.root)?;
    let ours = marker.as_ref().is_some_and(|m| m.sweep_id == c.sweep_id);
    let foreign = point_dirs(c.root)?
        .into_iter()
        .filter(|p| {
            let own = ours
                && p.parent() == Some(c.curve)
                && p.file_name()
                    .and_then(|n| n.to_str())
                    .and_then(|n| n[1..].parse::<u64>().ok())
                    .is_some_and(|n| c.planned.contains(&n));
            !own
        })
        .collect();
    Ok((foreign, marker))
}

/// Checks that the tree may take this sweep's points: refuses foreign points (naming them and the
/// sweep that wrote them), or with `replace` removes exactly them. Returns the points removed.
pub fn claim(c: &Claim, replace: bool) -> Result<Vec<PathBuf>, SubmissionError> {
    let (foreign, marker) = foreign_points(c)?;
    if foreign.is_empty() {
        return Ok(Vec::new());
    }
    if !replace {
        let by = match &marker {
            Some(m) if m.sweep_id != c.sweep_id => format!(
                "written by another sweep ({}, id {})",
                m.sweep_dir.display(),
                m.sweep_id
            ),
            Some(_) => "not among this sweep's planned points".to_string(),
            None => format!("not written by this sweep (the tree has no {MARKER})"),
        };
        return Err(SubmissionError::Foreign {
            root: c.root.display().to_string(),
            points: foreign.iter().map(|p| p.display().to_string()).collect(),
            by,
        });
    }
    for p in &foreign {
        let dir = c.root.join(p);
        std::fs::remove_dir_all(&dir).map_err(|e| SubmissionError::write(&dir, e))?;
        // The model and system directories the point leaves empty.
        for up in [dir.parent(), dir.parent().and_then(Path::parent)]
            .into_iter()
            .flatten()
        {
            if std::fs::read_dir(up).is_ok_and(|mut d| d.next().is_none()) {
                let _ = std::fs::remove_dir(up);
            }
        }
    }
    Ok(foreign)
}

/// Writes the marker: this sweep wrote the tree, with these points.
pub fn mark(root: &Path, by: &WrittenBy) -> Result<(), SubmissionError> {
    let path = root.join(MARKER);
    let mut text = serde_json::to_string_pretty(by).expect("the marker serialises");
    text.push('\n');
    if let Some(d) = path.parent() {
        std::fs::create_dir_all(d).map_err(|e| SubmissionError::write(d, e))?;
    }
    std::fs::write(&path, text).map_err(|e| SubmissionError::write(&path, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn touch_point(root: &Path, rel: &str) {
        std::fs::create_dir_all(root.join(rel)).unwrap();
        std::fs::write(root.join(rel).join("point.yaml"), "x: 1\n").unwrap();
    }

    #[test]
    fn foreign_points_are_named_and_replaced_exactly() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path();
        let curve = Path::new("results/sys/model");
        touch_point(root, "results/sys/model/r4");
        touch_point(root, "results/sys/model/r8");
        touch_point(root, "results/other/model/r2");
        std::fs::create_dir_all(root.join("results/sys/model/notes")).unwrap();
        mark(
            root,
            &WrittenBy {
                sweep_id: "old".into(),
                sweep_dir: "/old".into(),
                curve: curve.into(),
                points: vec![4, 8],
            },
        )
        .unwrap();
        let planned = [4, 16];
        let c = Claim {
            root,
            sweep_id: "new",
            curve,
            planned: &planned,
        };
        let err = claim(&c, false).unwrap_err().to_string();
        for p in [
            "results/sys/model/r4",
            "results/sys/model/r8",
            "results/other/model/r2",
            "another sweep (/old, id old)",
            "--replace",
        ] {
            assert!(err.contains(p), "{p} in {err}");
        }
        assert!(root.join("results/sys/model/r4").is_dir(), "refusing keeps");
        let removed = claim(&c, true).unwrap();
        assert_eq!(removed.len(), 3);
        assert_eq!(point_dirs(root).unwrap(), Vec::<PathBuf>::new());
        assert!(root.join("results/sys/model/notes").is_dir(), "not a point");
        assert!(!root.join("results/other").exists(), "emptied, removed");
    }

    #[test]
    fn own_points_are_not_foreign() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path();
        let curve = Path::new("results/sys/model");
        touch_point(root, "results/sys/model/r4");
        touch_point(root, "results/sys/model/r99");
        let by = WrittenBy {
            sweep_id: "me".into(),
            sweep_dir: "/me".into(),
            curve: curve.into(),
            points: vec![4],
        };
        mark(root, &by).unwrap();
        assert_eq!(written_by(root).unwrap(), Some(by));
        let planned = [4, 8];
        let c = Claim {
            root,
            sweep_id: "me",
            curve,
            planned: &planned,
        };
        let (foreign, _) = foreign_points(&c).unwrap();
        assert_eq!(foreign, vec![PathBuf::from("results/sys/model/r99")]);
        // Without a marker, every point is foreign.
        std::fs::remove_file(root.join(MARKER)).unwrap();
        let (foreign, _) = foreign_points(&c).unwrap();
        assert_eq!(foreign.len(), 2);
    }
}
