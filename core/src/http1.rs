//! The HTTP/1.1 client pieces that the replay client and the proxy's upstream side share: a
//! request head writer, a response head parser (over `httparse`) and an incremental body
//! decoder (`Content-Length`, chunked, or to EOF).
//!
//! Why not hyper's client: both read their socket themselves. The replay client so that every
//! read carries the kernel's receive timestamp; the proxy so that the task writing a chunk to
//! its client is the task that read it from upstream (hyper's connection task hands body frames
//! over a channel, one wake-up more per chunk). What is left to write is small and closed: one
//! request per exchange, no pipelining, no upgrades.
//!
//! The decoder hands out slices of the caller's read buffer (no copy, no allocation) and is
//! lenient where RFC 9112 allows a recipient to be (bare `\n` line ends, chunk extensions,
//! trailers are skipped).
//!
//! [`Broke`] is the one rule both clients apply to a kept-alive connection that breaks under a
//! request: sent again once on a new connection when no response byte came back.

use http::header::{CONNECTION, CONTENT_LENGTH, CONTENT_TYPE, TRANSFER_ENCODING};
use http::Request;

/// Largest response head accepted.
pub const MAX_HEAD: usize = 64 * 1024;
/// Most response headers accepted.
const MAX_HEADERS: usize = 100;

/// Where an HTTP/1.1 attempt broke: the one stale-connection rule both clients (the proxy's
/// direct client and the replay's) apply to a kept-alive connection.
///
/// A server may close an idle kept-alive connection just as a request goes into it; the
/// request then fails while being written, or the first read sees EOF or a reset, before any
/// byte of a response. Nothing was answered, so the request is sent again, once, on a new
/// connection. After a response byte, nothing is ever resent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Broke {
    /// Writing the request, or before the first response byte.
    BeforeResponse,
    /// After response bytes arrived.
    InResponse,
}

impl Broke {
    /// Most times one request is sent again after a stale connection.
    pub const MAX_RESENDS: u32 = 1;

    /// Classifies a failure by how many response bytes had been read when it happened.
    pub fn after(response_bytes: usize) -> Broke {
        if response_bytes == 0 {
            Broke::BeforeResponse
        } else {
            Broke::InResponse
        }
    }

    /// The request may be sent again on a new connection: it broke before any response byte,
    /// on a connection that was reused (a new one that fails so is the server's answer), and it
    /// has not been resent yet.
    pub fn resend(self, reused: bool, resent: u32) -> bool {
        self == Broke::BeforeResponse && reused && resent < Broke::MAX_RESENDS
    }
}

/// A kept-alive connection is still usable when a non-blocking peek finds nothing to read: no
/// close, no reset, no bytes the server should not have sent. A real syscall every time, so a
/// close that arrived while the connection sat idle is seen before a request is written into it.
pub fn idle_connection_open(conn: impl std::os::fd::AsFd) -> bool {
    use rustix::net::{recv, RecvFlags};
    let mut b = [0u8; 1];
    matches!(
        recv(conn, &mut b[..], RecvFlags::PEEK | RecvFlags::DONTWAIT),
        Err(rustix::io::Errno::AGAIN)
    )
}

/// Appends the request line and headers of `req` (and the blank line) to `out`.
pub fn write_head<B>(req: &Request<B>, out: &mut Vec<u8>) {
    let path = req
        .uri()
        .path_and_query()
        .map(|p| p.as_str())
        .unwrap_or("/");
    write_request_line(req.method().as_str(), path, out);
    for (name, value) in req.headers() {
        write_header(name.as_str().as_bytes(), value.as_bytes(), out);
    }
    out.extend_from_slice(b"\r\n");
}

/// Appends `METHOD PATH HTTP/1.1\r\n`.
pub fn write_request_line(method: &str, path: &str, out: &mut Vec<u8>) {
    out.extend_from_slice(method.as_bytes());
    out.push(b' ');
    out.extend_from_slice(path.as_bytes());
    out.extend_from_slice(b" HTTP/1.1\r\n");
}

/// Appends `name: value\r\n`.
pub fn write_header(name: &[u8], value: &[u8], out: &mut Vec<u8>) {
    out.extend_from_slice(name);
    out.extend_from_slice(b": ");
    out.extend_from_slice(value);
    out.extend_from_slice(b"\r\n");
}

/// Linux takes at most this many slices per `writev` (`IOV_MAX`).
pub const IOV_MAX: usize = 1024;

/// Writes every part with as few `writev` calls as the kernel allows (at most [`IOV_MAX`]
/// slices each; empty parts skipped).
pub async fn write_all_vectored<W>(w: &mut W, parts: &[&[u8]]) -> std::io::Result<()>
where
    W: tokio::io::AsyncWrite + Unpin + ?Sized,
{
    use std::io::IoSlice;
    use tokio::io::AsyncWriteExt;
    let mut slices: Vec<IoSlice<'_>> = Vec::with_capacity(parts.len().min(IOV_MAX));
    let mut next = 0;
    while next < parts.len() {
        slices.clear();
        while next < parts.len() && slices.len() < IOV_MAX {
            if !parts[next].is_empty() {
                slices.push(IoSlice::new(parts[next]));
            }
            next += 1;
        }
        let mut bufs = &mut slices[..];
        while !bufs.is_empty() {
            let n = w.write_vectored(bufs).await?;
            if n == 0 {
                return Err(std::io::ErrorKind::WriteZero.into());
            }
            IoSlice::advance_slices(&mut bufs, n);
        }
    }
    Ok(())
}

/// How the response body is delimited (RFC 9112 §6.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// No body (1xx, 204, 304).
    Empty,
    /// `Content-Length`.
    Length(u64),
    /// `Transfer-Encoding: chunked`.
    Chunked,
    /// Until the server closes the connection.
    Close,
}

/// A parsed response head.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Head {
    /// The status code.
    pub status: u16,
    /// `Content-Type: application/json…`
    pub json: bool,
    /// How its body is framed.
    pub framing: Framing,
    /// The connection may carry another request after this response.
    pub keep_alive: bool,
}

/// A response head that could not be understood.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct HeadError(pub String);

/// Parses a response head at the start of `buf`. `Ok(None)`: incomplete, read more.
/// `Ok(Some((len, head)))`: the head is `buf[..len]`.
pub fn parse_head(buf: &[u8]) -> Result<Option<(usize, Head)>, HeadError> {
    parse_head_with(buf, |_, _| {})
}

/// [`parse_head`], also handing every header (name, value) to `each` in wire order.
pub fn parse_head_with(
    buf: &[u8],
    mut each: impl FnMut(&str, &[u8]),
) -> Result<Option<(usize, Head)>, HeadError> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut resp = httparse::Response::new(&mut headers);
    let len = match resp.parse(buf) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) if buf.len() >= MAX_HEAD => {
            return Err(HeadError(format!(
                "response head larger than {MAX_HEAD} bytes"
            )))
        }
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(e) => return Err(HeadError(format!("malformed response head: {e}"))),
    };
    let status = resp.code.unwrap_or(0);
    let http10 = resp.version == Some(0);
    let mut json = false;
    let mut chunked = false;
    let mut length: Option<u64> = None;
    let mut close = http10;
    for h in resp.headers.iter() {
        let v = h.value;
        each(h.name, v);
        if h.name.eq_ignore_ascii_case(CONTENT_TYPE.as_str()) {
            json = starts_with_ignore_case(v, b"application/json");
        } else if h.name.eq_ignore_ascii_case(TRANSFER_ENCODING.as_str()) {
            // Chunked must be the last coding (RFC 9112 §6.1); any other last coding means the
            // body runs to the end of the connection.
            let last = v.rsplit(|&b| b == b',').next().unwrap_or(v);
            chunked = trim(last).eq_ignore_ascii_case(b"chunked");
            if !chunked {
                close = true;
            }
        } else if h.name.eq_ignore_ascii_case(CONTENT_LENGTH.as_str()) {
            let n = std::str::from_utf8(trim(v))
                .ok()
                .and_then(|s| s.parse::<u64>().ok())
                .ok_or_else(|| {
                    HeadError(format!(
                        "Content-Length {:?} is not a number",
                        String::from_utf8_lossy(v)
                    ))
                })?;
            if length.is_some_and(|l| l != n) {
                return Err(HeadError("conflicting Content-Length headers".into()));
            }
            length = Some(n);
        } else if h.name.eq_ignore_ascii_case(CONNECTION.as_str()) {
            for token in v.split(|&b| b == b',') {
                let t = trim(token);
                if t.eq_ignore_ascii_case(b"close") {
                    close = true;
                } else if t.eq_ignore_ascii_case(b"keep-alive") && http10 {
                    close = false;
                }
            }
        }
    }
    let framing = if (100..200).contains(&status) || status == 204 || status == 304 {
        Framing::Empty
    } else if chunked {
        Framing::Chunked
    } else if close && length.is_none() {
        Framing::Close
    } else if let Some(n) = length {
        Framing::Length(n)
    } else {
        Framing::Close
    };
    Ok(Some((
        len,
        Head {
            status,
            json,
            framing,
            keep_alive: !close && framing != Framing::Close,
        },
    )))
}

fn trim(v: &[u8]) -> &[u8] {
    v.trim_ascii()
}

fn starts_with_ignore_case(v: &[u8], prefix: &[u8]) -> bool {
    v.len() >= prefix.len() && v[..prefix.len()].eq_ignore_ascii_case(prefix)
}

/// A body that could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct BodyError(pub String);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Chunk {
    /// Reading the hex size; `digits` so far.
    Size {
        value: u64,
        digits: u8,
    },
    /// Skipping a chunk extension up to the line end.
    Ext {
        value: u64,
    },
    /// Saw `\r` after the size line.
    SizeLf {
        value: u64,
    },
    Data {
        left: u64,
    },
    DataCr,
    DataLf,
    /// After the last chunk: at the start of a trailer line (or the final blank line).
    TrailerStart,
    TrailerLine,
    TrailerLf {
        end: bool,
    },
    /// The final line end of the message.
    End,
}

/// Incremental body decoder for one response.
#[derive(Debug, Clone)]
pub struct Decoder {
    state: State,
}

#[derive(Debug, Clone, Copy)]
enum State {
    Length(u64),
    Chunked(Chunk),
    Close,
    Done,
}

impl Decoder {
    /// A decoder of a body framed so.
    pub fn new(framing: Framing) -> Self {
        let state = match framing {
            Framing::Empty | Framing::Length(0) => State::Done,
            Framing::Length(n) => State::Length(n),
            Framing::Chunked => State::Chunked(Chunk::Size {
                value: 0,
                digits: 0,
            }),
            Framing::Close => State::Close,
        };
        Decoder { state }
    }

    /// The whole body has been decoded.
    pub fn is_done(&self) -> bool {
        matches!(self.state, State::Done)
    }

    /// How many bytes to read next so that a read does not run past the current piece of the
    /// body: the rest of the current chunk (data and its CRLF), a chunk-size line, or the rest
    /// of a `Content-Length` body. `None` when unbounded (to EOF) or done.
    pub fn piece_left(&self) -> Option<u64> {
        match self.state {
            State::Length(left) => Some(left),
            State::Chunked(Chunk::Data { left }) => Some(left + 2),
            State::Chunked(Chunk::DataCr) => Some(2),
            State::Chunked(Chunk::DataLf) => Some(1),
            // A size line: `1a2\r\n` is 5 bytes; a longer one takes another read.
            State::Chunked(_) => Some(5),
            State::Close | State::Done => None,
        }
    }

    /// Body bytes still to come when the length is known (`Content-Length`, or done: 0).
    pub fn length_left(&self) -> Option<u64> {
        match self.state {
            State::Length(left) => Some(left),
            State::Done => Some(0),
            _ => None,
        }
    }

    /// The body runs until the server closes the connection.
    pub fn until_close(&self) -> bool {
        matches!(self.state, State::Close)
    }

    /// Decodes framing bytes of `input` up to and including at most one piece of body data.
    /// Returns how many bytes of `input` were used and where the data piece is in `input`
    /// (`None`: `input` held framing only, or the body is done). Lets a caller hand out each
    /// piece as a slice of its own buffer, one at a time.
    pub fn next_piece(
        &mut self,
        input: &[u8],
    ) -> Result<(usize, Option<std::ops::Range<usize>>), BodyError> {
        let mut i = 0;
        while i < input.len() {
            match &mut self.state {
                State::Done => break,
                State::Close => return Ok((input.len(), Some(i..input.len()))),
                State::Length(left) => {
                    let take = (*left).min((input.len() - i) as u64) as usize;
                    *left -= take as u64;
                    if *left == 0 {
                        self.state = State::Done;
                    }
                    return Ok((i + take, Some(i..i + take)));
                }
                State::Chunked(c) => {
                    if let Chunk::Data { left } = c {
                        let take = (*left).min((input.len() - i) as u64) as usize;
                        *left -= take as u64;
                        if *left == 0 {
                            *c = Chunk::DataCr;
                        }
                        return Ok((i + take, Some(i..i + take)));
                    }
                    let b = input[i];
                    i += 1;
                    *c = step(*c, b)?;
                    if *c == Chunk::End {
                        self.state = State::Done;
                    }
                }
            }
        }
        Ok((i, None))
    }

    /// Decodes `input`, handing each piece of body data to `data` (slices of `input`). Returns
    /// how many bytes of `input` belonged to this response; the rest (if any) came after its end.
    pub fn feed<'a>(
        &mut self,
        input: &'a [u8],
        mut data: impl FnMut(&'a [u8]),
    ) -> Result<usize, BodyError> {
        let mut used = 0;
        while used < input.len() {
            let (n, piece) = self.next_piece(&input[used..])?;
            if let Some(r) = piece {
                data(&input[used + r.start..used + r.end]);
            }
            if n == 0 {
                break; // done
            }
            used += n;
        }
        Ok(used)
    }
}

/// One byte of chunked framing (everything but chunk data).
fn step(c: Chunk, b: u8) -> Result<Chunk, BodyError> {
    let bad = |what: &str| BodyError(format!("malformed chunked body: {what} (byte {b:#04x})"));
    Ok(match c {
        Chunk::Size { value, digits } => match b {
            b'0'..=b'9' | b'a'..=b'f' | b'A'..=b'F' => {
                if digits >= 15 {
                    return Err(bad("chunk size too large"));
                }
                let d = (b as char).to_digit(16).unwrap_or(0) as u64;
                Chunk::Size {
                    value: value * 16 + d,
                    digits: digits + 1,
                }
            }
            _ if digits == 0 => return Err(bad("expected a hex chunk size")),
            b';' | b' ' | b'\t' => Chunk::Ext { value },
            b'\r' => Chunk::SizeLf { value },
            b'\n' => after_size(value),
            _ => return Err(bad("unexpected character in chunk size")),
        },
        Chunk::Ext { value } => match b {
            b'\r' => Chunk::SizeLf { value },
            b'\n' => after_size(value),
            _ => Chunk::Ext { value },
        },
        Chunk::SizeLf { value } => match b {
            b'\n' => after_size(value),
            _ => return Err(bad("expected LF after chunk size")),
        },
        Chunk::DataCr => match b {
            b'\r' => Chunk::DataLf,
            b'\n' => Chunk::Size {
                value: 0,
                digits: 0,
            },
            _ => return Err(bad("expected CRLF after chunk data")),
        },
        Chunk::DataLf => match b {
            b'\n' => Chunk::Size {
                value: 0,
                digits: 0,
            },
            _ => return Err(bad("expected LF after chunk data")),
        },
        Chunk::TrailerStart => match b {
            b'\r' => Chunk::TrailerLf { end: true },
            b'\n' => Chunk::End,
            _ => Chunk::TrailerLine,
        },
        Chunk::TrailerLine => match b {
            b'\r' => Chunk::TrailerLf { end: false },
            b'\n' => Chunk::TrailerStart,
            _ => Chunk::TrailerLine,
        },
        Chunk::TrailerLf { end } => match (b, end) {
            (b'\n', true) => Chunk::End,
            (b'\n', false) => Chunk::TrailerStart,
            _ => return Err(bad("expected LF in trailer section")),
        },
        Chunk::Data { .. } | Chunk::End => c,
    })
}

fn after_size(value: u64) -> Chunk {
    if value == 0 {
        Chunk::TrailerStart
    } else {
        Chunk::Data { left: value }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn vectored_writes_cover_more_parts_than_iov_max() {
        // A real socket: writev refuses more than IOV_MAX slices, so the parts go in batches.
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let (mut tx, accepted) = tokio::join!(tokio::net::TcpStream::connect(addr), l.accept());
        let (mut rx, _) = accepted.unwrap();
        let owned: Vec<Vec<u8>> = (0..3 * IOV_MAX + 7)
            .map(|i| {
                if i % 5 == 0 {
                    Vec::new()
                } else {
                    format!("{i},").into_bytes()
                }
            })
            .collect();
        let parts: Vec<&[u8]> = owned.iter().map(|p| &p[..]).collect();
        let want: Vec<u8> = owned.concat();
        let reader = tokio::spawn(async move {
            use tokio::io::AsyncReadExt;
            let mut got = Vec::new();
            rx.read_to_end(&mut got).await.unwrap();
            got
        });
        write_all_vectored(tx.as_mut().unwrap(), &parts)
            .await
            .unwrap();
        drop(tx);
        assert_eq!(reader.await.unwrap(), want);
    }

    fn head(s: &str) -> Head {
        parse_head(s.as_bytes()).unwrap().unwrap().1
    }

    #[test]
    fn head_framing_and_keep_alive() {
        let h = head("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n");
        assert_eq!(h.framing, Framing::Chunked);
        assert!(h.keep_alive && !h.json && h.status == 200);
        let h = head("HTTP/1.1 200 OK\r\ncontent-type: Application/JSON; charset=utf-8\r\ncontent-length: 12\r\n\r\n");
        assert_eq!(h.framing, Framing::Length(12));
        assert!(h.json && h.keep_alive);
        let h = head("HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n");
        assert_eq!(h.framing, Framing::Close);
        assert!(!h.keep_alive);
        let h = head("HTTP/1.0 200 OK\r\nContent-Length: 3\r\n\r\n");
        assert!(!h.keep_alive);
        let h = head("HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 3\r\n\r\n");
        assert!(h.keep_alive);
        let h = head("HTTP/1.1 204 No Content\r\n\r\n");
        assert_eq!(h.framing, Framing::Empty);
        let h = head("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n");
        assert_eq!(h.framing, Framing::Close);
        let h = head("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n");
        assert_eq!(h.framing, Framing::Chunked);
        // No length, no chunking on HTTP/1.1: the body runs to close.
        assert_eq!(head("HTTP/1.1 200 OK\r\n\r\n").framing, Framing::Close);
    }

    #[test]
    fn head_partial_and_errors() {
        assert_eq!(parse_head(b"HTTP/1.1 200 OK\r\nContent-Le").unwrap(), None);
        let (n, _) = parse_head(b"HTTP/1.1 200 OK\r\n\r\nbody").unwrap().unwrap();
        assert_eq!(n, 19);
        let e = parse_head(b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n").unwrap_err();
        assert!(e.0.contains("Content-Length \"x\""), "{e}");
        let e = parse_head(b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n")
            .unwrap_err();
        assert!(e.0.contains("conflicting"), "{e}");
        assert!(parse_head(b"NOT HTTP\r\n\r\n").is_err());
        let big = format!("HTTP/1.1 200 OK\r\nX: {}", "a".repeat(MAX_HEAD));
        assert!(parse_head(big.as_bytes()).unwrap_err().0.contains("larger"));
    }

    #[test]
    fn request_head() {
        let req = Request::post("http://h:1/v1/chat/completions?x=1")
            .header("host", "h:1")
            .header("x-session-id", "c1")
            .body(())
            .unwrap();
        let mut out = Vec::new();
        write_head(&req, &mut out);
        assert_eq!(
            out,
            b"POST /v1/chat/completions?x=1 HTTP/1.1\r\nhost: h:1\r\nx-session-id: c1\r\n\r\n"
        );
    }

    fn decode_split(framing: Framing, wire: &[u8], split: usize) -> (Vec<u8>, usize, bool) {
        let mut d = Decoder::new(framing);
        let mut out = Vec::new();
        let mut used = 0;
        for part in [&wire[..split], &wire[split..]] {
            if d.is_done() {
                break;
            }
            used += d.feed(part, |s| out.extend_from_slice(s)).unwrap();
        }
        (out, used, d.is_done())
    }

    #[test]
    fn chunked_at_every_split_point() {
        let wire =
            b"5;ext=1\r\nhello\r\n1A\r\nabcdefghijklmnopqrstuvwxyz\r\n0\r\nX-T: 1\r\n\r\nNEXT";
        for split in 0..=wire.len() {
            let (out, used, done) = decode_split(Framing::Chunked, wire, split);
            assert_eq!(out, b"helloabcdefghijklmnopqrstuvwxyz", "split {split}");
            assert!(done, "split {split}");
            assert_eq!(used, wire.len() - 4, "split {split}");
        }
        // Bare LF line ends.
        let (out, _, done) = decode_split(Framing::Chunked, b"3\nabc\n0\n\n", 4);
        assert_eq!((out.as_slice(), done), (&b"abc"[..], true));
    }

    #[test]
    fn chunked_incomplete_and_malformed() {
        let (out, _, done) = decode_split(Framing::Chunked, b"5\r\nhel", 2);
        assert_eq!((out.as_slice(), done), (&b"hel"[..], false));
        for bad in [
            &b"zz\r\n"[..],
            b"5\r\nhelloXX",
            b"\r\n",
            b"fffffffffffffffff\r\n",
        ] {
            let mut d = Decoder::new(Framing::Chunked);
            assert!(
                d.feed(bad, |_| {}).is_err(),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    /// Decodes `wire` arriving in two reads with `next_piece`, as the proxy does: unused bytes
    /// stay in the buffer, the next read is appended. Returns the pieces and the bytes used.
    fn pieces_split(framing: Framing, wire: &[u8], split: usize) -> (Vec<Vec<u8>>, usize, bool) {
        let mut d = Decoder::new(framing);
        let mut buf: Vec<u8> = Vec::new();
        let mut pieces = Vec::new();
        let mut used = 0;
        for part in [&wire[..split], &wire[split..]] {
            buf.extend_from_slice(part);
            while !d.is_done() {
                let (n, piece) = d.next_piece(&buf).unwrap();
                if let Some(r) = piece {
                    pieces.push(buf[r].to_vec());
                }
                buf.drain(..n);
                used += n;
                if n == 0 {
                    break;
                }
            }
        }
        (pieces, used, d.is_done())
    }

    #[test]
    fn next_piece_one_at_a_time_at_every_split_point() {
        let wire =
            b"5;ext=1\r\nhello\r\n1A\r\nabcdefghijklmnopqrstuvwxyz\r\n0\r\nX-T: 1\r\n\r\nNEXT";
        for split in 0..=wire.len() {
            let (pieces, used, done) = pieces_split(Framing::Chunked, wire, split);
            assert_eq!(
                pieces.concat(),
                b"helloabcdefghijklmnopqrstuvwxyz",
                "split {split}"
            );
            assert!(done && used == wire.len() - 4, "split {split}");
            // Unsplit input yields exactly one piece per chunk.
            if split == 0 || split == wire.len() {
                assert_eq!(pieces.len(), 2, "split {split}");
            }
        }
        let (pieces, used, done) = pieces_split(Framing::Length(5), b"helloEXTRA", 3);
        assert_eq!((pieces.concat(), used, done), (b"hello".to_vec(), 5, true));
        let (pieces, _, done) = pieces_split(Framing::Close, b"all of it", 3);
        assert_eq!(
            (pieces, done),
            (vec![b"all".to_vec(), b" of it".to_vec()], false)
        );
        assert!(Decoder::new(Framing::Chunked)
            .next_piece(b"zz\r\n")
            .is_err());
    }

    #[test]
    fn length_and_close() {
        let (out, used, done) = decode_split(Framing::Length(5), b"helloEXTRA", 3);
        assert_eq!((out.as_slice(), used, done), (&b"hello"[..], 5, true));
        let (out, _, done) = decode_split(Framing::Close, b"all of it", 3);
        assert_eq!((out.as_slice(), done), (&b"all of it"[..], false));
        assert!(Decoder::new(Framing::Empty).is_done());
        assert!(Decoder::new(Framing::Length(0)).is_done());
    }

    #[test]
    fn only_a_reused_connection_that_broke_before_the_response_is_resent_once() {
        assert_eq!(Broke::after(0), Broke::BeforeResponse);
        assert_eq!(Broke::after(1), Broke::InResponse);
        assert!(Broke::BeforeResponse.resend(true, 0));
        assert!(!Broke::BeforeResponse.resend(true, 1));
        assert!(!Broke::BeforeResponse.resend(false, 0));
        assert!(!Broke::InResponse.resend(true, 0));
    }
}
