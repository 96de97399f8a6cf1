//! Opening a TVM-compiled shared library: validation, dlopen, the runtime-service slots, and
//! its kernels as packed functions.

use super::abi::{ParallelLambda, SafeCall};
use super::{kernel, pool, private_copy, rebind, services, visibility};
use crate::elf;
use relaxvm::{Error, NativeLibrary, PackedFunc, Result};
use std::collections::HashMap;
use std::ffi::c_void;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The prefix of exported kernels: kernel `NAME` is the function `__tvm_ffi_NAME`.
pub const KERNEL_PREFIX: &str = "__tvm_ffi_";

/// Data symbols the library exports that are not slots.
const DATA_SYMBOLS: &[&str] = &["__tvm_ffi__library_bin"];

/// The slot through which a library's kernels make parallel launches.
const PARALLEL_LAUNCH_SLOT: &str = "__TVMBackendParallelLaunch";

/// The pointer slots a TVM 0.27 library may export, and what relaxvm stores in each.
fn slot_value(name: &str) -> Option<*const c_void> {
    type Alloc = extern "C" fn(i32, i32, u64, i32, i32) -> *mut c_void;
    type Free = unsafe extern "C" fn(i32, i32, *mut c_void) -> i32;
    type Launch = unsafe extern "C" fn(ParallelLambda, *mut c_void, i32) -> i32;
    type Barrier = unsafe extern "C" fn(i32, *mut super::abi::TVMParallelGroupEnv) -> i32;
    type SetRaised = unsafe extern "C" fn(*const std::ffi::c_char, *const std::ffi::c_char);
    type Call = unsafe extern "C" fn(*mut c_void, *const super::abi::TVMFFIAny, i32, *mut super::abi::TVMFFIAny) -> i32;
    type Lookup = unsafe extern "C" fn(*mut c_void, *const std::ffi::c_char, *mut *mut c_void) -> i32;
    type InitOnce =
        unsafe extern "C" fn(*mut *mut c_void, Option<unsafe extern "C" fn(*mut *mut c_void) -> i32>) -> i32;
    Some(match name {
        "__TVMBackendAllocWorkspace" => services::alloc_workspace as Alloc as *const c_void,
        "__TVMBackendFreeWorkspace" => services::free_workspace as Free as *const c_void,
        PARALLEL_LAUNCH_SLOT => pool::parallel_launch as Launch as *const c_void,
        "__TVMBackendParallelBarrier" => pool::parallel_barrier as Barrier as *const c_void,
        "__TVMFFIErrorSetRaisedFromCStr" => super::raised::set_raised_from_cstr_slot as SetRaised as *const c_void,
        "__TVMFFIFunctionCall" => services::function_call as Call as *const c_void,
        "__TVMFFIEnvModLookupFromImports" => services::lookup_from_imports as Lookup as *const c_void,
        "__TVMFFIHandleInitOnce" => services::handle_init_once as InitOnce as *const c_void,
        "__tvm_ffi__library_ctx" => &services::LIBRARY_CTX as *const u8 as *const c_void,
        _ => return None,
    })
}

/// An opened TVM-compiled library. Kernels it hands out keep it loaded.
pub struct Library {
    inner: Arc<Inner>,
}

struct Inner {
    path: PathBuf,
    hash: u64,
    kernels: HashMap<String, SafeCall>,
    /// The machine code of VM TIR functions, by the name the program calls (`__vmtir__NAME`).
    vmtir: HashMap<String, SafeCall>,
    /// Whether the library has a `__TVMBackendParallelLaunch` slot, its kernels' only way to
    /// a parallel launch (the one service that polls the calling VM): a library without it
    /// (a small model's) calls its kernels without entering a [`pool::PollScope`], which costs
    /// two thread-local accesses a call.
    parallel: bool,
    /// Unloading the library invalidates every kernel pointer: it lives as long as any kernel.
    _lib: libloading::os::unix::Library,
    /// Unloading it also gives back the workspace blocks kept for its kernels.
    _workspaces: super::mapped_blocks::ReleaseOnDrop,
    /// The private copy it was loaded from (as `/proc/self/fd/N`): held open so that no other
    /// library gets the same descriptor, hence the same name, which the dynamic loader would
    /// take for this already-loaded library.
    _file: std::fs::File,
}

impl std::fmt::Debug for Library {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Library({:?}, {} kernels)", self.inner.path, self.inner.kernels.len())
    }
}

impl Library {
    /// Validates and opens the library at `path`, fills its runtime-service slots and finds its
    /// kernels. Opening runs the library's initializers: open only libraries you trust. The
    /// file is read as every input is ([`relaxvm::input_file`]: a regular file within the
    /// default size limit).
    pub fn open(path: &Path) -> Result<Arc<Library>> {
        let bytes = relaxvm::input_file::read(path, &Default::default())?;
        Library::open_bytes(path, &bytes)
    }

    /// [`open`](Self::open) of a library whose bytes the caller has read (and checked, e.g.
    /// against a recorded hash, before any of its code runs): `bytes` are what gets loaded,
    /// whatever the file at `path` holds by now; `path` names it in messages.
    pub fn open_bytes(path: &Path, bytes: &[u8]) -> Result<Arc<Library>> {
        let at = |e: Error| Error::value(format!("{}: {e}", path.display()));
        pool::configured_threads().map_err(at)?;
        let elf::ElfInfo { functions: exported, data: slots, .. } = elf::validate(bytes).map_err(at)?;
        if let Some(unknown) =
            slots.iter().find(|s| !DATA_SYMBOLS.contains(&s.as_str()) && slot_value(s).is_none() && is_runtime_name(s))
        {
            return Err(at(Error::value(format!(
                "the library expects runtime service {unknown:?}, which relaxvm does not provide (a library from another TVM version?)"
            ))));
        }
        visibility::ensure_runtime_symbols().map_err(at)?;
        let vmtir_prefix = format!("{KERNEL_PREFIX}{}", crate::vmtir::PREFIX);
        if exported.iter().any(|s| s.starts_with(&vmtir_prefix)) {
            // Compiled functions call relaxvm's AnyList functions, which must be resolvable.
            visibility::ensure_anylist_symbols().map_err(at)?;
        }
        // The loader maps a private copy of the validated bytes (see private_copy.rs).
        let hole = elf::exported_symbol_range(bytes, "__tvm_ffi__library_bin").map_err(at)?;
        // The library binds relaxvm's functions under relaxvm's names (see rebind.rs).
        let renamed = rebind::renamed_offsets(bytes, hole.clone());
        let copy = private_copy::create(bytes, hole, &renamed)
            .map_err(|e| at(Error::value(format!("cannot make a private copy to load: {e}"))))?;
        let target = private_copy::proc_path(&copy);
        if already_loaded(&target) {
            // A library loaded earlier under this descriptor's name is still mapped (one that
            // could not be unloaded); the loader would hand back that one.
            return Err(at(Error::value(format!(
                "a library loaded earlier as {target} is still mapped; the loader would return it instead"
            ))));
        }
        // SAFETY: opening a shared library runs its initializers; the trust model (docs/tvm.md)
        // is TVM's: the user chose to load this library. RTLD_NOW resolves every symbol now, so
        // a missing one is an error here rather than a crash at a later call.
        let lib = unsafe { libloading::os::unix::Library::open(Some(&target), libc::RTLD_NOW | libc::RTLD_LOCAL) }
            .map_err(|e| {
                // The loader names the private copy; name the file instead.
                let why = e.to_string().replace(&format!("{target}: "), "");
                at(Error::value(format!("the dynamic loader refused it: {why}")))
            })?;
        for name in &slots {
            if let Some(value) = slot_value(name) {
                let mut cname = name.clone().into_bytes();
                cname.push(0);
                // SAFETY: `name` is a data symbol the library exports (read from its dynamic
                // symbol table); for a slot it is a pointer-sized, pointer-aligned variable.
                let slot: libloading::os::unix::Symbol<*mut *const c_void> = unsafe { lib.get(&cname) }
                    .map_err(|e| at(Error::value(format!("cannot resolve runtime-service slot {name}: {e}"))))?;
                // SAFETY: as above; writing a function pointer is what TVM's loader does.
                unsafe { (*slot).write(value) };
            }
        }
        let mut kernels = HashMap::new();
        let mut vmtir = HashMap::new();
        for sym in &exported {
            let Some(kernel) = sym.strip_prefix(KERNEL_PREFIX) else { continue };
            let compiled = kernel.starts_with(crate::vmtir::PREFIX);
            if kernel.starts_with('_') && !compiled {
                continue; // `__tvm_ffi__*` names belong to the runtime, not to kernels.
            }
            let mut cname = sym.clone().into_bytes();
            cname.push(0);
            // SAFETY: `sym` is a function the library exports with the tvm-ffi safe-call
            // signature (what TVM's codegen emits for every `__tvm_ffi_` function).
            let f: libloading::os::unix::Symbol<SafeCall> = unsafe { lib.get(&cname) }
                .map_err(|e| at(Error::value(format!("cannot resolve kernel {sym}: {e}"))))?;
            if compiled {
                vmtir.insert(kernel.to_string(), *f);
            } else {
                kernels.insert(kernel.to_string(), *f);
            }
        }

        let parallel = slots.iter().any(|s| s == PARALLEL_LAUNCH_SLOT);
        let hash = crate::import::content_hash(bytes);
        log::debug!("opened {} ({} kernels, content hash {hash:#018x})", path.display(), kernels.len());
        let inner = Inner {
            path: path.to_path_buf(),
            hash,
            kernels,
            vmtir,
            parallel,
            _lib: lib,
            _workspaces: Default::default(),
            _file: copy,
        };
        Ok(Arc::new(Library { inner: Arc::new(inner) }))
    }

    /// The names of the kernels the library exports.
    pub fn kernel_names(&self) -> impl Iterator<Item = &str> {
        self.inner.kernels.keys().map(String::as_str)
    }
}

/// Whether a library is loaded under `name` already.
fn already_loaded(name: &str) -> bool {
    let Ok(c) = std::ffi::CString::new(name) else { return false };
    // SAFETY: RTLD_NOLOAD loads nothing (no code runs); it only returns a new reference to an
    // object already loaded under that name, which is released at once.
    unsafe {
        let h = libc::dlopen(c.as_ptr(), libc::RTLD_NOW | libc::RTLD_NOLOAD);
        if !h.is_null() {
            libc::dlclose(h);
        }
        !h.is_null()
    }
}

/// Names reserved for the runtime's slots (`__TVM...`, `__tvm_ffi__...`).
fn is_runtime_name(s: &str) -> bool {
    s.starts_with("__TVM") || s.starts_with("__tvm_ffi__")
}

impl NativeLibrary for Library {
    fn path(&self) -> &Path {
        &self.inner.path
    }

    fn content_hash(&self) -> u64 {
        self.inner.hash
    }

    /// Kernel `name` as a packed function, which keeps the library loaded.
    fn get_function(&self, name: &str) -> Option<PackedFunc> {
        if let Some(f) = self.inner.vmtir.get(name) {
            let keep: Arc<dyn std::any::Any + Send + Sync> = Arc::clone(&self.inner) as _;
            return Some(crate::vmtir::adapter(name, *f, keep));
        }
        let f = *self.inner.kernels.get(name)?;
        let inner = Arc::clone(&self.inner);
        let owned: Arc<str> = name.into();
        if !inner.parallel {
            // No parallel launch to poll the VM from (see `Inner::parallel`).
            return Some(PackedFunc::new(name, move |_ctx, args| {
                let _loaded = &inner;
                kernel::call(&owned, f, args)
            }));
        }
        Some(PackedFunc::new(name, move |ctx, args| {
            let _loaded = &inner;
            // The kernel's parallel launches poll the calling VM through `ctx` (Ctrl-C).
            let _scope = super::pool::PollScope::enter(ctx);
            kernel::call(&owned, f, args)
        }))
    }
}
