//! # relaxvm-core
//!
//! relaxvm's data model: what a program computes with and what can go wrong. Values
//! ([`Value`]) and the packed functions they call ([`PackedFunc`], the global [`Registry`]),
//! tensors ([`Tensor`]) with their data types, devices, shapes and storage, and the one error
//! type ([`Error`]), including the verifier's ([`error::verify`]). The thread pool kernels split
//! their work on is the crate `relaxvm-threads`, re-exported as [`pool`]. It knows nothing of
//! bytecode or of the interpreter: the instruction set (`relaxvm-isa`), the tools
//! (`relaxvm-tools`) and the interpreter (`relaxvm`) build on it.
//! Most users depend on `relaxvm`, which re-exports these modules at their usual paths.
#![deny(missing_docs)]

pub mod allocator;
pub mod arc_string;
pub mod cost;
pub mod device;
pub mod dlpack;
pub mod dtype;
pub mod element;
pub mod error;
pub mod field_record;
pub mod input_file;
pub mod instrument;
pub mod location;
pub mod native;
pub mod object;
pub mod packed;
pub mod pool;
pub mod registry;
pub mod shape;
pub mod storage;
pub mod tensor;
mod tensor_fmt;
pub mod tensor_text;
pub mod value;
pub mod value_conv;

// Modules that live inside others, also at the crate root (their paths before they moved).
pub use relaxvm_threads::chunks;
pub use storage::block_cache;
pub use value::int_op;

pub use allocator::Allocator;
pub use arc_string::ArcString;

/// The old name of [`ArcString`], which is an `Arc<String>`, not the `Arc<str>` it suggested.
#[deprecated(note = "renamed to `ArcString` (an `Arc<String>`)")]
pub type ArcStr = ArcString;

/// The old path of [`arc_string`].
#[deprecated(note = "renamed to `arc_string`")]
pub mod arcstr {
    #[allow(deprecated)]
    pub use super::ArcStr;
}
pub use cost::Cost;
pub use device::{Device, DeviceType};
pub use dtype::DataType;
pub use error::{Error, ErrorKind, Result};
pub use half;
pub use int_op::IntOp;
pub use location::Location;
pub use native::{LibraryRef, NativeLibrary};
pub use object::{Named, NamedObject};
pub use packed::{BinaryFn, CallCtx, PackedFunc, SelectFn, Selected, TypedFn, VmHandle};
pub use registry::Registry;
pub use shape::Shape;
pub use storage::{Storage, StorageRead};
pub use tensor::{Element, Tensor, TensorView};
pub use value::{Callable, Closure, Value};
pub use value_conv::{FromValue, IntoValue};
