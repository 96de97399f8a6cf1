//! The code section: one offset per instruction into a stream of `i64` words.
//!
//! ```text
//! call  = 1 dst func_index num_args arg*
//! ret   = 2 result_reg
//! goto  = 3 pc_offset
//! if    = 4 cond_reg false_offset
//! arg   = kind:8 | value:56 (sign-extended); kind 0 register, 1 immediate, 2 constant, 3 function
//! ```
//!
//! Registers at or above 2^54 are special: 2^54 is the void register, 2^54 + 1 the VM state.

use super::bytes::Bytes;
use relaxvm::{Arg, Error, FuncInfo, Instruction, Result};

const OP_CALL: i64 = 1;
const OP_RET: i64 = 2;
const OP_GOTO: i64 = 3;
const OP_IF: i64 = 4;

const BEGIN_SPECIAL: i64 = 1 << 54;
const VOID_REG: i64 = BEGIN_SPECIAL;
const VM_REG: i64 = BEGIN_SPECIAL + 1;

const ARG_REGISTER: u64 = 0;
const ARG_IMMEDIATE: u64 = 1;
const ARG_CONSTANT: u64 = 2;
const ARG_FUNCTION: u64 = 3;

/// The instruction stream, decoded and range-checked (the verifier checks the rest).
pub fn read(b: &mut Bytes<'_>, funcs: &[FuncInfo], num_constants: usize) -> Result<Vec<Instruction>> {
    let offsets = b.vec_i64("instr_offset")?;
    let data = b.vec_i64("instr_data")?;
    offsets
        .iter()
        .enumerate()
        .map(|(pc, off)| {
            let start = usize::try_from(*off).ok().filter(|s| *s < data.len()).ok_or_else(|| {
                Error::format(format!("instruction {pc}: offset {off} is outside the {} code words", data.len()))
            })?;
            decode(&data[start..], funcs.len(), num_constants)
                .map_err(|e| Error::format(format!("relax.VMExecutable code, instruction {pc}: {e}")))
        })
        .collect()
}

fn decode(words: &[i64], num_funcs: usize, num_constants: usize) -> std::result::Result<Instruction, String> {
    let word =
        |i: usize, what: &str| words.get(i).copied().ok_or_else(|| format!("the code ends inside the {what} field"));
    match word(0, "opcode")? {
        OP_CALL => {
            let dst = word(1, "destination")?;
            let func = index(word(2, "function index")?, num_funcs, "function")?;
            let n = word(3, "argument count")?;
            let n = usize::try_from(n).ok().filter(|n| *n <= words.len().saturating_sub(4)).ok_or_else(|| {
                format!("argument count {n} exceeds the {} words left", words.len().saturating_sub(4))
            })?;
            let args = words[4..4 + n].iter().map(|w| arg(*w, num_funcs, num_constants)).collect::<Result<_, _>>()?;
            let dst = if dst == VOID_REG { None } else { Some(register(dst, "destination")?) };
            Ok(Instruction::Call { func, args, dst })
        }
        OP_RET => Ok(Instruction::Ret { result: register(word(1, "result register")?, "result")? }),
        OP_GOTO => Ok(Instruction::Goto { offset: word(1, "pc offset")? }),
        OP_IF => Ok(Instruction::If {
            cond: register(word(1, "condition register")?, "condition")?,
            false_offset: word(2, "false offset")?,
        }),
        other => Err(format!("unknown opcode {other}; expected 1 (call), 2 (ret), 3 (goto) or 4 (if)")),
    }
}

fn register(r: i64, what: &str) -> std::result::Result<u32, String> {
    u32::try_from(r).map_err(|_| format!("{what} register {r} is not an ordinary register"))
}

fn index(i: i64, bound: usize, what: &str) -> std::result::Result<u32, String> {
    usize::try_from(i)
        .ok()
        .filter(|i| *i < bound)
        .map(|i| i as u32)
        .ok_or_else(|| format!("{what} index {i} is out of range (the table has {bound})"))
}

fn arg(word: i64, num_funcs: usize, num_constants: usize) -> std::result::Result<Arg, String> {
    let kind = (word as u64) >> 56;
    // The value is the low 56 bits, sign-extended.
    let value = (word << 8) >> 8;
    match kind {
        ARG_REGISTER => match value {
            VOID_REG => Ok(Arg::Void),
            VM_REG => Ok(Arg::VmState),
            r => Ok(Arg::Reg(register(r, "argument")?)),
        },
        ARG_IMMEDIATE => Ok(Arg::Imm(value)),
        ARG_CONSTANT => Ok(Arg::Const(index(value, num_constants, "constant")?)),
        ARG_FUNCTION => Ok(Arg::Func(index(value, num_funcs, "function")?)),
        other => Err(format!("argument word {word:#x} has kind {other}; expected 0 (register), 1 (immediate), 2 (constant) or 3 (function)")),
    }
}
