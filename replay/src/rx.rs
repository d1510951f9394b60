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

use nix::sys::socket::{
    recv, recvmsg, setsockopt, sockopt, ControlMessageOwned, MsgFlags, RecvMsg,
};
use std::io::{self, IoSliceMut};
use std::os::fd::AsRawFd;
use tokentap_core::clock::{self, MonoNs};
use tokentap_core::record::RxClock;
use tokio::io::Interest;
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
        })
    }

    /// Whether reads carry the kernel's timestamp.
    pub fn kernel(&self) -> bool {
        self.kernel
    }

    pub fn stream(&mut self) -> &mut TcpStream {
        &mut self.stream
    }

    /// Reads what is there (waiting for something), stamped.
    pub async fn read(&mut self, buf: &mut [u8]) -> io::Result<Read> {
        let fd = self.stream.as_raw_fd();
        loop {
            self.stream.readable().await?;
            let cmsg = &mut self.cmsg;
            let got = self.stream.try_io(Interest::READABLE, || {
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
            });
            match got {
                Ok((n, kernel_real)) => {
                    let user = clock::now();
                    let (at, clock) = match kernel_real {
                        Some(k) => {
                            let real = clock::wall_now();
                            (user.saturating_sub(real.saturating_sub(k)), RxClock::Kernel)
                        }
                        None => (user, RxClock::User),
                    };
                    return Ok(Read { n, at, user, clock });
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                Err(e) => return Err(e),
            }
        }
    }

    /// True when a kept-alive connection is still usable: nothing to read and no EOF/error
    /// pending. Always a real (non-blocking, peeking) syscall, so a close that arrived while the
    /// slot was idle is seen before a request is written into it.
    pub fn idle_ok(&self) -> bool {
        let mut b = [0u8; 1];
        matches!(
            recv(
                self.stream.as_raw_fd(),
                &mut b,
                MsgFlags::MSG_PEEK | MsgFlags::MSG_DONTWAIT
            ),
            Err(nix::errno::Errno::EAGAIN)
        )
    }
}
