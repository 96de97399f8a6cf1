//! Helpers shared by the integration tests.

use relaxvm::{
    Arg, CallCtx, DataType, ErrorKind, Executable, ExecutableParts, FuncInfo, Instruction, Registry, Result, Shape,
    Tensor, Value,
};
use std::sync::Arc;
use std::sync::OnceLock;

/// A registry holding every builtin (built once).
pub fn registry() -> &'static Registry {
    static REG: OnceLock<Registry> = OnceLock::new();
    REG.get_or_init(|| {
        let mut r = Registry::new();
        relaxvm_builtins::register_all(&mut r).expect("a fresh registry takes every builtin");
        r
    })
}

/// Calls builtin `name` outside any VM; what it prints is captured (and dropped).
pub fn call(name: &str, args: &[Value]) -> Result<Value> {
    let f = registry().get(name).unwrap_or_else(|| panic!("{name} is not registered"));
    relaxvm_builtins::output::capture(|| f.call(&mut CallCtx::detached(), args)).0
}

/// Asserts `r` is an error that is not a caught panic, and returns its message.
pub fn assert_clean_err(name: &str, args: &[Value], r: Result<Value>) -> String {
    match r {
        Ok(v) => panic!("{name}({}) returned {v:?}, expected an error", show(args)),
        Err(e) => {
            assert!(!matches!(e.root().kind(), ErrorKind::Panic(_)), "{name}({}) panicked: {e}", show(args));
            e.to_string()
        }
    }
}

/// The arguments as text, for failure messages.
pub fn show(args: &[Value]) -> String {
    args.iter().map(|a| a.describe()).collect::<Vec<_>>().join(", ")
}

/// A tensor value of `dims` holding `data`.
pub fn tensor<T: relaxvm::Element>(dims: &[i64], data: Vec<T>) -> Value {
    Value::Tensor(Tensor::from_vec(Shape::from(dims), data).expect("data matches the shape"))
}

/// A shape value.
pub fn shape(dims: &[i64]) -> Value {
    Value::Shape(Shape::from(dims))
}

/// A dtype value.
pub fn dtype(d: DataType) -> Value {
    Value::DType(d)
}

/// main(x, n): n times x = x + x (through `twice`), then ret x.
pub fn looping() -> Arc<Executable> {
    let exe = Executable::from_parts(ExecutableParts {
        funcs: vec![
            FuncInfo::bytecode("main", 0, 6, 2, 3),
            FuncInfo::bytecode("twice", 6, 8, 1, 2),
            FuncInfo::packed("vm.builtin.int.sub"),
            FuncInfo::packed("vm.op.add"),
        ],
        instrs: vec![
            Instruction::If { cond: 1, false_offset: 4 },
            Instruction::Call { func: 1, args: vec![Arg::Reg(0)], dst: Some(0) },
            Instruction::Call { func: 2, args: vec![Arg::Reg(1), Arg::Imm(1)], dst: Some(1) },
            Instruction::Goto { offset: -3 },
            Instruction::Ret { result: 0 },
            Instruction::Ret { result: 0 },
            Instruction::Call { func: 3, args: vec![Arg::Reg(0), Arg::Reg(0)], dst: Some(1) },
            Instruction::Ret { result: 1 },
        ],
        ..Default::default()
    })
    .unwrap();
    Arc::new(exe)
}
