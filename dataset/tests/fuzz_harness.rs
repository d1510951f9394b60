//! The fuzz targets' properties (`fuzz/src/harness.rs`) on stable, in every `cargo test`: the
//! committed seeds plus deterministic mutations of them (testkit's mutator: bit flips, byte
//! insertions and deletions, splices, truncations). Not a substitute for `cargo fuzz run` (no
//! coverage feedback), but it keeps the harness compiling and catches regressions on known
//! shapes.

#[path = "../../fuzz/src/harness.rs"]
mod harness;

/// Mutations per seed. Measured: both tests together take ~1 s in a debug build.
const ROUNDS: usize = 400;

/// Bytes that matter to the parsers, inserted more often than random ones.
const INTERESTING: &[&[u8]] = &[
    b"\n",
    b"\r",
    b"\r\n",
    b"\n\n",
    b":",
    b"data:",
    b"data: ",
    b"event:",
    b"[DONE]",
    b"\xef\xbb\xbf",
    b"{",
    b"}",
    b"[",
    b"]",
    b"\"",
    b",",
    b"null",
    b"\"turn\":0",
    b"\"role\":\"tool\"",
    b"\"tool_calls\":[]",
    b"\\u00e9",
    b"\xc3\xa9",
    b"-1",
    b"1e999",
    b" ",
    b"\\u0041",
    b"\\\"",
    b"\xff",
    b"\xc3",
    b"\x01",
    b"1.0",
    b"01",
    b"\"content\":",
    b"\"usage\":",
    b"\"choices\":",
    b"\"metrics\":null",
    b"\"finish_reason\":\"stop\"",
];

fn run(target: &str, check: fn(&[u8])) {
    tokentap_testkit::fuzz::run(target, ROUNDS, INTERESTING, check);
}

#[test]
fn dataset_rows_seeds_and_mutations() {
    run("dataset_rows", harness::dataset_rows);
}

#[test]
fn chat_chunk_seeds_and_mutations() {
    run("chat_chunk", harness::chat_chunk);
}

#[test]
fn sse_seeds_and_mutations() {
    run("sse", harness::sse);
}

#[test]
fn responses_events_seeds_and_mutations() {
    run("responses_events", |d| {
        harness::api_events(tokentap_core::events::Api::Responses, d)
    });
}

#[test]
fn messages_events_seeds_and_mutations() {
    run("messages_events", |d| {
        harness::api_events(tokentap_core::events::Api::Messages, d)
    });
}
