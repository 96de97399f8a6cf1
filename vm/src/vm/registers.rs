//! Register writes the interpreter's hot path inlines: a move as two word-sized stores, a
//! scalar over a scalar without drop glue, and truncation that drops only owning values.

use crate::value::Value;
use std::mem::ManuallyDrop;

/// Writes a register, moving the value as two word-sized loads and stores.
///
/// A plain move compiles to a 16-byte vector load of a value that the callee had just stored
/// as two 8-byte words, which defeats store-to-load forwarding and stalled every call; moving
/// it word by word keeps the loads the same width as the stores.
#[inline(always)]
pub(super) fn set_reg(slot: &mut Value, v: Value) {
    type Word = std::mem::MaybeUninit<u64>;
    const _: () = assert!(std::mem::size_of::<Value>() == 2 * std::mem::size_of::<u64>());
    let v = ManuallyDrop::new(v);
    let src = (&*v as *const Value).cast::<Word>();
    // SAFETY: `Value` is exactly two words (asserted above) and `src` points to an initialised
    // value; reading its words as `MaybeUninit` is sound even where they hold padding. Volatile
    // keeps the two reads from being merged into one wide load.
    let (w0, w1) = unsafe { (src.read_volatile(), src.add(1).read_volatile()) };
    let old = std::mem::replace(slot, Value::Null);
    let dst = (slot as *mut Value).cast::<Word>();
    // SAFETY: `slot` holds a valid (trivially droppable) Null, which we overwrite with the bits
    // of `v`, whose ownership moves here (`v` is never dropped: ManuallyDrop).
    unsafe {
        dst.write(w0);
        dst.add(1).write(w1);
    }
    // Scalars are overwritten all the time in loops: skip the out-of-line drop glue for them.
    if old.owns_heap() {
        drop(old);
    } else {
        std::mem::forget(old);
    }
}

/// Writes a register with a scalar (a value that owns nothing), such as an int operation's
/// result: over an old value that owns nothing too (the common case in loops), the new one is
/// two stores, with no read of the old value's payload; anything else is dropped out of line.
#[inline(always)]
pub(super) fn set_scalar(slot: &mut Value, v: Value) {
    debug_assert!(!v.owns_heap());
    if slot.owns_heap() {
        drop(std::mem::replace(slot, v));
    } else {
        // SAFETY: the old value owns nothing, so overwriting it without dropping leaks nothing.
        unsafe { std::ptr::write(slot, v) };
    }
}

/// `regs.truncate(len)`, dropping out of line only the values that own something: a frame's
/// registers are mostly scalars and nulls, which need no drop call.
#[inline]
pub(super) fn truncate_regs(regs: &mut Vec<Value>, len: usize) {
    while regs.len() > len {
        match regs.pop() {
            Some(v) if v.owns_heap() => drop(v),
            Some(v) => std::mem::forget(v),
            None => break,
        }
    }
}
