//! # relaxvm-builder
//!
//! Everything that makes [`relaxvm::Executable`]s:
//!
//! * [`ExecBuilder`] — TVM's `ExecBuilder`: open a function, emit instructions, `get()` an
//!   executable. Functions are [checked](check) (with control flow) when they close, and
//!   registers are renumbered densely when the executable is built.
//! * [`assemble`] — parses the text form that [`relaxvm::Executable::as_text`] prints back
//!   into an executable (grammar in `docs/text-format.md`).
//! * [`link()`] — merges executables into one, resolving functions declared in one and defined
//!   in another to direct calls (and [`ExecBuilder::import_executable`] imports one into a
//!   builder); [`drop_unreachable`] removes what the entry function cannot reach.
//!
//! The `relaxvm` command-line tool (`asm`, `dis`, `stats`, `verify`, `run`, `profile`,
//! `trace`, `link`) is the crate `relaxvm-cli`, built on this one.
//!
//! ```
//! use relaxvm::{Arg, Value, VirtualMachine};
//! use relaxvm_builder::{assemble, ExecBuilder};
//! use std::sync::Arc;
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! relaxvm_builtins::ensure_registered(); // the builtins the programs call
//!
//! // Emit a function...
//! let mut ib = ExecBuilder::new();
//! ib.function("main", 2, Some(vec!["a".into(), "b".into()]))?;
//! ib.emit_call("vm.builtin.int.mul", &[Arg::Reg(0), Arg::Reg(1)], Some(2))?;
//! ib.emit_ret(2)?;
//! ib.end_function()?;
//! let exe = ib.get()?.executable;
//!
//! // ... or write it in the text form (registered builtins need no `.packed` line).
//! let same = assemble("@main inputs=2 regs=3 params=(a, b):\n  call  vm.builtin.int.mul  in: %0, %1  dst: %2\n  ret  %2\n")?;
//! assert_eq!(same.as_text(), exe.as_text());
//!
//! let mut vm = VirtualMachine::new(Arc::new(exe))?;
//! assert_eq!(vm.invoke("main", &[Value::Int(6), Value::Int(7)])?.as_int()?, 42);
//! # Ok(())
//! # }
//! ```
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod asm;
pub mod check;
mod constants;
pub mod error;
mod exec_builder;
mod func_table;
pub mod link;
mod link_error;
pub mod reachability;
mod renumber;

pub use asm::{assemble, AsmError};
pub use check::check_executable;
pub use error::{BuildError, CheckError, CheckErrorKind};
pub use exec_builder::{BuildOutput, ExecBuilder};
pub use link::{link, LinkOptions};
pub use link_error::{LinkError, LinkErrorKind, ModuleRef};
pub use reachability::drop_unreachable;

/// The README's Rust code blocks, compiled and run as doctests so that they cannot rot.
#[doc = include_str!("../../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;

/// The Rust code blocks of docs/format.md, run as doctests.
#[doc = include_str!("../../docs/format.md")]
#[cfg(doctest)]
pub struct FormatDocDoctests;

/// The Rust code blocks of docs/profiling.md, run as doctests.
#[doc = include_str!("../../docs/profiling.md")]
#[cfg(doctest)]
pub struct ProfilingDocDoctests;
