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
use std::collections::HashMap;

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
}

// SAFETY: the raw pointers in `header` (null) and `dl` (into the tensor `value` owns) are
// never written after the cell is made; reading them from several threads is reading the
// value's immutable shape and data address. The value itself is Send and Sync.
unsafe impl Send for Cell {}
// SAFETY: as above.
unsafe impl Sync for Cell {}

impl Cell {
    /// Whether object value `a` (which points to this cell) carries the stamp the cell was made
    /// under (see the module's note).
    fn made_for(&self, a: &TVMFFIAny) -> bool {
        self.stamp == a.small_str_len
    }

    fn new(value: Value, stamp: u32) -> Cell {
        let type_index = match &value {
            Value::Tensor(_) => object_index::TENSOR,
            Value::Shape(_) => object_index::SHAPE,
            Value::Tuple(_) => object_index::ARRAY,
            Value::Str(_) => object_index::STR,
            Value::Func(_) => object_index::FUNCTION,
            _ => object_index::OBJECT,
        };
        let dl = match &value {
            // The shape pointer points into the tensor the cell owns, which never moves.
            Value::Tensor(t) => convert::dl_tensor(t, None),
            _ => DLTensor {
                data: std::ptr::null_mut(),
                device: crate::ffi::abi::DLDevice { device_type: 1, device_id: 0 },
                ndim: 0,
                dtype: crate::ffi::abi::DLDataType { code: 0, bits: 0, lanes: 0 },
                shape: std::ptr::null_mut(),
                strides: std::ptr::null_mut(),
                byte_offset: 0,
            },
        };
        let header = TVMFFIObject { combined_ref_count: 1, type_index, padding: 0, deleter: std::ptr::null() };
        Cell { header, dl, value, holders: 0, stamp }
    }
}

/// Cells owned by one list or one running function, by address.
// Boxed cells keep their addresses (which native code holds) while the lists move.
#[allow(clippy::vec_box)]
#[derive(Default)]
pub struct Cells {
    // Addresses are found at every call native code makes: hashed by a multiplication (the
    // addresses are relaxvm's own allocations, not input an attacker picks to collide).
    by_address: HashMap<usize, Box<Cell>, rustc_hash::FxBuildHasher>,
    /// Cells no register holds any more, whose values are not dropped yet: the AnyList
    /// functions that let go of a cell run inside the kernel-call guard, where no destructor
    /// may run (a value's may run any code, a Python finalizer); [`Cells::drop_released`]
    /// drops them from outside it.
    released: Vec<Box<Cell>>,
    /// Emptied cells, reused for the next values (no allocation per result).
    spare: Vec<Box<Cell>>,
    /// The stamp of the cells made now (see the module's note; 0 for a VM's constant and
    /// function lists, which are never recycled).
    stamp: u32,
}

/// The stamps of runs: each run's cells get a new one. (After 2^32 runs a stamp comes back; an
/// address kept that long could then be taken for a live cell of the same address, whose value
/// is then read: a wrong value, never freed memory.)
static NEXT_STAMP: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(1);

/// The most emptied cells a VM keeps between runs (what a larger run made beyond them is freed).
const MAX_SPARE: usize = 1 << 12;

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
        Cells { stamp: NEXT_STAMP.fetch_add(1, std::sync::atomic::Ordering::Relaxed), ..Default::default() }
    }

    /// Empties these cells for another run, keeping their memory (up to [`MAX_SPARE`] cells)
    /// and taking a new stamp: no address handed out so far is found any more. Drops the
    /// values: not inside the kernel-call guard.
    pub fn recycle(&mut self) {
        self.drop_released();
        for (_, mut c) in self.by_address.drain() {
            c.value = Value::Null;
            if self.spare.len() < MAX_SPARE {
                self.spare.push(c);
            }
        }
        self.stamp = NEXT_STAMP.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
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
        for mut c in self.released.drain(..) {
            c.value = Value::Null;
            self.spare.push(c);
        }
    }

    fn insert(&mut self, v: Value) -> TVMFFIAny {
        let cell = match self.spare.pop() {
            Some(mut spare) => {
                // Its value is None (`drop_released`): overwriting it runs no destructor.
                *spare = Cell::new(v, self.stamp);
                spare
            }
            None => Box::new(Cell::new(v, self.stamp)),
        };
        let address = &*cell as *const Cell as usize;
        let mut any = TVMFFIAny::ptr(cell.header.type_index, (&*cell as *const Cell).cast());
        any.small_str_len = self.stamp;
        self.by_address.insert(address, cell);
        any
    }

    /// The cell object value `a` points to, if it is one of these, made under the stamp `a` carries.
    fn find(&self, a: &TVMFFIAny) -> Option<&Cell> {
        self.by_address.get(&(a.payload as usize)).map(|c| &**c).filter(|c| c.made_for(a))
    }

    /// The value of the cell object value `a` points to, if it is one of these (see [`Cells::find`]).
    pub fn get(&self, a: &TVMFFIAny) -> Option<&Value> {
        self.find(a).map(|c| &c.value)
    }

    /// Counts one more register holding the cell `a` points to; false when it is not one of these.
    pub fn hold(&mut self, a: &TVMFFIAny) -> bool {
        match self.by_address.get_mut(&(a.payload as usize)) {
            Some(c) if c.made_for(a) => {
                c.holders += 1;
                true
            }
            _ => false,
        }
    }

    /// Counts one register fewer holding the cell `a` points to, releasing the cell when none
    /// holds it any more (nothing when it is not one of these): its address is then refused,
    /// and its value dropped by the next [`Cells::drop_released`] (no destructor runs here).
    pub fn unhold(&mut self, a: &TVMFFIAny) {
        let address = a.payload as usize;
        if let Some(c) = self.by_address.get_mut(&address) {
            if !c.made_for(a) {
                return;
            }
            c.holders = c.holders.saturating_sub(1);
            if c.holders == 0 {
                if let Some(cell) = self.by_address.remove(&address) {
                    self.released.push(cell);
                }
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
