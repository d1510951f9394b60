//! Third-party client files through every reader of `tokentap compare`: no panic, and errors name the file. See `src/outside.rs`.
#![no_main]

#[path = "../src/outside.rs"]
mod outside;

libfuzzer_sys::fuzz_target!(|data: &[u8]| outside::compare_readers(data));
