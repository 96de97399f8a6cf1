//! The function handle native code gets for a packed function's name (`TVMFFIFunctionGetGlobal`):
//! its own file, so that the services that hand handles out (`ffi::services`) and the compiled
//! mode that resolves them (`vmtir::frame`, `vmtir::handles`) both use it without importing
//! each other.

/// What a function handle given to a kernel points at: the name of a packed function, resolved
/// in relaxvm's registry at each call (so re-registering a name takes effect, as in TVM). A
/// running VM TIR function keeps what its handles resolved to while the registry is unchanged
/// (see `crate::vmtir::frame::Resolved`), indexed by its `index`.
pub struct Handle {
    /// The packed function's name.
    pub(crate) name: String,
    /// The handle's position among all handles given out (dense, from 0).
    pub(crate) index: usize,
}
