//! The ground-truth request log: in memory for [`crate::SimServer::log`], optionally streamed
//! as JSONL to `chunk_log`.
//!
//! Touched three times per request (arrival, response head, end), never per chunk: a body keeps
//! its chunk stamps in its own `Vec` and hands the whole entry over when it ends. Arrival order
//! (`seq`) is assigned under the same lock that appends the entry, so the snapshot is in arrival
//! order even when requests race. Finished-request counting goes through a `watch` channel so
//! tests wait on the event itself, never on a sleep.
//!
//! The JSONL writer is a plain thread fed by a channel: file writes (one `write` + flush per
//! line) never block a runtime worker, and closing the channel then joining the thread
//! guarantees every finished request is on disk when the server has shut down.

use crate::RequestLog;
use parking_lot::{Mutex, MutexGuard};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::sync::mpsc;
use std::thread::JoinHandle;
use tokio::sync::watch;

pub(crate) struct LogStore {
    /// Keep entries in memory (off for the CLI, where nobody reads them and a long benchmark
    /// would hold every chunk stamp).
    keep: bool,
    inner: Mutex<Inner>,
    finished: watch::Sender<usize>,
    writer: Mutex<Option<Writer>>,
    /// Why lines of the JSONL log were lost, once it is closed.
    failure: Mutex<Option<String>>,
}

struct Inner {
    next_seq: u64,
    /// `seq` of `entries[0]`.
    base: u64,
    entries: Vec<RequestLog>,
    /// Finished requests with `seq >= base`.
    finished: usize,
}

struct Writer {
    tx: mpsc::Sender<String>,
    /// Ends with the first write error and how many lines it lost, if any was.
    thread: JoinHandle<Option<(String, u64)>>,
}

impl LogStore {
    pub fn new(keep: bool, chunk_log: Option<&Path>) -> std::io::Result<Self> {
        let writer = match chunk_log {
            Some(path) => Some(Writer::spawn(
                File::create(path)?,
                path.display().to_string(),
            )?),
            None => None,
        };
        Ok(LogStore {
            keep,
            inner: Mutex::new(Inner {
                next_seq: 0,
                base: 0,
                entries: Vec::new(),
                finished: 0,
            }),
            finished: watch::channel(0).0,
            writer: Mutex::new(writer),
            failure: Mutex::new(None),
        })
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while holding this lock leaves the log consistent (each update is one
        // assignment), so a poisoned lock is still usable.
        self.inner.lock()
    }

    /// Assigns the arrival number and records the entry (which `make` builds from it).
    pub fn begin(&self, make: impl FnOnce(u64) -> RequestLog) -> RequestLog {
        let mut g = self.lock();
        let seq = g.next_seq;
        g.next_seq += 1;
        let entry = make(seq);
        if self.keep {
            g.entries.push(entry.clone());
        }
        entry
    }

    /// Replaces the in-flight entry (response head decided).
    pub fn update(&self, entry: &RequestLog) {
        if !self.keep {
            return;
        }
        let mut g = self.lock();
        if let Some(i) = entry.seq.checked_sub(g.base) {
            if let Some(slot) = g.entries.get_mut(i as usize) {
                *slot = entry.clone();
            }
        }
    }

    /// Records the final entry and wakes `wait_finished`.
    pub fn finish(&self, entry: RequestLog) {
        if let Some(w) = &*self.writer.lock() {
            match serde_json::to_string(&entry) {
                Ok(line) => {
                    let _ = w.tx.send(line);
                }
                Err(e) => tracing::warn!(error = %e, "sim: cannot serialize request log entry"),
            }
        }
        let mut g = self.lock();
        let Some(i) = entry.seq.checked_sub(g.base) else {
            return; // from before a clear_log
        };
        g.finished += 1;
        let finished = g.finished;
        if self.keep {
            if let Some(slot) = g.entries.get_mut(i as usize) {
                *slot = entry;
            }
        }
        drop(g);
        self.finished.send_replace(finished);
    }

    pub fn snapshot(&self) -> Vec<RequestLog> {
        self.lock().entries.clone()
    }

    pub fn clear(&self) {
        let mut g = self.lock();
        g.base = g.next_seq;
        g.entries.clear();
        g.finished = 0;
        drop(g);
        self.finished.send_replace(0);
    }

    pub async fn wait_finished(&self, n: usize) {
        let mut rx = self.finished.subscribe();
        // Invariant: the sender lives in `self`, so the channel cannot close while we wait.
        let _ = rx.wait_for(|&f| f >= n).await;
    }

    /// Closes the JSONL writer and waits until every line is flushed; a write that failed is
    /// kept for [`LogStore::failure`].
    pub async fn close(&self) {
        let w = self.writer.lock().take();
        if let Some(Writer { tx, thread }) = w {
            drop(tx);
            let lost = tokio::task::spawn_blocking(move || thread.join()).await;
            if let Ok(Ok(Some((error, lines)))) = lost {
                *self.failure.lock() = Some(format!("{lines} request lines not written: {error}"));
            }
        }
    }

    /// After [`LogStore::close`]: why the JSONL log is incomplete, if it is.
    pub fn failure(&self) -> Option<String> {
        self.failure.lock().clone()
    }
}

impl Writer {
    fn spawn(file: File, name: String) -> std::io::Result<Writer> {
        let (tx, rx) = mpsc::channel::<String>();
        let thread = std::thread::Builder::new()
            .name("sim-chunk-log".into())
            .spawn(move || {
                let mut out = BufWriter::new(file);
                let mut failed: Option<(String, u64)> = None;
                for line in rx {
                    if let Some((_, lost)) = failed.as_mut() {
                        *lost += 1;
                        continue;
                    }
                    let r = out
                        .write_all(line.as_bytes())
                        .and_then(|()| out.write_all(b"\n"))
                        .and_then(|()| out.flush());
                    if let Err(e) = r {
                        tracing::error!(file = %name, error = %e, "sim: chunk log write failed; no more lines will be written");
                        failed = Some((e.to_string(), 1));
                    }
                }
                failed
            })?;
        Ok(Writer { tx, thread })
    }
}
