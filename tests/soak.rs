//! A one-minute run of `scripts/soak`: the sim with faults, the proxy and the replay
//! in a closed loop; records == requests and flat RSS and fds for every process. The script's
//! 30-minute run is the measurement; this keeps it working.

use std::process::Command;

#[test]
fn a_minute_of_soak_loses_nothing_and_stays_flat() {
    let out = tempfile::tempdir().unwrap();
    let o = Command::new(concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/soak"))
        .args(["60"])
        .arg(out.path())
        .env("TOKENTAP_BIN", env!("CARGO_BIN_EXE_tokentap"))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{text}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(text.contains("records == requests"), "{text}");
    assert!(text.trim_end().ends_with("PASS"), "{text}");
    // Samples were taken for every process all along.
    let csv = std::fs::read_to_string(out.path().join("samples.csv")).unwrap();
    for p in ["sim", "proxy", "replay"] {
        let n = csv
            .lines()
            .filter(|l| l.split(',').nth(1) == Some(p))
            .count();
        assert!(n >= 20, "{p}: {n} samples");
    }
}
