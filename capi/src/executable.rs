//! `rvm_executable`: a loaded program (a relaxvm `.rvx`, or a model compiled by Apache TVM),
//! shared by the VMs built from it.

use crate::error::{guard, rvm_error, rvm_error_code::*, CError};
use crate::handle::{self, publish, Handle, Kind};
use crate::input::{check_out, slice_arg, str_arg, write_out};
use relaxvm::format::{LoadOptions, NativeLibraries};
use relaxvm::Executable;
use std::ffi::{c_char, CString};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A loaded program. Immutable: any number of VMs, on any threads, may share it.
#[allow(non_camel_case_types)]
pub struct rvm_executable {
    /// The program.
    pub exe: Arc<Executable>,
    /// The names of its bytecode functions, NUL-terminated, in table order.
    names: Vec<CString>,
}

impl Handle for rvm_executable {
    const KIND: Kind = Kind::Executable;
}

/// `rvm_load_options.native_libraries`: open no native library an `.rvx` references (default).
pub const RVM_NATIVE_REFUSE: u32 = 0;
/// `rvm_load_options.native_libraries`: open those lying at or directly in `allowed_paths`.
pub const RVM_NATIVE_ALLOW_LISTED: u32 = 1;
/// `rvm_load_options.native_libraries`: open any library the file references (still checked by
/// hash) — for files trusted as much as the libraries themselves.
pub const RVM_NATIVE_ANY: u32 = 2;

/// How to load an executable. Fill it with `rvm_load_options_init`, then change fields.
#[allow(non_camel_case_types)]
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct rvm_load_options {
    /// Which native libraries (TVM kernels) a `.rvx` that references them may open, running
    /// their code: `RVM_NATIVE_REFUSE` (the default), `RVM_NATIVE_ALLOW_LISTED` or
    /// `RVM_NATIVE_ANY`. Naming a TVM `.so` to load is the consent to open that file, and only
    /// it, whatever this says.
    pub native_libraries: u32,
    /// For `RVM_NATIVE_ALLOW_LISTED`: files, or folders whose direct entries are allowed.
    pub allowed_paths: *const *const c_char,
    /// How many `allowed_paths` there are.
    pub num_allowed_paths: usize,
    /// The largest file to read, in bytes (16 GiB by default); larger files are refused before
    /// being read.
    pub max_input_size: u64,
    /// Memory-map a `.rvx` instead of reading it (faster for large constants, but the file must
    /// not change while the executable lives). Off by default.
    pub mmap: bool,
}

/// Fills `opts` with the defaults: no native library opened, 16 GiB input limit, no mmap.
///
/// Ownership: writes `*opts`. Thread safety: any thread.
#[no_mangle]
pub unsafe extern "C" fn rvm_load_options_init(opts: *mut rvm_load_options) -> *mut rvm_error {
    guard(|| {
        let d = LoadOptions::default();
        let o = rvm_load_options {
            native_libraries: RVM_NATIVE_REFUSE,
            allowed_paths: std::ptr::null(),
            num_allowed_paths: 0,
            max_input_size: d.read.max_bytes,
            mmap: false,
        };
        // SAFETY: `write_out` checks for NULL; the caller passes a writable pointer.
        unsafe { write_out(opts, o, "rvm_load_options_init") }
    })
}

/// The Rust load options of `opts` (NULL: the defaults).
///
/// # Safety
/// `opts` is NULL or points to an initialized `rvm_load_options` whose `allowed_paths` holds
/// `num_allowed_paths` strings.
unsafe fn load_options(opts: *const rvm_load_options, what: &str) -> Result<LoadOptions, CError> {
    let mut out = LoadOptions::default();
    if opts.is_null() {
        return Ok(out);
    }
    // SAFETY: non-null and initialized, as the caller guarantees.
    let o = unsafe { &*opts };
    out.read.max_bytes = o.max_input_size;
    out.mmap = o.mmap;
    out.native_libraries = match o.native_libraries {
        RVM_NATIVE_REFUSE => NativeLibraries::Refuse,
        RVM_NATIVE_ANY => NativeLibraries::AnyReferenced,
        RVM_NATIVE_ALLOW_LISTED => {
            // SAFETY: the caller passes `num_allowed_paths` strings.
            let paths = unsafe { slice_arg(o.allowed_paths, o.num_allowed_paths, &format!("{what}: allowed_paths")) }?;
            let mut list = Vec::with_capacity(paths.len());
            for (i, p) in paths.iter().enumerate() {
                // SAFETY: each is a NUL-terminated string, as the caller guarantees.
                list.push(PathBuf::from(unsafe { str_arg(*p, &format!("{what}: allowed_paths[{i}]")) }?));
            }
            NativeLibraries::Allow(list)
        }
        other => {
            return Err(CError::invalid(format!(
                "{what}: native_libraries is {other}; expected RVM_NATIVE_REFUSE (0), RVM_NATIVE_ALLOW_LISTED (1) or RVM_NATIVE_ANY (2)"
            )))
        }
    };
    Ok(out)
}

fn publish_exe(exe: Executable) -> *mut rvm_executable {
    let names = exe.bytecode_function_names().into_iter().map(crate::error::c_string).collect();
    publish(rvm_executable { exe: Arc::new(exe), names })
}

/// Loads the file at `path`: a relaxvm executable (`.rvx`, every byte checked), a model
/// compiled by Apache TVM (`.so` written by `export_library`: validated, then opened, which runs
/// its code — naming it is the consent), or a standalone `.vmexec`. The native libraries a
/// `.rvx` references open only as `opts->native_libraries` allows. `opts` may be NULL (defaults).
///
/// Ownership: borrows `path` and `opts`; on success `*out` is a new executable the caller owns
/// (`rvm_executable_free`). Thread safety: any thread.
#[no_mangle]
pub unsafe extern "C" fn rvm_executable_load_file(
    path: *const c_char,
    opts: *const rvm_load_options,
    out: *mut *mut rvm_executable,
) -> *mut rvm_error {
    guard(|| {
        check_out(out, "rvm_executable_load_file")?;
        // SAFETY: the caller passes a NUL-terminated path and valid options (or NULL).
        let (path, opts) = unsafe {
            (str_arg(path, "rvm_executable_load_file: path")?, load_options(opts, "rvm_executable_load_file")?)
        };
        let exe = relaxvm_tvm::import::load_module_with(Path::new(path), &opts)?;
        // SAFETY: checked non-null above.
        unsafe { write_out(out, publish_exe(exe), "rvm_executable_load_file") }
    })
}

/// Loads an executable from `len` bytes at `data`: a `.rvx` (references to native libraries
/// resolve against the current directory and open only as `opts` allows), a TVM `.so` (opened
/// from these bytes: passing them is the consent to run its code; `name` stands for its path in
/// messages and may be NULL) or a `.vmexec`. `opts` may be NULL (defaults).
///
/// Ownership: the bytes are copied (they may be freed on return); on success `*out` is a new
/// executable the caller owns. Thread safety: any thread.
#[no_mangle]
pub unsafe extern "C" fn rvm_executable_load_bytes(
    data: *const u8,
    len: usize,
    name: *const c_char,
    opts: *const rvm_load_options,
    out: *mut *mut rvm_executable,
) -> *mut rvm_error {
    guard(|| {
        check_out(out, "rvm_executable_load_bytes")?;
        // SAFETY: the caller passes `len` readable bytes, a string or NULL, and options or NULL.
        let (bytes, opts) = unsafe {
            (slice_arg(data, len, "rvm_executable_load_bytes: data")?, load_options(opts, "rvm_executable_load_bytes")?)
        };
        if len as u64 > opts.read.max_bytes {
            return Err(CError::new(
                RVM_ERROR_VALUE,
                format!("rvm_executable_load_bytes: {len} bytes is more than max_input_size ({})", opts.read.max_bytes),
            ));
        }
        let name = if name.is_null() {
            "<memory>"
        } else {
            // SAFETY: non-null, NUL-terminated as the caller guarantees.
            unsafe { str_arg(name, "rvm_executable_load_bytes: name") }?
        };
        let exe = relaxvm_tvm::import::load_module_bytes(bytes, Path::new(name), &opts)?;
        // SAFETY: checked non-null above.
        unsafe { write_out(out, publish_exe(exe), "rvm_executable_load_bytes") }
    })
}

/// Frees `exe`. VMs made from it keep the program alive. NULL is allowed (nothing happens); a
/// pointer that is not a live executable (a double free) is an error object.
///
/// Ownership: takes `exe`. Thread safety: any thread, not concurrently with other uses of `exe`.
#[no_mangle]
pub unsafe extern "C" fn rvm_executable_free(exe: *mut rvm_executable) -> *mut rvm_error {
    guard(|| {
        if exe.is_null() {
            return Ok(());
        }
        // SAFETY: `take` frees only a live executable handle; the caller uses it nowhere else.
        drop(unsafe { handle::take(exe, "rvm_executable_free") }?);
        Ok(())
    })
}

/// The executable of live handle `p`.
///
/// # Safety
/// As [`handle::borrow`].
pub unsafe fn exe_arg<'a>(p: *const rvm_executable, what: &str) -> Result<&'a rvm_executable, CError> {
    // SAFETY: forwarded to the caller.
    Ok(unsafe { handle::borrow(p, what) }?)
}

/// The number of bytecode functions of `exe` (what `rvm_vm_call` can call by name).
///
/// Ownership: borrows `exe`. Thread safety: any thread.
#[no_mangle]
pub unsafe extern "C" fn rvm_executable_function_count(exe: *const rvm_executable, out: *mut usize) -> *mut rvm_error {
    guard(|| {
        // SAFETY: the handle table checks `exe`; the caller keeps it alive during the call.
        let n = unsafe { exe_arg(exe, "rvm_executable_function_count") }?.names.len();
        // SAFETY: `write_out` checks for NULL; the caller passes a writable pointer.
        unsafe { write_out(out, n, "rvm_executable_function_count") }
    })
}

/// The name of bytecode function `index` of `exe`; `RVM_ERROR_INDEX` past the end.
///
/// Ownership: `*out` belongs to `exe` and lives until `exe` is freed. Thread safety: any thread.
#[no_mangle]
pub unsafe extern "C" fn rvm_executable_function_name(
    exe: *const rvm_executable,
    index: usize,
    out: *mut *const c_char,
) -> *mut rvm_error {
    guard(|| {
        // SAFETY: the handle table checks `exe`; the caller keeps it alive during the call.
        let names = &unsafe { exe_arg(exe, "rvm_executable_function_name") }?.names;
        let name = names.get(index).ok_or_else(|| {
            CError::new(
                RVM_ERROR_INDEX,
                format!("rvm_executable_function_name: index {index} out of range for {} functions", names.len()),
            )
        })?;
        // SAFETY: `write_out` checks for NULL; the caller passes a writable pointer.
        unsafe { write_out(out, name.as_ptr(), "rvm_executable_function_name") }
    })
}

/// The program of `exe` in relaxvm's text form (what `relaxvm dis` prints).
///
/// Ownership: borrows `exe`; on success `*out` is a string the caller frees with
/// `rvm_string_free`. Thread safety: any thread.
#[no_mangle]
pub unsafe extern "C" fn rvm_executable_as_text(exe: *const rvm_executable, out: *mut *mut c_char) -> *mut rvm_error {
    guard(|| {
        check_out(out, "rvm_executable_as_text")?;
        // SAFETY: the handle table checks `exe`; the caller keeps it alive during the call.
        let text = unsafe { exe_arg(exe, "rvm_executable_as_text") }?.exe.as_text();
        // SAFETY: checked non-null above.
        unsafe { write_out(out, crate::string::new_string(&text), "rvm_executable_as_text") }
    })
}
