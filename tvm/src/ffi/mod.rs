//! Everything foreign: opening TVM-compiled libraries, calling their kernels through the
//! tvm-ffi safe-call ABI, and the runtime services kernels call back into. All of the project's
//! FFI `unsafe` code lives in this module, each block with its `// SAFETY:` argument.
//!
//! Trust model: opening a `.so` runs its native code (its initializers at open, its kernels when
//! called), exactly as with TVM's `load_module`. [`crate::elf`] validation protects the process
//! from malformed and truncated files, not from a malicious library. The file is read once; the
//! dynamic loader maps a private in-memory copy of exactly the bytes that were validated (no
//! window in which a replaced or truncated file could reach it), which also keeps relaxvm's
//! mapping — and the library's globals — apart from TVM's when both runtimes open the same file
//! in one process.
//!
//! The C side kernels see (what TVM 0.27's LLVM codegen emits, `codegen_cpu.cc`):
//!
//! - one undefined import, `TVMFFIErrorSetRaisedFromCStrParts` (and the AnyList functions in
//!   compiled-mode models), renamed in the private copy to relaxvm's own name (`rebind.rs`) and
//!   bound by the dynamic loader from the global scope (`visibility.rs`); libm functions
//!   (`expf`...), unnamed;
//! - pointer slots filled after loading, each only when a kernel uses it:
//!   `__tvm_ffi__library_ctx`, `__TVMFFIFunctionCall`, `__TVMFFIEnvModLookupFromImports`,
//!   `__TVMFFIHandleInitOnce` (calls by name), `__TVMFFIErrorSetRaisedFromCStr`,
//!   `__TVMBackendParallelLaunch`, `__TVMBackendParallelBarrier`, `__TVMBackendAllocWorkspace`,
//!   `__TVMBackendFreeWorkspace`. A `__TVM*`/`__tvm_ffi__*` data symbol relaxvm does not know
//!   is refused at open, by name;
//! - kernels `__tvm_ffi_NAME` with the safe-call signature.
//!
//! | file | what |
//! |---|---|
//! | `abi.rs` | the C types: `TVMFFIAny`, `DLTensor`, the safe-call and parallel-lambda signatures |
//! | `convert.rs` | relaxvm values to and from `TVMFFIAny` |
//! | `guard.rs` | every call into kernel code: a write to a constant becomes an error |
//! | `kernel.rs` | one kernel call |
//! | `kept_blocks.rs` | which freed workspace blocks are kept (the policy both workspace caches share) |
//! | `library.rs` | `Library::open`: validate, dlopen, fill the service slots, find kernels |
//! | `mapped_blocks.rs` | mapped workspace blocks kept for the next workspace, for the process |
//! | `private_copy.rs` | the copy of a library's bytes the loader maps (one mapping per runtime) |
//! | `rebind.rs` | the imports the copy binds under relaxvm's own names |
//! | `pool.rs` | parallel launches and the barrier, on `relaxvm::pool` |
//! | `raised.rs` | the errors kernels raise (`TVMFFIErrorSetRaisedFromCStr*`) |
//! | `services.rs` | workspace memory and calls from kernels into the registry |
//! | `small_blocks.rs` | small workspace blocks kept per thread for the next workspace |
//! | `thread_state.rs` | each thread's innermost guard, raised-error flag and VM TIR frame, one thread-local |
//! | `visibility.rs` | making the runtime's C symbols resolvable by the libraries |

pub mod abi;
pub mod convert;
pub mod function_handle;
pub mod guard;
mod kept_blocks;
pub(crate) mod kernel;
mod library;
pub(crate) mod mapped_blocks;
pub mod pool;
mod private_copy;
pub mod raised;
mod rebind;
pub mod services;
mod small_blocks;
pub(crate) mod thread_state;
// This thread's blocked signals, for the guard's tests; the integration tests include the file
// by path from `tests/common` (shared rather than written twice).
#[cfg(test)]
mod test_signals;
mod visibility;

pub use library::{Library, KERNEL_PREFIX};
