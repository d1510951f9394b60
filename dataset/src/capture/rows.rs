//! A trajectory's rows while capture reads: each as its JSON line in one anonymous spill file
//! shared by all trajectories, found again at the end by its extents; only the rows of the turn
//! being read are in memory. What capture holds is then its open sessions' state, not the
//! records (docs/usage.md#dataset-capture).
//!
//! ```text
//!  push(row) ──► the previous row, serialized ──► lines ──end_turn──► Spill (append)
//!  end_turn: the last row too; a user row is parked there (a later user message may join it:
//!            read back, changed, written again)     Spill::read(extents) at the end ──► output
//! ```

use serde_json::{Map, Value};
use std::fs::File;
use std::io::{self, BufWriter, Read, Seek, SeekFrom, Write};
use std::path::Path;

/// The spill file: every trajectory's rows as JSON lines, appended after each turn, in no
/// trajectory's order, and the answers set aside until the next turn ([`Spill::put`]).
/// Anonymous (unlinked from the start), so nothing is left behind.
pub(super) struct Spill {
    file: BufWriter<File>,
    /// Bytes written.
    len: u64,
    /// The first write that failed; the later ones are not tried.
    failed: Option<io::Error>,
}

impl Spill {
    /// A new spill file in `dir` (the system's temporary directory when `None`).
    pub(super) fn new(dir: Option<&Path>) -> io::Result<Spill> {
        let file = match dir {
            Some(d) => tempfile::tempfile_in(d)?,
            None => tempfile::tempfile()?,
        };
        Ok(Spill {
            file: BufWriter::with_capacity(256 << 10, file),
            len: 0,
            failed: None,
        })
    }

    /// Appends `bytes`; their extent joins `extents` (one run with the last when they follow
    /// it). Returns where they start.
    fn append(&mut self, bytes: &[u8], extents: &mut Vec<(u64, u64)>) -> u64 {
        let start = self.len;
        if bytes.is_empty() || self.failed.is_some() {
            return start;
        }
        if let Err(e) = self.file.write_all(bytes) {
            self.failed = Some(e);
            return start;
        }
        let end = start + bytes.len() as u64;
        self.len = end;
        match extents.last_mut() {
            Some((_, e)) if *e == start => *e = end,
            _ => extents.push((start, end)),
        }
        start
    }

    /// Sets `v` aside until [`Spill::get`] (an answer that waits for the next turn: only
    /// the extent stays in memory).
    pub(super) fn put(&mut self, v: &Value) -> Stored {
        let text = serde_json::to_vec(v).unwrap_or_default();
        let mut at = Vec::with_capacity(1);
        self.append(&text, &mut at);
        Stored(at.first().copied().unwrap_or_default())
    }

    /// A value [`Spill::put`] set aside (`null` if it cannot be read back: then
    /// [`Spill::failed`] says why).
    pub(super) fn get(&mut self, s: &Stored) -> Value {
        let mut buf = Vec::new();
        if let Err(e) = self.read(&[s.0], &mut buf) {
            self.failed.get_or_insert(e);
        }
        serde_json::from_slice(&buf).unwrap_or_default()
    }

    /// The error of the first write or read that failed, if one did.
    pub(super) fn failed(&mut self) -> Option<io::Error> {
        self.failed.take()
    }

    /// The bytes at `extents`, in order, into `buf` (cleared first); later appends still go to
    /// the end.
    pub(super) fn read(&mut self, extents: &[(u64, u64)], buf: &mut Vec<u8>) -> io::Result<()> {
        self.file.flush()?;
        buf.clear();
        let f = self.file.get_mut();
        for &(start, end) in extents {
            f.seek(SeekFrom::Start(start))?;
            let at = buf.len();
            buf.resize(at + (end - start) as usize, 0);
            f.read_exact(&mut buf[at..])?;
        }
        f.seek(SeekFrom::End(0))?;
        Ok(())
    }
}

/// Where [`Spill::put`] set a value aside.
#[derive(Clone)]
pub(super) struct Stored((u64, u64));

/// The last row: whole while a turn adds to it; between turns, a user row is the last line in
/// the spill, from this offset.
enum Last {
    None,
    Open(Map<String, Value>),
    Parked(u64),
}

/// One trajectory's rows.
pub(super) struct Rows {
    n: usize,
    /// The last row's `role`.
    role: String,
    last: Last,
    /// Finished rows' lines, not yet in the spill.
    lines: String,
    /// Where its finished lines are in the spill, in order.
    extents: Vec<(u64, u64)>,
}

impl Rows {
    pub(super) fn new() -> Rows {
        Rows {
            n: 0,
            role: String::new(),
            last: Last::None,
            lines: String::new(),
            extents: Vec::new(),
        }
    }

    pub(super) fn len(&self) -> usize {
        self.n
    }

    pub(super) fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// The last row's role (`None`: no row yet).
    pub(super) fn last_role(&self) -> Option<&str> {
        (self.n > 0).then_some(self.role.as_str())
    }

    pub(super) fn push(&mut self, row: Map<String, Value>) {
        self.finish_last();
        self.role = row
            .get("role")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        self.last = Last::Open(row);
        self.n += 1;
    }

    /// The last row, to change: a parked one is read back from the spill (its bytes there are
    /// dropped from the extents; it is written again, changed, after this turn).
    pub(super) fn last_mut(&mut self, spill: &mut Spill) -> Option<&mut Map<String, Value>> {
        if let Last::Parked(start) = self.last {
            let end = self.extents.last().map_or(start, |e| e.1);
            let mut buf = Vec::new();
            if let Err(e) = spill.read(&[(start, end)], &mut buf) {
                spill.failed.get_or_insert(e);
            }
            // Our own serialization: it parses back to the same map, key order and numbers kept.
            let row = serde_json::from_slice(&buf).unwrap_or_default();
            match self.extents.last_mut() {
                Some(e) if e.0 < start => e.1 = start,
                _ => {
                    self.extents.pop();
                }
            }
            self.last = Last::Open(row);
        }
        match &mut self.last {
            Last::Open(row) => Some(row),
            _ => None,
        }
    }

    /// After each turn: every row to the spill, a user row parked there (the one row a later
    /// turn may change).
    pub(super) fn end_turn(&mut self, spill: &mut Spill) {
        let parked = match std::mem::replace(&mut self.last, Last::None) {
            Last::Open(row) if self.role == "user" => {
                let at = self.lines.len() as u64;
                self.lines.push_str(&line(&row));
                Some(at)
            }
            Last::Open(row) => {
                self.lines.push_str(&line(&row));
                None
            }
            Last::Parked(p) => {
                self.last = Last::Parked(p);
                None
            }
            Last::None => None,
        };
        let start = spill.append(self.lines.as_bytes(), &mut self.extents);
        // Not kept between turns, nor its capacity (a first row with the tools can be large).
        self.lines = String::new();
        if let Some(at) = parked {
            self.last = Last::Parked(start + at);
        }
    }

    /// Every row in the spill; where their lines are, in order.
    pub(super) fn finish(mut self, spill: &mut Spill) -> Vec<(u64, u64)> {
        self.finish_last();
        spill.append(self.lines.as_bytes(), &mut self.extents);
        self.extents
    }

    fn finish_last(&mut self) {
        match std::mem::replace(&mut self.last, Last::None) {
            Last::Open(row) => self.lines.push_str(&line(&row)),
            Last::None | Last::Parked(_) => {}
        }
    }
}

/// A row as its JSON line (with the newline).
fn line(row: &Map<String, Value>) -> String {
    serde_json::to_string(row).unwrap_or_default() + "\n"
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn row(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap()
    }

    /// A user row parked between turns is read back when the next turn's user message joins
    /// it, and written once, changed, in its place among the trajectory's lines.
    #[test]
    fn a_parked_user_row_is_changed_in_place() {
        let mut spill = Spill::new(None).unwrap();
        let (mut a, mut b) = (Rows::new(), Rows::new());
        a.push(row(json!({"role": "user", "content": "one"})));
        a.end_turn(&mut spill);
        b.push(row(json!({"role": "user", "content": "other"})));
        b.end_turn(&mut spill);
        assert_eq!(a.last_role(), Some("user"));
        let last = a.last_mut(&mut spill).unwrap();
        last.insert("content".into(), "one, two".into());
        a.push(row(json!({"role": "assistant", "content": "ok", "x": 1.5})));
        a.end_turn(&mut spill);
        assert_eq!(a.len(), 2);
        let (ea, eb) = (a.finish(&mut spill), b.finish(&mut spill));
        assert!(spill.failed().is_none());
        let mut text = Vec::new();
        spill.read(&ea, &mut text).unwrap();
        assert_eq!(
            String::from_utf8(text).unwrap(),
            "{\"role\":\"user\",\"content\":\"one, two\"}\n{\"role\":\"assistant\",\"content\":\"ok\",\"x\":1.5}\n"
        );
        let mut text = Vec::new();
        spill.read(&eb, &mut text).unwrap();
        assert_eq!(text, b"{\"role\":\"user\",\"content\":\"other\"}\n");
        let s = spill.put(&json!({"role": "assistant", "content": "later"}));
        assert_eq!(spill.get(&s)["content"], "later");
    }
}
