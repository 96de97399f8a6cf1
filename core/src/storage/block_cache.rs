//! Freed blocks of runtime-allocated memory, kept per thread for the next allocation of the
//! same size.
//!
//! A compiled model allocates the same few storages at every call (TVM programs allocate their
//! intermediate tensors with `vm.builtin.alloc_storage` and drop them before returning); going
//! to `calloc` and `free` for each cost more than the rest of the call's VM work together. Like
//! TVM's pooled allocator, freed blocks are kept for reuse; unlike it, a reused block is zeroed
//! again, so a storage always starts zeroed (no data of an earlier call or another caller shows
//! through) and no caller sees a difference. The cache is bounded: storages of at most
//! [`MAX_BLOCK`] bytes, at most [`MAX_BLOCKS`] of them and [`MAX_BYTES`] in all per thread; a
//! thread's blocks are freed when it exits or calls [`clear`]. `RELAXVM_BLOCK_CACHE=0` in the
//! environment (read once) turns the cache off: every block then goes back to the allocator,
//! as memory checkers such as AddressSanitizer need to see a use after free.

use std::cell::RefCell;
use std::sync::OnceLock;

/// The largest storage whose block is kept (bigger ones cost their work, not their allocation).
pub const MAX_BLOCK: usize = 1 << 20;
/// The most blocks a thread keeps.
pub const MAX_BLOCKS: usize = 64;
/// The most bytes a thread keeps.
pub const MAX_BYTES: usize = 16 << 20;

/// A thread's freed blocks: (allocation size, allocation start).
struct Cache {
    blocks: Vec<(usize, *mut u8)>,
    bytes: usize,
}

impl Drop for Cache {
    fn drop(&mut self) {
        for &(size, base) in &self.blocks {
            // SAFETY: every block was handed over by `keep`, whose contract is that it came from
            // the global allocator with `layout(size)` and nothing else frees it.
            unsafe { std::alloc::dealloc(base, layout(size)) }
        }
    }
}

thread_local! {
    static CACHE: RefCell<Cache> = const { RefCell::new(Cache { blocks: Vec::new(), bytes: 0 }) };
}

/// The layout of the blocks kept: `size` bytes at the allocator's natural alignment (what
/// `Storage` allocates).
fn layout(size: usize) -> std::alloc::Layout {
    std::alloc::Layout::from_size_align(size, crate::storage::MALLOC_ALIGN).expect("a layout that was allocated")
}

/// Whether blocks are kept: unless `RELAXVM_BLOCK_CACHE` turns them off (see [`switch`]).
pub fn enabled() -> bool {
    static ENABLED: OnceLock<bool> = OnceLock::new();
    *ENABLED.get_or_init(|| {
        let Some(v) = std::env::var_os("RELAXVM_BLOCK_CACHE") else { return true };
        let text = v.to_string_lossy();
        switch(&text).unwrap_or_else(|| {
            // A debugging switch (memory checkers need it off): a value it cannot read turns
            // it off, and says so.
            log::error!(
                "RELAXVM_BLOCK_CACHE={text:?} is not a switch (expected 0/1, off/on, false/true or no/yes): the block caches are off"
            );
            false
        })
    })
}

/// A switch's value from the environment: `0`/`off`/`false`/`no` or `1`/`on`/`true`/`yes`,
/// in any case and with surrounding spaces; `None` for anything else.
pub fn switch(text: &str) -> Option<bool> {
    match text.trim().to_ascii_lowercase().as_str() {
        "0" | "off" | "false" | "no" => Some(false),
        "1" | "on" | "true" | "yes" => Some(true),
        _ => None,
    }
}

/// True for allocations of `size` bytes (a storage plus its alignment padding) that are kept.
fn fits(size: usize) -> bool {
    size <= MAX_BLOCK + crate::storage::PADDING && enabled()
}

/// A kept block of `size` bytes, zeroed, or `None` when this thread keeps none of that size.
/// The block is the caller's to free with the global allocator and `size` at
/// `MALLOC_ALIGN` (or to hand back with [`keep`]).
pub(crate) fn take_zeroed(size: usize) -> Option<*mut u8> {
    if !fits(size) {
        return None;
    }
    let base = CACHE
        .try_with(|c| {
            let mut c = c.try_borrow_mut().ok()?;
            let i = c.blocks.iter().rposition(|&(s, _)| s == size)?;
            c.bytes -= size;
            Some(c.blocks.swap_remove(i).1)
        })
        .ok()
        .flatten()?;
    // SAFETY: the block is `size` bytes (see `keep`), and ours alone now.
    unsafe { std::ptr::write_bytes(base, 0, size) };
    Some(base)
}

/// Keeps `base` for reuse; false when the cache is full or the block too big (the caller then
/// frees it).
///
/// # Safety
/// `base` came from the global allocator with `size` bytes at `MALLOC_ALIGN`, and nothing
/// else frees or uses it after this returns true.
pub(crate) unsafe fn keep(size: usize, base: *mut u8) -> bool {
    if !fits(size) {
        return false;
    }
    CACHE
        .try_with(|c| {
            let Ok(mut c) = c.try_borrow_mut() else { return false };
            if c.blocks.len() >= MAX_BLOCKS || c.bytes + size > MAX_BYTES {
                return false;
            }
            c.bytes += size;
            c.blocks.push((size, base));
            true
        })
        .unwrap_or(false)
}

/// Frees the blocks this thread keeps (a long-lived thread that is done with models).
pub fn clear() {
    let _ = CACHE.try_with(|c| {
        if let Ok(mut c) = c.try_borrow_mut() {
            let kept = std::mem::replace(&mut *c, Cache { blocks: Vec::new(), bytes: 0 });
            drop(c);
            drop(kept);
        }
    });
}

/// The number of blocks and bytes this thread keeps (for tests and diagnostics).
pub fn kept() -> (usize, usize) {
    CACHE.try_with(|c| c.try_borrow().map(|c| (c.blocks.len(), c.bytes)).unwrap_or((0, 0))).unwrap_or((0, 0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::Storage;
    use crate::Device;

    // Each test runs on a thread of its own, so it sees only its own thread's cache.

    #[test]
    fn the_switch_reads_the_usual_spellings_and_nothing_else() {
        for off in ["0", "off", "OFF", " false", "no ", " 0 "] {
            assert_eq!(switch(off), Some(false), "{off:?}");
        }
        for on in ["1", "on", "True", "yes"] {
            assert_eq!(switch(on), Some(true), "{on:?}");
        }
        for neither in ["", "2", "disable", "o f f"] {
            assert_eq!(switch(neither), None, "{neither:?}");
        }
    }

    #[test]
    fn a_freed_block_is_reused_zeroed_for_the_same_size() {
        let s = Storage::alloc(1000, Device::cpu(0)).unwrap();
        s.write(0, &[0xab; 1000]).unwrap();
        let p = s.as_ptr();
        assert_eq!(kept(), (0, 0));
        drop(s);
        if !enabled() {
            // RELAXVM_BLOCK_CACHE=0 (the AddressSanitizer run): nothing is kept.
            assert_eq!(kept(), (0, 0));
            return;
        }
        assert_eq!(kept().0, 1, "kept on drop");
        let other = Storage::alloc(999, Device::cpu(0)).unwrap();
        assert_ne!(other.as_ptr(), p, "another size is a new block");
        let again = Storage::alloc(1000, Device::cpu(0)).unwrap();
        assert_eq!(again.as_ptr(), p, "the same size reuses it");
        assert!(again.bytes().iter().all(|b| *b == 0), "reused blocks are zeroed");
        assert_eq!(kept(), (0, 0));
    }

    #[test]
    fn the_cache_is_bounded_and_can_be_cleared() {
        drop(Storage::alloc(MAX_BLOCK + 1, Device::cpu(0)).unwrap());
        assert_eq!(kept(), (0, 0), "big blocks are freed");
        drop(Storage::alloc(MAX_BLOCK, Device::cpu(0)).unwrap());
        assert_eq!(kept().0, usize::from(enabled()), "a storage of MAX_BLOCK bytes is kept");
        clear();
        assert_eq!(kept(), (0, 0));
        if !enabled() {
            return;
        }
        let many: Vec<Storage> = (0..MAX_BLOCKS + 5).map(|_| Storage::alloc(64, Device::cpu(0)).unwrap()).collect();
        drop(many);
        assert_eq!(kept().0, MAX_BLOCKS, "at most MAX_BLOCKS");
        std::thread::spawn(|| {
            let size = MAX_BYTES / 16 - crate::storage::PADDING;
            let big: Vec<Storage> = (0..40).map(|_| Storage::alloc(size, Device::cpu(0)).unwrap()).collect();
            drop(big);
            assert_eq!(kept(), (16, MAX_BYTES), "at most MAX_BYTES");
        })
        .join()
        .unwrap();
    }

    #[test]
    fn blocks_freed_on_an_exiting_thread_are_freed_with_it() {
        // Under AddressSanitizer (CI runs this crate's tests with it) a leak here fails the run.
        std::thread::spawn(|| {
            drop(Storage::alloc(128, Device::cpu(0)).unwrap());
            assert_eq!(kept().0, usize::from(enabled()));
        })
        .join()
        .unwrap();
        // A block made on one thread and freed on another goes to the freeing thread's cache.
        let s = std::thread::spawn(|| Storage::alloc(256, Device::cpu(0)).unwrap()).join().unwrap();
        drop(s);
        assert_eq!(kept().0, usize::from(enabled()));
    }
}
