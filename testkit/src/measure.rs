//! A command run to its end with its peak memory: the kernel's own high-water mark of the
//! child's resident set (`ru_maxrss` from `wait4`), the number `/proc/PID/status` shows as
//! `VmHWM` while the process lives — exact at exit, where polling /proc could miss a last peak.

use std::io::Read;
use std::process::{Command, Stdio};

/// What a finished command left.
#[derive(Debug)]
pub struct Measured {
    /// Exit code; `None` when a signal ended it.
    pub code: Option<i32>,
    /// What it printed.
    pub stdout: String,
    /// What it printed on stderr.
    pub stderr: String,
    /// Peak resident set, kB.
    pub peak_kb: u64,
}

impl Measured {
    /// Peak resident memory, MB.
    pub fn peak_mb(&self) -> u64 {
        self.peak_kb / 1024
    }
}

/// Runs `cmd` (stdout and stderr captured) and waits for it, measuring its peak resident set.
// Reaped by `wait4` below, which std's `wait` cannot replace (it does not return the usage).
#[allow(clippy::zombie_processes)]
pub fn run(cmd: &mut Command) -> Measured {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn the command");
    let drain = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut s = Vec::new();
            let _ = r.read_to_end(&mut s);
            String::from_utf8_lossy(&s).into_owned()
        })
    };
    let out = drain(Box::new(child.stdout.take().expect("piped")));
    let err = drain(Box::new(child.stderr.take().expect("piped")));
    let pid = child.id() as libc::pid_t;
    let mut status: libc::c_int = 0;
    // SAFETY: an all-zero `rusage` is a valid value of this plain C struct.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `pid` is our own unreaped child (std's `Child` does not wait on drop); `status`
    // and `usage` are valid for writes for the duration of the call.
    let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(r, pid, "wait4: {}", std::io::Error::last_os_error());
    let code = libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status));
    Measured {
        code,
        stdout: out.join().expect("stdout reader"),
        stderr: err.join().expect("stderr reader"),
        peak_kb: u64::try_from(usage.ru_maxrss).unwrap_or(0),
    }
}
