//! A spawned `tokentap` server announces where it listens on its first stdout lines
//! (`listening on http://ADDR`, then `admin on http://ADDR` for the proxy): one reader of
//! those lines for every test and example that spawns the binary.

use std::io::{BufRead, BufReader, Lines};
use std::process::{Child, ChildStdout};

/// The rest of a child's stdout. Keep it alive (or drain it): a server whose stdout is closed
/// fails its next print.
pub type Stdout = Lines<BufReader<ChildStdout>>;

/// Takes `child`'s (piped) stdout and reads its first line, `listening on URL`: returns URL and
/// the rest of stdout. Panics, showing the line, on anything else.
pub fn listening(child: &mut Child) -> (String, Stdout) {
    let mut lines = BufReader::new(child.stdout.take().expect("piped stdout")).lines();
    let url = announced(&mut lines, "listening on ");
    (url, lines)
}

/// [`listening`] without the scheme: `host:port`.
pub fn listening_addr(child: &mut Child) -> (String, Stdout) {
    let (url, lines) = listening(child);
    let addr = url
        .strip_prefix("http://")
        .or_else(|| url.strip_prefix("https://"))
        .unwrap_or(&url)
        .to_string();
    (addr, lines)
}

/// The next line of `lines`, which must start with `prefix` (`"listening on "`, `"admin on "`,
/// `"pid "`): what follows it, trimmed. Panics, showing the line, otherwise.
pub fn announced<B: BufRead>(lines: &mut Lines<B>, prefix: &str) -> String {
    let line = match lines.next() {
        Some(Ok(l)) => l,
        Some(Err(e)) => panic!("reading the child's stdout: {e}"),
        None => panic!("the child's stdout ended before its {prefix:?} line"),
    };
    match line.trim().strip_prefix(prefix) {
        Some(rest) => rest.trim().to_string(),
        None => panic!("expected a {prefix:?} line, got {line:?}"),
    }
}

/// [`announced`] for code that reports errors instead of panicking (the examples).
pub fn try_announced<B: BufRead>(lines: &mut Lines<B>, prefix: &str) -> Result<String, String> {
    let line = lines
        .next()
        .ok_or_else(|| format!("the child's stdout ended before its {prefix:?} line"))?
        .map_err(|e| format!("reading the child's stdout: {e}"))?;
    line.trim()
        .strip_prefix(prefix)
        .map(|rest| rest.trim().to_string())
        .ok_or_else(|| format!("expected a {prefix:?} line, got {line:?}"))
}
