//! The reader of TVM 0.27's serialized `relax.VMExecutable` (what `ex.mod.write_to_file`
//! writes, and what `export_library` embeds in the `.so`):
//!
//! ```text
//! vmexec    ::= magic:u64 version:string functions scopes constants code
//! functions ::= n:u64 (kind:i32 name:string start:i64 end:i64 num_args:i64 regs:i64 params:vec<string>)*
//! scopes    ::= n:u64 (const_index:i64 scope:string)*
//! constants ::= n:u64 (type_index:i32 payload)*          see constants.rs
//! code      ::= instr_offset:vec<i64> instr_data:vec<i64> see code.rs
//! ```
//!
//! The result is an [`ExecutableParts`] that goes through relaxvm's one verifier like every
//! other executable, so a crafted file fails with an error before any VM runs it.

pub mod bytes;
mod code;
mod constants;

use bytes::Bytes;
pub use constants::dtype_of;
use relaxvm::{Error, ErrorKind, Executable, ExecutableParts, FuncInfo, Result};

/// The magic number that opens a serialized `relax.VMExecutable`.
pub const MAGIC: u64 = 0xD225_DE2F_4214_151E;

/// The versions of the serialization this reader knows.
pub const SUPPORTED_VERSIONS: &[&str] = &["0.14"];

/// TVM's function kinds (`VMFuncInfo::FuncKind`).
const KIND_PACKED: i32 = 0;
const KIND_VM: i32 = 1;
const KIND_VM_TIR: i32 = 2;

/// Decodes a serialized `relax.VMExecutable` into a verified executable (without kernels: a
/// loader attaches the library that provides them).
pub fn read(bytes: &[u8]) -> Result<Executable> {
    Executable::from_parts(read_parts(bytes)?).map_err(|e| match e.into_kind() {
        ErrorKind::Invalid(e) => e.within("the TVM program fails verification").into(),
        other => Error::from(other),
    })
}

/// Decodes a serialized `relax.VMExecutable` into unverified parts.
pub fn read_parts(bytes: &[u8]) -> Result<ExecutableParts> {
    let mut b = Bytes::new(bytes, "relax.VMExecutable");
    let magic = b.u64("magic number")?;
    if magic != MAGIC {
        return Err(Error::format(format!(
            "not a TVM relax.VMExecutable: magic number {magic:#018x}, expected {MAGIC:#018x}"
        )));
    }
    let version = b.string("version")?;
    if !SUPPORTED_VERSIONS.contains(&version.as_str()) {
        return Err(Error::format(format!(
            "relax.VMExecutable version {version:?} is not supported; this reader supports version {} (Apache TVM 0.27)",
            SUPPORTED_VERSIONS.join(", ")
        )));
    }
    let (mut funcs, compiled) = read_functions(&mut b)?;
    read_memory_scopes(&mut b)?;
    let constants = constants::read(&mut b)?;
    let mut instrs = code::read(&mut b, &funcs, constants.len())?;
    b.finish()?;
    crate::vmtir::wrap_functions(&mut funcs, &mut instrs, &compiled)?;
    Ok(ExecutableParts { funcs, constants, instrs, ..Default::default() })
}

/// The function table, and the VM TIR functions in it (see [`crate::vmtir`]), whose entries
/// hold their name, arity and parameters until [`crate::vmtir::wrap_functions`] gives them code.
fn read_functions(b: &mut Bytes<'_>) -> Result<(Vec<FuncInfo>, Vec<crate::vmtir::Compiled>)> {
    // A function entry takes at least 4 + 8 + 5 * 8 bytes.
    let n = b.count("function table", 52)?;
    let mut funcs = b.vec_with_capacity(n, "function table")?;
    let mut compiled = Vec::new();
    for i in 0..n {
        let at = b.pos();
        let kind = b.i32("function kind")?;
        let name = b.string("function name")?;
        let start = b.i64("start_instr")?;
        let end = b.i64("end_instr")?;
        let num_args = b.i64("num_args")?;
        let regs = b.i64("register_file_size")?;
        let params = b.vec_string("param_names")?;
        let field = |what: &str, v: i64| {
            u32::try_from(v).map_err(|_| {
                Error::format(format!(
                    "relax.VMExecutable at byte {at}: function {i} ({name:?}) has {what} {v}, outside 0..2^32"
                ))
            })
        };
        let info = match kind {
            KIND_PACKED => FuncInfo::packed(&name),
            KIND_VM => {
                FuncInfo::bytecode(&name, field("start_instr", start)?, field("end_instr", end)?, field("num_args", num_args)?, field("register_file_size", regs)?)
                    .with_param_names(params)
            }
            KIND_VM_TIR => {
                let num_args = field("num_args", num_args)?;
                let regs = field("register_file_size", regs)?;
                if regs <= num_args {
                    return Err(Error::format(format!(
                        "relax.VMExecutable at byte {at}: VM TIR function {i} ({name:?}) has {regs} registers for {num_args} inputs; it needs one more, for its result"
                    )));
                }
                compiled.push(crate::vmtir::Compiled { index: i, num_args, registers: regs });
                // A placeholder until `wrap_functions` gives it its code.
                FuncInfo::bytecode(&name, 0, 0, num_args, num_args + 1).with_param_names(params)
            }
            other => {
                return Err(Error::format(format!(
                    "relax.VMExecutable at byte {at}: function {name:?} has kind {other}; expected 0 (packed), 1 (VM function) or 2 (VM TIR function)"
                )))
            }
        };
        funcs.push(info);
    }
    Ok((funcs, compiled))
}

/// The memory scope of constants: relaxvm runs on the CPU, whose one scope is `global`.
fn read_memory_scopes(b: &mut Bytes<'_>) -> Result<()> {
    let n = b.count("memory scopes", 16)?;
    for _ in 0..n {
        let index = b.i64("memory scope index")?;
        let scope = b.string("memory scope")?;
        if scope != "global" && !scope.is_empty() {
            return Err(b.err(format!(
                "constant {index} lives in memory scope {scope:?}; relaxvm runs CPU programs, whose one scope is \"global\""
            )));
        }
    }
    Ok(())
}
