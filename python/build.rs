//! Tells the crate which Python it is built for: `cfg(Py_GIL_DISABLED)` on a free-threaded
//! build, where the VM lock cannot rely on the GIL (see `vm_lock.rs`).
fn main() {
    pyo3_build_config::use_pyo3_cfgs();
}
