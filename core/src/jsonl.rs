//! Reading JSONL a line at a time, with a bound on one line.
//!
//! Every reader of a JSONL file (datasets, records, the other clients' outputs) goes through
//! [`Lines`], so none holds a whole file: memory is the longest line, at most
//! [`MAX_LINE_BYTES`], plus what the caller keeps of each line. A line past the bound is refused
//! by number instead of read (a file of another kind, a JSON document on one line, a damaged
//! file); a byte that is not UTF-8 is refused with its line and column. Blank lines are skipped,
//! a `\r` before the newline and a UTF-8 byte-order mark at the start of the file are dropped.

use std::fs::File;
use std::io::{self, BufRead, BufReader};
use std::path::Path;

/// The longest line read: 64 MiB. A turn record with every chunk stamped and its content, or
/// a dataset row with a long context, is a few MB at most.
pub const MAX_LINE_BYTES: usize = 64 << 20;

/// Why a line could not be read.
#[derive(Debug, thiserror::Error)]
pub enum LineError {
    /// The file could not be read.
    #[error("cannot read: {0}")]
    Io(#[from] io::Error),
    /// A line past the bound.
    #[error("longer than {} MiB: a line of this file is one record, a few MB at most (a JSON document on one line, a file of another kind, or a damaged file)", .max >> 20)]
    TooLong {
        /// The bound, bytes.
        max: usize,
    },
    /// A line that is not UTF-8.
    #[error("not UTF-8: byte 0x{byte:02x} at column {column} (JSONL is UTF-8 text)")]
    NotUtf8 {
        /// The first byte that is not.
        byte: u8,
        /// Its column (1-based).
        column: usize,
    },
}

/// The non-blank lines of a JSONL stream, with their 1-based numbers.
pub struct Lines<R> {
    reader: R,
    buf: Vec<u8>,
    line: usize,
    max: usize,
}

/// Opens `path` for reading line by line.
pub fn open(path: &Path) -> io::Result<Lines<BufReader<File>>> {
    Ok(Lines::new(BufReader::with_capacity(
        256 << 10,
        File::open(path)?,
    )))
}

impl<R: BufRead> Lines<R> {
    /// Lines of `reader`, each at most the default bound.
    pub fn new(reader: R) -> Self {
        Lines::with_limit(reader, MAX_LINE_BYTES)
    }

    /// Lines of at most `max` bytes.
    pub fn with_limit(reader: R, max: usize) -> Self {
        Lines {
            reader,
            buf: Vec::new(),
            line: 0,
            max,
        }
    }

    /// The number of the line last returned (or that failed).
    pub fn line(&self) -> usize {
        self.line
    }

    /// The next non-blank line, or `None` at the end. An error carries the number of its line
    /// ([`Lines::line`]); reading on after one is not meaningful.
    pub fn next_line(&mut self) -> Result<Option<(usize, &str)>, LineError> {
        // Skip blank lines first, then borrow the line once (a borrow returned from inside the
        // loop would keep `buf` borrowed across iterations).
        let (start, end) = loop {
            if !self.read_raw()? {
                return Ok(None);
            }
            let b = &self.buf[..];
            let start = if self.line == 1 && b.starts_with(b"\xef\xbb\xbf") {
                3
            } else {
                0
            };
            let end = if b.ends_with(b"\r") {
                b.len() - 1
            } else {
                b.len()
            };
            if !b[start.min(end)..end].iter().all(u8::is_ascii_whitespace) {
                break (start, end);
            }
        };
        let bytes = &self.buf[start..end];
        let text = std::str::from_utf8(bytes).map_err(|e| LineError::NotUtf8 {
            byte: bytes[e.valid_up_to()],
            column: e.valid_up_to() + 1,
        })?;
        Ok(Some((self.line, text)))
    }

    /// Reads the next line's bytes (without its newline) into `buf`; `false` at the end.
    fn read_raw(&mut self) -> Result<bool, LineError> {
        self.buf.clear();
        let mut any = false;
        loop {
            let avail = match self.reader.fill_buf() {
                Ok(b) => b,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    self.line += 1;
                    return Err(e.into());
                }
            };
            if avail.is_empty() {
                if any {
                    self.line += 1;
                }
                return Ok(any);
            }
            any = true;
            let (take, done) = match memchr::memchr(b'\n', avail) {
                Some(i) => (i, true),
                None => (avail.len(), false),
            };
            if self.buf.len() + take > self.max {
                self.line += 1;
                return Err(LineError::TooLong { max: self.max });
            }
            let need = self.buf.len() + take;
            if need > self.buf.capacity() {
                // Doubling, but never past the bound: the buffer is at most `max` bytes.
                let cap = (self.buf.capacity() * 2).max(need).min(self.max);
                self.buf.reserve_exact(cap - self.buf.len());
            }
            self.buf.extend_from_slice(&avail[..take]);
            self.reader.consume(take + usize::from(done));
            if done {
                self.line += 1;
                return Ok(true);
            }
        }
    }
}

/// The largest JSON document read whole (a summary, a config, a published percentile file):
/// 64 MiB. Such files are a few KB to a few MB.
pub const MAX_DOCUMENT_BYTES: u64 = 64 << 20;

/// Why a JSON document was not read.
#[derive(Debug, thiserror::Error)]
pub enum DocumentError {
    /// The file could not be read.
    #[error("cannot read: {0}")]
    Io(#[from] io::Error),
    /// A file past the bound, refused unread.
    #[error("{} MB: a file of this kind is a few MB at most (refused unread)", .bytes / 1_000_000)]
    TooBig {
        /// Its size.
        bytes: u64,
    },
}

/// The bytes of a JSON document of at most [`MAX_DOCUMENT_BYTES`], refused by its size before
/// any of it is read.
pub fn read_document(path: &Path) -> Result<Vec<u8>, DocumentError> {
    let f = File::open(path)?;
    let bytes = f.metadata()?.len();
    if bytes > MAX_DOCUMENT_BYTES {
        return Err(DocumentError::TooBig { bytes });
    }
    let mut out = Vec::with_capacity(bytes as usize);
    io::Read::read_to_end(&mut io::Read::take(f, MAX_DOCUMENT_BYTES + 1), &mut out)?;
    if out.len() as u64 > MAX_DOCUMENT_BYTES {
        return Err(DocumentError::TooBig {
            bytes: out.len() as u64,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(input: &[u8], max: usize) -> Result<Vec<(usize, String)>, (usize, String)> {
        let mut l = Lines::with_limit(input, max);
        let mut out = Vec::new();
        loop {
            match l.next_line() {
                Ok(Some((n, s))) => out.push((n, s.to_string())),
                Ok(None) => return Ok(out),
                Err(e) => return Err((l.line(), e.to_string())),
            }
        }
    }

    #[test]
    fn numbers_skip_blank_and_strip_cr_and_bom() {
        let got = all(b"\xef\xbb\xbf{\"a\":1}\r\n\n  \n{\"b\":2}", 100).unwrap();
        assert_eq!(got, vec![(1, "{\"a\":1}".into()), (4, "{\"b\":2}".into())]);
        assert_eq!(all(b"", 100).unwrap(), vec![]);
        assert_eq!(all(b"x\n", 100).unwrap(), vec![(1, "x".into())]);
    }

    #[test]
    fn a_long_line_is_refused_by_number_without_being_held() {
        // A small BufReader buffer: the line arrives in many reads.
        let mut input = b"ok\n".to_vec();
        input.extend(std::iter::repeat_n(b'x', 5_000));
        input.push(b'\n');
        let r = BufReader::with_capacity(64, &input[..]);
        let mut l = Lines::with_limit(r, 1_000);
        assert_eq!(l.next_line().unwrap(), Some((1, "ok")));
        let e = l.next_line().unwrap_err();
        assert_eq!(l.line(), 2);
        assert!(matches!(e, LineError::TooLong { max: 1_000 }), "{e}");
        assert!(l.buf.capacity() <= 1_000, "held {}", l.buf.capacity());
    }

    #[test]
    fn not_utf8_names_the_column() {
        let e = all(b"{}\nab\xffc\n", 100).unwrap_err();
        assert_eq!(e.0, 2);
        assert!(e.1.contains("byte 0xff at column 3"), "{}", e.1);
    }
}
