//! Run directories written by earlier tokentap versions (testdata/run-layouts) load into
//! today's types: every point's `summary.json` and `config.json`.

use std::path::{Path, PathBuf};
use tokentap_run::config::RunConfig;
use tokentap_run::summary::Summary;
use tokentap_run::sweep::{PointFile, SweepFile};

fn layouts() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../testdata/run-layouts");
    let mut v: Vec<PathBuf> = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    v.sort();
    assert!(v.len() >= 3, "the committed layouts in {}", root.display());
    v
}

fn points(layout: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(layout.join("sweep"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("summary.json").is_file())
        .collect();
    v.sort();
    assert!(!v.is_empty(), "points in {}", layout.display());
    v
}

fn read<T: serde::de::DeserializeOwned>(path: &Path) -> T {
    let text = std::fs::read_to_string(path).unwrap();
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn every_earlier_summary_and_config_loads() {
    for l in layouts() {
        for p in points(&l) {
            let s: Summary = read(&p.join("summary.json"));
            let c: RunConfig = read(&p.join("config.json"));
            assert_eq!(s.config.model, c.model, "{}", p.display());
            assert!(s.counts.total > 0, "{}", p.display());
            assert!(s.mlperf.primary.qps.is_some(), "{}", p.display());
            assert_eq!(c.endpoints.len(), 1, "{}", p.display());
            let point: PointFile = read(&p.join("point.json"));
            assert_eq!(point.config.model, c.model, "{}", p.display());
        }
        let sweep = SweepFile::load(&l.join("sweep")).unwrap();
        assert_eq!(sweep.points.len(), 2, "{}", l.display());
        assert!(sweep.points.iter().all(|p| p.done()), "{}", l.display());
        let shared = sweep.run_config().unwrap();
        assert_eq!(
            shared.model,
            points(&l)
                .first()
                .map(|p| read::<RunConfig>(&p.join("config.json")).model)
                .unwrap()
        );
    }
}
