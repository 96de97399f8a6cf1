//! # relaxvm-tvm
//!
//! Runs models compiled by Apache TVM 0.27 (`tvm.compile(mod, target="llvm")` then
//! `export_library`) on relaxvm, without TVM's runtime:
//!
//! - [`elf`]: validates an ELF shared library before anything maps it, and reads an exported
//!   data symbol (`__tvm_ffi__library_bin`) from the file's bytes, without running its code.
//! - [`library_bin`] and [`vmexec`]: the module tree and the `relax.VMExecutable` reader, which
//!   produce a relaxvm [`Executable`](relaxvm::Executable) through the core verifier.
//! - [`ffi`]: opens the library (dlopen), calls its kernels with the tvm-ffi safe-call ABI and
//!   serves the runtime services kernels need (errors, workspace, parallel launch on our thread
//!   pool, calls back into the registry). All `unsafe` code of the project's FFI lives there.
//! - [`vmtir`]: functions TVM compiled to machine code (`exec_mode="compiled"`): their
//!   bytecode wrappers and the runtime their code calls back into.
//! - [`import`]: the entry points: a `.so` or a standalone `.vmexec` file to an executable.
//!
//! ```no_run
//! use relaxvm::{Tensor, Value, VirtualMachine};
//! use std::sync::Arc;
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! relaxvm_builtins::ensure_registered(); // the runtime builtins compiled programs call
//! // Opening a .so runs its code, as TVM's loader does: naming it is the consent.
//! let exe = relaxvm_tvm::import::load_module("mlp.so")?;
//! let mut vm = VirtualMachine::new(Arc::new(exe))?;
//! let x = Tensor::from_vec(vec![1, 784], vec![0.5f32; 784])?;
//! let y = vm.invoke("main", &[Value::Tensor(x)])?;
//! println!("{y}");
//! # Ok(())
//! # }
//! ```
//!
//! A program that opens TVM libraries must export the error function their kernels bind, under
//! relaxvm's name (`-Wl,--export-dynamic-symbol=RVMFFIErrorSetRaisedFromCStrParts`: relaxvm
//! defines none of TVM's names, see `ffi::rebind`) and, for compiled-mode models, the three list functions
//! `RVMBackendAnyList{SetPackedArg,MoveFromPackedReturn,ResetItem}`: see this crate's and
//! `relaxvm-cli`'s build scripts.

#![deny(missing_docs)]

pub mod elf;
pub mod ffi;
pub mod import;
pub mod library_bin;
pub mod vmexec;
pub mod vmtir;
