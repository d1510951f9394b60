//! HTTP/1.1 responses (head, then a length, chunked or close-delimited body), cut at arbitrary points, through `tokentap_core::http1`: no panic, and the cuts never change the head or the body. See `src/outside.rs`.
#![no_main]

#[path = "../src/outside.rs"]
mod outside;

libfuzzer_sys::fuzz_target!(|data: &[u8]| outside::http1(data));
