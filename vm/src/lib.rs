//! # relaxvm
//!
//! A register-based virtual machine whose one real instruction is a call to a *packed
//! function* — a function of a slice of dynamically typed [`Value`]s. Compilers emit bytecode
//! (with `relaxvm_builder::ExecBuilder`), ship it as an [`Executable`], and run it with a
//! [`VirtualMachine`]:
//!
//! ```
//! use relaxvm::{registry, Executable, ExecutableParts, FuncInfo, Instruction, Arg,
//!               PackedFunc, Value, VirtualMachine};
//! use std::sync::Arc;
//!
//! registry::register_global(PackedFunc::typed("doc.add", |a: i64, b: i64| a + b), true).unwrap();
//! let exe = Executable::from_parts(ExecutableParts {
//!     funcs: vec![
//!         FuncInfo::bytecode("main", 0, 2, 2, 3),
//!         FuncInfo::packed("doc.add"),
//!     ],
//!     instrs: vec![
//!         Instruction::Call { func: 1, args: vec![Arg::Reg(0), Arg::Reg(1)], dst: Some(2) },
//!         Instruction::Ret { result: 2 },
//!     ],
//!     ..Default::default()
//! }).unwrap();
//! let mut vm = VirtualMachine::new(Arc::new(exe)).unwrap();
//! assert_eq!(vm.invoke("main", &[Value::Int(2), Value::Int(3)]).unwrap().as_int().unwrap(), 5);
//! ```
#![deny(missing_docs)]

pub mod arcstr;
pub mod block_cache;
pub mod bytecode;
pub mod chunks;
mod code;
pub mod cost;
pub mod device;
pub mod dtype;
pub mod element;
pub mod error;
pub mod executable;
pub mod format;
pub mod input_file;
mod instr_text;
pub mod int_op;
pub mod location;
mod names;
pub mod native;
pub mod npy;
pub mod object;
pub mod packed;
mod parts;
pub mod pool;
pub mod profile;
pub mod python_dump;
mod recent_shapes;
pub mod registry;
pub mod shape;
pub mod storage;
pub mod tensor;
mod tensor_fmt;
pub mod tensor_text;
pub mod text;
pub mod trace;
pub mod types;
pub mod value;
pub mod value_conv;
pub mod verify;
pub mod vm;

pub use arcstr::ArcStr;
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
pub use packed::{BinaryFn, CallCtx, PackedFunc, SelectFn, TypedFn, VmHandle};
pub use registry::Registry;
pub use shape::Shape;
pub use storage::{Storage, StorageRead};
pub use tensor::{Element, Tensor, TensorView};
pub use types::{Dim, Signature, Type};
pub use value::{Callable, Closure, Value};
pub use value_conv::{FromValue, IntoValue};
pub use vm::{
    Entry, InstrumentAction, InstrumentCall, InterruptHandle, PollHook, VirtualMachine, VmConfig, POLL_INTERVAL,
};
