//! Lines to a program whose function references are still names (see [`super::resolve`]).

use super::constant::parse_constant;
use super::cursor::{Cursor, Pos};
use super::location::parse_loc;
use super::AsmError;
use relaxvm::bytecode::{Arg, Instruction, Opcode, Slot};
use relaxvm::{Location, Signature, Value};
use std::collections::HashMap;

/// The parsed program: constants, the function table in source order and the entry function.
pub(super) struct Program {
    pub constants: Vec<Value>,
    pub entries: Vec<FuncDecl>,
    pub entry: Option<(String, Pos)>,
}

/// One function-table entry: `.packed NAME` or `@NAME ...:` with its body.
pub(super) struct FuncDecl {
    pub name: String,
    pub pos: Pos,
    pub body: Option<Body>,
}

/// A bytecode function's header and instructions.
pub(super) struct Body {
    pub num_inputs: (u32, Pos),
    pub regs: Option<(u32, Pos)>,
    pub params: Vec<String>,
    /// The signature and where `sig=` starts.
    pub sig: Option<(Signature, Pos)>,
    pub instrs: Vec<Instr>,
}

/// One instruction, with where it and each of its operands start, and its optional location.
/// Function references are still names (resolved in [`super::resolve`]).
pub(super) struct Instr {
    pub pos: Pos,
    pub op: Instruction<String>,
    pub operands: Operands,
    pub loc: Option<Location>,
}

/// Where the operands of an instruction are written, for errors about one of them.
#[derive(Default)]
pub(super) struct Operands {
    /// The callee's name.
    pub callee: Option<Pos>,
    /// Each argument.
    pub args: Vec<Pos>,
    /// The destination, the returned or the tested register.
    pub reg: Option<Pos>,
}

impl Instr {
    /// Where operand `slot` is written; the instruction's start when not known (jump offsets).
    pub fn at(&self, slot: Option<Slot>) -> Pos {
        let found = match slot {
            Some(Slot::Callee) => self.operands.callee,
            Some(Slot::Arg(i)) => self.operands.args.get(i).copied(),
            Some(Slot::Dst | Slot::Result | Slot::Cond) => self.operands.reg,
            Some(Slot::Offset) | None => None,
        };
        found.unwrap_or(self.pos)
    }
}

/// Parses the whole source.
pub(super) fn parse(text: &str) -> Result<Program, AsmError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut program = Program { constants: Vec::new(), entries: Vec::new(), entry: None };
    let mut seen: HashMap<String, usize> = HashMap::new();
    // The entry whose body instructions go to; any directive ends it.
    let mut current: Option<usize> = None;
    for (i, raw) in text.split('\n').enumerate() {
        let line = raw.strip_suffix('\r').unwrap_or(raw);
        let mut c = Cursor::new(line, i + 1);
        c.skip_ws();
        if c.at_end() {
            continue;
        }
        if c.peek() == Some('@') {
            let entry = parse_header(&mut c)?;
            current = Some(add_entry(&mut program, &mut seen, entry)?);
            continue;
        }
        let at = c.pos();
        let word = c.take_while(|ch| ch.is_ascii_alphanumeric() || matches!(ch, '.' | '_'));
        match word {
            ".const" => {
                current = None;
                parse_const(&mut c, &mut program.constants)?;
            }
            ".entry" => {
                current = None;
                c.expect_ws("a function name after '.entry'")?;
                let pos = c.pos();
                let name = c.name("a function name")?;
                c.expect_end()?;
                if let Some((_, prev)) = &program.entry {
                    return Err(at.error(format!("the entry function is already set (line {})", prev.line)));
                }
                program.entry = Some((name, pos));
            }
            ".packed" => {
                current = None;
                c.expect_ws("a function name after '.packed'")?;
                let pos = c.pos();
                let name = c.name("a function name")?;
                c.expect_end()?;
                add_entry(&mut program, &mut seen, FuncDecl { name, pos, body: None })?;
            }
            _ if Opcode::from_mnemonic(word).is_some() => {
                let Some(body) = current.and_then(|e| program.entries[e].body.as_mut()) else {
                    return Err(at.error(format!(
                        "'{word}' outside a function: start one with a header like `@main inputs=1 regs=2:`"
                    )));
                };
                let mut operands = Operands::default();
                let op = parse_op(&mut c, word, &mut operands)?;
                c.skip_ws();
                let loc = if c.rest().starts_with("loc(") { Some(parse_loc(&mut c)?) } else { None };
                c.expect_end()?;
                body.instrs.push(Instr { pos: at, op, operands, loc });
            }
            _ => {
                let found = if word.is_empty() { c.found() } else { format!("{word:?}") };
                return Err(at.error(format!(
                    "expected .const, .packed, .entry, a function header `@name inputs=N:` or an instruction (call, ret, goto, if), found {found}"
                )));
            }
        }
    }
    Ok(program)
}

fn add_entry(program: &mut Program, seen: &mut HashMap<String, usize>, entry: FuncDecl) -> Result<usize, AsmError> {
    if entry.name.is_empty() {
        // The builder's own refusal, at the name's position (one message for both front ends).
        return Err(entry.pos.error(crate::BuildError::EmptyName.to_string()));
    }
    if let Some(&prev) = seen.get(&entry.name) {
        let line = program.entries[prev].pos.line;
        return Err(entry
            .pos
            .error(format!("function {:?} is already in the function table (line {line})", entry.name)));
    }
    seen.insert(entry.name.clone(), program.entries.len());
    program.entries.push(entry);
    Ok(program.entries.len() - 1)
}

/// `.const c[N] = CONSTANT`, where N must be the next index.
fn parse_const(c: &mut Cursor<'_>, constants: &mut Vec<Value>) -> Result<(), AsmError> {
    c.expect_ws("c[N] after '.const'")?;
    c.expect("c[", "c[N] after '.const'")?;
    let at = c.pos();
    let index = c.uint("a constant index")?;
    if index as usize != constants.len() {
        return Err(at.error(format!(
            "expected constant index {}, found {index} (constants are numbered in order)",
            constants.len()
        )));
    }
    c.expect("]", "']'")?;
    c.skip_ws();
    c.expect("=", "'='")?;
    c.skip_ws();
    constants.push(parse_constant(c)?);
    c.expect_end()
}

/// `@NAME inputs=N [regs=M] [params=(a, b) | sig=(a: T, b: U) -> R]:`
fn parse_header(c: &mut Cursor<'_>) -> Result<FuncDecl, AsmError> {
    let header = c.pos();
    c.expect("@", "'@'")?;
    let pos = c.pos();
    let name = c.name("a function name after '@'")?;
    let (mut inputs, mut regs, mut params, mut sig) = (None, None, None, None);
    loop {
        let spaced = c.skip_ws();
        if c.eat(":") {
            break;
        }
        if !spaced {
            return Err(c.expected("' ' or ':' after the function name"));
        }
        let at = c.pos();
        let found = c.found();
        let key = c.take_while(|ch| ch.is_ascii_lowercase());
        let dup = |seen: bool| {
            if seen {
                Err(at.error(format!("{key}= is given twice")))
            } else {
                Ok(())
            }
        };
        let unexpected =
            || at.error(format!("expected inputs=N, regs=N, params=(...), sig=(...) -> TYPE or ':', found {found}"));
        if key.is_empty() || !c.eat("=") {
            return Err(unexpected());
        }
        match key {
            "inputs" => {
                dup(inputs.is_some())?;
                inputs = Some((c.uint("the number of inputs")?, at));
            }
            "regs" => {
                dup(regs.is_some())?;
                regs = Some((c.uint("the number of registers")?, at));
            }
            "params" => {
                dup(params.is_some())?;
                params = Some((parse_params(c)?, at));
            }
            "sig" => {
                dup(sig.is_some())?;
                sig = Some((parse_sig(c)?, at));
            }
            _ => return Err(unexpected()),
        }
    }
    c.expect_end()?;
    let num_inputs = match (inputs, &sig) {
        (Some(n), _) => n,
        // A signature gives the number of inputs.
        (None, Some((s, at))) => (u32::try_from(s.params.len()).unwrap_or(u32::MAX), *at),
        (None, None) => return Err(header.error(format!("the header of {name:?} needs inputs=N"))),
    };
    if let (Some((sig, _)), Some((names, at))) = (&sig, &params) {
        if !names.iter().map(String::as_str).eq(sig.param_names()) {
            return Err(at.error(format!(
                "params=({}) differs from the parameter names of sig= ({})",
                names.join(", "),
                sig.param_names().collect::<Vec<_>>().join(", ")
            )));
        }
    }
    let params = match (&sig, params) {
        (Some((s, _)), _) => s.param_names().map(str::to_string).collect(),
        (None, Some((names, _))) => names,
        (None, None) => Vec::new(),
    };
    let body = Body { num_inputs, regs, params, sig, instrs: Vec::new() };
    Ok(FuncDecl { name, pos, body: Some(body) })
}

/// `(a: T, b: U) -> R`, in the syntax of [`Signature`]'s text form.
fn parse_sig(c: &mut Cursor<'_>) -> Result<Signature, AsmError> {
    match Signature::parse_prefix(c.rest()) {
        Ok((sig, len)) => {
            c.skip_bytes(len);
            Ok(sig)
        }
        Err(e) => Err(c.pos_after(e.offset).error(format!("expected {} in sig=, found {}", e.expected, e.found))),
    }
}

fn parse_params(c: &mut Cursor<'_>) -> Result<Vec<String>, AsmError> {
    c.expect("(", "'(' starting the parameter names")?;
    let mut names = Vec::new();
    c.skip_ws();
    if c.eat(")") {
        return Ok(names);
    }
    loop {
        c.skip_ws();
        names.push(c.name("a parameter name")?);
        c.skip_ws();
        if c.eat(")") {
            return Ok(names);
        }
        c.expect(",", "',' or ')' in params=(...)")?;
    }
}

/// `%N`, noting where it starts in `at`.
fn parse_reg(c: &mut Cursor<'_>, at: &mut Option<Pos>) -> Result<u32, AsmError> {
    *at = Some(c.pos());
    if !c.eat("%") {
        return Err(c.expected("a register like %0"));
    }
    c.uint("a register number after '%'")
}

/// The operands of the instruction `word` (a mnemonic), noting where each starts.
fn parse_op(c: &mut Cursor<'_>, word: &str, at: &mut Operands) -> Result<Instruction<String>, AsmError> {
    let Some(opcode) = Opcode::from_mnemonic(word) else {
        return Err(c.expected("an instruction (call, ret, goto, if)"));
    };
    match opcode {
        Opcode::Call => {
            c.expect_ws("a function name after 'call'")?;
            at.callee = Some(c.pos());
            let func = c.name("a function name")?;
            let mut args = Vec::new();
            c.skip_ws();
            if c.eat("in:") {
                loop {
                    c.skip_ws();
                    at.args.push(c.pos());
                    args.push(parse_arg(c)?);
                    c.skip_ws();
                    if !c.eat(",") {
                        break;
                    }
                }
            }
            let dst = if c.eat("dst:") {
                c.skip_ws();
                if c.eat("void") {
                    None
                } else if c.peek() == Some('%') {
                    Some(parse_reg(c, &mut at.reg)?)
                } else {
                    return Err(c.expected("a destination register like %0, or void"));
                }
            } else {
                None
            };
            Ok(Instruction::Call { func, args, dst })
        }
        Opcode::Ret => {
            c.expect_ws("a register after 'ret'")?;
            Ok(Instruction::Ret { result: parse_reg(c, &mut at.reg)? })
        }
        Opcode::Goto => {
            c.expect_ws("an offset after 'goto'")?;
            Ok(Instruction::Goto { offset: c.int("a jump offset")? })
        }
        Opcode::If => {
            c.expect_ws("a register after 'if'")?;
            let cond = parse_reg(c, &mut at.reg)?;
            c.expect_ws("the false offset after the condition")?;
            Ok(Instruction::If { cond, false_offset: c.int("a jump offset")? })
        }
    }
}

fn parse_arg(c: &mut Cursor<'_>) -> Result<Arg<String>, AsmError> {
    const WHAT: &str = "an argument (%N, %void, %vm, iN, c[N] or f[NAME])";
    if c.eat("%void") {
        return Ok(Arg::Void);
    }
    if c.eat("%vm") {
        return Ok(Arg::VmState);
    }
    if c.eat("%") {
        return Ok(Arg::Reg(c.uint("a register number after '%'")?));
    }
    if c.eat("c[") {
        let i = c.uint("a constant index")?;
        c.expect("]", "']' closing c[")?;
        return Ok(Arg::Const(i));
    }
    if c.eat("f[") {
        let name = c.name("a function name")?;
        c.expect("]", "']' closing f[")?;
        return Ok(Arg::Func(name));
    }
    if c.rest().starts_with('i') && c.rest()[1..].starts_with(|ch: char| ch.is_ascii_digit() || ch == '-') {
        c.eat("i");
        return Ok(Arg::Imm(c.int("an immediate after 'i'")?));
    }
    Err(c.expected(WHAT))
}
