//! The stable-toolchain side of the fuzz targets, shared by every test that runs them: the
//! committed inputs of a target (`fuzz/seeds/<target>/`, `fuzz/corpus/<target>/`) and one
//! deterministic byte mutator (bit flips, insertions of bytes that matter to the parser under
//! test, deletions, splices from another input, truncations), seeded from core's SplitMix64 so
//! every run makes the same inputs. Not a substitute for `cargo fuzz run` (no coverage
//! feedback); it keeps the fuzz harnesses compiling and the known shapes tested.

use std::path::{Path, PathBuf};
use tokentap_core::rng::SplitMix64;

/// The workspace's `fuzz/` folder.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz")
}

/// Every file of `fuzz/<kind>/<target>/` (`kind`: `seeds` or `corpus`), sorted by name; none
/// when the folder does not exist.
pub fn inputs(kind: &str, target: &str) -> Vec<Vec<u8>> {
    let dir = root().join(kind).join(target);
    let Ok(rd) = std::fs::read_dir(&dir) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = rd
        .map(|e| e.expect("a readable fuzz input").path())
        .collect();
    files.sort();
    files
        .iter()
        .map(|f| std::fs::read(f).unwrap_or_else(|e| panic!("{}: {e}", f.display())))
        .collect()
}

/// A deterministic source of draws for the tests' mutations.
pub struct Rng(SplitMix64);

impl Rng {
    /// A generator seeded with `seed`.
    pub fn new(seed: u64) -> Rng {
        Rng(SplitMix64::new(seed))
    }

    /// The next value.
    pub fn next_u64(&mut self) -> u64 {
        self.0.next_u64()
    }

    /// A draw in `0..n` (`0` when `n` is 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n.max(1) as u64) as usize
    }
}

/// Mutates copies of inputs, inserting `interesting` pieces (the bytes that matter to the parser
/// under test) more often than random bytes.
pub struct Mutator {
    /// The case's random draws.
    pub rng: Rng,
    interesting: &'static [&'static [u8]],
}

impl Mutator {
    /// `seed` picks the sequence (a target's own, so two targets do not share one).
    pub fn new(seed: u64, interesting: &'static [&'static [u8]]) -> Mutator {
        Mutator {
            rng: Rng::new(seed),
            interesting,
        }
    }

    /// `input` with one to four mutations; splices take their bytes from `other`.
    pub fn mutate(&mut self, input: &[u8], other: &[u8]) -> Vec<u8> {
        let mut v = input.to_vec();
        let rng = &mut self.rng;
        for _ in 0..1 + rng.below(4) {
            let at = rng.below(v.len() + 1);
            match rng.below(6) {
                0 if !v.is_empty() => {
                    let i = rng.below(v.len());
                    v[i] ^= 1 << rng.below(8);
                }
                1 if !self.interesting.is_empty() => {
                    let piece = self.interesting[rng.below(self.interesting.len())];
                    v.splice(at..at, piece.iter().copied());
                }
                2 if at < v.len() => {
                    let end = (at + 1 + rng.below(16)).min(v.len());
                    v.drain(at..end);
                }
                3 if !other.is_empty() => {
                    let from = rng.below(other.len());
                    let end = (from + 1 + rng.below(64)).min(other.len());
                    v.splice(at..at, other[from..end].iter().copied());
                }
                4 => v.truncate(at),
                _ => v.insert(at, rng.next_u64() as u8),
            }
        }
        v
    }
}

/// Runs `property` on every corpus input and seed of `target`, and on `rounds` mutations of
/// each seed; a panic names the target, the round and the input.
pub fn run(
    target: &str,
    rounds: usize,
    interesting: &'static [&'static [u8]],
    property: fn(&[u8]),
) {
    let seeds = inputs("seeds", target);
    assert!(
        !seeds.is_empty(),
        "no seeds in {}",
        root().join("seeds").join(target).display()
    );
    for c in inputs("corpus", target) {
        property(&c);
    }
    let mut m = Mutator::new(0x9E37_79B9_7F4A_7C15 ^ target.len() as u64, interesting);
    for seed in &seeds {
        property(seed);
        for round in 0..rounds {
            let other = seeds[m.rng.below(seeds.len())].clone();
            let input = m.mutate(seed, &other);
            if std::panic::catch_unwind(|| property(&input)).is_err() {
                panic!(
                    "{target}: round {round} failed on input {:?}",
                    String::from_utf8_lossy(&input)
                );
            }
        }
    }
}
