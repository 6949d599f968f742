//! The heap inside `policy.wasm`.
//!
//! policy-server starts a fresh instance for every request, so every page of
//! linear memory an evaluation touches is a page fault on the host, and a
//! fault costs about as much as thousands of wasm instructions. wasi-libc's
//! allocator (dlmalloc) writes a boundary tag at the far end of each 64 KiB
//! it grows, touching a page nothing else uses, and spends tens of
//! instructions per call on bins an evaluation that lives for microseconds
//! does not need.
//!
//! This one keeps size classes from 16 bytes up, two per power of two (16,
//! 32, 48, 64, 96, 128, 192, …), so a block wastes at most a third of itself
//! (power-of-two classes waste up to half, and every wasted byte of a fresh
//! instance can be a page touched). A freed block
//! goes on its class's list and is handed out again first; new blocks are cut
//! from memory grown as needed, so only the bytes actually used are touched.
//! Blocks carry no header: Rust passes the layout back when freeing. Memory
//! fresh from `memory.grow` is already zero, so zeroed allocations from it are
//! not written. wasm32-wasip1 has one thread, which is what makes the
//! unsynchronised state sound.

use core::alloc::{GlobalAlloc, Layout};
use core::cell::UnsafeCell;
use core::ptr;

/// Smallest block: room for the free-list link, and 16-byte alignment for
/// every block.
const MIN_SHIFT: u32 = 4;
const MIN_ALIGN: usize = 1 << MIN_SHIFT;
/// Classes 16 B … 1 GiB: 16 and 32, then two per power of two.
const CLASSES: usize = 52;
/// A wasm page.
const PAGE: usize = 64 * 1024;

/// Where new memory comes from: `memory.grow` in wasm, an arena in tests.
pub trait Grow {
    /// Grows by `pages` wasm pages; the address where the new memory starts,
    /// or `None` when it cannot grow.
    fn grow(&self, pages: usize) -> Option<usize>;
}

struct State {
    /// Each class's freed blocks, linked through their first word (0 ends).
    free: [usize; CLASSES],
    /// The unused part of the last grown region.
    next: usize,
    end: usize,
}

pub struct SizeClasses<G> {
    state: UnsafeCell<State>,
    memory: G,
}

// SAFETY: only used where there is a single thread (wasm32 without the
// atomics feature, and single-threaded tests).
unsafe impl<G: Sync> Sync for SizeClasses<G> {}

/// The class index and block size for a layout. Every block size is a
/// multiple of 16, so blocks cut one after another stay 16-byte aligned.
fn class(layout: Layout) -> Option<(usize, usize)> {
    let size = layout.size().max(layout.align()).max(MIN_ALIGN);
    // The power of two at or above `size`: 2^shift.
    let shift = usize::BITS - (size - 1).leading_zeros();
    let (index, block) = if shift <= MIN_SHIFT + 1 {
        (shift.checked_sub(MIN_SHIFT)?, 1usize << shift)
    } else {
        // Between 2^(shift-1) and 2^shift there is one more class, 3/4 of
        // 2^shift (48, 96, 192, …).
        let three_quarters = 3usize << (shift - 2);
        let pair = 2 + 2 * (shift - MIN_SHIFT - 2);
        if size <= three_quarters {
            (pair, three_quarters)
        } else {
            (pair + 1, 1usize << shift)
        }
    };
    let index = usize::try_from(index).ok()?;
    (index < CLASSES).then_some((index, block))
}

impl<G: Grow> SizeClasses<G> {
    pub const fn new(memory: G) -> Self {
        SizeClasses {
            state: UnsafeCell::new(State {
                free: [0; CLASSES],
                next: 0,
                end: 0,
            }),
            memory,
        }
    }

    /// A block for `layout` and whether it is fresh (still zero) memory.
    /// Not inlined: every allocation site would get a copy.
    ///
    /// # Safety
    /// Single-threaded use only.
    #[inline(never)]
    unsafe fn take(&self, layout: Layout) -> Option<(*mut u8, bool)> {
        let (index, size) = class(layout)?;
        // SAFETY: single-threaded, and no reference to the state outlives
        // this call.
        let state = unsafe { &mut *self.state.get() };
        if layout.align() <= MIN_ALIGN {
            let head = state.free.get_mut(index)?;
            if *head != 0 {
                let block = *head as *mut u8;
                // SAFETY: a listed block is a freed block of this class, at
                // least 16 bytes, whose first word holds the next link.
                *head = unsafe { ptr::read(block as *const usize) };
                return Some((block, false));
            }
        }
        let align = layout.align().max(MIN_ALIGN);
        let fits = |next: usize| {
            let start = next.checked_add(align - 1)? & !(align - 1);
            Some((start, start.checked_add(size)?))
        };
        let (mut start, mut stop) = fits(state.next)?;
        if stop > state.end {
            let pages = size.checked_add(align)?.div_ceil(PAGE);
            let base = self.memory.grow(pages)?;
            if base != state.end {
                // The first region, or memory something else grew between.
                state.next = base;
            }
            state.end = base.checked_add(pages.checked_mul(PAGE)?)?;
            (start, stop) = fits(state.next)?;
            if stop > state.end {
                return None;
            }
        }
        state.next = stop;
        Some((start as *mut u8, true))
    }

    /// Puts a block back on its class's list. Not inlined, like [`Self::take`].
    ///
    /// # Safety
    /// Single-threaded use only; `block` was handed out for `layout`.
    #[inline(never)]
    unsafe fn give(&self, block: *mut u8, layout: Layout) {
        let Some((index, _)) = class(layout) else {
            return;
        };
        // SAFETY: single-threaded; `block` was handed out for this layout,
        // so it is 16-byte aligned and at least 16 bytes long.
        let state = unsafe { &mut *self.state.get() };
        if let Some(head) = state.free.get_mut(index) {
            unsafe { ptr::write(block as *mut usize, *head) };
            *head = block as usize;
        }
    }
}

unsafe impl<G: Grow> GlobalAlloc for SizeClasses<G> {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: single-threaded (see the module's note).
        match unsafe { self.take(layout) } {
            Some((block, _)) => block,
            None => ptr::null_mut(),
        }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: single-threaded; a reused block is this class's size, at
        // least `layout.size()`.
        match unsafe { self.take(layout) } {
            Some((block, true)) => block,
            Some((block, false)) => {
                unsafe { ptr::write_bytes(block, 0, layout.size()) };
                block
            }
            None => ptr::null_mut(),
        }
    }

    unsafe fn dealloc(&self, block: *mut u8, layout: Layout) {
        // SAFETY: the caller's promise, passed on.
        unsafe { self.give(block, layout) }
    }

    unsafe fn realloc(&self, block: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let Ok(new_layout) = Layout::from_size_align(new_size, layout.align()) else {
            return ptr::null_mut();
        };
        // Growing or shrinking within the block's class needs no move.
        if class(layout).map(|(i, _)| i) == class(new_layout).map(|(i, _)| i) {
            return block;
        }
        // SAFETY: as for `alloc` and `dealloc`; the two blocks are distinct.
        unsafe {
            let moved = self.alloc(new_layout);
            if !moved.is_null() {
                ptr::copy_nonoverlapping(block, moved, layout.size().min(new_size));
                self.dealloc(block, layout);
            }
            moved
        }
    }
}

/// `memory.grow` on the module's one memory.
#[cfg(all(target_arch = "wasm32", not(target_feature = "atomics")))]
pub struct LinearMemory;

#[cfg(all(target_arch = "wasm32", not(target_feature = "atomics")))]
impl Grow for LinearMemory {
    fn grow(&self, pages: usize) -> Option<usize> {
        let previous = core::arch::wasm32::memory_grow(0, pages);
        (previous != usize::MAX).then(|| previous.checked_mul(PAGE))?
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    /// Memory that grows inside one leaked buffer.
    struct Arena {
        base: usize,
        pages: Cell<usize>,
        limit: usize,
    }

    // SAFETY: each test uses its own arena from one thread.
    unsafe impl Sync for Arena {}

    impl Arena {
        fn new(limit: usize) -> Arena {
            let buffer = vec![0u8; (limit + 1) * PAGE].leak();
            let base = (buffer.as_mut_ptr() as usize).next_multiple_of(PAGE);
            Arena {
                base,
                pages: Cell::new(0),
                limit,
            }
        }
    }

    impl Grow for Arena {
        fn grow(&self, pages: usize) -> Option<usize> {
            let now = self.pages.get();
            (now + pages <= self.limit).then(|| {
                self.pages.set(now + pages);
                self.base + now * PAGE
            })
        }
    }

    /// A deterministic stream of numbers.
    fn numbers(mut seed: u64) -> impl FnMut() -> usize {
        move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed as usize
        }
    }

    #[test]
    fn blocks_are_aligned_disjoint_and_keep_their_bytes() {
        let heap = SizeClasses::new(Arena::new(4096));
        let mut next = numbers(7);
        let mut live: Vec<(*mut u8, Layout, u8)> = Vec::new();
        for round in 0..20_000 {
            let choice = next() % 10;
            if choice < 4 || live.is_empty() {
                let size = match next() % 4 {
                    0 => next() % 16,
                    1 => next() % 300,
                    2 => next() % 5000,
                    _ => next() % 70_000,
                };
                let align = [1, 2, 4, 8, 16, 32, 64][next() % 7];
                let layout = Layout::from_size_align(size, align).unwrap();
                let zeroed = next().is_multiple_of(2);
                let block = unsafe {
                    if zeroed {
                        heap.alloc_zeroed(layout)
                    } else {
                        heap.alloc(layout)
                    }
                };
                assert!(!block.is_null(), "round {round}: out of memory");
                assert_eq!(block as usize % align.max(MIN_ALIGN), 0);
                if zeroed {
                    assert!((0..size).all(|i| unsafe { *block.add(i) } == 0));
                }
                let fill = (round % 251) as u8;
                unsafe { ptr::write_bytes(block, fill, size) };
                live.push((block, layout, fill));
            } else if choice < 8 {
                let (block, layout, fill) = live.swap_remove(next() % live.len());
                assert!((0..layout.size()).all(|i| unsafe { *block.add(i) } == fill));
                unsafe { heap.dealloc(block, layout) };
            } else {
                let at = next() % live.len();
                let (block, layout, fill) = live[at];
                let new_size = next() % 9000;
                let moved = unsafe { heap.realloc(block, layout, new_size) };
                assert!(!moved.is_null());
                let kept = layout.size().min(new_size);
                assert!((0..kept).all(|i| unsafe { *moved.add(i) } == fill));
                unsafe { ptr::write_bytes(moved, fill, new_size) };
                live[at] = (
                    moved,
                    Layout::from_size_align(new_size, layout.align()).unwrap(),
                    fill,
                );
            }
            // No two live blocks overlap.
            if round % 500 == 0 {
                let mut spans: Vec<(usize, usize)> = live
                    .iter()
                    .map(|(b, l, _)| (*b as usize, *b as usize + l.size()))
                    .collect();
                spans.sort();
                assert!(spans.windows(2).all(|w| w[0].1 <= w[1].0));
            }
        }
    }

    #[test]
    fn freed_blocks_are_reused_before_memory_grows() {
        let heap = SizeClasses::new(Arena::new(4));
        let layout = Layout::from_size_align(100, 8).unwrap();
        for _ in 0..10_000 {
            let block = unsafe { heap.alloc(layout) };
            assert!(!block.is_null());
            unsafe { heap.dealloc(block, layout) };
        }
        assert_eq!(heap.memory.pages.get(), 1);
    }

    #[test]
    fn classes_fit_tightly_and_keep_blocks_aligned() {
        let mut last = (0, MIN_ALIGN);
        for size in 1..=(1 << 20) {
            let (index, block) = class(Layout::from_size_align(size, 1).unwrap()).unwrap();
            assert!(block >= size && block % MIN_ALIGN == 0, "{size} -> {block}");
            assert!(
                size <= 32 || block * 2 <= size * 3,
                "{size} -> {block} wastes too much"
            );
            assert!(index >= last.0 && (index > last.0 || block == last.1));
            last = (index, block);
        }
        let largest = Layout::from_size_align(1 << 30, 8).unwrap();
        assert_eq!(class(largest).unwrap().0, CLASSES - 1);
        assert!(class(Layout::from_size_align((1 << 30) + 1, 8).unwrap()).is_none());
    }

    #[test]
    fn exhaustion_is_a_null_pointer() {
        let heap = SizeClasses::new(Arena::new(2));
        let big = Layout::from_size_align(3 * PAGE, 8).unwrap();
        assert!(unsafe { heap.alloc(big) }.is_null());
        let huge = Layout::from_size_align(1 << 31, 8).unwrap();
        assert!(unsafe { heap.alloc(huge) }.is_null());
        let small = Layout::from_size_align(10, 8).unwrap();
        assert!(!unsafe { heap.alloc(small) }.is_null());
    }
}
