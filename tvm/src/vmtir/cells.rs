//! relaxvm values as the tvm-ffi objects a VM TIR function holds in its lists.
//!
//! Native code never looks inside an object but one way: a kernel's tensor parameter given a
//! `ffi.Tensor` object (type index 70) reads the `DLTensor` that follows the 24-byte object
//! header. Every value that is not a scalar therefore becomes a [`Cell`]: a header, a
//! `DLTensor` (viewing the tensor, or zeroed), and the value itself, which keeps the tensor's
//! memory and shape alive. Cells are owned by Rust ([`Cells`]); native code only ever holds
//! their addresses, and an address is turned back into a value only when it is found among the
//! cells of the running function, so a stale or forged pointer is an error, never a read of
//! freed memory.
//!
//! A VM keeps a finished run's cells for its next run ([`Cells::recycle`]): their addresses
//! come back. So every object a run hands out is tagged with the run's stamp (in the
//! `small_str_len` word of its tvm-ffi value, zero for objects in tvm-ffi and copied with the
//! value by native code, which never builds object values itself), and a cell is found only
//! under the stamp it was made with: an address kept from a finished run, or from another
//! VM's run, is refused even when its cell lives again.

use crate::ffi::abi::{type_index, DLTensor, TVMFFIAny, TVMFFIObject};
use crate::ffi::convert;
use relaxvm::{Error, Result, Tensor, Value};

/// tvm-ffi's static type indices of the objects relaxvm's values stand for.
mod object_index {
    /// `ffi.Object`: storage, opaque objects.
    pub const OBJECT: i32 = 64;
    /// `ffi.String`.
    pub const STR: i32 = 65;
    /// `ffi.Function`.
    pub const FUNCTION: i32 = 68;
    /// `ffi.Shape`.
    pub const SHAPE: i32 = 69;
    /// `ffi.Tensor`: the header is followed by a `DLTensor`.
    pub const TENSOR: i32 = 70;
    /// `ffi.Array` (a tuple).
    pub const ARRAY: i32 = 71;
}

/// One value as a tvm-ffi object: header, then the `DLTensor` kernels read, then the value.
#[repr(C)]
pub struct Cell {
    header: TVMFFIObject,
    dl: DLTensor,
    value: Value,
    /// How many registers of the running function hold the cell (relaxvm's count, which native
    /// code never sees: it does not count references in the header).
    holders: u32,
    /// The stamp of the run that made it (see the module's note).
    stamp: u32,
    /// Whether the cell is handed out and not released: its address is found only then.
    live: bool,
}

// SAFETY: the raw pointers in `header` (null) and `dl` (into the tensor `value` owns) are
// never written after the cell is made; reading them from several threads is reading the
// value's immutable shape and data address. The value itself is Send and Sync.
unsafe impl Send for Cell {}
// SAFETY: as above.
unsafe impl Sync for Cell {}

impl Cell {
    /// Whether object value `a` (which points to this cell) is the cell's current value: the
    /// cell is handed out and not released, and `a` carries the stamp it was made under (see
    /// the module's note).
    fn made_for(&self, a: &TVMFFIAny) -> bool {
        self.live && self.stamp == a.small_str_len
    }

    /// An empty cell (no value, not live), to be filled.
    fn empty() -> Cell {
        let header = TVMFFIObject {
            combined_ref_count: 1,
            type_index: object_index::OBJECT,
            padding: 0,
            deleter: std::ptr::null(),
        };
        Cell { header, dl: no_tensor(), value: Value::Null, holders: 0, stamp: 0, live: false }
    }

    /// Makes this empty cell (its value None: replacing it runs no destructor) hold `value`,
    /// live under `stamp`, written in place.
    fn fill(&mut self, value: Value, stamp: u32) {
        self.header.type_index = match &value {
            Value::Tensor(_) => object_index::TENSOR,
            Value::Shape(_) => object_index::SHAPE,
            Value::Tuple(_) => object_index::ARRAY,
            Value::Str(_) => object_index::STR,
            Value::Func(_) => object_index::FUNCTION,
            _ => object_index::OBJECT,
        };
        self.dl = match &value {
            // The shape pointer points into the tensor the cell owns, which never moves.
            Value::Tensor(t) => convert::dl_tensor(t, None),
            _ => no_tensor(),
        };
        self.value = value;
        self.holders = 0;
        self.stamp = stamp;
        self.live = true;
    }
}

/// The `DLTensor` of a cell that holds no tensor (zeroed: kernels never read it).
fn no_tensor() -> DLTensor {
    DLTensor {
        data: std::ptr::null_mut(),
        device: crate::ffi::abi::DLDevice { device_type: 1, device_id: 0 },
        ndim: 0,
        dtype: crate::ffi::abi::DLDataType { code: 0, bits: 0, lanes: 0 },
        shape: std::ptr::null_mut(),
        strides: std::ptr::null_mut(),
        byte_offset: 0,
    }
}

/// Cells owned by one list or one running function, in a slab: chunks of cells that never move
/// (native code holds their addresses), so an address is turned back into its cell by
/// arithmetic, with no hashing: its chunk is the one whose range holds it, its position the
/// offset divided by the cell size (an address inside a cell, or between chunks, is no cell).
#[derive(Default)]
pub struct Cells {
    /// Chunk `k` holds `FIRST_CHUNK << k` cells.
    chunks: Vec<Box<[Cell]>>,
    /// The next cell never filled since the last [`Cells::recycle`] (cells from here on hold
    /// no value).
    fresh: Slot,
    /// Emptied cells below `fresh`, filled again before fresh ones.
    free: Vec<Slot>,
    /// Cells no register holds any more, whose values are not dropped yet: the AnyList
    /// functions that let go of a cell run inside the kernel-call guard, where no destructor
    /// may run (a value's may run any code, a Python finalizer); [`Cells::drop_released`]
    /// drops them from outside it.
    released: Vec<Slot>,
    /// The stamp of the cells made now (see the module's note; 0 for a VM's constant and
    /// function lists, which are never recycled).
    stamp: u32,
}

/// A cell's place in the slab.
#[derive(Clone, Copy, Default)]
struct Slot {
    chunk: u32,
    index: u32,
}

/// The cells of the first chunk (each next chunk doubles).
const FIRST_CHUNK: usize = 16;

/// The stamps of runs: each run's cells get a new one. (After 2^32 runs a stamp comes back; an
/// address kept that long could then be taken for a live cell of the same address, whose value
/// is then read: a wrong value, never freed memory.)
static NEXT_STAMP: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(1);

/// A new run's stamp (see [`stamp_from`]).
fn next_stamp() -> u32 {
    stamp_from(&NEXT_STAMP)
}

/// The next stamp of `counter`, never 0: 0 is reserved for the cells of the constant and
/// function lists, which are never recycled, and is what `small_str_len` holds in objects not
/// made by relaxvm; a run stamped 0 (after the counter wraps) would take them for its own.
fn stamp_from(counter: &std::sync::atomic::AtomicU32) -> u32 {
    loop {
        let s = counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        if s != 0 {
            return s;
        }
    }
}

/// The most chunks a VM keeps between runs (16 + 32 + ... + 2048 cells: what a larger run made
/// beyond them is freed).
const MAX_KEPT_CHUNKS: usize = 8;

/// A tensor passed to native code as an aligned, compact copy (see [`Cells::hand_out`]).
pub struct Staged {
    /// The tensor the program holds.
    pub original: Tensor,
    /// What native code sees and may write.
    pub copy: Tensor,
}

impl Cells {
    /// `v` handed out as a tvm-ffi value: scalars by value, the VM state as `ctx`, anything else as a new
    /// cell owned here. A tensor kernels cannot view in place (strided, misaligned, read-only
    /// foreign memory) goes as an aligned copy, recorded in `staged` to be written back.
    pub fn hand_out(&mut self, v: Value, ctx: *const std::ffi::c_void, staged: &mut Vec<Staged>) -> Result<TVMFFIAny> {
        match &v {
            Value::VmState => return Ok(TVMFFIAny::ptr(type_index::OPAQUE_PTR, ctx)),
            Value::Tensor(t) if !crate::ffi::kernel::viewable(t) => {
                let copy = Tensor::from_bytes(t.dtype(), t.shape().clone(), &t.contiguous_bytes()?)?;
                staged.push(Staged { original: t.clone(), copy: copy.clone() });
                return Ok(self.insert(Value::Tensor(copy)));
            }
            _ => {}
        }
        if matches!(
            v,
            Value::Null | Value::Int(_) | Value::Float(_) | Value::Bool(_) | Value::DType(_) | Value::Device(_)
        ) {
            if let Ok(Some(any)) = convert::scalar_to_ffi(&v, &String::new) {
                return Ok(any);
            }
        }
        Ok(self.insert(v))
    }

    /// No cells yet, for a new run (with a stamp of its own).
    pub fn for_run() -> Self {
        Cells { stamp: next_stamp(), ..Default::default() }
    }

    /// Empties these cells for another run, keeping their memory (up to [`MAX_KEPT_CHUNKS`]
    /// chunks) and taking a new stamp: no address handed out so far is found any more. Drops
    /// the values: not inside the kernel-call guard.
    pub fn recycle(&mut self) {
        let fresh = self.fresh;
        for (k, chunk) in self.chunks.iter_mut().enumerate().take(fresh.chunk as usize + 1) {
            let used = if k == fresh.chunk as usize { fresh.index as usize } else { chunk.len() };
            for c in &mut chunk[..used] {
                c.live = false;
                c.value = Value::Null;
            }
        }
        self.chunks.truncate(MAX_KEPT_CHUNKS);
        self.released.clear();
        self.free.clear();
        self.fresh = Slot::default();
        self.stamp = next_stamp();
    }

    /// Drops the values of the cells no register holds any more (see `released`); their
    /// memory is reused for later cells. Runs destructors: not inside the kernel-call guard.
    #[inline]
    pub fn drop_released(&mut self) {
        if !self.released.is_empty() {
            self.drop_released_now();
        }
    }

    fn drop_released_now(&mut self) {
        // Popped, not taken: the list keeps its memory for the next releases.
        while let Some(s) = self.released.pop() {
            self.chunks[s.chunk as usize][s.index as usize].value = Value::Null;
            self.free.push(s);
        }
    }

    /// An empty cell's place: a freed one, the next fresh one, or the first of a new chunk.
    fn vacant(&mut self) -> Slot {
        if let Some(s) = self.free.pop() {
            return s;
        }
        let s = self.fresh;
        if s.chunk as usize == self.chunks.len() {
            let len = FIRST_CHUNK << self.chunks.len();
            self.chunks.push((0..len).map(|_| Cell::empty()).collect());
        }
        let len = self.chunks[s.chunk as usize].len() as u32;
        self.fresh =
            if s.index + 1 == len { Slot { chunk: s.chunk + 1, index: 0 } } else { Slot { index: s.index + 1, ..s } };
        s
    }

    fn insert(&mut self, v: Value) -> TVMFFIAny {
        let s = self.vacant();
        let stamp = self.stamp;
        let cell = &mut self.chunks[s.chunk as usize][s.index as usize];
        // Its value is None (emptied, or never filled).
        cell.fill(v, stamp);
        let mut any = TVMFFIAny::ptr(cell.header.type_index, (&*cell as *const Cell).cast());
        any.small_str_len = stamp;
        any
    }

    /// Where the cell at `address` is, if it is one of these (live or not).
    #[inline]
    fn locate(&self, address: usize) -> Option<Slot> {
        let size = std::mem::size_of::<Cell>();
        for (k, chunk) in self.chunks.iter().enumerate() {
            let offset = address.wrapping_sub(chunk.as_ptr() as usize);
            if offset < chunk.len() * size {
                return offset.is_multiple_of(size).then_some(Slot { chunk: k as u32, index: (offset / size) as u32 });
            }
        }
        None
    }

    /// The live cell object value `a` points to, if it is one of these, made under the stamp
    /// `a` carries, with its place.
    #[inline]
    fn find_mut(&mut self, a: &TVMFFIAny) -> Option<(Slot, &mut Cell)> {
        let s = self.locate(a.payload as usize)?;
        let c = &mut self.chunks[s.chunk as usize][s.index as usize];
        c.made_for(a).then_some((s, c))
    }

    /// The value of the cell object value `a` points to, if it is one of these, live and made
    /// under the stamp `a` carries.
    #[inline]
    pub fn get(&self, a: &TVMFFIAny) -> Option<&Value> {
        let s = self.locate(a.payload as usize)?;
        let c = &self.chunks[s.chunk as usize][s.index as usize];
        c.made_for(a).then_some(&c.value)
    }

    /// Counts one more register holding the cell `a` points to; false when it is not one of these.
    #[inline]
    pub fn hold(&mut self, a: &TVMFFIAny) -> bool {
        match self.find_mut(a) {
            Some((_, c)) => {
                c.holders += 1;
                true
            }
            None => false,
        }
    }

    /// Counts one register fewer holding the cell `a` points to, releasing the cell when none
    /// holds it any more (nothing when it is not one of these): its address is then refused,
    /// and its value dropped by the next [`Cells::drop_released`] (no destructor runs here).
    #[inline]
    pub fn unhold(&mut self, a: &TVMFFIAny) {
        if let Some((s, c)) = self.find_mut(a) {
            c.holders = c.holders.saturating_sub(1);
            if c.holders == 0 {
                c.live = false;
                self.released.push(s);
            }
        }
    }
}

/// Whether `a` holds an object (its payload is then a cell address).
pub fn is_object(a: &TVMFFIAny) -> bool {
    a.type_index >= type_index::STATIC_OBJECT_BEGIN
}

/// The error for an object address that no list of the running function holds.
pub fn unknown_object(a: &TVMFFIAny, what: &str) -> Error {
    Error::value(format!(
        "{what}: an object (type index {}) at {:#x} that relaxvm did not hand to this function in this run, or that it has released",
        a.type_index, a.payload
    ))
}

/// A list of values as tvm-ffi values, with the cells it owns: the constant and function
/// lists of a VM TIR function, made once per call site and shared by its calls.
pub struct Prepared {
    /// The list native code reads.
    pub anys: Vec<TVMFFIAny>,
    /// The cells its objects point to.
    pub cells: Cells,
}

impl Prepared {
    /// The list of `values` (never the VM state; tensors that kernels cannot view are passed
    /// as copies, which nothing writes back: constants are not outputs).
    pub fn new(values: &[Value]) -> Result<Self> {
        let mut cells = Cells::default();
        let mut staged = Vec::new();
        let anys = values
            .iter()
            .map(|v| cells.hand_out(v.clone(), std::ptr::null(), &mut staged))
            .collect::<Result<Vec<_>>>()?;
        Ok(Prepared { anys, cells })
    }
}

/// Whether native code may keep `a` in a register: an object (checked by the caller) or a value
/// held inline. A pointer (a string, a DLTensor) could outlive what it points to.
pub fn storable(a: &TVMFFIAny) -> bool {
    is_object(a)
        || matches!(
            a.type_index,
            type_index::NONE
                | type_index::INT
                | type_index::BOOL
                | type_index::FLOAT
                | type_index::DATA_TYPE
                | type_index::DEVICE
                | type_index::SMALL_STR
        )
}

/// The value of an inline `a` (see [`storable`]).
pub fn inline_value(a: &TVMFFIAny) -> Result<Value> {
    match a.type_index {
        type_index::DATA_TYPE | type_index::DEVICE | type_index::SMALL_STR => {
            let mut none = convert::CallbackArgs::default();
            // SAFETY: these kinds are held inline: `value` reads no pointer for them.
            unsafe { none.value(a) }
        }
        _ => convert::result_from_ffi(a),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stamp_is_never_zero_when_the_counter_wraps() {
        let counter = std::sync::atomic::AtomicU32::new(u32::MAX);
        assert_eq!(stamp_from(&counter), u32::MAX);
        assert_eq!(stamp_from(&counter), 1, "0 is skipped");
        assert_eq!(stamp_from(&counter), 2);
    }

    fn moved(a: TVMFFIAny, by: isize) -> TVMFFIAny {
        TVMFFIAny { payload: (a.payload as isize + by) as u64, ..a }
    }

    #[test]
    fn only_a_live_cell_s_own_address_and_stamp_find_it() {
        let mut cells = Cells::for_run();
        // Past the first chunk: the lookup finds cells of every chunk.
        let anys: Vec<TVMFFIAny> = (0..FIRST_CHUNK * 3 + 1).map(|i| cells.insert(Value::str(&i.to_string()))).collect();
        assert_eq!(cells.chunks.len(), 3);
        for (i, a) in anys.iter().enumerate() {
            assert!(matches!(cells.get(a), Some(Value::Str(s)) if **s == *i.to_string()), "cell {i}");
        }
        let last = *anys.last().unwrap();
        let size = std::mem::size_of::<Cell>() as isize;
        // An address inside a cell, the next cell (not filled yet), before the first chunk,
        // another stamp: none is a cell.
        assert!(cells.get(&moved(last, 8)).is_none());
        assert!(cells.get(&moved(last, size)).is_none());
        assert!(cells.get(&moved(anys[0], -size)).is_none());
        assert!(cells.get(&TVMFFIAny { small_str_len: last.small_str_len + 1, ..last }).is_none());
        assert!(!cells.hold(&moved(last, 8)));
        // A released cell is refused, and its address is reused (by the same run) for the next value.
        assert!(cells.hold(&anys[5]));
        cells.unhold(&anys[5]);
        assert!(cells.get(&anys[5]).is_none());
        assert!(!cells.hold(&anys[5]));
        cells.drop_released();
        let again = cells.insert(Value::str("again"));
        assert_eq!(again.payload, anys[5].payload);
        // After recycling, the same addresses come back under a new stamp: the old values are refused.
        cells.recycle();
        let first = cells.insert(Value::str("next run"));
        assert_eq!(first.payload, anys[0].payload);
        assert!(cells.get(&anys[0]).is_none());
        assert!(matches!(cells.get(&first), Some(Value::Str(s)) if &**s == "next run"));
    }

    #[test]
    fn recycling_keeps_at_most_the_first_chunks() {
        let mut cells = Cells::for_run();
        let n: usize = (0..=MAX_KEPT_CHUNKS).map(|k| FIRST_CHUNK << k).sum();
        for _ in 0..n {
            cells.insert(Value::str("x"));
        }
        assert_eq!(cells.chunks.len(), MAX_KEPT_CHUNKS + 1);
        cells.recycle();
        assert_eq!(cells.chunks.len(), MAX_KEPT_CHUNKS);
        assert!(cells.chunks.iter().flat_map(|c| c.iter()).all(|c| !c.live && matches!(c.value, Value::Null)));
    }
}
