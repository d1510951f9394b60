//! Request bodies through the proxy's sniffer (`tokentap_proxy::sniff::ReqInfo`): no panic, and what it reports agrees with a full JSON parse. See `src/outside.rs`.
#![no_main]

#[path = "../src/outside.rs"]
mod outside;

libfuzzer_sys::fuzz_target!(|data: &[u8]| outside::sniff(data));
