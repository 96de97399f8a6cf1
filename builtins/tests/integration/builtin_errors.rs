//! Refusals of core builtins that the error table (which checks words) does not pin down, each
//! with its kind and whole message: dtypes of the wrong type, conditions that do not read,
//! matmul shapes, reduction axes, integer division by zero on the slow path, and debug functions
//! that are not registered.

use crate::common::{call, shape, tensor};
use relaxvm::{DataType, ErrorKind, Storage, Tensor, Value};

fn x23() -> Value {
    tensor(&[2, 3], vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0])
}

/// `(builtin, arguments, is the error of the expected kind, whole message)`.
type Case = (&'static str, Vec<Value>, fn(&ErrorKind) -> bool, String);

fn value(k: &ErrorKind) -> bool {
    matches!(k, ErrorKind::Value(_))
}

fn type_(k: &ErrorKind) -> bool {
    matches!(k, ErrorKind::Type { .. })
}

fn arithmetic(k: &ErrorKind) -> bool {
    matches!(k, ErrorKind::Arithmetic(_))
}

#[test]
fn each_refusal_has_its_kind_and_whole_message() {
    // A one-element bool tensor holding the byte 2 (its storage shared with other code).
    let two = Tensor::from_parts(Storage::from_vec(vec![2u8]), 0, [1].into(), None, DataType::Bool).unwrap();
    let s = |v: &str| Value::str(v);
    let cases: Vec<Case> = vec![
        (
            "vm.builtin.alloc_storage",
            vec![Value::VmState, shape(&[4]), Value::Int(0), Value::Int(3)],
            type_,
            "type mismatch: expected dtype or dtype name as argument 3 (dtype hint) of vm.builtin.alloc_storage, found int 3"
                .into(),
        ),
        (
            "vm.builtin.read_if_cond",
            vec![Value::Tensor(two)],
            value,
            "vm.builtin.read_if_cond: cannot read the bool element of the tensor: bool tensor holds the byte 2; bool \
             bytes must be 0 or 1"
                .into(),
        ),
        (
            "relax.run.assert_op",
            vec![s("yes"), s("failed")],
            type_,
            "type mismatch: expected bool, int or 0-d bool tensor as argument 0 (condition) of relax.run.assert_op, \
             found str"
                .into(),
        ),
        (
            "vm.op.matmul",
            vec![x23(), x23()],
            value,
            "vm.op.matmul: the inner dimensions differ: (2, 3) @ (2, 3) has 3 columns on the left and 2 rows on the right"
                .into(),
        ),
        (
            "vm.op.sum",
            vec![x23(), Value::tuple(vec![Value::Int(1), s("a")])],
            type_,
            "type mismatch: expected int in the axis tuple as argument 1 (axis) of vm.op.sum, found str".into(),
        ),
        (
            "vm.op.sum",
            vec![x23(), s("a")],
            type_,
            "type mismatch: expected null, int, shape or tuple of ints as argument 1 (axis) of vm.op.sum, found str"
                .into(),
        ),
        (
            // A bool operand takes the slow path, which names the division.
            "vm.builtin.int.floordiv",
            vec![Value::Bool(true), Value::Int(0)],
            arithmetic,
            "arithmetic error: vm.builtin.int.floordiv: division by zero (1 // 0)".into(),
        ),
        (
            "vm.builtin.invoke_debug_func",
            vec![Value::Null, s("no.such.debug_func"), s("model.py:3")],
            value,
            "vm.builtin.invoke_debug_func: no.such.debug_func is not found. Use the decorator \
             `@tvm.register_global_func(\"no.such.debug_func\")` to register it."
                .into(),
        ),
    ];
    let mut wrong = Vec::new();
    for (name, args, kind, want) in cases.into_iter().chain(huge_view_cases()) {
        match call(name, &args) {
            Ok(v) => wrong.push(format!("{name}: returned {v:?}, expected: {want}")),
            Err(e) if e.to_string() != want || !kind(e.root().kind()) => {
                wrong.push(format!("{name}\n  expected {want}\n  found    {e} ({:?})", e.root().kind()))
            }
            Err(_) => {}
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

fn alloc(k: &ErrorKind) -> bool {
    matches!(k, ErrorKind::Alloc { .. })
}

/// One float standing for 2^42 (a stride-0 view): reading its elements needs 16 TiB, an
/// allocation error (never an abort), before anything is written.
fn huge_view_cases() -> Vec<Case> {
    let one = Tensor::scalar(1.0f32);
    let view = Tensor::from_parts(one.storage().clone(), 0, [1i64 << 42].into(), Some(vec![0]), DataType::F32).unwrap();
    vec![(
        "relax.run.nonzero",
        vec![Value::Tensor(view)],
        alloc,
        "cannot allocate 17592186044416 bytes: cannot hold the elements of the input (in relax.run.nonzero)".into(),
    )]
}
