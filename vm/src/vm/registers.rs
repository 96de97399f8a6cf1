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
/// (Storing only the payload over a value of the same kind was measured: its test of the old
/// kind costs what the tag's store saves, and in the build that had it, with the read of a
/// fused op's target `DecodedProgram::fused_target` describes, the counting loop came out 2
/// instructions an iteration longer.)
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
/// registers are mostly scalars and nulls, which need no drop call. The length is cut first
/// and the values then visited in place (a `pop` each tested the length and moved the value
/// out: twice the instructions per register).
#[inline]
pub(super) fn truncate_regs(regs: &mut Vec<Value>, len: usize) {
    let Some(tail) = regs.len().checked_sub(len) else { return };
    // SAFETY: `len <= regs.len()`, so `len..len + tail` are the initialised values past the new
    // length. The length is cut before any is dropped: a drop that panicked would leave the
    // rest leaked, never dropped twice; each is dropped once, in place, and never read again.
    unsafe {
        let rest = regs.as_mut_ptr().add(len);
        regs.set_len(len);
        for i in 0..tail {
            let v = rest.add(i);
            if (*v).owns_heap() {
                std::ptr::drop_in_place(v);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// A scalar written over a value of its kind, of another scalar kind or over an owning
    /// value is the new value, and what it replaced is dropped once.
    #[test]
    fn a_scalar_over_any_value_is_that_scalar() {
        let t = Value::tuple(vec![Value::Int(1)]);
        let Value::Tuple(ref arc) = t else { panic!("a tuple") };
        let cases = [
            (Value::Int(3), Value::Int(-7)),
            (Value::Bool(true), Value::Bool(false)),
            (Value::Bool(false), Value::Int(5)),
            (Value::Int(5), Value::Bool(true)),
            (Value::Null, Value::Int(i64::MIN)),
            (Value::Float(1.5), Value::Bool(false)),
            (t.clone(), Value::Int(2)),
            (t.clone(), Value::Bool(true)),
        ];
        assert_eq!(Arc::strong_count(arc), 3);
        for (old, new) in cases {
            let mut slot = old;
            set_scalar(&mut slot, new.clone());
            assert!(slot.same_object(&new), "{new:?} written");
        }
        assert_eq!(Arc::strong_count(arc), 1, "each replaced tuple dropped once");
    }

    /// Truncation drops each owning value past the length once, keeps those below it, and
    /// leaves a stack already at or below the length as it is.
    #[test]
    fn truncate_drops_what_is_cut_once_and_keeps_the_rest() {
        let t = Value::tuple(vec![Value::Int(1)]);
        let Value::Tuple(ref arc) = t else { panic!("a tuple") };
        let mut regs = vec![t.clone(), Value::Int(2), t.clone(), Value::Null, t.clone()];
        assert_eq!(Arc::strong_count(arc), 4);
        truncate_regs(&mut regs, 6);
        assert_eq!((regs.len(), Arc::strong_count(arc)), (5, 4));
        truncate_regs(&mut regs, 2);
        assert_eq!((regs.len(), Arc::strong_count(arc)), (2, 2));
        assert!(regs[0].same_object(&t) && matches!(regs[1], Value::Int(2)));
        truncate_regs(&mut regs, 0);
        assert_eq!((regs.len(), Arc::strong_count(arc)), (0, 1));
    }
}
