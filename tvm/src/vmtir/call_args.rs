//! The arguments of a call native code makes ([`super::frame::call`]): values of cells
//! borrowed, values made for the call owned.

use relaxvm::Value;
use smallvec::SmallVec;

/// A call's arguments as the called function sees them: the values of cells (the function's
/// registers, constants and functions) borrowed, as bitwise copies that hold no reference and
/// are never dropped, and values made for the call (scalars, the VM state, copies of
/// DLTensors) owned, dropped with this list.
///
/// A borrowed value stays valid while the call lasts because no cell's value is dropped or
/// overwritten meanwhile: values are dropped only by `Cells::drop_released`, which
/// `Frame::drop_released_unless_borrowed` skips while a call of the frame borrows
/// (`Frame::borrowing`; a kernel the callee runs may call into the same frame), and at the end of
/// the run; a cell is refilled only once dropped (`Cells` reuses no released cell before that).
/// The constant and function lists are never changed while the VM lives.
pub struct CallArgs {
    values: SmallVec<[std::mem::ManuallyDrop<Value>; 8]>,
    /// Bit `i`: whether this list owns `values[i]` (else it is borrowed). Values from the 65th
    /// on are always owned (a cell's is cloned): one word of bits for the calls TVM makes.
    owned: u64,
}

impl CallArgs {
    pub fn with_capacity(n: usize) -> Self {
        CallArgs { values: SmallVec::with_capacity(n), owned: 0 }
    }

    /// Whether this list owns `values[i]`.
    fn owns(&self, i: usize) -> bool {
        i >= 64 || self.owned & (1 << i) != 0
    }

    /// Appends a value of a cell, borrowed (cloned past the 64th).
    ///
    /// # Safety
    /// `v` is the value of a cell of the running frame or of its program lists, and the frame
    /// counts a borrowing call (`Frame::borrowing`) from before the call until this list is
    /// dropped.
    pub unsafe fn borrow(&mut self, v: &Value) {
        if self.values.len() >= 64 {
            return self.own(v.clone());
        }
        // SAFETY: a bitwise copy, never dropped (`ManuallyDrop`, its bit of `owned` clear),
        // read only while the original is neither dropped nor changed (the caller's contract).
        self.values.push(std::mem::ManuallyDrop::new(unsafe { std::ptr::read(v) }));
    }

    /// Appends a value made for the call.
    pub fn own(&mut self, v: Value) {
        let i = self.values.len();
        if i < 64 {
            self.owned |= 1 << i;
        }
        self.values.push(std::mem::ManuallyDrop::new(v));
    }

    /// The arguments, as the called function takes them.
    pub fn as_values(&self) -> &[Value] {
        let items: &[std::mem::ManuallyDrop<Value>] = &self.values;
        // SAFETY: `ManuallyDrop<T>` has the layout of `T` (repr(transparent)).
        unsafe { &*(items as *const [std::mem::ManuallyDrop<Value>] as *const [Value]) }
    }

    /// Drops the owned values and forgets the borrowed ones: the list is empty.
    pub fn clear(&mut self) {
        if self.owned != 0 || self.values.len() > 64 {
            for i in 0..self.values.len() {
                if self.owns(i) {
                    // SAFETY: an owned value, dropped once (the list is emptied right after).
                    unsafe { std::mem::ManuallyDrop::drop(&mut self.values[i]) };
                }
            }
        }
        self.values.clear();
        self.owned = 0;
    }
}

impl Drop for CallArgs {
    fn drop(&mut self) {
        self.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn borrowed_values_are_not_dropped_and_owned_ones_are_past_the_64th_too() {
        let object = |i: usize| {
            let b: Box<dyn std::any::Any + Send + Sync> = Box::new(i);
            Value::Object(std::sync::Arc::new(b))
        };
        let cells: Vec<Value> = (0..70).map(object).collect();
        let made = object(1000);
        let mut args = CallArgs::with_capacity(72);
        // SAFETY: `cells` outlives `args` and is not changed meanwhile.
        unsafe { args.borrow(&cells[0]) };
        args.own(made.clone());
        for c in &cells[1..] {
            // SAFETY: as above.
            unsafe { args.borrow(c) };
        }
        assert_eq!(args.as_values().len(), 71);
        let number = |v: &Value| match v {
            Value::Object(o) => o.downcast_ref::<usize>().copied(),
            _ => None,
        };
        assert_eq!(number(&args.as_values()[1]), Some(1000));
        assert_eq!(number(&args.as_values()[70]), Some(69));
        let counts = |v: &Value| match v {
            Value::Object(o) => std::sync::Arc::strong_count(o),
            _ => 0,
        };
        assert_eq!(counts(&cells[0]), 1, "borrowed: no reference taken");
        assert_eq!(counts(&cells[69]), 2, "the 71st argument is a clone");
        assert_eq!(counts(&made), 2);
        drop(args);
        assert!(cells.iter().all(|c| counts(c) == 1), "clones dropped, borrowed values left alone");
        assert_eq!(counts(&made), 1, "the owned value is dropped");
    }
}
