//! The instruction stream, in the two encodings the format has had.
//!
//! ```text
//! instructions ::= count:varint instr[count]
//! ```
//!
//! **Version 1** spells every field out:
//!
//! ```text
//! call  0x00 func:varint nargs:varint (kind:byte payload)* dst:varint    dst = 0 void, r + 1
//! ret   0x01 result:varint
//! goto  0x02 offset:svarint
//! if    0x03 cond:varint false_offset:svarint
//! ```
//!
//! **Version 2** packs the common cases into the opcode byte. Its top two bits are the
//! instruction; for `ret`, `goto` and `if` the low six bits hold a small operand inline (the
//! result register, the zigzagged offset, the condition register), `0b111111` meaning "the
//! operand minus 63 follows as a varint":
//!
//! ```text
//! call  00 D R NNNN  [nargs-15:varint] func:varint [dst:varint] [kinds] payload*
//!          D: has a destination   R: every argument is a register (no kinds)
//!          NNNN: argument count 0..14, 15 = the count minus 15 follows
//!          kinds: one nibble per argument, low nibble first (unused nibble 0)
//! ret   01 rrrrrr  [result-63:varint]
//! goto  10 oooooo  [zigzag(offset)-63:varint]
//! if    11 cccccc  [cond-63:varint] false_offset:svarint
//! ```
//!
//! Argument kinds are 0 register (payload varint), 1 void, 2 vm state (no payload),
//! 3 immediate (svarint), 4 constant (varint index), 5 function (varint index).
//! A call with one register argument and a destination takes 4 bytes when the indices are
//! below 128, and at most 12 (func ≤ 5 bytes, registers ≤ 3 bytes since a frame has at most
//! 2^20 registers).

use super::cursor::Cursor;
use super::varint;
use crate::bytecode::{Arg, ArgKind, Instruction, Opcode};
use crate::error::Result;

// The numbers come from the instruction set's one description (`crate::bytecode`); named
// constants let the decoder match on bytes.
const CALL: u8 = Opcode::Call as u8;
const RET: u8 = Opcode::Ret as u8;
const GOTO: u8 = Opcode::Goto as u8;
const IF: u8 = Opcode::If as u8;

const KIND_REG: u8 = ArgKind::Reg as u8;
const KIND_VOID: u8 = ArgKind::Void as u8;
const KIND_VM: u8 = ArgKind::VmState as u8;
const KIND_IMM: u8 = ArgKind::Imm as u8;
const KIND_CONST: u8 = ArgKind::Const as u8;
const KIND_FUNC: u8 = ArgKind::Func as u8;

const V2_HAS_DST: u8 = 0x20;
const V2_ALL_REGS: u8 = 0x10;
const V2_NARGS_ESCAPE: u8 = 0x0F;
const V2_INLINE_ESCAPE: u8 = 0x3F;

/// The largest indices a decoded instruction may refer to.
pub struct Bounds {
    /// Entries in the function table.
    pub funcs: usize,
    /// Entries in the constant pool.
    pub constants: usize,
}

fn arg_kind(a: &Arg) -> u8 {
    a.kind() as u8
}

fn put_payload(out: &mut Vec<u8>, a: &Arg) {
    match *a {
        Arg::Reg(r) => varint::put(out, r.into()),
        Arg::Void | Arg::VmState => {}
        Arg::Imm(i) => varint::put_signed(out, i),
        Arg::Const(i) | Arg::Func(i) => varint::put(out, i.into()),
    }
}

/// Encodes `instrs` with the encoding of format `version`.
pub fn encode(instrs: &[Instruction], version: u32) -> Vec<u8> {
    let mut out = Vec::with_capacity(instrs.len() * 4 + 9);
    varint::put(&mut out, instrs.len() as u64);
    for i in instrs {
        if version == 1 {
            encode_v1(i, &mut out);
        } else {
            encode_v2(i, &mut out);
        }
    }
    out
}

fn encode_v1(i: &Instruction, out: &mut Vec<u8>) {
    match i {
        Instruction::Call { func, args, dst } => {
            out.push(CALL);
            varint::put(out, (*func).into());
            varint::put(out, args.len() as u64);
            for a in args {
                out.push(arg_kind(a));
                put_payload(out, a);
            }
            varint::put(out, dst.map_or(0, |d| u64::from(d) + 1));
        }
        Instruction::Ret { result } => {
            out.push(RET);
            varint::put(out, (*result).into());
        }
        Instruction::Goto { offset } => {
            out.push(GOTO);
            varint::put_signed(out, *offset);
        }
        Instruction::If { cond, false_offset } => {
            out.push(IF);
            varint::put(out, (*cond).into());
            varint::put_signed(out, *false_offset);
        }
    }
}

/// Writes the opcode byte with a six-bit inline operand, escaping large values.
fn put_inline(out: &mut Vec<u8>, op: u8, v: u64) {
    if v < u64::from(V2_INLINE_ESCAPE) {
        out.push(op << 6 | v as u8);
    } else {
        out.push(op << 6 | V2_INLINE_ESCAPE);
        varint::put(out, v - u64::from(V2_INLINE_ESCAPE));
    }
}

fn encode_v2(i: &Instruction, out: &mut Vec<u8>) {
    match i {
        Instruction::Call { func, args, dst } => {
            let all_regs = args.iter().all(|a| matches!(a, Arg::Reg(_)));
            let n = args.len();
            let mut op = CALL << 6 | (n.min(usize::from(V2_NARGS_ESCAPE)) as u8);
            if dst.is_some() {
                op |= V2_HAS_DST;
            }
            if all_regs {
                op |= V2_ALL_REGS;
            }
            out.push(op);
            if n >= usize::from(V2_NARGS_ESCAPE) {
                varint::put(out, (n - usize::from(V2_NARGS_ESCAPE)) as u64);
            }
            varint::put(out, (*func).into());
            if let Some(d) = dst {
                varint::put(out, (*d).into());
            }
            if !all_regs {
                for pair in args.chunks(2) {
                    let hi = pair.get(1).map_or(0, arg_kind);
                    out.push(arg_kind(&pair[0]) | hi << 4);
                }
            }
            for a in args {
                put_payload(out, a);
            }
        }
        Instruction::Ret { result } => put_inline(out, RET, (*result).into()),
        Instruction::Goto { offset } => put_inline(out, GOTO, varint::zigzag(*offset)),
        Instruction::If { cond, false_offset } => {
            put_inline(out, IF, (*cond).into());
            varint::put_signed(out, *false_offset);
        }
    }
}

/// Decodes the section with the encoding of format `version`, checking function and constant
/// indices against `bounds` (registers and jumps are left to the verifier).
pub fn decode(mut c: Cursor<'_>, version: u32, bounds: &Bounds) -> Result<Vec<Instruction>> {
    let n = c.count("instruction", 1)?;
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        out.push(if version == 1 { decode_v1(&mut c, bounds)? } else { decode_v2(&mut c, bounds)? });
    }
    c.finish()?;
    Ok(out)
}

fn payload(c: &mut Cursor<'_>, kind: u8, at: usize, bounds: &Bounds) -> Result<Arg> {
    Ok(match kind {
        KIND_REG => Arg::Reg(c.u32("argument register")?),
        KIND_VOID => Arg::Void,
        KIND_VM => Arg::VmState,
        KIND_IMM => Arg::Imm(c.signed()?),
        KIND_CONST => Arg::Const(c.index32("constant index", bounds.constants)?),
        KIND_FUNC => Arg::Func(c.index32("function argument index", bounds.funcs)?),
        other => return Err(c.err_at(at, format!("unknown argument kind {other}"))),
    })
}

fn callee(c: &mut Cursor<'_>, bounds: &Bounds) -> Result<u32> {
    c.index32("called function index", bounds.funcs)
}

fn decode_v1(c: &mut Cursor<'_>, bounds: &Bounds) -> Result<Instruction> {
    let at = c.pos();
    Ok(match c.byte()? {
        CALL => {
            let func = callee(c, bounds)?;
            let n = c.count("argument", 1)?;
            let mut args = Vec::with_capacity(n);
            for _ in 0..n {
                let kind_at = c.pos();
                let kind = c.byte()?;
                args.push(payload(c, kind, kind_at, bounds)?);
            }
            let dst_at = c.pos();
            let dst = match c.varint()? {
                0 => None,
                d => Some(u32::try_from(d - 1).map_err(|_| c.err_at(dst_at, "register does not fit in 32 bits"))?),
            };
            Instruction::Call { func, args, dst }
        }
        RET => Instruction::Ret { result: c.u32("result register")? },
        GOTO => Instruction::Goto { offset: c.signed()? },
        IF => Instruction::If { cond: c.u32("condition register")?, false_offset: c.signed()? },
        op => return Err(c.err_at(at, format!("unknown opcode {op:#04x}"))),
    })
}

/// The six-bit inline operand of `op`, or the escaped varint after it.
fn inline(c: &mut Cursor<'_>, op: u8) -> Result<u64> {
    let v = u64::from(op & V2_INLINE_ESCAPE);
    if v < u64::from(V2_INLINE_ESCAPE) {
        return Ok(v);
    }
    let at = c.pos();
    c.varint()?.checked_add(v).ok_or_else(|| c.err_at(at, "inline operand overflows 64 bits"))
}

fn inline_reg(c: &mut Cursor<'_>, op: u8) -> Result<u32> {
    let at = c.pos();
    let v = inline(c, op)?;
    u32::try_from(v).map_err(|_| c.err_at(at, format!("register {v} does not fit in 32 bits")))
}

fn decode_v2(c: &mut Cursor<'_>, bounds: &Bounds) -> Result<Instruction> {
    let at = c.pos();
    let op = c.byte()?;
    Ok(match op >> 6 {
        CALL => {
            let mut n = usize::from(op & V2_NARGS_ESCAPE);
            if op & V2_NARGS_ESCAPE == V2_NARGS_ESCAPE {
                // Void and vm-state arguments take half a byte (their kind nibble) each.
                n = c.count("extra argument", 2)?.saturating_add(n);
            }
            let func = callee(c, bounds)?;
            let dst = if op & V2_HAS_DST != 0 { Some(c.u32("destination register")?) } else { None };
            let mut kinds = Vec::new();
            if op & V2_ALL_REGS == 0 {
                let kinds_at = c.pos();
                let packed = c.bytes(n.div_ceil(2))?;
                if n % 2 == 1 && packed[n / 2] >> 4 != 0 {
                    return Err(c.err_at(kinds_at + n / 2, "the unused argument-kind nibble is not zero"));
                }
                kinds = packed.iter().flat_map(|b| [b & 0x0F, b >> 4]).take(n).collect();
            } else if n > c.remaining() {
                return Err(c.err(format!("{n} register arguments cannot fit in the rest of the section")));
            }
            let mut args = Vec::with_capacity(n);
            for i in 0..n {
                let kind = kinds.get(i).copied().unwrap_or(KIND_REG);
                args.push(payload(c, kind, at, bounds)?);
            }
            Instruction::Call { func, args, dst }
        }
        RET => Instruction::Ret { result: inline_reg(c, op)? },
        GOTO => Instruction::Goto { offset: varint::unzigzag(inline(c, op)?) },
        _ => Instruction::If { cond: inline_reg(c, op)?, false_offset: c.signed()? },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Vec<Instruction> {
        use Arg::*;
        vec![
            Instruction::Call { func: 3, args: vec![Reg(0)], dst: Some(1) },
            Instruction::Call { func: 0, args: vec![], dst: None },
            Instruction::Call {
                func: 200,
                args: vec![Reg(70_000), Void, VmState, Imm(-5), Imm(i64::MIN), Const(9), Func(4)],
                dst: Some(u32::MAX),
            },
            Instruction::Call { func: 1, args: (0..40).map(Reg).collect(), dst: Some(2) },
            Instruction::Call { func: 1, args: vec![Void; 31], dst: None },
            Instruction::Ret { result: 62 },
            Instruction::Ret { result: 63 },
            Instruction::Ret { result: u32::MAX },
            Instruction::Goto { offset: -31 },
            Instruction::Goto { offset: 32 },
            Instruction::Goto { offset: i64::MIN },
            Instruction::If { cond: 5, false_offset: 3 },
            Instruction::If { cond: 1000, false_offset: -1000 },
        ]
    }

    const BOUNDS: Bounds = Bounds { funcs: 201, constants: 10 };

    #[test]
    fn both_versions_round_trip() {
        for version in [1, 2] {
            let bytes = encode(&sample(), version);
            let back = decode(Cursor::new(&bytes, 0, "instructions"), version, &BOUNDS).unwrap();
            assert_eq!(back, sample(), "version {version}");
        }
    }

    #[test]
    fn one_register_call_is_small() {
        let i = [Instruction::Call { func: 3, args: vec![Arg::Reg(0)], dst: Some(1) }];
        assert_eq!(encode(&i, 2).len() - 1, 4);
        assert_eq!(encode(&i, 1).len() - 1, 6);
        let worst =
            [Instruction::Call { func: u32::MAX, args: vec![Arg::Reg((1 << 20) - 1)], dst: Some((1 << 20) - 1) }];
        assert_eq!(encode(&worst, 2).len() - 1, 12);
        assert_eq!(encode(&[Instruction::Ret { result: 2 }], 2).len() - 1, 1);
    }

    #[test]
    fn indices_are_checked_with_offsets() {
        let bytes = encode(&[Instruction::Call { func: 0, args: vec![Arg::Const(10)], dst: None }], 2);
        let e = decode(Cursor::new(&bytes, 7, "instructions"), 2, &BOUNDS).unwrap_err().to_string();
        assert!(e.contains("constant index 10 out of range") && e.contains("byte 11"), "{e}");
        let bytes = encode(&[Instruction::Call { func: 201, args: vec![], dst: None }], 1);
        assert_eq!(
            format!("{:?}", decode(Cursor::new(&bytes, 0, "instructions"), 1, &BOUNDS).expect_err("an error")),
            r#"Format("instructions section at byte 2: called function index 201 out of range (there are 201)")"#
        );
    }

    #[test]
    fn rejects_bad_kinds_and_opcodes() {
        // v2 call, one non-register argument of kind 7.
        let bytes = [0x03, 0x01, 0x01, 0x07];
        assert_eq!(
            format!("{:?}", decode(Cursor::new(&bytes, 0, "instructions"), 2, &BOUNDS).expect_err("an error")),
            r#"Format("instructions section at byte 1: unknown argument kind 7")"#
        );
        // Unused nibble set.
        let bytes = [0x03, 0x01, 0x01, 0x11];
        assert_eq!(
            format!("{:?}", decode(Cursor::new(&bytes, 0, "instructions"), 2, &BOUNDS).expect_err("an error")),
            r#"Format("instructions section at byte 3: the unused argument-kind nibble is not zero")"#
        );
        let bytes = [0x03, 0x09];
        assert_eq!(
            format!("{:?}", decode(Cursor::new(&bytes, 0, "instructions"), 1, &BOUNDS).expect_err("an error")),
            r#"Format("instructions section at byte 1: unknown opcode 0x09")"#
        );
    }
}
