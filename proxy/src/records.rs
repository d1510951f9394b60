//! The record writer: one thread, fed by a bounded channel, writing JSONL files.
//!
//! The data path never waits for the disk: a finished request `try_send`s its boxed record; if
//! the channel is full the record is counted as dropped (the channel holds 65,536 records, far
//! more than a test or a benchmark produces between two writer wake-ups).
//!
//! Nor does the data path wake the writer for each record once records come faster than one
//! per [`TICK`]: the writer then drains the channel and writes once a tick (a record reaches the
//! file within one tick), as nginx's `access_log … flush=` does, and the data path leaves its
//! records for the next tick. Woken by each record, the writer cost every request a futex wake
//! on the serving thread and a context switch of its own — tens of µs each on a small VM
//! (docs/benchmarks.md, "Records written per tick"). Slower than that, or after a tick that
//! found nothing, it sleeps until the next record wakes it: an idle proxy wakes no thread, and a
//! lone record is written at once. [`Writer::flush`] (used at shutdown) wakes it too, and so
//! does a queue of [`WAKE_AT`] records.
//!
//! Nothing is lost silently (a read-only or full disk once lost records with `written` still
//! counting them). The directory is proven writable at start (the first file is created then,
//! or the proxy does not start). Records are batched in a buffer of whole lines that the writer
//! owns — no hidden `BufWriter` buffer — and written through core's `linefile` (the writer the
//! replay and `merge` use too): a batch counts as `written` only once its write returned; when
//! it fails (`ENOSPC`, `EIO`, …) the file is truncated back to its length
//! before the batch, so no torn line is left, the batch's records are counted as `failed`, the
//! error is logged (the first at once, then at most once per [`LOG_EVERY`] with the count) and
//! kept for `/health`. The next batch tries again (a disk with room again takes records again).
//!
//! Files: `DIR/records-<start unix seconds>-<n>.jsonl`, a new `n` once a file passes
//! `--records-max-bytes`. With no directory the records are only counted (and kept in memory
//! when [`WriterConfig::keep`] is set: tests and the demo read them back with
//! [`Writer::subscribe`]).

use parking_lot::Mutex;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokentap_core::linefile::{Batch, LineFile};
use tokentap_core::record::TurnRecord;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::time::Instant;

/// Channel capacity, in records.
pub const CHANNEL: usize = 65_536;
/// Bytes of whole lines gathered before a write.
const BATCH: usize = 256 * 1024;
/// Write failures are logged at most this often (the first at once).
pub const LOG_EVERY: Duration = Duration::from_secs(10);
/// How often the writer drains the channel while records come.
pub const TICK: Duration = Duration::from_millis(50);
/// Records queued that wake the writer before its tick (a burst is written in pieces, not held).
pub const WAKE_AT: usize = 4096;

/// How the records are written.
#[derive(Debug, Clone, Default)]
pub struct WriterConfig {
    /// The records directory (`--records`); `None`: counted, not written.
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

/// Counters shared with the rest of the proxy. Every record handed to [`Writer::send`] ends in
/// exactly one of `written`, `dropped`, `failed` (once flushed).
#[derive(Debug, Default)]
pub struct Counts {
    /// Records on disk (`write_all` of their batch returned), or counted with no directory.
    pub written: AtomicU64,
    /// Records lost because the channel was full or the writer had stopped.
    pub dropped: AtomicU64,
    /// Records lost to a write error (their batch was truncated back out of the file).
    pub failed: AtomicU64,
    /// The last write error, for `/health` and the stop report.
    pub last_error: Mutex<Option<String>>,
}

impl Counts {
    /// Records lost so far (dropped or failed).
    pub fn lost(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed) + self.failed.load(Ordering::Relaxed)
    }

    /// The last write error.
    pub fn last_error(&self) -> Option<String> {
        self.last_error.lock().clone()
    }
}

/// The records directory cannot be used.
#[derive(Debug, thiserror::Error)]
#[error("records directory {}: {what}: {source}", dir.display())]
pub struct DirError {
    /// The directory.
    pub dir: PathBuf,
    /// What failed.
    pub what: &'static str,
    /// The system's error.
    #[source]
    pub source: std::io::Error,
}

/// Handle to the writer thread. Cheap to clone.
#[derive(Clone)]
pub struct Writer {
    // Declared before `wake`: the last handle closes the channel, then wakes the writer to see
    // it closed and end.
    tx: mpsc::Sender<Msg>,
    wake: Arc<Wake>,
    /// What became of the records.
    pub counts: Arc<Counts>,
    kept: watch::Receiver<Vec<TurnRecord>>,
}

/// How the data path wakes the writer: only when it sleeps for want of records, for a flush,
/// for a long queue, and when the last handle is dropped.
struct Wake {
    thread: std::thread::Thread,
    /// The writer sleeps until woken (no tick): the next record must wake it.
    asleep: Arc<AtomicBool>,
}

impl Wake {
    fn now(&self) {
        self.thread.unpark();
    }
}

impl Drop for Wake {
    fn drop(&mut self) {
        self.thread.unpark();
    }
}

impl Writer {
    /// Starts the writer thread. Fails if the directory cannot be created or written (the
    /// first file is created here, so a read-only or missing directory stops the start).
    pub fn start(cfg: WriterConfig) -> Result<Writer, DirError> {
        let files = match &cfg.dir {
            Some(d) => {
                let err = |what, source| DirError {
                    dir: d.clone(),
                    what,
                    source,
                };
                std::fs::create_dir_all(d).map_err(|e| err("cannot create it", e))?;
                let mut f = Files {
                    dir: d.clone(),
                    start: tokentap_core::clock::wall_now() / 1_000_000_000,
                    n: 0,
                    max: cfg.max_bytes.max(1),
                    cur: None,
                };
                f.open().map_err(|e| err("cannot write a file in it", e))?;
                Some(f)
            }
            None => None,
        };
        let (tx, rx) = mpsc::channel(CHANNEL);
        let counts = Arc::new(Counts::default());
        let (kept_tx, kept) = watch::channel(Vec::new());
        let c = counts.clone();
        let keep = cfg.keep;
        let asleep = Arc::new(AtomicBool::new(false));
        let a = asleep.clone();
        let thread = std::thread::Builder::new()
            .name("tokentap-records".into())
            .spawn(move || writer_loop(files, keep, rx, c, kept_tx, &a))
            .map_err(|e| DirError {
                dir: cfg.dir.clone().unwrap_or_default(),
                what: "cannot start the writer thread",
                source: e,
            })?
            .thread()
            .clone();
        Ok(Writer {
            tx,
            wake: Arc::new(Wake { thread, asleep }),
            counts,
            kept,
        })
    }

    /// Hands a record over without ever waiting. Returns false if it was dropped.
    pub fn send(&self, r: Box<TurnRecord>) -> bool {
        match self.tx.try_send(Msg::Record(r)) {
            Ok(()) => {
                // Ordered after the record is queued (SeqCst on both sides): either the writer
                // finds the record before it sleeps, or this sees it asleep.
                let w = &self.wake;
                if w.asleep.load(Ordering::SeqCst) && w.asleep.swap(false, Ordering::SeqCst)
                    || self.tx.capacity() + WAKE_AT <= CHANNEL
                {
                    w.now();
                }
                true
            }
            Err(_) => {
                self.counts.dropped.fetch_add(1, Ordering::Relaxed);
                false
            }
        }
    }

    /// Waits until every record sent before this call is written (or failed) and flushed.
    pub async fn flush(&self) {
        let (tx, rx) = oneshot::channel();
        if self.tx.send(Msg::Flush(tx)).await.is_ok() {
            self.wake.now();
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
    /// The open file (core's [`LineFile`]: whole lines only, a failed write cut back).
    cur: Option<LineFile>,
}

impl Files {
    fn path(&self) -> PathBuf {
        self.dir
            .join(format!("records-{}-{}.jsonl", self.start, self.n))
    }

    /// Bytes in the current file (0 before the next one is opened).
    fn len(&self) -> u64 {
        self.cur.as_ref().map_or(0, LineFile::len)
    }

    fn open(&mut self) -> std::io::Result<()> {
        self.cur = Some(LineFile::append(&self.path())?);
        Ok(())
    }

    /// Writes one batch of whole lines, into a new file once the current one reached
    /// `--records-max-bytes`; `Ok` = the records written, `Err` = the records not written (none
    /// of their bytes are in the file).
    fn write_batch(&mut self, batch: &mut Batch) -> Result<u64, (u64, std::io::Error)> {
        if self.cur.as_ref().is_some_and(|f| f.len() >= self.max) {
            self.cur = None;
            self.n += 1;
        }
        if self.cur.is_none() {
            if let Err(e) = self.open() {
                let n = batch.records();
                batch.clear();
                return Err((n, e));
            }
        }
        match self.cur.as_mut() {
            Some(f) => f.write_batch(batch),
            None => Ok(0),
        }
    }
}

/// Rate-limited logging of write failures.
struct FailLog {
    last: Option<Instant>,
    since: u64,
}

impl FailLog {
    fn failed(&mut self, n: u64, e: &std::io::Error, path: &std::path::Path) {
        self.since += n;
        if self.last.is_none_or(|t| t.elapsed() >= LOG_EVERY) {
            tracing::error!(
                records = self.since,
                path = %path.display(),
                "records NOT written: {e} (counted in tokentap_proxy_records_failed_total; /health is degraded)"
            );
            self.last = Some(Instant::now());
            self.since = 0;
        }
    }
}

/// The writer thread's state.
struct Loop {
    files: Option<Files>,
    keep: bool,
    counts: Arc<Counts>,
    kept: watch::Sender<Vec<TurnRecord>>,
    /// Whole lines not yet written.
    batch: Batch,
    /// Records counted with no directory, not yet reported written.
    unfiled: u64,
    log: FailLog,
}

impl Loop {
    fn handle(&mut self, msg: Msg) {
        match msg {
            Msg::Record(r) => {
                if self.files.is_some() {
                    // TurnRecord has only string-keyed maps, so serialising cannot fail; a
                    // failure would still be counted rather than lost silently.
                    if self.batch.push(&*r).is_err() {
                        self.counts.failed.fetch_add(1, Ordering::Relaxed);
                    }
                } else {
                    self.unfiled += 1;
                }
                if self.keep {
                    self.kept.send_modify(|v| v.push(*r));
                }
                // A full batch, or a file that reaches its size with it (rotation is per file,
                // so a file ends within one line of `--records-max-bytes`).
                let rotate = self
                    .files
                    .as_ref()
                    .is_some_and(|f| f.len() + self.batch.bytes() as u64 >= f.max);
                if self.batch.bytes() >= BATCH || rotate {
                    self.write();
                }
            }
            Msg::Flush(ack) => {
                self.write();
                let _ = ack.send(());
            }
        }
    }

    /// Writes the batch: its records become written or failed, never both, never neither.
    fn write(&mut self) {
        let Some(f) = self.files.as_mut() else {
            let n = std::mem::take(&mut self.unfiled);
            self.counts.written.fetch_add(n, Ordering::Relaxed);
            return;
        };
        if self.batch.is_empty() {
            return;
        }
        match f.write_batch(&mut self.batch) {
            Ok(n) => {
                self.counts.written.fetch_add(n, Ordering::Relaxed);
            }
            Err((n, e)) => {
                self.counts.failed.fetch_add(n, Ordering::Relaxed);
                let path = f.path();
                *self.counts.last_error.lock() = Some(format!("{}: {e}", path.display()));
                self.log.failed(n, &e, &path);
            }
        }
    }
}

fn writer_loop(
    files: Option<Files>,
    keep: bool,
    mut rx: mpsc::Receiver<Msg>,
    counts: Arc<Counts>,
    kept: watch::Sender<Vec<TurnRecord>>,
    asleep: &AtomicBool,
) {
    use tokio::sync::mpsc::error::TryRecvError;
    let mut l = Loop {
        files,
        keep,
        counts,
        kept,
        batch: Batch::with_capacity(BATCH),
        unfiled: 0,
        log: FailLog {
            last: None,
            since: 0,
        },
    };
    // When a drain last found records, and whether the writer is ticking (records came faster
    // than one per tick: the data path leaves them for the next tick instead of waking it).
    let mut last_got: Option<Instant> = None;
    let mut ticking = false;
    loop {
        // Drain what is queued, then write once: one write syscall per batch.
        let mut got = false;
        let closed = loop {
            match rx.try_recv() {
                Ok(msg) => {
                    got = true;
                    l.handle(msg);
                }
                Err(TryRecvError::Empty) => break false,
                Err(TryRecvError::Disconnected) => break true,
            }
        };
        l.write();
        if closed {
            return;
        }
        if got {
            let now = Instant::now();
            ticking = ticking || last_got.is_some_and(|t| now - t < TICK);
            last_got = Some(now);
        } else {
            ticking = false;
        }
        if ticking {
            std::thread::park_timeout(TICK);
            continue;
        }
        // Sleep until a record (or a flush, or the last handle's drop) wakes us. A record
        // queued before the flag was up is found by the check after it.
        asleep.store(true, Ordering::SeqCst);
        if rx.is_empty() && !rx.is_closed() {
            std::thread::park();
        }
        asleep.store(false, Ordering::SeqCst);
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
            assert!(w.send(record(i)));
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

    fn record(i: u32) -> Box<TurnRecord> {
        let mut r = TurnRecord::new(Origin::Proxy, Anchor::now());
        r.turn_index = i;
        Box::new(r)
    }

    /// Records reach the writer with no flush: a lone one wakes it from its sleep, a burst is
    /// taken a tick at a time, and a record after the burst (the writer asleep again, or
    /// ticking) arrives too. Without the wake a lone record would wait for a flush forever.
    #[tokio::test]
    async fn records_arrive_without_a_flush_lone_or_in_bursts() {
        let w = Writer::start(WriterConfig {
            keep: true,
            ..WriterConfig::default()
        })
        .unwrap();
        let mut kept = w.subscribe();
        let within = |n: usize| {
            let mut kept = kept.clone();
            async move {
                tokio::time::timeout(Duration::from_secs(10), kept.wait_for(|v| v.len() >= n))
                    .await
                    .unwrap_or_else(|_| panic!("{n} records not kept within 10 s"))
                    .expect("the writer is running")
                    .len()
            }
        };
        assert!(w.send(record(0)));
        assert_eq!(within(1).await, 1);
        for i in 1..=500 {
            assert!(w.send(record(i)));
        }
        assert_eq!(within(501).await, 501);
        assert!(w.send(record(501)));
        assert_eq!(within(502).await, 502);
        w.flush().await;
        assert_eq!(w.counts.written.load(Ordering::Relaxed), 502);
        // The last handle dropped: the writer ends (its end of the watch closes), asleep or not.
        drop(w);
        tokio::time::timeout(Duration::from_secs(10), async {
            while kept.changed().await.is_ok() {}
        })
        .await
        .expect("the writer thread ends when its last handle is dropped");
    }
}
