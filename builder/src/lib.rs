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
//! * [`npy`] — reads and writes numpy `.npy` files as tensors.
//! * the `relaxvm` command-line tool (feature `cli`): `asm`, `dis`, `stats`, `verify`, `run`,
//!   `link`.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod asm;
pub mod check;
mod constants;
pub mod error;
mod exec_builder;
mod formalize;
mod func_table;
pub mod link;
mod link_error;
#[cfg(feature = "cli")]
pub use relaxvm::npy;
pub mod reachability;

#[cfg(feature = "cli")]
pub mod cli;

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
