//! # relaxvm
//!
//! A register-based virtual machine whose one real instruction is a call to a *packed
//! function* — a function of a slice of dynamically typed [`Value`]s. Compilers emit bytecode
//! (with `relaxvm_builder::ExecBuilder`), ship it as an [`Executable`] (a `.rvx` file, see
//! [`format`](mod@format)), and run it with a [`VirtualMachine`] and the packed functions of
//! `relaxvm_builtins` (or their own, see [`registry`]):
//!
//! ```
//! use relaxvm::{Arg, Value, VirtualMachine};
//! use relaxvm_builder::ExecBuilder;
//! use std::sync::Arc;
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! relaxvm_builtins::ensure_registered(); // vm.builtin.* and vm.op.* into the global registry
//!
//! // The compiler's side: emit a function, save the executable (to a file, or as bytes).
//! let mut ib = ExecBuilder::new();
//! ib.function("main", 2, Some(vec!["a".into(), "b".into()]))?;
//! ib.emit_call("vm.builtin.int.add", &[Arg::Reg(0), Arg::Reg(1)], Some(2))?;
//! ib.emit_ret(2)?;
//! ib.end_function()?;
//! let bytes = ib.get()?.executable.save_to_bytes();
//!
//! // The embedder's side: load (every byte checked) and run.
//! let exe = relaxvm::format::load_bytes(&bytes)?; // or format::load_file("model.rvx")
//! let mut vm = VirtualMachine::new(Arc::new(exe))?;
//! assert_eq!(vm.invoke("main", &[Value::Int(2), Value::Int(3)])?.as_int()?, 5);
//! # Ok(())
//! # }
//! ```
//!
//! ## Features
//!
//! ## Crates
//!
//! This crate is the interpreter and the one crate users depend on: it re-exports the layers
//! below it at their usual paths. `relaxvm-core` holds the data model (values, tensors,
//! packed functions, the registry, errors), `relaxvm-isa` the instruction set and executables
//! (bytecode, signatures, the binary format, the verifier, the text form), `relaxvm-tools` the
//! profiler, the tracer and `.npy` files.
//!
//! - `tooling` (default): the profiler's CSV, JSON and Chrome-trace reports
//!   ([`profile::ProfileReport::csv`]...), the tracer ([`trace`]), `.npy` files ([`npy`]),
//!   signature reflection records and saving executables to files ([`Executable::save`]), with
//!   the crates they need (csv, zip, serde_json, tempfile). An embedder that only loads and runs
//!   bytecode depends on `relaxvm = { version = "0.1", default-features = false }` and compiles
//!   none of them.
#![deny(missing_docs)]

mod code;
pub mod long_calls;
pub mod memory_cfg;
pub mod short_calls;
pub mod tvm_inputs;
pub mod vm;

// The data model (relaxvm-core), at the paths it had before it became its own crate.
pub use relaxvm_core::{
    allocator, arc_string, block_cache, chunks, cost, device, dispatch_dtype, dlpack, dtype, element, error,
    input_file, instrument, int_op, location, native, object, packed, pool, registry, shape, storage, tensor,
    tensor_text, value, value_conv,
};
// The instruction set (relaxvm-isa).
pub use relaxvm_isa::{bytecode, executable, format, python_dump, text, types, verify};
// The tools (relaxvm-tools).
#[cfg(feature = "tooling")]
pub use relaxvm_tools::{npy, trace};
pub use relaxvm_tools::{profile, timing};

pub use allocator::Allocator;
pub use arc_string::ArcString;
pub use bytecode::{Arg, Instruction, RegIdx};
pub use cost::Cost;
pub use device::{Device, DeviceType};
pub use dtype::DataType;
pub use error::{Error, ErrorKind, Result};
pub use executable::{Executable, ExecutableParts, FuncInfo, FuncKind};
pub use half;
pub use int_op::IntOp;
pub use location::Location;
pub use native::{LibraryRef, NativeLibrary};
pub use object::{Named, NamedObject};
pub use packed::{BinaryFn, CallCtx, PackedFunc, SelectFn, Selected, TypedFn, VmHandle};
pub use registry::Registry;
#[allow(deprecated)]
pub use relaxvm_core::{arcstr, field_recorder, ArcStr};
pub use shape::Shape;
pub use storage::{Storage, StorageRead};
pub use tensor::{Element, Tensor, TensorView};
pub use types::{Dim, Signature, Type};
pub use value::{Callable, Closure, Value};
pub use value_conv::{FromValue, IntoValue};
pub use vm::{
    check_native_stack, CallingThread, Entry, InstrumentAction, InstrumentCall, InterruptHandle, Limits, PollHook,
    VirtualMachine, POLL_INTERVAL,
};
#[allow(deprecated)]
pub use vm::{ConfigMut, VmConfig};
