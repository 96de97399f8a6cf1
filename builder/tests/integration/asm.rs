//! The assembler: golden parses, round trips, error positions and messages, robustness.

use crate::common::assert_round_trip;
use relaxvm::registry::register_global;
use relaxvm::{Arg, Executable, ExecutableParts, FuncInfo, Instruction, Location, PackedFunc, Value};
use relaxvm_builder::{assemble, AsmError};
use std::sync::{Arc, Once};

fn setup() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        register_global(PackedFunc::typed("asm.add", |a: i64, b: i64| a + b), true).unwrap();
        register_global(PackedFunc::typed("asm.sub", |a: i64, b: i64| a - b), true).unwrap();
        register_global(PackedFunc::typed("asm.lt", |a: i64, b: i64| a < b), true).unwrap();
    });
}

fn func(name: &str, range: (u32, u32), num_args: u32, regs: u32) -> FuncInfo {
    FuncInfo::bytecode(name, range.0, range.1, num_args, regs)
}

fn call(func: u32, args: Vec<Arg>, dst: Option<u32>) -> Instruction {
    Instruction::Call { func, args, dst }
}

/// fib, as the VM's interpreter tests build it by hand.
fn fib() -> Executable {
    use Arg::*;
    Executable::from_parts(ExecutableParts {
        funcs: vec![
            func("fib", (0, 9), 1, 5),
            FuncInfo::packed("asm.lt"),
            FuncInfo::packed("asm.sub"),
            FuncInfo::packed("asm.add"),
        ],
        instrs: vec![
            call(1, vec![Reg(0), Imm(2)], Some(1)),
            Instruction::If { cond: 1, false_offset: 2 },
            Instruction::Ret { result: 0 },
            call(2, vec![Reg(0), Imm(1)], Some(2)),
            call(0, vec![Reg(2)], Some(3)),
            call(2, vec![Reg(0), Imm(2)], Some(2)),
            call(0, vec![Reg(2)], Some(4)),
            call(3, vec![Reg(3), Reg(4)], Some(1)),
            Instruction::Ret { result: 1 },
        ],
        ..Default::default()
    })
    .unwrap()
}

/// Every argument kind, odd names, every location kind, every constant kind, a loop.
fn kitchen_sink() -> Executable {
    use Arg::*;
    let file = Location::File { file: "model \"v2\".py".into(), line: 12, col: 4 };
    Executable::from_parts(ExecutableParts {
        funcs: vec![
            FuncInfo::packed("vm.builtin.tuple"),
            FuncInfo { param_names: vec!["x".into(), "with space".into()], ..func("main", (0, 6), 2, 4) },
            FuncInfo::packed("weird name\n\"quoted\""),
            func("i5", (6, 7), 0, 3),
            FuncInfo::packed("-dash"),
        ],
        constants: vec![
            Value::Null,
            Value::Int(-3),
            Value::Float(f64::INFINITY),
            Value::Bool(false),
            Value::str("s\u{7f}\u{0}"),
            Value::Shape([4, 5].into()),
            Value::DType(relaxvm::DataType::F16),
            Value::Device(relaxvm::Device::cpu(2)),
            Value::Tensor(relaxvm::Tensor::from_vec([2, 1], vec![1u64, u64::MAX]).unwrap()),
        ],
        instrs: vec![
            call(0, vec![Reg(0), Void, VmState, Imm(i64::MIN), Const(8), Func(2), Func(3), Func(4)], Some(3)),
            call(2, vec![], None),
            Instruction::If { cond: 1, false_offset: 3 },
            call(3, vec![], Some(2)),
            Instruction::Goto { offset: -2 },
            Instruction::Ret { result: 3 },
            Instruction::Ret { result: 2 },
        ],
        locations: vec![
            Some(file.clone()),
            Some(Location::Name("".into())),
            Some(Location::CallSite { callee: Box::new(Location::Name("f".into())), caller: Box::new(file.clone()) }),
            Some(Location::Fused(vec![])),
            None,
            Some(Location::Fused(vec![file, Location::Name("b".into())])),
            None,
        ],
        entry: None,
        libraries: vec![],
    })
    .unwrap()
}

#[test]
fn hand_built_executables_round_trip() {
    assert_round_trip(&fib());
    let sink = kitchen_sink();
    assert_round_trip(&sink);
    let text = sink.as_text();
    assert!(text.contains("call  vm.builtin.tuple  in: %0, %void, %vm, i-9223372036854775808, c[8], f[\"weird name\\n\\\"quoted\\\"\"], f[i5], f[\"-dash\"]  dst: %3  loc(\"model \\\"v2\\\".py\":12:4)"), "{text}");
    assert!(text.contains("@main inputs=2 regs=4 params=(x, \"with space\"):"), "{text}");
    assert_round_trip(&Executable::from_parts(ExecutableParts::default()).unwrap());
}

/// `kitchen_sink()` with signatures (odd parameter names, every type kind) and an entry.
fn with_signatures() -> Executable {
    let mut parts = kitchen_sink().to_parts();
    let main: relaxvm::Signature = "(x: tensor<[n, 16], f32, contiguous>, \"with space\": dict<{\"\\u{7f}\": list<shape<?>>, b: tuple<str, object, any, bool, u8, bf16>}>) -> tuple<tensor<*, ?>, shape<3>>"
        .parse()
        .unwrap();
    parts.funcs[1] = parts.funcs[1].clone().with_signature(main);
    parts.funcs[3] = parts.funcs[3].clone().with_signature("() -> tensor<[], i64>".parse().unwrap());
    parts.entry = Some("i5".into());
    Executable::from_parts(parts).unwrap()
}

#[test]
fn signatures_and_entry_round_trip() {
    let exe = with_signatures();
    assert_round_trip(&exe);
    let text = exe.as_text();
    assert!(text.starts_with(".entry i5\n.const c[0] = null\n"), "{text}");
    assert!(
        text.contains("\n@main inputs=2 regs=4 sig=(x: tensor<[n, 16], f32, contiguous>, \"with space\": dict<{b: tuple<str, object, any, bool, u8, bf16>, \"\\u{7f}\": list<shape<?>>}>) -> tuple<tensor<*, ?>, shape<3>>:\n"),
        "{text}"
    );
    assert!(text.contains("\n@i5 inputs=0 regs=3 sig=() -> tensor<[], i64>:\n"), "{text}");
    // Through every version of the binary format: version 3 keeps everything.
    for version in [1, 2, 3] {
        let opts = relaxvm::format::SaveOptions { version, ..Default::default() };
        let back = relaxvm::format::load_bytes(&relaxvm::format::save_to_bytes(&exe, &opts)).unwrap();
        assert_eq!(back.as_text() == text, version == 3, "version {version}");
        assert_eq!(back.has_signatures(), version == 3);
    }
}

#[test]
fn headers_with_signatures() {
    setup();
    // inputs= may be left out (the signature gives it), params= may repeat its names.
    let exe = assemble(
        "
.entry add
@add sig=(a: i64, b: i64) -> i64:
  call asm.add in: %0, %1 dst: %2
  ret %2
@twice inputs=1 params=(x) sig=(x: f64) -> any:   # a comment
  ret %0
.packed asm.add
",
    )
    .unwrap();
    assert_eq!(exe.func("add").unwrap().num_args, 2);
    assert_eq!(exe.func("add").unwrap().param_names, vec!["a", "b"]);
    assert_eq!(exe.entry(), Some("add"));
    assert!(exe.as_text().contains("@twice inputs=1 regs=1 sig=(x: f64) -> any:\n"), "{}", exe.as_text());
    let mut vm = relaxvm::VirtualMachine::new(Arc::new(exe)).unwrap();
    assert_eq!(vm.invoke("add", &[Value::Int(2), Value::Int(3)]).unwrap().as_int().unwrap(), 5);
    assert!(matches!(vm.invoke("twice", &[Value::Int(2)]).unwrap(), Value::Float(x) if x == 2.0));
    let e = vm.invoke("add", &[Value::Int(2), Value::str("x")]).unwrap_err();
    assert!(matches!(e.kind(), relaxvm::ErrorKind::Type { .. }) && e.to_string().contains("\"b\""), "{e}");
}

#[test]
fn assembled_programs_run() {
    setup();
    let exe = assemble(&fib().as_text()).unwrap();
    let mut vm = relaxvm::VirtualMachine::new(Arc::new(exe)).unwrap();
    assert_eq!(vm.invoke("fib", &[Value::Int(15)]).unwrap().as_int().unwrap(), 610);
}

#[test]
fn hand_written_text_with_conveniences() {
    setup();
    // comments, no regs= (inferred), a call without dst:, forward references, loose spacing
    let exe = assemble(
        "# sum(n) = 0 + 1 + ... + (n-1)\r
@sum inputs=1:            # regs inferred\r
  call asm.add in: i0,i0 dst: %1
  call asm.add  in: i0 , i0  dst:%2
  call asm.lt in: %2, %0 dst: %3
  if %3 4
  call asm.add in: %1, %2 dst: %1
  call asm.add in: %2, i1 dst: %2
  goto -4
  ret %1

.packed asm.add
.packed asm.lt
@twice inputs=1:
  call sum in: %0
  call sum in: %0 dst: %1
  ret %1
",
    )
    .unwrap();
    assert_eq!(exe.func("sum").unwrap().register_file_size, 4);
    assert_eq!(exe.func("twice").unwrap().register_file_size, 2);
    assert_eq!(exe.funcs().iter().map(|f| f.name.as_str()).collect::<Vec<_>>(), ["sum", "asm.add", "asm.lt", "twice"]);
    assert!(exe.as_text().contains("  call  sum  in: %0  dst: void\n"));
    let mut vm = relaxvm::VirtualMachine::new(Arc::new(exe)).unwrap();
    assert_eq!(vm.invoke("sum", &[Value::Int(10)]).unwrap().as_int().unwrap(), 45);
    assert_eq!(vm.invoke("twice", &[Value::Int(4)]).unwrap().as_int().unwrap(), 6);
}

/// (source, expected error) pairs: every error has a position and says what was expected.
const ERRORS: &[(&str, &str)] = &[
    ("bogus", "1:1: expected .const, .packed, .entry, a function header `@name inputs=N:` or an instruction (call, ret, goto, if), found \"bogus\""),
    ("  ret %0", "1:3: 'ret' outside a function: start one with a header like `@main inputs=1 regs=2:`"),
    (".packed", "1:8: expected a function name after '.packed', found end of line"),
    (".packed 9x", "1:9: expected a function name, found \"9x\""),
    (".packed f\n.packed f", "2:9: function \"f\" is already in the function table (line 1)"),
    (".packed \"\"", "1:9: function names must not be empty"),
    (".const c[1] = int 1", "1:10: expected constant index 0, found 1 (constants are numbered in order)"),
    (".const c[0] = int", "1:18: expected an integer after 'int', found end of line"),
    (".const c[0] int 1", "1:13: expected '=', found \"int\""),
    ("@f regs=1:\n ret %0", "1:1: the header of \"f\" needs inputs=N"),
    ("@f inputs=1 inputs=1:", "1:13: inputs= is given twice"),
    ("@f inputs=1 foo=2:", "1:13: expected inputs=N, regs=N, params=(...), sig=(...) -> TYPE or ':', found \"foo\""),
    ("@f inputs=1", "1:12: expected ' ' or ':' after the function name, found end of line"),
    ("@f inputs=x:", "1:11: expected the number of inputs, found \"x\""),
    ("@f inputs=1: extra", "1:14: expected end of line, found \"extra\""),
    ("@f inputs=1 params=(a b):", "1:23: expected ',' or ')' in params=(...), found \"b\""),
    ("@f inputs=2 params=(a):\n ret %0", "1:4: 1 parameter name(s) for inputs=2"),
    ("@f inputs=2 regs=1:\n ret %0", "1:13: regs=1 cannot hold inputs=2"),
    ("@f inputs=0 regs=4294967295:\n ret %0", "1:13: regs=4294967295 exceeds the limit of 1048576"),
    ("@f inputs=2000000:\n ret %0", "1:4: inputs=2000000 exceeds the limit of 1048576 registers"),
    ("@f inputs=1:", "1:2: function \"f\" has no instructions (it must end in ret)"),
    ("@f inputs=1:\n ret 0", "2:6: expected a register like %0, found \"0\""),
    ("@f inputs=1:\n ret %0 %1", "2:9: expected end of line, found \"%1\""),
    ("@f inputs=1:\n retx %0", "2:2: expected .const, .packed, .entry, a function header `@name inputs=N:` or an instruction (call, ret, goto, if), found \"retx\""),
    ("@f inputs=1 regs=1:\n ret %1", "2:6: register %1 is outside the register file of 1 (regs=1)"),
    ("@f inputs=1:\n call g in: %0\n ret %0", "2:7: unknown function \"g\": declare it with `.packed g`, define it with `@g inputs=N:`, or register it before assembling"),
    ("@f inputs=1:\n call \"a b\" in: f[\"a b\"]\n ret %0", "2:7: unknown function \"a b\": declare it with `.packed \"a b\"`, define it with `@\"a b\" inputs=N:`, or register it before assembling"),
    (".packed g\n@f inputs=1:\n call g in: %0, x\n ret %0", "3:17: expected an argument (%N, %void, %vm, iN, c[N] or f[NAME]), found \"x\""),
    (".packed g\n@f inputs=1:\n call g in: c[0]\n ret %0", "3:13: constant c[0] is outside the pool of 0"),
    (".packed g\n@f inputs=1:\n call g in: f[h]\n ret %0", "3:13: unknown function \"h\": declare it with `.packed h`, define it with `@h inputs=N:`, or register it before assembling"),
    (".packed g\n@f inputs=1:\n call g dst: 3\n ret %0", "3:14: expected a destination register like %0, or void, found \"3\""),
    (".packed g\n@f inputs=1:\n call g in: i99999999999999999999\n ret %0", "3:14: 99999999999999999999 is out of range for an immediate after 'i' (a 64-bit signed integer)"),
    ("@f inputs=1:\n call f in: %0, %0 dst: %1\n ret %1", "2:2: calls \"f\" with 2 arguments, but it takes 1"),
    ("@f inputs=1:\n goto 5\n ret %0", "2:2: jump by 5 to instruction 5 leaves the function, which has 2 instruction(s)"),
    ("@f inputs=1:\n if %0 -1\n ret %0", "2:2: jump by -1 to instruction -1 leaves the function, which has 2 instruction(s)"),
    ("@f inputs=1:\n ret %0\n if %0 -1", "3:2: control runs off the end of the function (the last instruction must be ret or goto)"),
    ("@f inputs=1:\n call f in: %0", "2:2: control runs off the end of the function (the last instruction must be ret or goto)"),
    ("@f inputs=1:\n goto x", "2:7: expected a jump offset, found \"x\""),
    ("@f inputs=1:\n ret %0 loc(\"a\":1)", "2:18: expected ':' before the column, found \")\""),
    ("@f inputs=1:\n ret %0 loc(\"a\" x)", "2:17: expected ')' closing loc(, found \"x\""),
    ("@f inputs=1:\n ret %0 lo", "2:9: expected end of line, found \"lo\""),
    ("@f inputs=1:\n ret %0\n.packed g\n ret %0", "4:2: 'ret' outside a function: start one with a header like `@main inputs=1 regs=2:`"),
    (".const c[0] = str \"abc", "1:19: unterminated string: expected a closing '\"' before the end of the line"),
    ("@\"f\ninputs=1:", "1:2: unterminated string: expected a closing '\"' before the end of the line"),
    ("@f sig=(x: i64) -> any sig=(x: i64) -> any:\n ret %0", "1:24: sig= is given twice"),
    ("@f sig=(x: tensr<*, f32>) -> any:\n ret %0", "1:12: expected a type (any, str, object, bool, i8..i64, u8..u64, f16, bf16, f32, f64, tensor<..>, shape<..>, tuple<..>, list<..>, dict<{..}>) in sig=, found \"tensr<*, f32\""),
    ("@f sig=(x: i64 -> any:\n ret %0", "1:16: expected \",\" or \")\" in sig=, found \"-> any:\""),
    ("@f sig=(x: i64) -> any\n ret %0", "1:23: expected ' ' or ':' after the function name, found end of line"),
    ("@f sig=(x: i64):\n ret %0", "1:16: expected \"->\" in sig=, found \":\""),
    ("@f sig=(\"\\q\": i64) -> any:\n ret %0", "1:10: expected a valid escape (\\\", \\\\, \\n, \\t, \\r or \\u{HEX}) in sig=, found \"\\\\q\\\": i64) ->\""),
    ("@f inputs=2 sig=(x: i64) -> any:\n ret %0", "1:4: sig= has 1 parameter(s) for inputs=2"),
    ("@f params=(y) sig=(x: i64) -> any:\n ret %0", "1:4: params=(y) differs from the parameter names of sig= (x)"),
    ("@f sig=(x: i64, x: i64) -> any:\n ret %0", "1:4: sig=: two parameters are named \"x\""),
    ("@f sig=(x: dict<{a: i64, a: str}>) -> any:\n ret %0", "1:4: sig=: parameter \"x\": dict keys \"a\" and \"a\" are not distinct and sorted (slots are passed in key order)"),
    (".entry", "1:7: expected a function name after '.entry', found end of line"),
    (".entry f\n.entry f", "2:1: the entry function is already set (line 1)"),
    (".entry f\n.packed f", "1:8: the entry function \"f\" is a packed function"),
    (".entry g\n@f inputs=0:\n ret %0", "1:8: the entry function \"g\" is not defined: define it with `@g inputs=N:`"),
];

#[test]
fn errors_have_positions_and_say_what_was_expected() {
    let mut wrong = Vec::new();
    for (src, expected) in ERRORS {
        let e: AsmError = match assemble(src) {
            Ok(_) => panic!("{src:?} assembled"),
            Err(e) => e,
        };
        assert!(e.line > 0 && e.col > 0, "{src:?}");
        if &e.to_string() != expected {
            wrong.push(format!("source {src:?}\n  expected {expected}\n  found    {e}"));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// A tiny deterministic generator (xorshift) for the mutation test.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

#[test]
fn mutated_inputs_never_panic() {
    let seeds = [
        kitchen_sink().as_text(),
        fib().as_text(),
        with_signatures().as_text(),
        ERRORS.iter().map(|(s, _)| *s).collect::<Vec<_>>().join("\n"),
    ];
    let alphabet: Vec<char> = " \n\t%@.[](),:=#\"\\-0123456789icfxé{}u<>*?".chars().collect();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut ok = 0;
    for round in 0..3000 {
        let mut chars: Vec<char> = seeds[round % seeds.len()].chars().collect();
        for _ in 0..1 + rng.below(4) {
            let at = rng.below(chars.len());
            match rng.below(4) {
                0 => {
                    chars.remove(at.min(chars.len().saturating_sub(1)).min(chars.len()));
                }
                1 => chars.insert(at, alphabet[rng.below(alphabet.len())]),
                2 => chars.truncate(at),
                _ => {
                    if let Some(c) = chars.get_mut(at) {
                        *c = alphabet[rng.below(alphabet.len())];
                    }
                }
            }
            if chars.is_empty() {
                break;
            }
        }
        let text: String = chars.into_iter().collect();
        match assemble(&text) {
            Ok(exe) => {
                ok += 1;
                // whatever assembles prints text that assembles to the same text
                let again = assemble(&exe.as_text()).unwrap_or_else(|e| panic!("{e}\n{}", exe.as_text()));
                assert_eq!(again.as_text(), exe.as_text());
            }
            Err(e) => assert!(!e.message.is_empty()),
        }
    }
    assert!(ok > 0, "some mutations stay valid");
}

#[test]
fn the_documented_example_assembles_and_prints_back() {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/text-format.md")).unwrap();
    let example = doc.split("```text\n").nth(1).and_then(|s| s.split("```").next()).unwrap();
    let exe = assemble(example).unwrap_or_else(|e| panic!("{e}"));
    let without_comments: String = example.lines().filter(|l| !l.starts_with('#')).map(|l| format!("{l}\n")).collect();
    assert_eq!(exe.as_text(), without_comments);
    assert!(relaxvm_builder::check_executable(&exe).unwrap().is_empty());
}

#[test]
fn registered_functions_need_no_packed_declaration() {
    relaxvm_builtins::ensure_registered();
    let text = "@main inputs=2 params=(a, b):\n  call  vm.builtin.int.add  in: %0, %1  dst: %2\n  call  helper  in: %2  dst: %3\n  ret  %3\n\
                @helper inputs=1:\n  call  vm.builtin.int.mul  in: %0, %0  dst: %1\n  ret  %1\n";
    let exe = assemble(text).unwrap();
    // Appended to the function table in order of first use, and printed with `.packed` lines.
    assert_eq!(exe.packed_function_names(), ["vm.builtin.int.add", "vm.builtin.int.mul"]);
    assert_eq!(assemble(&exe.as_text()).unwrap().as_text(), exe.as_text());
    let mut vm = relaxvm::VirtualMachine::new(std::sync::Arc::new(exe)).unwrap();
    assert_eq!(vm.invoke("main", &[relaxvm::Value::Int(2), relaxvm::Value::Int(3)]).unwrap().as_int().unwrap(), 25);
    // A name nobody registered is still an error.
    let e = assemble("@f inputs=0:\n  call  not.registered.anywhere  dst: %0\n  ret  %0\n").unwrap_err();
    assert!(e.to_string().contains("unknown function \"not.registered.anywhere\""), "{e}");
}
