//! The outside-input fuzz properties (`fuzz/src/outside.rs`: the HTTP/1.1 response codec, the
//! proxy's request sniffer, the `compare` readers, the accuracy capture) on stable, in every
//! `cargo test`: the committed corpus of each target (what `cargo fuzz` kept, minimized), its
//! hand-made seeds, and deterministic mutations of the seeds. Every crash the fuzzer found is in
//! the corpus (`fuzz/corpus/<target>/`), so it stays a regression test.

#[path = "../fuzz/src/outside.rs"]
mod outside;

use std::path::Path;

/// Mutations per seed.
const ROUNDS: usize = 200;

fn inputs(target: &str) -> (Vec<Vec<u8>>, Vec<Vec<u8>>) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz");
    let read = |dir: &Path| -> Vec<Vec<u8>> {
        let Ok(rd) = std::fs::read_dir(dir) else {
            return Vec::new();
        };
        let mut files: Vec<_> = rd.map(|e| e.unwrap().path()).collect();
        files.sort();
        files.iter().map(|f| std::fs::read(f).unwrap()).collect()
    };
    let seeds = read(&root.join("seeds").join(target));
    assert!(!seeds.is_empty(), "no seeds for {target}");
    (seeds, read(&root.join("corpus").join(target)))
}

/// xorshift64*: the same mutations on every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

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

fn mutate(seed: &[u8], rng: &mut Rng) -> Vec<u8> {
    let mut v = seed.to_vec();
    for _ in 0..1 + rng.below(4) {
        let at = rng.below(v.len() + 1);
        match rng.below(5) {
            0 if !v.is_empty() => {
                let i = rng.below(v.len());
                v[i] ^= 1 << rng.below(8);
            }
            1 => {
                let s = INTERESTING[rng.below(INTERESTING.len())];
                v.splice(at..at, s.iter().copied());
            }
            2 if !v.is_empty() => {
                let end = (at + 1 + rng.below(16)).min(v.len());
                v.drain(at.min(end)..end);
            }
            3 => v.truncate(at),
            _ => {
                let from = rng.below(seed.len().max(1));
                let n = rng.below(32).min(seed.len().saturating_sub(from));
                let piece = seed[from..from + n].to_vec();
                v.splice(at..at, piece);
            }
        }
    }
    v
}

fn run(target: &str, property: fn(&[u8])) {
    let (seeds, corpus) = inputs(target);
    for c in &corpus {
        property(c);
    }
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ target.len() as u64);
    for s in &seeds {
        property(s);
        for _ in 0..ROUNDS {
            property(&mutate(s, &mut rng));
        }
    }
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
