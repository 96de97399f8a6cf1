//! The module tree TVM's `export_library` embeds in a shared library as the data symbol
//! `__tvm_ffi__library_bin`:
//!
//! ```text
//! library_bin ::= nbytes:u64 tree
//! tree        ::= import_tree_indptr:vec<i64> import_tree_child_indices:vec<i64> module*
//! module      ::= kind:string (payload:string unless kind == "_lib")
//! ```
//!
//! The modules of kind `_lib` stand for the shared library itself (its kernels); the VM program
//! is the module of kind `relax.VMExecutable`.

use crate::vmexec::bytes::Bytes;
use relaxvm::{Error, Result};

/// The kind of the module that holds a Relax VM program.
pub const VM_EXECUTABLE_KIND: &str = "relax.VMExecutable";

/// The kind that stands for the library's own compiled code.
pub const LIB_KIND: &str = "_lib";

/// One module of the tree.
#[derive(Debug)]
pub struct Module<'a> {
    /// The module's type key, e.g. `relax.VMExecutable`.
    pub kind: String,
    /// Its serialized bytes (`None` for `_lib`).
    pub payload: Option<&'a [u8]>,
}

/// Decodes the contents of `__tvm_ffi__library_bin` (its `u64` size prefix included) into its
/// modules, in file order.
pub fn modules(symbol: &[u8]) -> Result<Vec<Module<'_>>> {
    let mut b = Bytes::new(symbol, "__tvm_ffi__library_bin");
    let nbytes = b.u64("size")?;
    // Exactly: the symbol's size is also the hole the loaded copy of the library leaves
    // (ffi/private_copy.rs), so no byte outside what is decoded here may be in it.
    let body = usize::try_from(nbytes).ok().filter(|n| *n == b.remaining()).ok_or_else(|| {
        let how = if nbytes > b.remaining() as u64 { "only " } else { "" };
        b.err(format!("the blob declares {nbytes} bytes, but the symbol holds {how}{} after the size", b.remaining()))
    })?;
    let mut b = Bytes::new(b.take(body, "module tree")?, "module tree of __tvm_ffi__library_bin");
    let indptr = b.vec_i64("import_tree_indptr")?;
    let children = b.vec_i64("import_tree_child_indices")?;
    let mut out: Vec<Module<'_>> = Vec::new();
    while b.remaining() > 0 {
        // Each module takes at least its 8-byte kind length: the list grows with the bytes read.
        out.try_reserve(1).map_err(|_| b.err("module list: out of memory"))?;
        let kind = b.string("module kind")?;
        let payload = if kind == LIB_KIND {
            None
        } else {
            let n = b.count("module payload", 1)?;
            Some(b.take(n, "module payload bytes")?)
        };
        out.push(Module { kind, payload });
    }
    // The tree must index only modules that exist (we use no edge, but a broken tree means a
    // broken file).
    if let Some(bad) = children.iter().find(|c| usize::try_from(**c).map_or(true, |c| c >= out.len())) {
        return Err(Error::format(format!(
            "module tree of __tvm_ffi__library_bin: import child index {bad} but there are {} modules",
            out.len()
        )));
    }
    if indptr.windows(2).any(|w| w[0] > w[1])
        || indptr.last().is_some_and(|l| usize::try_from(*l) != Ok(children.len()))
    {
        return Err(Error::format(
            "module tree of __tvm_ffi__library_bin: import_tree_indptr is not an increasing index into the children",
        ));
    }
    Ok(out)
}

/// The payload of the one `relax.VMExecutable` module; an error naming the kinds found when
/// there is none.
pub fn vm_executable<'a>(modules: &[Module<'a>]) -> Result<&'a [u8]> {
    let found: Vec<&Module<'a>> = modules.iter().filter(|m| m.kind == VM_EXECUTABLE_KIND).collect();
    match found.as_slice() {
        [m] => Ok(m.payload.expect("only _lib has no payload")),
        [] => Err(Error::format(format!(
            "the library holds no {VM_EXECUTABLE_KIND} module (found: {}); only Relax VM programs (tvm.compile of a Relax module) can run",
            modules.iter().map(|m| m.kind.as_str()).collect::<Vec<_>>().join(", ")
        ))),
        _ => Err(Error::format(format!("the library holds {} {VM_EXECUTABLE_KIND} modules; expected one", found.len()))),
    }
}
