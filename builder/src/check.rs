//! The check a function passes when its scope closes and again at `get()`: the VM's verifier
//! ([`relaxvm::verify`]) to [`Depth::DataFlow`](relaxvm::verify::Depth::DataFlow) — jumps,
//! fall-off, indices, arities, and every register written on every path before it is read —
//! against the builder's function table as it stands. Inputs that are never read produce
//! warnings.

use crate::error::CheckError;
use relaxvm::Executable;

/// Checks every bytecode function of `exe` (which the VM's verifier already accepted to
/// structure) and returns the warnings, or the first error.
pub fn check_executable(exe: &Executable) -> Result<Vec<String>, CheckError> {
    exe.verify_data_flow()
}
