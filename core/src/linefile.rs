//! The one way records reach disk: JSON lines gathered in a [`Batch`] and appended to a
//! [`LineFile`] in one write. A file holds whole lines only — a write that fails (a full disk, an
//! I/O error) is cut back to where the batch began, so no reader ever meets a torn line — and
//! the caller learns how many records the failed batch held, to count them as not written. The
//! proxy's records (rotated files), the replay's `records.jsonl` and `merge`'s all go through
//! here.

use serde::Serialize;
use std::fs::File;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// An append-only file of whole lines.
pub struct LineFile {
    file: File,
    path: PathBuf,
    /// Bytes known to be whole lines on disk.
    len: u64,
}

impl LineFile {
    /// Creates `path`, empty (an existing file is truncated). The file is written in append
    /// mode, as [`LineFile::append`]'s: after a failed write is cut back, the next write lands
    /// at the new end, not at the offset the partial write left (which would leave a hole of
    /// NUL bytes before it).
    pub fn create(path: &Path) -> io::Result<LineFile> {
        File::create(path)?;
        let file = File::options().append(true).open(path)?;
        Ok(LineFile {
            file,
            path: path.to_path_buf(),
            len: 0,
        })
    }

    /// Opens `path` to append to it (created if missing); what it holds is taken as whole lines.
    pub fn append(path: &Path) -> io::Result<LineFile> {
        let file = File::options().create(true).append(true).open(path)?;
        let len = file.metadata()?.len();
        Ok(LineFile {
            file,
            path: path.to_path_buf(),
            len,
        })
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Bytes written (whole lines).
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Nothing written.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Appends `lines` (whole lines) in one write; on failure the file is cut back to its length
    /// before them and the error returned.
    pub fn write(&mut self, lines: &[u8]) -> io::Result<()> {
        match self.file.write_all(lines) {
            Ok(()) => {
                self.len += lines.len() as u64;
                Ok(())
            }
            Err(e) => {
                if let Err(t) = self.file.set_len(self.len) {
                    // The file may now end in a partial line; say so (a reader skips it).
                    return Err(io::Error::new(
                        e.kind(),
                        format!("{e}; and cutting the partial batch back failed too: {t}"),
                    ));
                }
                Err(e)
            }
        }
    }

    /// Writes `batch` and empties it; `Err` carries how many records it held (none written).
    pub fn write_batch(&mut self, batch: &mut Batch) -> Result<u64, (u64, io::Error)> {
        let n = batch.records;
        let r = self.write(&batch.buf);
        batch.clear();
        r.map(|()| n).map_err(|e| (n, e))
    }
}

/// JSON lines waiting to be written together.
#[derive(Default)]
pub struct Batch {
    buf: Vec<u8>,
    records: u64,
}

impl Batch {
    /// A batch with room for `bytes`.
    pub fn with_capacity(bytes: usize) -> Batch {
        Batch {
            buf: Vec::with_capacity(bytes),
            records: 0,
        }
    }

    /// Adds `value` as one JSON line. On a serialisation error nothing is added.
    pub fn push(&mut self, value: &impl Serialize) -> Result<(), serde_json::Error> {
        let at = self.buf.len();
        match serde_json::to_writer(&mut self.buf, value) {
            Ok(()) => {
                self.buf.push(b'\n');
                self.records += 1;
                Ok(())
            }
            Err(e) => {
                self.buf.truncate(at);
                Err(e)
            }
        }
    }

    /// Records in the batch.
    pub fn records(&self) -> u64 {
        self.records
    }

    /// Bytes in the batch.
    pub fn bytes(&self) -> usize {
        self.buf.len()
    }

    /// No record in the batch.
    pub fn is_empty(&self) -> bool {
        self.records == 0
    }

    /// Empties the batch, keeping its buffer.
    pub fn clear(&mut self) {
        self.buf.clear();
        self.records = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batches_append_whole_lines_and_count_records() {
        let dir = tempfile_dir();
        let p = dir.join("r.jsonl");
        let mut f = LineFile::create(&p).unwrap();
        let mut b = Batch::default();
        b.push(&serde_json::json!({"a": 1})).unwrap();
        b.push(&serde_json::json!({"b": [2]})).unwrap();
        assert_eq!(f.write_batch(&mut b).unwrap(), 2);
        assert!(b.is_empty());
        let mut f = LineFile::append(&p).unwrap();
        assert_eq!(f.len(), 18);
        b.push(&"x").unwrap();
        f.write_batch(&mut b).unwrap();
        assert_eq!(
            std::fs::read_to_string(&p).unwrap(),
            "{\"a\":1}\n{\"b\":[2]}\n\"x\"\n"
        );
        // create truncates, and writes append.
        let mut f = LineFile::create(&p).unwrap();
        b.push(&1).unwrap();
        f.write_batch(&mut b).unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "1\n");
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_value_that_cannot_be_serialised_leaves_the_batch_as_it_was() {
        let mut b = Batch::default();
        b.push(&1).unwrap();
        let mut bad = std::collections::HashMap::new();
        bad.insert(vec![1u8], 1);
        assert!(b.push(&bad).is_err());
        assert_eq!((b.records(), b.bytes()), (1, 2));
    }

    fn tempfile_dir() -> PathBuf {
        let d = std::env::temp_dir().join(format!(
            "tokentap-linefile-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        std::fs::create_dir_all(&d).unwrap();
        d
    }
}
