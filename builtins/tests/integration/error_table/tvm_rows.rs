//! The rows of the builtins TVM-compiled programs call beyond the core set: `tvm_compat`,
//! `relax.run.*`, the tensor cache and `tvm.contrib.sort.*` (see the parent module).

use super::{empty, f, func, i, nan, s, x23, zero_dim, Kind, Want};
use crate::common::{shape, tensor};
use relaxvm::Value;
use Want::{Err as E, Ok as K};

pub(super) fn cases() -> Vec<(&'static str, Vec<Value>, Want)> {
    let null = Value::Null;
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
        (
            "vm.builtin.check_string_info",
            vec![i(1), s("arg s")],
            E(Kind::Type, &["a string (in vm.builtin.check_string_info, arg s)", "found int 1"]),
        ),
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
        // The call_py_func table: what a row registers, the next rows call.
        ("vm.builtin.register_py_func", vec![s("et.pair"), func()], K("None")),
        ("vm.builtin.call_py_func", vec![Value::tuple(vec![s("et.pair"), pair()])], K("(1, 2)")),
        ("vm.builtin.get_py_func", vec![s("et.pair")], K("<function test.pair>")),
        (
            "vm.builtin.register_py_func",
            vec![s("et.pair"), i(1)],
            E(Kind::Type, &["argument 1 (the function)", "found int"]),
        ),
        ("vm.builtin.get_py_func", vec![i(1)], E(Kind::Type, &["argument 0 (the name)", "found int"])),
        (
            "vm.builtin.call_py_func",
            vec![Value::tuple(vec![s("et.pair")])],
            E(Kind::Value, &["expected a tuple (name, arguments), got 1 items"]),
        ),
        ("vm.builtin.clear_py_func_registry", vec![null.clone()], E(Kind::Arity, &["expected 0"])),
        ("vm.builtin.clear_py_func_registry", vec![], K("None")),
        (
            "vm.builtin.get_py_func",
            vec![s("et.pair")],
            E(Kind::Value, &["\"et.pair\" not found in the call_py_func registry"]),
        ),
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
            E(Kind::Value, &["output of shape (3,) where [2] is needed"]),
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
        // Outputs of the wrong shape, named: k=2 of 5 along axis 0 needs (2,) outputs.
        (
            "tvm.contrib.sort.topk",
            vec![
                topk_x(),
                tensor(&[3], vec![0i32; 3]),
                tensor(&[2], vec![0i64; 2]),
                i(2),
                i(0),
                s("both"),
                Value::Bool(false),
            ],
            E(Kind::Value, &["the values output has shape (3,), expected [2] (k=2 along axis 0)"]),
        ),
        (
            "tvm.contrib.sort.topk",
            vec![
                topk_x(),
                tensor(&[2], vec![0i32; 2]),
                tensor(&[4], vec![0i64; 4]),
                i(2),
                i(0),
                s("both"),
                Value::Bool(false),
            ],
            E(Kind::Value, &["the indices output has shape (4,), expected [2] (k=2 along axis 0)"]),
        ),
        (
            "tvm.contrib.sort.topk",
            vec![topk_x(), tensor(&[5], vec![0i32; 5]), i(0), i(0), s("both"), Value::Bool(true)],
            E(Kind::Arity, &["7"]),
        ),
    ]
}
