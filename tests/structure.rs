//! The workspace keeps its shape: `scripts/structure --check` finds no module cycle and no
//! non-test function over 100 lines (docs/style.md: files and functions small enough to read in
//! one sitting). A function that grows past the limit fails here, naming itself.

use std::process::Command;

#[test]
fn no_module_cycle_and_no_function_over_100_lines() {
    let root = env!("CARGO_MANIFEST_DIR");
    let out = Command::new("python3")
        .arg("scripts/structure")
        .arg("--check")
        .current_dir(root)
        .output()
        .expect("python3 runs scripts/structure");
    assert!(
        out.status.success(),
        "scripts/structure --check failed ({}):\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
