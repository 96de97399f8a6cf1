//! # relaxvm-tools
//!
//! What relaxvm offers to look into a run: the profiler ([`profile`], where the time of one call
//! goes), the tracer (`trace`, every call of a run with copies of its values, saved as `.npz`),
//! numpy's `.npy` files (`npy`), with the files and reports they write, and timing repeated
//! runs ([`timing`], TVM's `time_evaluator`). The profiler and the tracer are hooks of the
//! interpreter's instrument protocol ([`relaxvm_core::instrument`]); the interpreter
//! (`relaxvm`) installs them for `VirtualMachine::profile` and `VirtualMachine::trace`.
//!
//! ## Features
//!
//! - `tooling` (default): the profiler's CSV, JSON and Chrome-trace reports, the tracer and `.npy` files,
//!   with the crates they need (csv, zip, serde_json, tempfile). Without it, only the profiler's
//!   recorder and its in-memory report remain.
#![deny(missing_docs)]

// The modules of the data model and the instruction set, under the paths this crate's files
// name them by.
#[cfg(feature = "tooling")]
use relaxvm_core::{
    arc_string, dispatch_dtype, dtype, element, input_file, shape, storage, tensor, DataType, ErrorKind,
};
use relaxvm_core::{error, value};
#[cfg(feature = "tooling")]
use relaxvm_core::{Result, Shape, Tensor};
#[cfg(feature = "tooling")]
use relaxvm_isa::format;

#[cfg(feature = "tooling")]
pub mod npy;
pub mod profile;
pub mod timing;
#[cfg(feature = "tooling")]
pub mod trace;
