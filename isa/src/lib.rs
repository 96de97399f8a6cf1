//! # relaxvm-isa
//!
//! relaxvm's instruction set and the programs written in it: the instructions ([`bytecode`]),
//! function signatures ([`types`]), the [`Executable`] (functions, constants, native libraries),
//! its binary format ([`format`](mod@format), the `.rvx` file), the verifier every executable passes
//! ([`verify`]) and its text form ([`text`]). It builds on the data model of `relaxvm-core`
//! and knows nothing of the interpreter; most users reach it through `relaxvm`, which
//! re-exports these modules at their usual paths.
//!
//! ## Features
//!
//! - `tooling` (default): signature reflection records and saving executables to files
//!   ([`Executable::save`]), with the crates they need (serde_json, tempfile).
#![deny(missing_docs)]

// The data model's modules, under the paths this crate's files name them by.
use relaxvm_core::DataType;
#[cfg(test)]
use relaxvm_core::ErrorKind;
use relaxvm_core::{device, dtype, error, input_file, location, native, shape, storage, tensor, tensor_text, value};

pub mod bytecode;
pub mod executable;
pub mod format;
mod instr_text;
mod names;
mod parts;
pub mod python_dump;
#[cfg(test)]
mod seal_tests;
pub mod text;
pub mod types;
pub mod verify;

pub use bytecode::{Arg, Instruction, RegIdx};
pub use executable::{Executable, ExecutableParts, FuncInfo, FuncKind};
pub use types::{Dim, Signature, Type};
