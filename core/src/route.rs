//! Session affinity: rendezvous (highest-random-weight) hashing of `(target, session)`, shared
//! by the proxy (which replica a session goes to) and the replay client (which endpoint a
//! conversation goes to) — so for the same list of URLs both route a session the same way.
//!
//! Each target is seeded with [`hash64`] of its URL (trailing `/` removed). A session ranks the
//! targets by `mix(hash64(session) ^ seed)`, highest first: it stays on its first target while
//! that target is there, and adding or removing one target moves only the sessions that rank it
//! first (≈ 1/n of them).

/// FNV-1a 64 + SplitMix64 finaliser.
pub fn hash64(b: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &x in b {
        h ^= x as u64;
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    mix(h)
}

pub use crate::rng::mix;

/// The seed of a target URL.
pub fn seed(url: &str) -> u64 {
    hash64(url.trim_end_matches('/').as_bytes())
}

/// The weight of the target seeded `seed` for the session hashed `hs` (= [`hash64`] of its id):
/// the highest weight ranks first.
#[inline]
pub fn weight(hs: u64, seed: u64) -> u64 {
    mix(hs ^ seed)
}

/// Target indices for `session`, best first.
pub fn ranking(session: &[u8], seeds: &[u64]) -> Vec<usize> {
    let hs = hash64(session);
    let mut idx: Vec<usize> = (0..seeds.len()).collect();
    idx.sort_by_key(|&i| std::cmp::Reverse(weight(hs, seeds[i])));
    idx
}

/// The first of [`ranking`] without sorting or allocating (0 for no target).
pub fn rendezvous_first(session: &[u8], seeds: impl IntoIterator<Item = u64>) -> usize {
    let hs = hash64(session);
    seeds
        .into_iter()
        .enumerate()
        .max_by_key(|&(i, seed)| (weight(hs, seed), std::cmp::Reverse(i)))
        .map_or(0, |(i, _)| i)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_is_the_head_of_the_ranking_and_removal_moves_only_its_sessions() {
        let urls = ["http://a:1", "http://b:1", "http://c:1", "http://d:1"];
        let seeds: Vec<u64> = urls.iter().map(|u| seed(u)).collect();
        let mut per = [0usize; 4];
        for i in 0..4000 {
            let s = format!("conv-{i}");
            let first = rendezvous_first(s.as_bytes(), seeds.iter().copied());
            assert_eq!(first, ranking(s.as_bytes(), &seeds)[0]);
            per[first] += 1;
            // Without target 3, a session that was not on 3 stays where it was.
            let fewer = rendezvous_first(s.as_bytes(), seeds[..3].iter().copied());
            if first != 3 {
                assert_eq!(fewer, first);
            }
        }
        // Spread: every target gets a fair share (±20 % of 1000).
        assert!(per.iter().all(|&n| (800..1200).contains(&n)), "{per:?}");
        assert_eq!(seed("http://a:1/"), seed("http://a:1"));
    }
}
