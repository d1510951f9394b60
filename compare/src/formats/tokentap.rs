//! tokentap replay `records.jsonl`: one [`TurnRecord`] (origin `replay`) per client turn.
//!
//! Session = `conversation_id` (what the replay sent in `X-Session-ID`), order = `turn_index`,
//! start = `start_mono_ns` (or its wall-clock anchor with `--clock wall`, for a replay on another
//! host). Values are computed exactly as for the wire ([`crate::wire::values_of`]), so our own
//! client is held to the same definitions it claims. `aborted` turns were never sent and are not
//! turns on the wire: they are skipped and counted in a note.

use super::json::{lines_of, object_line, Source};
use crate::client::{ClientRun, ClientTurn, Clock};
use crate::error::CompareError;
use std::path::Path;
use tokentap_core::record::{Status, TurnRecord};

/// Reads a tokentap replay's records (`records.jsonl`) from `text`.
pub fn parse(path: &Path, text: &str, clock: Clock) -> Result<ClientRun, CompareError> {
    read(path, Source::Text(text), clock)
}

/// Like [`parse`], reading the file a line at a time (each record reduced to its turn's values
/// as it is read).
pub fn load(path: &Path, clock: Clock) -> Result<ClientRun, CompareError> {
    read(path, Source::File(path), clock)
}

fn read(path: &Path, src: Source<'_>, clock: Clock) -> Result<ClientRun, CompareError> {
    let mut turns = Vec::new();
    let mut aborted = 0;
    lines_of(path, src, "cannot read the client file", |line, text| {
        let r: TurnRecord = object_line(path, line, text, "a tokentap turn record")?;
        if r.status == Status::Aborted {
            aborted += 1;
            return Ok(());
        }
        let mut t = ClientTurn::new(line);
        t.session = r.conversation_id.clone();
        t.turn = Some(r.turn_index);
        t.request_id = r.headers.get("x-request-id").cloned();
        t.response_id = r.measured.response_id.clone();
        t.start_ns = Some(match clock {
            Clock::Mono => r.start_mono_ns,
            Clock::Wall => r.anchor.wall_of(r.start_mono_ns),
        });
        t.ok = r.status == Status::Ok;
        t.values = crate::wire::values_of(&r);
        turns.push(t);
        Ok(())
    })?;
    let mut notes = Vec::new();
    if aborted > 0 {
        notes.push(format!(
            "{aborted} aborted turns in the client file were never sent and are not compared"
        ));
    }
    Ok(ClientRun {
        clock,
        turns,
        published: None,
        notes,
        checks: Vec::new(),
        levels: Vec::new(),
        relative_starts: false,
        totals: Vec::new(),
    })
}
