//! Bench-only helpers, shared by the benches and examples that prove "no allocation per chunk".
//!
//! [`Counting`] wraps the system allocator and counts every allocation and reallocation. It is
//! the one place that needs `unsafe` (`GlobalAlloc` is an unsafe trait): a measured need, kept
//! out of every shipped crate — only `[dev-dependencies]` name this crate.
//!
//! ```ignore
//! #[global_allocator]
//! static GLOBAL: tokentap_benchutil::Counting = tokentap_benchutil::Counting;
//! let before = tokentap_benchutil::allocations();
//! ```
#![warn(missing_docs)]
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System as Shipped};
use std::sync::atomic::{AtomicU64, Ordering};

static ALLOCS: AtomicU64 = AtomicU64::new(0);

/// The system allocator, counting allocations and reallocations.
pub struct Counting;

// SAFETY: every method forwards to `System` with the caller's arguments unchanged; the only
// addition is a relaxed atomic increment, which cannot allocate or unwind.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        unsafe { Shipped.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        unsafe { Shipped.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        unsafe { Shipped.realloc(p, l, n) }
    }
}

/// Allocations and reallocations so far in this process (when [`Counting`] is the global
/// allocator; 0 otherwise).
pub fn allocations() -> u64 {
    ALLOCS.load(Ordering::Relaxed)
}
