//! Live progress: shared atomic counters, and a status line on stderr.
//!
//! Slots bump the counters when they start or finish a trajectory and when they emit a record;
//! the collector adds each in-window ok turn's TTFT and ITL to running sums that the printer
//! takes (and resets) at every tick, so the line shows the means since the last line. Only
//! atomics: nothing on the hot path waits for the printer.

use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;
use tokentap_core::clock;
use tokentap_core::record::Status;
use tokio_util::sync::CancellationToken;

/// How a run reports progress while it runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ProgressMode {
    /// Nothing.
    #[default]
    Off,
    /// A status line on stderr: redrawn in place (`\r`) every 0.5 s on a terminal, a plain
    /// line every 5 s otherwise.
    Line,
}

/// Counters shared by the slots, the collector and the printer.
#[derive(Debug, Default)]
pub struct Counters {
    /// Trajectories started.
    pub trajectories_started: AtomicU64,
    /// Trajectories whose every turn ended.
    pub trajectories_done: AtomicU64,
    /// Records emitted, by status (index: ok, failed, timed_out, aborted, cancelled).
    pub turns: [AtomicU64; 5],
    ttft_sum_ns: AtomicU64,
    ttft_n: AtomicU64,
    itl_sum_ns: AtomicU64,
    itl_n: AtomicU64,
}

impl Counters {
    pub(crate) fn trajectory_started(&self) {
        self.trajectories_started.fetch_add(1, Relaxed);
    }

    pub(crate) fn trajectory_done(&self) {
        self.trajectories_done.fetch_add(1, Relaxed);
    }

    pub(crate) fn turn_recorded(&self, s: Status) {
        self.turns[s.index()].fetch_add(1, Relaxed);
    }

    /// Adds one turn's TTFT and its ITL samples (sum, count) to the live means.
    pub(crate) fn live(&self, ttft_ns: Option<u64>, itl_sum_ns: u64, itl_n: u64) {
        if let Some(t) = ttft_ns {
            self.ttft_sum_ns.fetch_add(t, Relaxed);
            self.ttft_n.fetch_add(1, Relaxed);
        }
        self.itl_sum_ns.fetch_add(itl_sum_ns, Relaxed);
        self.itl_n.fetch_add(itl_n, Relaxed);
    }

    /// Conversations with a trajectory in progress.
    pub fn active(&self) -> u64 {
        self.trajectories_started
            .load(Relaxed)
            .saturating_sub(self.trajectories_done.load(Relaxed))
    }

    fn take_mean(sum: &AtomicU64, n: &AtomicU64) -> Option<f64> {
        let n = n.swap(0, Relaxed);
        let s = sum.swap(0, Relaxed);
        (n > 0).then(|| s as f64 / n as f64)
    }

    /// One status line. TTFT and ITL are the means over the turns completed since the previous
    /// line; `last` keeps the previous means for ticks in which no turn completed.
    pub fn line(
        &self,
        elapsed_s: f64,
        budget: u64,
        last: &mut (Option<f64>, Option<f64>),
    ) -> String {
        let t = |i: usize| self.turns[i].load(Relaxed);
        if let Some(v) = Self::take_mean(&self.ttft_sum_ns, &self.ttft_n) {
            last.0 = Some(v);
        }
        if let Some(v) = Self::take_mean(&self.itl_sum_ns, &self.itl_n) {
            last.1 = Some(v);
        }
        let (ttft, itl) = *last;
        let ms = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{:.2} ms", v / 1e6));
        let bad = t(1) + t(2);
        format!(
            "[{elapsed_s:7.1}s] trajectories {}/{budget} done, {} active | turns {} ok{}{} | TTFT {} ITL {}",
            self.trajectories_done.load(Relaxed),
            self.active(),
            t(0),
            if bad > 0 { format!(", {bad} failed") } else { String::new() },
            if t(3) + t(4) > 0 {
                format!(", {} aborted/cancelled", t(3) + t(4))
            } else {
                String::new()
            },
            ms(ttft),
            ms(itl),
        )
    }
}

/// Prints progress until `done` is cancelled.
pub(crate) async fn print(
    counters: Arc<Counters>,
    budget: Arc<std::sync::atomic::AtomicU64>,
    start: u64,
    done: CancellationToken,
) {
    let tty = std::io::stderr().is_terminal();
    let every = if tty {
        Duration::from_millis(500)
    } else {
        Duration::from_secs(5)
    };
    let mut tick = tokio::time::interval(every);
    tick.tick().await;
    let mut last = (None, None);
    loop {
        tokio::select! {
            _ = done.cancelled() => break,
            _ = tick.tick() => {}
        }
        let elapsed = (clock::now().saturating_sub(start)) as f64 / 1e9;
        // Live: a run extended to its minimum duration grows its budget by whole passes.
        let line = counters.line(elapsed, budget.load(Relaxed), &mut last);
        let mut err = std::io::stderr().lock();
        // Progress is best effort: a closed stderr must not stop the run.
        let _ = if tty {
            write!(err, "\r{line}\x1b[K")
        } else {
            writeln!(err, "{line}")
        };
        let _ = err.flush();
    }
    if tty {
        let _ = writeln!(std::io::stderr());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_shows_counts_and_keeps_the_last_means() {
        let c = Counters::default();
        c.trajectory_started();
        c.trajectory_started();
        c.trajectory_done();
        c.turn_recorded(Status::Ok);
        c.turn_recorded(Status::Failed);
        c.live(Some(2_000_000), 3_000_000, 3);
        let mut last = (None, None);
        let l = c.line(1.0, 10, &mut last);
        assert!(l.contains("trajectories 1/10 done, 1 active"), "{l}");
        assert!(l.contains("turns 1 ok, 1 failed"), "{l}");
        assert!(l.contains("TTFT 2.00 ms ITL 1.00 ms"), "{l}");
        // Nothing new: the previous means stay on the line.
        let l = c.line(1.5, 10, &mut last);
        assert!(l.contains("TTFT 2.00 ms ITL 1.00 ms"), "{l}");
    }
}
