//! One replica's idle upstream connections for the direct HTTP/1.1 client ([`super::direct`]),
//! newest first: a connection is taken only while younger than the keep-alive and still open
//! (a peek), put back after a clean response, swept when idle too long.

use parking_lot::Mutex;
use std::time::Duration;
use tokentap_core::http1;
use tokio::net::TcpStream;
use tokio::time::Instant;

/// Idle connections kept per replica and thread at most.
const MAX_IDLE: usize = 4096;

type Idle = Vec<(TcpStream, Instant)>;

/// One replica's idle connections, a list per serving thread.
#[derive(Debug)]
pub struct Pool {
    /// Indexed by [`crate::workers::slot`] (0: any other thread).
    idle: Box<[Mutex<Idle>]>,
}

impl Default for Pool {
    fn default() -> Pool {
        Pool::new(1)
    }
}

impl Pool {
    /// A pool for `threads` serving threads (and the others).
    pub fn new(threads: usize) -> Pool {
        Pool {
            idle: (0..=threads).map(|_| Mutex::default()).collect(),
        }
    }

    /// The newest idle connection that is younger than `keepalive` and still open.
    pub(crate) fn take(&self, keepalive: Duration) -> Option<TcpStream> {
        loop {
            let (s, at) = self.lock().pop()?;
            if at.elapsed() < keepalive && http1::idle_connection_open(&s) {
                return Some(s);
            }
        }
    }

    pub(crate) fn put(&self, s: TcpStream) {
        let mut idle = self.lock();
        if idle.len() < MAX_IDLE {
            idle.push((s, Instant::now()));
        }
    }

    /// Closes idle connections older than `keepalive`.
    pub fn sweep(&self, keepalive: Duration) {
        for l in &self.idle {
            l.lock().retain(|(_, at)| at.elapsed() < keepalive);
        }
    }

    /// Idle connections now.
    pub fn idle(&self) -> usize {
        self.idle.iter().map(|l| l.lock().len()).sum()
    }

    /// This thread's list.
    fn lock(&self) -> parking_lot::MutexGuard<'_, Idle> {
        self.idle[crate::workers::slot() % self.idle.len()].lock()
    }
}
