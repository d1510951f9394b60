//! A report page in headless Chromium (the tests that check how a page reads).

use std::path::Path;
use std::process::Command;

/// Runs headless Chromium on `page` with `args` (e.g. `--dump-dom`) and returns its stdout;
/// fails the test, naming the install script, when Chromium is missing.
pub fn chromium(args: &[&str], page: &Path) -> String {
    let profile = tempfile::tempdir().expect("temp dir");
    let out = Command::new("chromium")
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .args(args)
        .arg(format!("file://{}", page.display()))
        .output()
        .unwrap_or_else(|e| panic!("cannot run `chromium` ({e}): run scripts/install-test-deps"));
    assert!(
        out.status.success(),
        "chromium failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The page's DOM after its scripts ran, in a 1280-pixel-wide window.
pub fn dom_at_1280(page: &Path) -> String {
    chromium(&["--window-size=1280,4000", "--dump-dom"], page)
}

/// At a 1280-pixel window: no horizontal scroll, no label cut at its plot's edge (the page's
/// own check, `data-hscroll` and `data-clipped-labels`).
pub fn assert_reads_well(dom: &str) {
    let attr = |name: &str| {
        dom.split(&format!("{name}=\""))
            .nth(1)
            .and_then(|s| s.split('"').next())
            .unwrap_or_else(|| panic!("{name} not set"))
            .to_string()
    };
    assert_eq!(attr("data-hscroll"), "0", "the page scrolls sideways");
    assert_eq!(
        attr("data-clipped-labels"),
        "",
        "labels cut at a plot's edge"
    );
}
