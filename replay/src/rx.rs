//! A TCP connection whose every read says when its bytes reached this host: the kernel's
//! software receive timestamp (`SO_TIMESTAMPNS`), taken when the packet entered the network
//! stack — before the client's thread was woken, scheduled, or got round to reading it.
//!
//! Why: a client's TTFT should be the server's latency plus the network, not plus the client's
//! own wake-up and queueing. On a shared 2-core VM a cross-process wake-up costs 20–140 µs, and
//! at 512 conversations a ready socket can wait milliseconds for its turn; the kernel stamp does
//! not move with either. The user-space instant of the same read is kept too: the difference is
//! the client's *read lag*, recorded per turn so an overloaded client shows in its output
//! instead of in its latencies.
//!
//! For TCP the timestamp of a read is that of the last segment it consumed (so a read that
//! drains a backlog is stamped with its newest packet: never earlier than the truth). Where
//! the kernel gives no timestamp (the option refused, or a platform without it), the read is
//! stamped in user space right after `recvmsg` returns, and [`RxClock::User`] says so.
//!
//! The timestamp is on `CLOCK_REALTIME`; it is moved to `CLOCK_MONOTONIC` (the clock of every
//! tokentap interval) with both clocks read right after the read: `mono_now − (real_now −
//! kernel_real)`. The two reads are ~30 ns apart, far below what is measured.

use nix::sys::socket::{recvmsg, setsockopt, sockopt, ControlMessageOwned, MsgFlags, RecvMsg};
use std::io::{self, IoSliceMut};
use std::os::fd::AsRawFd;
use std::pin::Pin;
use std::task::{ready, Context, Poll};
use tokentap_core::clock::{self, MonoNs};
use tokentap_core::record::RxClock;
use tokio::io::{AsyncRead, AsyncWrite, Interest, ReadBuf};
use tokio::net::TcpStream;

/// One read.
#[derive(Debug, Clone, Copy)]
pub struct Read {
    /// Bytes read; 0 = the server closed the connection.
    pub n: usize,
    /// When the bytes reached this host (kernel stamp, or `user` without one).
    pub at: MonoNs,
    /// When this thread had them.
    pub user: MonoNs,
    /// Which clock `at` is on.
    pub clock: RxClock,
}

impl Read {
    /// `user − at`: how long the bytes waited for the client.
    pub fn lag(&self) -> u64 {
        self.user.saturating_sub(self.at)
    }
}

/// A connected TCP stream with receive timestamps on.
#[derive(Debug)]
pub struct RxStream {
    stream: TcpStream,
    cmsg: Vec<u8>,
    kernel: bool,
    /// The newest read's stamps.
    last: Option<Read>,
    /// Where the newest read's stamps are published for a reader on another task (HTTP/2:
    /// the connection task reads the socket, the slot reads the stream).
    shared: Option<std::sync::Arc<StampCell>>,
}

/// The newest read's stamps, readable from another task.
#[derive(Debug, Default)]
pub struct StampCell {
    at: std::sync::atomic::AtomicU64,
    kernel: std::sync::atomic::AtomicBool,
}

impl StampCell {
    /// The stamps of the newest read, as a [`Read`] of `n` bytes handed over now.
    pub fn read(&self, n: usize) -> Read {
        use std::sync::atomic::Ordering::Acquire;
        let user = clock::now();
        let at = self.at.load(Acquire);
        if at == 0 {
            return Read {
                n,
                at: user,
                user,
                clock: RxClock::User,
            };
        }
        Read {
            n,
            at,
            user,
            clock: if self.kernel.load(Acquire) {
                RxClock::Kernel
            } else {
                RxClock::User
            },
        }
    }
}

impl RxStream {
    /// Sets `TCP_NODELAY` and asks the kernel for receive timestamps (falling back to user-space
    /// stamps if it refuses; `kernel = false` turns them off on purpose).
    pub fn new(stream: TcpStream, kernel: bool) -> io::Result<Self> {
        stream.set_nodelay(true)?;
        let kernel = kernel && setsockopt(&stream, sockopt::ReceiveTimestampns, &true).is_ok();
        Ok(RxStream {
            stream,
            cmsg: nix::cmsg_space!(nix::sys::time::TimeSpec),
            kernel,
            last: None,
            shared: None,
        })
    }

    /// Publishes every read's stamps to `cell` from now on.
    pub fn share(&mut self, cell: std::sync::Arc<StampCell>) {
        self.shared = Some(cell);
    }

    /// Whether reads carry the kernel's timestamp.
    pub fn kernel(&self) -> bool {
        self.kernel
    }

    /// The socket.
    pub fn stream(&mut self) -> &mut TcpStream {
        &mut self.stream
    }

    /// Reads what is there (waiting for something), stamped.
    pub async fn read(&mut self, buf: &mut [u8]) -> io::Result<Read> {
        loop {
            self.stream.readable().await?;
            match self.try_read_stamped(buf) {
                Ok(r) => return Ok(r),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                Err(e) => return Err(e),
            }
        }
    }

    /// The stamp of the newest read, for a layer that reads through [`AsyncRead`] (TLS): the
    /// arrival of the last ciphertext the plaintext it returned depended on.
    pub fn last_read(&self) -> Option<Read> {
        self.last
    }

    /// One non-blocking `recvmsg` with its stamps (`WouldBlock` when nothing is there).
    fn try_read_stamped(&mut self, buf: &mut [u8]) -> io::Result<Read> {
        let fd = self.stream.as_raw_fd();
        let cmsg = &mut self.cmsg;
        let (n, kernel_real) = self.stream.try_io(Interest::READABLE, || {
            let mut iov = [IoSliceMut::new(buf)];
            let msg: RecvMsg<'_, '_, ()> =
                recvmsg(fd, &mut iov, Some(cmsg.as_mut_slice()), MsgFlags::empty())
                    .map_err(io::Error::from)?;
            let mut kernel_real = None;
            if let Ok(cmsgs) = msg.cmsgs() {
                for c in cmsgs {
                    if let ControlMessageOwned::ScmTimestampns(ts) = c {
                        kernel_real =
                            Some(ts.tv_sec() as u64 * 1_000_000_000 + ts.tv_nsec() as u64);
                    }
                }
            }
            Ok((msg.bytes, kernel_real))
        })?;
        let user = clock::now();
        let (mut at, clock) = match kernel_real {
            Some(k) => {
                let real = clock::wall_now();
                (user.saturating_sub(real.saturating_sub(k)), RxClock::Kernel)
            }
            None => (user, RxClock::User),
        };
        // TCP delivers in order: a read's newest segment is never older than the previous
        // read's. Moving the stamp between clocks jitters by tens of ns, which could otherwise
        // date two reads of packets that arrived together in the wrong order (and make a
        // zero-gap TPOT negative).
        if let Some(prev) = self.last {
            at = at.max(prev.at);
        }
        let r = Read { n, at, user, clock };
        self.last = Some(r);
        if let Some(c) = &self.shared {
            use std::sync::atomic::Ordering::Release;
            c.kernel.store(clock == RxClock::Kernel, Release);
            c.at.store(at, Release);
        }
        Ok(r)
    }

    /// True when a kept-alive connection is still usable
    /// ([`tokentap_core::http1::idle_connection_open`]).
    pub fn idle_ok(&self) -> bool {
        tokentap_core::http1::idle_connection_open(&self.stream)
    }
}

/// Reads through the stamping `recvmsg` (each read's stamps in [`RxStream::last_read`]); writes
/// go straight to the socket. This is what a TLS layer wraps.
impl AsyncRead for RxStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        loop {
            ready!(this.stream.poll_read_ready(cx))?;
            match this.try_read_stamped(buf.initialize_unfilled()) {
                Ok(r) => {
                    buf.advance(r.n);
                    return Poll::Ready(Ok(()));
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
    }
}

impl AsyncWrite for RxStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_shutdown(cx)
    }
}

/// Keeps the kernel's receive timestamping switched on for as long as it lives, and returns
/// once it is in effect.
///
/// Linux switches software receive timestamps on globally when the first socket asks for them,
/// but through deferred work: packets that arrive in the next moments carry no stamp, and when
/// the last such socket closes they are switched off again. A run that opens its first
/// connection cold would see its first responses stamped in user space. This guard holds a
/// loopback TCP pair with `SO_TIMESTAMPNS` on, and pings one byte across it until a read
/// carries a kernel stamp (bounded: after `limit` it gives up and the run falls back to user
/// stamps where needed, which the records say).
#[derive(Debug)]
pub struct KernelStamps {
    _pair: Option<(RxStream, TcpStream)>,
    /// The kernel stamped the probe.
    pub active: bool,
}

impl KernelStamps {
    /// Turns kernel receive timestamps on for this process's sockets and probes that the kernel stamps (within `limit`).
    pub async fn enable(limit: std::time::Duration) -> KernelStamps {
        match Self::probe(limit).await {
            Ok((pair, active)) => KernelStamps {
                _pair: Some(pair),
                active,
            },
            Err(e) => {
                tracing::warn!(error = %e, "kernel receive timestamps unavailable; stamping in user space");
                KernelStamps {
                    _pair: None,
                    active: false,
                }
            }
        }
    }

    async fn probe(limit: std::time::Duration) -> io::Result<((RxStream, TcpStream), bool)> {
        use tokio::io::AsyncWriteExt;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let (client, accepted) = tokio::join!(TcpStream::connect(addr), listener.accept());
        let mut rx = RxStream::new(accepted?.0, true)?;
        let mut tx = client?;
        tx.set_nodelay(true)?;
        let deadline = tokio::time::Instant::now() + limit;
        let mut b = [0u8; 1];
        loop {
            tx.write_all(b"p").await?;
            let r = rx.read(&mut b).await?;
            if r.n == 0 {
                return Err(io::ErrorKind::UnexpectedEof.into());
            }
            if r.clock == RxClock::Kernel {
                return Ok(((rx, tx), true));
            }
            if !rx.kernel() || tokio::time::Instant::now() >= deadline {
                return Ok(((rx, tx), false));
            }
            // The kernel's deferred switch runs on a worker thread: give it the CPU.
            tokio::task::yield_now().await;
        }
    }
}
