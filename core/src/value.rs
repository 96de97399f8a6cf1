//! Dynamically typed values: what registers hold and packed functions take and return.
//! A value can be a packed function, which takes values: so the packed-function types are
//! declared here, beside [`Value`], and made and called by the methods in [`crate::packed`].

pub mod int_op;
pub mod seal;
mod selected;
mod site_views;
mod vm_handle;

pub use selected::Selected;
pub use vm_handle::{CallCtx, ProgramLists, VmHandle};

use crate::arc_string::ArcString;
use crate::cost::Cost;
use crate::device::Device;
use crate::dtype::DataType;
use crate::error::{Error, Result};
use crate::shape::Shape;
use crate::storage::Storage;
use crate::tensor::Tensor;
use std::any::Any;
use std::collections::HashSet;
use std::fmt;
use std::sync::Arc;

/// A dynamically typed value. Cloning is cheap: heap payloads are reference counted.
///
/// The tag is a full word so that moving a value copies two aligned words, never a patchwork
/// of sub-word fields (which stalled store forwarding on the interpreter's hot path).
#[derive(Clone, Default)]
#[non_exhaustive]
#[repr(u64)]
pub enum Value {
    /// No value (`None` in Python; what `void` destinations would hold).
    #[default]
    Null,
    /// A 64-bit signed integer.
    Int(i64),
    /// A 64-bit float.
    Float(f64),
    /// A boolean.
    Bool(bool),
    /// A data type.
    DType(DataType),
    /// A device.
    Device(Device),
    /// The VM-state register's marker: builtins that take it reach the VM through their
    /// [`CallCtx`].
    VmState,
    // The variants above own nothing and come first, so that `owns_heap` (asked at every
    // register write) is one comparison of the tag.
    /// A string.
    Str(ArcString),
    /// A shape tuple.
    Shape(Shape),
    /// A tensor.
    Tensor(Tensor),
    /// A tuple of values.
    Tuple(Arc<Vec<Value>>),
    /// A function, possibly with captured values (a closure).
    Func(Arc<Closure>),
    /// Raw storage from `alloc_storage`.
    Storage(Storage),
    /// Any other object, opaque to the VM.
    Object(Arc<Box<dyn Any + Send + Sync>>),
}

/// What a function value calls.
#[derive(Clone)]
pub enum Callable {
    /// A bytecode function of an executable, by its function-table index and name.
    Bytecode {
        /// Index in the function table.
        index: u32,
        /// The function's name (to find it again in another VM of its executable).
        name: Arc<str>,
        /// The executable (an `Arc<Executable>` of `relaxvm-isa`, held weakly) whose VM made
        /// this value: a VM runs it only if it runs that executable, so a closure passed to a
        /// VM of another program never runs that program's function of the same name. `None`
        /// for a value made by name outside any VM, which the running VM looks up by name.
        program: Option<std::sync::Weak<dyn Any + Send + Sync>>,
    },
    /// A packed function.
    Packed(PackedFunc),
}

/// A function value with captured arguments, passed after the call's own arguments.
#[derive(Clone)]
pub struct Closure {
    /// What is called.
    pub callable: Callable,
    /// Values appended to every call's arguments.
    pub captured: Vec<Value>,
}

impl Closure {
    /// The function's name (packed functions report theirs).
    pub fn name(&self) -> &str {
        match &self.callable {
            Callable::Bytecode { name, .. } => name,
            Callable::Packed(f) => &f.name,
        }
    }
}

/// The signature every packed function has.
pub type PackedFnSig = dyn Fn(&mut CallCtx<'_>, &[Value]) -> Result<Value> + Send + Sync;

/// A plain function of two values: the form of hot scalar builtins, which the interpreter
/// calls directly, without building an argument list.
pub type BinaryFn = fn(&Value, &Value) -> Result<Value>;

/// A function that returns one of its arguments, or a part of one, by reference ([`Selected`]:
/// `copy`, `tuple_getitem`, `shape_of`): the interpreter then skips the reference-count traffic
/// of a result the destination register already holds. It is given its name for its errors.
pub type SelectFn = for<'a> fn(&str, &'a [Value]) -> Result<Selected<'a>>;

/// Makes, for one call site, a version of a packed function specialised to the operands fixed
/// at load: it is given the call's operands, `Some` for those fixed (immediates, constants,
/// functions) and `None` for registers, and returns a function that computes exactly what the
/// general one does for every argument list with those fixed operands (the same results and
/// the same errors), or `None` to keep the general one. See [`PackedFunc::with_specializer`].
pub type Specializer = dyn Fn(&[Option<&Value>]) -> Option<PackedFunc> + Send + Sync;

/// A named, shareable packed function (made and called by the methods in [`crate::packed`],
/// which use these fields).
#[derive(Clone)]
pub struct PackedFunc {
    pub(crate) f: Arc<PackedFnSig>,
    pub(crate) name: Arc<str>,
    /// What the interpreter's decoder may call instead of `f` (never a different result).
    pub(crate) hints: CallHints,
    pub(crate) cost: Cost,
    pub(crate) origin: Option<Arc<dyn std::any::Any + Send + Sync>>,
}

/// The interpreter's speed hints of a packed function: other forms of the same function that
/// the decoder (`crate::code`) calls instead of the general one where a call site allows. Each
/// computes what the function computes (the same results and errors); none is needed.
#[derive(Clone, Default)]
pub struct CallHints {
    /// The function as a plain function of two values ([`PackedFunc::binary`]).
    pub(crate) binary: Option<BinaryFn>,
    /// The function as one that returns an argument by reference ([`PackedFunc::select`]).
    pub(crate) select: Option<SelectFn>,
    /// Called with one argument, the function returns it itself
    /// ([`PackedFunc::returning_its_argument`]): a call on one register is a register move.
    pub(crate) identity: bool,
    /// The operation a [`BinaryFn`] computes on two ints, which the interpreter runs inline.
    pub(crate) int_op: Option<crate::int_op::IntOp>,
    pub(crate) specializer: Option<Arc<Specializer>>,
    /// How many leading arguments it reads, when it reads only those (see
    /// [`PackedFunc::reading_first`]).
    pub(crate) reads: Option<u32>,
}

impl Value {
    /// A string value.
    pub fn str(s: &str) -> Self {
        Value::Str(s.into())
    }

    /// A tuple value.
    pub fn tuple(items: impl Into<Vec<Value>>) -> Self {
        Value::Tuple(Arc::new(items.into()))
    }

    /// A function value wrapping a packed function.
    pub fn packed(f: PackedFunc) -> Self {
        Value::Func(Arc::new(Closure { callable: Callable::Packed(f), captured: Vec::new() }))
    }

    /// The name of this value's type, as errors print it.
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Null => "null",
            Value::Int(_) => "int",
            Value::Float(_) => "float",
            Value::Bool(_) => "bool",
            Value::Str(_) => "str",
            Value::DType(_) => "dtype",
            Value::Device(_) => "device",
            Value::Shape(_) => "shape",
            Value::Tensor(_) => "tensor",
            Value::Tuple(_) => "tuple",
            Value::Func(_) => "function",
            Value::Storage(_) => "storage",
            Value::VmState => "vm_state",
            Value::Object(_) => "object",
        }
    }

    /// The value as an integer (bools count; floats do not).
    pub fn as_int(&self) -> Result<i64> {
        match self {
            Value::Int(i) => Ok(*i),
            Value::Bool(b) => Ok(i64::from(*b)),
            other => Err(Error::type_mismatch("int", other.describe())),
        }
    }

    /// The value as a float (ints convert).
    pub fn as_float(&self) -> Result<f64> {
        match self {
            Value::Float(f) => Ok(*f),
            Value::Int(i) => Ok(*i as f64),
            Value::Bool(b) => Ok(f64::from(u8::from(*b))),
            other => Err(Error::type_mismatch("float", other.describe())),
        }
    }

    /// The value as a tensor.
    pub fn as_tensor(&self) -> Result<&Tensor> {
        match self {
            Value::Tensor(t) => Ok(t),
            other => Err(Error::type_mismatch("tensor", other.describe())),
        }
    }

    /// The value as a shape.
    pub fn as_shape(&self) -> Result<&Shape> {
        match self {
            Value::Shape(s) => Ok(s),
            other => Err(Error::type_mismatch("shape", other.describe())),
        }
    }

    /// The value as a string.
    pub fn as_str(&self) -> Result<&str> {
        match self {
            Value::Str(s) => Ok(s),
            other => Err(Error::type_mismatch("str", other.describe())),
        }
    }

    /// The value as a data type (strings such as `"float32"` parse).
    pub fn as_dtype(&self) -> Result<DataType> {
        match self {
            Value::DType(d) => Ok(*d),
            Value::Str(s) => s.parse(),
            other => Err(Error::type_mismatch("dtype", other.describe())),
        }
    }

    /// The value as a tuple's items.
    pub fn as_tuple(&self) -> Result<&[Value]> {
        match self {
            Value::Tuple(t) => Ok(t),
            other => Err(Error::type_mismatch("tuple", other.describe())),
        }
    }

    /// The value as a function.
    pub fn as_func(&self) -> Result<&Arc<Closure>> {
        match self {
            Value::Func(c) => Ok(c),
            other => Err(Error::type_mismatch("function", other.describe())),
        }
    }

    /// The truth of a condition: a non-zero int, a true bool, or a one-element tensor.
    pub fn truthy(&self) -> Result<bool> {
        match self {
            Value::Int(i) => Ok(*i != 0),
            Value::Bool(b) => Ok(*b),
            Value::Tensor(t) => t.scalar_f64().map(|x| x != 0.0).ok_or_else(|| {
                Error::type_mismatch("int, bool or one-element tensor", format!("tensor of shape {}", t.shape()))
            }),
            other => Err(Error::type_mismatch("int, bool or one-element tensor", other.describe())),
        }
    }

    /// A short description for error messages: the type and, for small values, the value.
    pub fn describe(&self) -> String {
        match self {
            Value::Int(_) | Value::Float(_) | Value::Bool(_) | Value::DType(_) | Value::Shape(_) => {
                format!("{} {}", self.type_name(), self)
            }
            Value::Tensor(t) => format!("tensor of shape {} and dtype {}", t.shape(), t.dtype()),
            Value::Object(_) => match self.as_named() {
                Some(n) => format!("object {}", n.type_key()),
                None => self.type_name().to_string(),
            },
            _ => self.type_name().to_string(),
        }
    }

    /// True when both are the same object (reference-counted payloads by pointer) or equal
    /// plain scalars: replacing one with the other changes nothing.
    #[inline(always)]
    pub fn same_object(&self, other: &Value) -> bool {
        // The interpreter asks this after every selecting call, mostly of tensors: that case is
        // inlined into the caller, the general match (a jump table) is not.
        if let (Value::Tensor(a), Value::Tensor(b)) = (self, other) {
            return a.ptr_eq(b);
        }
        self.same_object_general(other)
    }

    /// [`same_object`](Self::same_object) for every pair of kinds but two tensors.
    #[inline(never)]
    fn same_object_general(&self, other: &Value) -> bool {
        match (self, other) {
            (Value::Int(a), Value::Int(b)) => a == b,
            (Value::Bool(a), Value::Bool(b)) => a == b,
            (Value::Float(a), Value::Float(b)) => a.to_bits() == b.to_bits(),
            (Value::Null, Value::Null) | (Value::VmState, Value::VmState) => true,
            (Value::Shape(a), Value::Shape(b)) => a.ptr_eq(b),
            (Value::Tuple(a), Value::Tuple(b)) => Arc::ptr_eq(a, b),
            (Value::Str(a), Value::Str(b)) => a.ptr_eq(b),
            (Value::Func(a), Value::Func(b)) => Arc::ptr_eq(a, b),
            (Value::Storage(a), Value::Storage(b)) => a.ptr_eq(b),
            (Value::Object(a), Value::Object(b)) => Arc::ptr_eq(a, b),
            (Value::DType(a), Value::DType(b)) => a == b,
            (Value::Device(a), Value::Device(b)) => a == b,
            _ => false,
        }
    }

    /// Structural equality: tensors by content, functions and objects by identity.
    pub fn content_eq(&self, other: &Value) -> bool {
        // Tuples are compared with a heap stack, not by recursion: nesting can be arbitrarily deep.
        // Each pair of tuples (by address) is compared once: shared tuples, such as `v = (v, v)`
        // nested 40 deep, would otherwise unfold into exponentially many pairs. Skipping a pair
        // met before is sound because the answer is the conjunction over all pairs, and the
        // first pair that differs ends the walk.
        let mut pending = Vec::new();
        let mut seen: HashSet<(usize, usize)> = HashSet::new();
        let (mut a, mut b) = (self, other);
        loop {
            let same = match (a, b) {
                (Value::Tuple(x), Value::Tuple(y)) => {
                    if seen.insert((Arc::as_ptr(x) as usize, Arc::as_ptr(y) as usize)) {
                        pending.extend(x.iter().zip(y.iter()));
                    }
                    x.len() == y.len()
                }
                _ => a.same_leaf(b),
            };
            if !same {
                return false;
            }
            match pending.pop() {
                Some((x, y)) => (a, b) = (x, y),
                None => return true,
            }
        }
    }

    /// [`content_eq`](Self::content_eq) for everything but two tuples.
    fn same_leaf(&self, other: &Value) -> bool {
        match (self, other) {
            (Value::Null, Value::Null) | (Value::VmState, Value::VmState) => true,
            (Value::Int(a), Value::Int(b)) => a == b,
            (Value::Float(a), Value::Float(b)) => a.to_bits() == b.to_bits(),
            (Value::Bool(a), Value::Bool(b)) => a == b,
            (Value::Str(a), Value::Str(b)) => a == b,
            (Value::DType(a), Value::DType(b)) => a == b,
            (Value::Device(a), Value::Device(b)) => a == b,
            (Value::Shape(a), Value::Shape(b)) => a == b,
            (Value::Tensor(a), Value::Tensor(b)) => a.content_eq(b),
            (Value::Func(a), Value::Func(b)) => Arc::ptr_eq(a, b),
            (Value::Storage(a), Value::Storage(b)) => a.ptr_eq(b),
            (Value::Object(a), Value::Object(b)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }

    /// Writes the value, printing tuples nested deeper than [`MAX_PRINT_DEPTH`] as `(...)`,
    /// and any items after the first [`MAX_PRINT_ITEMS`] (`budget` counts them down) as `...`:
    /// a tuple of shared tuples can hold exponentially many items.
    fn fmt_nested(&self, f: &mut fmt::Formatter<'_>, depth: usize, budget: &mut usize) -> fmt::Result {
        match self {
            Value::Tuple(_) if depth >= MAX_PRINT_DEPTH => f.write_str("(...)"),
            Value::Tuple(items) => {
                f.write_str("(")?;
                for (i, v) in items.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    if *budget == 0 {
                        f.write_str("...")?;
                        break;
                    }
                    *budget -= 1;
                    v.fmt_nested(f, depth + 1, budget)?;
                }
                f.write_str(if items.len() == 1 { ",)" } else { ")" })
            }
            Value::Null => f.write_str("None"),
            Value::Int(i) => write!(f, "{i}"),
            Value::Float(x) => write!(f, "{x:?}"),
            Value::Bool(b) => f.write_str(if *b { "True" } else { "False" }),
            Value::Str(s) => write!(f, "{s}"),
            Value::DType(d) => write!(f, "{d}"),
            Value::Device(d) => write!(f, "{d}"),
            Value::Shape(s) => write!(f, "{s}"),
            Value::Tensor(t) => write!(f, "{t}"),
            Value::Func(c) => write!(f, "<function {}>", c.name()),
            Value::Storage(s) => write!(f, "{s:?}"),
            Value::VmState => f.write_str("<vm_state>"),
            Value::Object(_) => match self.as_named() {
                Some(n) => write!(f, "<{} {}>", n.type_key(), n.describe()),
                None => f.write_str("<object>"),
            },
        }
    }
}

/// How deeply nested tuples print before the rest shows as `(...)`.
const MAX_PRINT_DEPTH: usize = 64;
/// How many tuple items, at all depths, print before the rest shows as `...`.
const MAX_PRINT_ITEMS: usize = 1000;

impl Value {
    /// True when dropping the value releases something (a reference count, memory); false for
    /// the plain scalars, whose drop does nothing.
    #[inline(always)]
    pub fn owns_heap(&self) -> bool {
        !matches!(
            self,
            Value::Null
                | Value::Int(_)
                | Value::Float(_)
                | Value::Bool(_)
                | Value::DType(_)
                | Value::Device(_)
                | Value::VmState
        )
    }
}

/// Dropping a deeply nested tuple or closure would recurse once per level, and a short loop
/// of `make_tuple` builds one deep enough to overflow the native stack; so the nested tuples
/// and closures that a value alone owns are taken apart with a heap stack instead.
impl Drop for Value {
    #[inline]
    fn drop(&mut self) {
        // Only the last owner takes the value apart; a shared one just loses a reference,
        // without the atomic read-modify-write that `Arc::get_mut` costs.
        let sole = match self {
            Value::Tuple(t) => Arc::strong_count(t) == 1,
            Value::Func(c) => Arc::strong_count(c) == 1,
            _ => false,
        };
        if sole {
            drop_nested(self);
        }
    }
}

fn drop_nested(v: &mut Value) {
    let mut stack = Vec::new();
    take_nested(v, &mut stack);
    while let Some(mut inner) = stack.pop() {
        take_nested(&mut inner, &mut stack);
        // `inner` no longer owns nested containers: dropping it here does not recurse.
    }
}

/// Moves the tuples and closures held by `v`, when `v` is their container's only owner, to `out`.
fn take_nested(v: &mut Value, out: &mut Vec<Value>) {
    let items = match v {
        Value::Tuple(t) => match Arc::get_mut(t) {
            Some(items) => items,
            None => return,
        },
        Value::Func(c) => match Arc::get_mut(c) {
            Some(c) => &mut c.captured,
            None => return,
        },
        _ => return,
    };
    for item in items.iter_mut().filter(|i| matches!(i, Value::Tuple(_) | Value::Func(_))) {
        out.push(std::mem::take(item));
    }
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut budget = MAX_PRINT_ITEMS;
        self.fmt_nested(f, 0, &mut budget)
    }
}

impl fmt::Debug for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Str(s) => write!(f, "{s:?}"),
            Value::Tensor(t) => write!(f, "{t:?}"),
            other => write!(f, "{other}"),
        }
    }
}

#[cfg(test)]
mod tests;
