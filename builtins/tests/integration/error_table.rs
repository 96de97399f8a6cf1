//! A parametrized table: each row calls one builtin and states the result or the error (its
//! kind and words the message must contain — always including the builtin's name).

use crate::common::{call, dtype, shape, show, tensor};
use relaxvm::{dispatch_dtype, DataType, ErrorKind, PackedFunc, Storage, Value};

#[derive(Clone, Copy, Debug)]
enum Kind {
    Arity,
    Type,
    Value,
    Index,
    Alloc,
    Arithmetic,
    /// A foreign-style error (`ErrorKind::Raised`) of this Python kind, e.g. `AssertionError`.
    Raised(&'static str),
}

enum Want {
    /// The result, rendered by [`render`].
    Ok(&'static str),
    /// An error of this kind whose message contains the builtin's name and these words.
    Err(Kind, &'static [&'static str]),
}

use Want::{Err as E, Ok as K};

/// A result as text: tensors as `dtype shape [elements]`, everything else by `Display`.
fn render(v: &Value) -> String {
    match v {
        Value::Tensor(t) => {
            let items: Vec<String> =
                dispatch_dtype!(t.dtype(), T => t.to_vec::<T>().unwrap().iter().map(|x| x.to_string()).collect());
            format!("{} {} [{}]", t.dtype(), t.shape(), items.join(", "))
        }
        Value::Storage(s) => format!("storage {}", s.len()),
        // As `Display` (a trailing comma for one item), with tensor items rendered as above.
        Value::Tuple(items) => {
            let items: Vec<String> = items.iter().map(render).collect();
            format!("({}{})", items.join(", "), if items.len() == 1 { "," } else { "" })
        }
        other => other.to_string(),
    }
}

fn heap(values: &[i64]) -> Value {
    tensor(&[values.len() as i64], values.to_vec())
}

fn i(v: i64) -> Value {
    Value::Int(v)
}

fn f(v: f64) -> Value {
    Value::Float(v)
}

fn s(v: &str) -> Value {
    Value::str(v)
}

fn storage(n: usize) -> Value {
    Value::Storage(Storage::alloc(n, Default::default()).unwrap())
}

fn cases() -> Vec<(&'static str, Vec<Value>, Want)> {
    let mut rows = fixed_cases();
    // A wrong-type row for every scalar builtin and operator.
    for name in relaxvm_builtins::builtin_names() {
        let args = match name {
            n if n.starts_with("vm.builtin.int.") || n.starts_with("vm.builtin.float.") => vec![s("x"), i(1)],
            "vm.op.neg" | "vm.op.exp" | "vm.op.sqrt" | "vm.op.relu" | "vm.op.sum" => vec![s("x")],
            n if n.starts_with("vm.op.") => vec![s("x"), i(1)],
            _ => continue,
        };
        rows.push((name, args, E(Kind::Type, &["found str"])));
    }
    rows
}

fn fixed_cases() -> Vec<(&'static str, Vec<Value>, Want)> {
    let x23 = || tensor(&[2, 3], vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0]);
    let zero_dim = || tensor(&[], vec![7i32]);
    let empty = || tensor(&[0, 3], Vec::<f32>::new());
    let nan = || tensor(&[2], vec![f64::NAN, 1.0]);
    let func = || Value::packed(PackedFunc::from_fn("test.pair", |a| Ok(Value::tuple(a.to_vec()))));
    let null = Value::Null;
    let vm = Value::VmState;
    // `invoke_debug_func` looks its function up in the process-wide registry.
    relaxvm_builtins::ensure_registered();
    let pair = || Value::tuple(vec![i(1), i(2)]);
    let unique_x = || tensor(&[4], vec![3i32, 1, 3, 2]);
    let unique = |x: Value, flags: [i64; 4], axis: Option<Value>| {
        let mut args = vec![x];
        args.extend(flags.map(i));
        args.extend(axis);
        args
    };
    let cached = || tensor(&[2], vec![5i8, -5]);
    let fixture = format!("{}/tests/data/tensor_cache/raw", env!("CARGO_MANIFEST_DIR"));
    let names = |n: &[&str]| Value::tuple(n.iter().map(|x| s(x)).collect::<Vec<_>>());
    // The sort functions write into their output tensors and return null: a `vm.builtin.copy`
    // row after each reads the output (which shares its storage with the one passed).
    let sorted = tensor(&[3], vec![0.0f32; 3]);
    let argsorted = tensor(&[2, 2], vec![0i64; 4]);
    let (top_values, top_indices) = (tensor(&[2], vec![0i32; 2]), tensor(&[2], vec![0i64; 2]));
    let topk_x = || tensor(&[5], vec![4i32, 9, 4, 1, 9]);
    vec![
        // ---- shape heap ----
        ("vm.builtin.alloc_shape_heap", vec![i(3)], K("int64 (3,) [0, 0, 0]")),
        ("vm.builtin.alloc_shape_heap", vec![vm.clone(), i(0)], K("int64 (0,) []")),
        ("vm.builtin.alloc_shape_heap", vec![i(-2)], E(Kind::Value, &["non-negative", "-2"])),
        ("vm.builtin.alloc_shape_heap", vec![i(i64::MAX)], E(Kind::Alloc, &["cannot allocate"])),
        ("vm.builtin.alloc_shape_heap", vec![f(2.0)], E(Kind::Type, &["int", "found float"])),
        ("vm.builtin.alloc_shape_heap", vec![i(1), i(2)], E(Kind::Type, &["vm_state", "found int"])),
        ("vm.builtin.shape_of", vec![x23()], K("(2, 3)")),
        ("vm.builtin.shape_of", vec![zero_dim()], K("()")),
        ("vm.builtin.shape_of", vec![shape(&[1])], E(Kind::Type, &["tensor", "found shape"])),
        ("vm.builtin.store_shape", vec![shape(&[5]), heap(&[0, 0]), i(1)], K("None")),
        ("vm.builtin.store_shape", vec![shape(&[5]), heap(&[0, 0]), i(2)], E(Kind::Index, &["index 2", "length 2"])),
        ("vm.builtin.store_shape", vec![shape(&[5]), heap(&[0, 0]), i(-1)], E(Kind::Index, &["index -1"])),
        (
            "vm.builtin.store_shape",
            vec![shape(&[5, 6]), heap(&[0, 0]), i(0)],
            E(Kind::Value, &["one heap index per dimension", "found 1"]),
        ),
        (
            "vm.builtin.store_shape",
            vec![shape(&[5]), tensor(&[2], vec![0i32, 0]), i(0)],
            E(Kind::Type, &["1-D int64 tensor", "int32"]),
        ),
        ("vm.builtin.load_shape", vec![heap(&[4, 9]), i(1), i(0), i(1)], K("(9, 4, 9)")),
        ("vm.builtin.load_shape", vec![heap(&[4, 9])], K("()")),
        ("vm.builtin.load_shape", vec![heap(&[4, 9]), i(i64::MAX)], E(Kind::Index, &["out of range", "shape heap"])),
        ("vm.builtin.load_shape", vec![null.clone(), i(0)], E(Kind::Value, &["needs a shape heap, found null"])),
        ("vm.builtin.match_shape", vec![x23(), heap(&[0]), i(2), i(0), i(2), i(1), i(0), s("ctx")], K("None")),
        ("vm.builtin.match_shape", vec![x23(), heap(&[3]), i(2), i(2), i(0), i(3), i(0), s("ctx")], K("None")),
        (
            "vm.builtin.match_shape",
            vec![x23(), heap(&[4]), i(2), i(2), i(0), i(3), i(0), s("ctx")],
            E(Kind::Value, &["ctx match_cast error,  shape[1] mismatch to a previous populated value. (3 vs. 4"]),
        ),
        (
            "vm.builtin.match_shape",
            vec![x23(), heap(&[0]), i(2), i(0), i(9), i(2), i(0), s("ctx")],
            E(Kind::Value, &["shape[0] mismatch to specified constant. (2 vs. 9)"]),
        ),
        (
            "vm.builtin.match_shape",
            vec![shape(&[1]), heap(&[0]), i(2), i(0), i(1), i(0), i(1), null.clone()],
            E(Kind::Value, &["expected 2 dimensions, found 1"]),
        ),
        (
            "vm.builtin.match_shape",
            vec![x23(), heap(&[0]), i(-1), null.clone()],
            E(Kind::Value, &["ndim must be", "-1"]),
        ),
        ("vm.builtin.match_shape", vec![x23(), heap(&[0]), i(2), i(0), i(2)], E(Kind::Arity, &["ndim = 2"])),
        (
            "vm.builtin.match_shape",
            vec![x23(), heap(&[0]), i(2), i(7), i(2), i(2), i(0)],
            E(Kind::Value, &["unknown match code 7"]),
        ),
        ("vm.builtin.match_shape", vec![i(3), heap(&[0]), i(0)], E(Kind::Type, &["tensor or shape", "found int 3"])),
        ("vm.builtin.make_shape", vec![heap(&[8]), i(2), i(1), i(0), i(0), i(3)], K("(8, 3)")),
        ("vm.builtin.make_shape", vec![null.clone(), i(0)], K("()")),
        ("vm.builtin.make_shape", vec![heap(&[8]), i(1), i(1), i(5)], E(Kind::Index, &["index 5", "length 1"])),
        ("vm.builtin.make_shape", vec![heap(&[8]), i(1), i(4), i(0)], E(Kind::Value, &["unknown make code 4"])),
        ("vm.builtin.make_shape", vec![heap(&[8]), i(i64::MAX), i(0), i(0)], E(Kind::Value, &["ndim must be"])),
        ("vm.builtin.match_prim_value", vec![i(5), heap(&[0]), i(1), i(0), null.clone()], K("None")),
        (
            "vm.builtin.match_prim_value",
            vec![i(5), heap(&[6]), i(3), i(0), s("n")],
            E(Kind::Value, &["n match_cast error,  PrimValue mismatch"]),
        ),
        (
            "vm.builtin.match_prim_value",
            vec![f(f64::NAN), heap(&[6]), i(3), i(0), s("n")],
            E(Kind::Type, &["int", "found float NaN"]),
        ),
        ("vm.builtin.make_prim_value", vec![heap(&[6, 7]), i(1), i(1)], K("7")),
        ("vm.builtin.make_prim_value", vec![null.clone(), i(0), i(42)], K("42")),
        ("vm.builtin.make_prim_value", vec![heap(&[6]), i(1), i(1)], E(Kind::Index, &["index 1"])),
        ("vm.builtin.tensor_to_shape", vec![tensor(&[3], vec![1i32, 2, 3])], K("(1, 2, 3)")),
        ("vm.builtin.tensor_to_shape", vec![tensor(&[0], Vec::<i64>::new())], K("()")),
        ("vm.builtin.tensor_to_shape", vec![zero_dim()], E(Kind::Value, &["1-D integer tensor"])),
        ("vm.builtin.tensor_to_shape", vec![nan()], E(Kind::Value, &["1-D integer tensor", "float64"])),
        // ---- checks ----
        ("vm.builtin.check_tensor_info", vec![x23(), i(2), s("float32"), s("x")], K("None")),
        ("vm.builtin.check_tensor_info", vec![zero_dim(), i(0), null.clone(), null.clone()], K("None")),
        ("vm.builtin.check_tensor_info", vec![empty(), i(-1), s("void"), null.clone()], K("None")),
        (
            "vm.builtin.check_tensor_info",
            vec![x23(), i(1), null.clone(), s("x")],
            E(Kind::Value, &["x expect Tensor with ndim 1 but get 2"]),
        ),
        (
            "vm.builtin.check_tensor_info",
            vec![x23(), i(2), s("float64"), s("x")],
            E(Kind::Value, &["expect Tensor with dtype float64 but get float32"]),
        ),
        (
            "vm.builtin.check_tensor_info",
            vec![shape(&[2]), i(2), null.clone(), s("x")],
            E(Kind::Type, &["x: tensor", "found shape"]),
        ),
        ("vm.builtin.check_tensor_info", vec![x23(), i(2), s("floaty"), s("x")], E(Kind::Value, &["floaty"])),
        ("vm.builtin.check_shape_info", vec![shape(&[2, 3]), i(2), null.clone()], K("None")),
        (
            "vm.builtin.check_shape_info",
            vec![shape(&[2, 3]), i(i64::MIN), null.clone()],
            E(Kind::Value, &["ndim must be -1"]),
        ),
        ("vm.builtin.check_shape_info", vec![x23(), i(2), s("s")], E(Kind::Type, &["s: shape", "found tensor"])),
        ("vm.builtin.check_tuple_info", vec![Value::tuple(vec![i(1)]), i(1), null.clone()], K("None")),
        (
            "vm.builtin.check_tuple_info",
            vec![Value::tuple(vec![i(1)]), i(-1), s("t")],
            E(Kind::Value, &["t expect a Tuple with -1 elements,  but get a Tuple with 1 elements."]),
        ),
        ("vm.builtin.check_tuple_info", vec![i(1), i(1), s("t")], E(Kind::Type, &["t: tuple", "found int 1"])),
        ("vm.builtin.check_prim_value_info", vec![f(f64::NAN), s("float64"), null.clone()], K("None")),
        (
            "vm.builtin.check_prim_value_info",
            vec![i(-3), s("uint32"), s("p")],
            E(Kind::Type, &["p: prim value of dtype uint32", "found int -3"]),
        ),
        (
            "vm.builtin.check_prim_value_info",
            vec![x23(), null.clone(), s("p")],
            E(Kind::Type, &["prim value", "found tensor"]),
        ),
        ("vm.builtin.check_func_info", vec![func(), null.clone()], K("None")),
        ("vm.builtin.check_func_info", vec![null.clone(), s("fn")], E(Kind::Type, &["fn: function", "found null"])),
        // ---- memory ----
        ("vm.builtin.alloc_storage", vec![vm.clone(), shape(&[10]), i(0), s("uint8"), s("global")], K("storage 10")),
        ("vm.builtin.alloc_storage", vec![vm.clone(), shape(&[2, 5]), i(-1), dtype(DataType::F64)], K("storage 80")),
        ("vm.builtin.alloc_storage", vec![vm.clone(), i(0), i(0), s("uint8")], K("storage 0")),
        (
            "vm.builtin.alloc_storage",
            vec![vm.clone(), shape(&[-8]), i(0), s("uint8")],
            E(Kind::Value, &["negative dimension -8"]),
        ),
        (
            "vm.builtin.alloc_storage",
            vec![vm.clone(), shape(&[1 << 55]), i(0), s("uint8")],
            E(Kind::Alloc, &["cannot allocate"]),
        ),
        (
            "vm.builtin.alloc_storage",
            vec![vm.clone(), shape(&[i64::MAX, i64::MAX, 4]), i(0), s("float64")],
            E(Kind::Alloc, &["overflows"]),
        ),
        (
            "vm.builtin.alloc_storage",
            vec![vm.clone(), shape(&[i64::MAX, 2]), i(0), s("uint8")],
            E(Kind::Alloc, &["address space"]),
        ),
        ("vm.builtin.alloc_storage", vec![vm.clone(), shape(&[8]), i(0), s("float7")], E(Kind::Value, &["float7"])),
        (
            "vm.builtin.alloc_storage",
            vec![vm.clone(), shape(&[8]), i(3), s("uint8")],
            E(Kind::Index, &["index 3", "devices"]),
        ),
        (
            "vm.builtin.alloc_storage",
            vec![vm.clone(), shape(&[8]), i(0), s("uint8"), s("shared")],
            E(Kind::Value, &["memory scope", "shared"]),
        ),
        (
            "vm.builtin.alloc_tensor",
            vec![storage(24), i(8), shape(&[2, 2]), s("int32")],
            K("int32 (2, 2) [0, 0, 0, 0]"),
        ),
        ("vm.builtin.alloc_tensor", vec![storage(24), i(24), shape(&[0]), s("float64")], K("float64 (0,) []")),
        (
            "vm.builtin.alloc_tensor",
            vec![storage(24), i(16), shape(&[2, 2]), s("int32")],
            E(Kind::Value, &["needs 16 bytes", "storage has 24"]),
        ),
        (
            "vm.builtin.alloc_tensor",
            vec![storage(24), i(-8), shape(&[1]), s("int32")],
            E(Kind::Value, &["non-negative", "-8"]),
        ),
        (
            "vm.builtin.alloc_tensor",
            vec![storage(24), i(2), shape(&[1]), s("int32")],
            E(Kind::Value, &["multiple of the int32 element size"]),
        ),
        (
            "vm.builtin.alloc_tensor",
            vec![storage(24), i(0), shape(&[i64::MAX, 4]), s("int32")],
            E(Kind::Value, &["invalid tensor shape (9223372036854775807, 4)"]),
        ),
        (
            "vm.builtin.alloc_tensor",
            vec![x23(), i(0), shape(&[1]), s("int32")],
            E(Kind::Type, &["storage", "found tensor"]),
        ),
        ("vm.builtin.reshape", vec![x23(), shape(&[3, 2])], K("float32 (3, 2) [1, 2, 3, 4, 5, 6]")),
        ("vm.builtin.reshape", vec![zero_dim(), shape(&[1, 1])], K("int32 (1, 1) [7]")),
        ("vm.builtin.reshape", vec![empty(), shape(&[3, 0, 5])], K("float32 (3, 0, 5) []")),
        ("vm.builtin.reshape", vec![x23(), shape(&[-1, 6])], E(Kind::Value, &["cannot reshape", "(2, 3)", "(-1, 6)"])),
        ("vm.builtin.reshape", vec![x23(), shape(&[7])], E(Kind::Value, &["6 elements"])),
        ("vm.builtin.copy", vec![i(5)], K("5")),
        ("vm.builtin.move", vec![null.clone()], K("None")),
        ("vm.builtin.null_value", vec![], K("None")),
        ("vm.builtin.null_value", vec![null.clone()], E(Kind::Arity, &["expected 0"])),
        ("vm.builtin.ensure_zero_offset", vec![x23()], K("float32 (2, 3) [1, 2, 3, 4, 5, 6]")),
        ("vm.builtin.ensure_zero_offset", vec![i(0)], E(Kind::Type, &["tensor", "found int 0"])),
        ("vm.builtin.to_device", vec![x23(), i(1), i(0)], K("float32 (2, 3) [1, 2, 3, 4, 5, 6]")),
        ("vm.builtin.to_device", vec![x23(), i(2), i(0)], E(Kind::Value, &["device type 1 (cpu)", "found 2"])),
        ("vm.builtin.to_device", vec![x23(), i(1), i(1 << 40)], E(Kind::Value, &["device id"])),
        // ---- data ----
        ("vm.builtin.make_tuple", vec![i(1), s("a"), null.clone()], K("(1, a, None)")),
        ("vm.builtin.make_tuple", vec![], K("()")),
        ("vm.builtin.tuple_getitem", vec![Value::tuple(vec![i(1), i(2)]), i(1)], K("2")),
        (
            "vm.builtin.tuple_getitem",
            vec![Value::tuple(vec![i(1), i(2)]), i(2)],
            E(Kind::Index, &["index 2", "tuple", "length 2"]),
        ),
        ("vm.builtin.tuple_getitem", vec![Value::tuple(vec![]), i(0)], E(Kind::Index, &["length 0"])),
        ("vm.builtin.tuple_getitem", vec![Value::tuple(vec![i(1)]), i(-1)], E(Kind::Index, &["index -1"])),
        ("vm.builtin.tuple_getitem", vec![shape(&[1]), i(0)], E(Kind::Type, &["tuple", "found shape"])),
        ("vm.builtin.read_if_cond", vec![zero_dim()], K("True")),
        ("vm.builtin.read_if_cond", vec![tensor(&[1], vec![false])], K("False")),
        ("vm.builtin.read_if_cond", vec![i(0)], K("False")),
        ("vm.builtin.read_if_cond", vec![nan()], E(Kind::Value, &["integer or bool tensor", "float64"])),
        ("vm.builtin.read_if_cond", vec![tensor(&[0], Vec::<i32>::new())], E(Kind::Value, &["one-element", "(0,)"])),
        ("vm.builtin.read_if_cond", vec![f(1.0)], E(Kind::Type, &["bool, int or one-element", "found float"])),
        ("vm.builtin.print", vec![s("printed"), i(1)], K("None")),
        (
            "vm.builtin.alloc_tensor",
            vec![storage(8), i(0), shape(&[0, 1 << 40, 1 << 40]), s("int32")],
            E(Kind::Value, &["too large"]),
        ),
        ("vm.builtin.reshape", vec![empty(), shape(&[0, 1 << 40, 1 << 40])], E(Kind::Value, &["too large"])),
        ("vm.builtin.make_closure", vec![func()], K("<function test.pair>")),
        ("vm.builtin.make_closure", vec![i(1), i(2)], E(Kind::Type, &["function", "found int 1"])),
        ("vm.builtin.invoke_closure", vec![vm.clone(), func(), i(1), i(2)], K("(1, 2)")),
        ("vm.builtin.invoke_closure", vec![vm.clone(), i(1)], E(Kind::Type, &["function", "found int 1"])),
        ("vm.builtin.invoke_closure", vec![i(0), func()], E(Kind::Type, &["vm_state", "found int 0"])),
        // ---- scalars ----
        ("vm.builtin.int.add", vec![i(2), i(3)], K("5")),
        ("vm.builtin.int.add", vec![i(i64::MAX), i(1)], E(Kind::Arithmetic, &["overflows int64"])),
        ("vm.builtin.int.sub", vec![i(2), i(5)], K("-3")),
        ("vm.builtin.int.mul", vec![i(-4), i(5)], K("-20")),
        ("vm.builtin.int.sub", vec![i(i64::MIN), i(1)], E(Kind::Arithmetic, &["overflows"])),
        ("vm.builtin.int.mul", vec![i(1 << 32), i(1 << 32)], E(Kind::Arithmetic, &["overflows"])),
        ("vm.builtin.int.floordiv", vec![i(-7), i(2)], K("-4")),
        ("vm.builtin.int.floordiv", vec![i(7), i(0)], E(Kind::Arithmetic, &["division by zero", "7 // 0"])),
        ("vm.builtin.int.floordiv", vec![i(i64::MIN), i(-1)], E(Kind::Arithmetic, &["overflows"])),
        ("vm.builtin.int.floormod", vec![i(-7), i(2)], K("1")),
        ("vm.builtin.int.floormod", vec![i(7), i(0)], E(Kind::Arithmetic, &["division by zero"])),
        ("vm.builtin.int.min", vec![i(-7), Value::Bool(true)], K("-7")),
        ("vm.builtin.int.max", vec![i(-7), i(3)], K("3")),
        ("vm.builtin.int.max", vec![i(-7), f(1.0)], E(Kind::Type, &["int", "found float 1.0"])),
        ("vm.builtin.int.lt", vec![i(1), i(2)], K("True")),
        ("vm.builtin.int.le", vec![i(3), i(2)], K("False")),
        ("vm.builtin.int.gt", vec![i(3), i(2)], K("True")),
        ("vm.builtin.int.ge", vec![i(2), i(2)], K("True")),
        ("vm.builtin.int.eq", vec![i(2), i(2)], K("True")),
        ("vm.builtin.int.ne", vec![i(2), i(2)], K("False")),
        ("vm.builtin.int.eq", vec![i(2)], E(Kind::Arity, &["expected 2"])),
        ("vm.builtin.float.add", vec![f(0.5), i(1)], K("1.5")),
        ("vm.builtin.float.sub", vec![f(0.5), f(1.0)], K("-0.5")),
        ("vm.builtin.float.mul", vec![f(f64::INFINITY), f(0.0)], K("NaN")),
        ("vm.builtin.float.div", vec![f(1.0), f(0.0)], K("inf")),
        ("vm.builtin.float.min", vec![f(f64::NAN), f(0.0)], K("NaN")),
        ("vm.builtin.float.max", vec![f(-1.0), f(0.0)], K("0.0")),
        ("vm.builtin.float.lt", vec![f(f64::NAN), f(0.0)], K("False")),
        ("vm.builtin.float.le", vec![f(0.0), f(0.0)], K("True")),
        ("vm.builtin.float.gt", vec![f(0.0), f(-0.0)], K("False")),
        ("vm.builtin.float.ge", vec![f(0.0), f(-0.0)], K("True")),
        ("vm.builtin.float.eq", vec![f(f64::NAN), f(f64::NAN)], K("False")),
        ("vm.builtin.float.ne", vec![f(f64::NAN), f(f64::NAN)], K("True")),
        ("vm.builtin.float.add", vec![s("1"), f(1.0)], E(Kind::Type, &["float", "found str"])),
        // ---- tensor ops ----
        ("vm.op.add", vec![x23(), i(10)], K("float32 (2, 3) [11, 12, 13, 14, 15, 16]")),
        ("vm.op.add", vec![tensor(&[2], vec![250u8, 1]), i(10)], K("uint8 (2,) [4, 11]")),
        (
            "vm.op.add",
            vec![tensor(&[2], vec![250u8, 1]), i(-1)],
            E(Kind::Value, &["Python integer -1 is out of bounds for uint8"]),
        ),
        ("vm.op.add", vec![tensor(&[2], vec![250u8, 1]), tensor(&[2], vec![-1i8, 1])], K("int16 (2,) [249, 2]")),
        ("vm.op.add", vec![tensor(&[1], vec![1i32]), tensor(&[1], vec![1i64])], K("int64 (1,) [2]")),
        ("vm.op.add", vec![tensor(&[1], vec![1i32]), tensor(&[1], vec![0.5f32])], K("float64 (1,) [1.5]")),
        (
            "vm.op.add",
            vec![tensor(&[2], vec![true, false]), tensor(&[2], vec![true, true])],
            K("bool (2,) [true, true]"),
        ),
        (
            "vm.op.add",
            vec![x23(), tensor(&[2], vec![1.0f32, 2.0])],
            E(Kind::Value, &["could not be broadcast", "(2, 3) and (2,)"]),
        ),
        ("vm.op.add", vec![x23(), s("1")], E(Kind::Type, &["tensor, int, float or bool", "found str"])),
        // 0-d tensors are strong (not weak scalars): float32 + int32 -> float64, as numpy 2.
        ("vm.op.add", vec![empty(), zero_dim()], K("float64 (0, 3) []")),
        ("vm.op.sub", vec![zero_dim(), f(0.5)], K("float64 () [6.5]")),
        (
            "vm.op.sub",
            vec![tensor(&[1], vec![true]), tensor(&[1], vec![true])],
            E(Kind::Value, &["expected numeric operands", "found booleans"]),
        ),
        (
            "vm.op.mul",
            vec![tensor(&[2, 1], vec![1i64, 2]), tensor(&[3], vec![1i64, 10, 100])],
            K("int64 (2, 3) [1, 10, 100, 2, 20, 200]"),
        ),
        ("vm.op.mul", vec![tensor(&[1], vec![i32::MAX]), i(2)], K("int32 (1,) [-2]")),
        ("vm.op.div", vec![tensor(&[2], vec![1i32, 0]), i(0)], K("float64 (2,) [inf, NaN]")),
        ("vm.op.div", vec![nan(), f(2.0)], K("float64 (2,) [NaN, 0.5]")),
        ("vm.op.maximum", vec![nan(), f(0.0)], K("float64 (2,) [NaN, 1]")),
        ("vm.op.minimum", vec![tensor(&[3], vec![3u16, 1, 2]), i(2)], K("uint16 (3,) [2, 1, 2]")),
        ("vm.op.neg", vec![tensor(&[2], vec![i8::MIN, 1])], K("int8 (2,) [-128, -1]")),
        (
            "vm.op.neg",
            vec![tensor(&[1], vec![true])],
            E(Kind::Value, &["expected a numeric operand", "found a boolean"]),
        ),
        ("vm.op.exp", vec![tensor(&[1], vec![0i32])], K("float64 (1,) [1]")),
        ("vm.op.exp", vec![f(f64::NAN)], K("float64 () [NaN]")),
        ("vm.op.sqrt", vec![tensor(&[2], vec![4.0f32, -1.0])], K("float32 (2,) [2, NaN]")),
        ("vm.op.sqrt", vec![null.clone()], E(Kind::Type, &["tensor, int, float or bool", "found null"])),
        ("vm.op.relu", vec![tensor(&[3], vec![-1i64, 0, 5])], K("int64 (3,) [0, 0, 5]")),
        ("vm.op.relu", vec![empty()], K("float32 (0, 3) []")),
        ("vm.op.sum", vec![x23()], K("float32 () [21]")),
        ("vm.op.sum", vec![x23(), i(0), Value::Bool(true)], K("float32 (1, 3) [5, 7, 9]")),
        ("vm.op.sum", vec![x23(), Value::tuple(vec![i(-1), i(0)])], K("float32 () [21]")),
        ("vm.op.sum", vec![tensor(&[2], vec![true, true])], K("int64 () [2]")),
        ("vm.op.sum", vec![empty(), i(0)], K("float32 (3,) [0, 0, 0]")),
        ("vm.op.sum", vec![nan()], K("float64 () [NaN]")),
        ("vm.op.sum", vec![x23(), i(2)], E(Kind::Value, &["axis 2 is out of bounds for a tensor of dimension 2"])),
        ("vm.op.sum", vec![x23(), shape(&[1, -1])], E(Kind::Value, &["duplicate value in axis"])),
        ("vm.op.sum", vec![zero_dim(), i(0)], E(Kind::Value, &["axis 0 is out of bounds"])),
        ("vm.op.matmul", vec![x23(), tensor(&[3], vec![1.0f32, 0.0, 1.0])], K("float32 (2,) [4, 10]")),
        (
            "vm.op.matmul",
            vec![tensor(&[2, 2], vec![1i64, 2, 3, 4]), tensor(&[2, 2], vec![1i64, 0, 0, 1])],
            K("int64 (2, 2) [1, 2, 3, 4]"),
        ),
        ("vm.op.matmul", vec![x23(), x23()], E(Kind::Value, &["inner dimensions differ", "(2, 3) @ (2, 3)"])),
        ("vm.op.matmul", vec![zero_dim(), x23()], E(Kind::Value, &["at least one dimension"])),
        ("vm.op.matmul", vec![x23(), i(1)], E(Kind::Type, &["tensor", "found int 1"])),
        // ---- tvm_compat ----
        // TVM sets the item to None in place; relaxvm's tuples are immutable: only the checks.
        ("vm.builtin.tuple_reset_item", vec![pair(), i(1)], K("None")),
        ("vm.builtin.tuple_reset_item", vec![pair(), i(2)], E(Kind::Index, &["index 2", "length 2"])),
        ("vm.builtin.tuple_reset_item", vec![pair(), i(-1)], E(Kind::Index, &["index -1"])),
        ("vm.builtin.tuple_reset_item", vec![i(0), i(0)], E(Kind::Type, &["tuple", "found int 0"])),
        ("vm.builtin.call_tir_dyn", vec![func(), i(7), shape(&[3, 4])], K("(7, 3, 4)")),
        ("vm.builtin.call_tir_dyn", vec![func(), shape(&[])], K("()")),
        ("vm.builtin.call_tir_dyn", vec![func(), i(1)], E(Kind::Type, &["shape", "found int 1"])),
        ("vm.builtin.call_tir_dyn", vec![i(1), shape(&[2])], E(Kind::Type, &["function", "found int 1"])),
        ("vm.builtin.call_tir_dyn", vec![func()], E(Kind::Arity, &["at least 2"])),
        ("vm.builtin.memory_manager.clear", vec![], K("None")),
        ("vm.builtin.memory_manager.clear", vec![null.clone()], E(Kind::Arity, &["expected 0"])),
        ("vm.builtin.check_string_info", vec![s("hi"), null.clone()], K("None")),
        ("vm.builtin.check_string_info", vec![s(""), s("arg s")], K("None")),
        ("vm.builtin.check_string_info", vec![i(1), s("arg s")], E(Kind::Type, &["arg s: a string", "found int 1"])),
        ("vm.builtin.check_string_info", vec![s("x"), i(3)], E(Kind::Type, &["str or null", "found int 3"])),
        ("vm.builtin.invoke_debug_func", vec![null.clone(), s("vm.builtin.make_tuple"), s("f.py:3"), i(1)], K("None")),
        (
            "vm.builtin.invoke_debug_func",
            vec![i(1), s("vm.builtin.make_tuple"), s("f.py:3")],
            E(Kind::Value, &["IOEffect is expected to be lowered to None, found int 1"]),
        ),
        (
            "vm.builtin.invoke_debug_func",
            vec![null.clone(), s("test.no_such_debug_func"), s("f.py:3")],
            E(Kind::Value, &["test.no_such_debug_func is not found"]),
        ),
        (
            "vm.builtin.invoke_debug_func",
            vec![null.clone(), i(5), s("f.py:3")],
            E(Kind::Type, &["debug function name", "found int 5"]),
        ),
        // ---- relax.run ----
        ("relax.run.nonzero", vec![tensor(&[2, 2], vec![0i32, 1, 2, 0])], K("int64 (2, 2) [0, 1, 1, 0]")),
        ("relax.run.nonzero", vec![nan()], K("int64 (1, 2) [0, 1]")),
        ("relax.run.nonzero", vec![zero_dim()], K("int64 (1, 1) [0]")),
        ("relax.run.nonzero", vec![empty()], K("int64 (2, 0) []")),
        ("relax.run.nonzero", vec![shape(&[1])], E(Kind::Type, &["tensor", "found shape"])),
        ("relax.run.unique", unique(unique_x(), [1, 0, 0, 0], None), K("int32 (3,) [1, 2, 3]")),
        (
            "relax.run.unique",
            unique(unique_x(), [1, 1, 1, 1], Some(null.clone())),
            K("(int32 (3,) [1, 2, 3], int64 (3,) [1, 3, 0], int64 (4,) [2, 0, 2, 1], int64 (3,) [1, 1, 2])"),
        ),
        (
            "relax.run.unique",
            unique(unique_x(), [0, 0, 1, 1], None),
            K("(int32 (3,) [3, 1, 2], int64 (4,) [0, 1, 0, 2], int64 (3,) [2, 1, 1])"),
        ),
        (
            "relax.run.unique",
            unique(tensor(&[3, 2], vec![1i64, 2, 1, 2, 0, 5]), [1, 0, 0, 1], Some(i(0))),
            K("(int64 (2, 2) [0, 5, 1, 2], int64 (2,) [1, 2])"),
        ),
        ("relax.run.unique", unique(nan(), [1, 0, 0, 0], None), K("float64 (2,) [1, NaN]")),
        (
            "relax.run.unique",
            unique(tensor(&[1], vec![3i8]), [1, 0, 0, 0], Some(i(2))),
            E(Kind::Value, &["axis 2 is out of bounds for array of dimension 1"]),
        ),
        ("relax.run.unique", unique(shape(&[1]), [1, 0, 0, 0], None), E(Kind::Type, &["tensor", "found shape"])),
        (
            "relax.run.unique",
            unique(unique_x(), [1, 0, 0, 0], Some(s("0"))),
            E(Kind::Type, &["int or null", "found str"]),
        ),
        ("relax.run.unique", vec![unique_x(), i(1)], E(Kind::Arity, &["5 to 6"])),
        ("relax.run.shape_to_tensor", vec![shape(&[2, 3])], K("int64 (2,) [2, 3]")),
        // numpy makes `np.array([])` float64.
        ("relax.run.shape_to_tensor", vec![shape(&[])], K("float64 (0,) []")),
        ("relax.run.shape_to_tensor", vec![x23()], E(Kind::Type, &["shape", "found tensor"])),
        ("relax.run.print", vec![s(""), i(1), s("printed by the error table")], K("None")),
        ("relax.run.print", vec![i(1)], E(Kind::Type, &["format string", "found int 1"])),
        ("relax.run.print", vec![s("{")], E(Kind::Value, &["expected '}' before end of string"])),
        ("relax.run.assert_op", vec![Value::Bool(true), s("")], K("None")),
        ("relax.run.assert_op", vec![tensor(&[], vec![true]), s("never {}"), i(1)], K("None")),
        (
            "relax.run.assert_op",
            vec![Value::Bool(false), s("")],
            E(Kind::Raised("AssertionError"), &["relax.run.assert_op: Assertion Failed"]),
        ),
        (
            "relax.run.assert_op",
            vec![i(0), s("x is {}, y is {}"), i(3), shape(&[2])],
            E(Kind::Raised("AssertionError"), &["x is 3, y is (2,)"]),
        ),
        (
            "relax.run.assert_op",
            vec![x23(), s("")],
            E(Kind::Value, &["The condition must be a bool scalar, but given a float32 tensor"]),
        ),
        (
            "relax.run.assert_op",
            vec![tensor(&[1], vec![true]), s("")],
            E(Kind::Value, &["The condition must be a scalar, but it has a shape of (1,)"]),
        ),
        ("relax.run.assert_op", vec![f(1.0), s("")], E(Kind::Type, &["condition", "found float"])),
        // ---- tensor cache (process-wide; `every_row_of_the_table` holds the cache lock, the
        // rows run in order and the last one empties the cache) ----
        ("vm.builtin.tensor_cache.update", vec![s("et.w"), cached(), i(1)], K("None")),
        (
            "vm.builtin.tensor_cache.update",
            vec![s("et.w"), cached()],
            E(Kind::Value, &["Name et.w already exists in the cache"]),
        ),
        ("vm.builtin.tensor_cache.update", vec![s("et.w"), i(1)], E(Kind::Type, &["tensor", "found int 1"])),
        ("vm.builtin.tensor_cache.get", vec![s("et.w")], K("int8 (2,) [5, -5]")),
        ("vm.builtin.tensor_cache.get", vec![s("et.missing")], K("None")),
        ("vm.builtin.tensor_cache.get", vec![i(1)], E(Kind::Type, &["str", "found int 1"])),
        (
            "vm.builtin.param_array_from_cache_by_name",
            vec![names(&["et.w", "et.w"])],
            K("(int8 (2,) [5, -5], int8 (2,) [5, -5])"),
        ),
        ("vm.builtin.param_array_from_cache_by_name", vec![names(&[])], K("()")),
        (
            "vm.builtin.param_array_from_cache_by_name",
            vec![names(&["et.w", "et.missing"])],
            E(Kind::Value, &["Cannot find parameter in cache: et.missing"]),
        ),
        (
            "vm.builtin.param_array_from_cache_by_name",
            vec![Value::tuple(vec![i(1)])],
            E(Kind::Value, &["names[0]: expected str, found int 1"]),
        ),
        ("vm.builtin.param_array_from_cache_by_name", vec![s("et.w")], E(Kind::Type, &["tuple of str", "found str"])),
        ("vm.builtin.param_array_from_cache_by_name_unpacked", vec![s("et.w")], K("(int8 (2,) [5, -5],)")),
        ("vm.builtin.param_array_from_cache_by_name_unpacked", vec![], K("()")),
        (
            "vm.builtin.param_array_from_cache_by_name_unpacked",
            vec![s("et.w"), s("et.missing")],
            E(Kind::Value, &["Cannot find parameter in cache: et.missing"]),
        ),
        (
            "vm.builtin.param_array_from_cache_by_name_unpacked",
            vec![s("et.w"), i(1)],
            E(Kind::Type, &["str", "found int 1"]),
        ),
        ("vm.builtin.tensor_cache.update", vec![s("et.p_0"), tensor(&[1], vec![0u8])], K("None")),
        ("vm.builtin.tensor_cache.update", vec![s("et.p_1"), tensor(&[], vec![1.5f64]), i(0)], K("None")),
        ("vm.builtin.param_array_from_cache", vec![s("et.p"), i(2)], K("(uint8 (1,) [0], float64 () [1.5])")),
        // -1: until the first missing name (et.p_2).
        ("vm.builtin.param_array_from_cache", vec![s("et.p"), i(-1)], K("(uint8 (1,) [0], float64 () [1.5])")),
        ("vm.builtin.param_array_from_cache", vec![s("et.p"), i(-5)], K("()")),
        ("vm.builtin.param_array_from_cache", vec![s("et.p"), i(3)], E(Kind::Value, &["Cannot find et.p_2 in cache"])),
        ("vm.builtin.param_array_from_cache", vec![i(1), i(1)], E(Kind::Type, &["str", "found int 1"])),
        // The TVM-written fixture (see tests/data/tensor_cache/README.md and expected_raw.txt).
        ("vm.builtin.tensor_cache.load", vec![s(&fixture), i(1), i(0)], K("None")),
        ("vm.builtin.tensor_cache.get", vec![s("param_1")], K("int8 (2, 3) [-3, -2, -1, 0, 1, 2]")),
        ("vm.builtin.tensor_cache.get", vec![s("param_3")], K("bool (3,) [true, false, true]")),
        ("vm.builtin.tensor_cache.get", vec![s("param_4")], K("int64 () [1234567890123]")),
        (
            "vm.builtin.tensor_cache.load",
            vec![s(&format!("{fixture}/no_such_dir")), i(1), i(0)],
            E(Kind::Value, &["cannot read", "no_such_dir/tensor-cache.json"]),
        ),
        ("vm.builtin.tensor_cache.load", vec![s(&fixture), i(1), i(-1)], E(Kind::Value, &["invalid device id -1"])),
        ("vm.builtin.tensor_cache.load", vec![i(0), i(1), i(0)], E(Kind::Type, &["str", "found int 0"])),
        ("vm.builtin.tensor_cache.remove", vec![s("et.w")], K("None")),
        ("vm.builtin.tensor_cache.remove", vec![s("et.w")], K("None")),
        ("vm.builtin.tensor_cache.get", vec![s("et.w")], K("None")),
        ("vm.builtin.tensor_cache.remove", vec![i(1)], E(Kind::Type, &["str", "found int 1"])),
        ("vm.builtin.tensor_cache.clear", vec![null.clone()], E(Kind::Arity, &["expected 0"])),
        ("vm.builtin.tensor_cache.clear", vec![], K("None")),
        ("vm.builtin.tensor_cache.get", vec![s("param_1")], K("None")),
        ("vm.builtin.param_array_from_cache", vec![s("et.p"), i(-1)], K("()")),
        // ---- tvm.contrib.sort ----
        (
            "tvm.contrib.sort.sort",
            vec![tensor(&[3], vec![3.0f32, 1.0, 2.0]), sorted.clone(), i(0), Value::Bool(true)],
            K("None"),
        ),
        ("vm.builtin.copy", vec![sorted], K("float32 (3,) [1, 2, 3]")),
        (
            "tvm.contrib.sort.sort",
            vec![tensor(&[2], vec![true, false]), tensor(&[2], vec![false; 2]), i(0), Value::Bool(true)],
            E(Kind::Value, &["unsupported input dtype bool"]),
        ),
        (
            "tvm.contrib.sort.sort",
            vec![tensor(&[2], vec![1.0f32, 2.0]), tensor(&[2], vec![0.0f32; 2]), i(1), Value::Bool(true)],
            E(Kind::Value, &["Axis out of boundary for input ndim 1"]),
        ),
        (
            "tvm.contrib.sort.sort",
            vec![tensor(&[2], vec![1.0f32, 2.0]), tensor(&[3], vec![0.0f32; 3]), i(0), Value::Bool(true)],
            E(Kind::Value, &["output of shape (3,)"]),
        ),
        // Descending along the last axis: [3, 1] -> [0, 1]; [2, 5] -> [1, 0].
        (
            "tvm.contrib.sort.argsort",
            vec![tensor(&[2, 2], vec![3i32, 1, 2, 5]), argsorted.clone(), i(-1), Value::Bool(false)],
            K("None"),
        ),
        ("vm.builtin.copy", vec![argsorted], K("int64 (2, 2) [0, 1, 1, 0]")),
        (
            "tvm.contrib.sort.argsort",
            vec![tensor(&[2], vec![1.0f32, 2.0]), tensor(&[2], vec![0u16; 2]), i(0), Value::Bool(true)],
            E(Kind::Value, &["unsupported output dtype uint16"]),
        ),
        (
            "tvm.contrib.sort.argsort",
            vec![i(1), tensor(&[2], vec![0i64; 2]), i(0), Value::Bool(true)],
            E(Kind::Type, &["tensor", "found int 1"]),
        ),
        // The two largest, ties by lower index: 9 (1), 9 (4).
        (
            "tvm.contrib.sort.topk",
            vec![topk_x(), top_values.clone(), top_indices.clone(), i(2), i(0), s("both"), Value::Bool(false)],
            K("None"),
        ),
        ("vm.builtin.copy", vec![top_values], K("int32 (2,) [9, 9]")),
        ("vm.builtin.copy", vec![top_indices], K("int64 (2,) [1, 4]")),
        (
            "tvm.contrib.sort.topk",
            vec![topk_x(), tensor(&[5], vec![0i32; 5]), i(0), i(0), s("mode"), Value::Bool(true)],
            E(Kind::Value, &["Unsupported ret type: mode"]),
        ),
        (
            "tvm.contrib.sort.topk",
            vec![topk_x(), tensor(&[5], vec![0i32; 5]), i(0), i(0), s("both"), Value::Bool(true)],
            E(Kind::Arity, &["7"]),
        ),
    ]
}

fn kind_matches(kind: Kind, e: &ErrorKind) -> bool {
    matches!(
        (kind, e),
        (Kind::Arity, ErrorKind::Arity { .. })
            | (Kind::Type, ErrorKind::Type { .. })
            | (Kind::Value, ErrorKind::Value(_))
            | (Kind::Index, ErrorKind::Index { .. })
            | (Kind::Alloc, ErrorKind::Alloc { .. })
            | (Kind::Arithmetic, ErrorKind::Arithmetic(_))
    ) || matches!((kind, e), (Kind::Raised(want), ErrorKind::Raised { kind, .. }) if kind == want)
}

#[test]
fn every_row_of_the_table() {
    // The tensor-cache rows read what earlier rows stored: keep the fuzz out of the cache.
    let _cache = crate::robustness::tensor_cache_lock();
    let mut failures = Vec::new();
    let rows = cases();
    for (name, args, want) in &rows {
        let got = call(name, args);
        let ok = match (want, &got) {
            (Want::Ok(text), Ok(v)) => render(v) == *text,
            (Want::Err(kind, words), Err(e)) => {
                let msg = e.to_string();
                kind_matches(*kind, e.kind()) && msg.contains(name) && words.iter().all(|w| msg.contains(w))
            }
            _ => false,
        };
        if !ok {
            let got = match &got {
                Ok(v) => format!("Ok({})", render(v)),
                Err(e) => format!("Err({:?})", e),
            };
            let want = match want {
                Want::Ok(t) => format!("Ok({t})"),
                Want::Err(k, w) => format!("Err({k:?} containing {w:?})"),
            };
            failures.push(format!("{name}({})\n    want {want}\n    got  {got}", show(args)));
        }
    }
    assert!(failures.is_empty(), "{} of {} rows failed:\n{}", failures.len(), rows.len(), failures.join("\n"));
}

#[test]
fn every_builtin_has_a_success_row_and_an_error_row() {
    let rows = cases();
    for name in relaxvm_builtins::builtin_names() {
        let ok = rows.iter().any(|(n, _, w)| *n == name && matches!(w, Want::Ok(_)));
        let err = rows.iter().any(|(n, _, w)| *n == name && matches!(w, Want::Err(..)));
        let variadic_any =
            matches!(name, "vm.builtin.make_tuple" | "vm.builtin.print" | "vm.builtin.copy" | "vm.builtin.move");
        assert!(ok, "{name} has no success row");
        assert!(err || variadic_any, "{name} has no error row");
    }
}
