//! Cache salting (docs/benchmark.md#salting).
//!
//! With salting on, the first system message of every request becomes
//! `"[salt: R]\n\n" + system + "\n\n[salt: C]"`: R is a tag of the pass over the dataset, C a tag
//! of the *source* conversation id (without `__repeat_N`). KV-cache reuse stays possible inside a
//! trajectory, the system prompt may be shared by trajectories of one pass, nothing is shared
//! across passes.
//!
//! A tag is BLAKE2b with a 2-byte digest — the digest-size *parameter* of BLAKE2b (it changes the
//! parameter block and so every output bit), not a 64-byte digest cut to 2 bytes — in lower-case
//! hex. Python's `hashlib.blake2b(s.encode(), digest_size=2).hexdigest()` gives the same value.

use blake2::digest::{Update, VariableOutput};
use blake2::Blake2bVar;
use std::fmt;

/// A 2-byte salt tag, displayed as 4 lower-case hex digits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tag([u8; 2]);

impl Tag {
    /// BLAKE2b (digest size 2) of `text`'s UTF-8 bytes.
    pub fn of(text: &str) -> Tag {
        // Invariant: 2 is inside BLAKE2b's valid digest sizes 1..=64, so `new` cannot fail, and
        // the output buffer has exactly the size asked for, so `finalize_variable` cannot fail.
        let mut h = Blake2bVar::new(2).expect("2 is a valid BLAKE2b digest size");
        h.update(text.as_bytes());
        let mut out = [0u8; 2];
        h.finalize_variable(&mut out)
            .expect("buffer has the digest size");
        Tag(out)
    }

    /// The tag of a pass number (1-based), hashed as its decimal string.
    pub fn of_pass(pass: u32) -> Tag {
        Tag::of(&pass.to_string())
    }
}

impl fmt::Display for Tag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:02x}{:02x}", self.0[0], self.0[1])
    }
}

/// The salted system prompt: a `Display` so it can be written straight into a JSON string
/// without building an intermediate `String`.
#[derive(Debug, Clone, Copy)]
pub struct Salted<'a> {
    /// The pass's tag.
    pub pass: Tag,
    /// The conversation's tag.
    pub conversation: Tag,
    /// The system prompt.
    pub system: &'a str,
}

impl fmt::Display for Salted<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "[salt: {}]\n\n{}\n\n[salt: {}]",
            self.pass, self.system, self.conversation
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The test vectors of docs/benchmark.md#salting.
    #[test]
    fn spec_vectors() {
        for (input, want) in [
            ("1", "4461"),
            ("2", "ba75"),
            ("3", "0967"),
            ("10", "6cd2"),
            ("conv1", "e643"),
            ("c1", "6d82"),
            ("sim_000001", "1bd4"),
            ("django__django-16899", "edc0"),
        ] {
            assert_eq!(Tag::of(input).to_string(), want, "salt of {input:?}");
        }
        assert_eq!(Tag::of_pass(10).to_string(), "6cd2");
    }

    #[test]
    fn salted_system_layout() {
        let s = Salted {
            pass: Tag::of_pass(1),
            conversation: Tag::of("c1"),
            system: "You are helpful.",
        };
        assert_eq!(
            s.to_string(),
            "[salt: 4461]\n\nYou are helpful.\n\n[salt: 6d82]"
        );
    }
}
