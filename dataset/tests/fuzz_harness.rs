//! The fuzz targets' properties (`fuzz/src/harness.rs`) on stable, in every `cargo test`: the
//! committed seeds plus deterministic mutations of them (bit flips, byte insertions and
//! deletions, splices, truncations). Not a substitute for `cargo fuzz run` (no coverage
//! feedback), but it keeps the harness compiling and catches regressions on known shapes.

#[path = "../../fuzz/src/harness.rs"]
mod harness;

use std::path::Path;

/// Mutations per seed. Measured: both tests together take ~1 s in a debug build.
const ROUNDS: usize = 400;

fn seeds(target: &str) -> Vec<Vec<u8>> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fuzz/seeds")
        .join(target);
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    let seeds: Vec<Vec<u8>> = files.iter().map(|f| std::fs::read(f).unwrap()).collect();
    assert!(!seeds.is_empty(), "no seeds in {}", dir.display());
    seeds
}

/// xorshift64*: deterministic mutations, the same on every run.
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
];

fn mutate(rng: &mut Rng, input: &mut Vec<u8>, other: &[u8]) {
    for _ in 0..1 + rng.below(4) {
        let at = rng.below(input.len() + 1);
        match rng.below(6) {
            0 if !input.is_empty() => {
                let i = rng.below(input.len());
                input[i] ^= 1 << rng.below(8);
            }
            1 => {
                let piece = INTERESTING[rng.below(INTERESTING.len())];
                input.splice(at..at, piece.iter().copied());
            }
            2 if at < input.len() => {
                let end = (at + 1 + rng.below(8)).min(input.len());
                input.drain(at..end);
            }
            3 if !other.is_empty() => {
                let from = rng.below(other.len());
                let end = (from + 1 + rng.below(64)).min(other.len());
                input.splice(at..at, other[from..end].iter().copied());
            }
            4 => input.truncate(at),
            _ => input.insert(at, rng.next() as u8),
        }
    }
}

fn run(target: &str, check: fn(&[u8])) {
    let seeds = seeds(target);
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ target.len() as u64);
    for seed in &seeds {
        check(seed);
        for round in 0..ROUNDS {
            let mut input = seed.clone();
            let other = &seeds[rng.below(seeds.len())];
            mutate(&mut rng, &mut input, other);
            let result = std::panic::catch_unwind(|| check(&input));
            if result.is_err() {
                panic!(
                    "{target}: round {round} failed on input {:?}",
                    String::from_utf8_lossy(&input)
                );
            }
        }
    }
}

#[test]
fn dataset_rows_seeds_and_mutations() {
    run("dataset_rows", harness::dataset_rows);
}

#[test]
fn sse_seeds_and_mutations() {
    run("sse", harness::sse);
}
