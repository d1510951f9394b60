//! The outside-input fuzz properties (`fuzz/src/outside.rs`: the HTTP/1.1 response codec, the
//! proxy's request sniffer, the `compare` readers, the accuracy capture) on stable, in every
//! `cargo test`: the committed corpus of each target (what `cargo fuzz` kept, minimized), its
//! hand-made seeds, and deterministic mutations of the seeds. Every crash the fuzzer found is in
//! the corpus (`fuzz/corpus/<target>/`), so it stays a regression test.

#[path = "../fuzz/src/outside.rs"]
mod outside;

/// Mutations per seed.
const ROUNDS: usize = 200;

const INTERESTING: &[&[u8]] = &[
    b"\r\n",
    b"\r\n\r\n",
    b"\n",
    b"0\r\n\r\n",
    b"Transfer-Encoding: chunked\r\n",
    b"Content-Length: 0\r\n",
    b"Content-Length: 99999999999999999999\r\n",
    b"ffffffffffffffff\r\n",
    b";",
    b"{",
    b"}",
    b"[",
    b"]",
    b"\"",
    b"\\u0000",
    b"\xff",
    b"\xc3",
    b"null",
    b"[DONE]",
    b"\"tool_calls\":[{\"index\":0}]",
    b"\"arguments\":\"{",
    b"\"messages\":[]",
];

fn run(target: &str, property: fn(&[u8])) {
    tokentap_testkit::fuzz::run(target, ROUNDS, INTERESTING, property);
}

#[test]
fn http1_responses() {
    run("http1", outside::http1);
}

#[test]
fn request_sniffer() {
    run("sniff", outside::sniff);
}

#[test]
fn compare_readers() {
    run("compare_readers", outside::compare_readers);
}

#[test]
fn accuracy_capture() {
    run("capture", outside::capture);
}
