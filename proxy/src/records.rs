//! The record writer: one thread, fed by a bounded channel, writing JSONL files.
//!
//! The data path never waits for the disk: a finished request `try_send`s its boxed record; if
//! the channel is full the record is counted as dropped (the channel holds 65,536 records, far
//! more than a test or a benchmark produces between two writer wake-ups). The writer flushes
//! whenever the channel runs empty, so records reach the file within one batch, and on
//! [`Writer::flush`] (used at shutdown).
//!
//! Files: `DIR/records-<start unix seconds>-<n>.jsonl`, a new `n` once a file passes
//! `--records-max-bytes`. With no directory the records are only counted (and kept in memory
//! when [`WriterConfig::keep`] is set: tests and the demo read them back with
//! [`Writer::subscribe`]).

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use tokentap_core::record::TurnRecord;
use tokio::sync::{mpsc, oneshot, watch};

/// Channel capacity, in records.
pub const CHANNEL: usize = 65_536;

#[derive(Debug, Clone, Default)]
pub struct WriterConfig {
    pub dir: Option<PathBuf>,
    /// Rotate after a file reaches this many bytes.
    pub max_bytes: u64,
    /// Keep every record in memory too (tests, demo).
    pub keep: bool,
}

enum Msg {
    Record(Box<TurnRecord>),
    Flush(oneshot::Sender<()>),
}

/// Counters shared with the rest of the proxy.
#[derive(Debug, Default)]
pub struct Counts {
    /// Records handed to the writer and written (or counted, with no directory).
    pub written: AtomicU64,
    /// Records lost because the channel was full or the writer had stopped.
    pub dropped: AtomicU64,
    /// Records that could not be written to disk (I/O error); not counted in `written`.
    pub io_errors: AtomicU64,
}

/// Handle to the writer thread. Cheap to clone.
#[derive(Clone)]
pub struct Writer {
    tx: mpsc::Sender<Msg>,
    pub counts: Arc<Counts>,
    kept: watch::Receiver<Vec<TurnRecord>>,
}

impl Writer {
    /// Starts the writer thread. Fails if the directory cannot be created.
    pub fn start(cfg: WriterConfig) -> std::io::Result<Writer> {
        if let Some(d) = &cfg.dir {
            std::fs::create_dir_all(d)?;
        }
        let (tx, rx) = mpsc::channel(CHANNEL);
        let counts = Arc::new(Counts::default());
        let (kept_tx, kept) = watch::channel(Vec::new());
        let c = counts.clone();
        std::thread::Builder::new()
            .name("tokentap-records".into())
            .spawn(move || writer_loop(cfg, rx, c, kept_tx))?;
        Ok(Writer { tx, counts, kept })
    }

    /// Hands a record over without ever waiting. Returns false if it was dropped.
    pub fn send(&self, r: Box<TurnRecord>) -> bool {
        match self.tx.try_send(Msg::Record(r)) {
            Ok(()) => true,
            Err(_) => {
                self.counts.dropped.fetch_add(1, Ordering::Relaxed);
                false
            }
        }
    }

    /// Waits until every record sent before this call is written and the file flushed.
    pub async fn flush(&self) {
        let (tx, rx) = oneshot::channel();
        if self.tx.send(Msg::Flush(tx)).await.is_ok() {
            let _ = rx.await;
        }
    }

    /// Records kept in memory ([`WriterConfig::keep`]), as a watch for waiting on a count.
    pub fn subscribe(&self) -> watch::Receiver<Vec<TurnRecord>> {
        self.kept.clone()
    }
}

struct Files {
    dir: PathBuf,
    start: u64,
    n: u32,
    max: u64,
    cur: Option<(BufWriter<File>, u64)>,
}

impl Files {
    fn write(&mut self, line: &[u8]) -> std::io::Result<()> {
        if self.cur.as_ref().is_some_and(|(_, b)| *b >= self.max) {
            if let Some((mut w, _)) = self.cur.take() {
                w.flush()?;
            }
            self.n += 1;
        }
        if self.cur.is_none() {
            let p = self
                .dir
                .join(format!("records-{}-{}.jsonl", self.start, self.n));
            let f = File::options().create(true).append(true).open(p)?;
            self.cur = Some((BufWriter::with_capacity(256 * 1024, f), 0));
        }
        if let Some((w, b)) = self.cur.as_mut() {
            w.write_all(line)?;
            *b += line.len() as u64;
        }
        Ok(())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match self.cur.as_mut() {
            Some((w, _)) => w.flush(),
            None => Ok(()),
        }
    }
}

fn writer_loop(
    cfg: WriterConfig,
    mut rx: mpsc::Receiver<Msg>,
    counts: Arc<Counts>,
    kept: watch::Sender<Vec<TurnRecord>>,
) {
    let mut files = cfg.dir.map(|dir| Files {
        dir,
        start: tokentap_core::clock::wall_now() / 1_000_000_000,
        n: 0,
        max: cfg.max_bytes.max(1),
        cur: None,
    });
    let mut line = Vec::with_capacity(16 * 1024);
    let mut handle = |msg: Msg, files: &mut Option<Files>| match msg {
        Msg::Record(r) => {
            let mut ok = true;
            if let Some(f) = files.as_mut() {
                line.clear();
                // TurnRecord has only string-keyed maps, so serialising cannot fail; a failure
                // would still be counted below rather than lost silently.
                ok = serde_json::to_writer(&mut line, &*r).is_ok();
                if ok {
                    line.push(b'\n');
                    ok = f.write(&line).is_ok();
                }
            }
            if cfg.keep {
                kept.send_modify(|v| v.push(*r));
            }
            if ok {
                counts.written.fetch_add(1, Ordering::Relaxed);
            } else {
                counts.io_errors.fetch_add(1, Ordering::Relaxed);
            }
        }
        Msg::Flush(ack) => {
            if let Some(f) = files.as_mut() {
                if f.flush().is_err() {
                    counts.io_errors.fetch_add(1, Ordering::Relaxed);
                }
            }
            let _ = ack.send(());
        }
    };
    while let Some(msg) = rx.blocking_recv() {
        handle(msg, &mut files);
        // Drain what is queued, then flush once: one write syscall per batch.
        while let Ok(msg) = rx.try_recv() {
            handle(msg, &mut files);
        }
        if let Some(f) = files.as_mut() {
            if f.flush().is_err() {
                counts.io_errors.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokentap_core::clock::Anchor;
    use tokentap_core::record::Origin;

    #[tokio::test]
    async fn rotates_by_size_and_flushes_everything() {
        let dir = tempfile::tempdir().unwrap();
        let w = Writer::start(WriterConfig {
            dir: Some(dir.path().to_path_buf()),
            max_bytes: 1000,
            keep: true,
        })
        .unwrap();
        for i in 0..50 {
            let mut r = TurnRecord::new(Origin::Proxy, Anchor::now());
            r.turn_index = i;
            assert!(w.send(Box::new(r)));
        }
        w.flush().await;
        assert_eq!(w.counts.written.load(Ordering::Relaxed), 50);
        let mut files: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        files.sort();
        assert!(files.len() > 1, "expected rotation, got {files:?}");
        let mut lines = 0;
        for f in &files {
            let text = std::fs::read_to_string(f).unwrap();
            for l in text.lines() {
                let _: TurnRecord = serde_json::from_str(l).unwrap();
                lines += 1;
            }
        }
        assert_eq!(lines, 50);
        assert_eq!(w.subscribe().borrow().len(), 50);
    }
}
