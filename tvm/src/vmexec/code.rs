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
///
/// Instruction `pc` is the words from its offset up to the next instruction's offset (or the end
/// of the code), and must fill them exactly: offsets strictly increase, so each code word is
/// decoded once and the decoded program is at most a constant factor larger than the file (a
/// crafted file whose offsets all point into one long call cannot make every instruction
/// decode, and allocate, that call again).
pub fn read(b: &mut Bytes<'_>, funcs: &[FuncInfo], num_constants: usize) -> Result<Vec<Instruction>> {
    let offsets_at = b.pos();
    let offsets = b.vec_i64("instr_offset")?;
    let data = b.vec_i64("instr_data")?;
    let mut instrs = Vec::new();
    instrs.try_reserve_exact(offsets.len()).map_err(|_| {
        Error::format(format!(
            "relax.VMExecutable at byte {offsets_at}: instr_offset: no memory for {} instructions",
            offsets.len()
        ))
    })?;
    for (pc, off) in offsets.iter().enumerate() {
        let start = usize::try_from(*off).ok().filter(|s| *s < data.len()).ok_or_else(|| {
            Error::format(format!(
                "relax.VMExecutable code, instruction {pc}: offset {off} is outside the {} code words",
                data.len()
            ))
        })?;
        let end = match offsets.get(pc + 1) {
            None => data.len(),
            Some(next) => usize::try_from(*next).ok().filter(|n| *n > start && *n <= data.len()).ok_or_else(|| {
                Error::format(format!(
                    "relax.VMExecutable code, instruction {}: offset {next} does not follow instruction {pc} at code word {start} (offsets must increase, within the {} code words)",
                    pc + 1,
                    data.len()
                ))
            })?,
        };
        let instr = decode(&data[start..end], funcs.len(), num_constants).map_err(|e| {
            Error::format(format!("relax.VMExecutable code, instruction {pc} (code word {start}): {e}"))
        })?;
        instrs.push(instr);
    }
    Ok(instrs)
}

/// Decodes the one instruction that fills `words`.
fn decode(words: &[i64], num_funcs: usize, num_constants: usize) -> std::result::Result<Instruction, String> {
    let word = |i: usize, what: &str| {
        words
            .get(i)
            .copied()
            .ok_or_else(|| format!("the instruction ends inside the {what} field (it has {} words)", words.len()))
    };
    let (instr, used) = match word(0, "opcode")? {
        OP_CALL => {
            let dst = word(1, "destination")?;
            let func = index(word(2, "function index")?, num_funcs, "function")?;
            let n = word(3, "argument count")?;
            let left = words.len().saturating_sub(4);
            let n = usize::try_from(n)
                .ok()
                .filter(|n| *n <= left)
                .ok_or_else(|| format!("argument count {n} exceeds the {left} words of the instruction"))?;
            let mut args = Vec::new();
            args.try_reserve_exact(n).map_err(|_| format!("no memory for {n} arguments"))?;
            for w in &words[4..4 + n] {
                args.push(arg(*w, num_funcs, num_constants)?);
            }
            let dst = if dst == VOID_REG { None } else { Some(register(dst, "destination")?) };
            (Instruction::Call { func, args, dst }, 4 + n)
        }
        OP_RET => (Instruction::Ret { result: register(word(1, "result register")?, "result")? }, 2),
        OP_GOTO => (Instruction::Goto { offset: word(1, "pc offset")? }, 2),
        OP_IF => (
            Instruction::If {
                cond: register(word(1, "condition register")?, "condition")?,
                false_offset: word(2, "false offset")?,
            },
            3,
        ),
        other => return Err(format!("unknown opcode {other}; expected 1 (call), 2 (ret), 3 (goto) or 4 (if)")),
    };
    if used != words.len() {
        return Err(format!(
            "the instruction takes {used} words, but the next instruction starts {} words after it",
            words.len()
        ));
    }
    Ok(instr)
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

#[cfg(test)]
mod tests {
    use super::*;

    fn stream(offsets: &[i64], data: &[i64]) -> Vec<u8> {
        let mut out = Vec::new();
        for v in [offsets, data] {
            out.extend((v.len() as u64).to_le_bytes());
            v.iter().for_each(|w| out.extend(w.to_le_bytes()));
        }
        out
    }

    fn decode_stream(offsets: &[i64], data: &[i64]) -> Result<Vec<Instruction>> {
        let bytes = stream(offsets, data);
        read(&mut Bytes::new(&bytes, "relax.VMExecutable"), &[FuncInfo::packed("f")], 0)
    }

    /// The attack of issue 31: every offset points at one long call. Each instruction decoding
    /// the whole call again made the decoded size quadratic in the file (an abort); now an
    /// offset that does not follow the previous instruction is an error at once.
    #[test]
    fn offsets_into_one_long_call_are_refused_without_decoding_it_again() {
        let n = 10_000usize;
        let mut data = vec![OP_CALL, VOID_REG, 0, n as i64];
        data.extend(std::iter::repeat_n((ARG_IMMEDIATE as i64) << 56, n));
        let offsets = vec![0i64; n];
        let e = decode_stream(&offsets, &data).unwrap_err().to_string();
        assert!(e.contains("instruction 1: offset 0 does not follow instruction 0 at code word 0"), "{e}");
        // Decreasing offsets, and an instruction longer than its span, likewise.
        let e = decode_stream(&[3, 0], &[2, 0, 0, 2, 0]).unwrap_err().to_string();
        assert!(e.contains("instruction 1: offset 0 does not follow"), "{e}");
        let e = decode_stream(&[0, 1], &[2, 0, 2, 0]).unwrap_err().to_string();
        assert!(
            e.contains(
                "instruction 0 (code word 0): the instruction ends inside the result register field (it has 1 words)"
            ),
            "{e}"
        );
        let e = decode_stream(&[0, 1], &[1, VOID_REG, 0, 1, 5, 2, 0]).unwrap_err().to_string();
        assert!(e.contains("instruction 0 (code word 0): the instruction ends inside the destination field"), "{e}");
    }

    #[test]
    fn words_between_instructions_are_refused() {
        let e = decode_stream(&[0, 3], &[2, 0, 7, 2, 0]).unwrap_err().to_string();
        assert!(e.contains("instruction 0 (code word 0): the instruction takes 2 words, but the next instruction starts 3 words after it"), "{e}");
        let e = decode_stream(&[0], &[2, 0, 7]).unwrap_err().to_string();
        assert!(e.contains("takes 2 words, but the next instruction starts 3"), "{e}");
        // Contiguous instructions decode.
        let ok = decode_stream(&[0, 2, 4, 7], &[2, 0, 3, 1, 4, 0, -1, 1, VOID_REG, 0, 1, 1 << 56]).unwrap();
        assert_eq!(ok.len(), 4);
        assert!(matches!(&ok[3], Instruction::Call { args, dst: None, .. } if args.len() == 1));
    }
}
