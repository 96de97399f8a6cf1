//! # relaxvm-capi
//!
//! The C API of relaxvm: `include/relaxvm.h` (generated from this crate by cbindgen) and the
//! libraries `librelaxvm_capi.so` / `librelaxvm_capi.a`. C and C++ programs load a relaxvm
//! executable (`.rvx`) or a model compiled by Apache TVM (`.so`), make VMs, and call functions
//! with tensors exchanged as DLPack (`DLManagedTensorVersioned`, zero-copy both ways), ints,
//! floats, bools, strings, shapes and tuples. The guide with a complete example is
//! `docs/c-api.md`; a quick start:
//!
//! ```c
//! #include "relaxvm.h"
//! rvm_executable *exe = NULL; rvm_vm *vm = NULL; rvm_value *r = NULL;
//! rvm_error *err = rvm_executable_load_file("add.rvx", NULL, &exe);
//! if (!err) err = rvm_vm_create(exe, NULL, &vm);
//! rvm_value *args[2] = {rvm_value_new_int(2), rvm_value_new_int(3)};
//! if (!err) err = rvm_vm_call(vm, "main", (const rvm_value *const *)args, 2, &r);
//! if (err) { fprintf(stderr, "%s\n", rvm_error_message(err)); rvm_error_free(err); }
//! ```
//!
//! Rules every function follows:
//!
//! - **Names**: everything starts with `rvm_` (`RVM_` for constants).
//! - **Errors**: a fallible function returns `rvm_error *`: NULL on success, else an error
//!   object with a code (`rvm_error_get_code`) and a message saying what was expected, what was
//!   found and where (`rvm_error_message`), which the caller frees (`rvm_error_free`). Nothing
//!   exits the process and no panic crosses into C: every entry point catches them
//!   (`RVM_ERROR_PANIC`). Outputs are written only on success.
//! - **Ownership**: stated on each function. Handles (`rvm_executable`, `rvm_vm`, `rvm_value`,
//!   `rvm_error`) and strings a function returns belong to the caller, who frees them with the
//!   matching `_free`; pointers into a handle (`rvm_error_message`, `rvm_value_get_str`...) live
//!   as long as the handle. Arguments are borrowed unless a function says it takes them.
//! - **Checked handles**: each live handle is recorded with its type, so NULL, a handle of the
//!   wrong type, a freed handle (use after free, double free) or a pointer that was never a
//!   handle is an `RVM_ERROR_INVALID_ARGUMENT` error, not a crash; so are invalid UTF-8 and
//!   array sizes past 2^32 elements.
//! - **Versioned structs**: an options struct that may gain fields begins with `magic` and
//!   `struct_size`, set by its `_init_sized(&opts, sizeof opts)`; other values (a program
//!   compiled against another relaxvm.h) are `RVM_ERROR_INVALID_ARGUMENT`, read no further.
//! - **Threads**: executables and values are immutable and may be shared by any threads; a VM
//!   runs one call at a time (another call meanwhile fails with `RVM_ERROR_BUSY`), and
//!   `rvm_vm_interrupt` may be called from any thread while a call runs. Nothing may be freed
//!   while another thread uses it.
#![deny(missing_docs)]
// The entry points are C functions: their contract (which pointers must be valid, for how
// long) is stated in each one's comment and in the rules above, for C and Rust callers alike,
// rather than in a `# Safety` section of each.
#![allow(clippy::missing_safety_doc)]

pub mod callback;
pub mod dlpack;
pub mod error;
pub mod executable;
pub mod handle;
pub mod input;
pub mod stateful;
pub mod string;
pub mod value;
pub mod vm;
pub mod vm_options;

/// The version of this library, `"MAJOR.MINOR.PATCH"` (a static string).
#[no_mangle]
pub extern "C" fn rvm_version() -> *const std::ffi::c_char {
    concat!(env!("CARGO_PKG_VERSION"), "\0").as_ptr().cast()
}
