"""Generates numpy_cases.txt: numpy 2 results of the vm.op.* operators on many dtypes, shapes and
scalar operands. Run with numpy >= 2:  python gen_numpy_cases.py > numpy_cases.txt

Line format: op|operand|operand...|expected, where an operand is `dtype;shape;values`
(shape comma-separated, values space-separated), `py_int;;v`, `py_float;;v` or `py_bool;;v`, and
expected is `dtype;shape;values` or `ERR`. Extra arguments of sum are `axis;;v` / `keepdims;;v`.
"""
import numpy as np

rng = np.random.default_rng(7)
DTYPES = ["bool", "int8", "uint8", "int16", "int32", "int64", "uint32", "uint64", "float16", "float32", "float64"]


def values(dtype, n):
    if dtype == "bool":
        return rng.integers(0, 2, n).astype(bool)
    if dtype.startswith("uint"):
        return rng.integers(0, 200, n).astype(dtype)
    if dtype.startswith("int"):
        return rng.integers(-120, 120, n).astype(dtype)
    v = rng.normal(0, 3, n).astype(dtype)
    if n >= 4:
        v[1] = np.nan
        v[3] = -0.0
    return v


def fmt(x):
    if isinstance(x, (bool, np.bool_)):
        return str(int(x))
    if isinstance(x, (float, np.floating)):
        return repr(float(x))
    return str(int(x))


def arr(a):
    a = np.asarray(a)
    return f"{a.dtype};{','.join(map(str, a.shape))};{' '.join(fmt(x) for x in a.ravel())}"


def operand(o):
    if isinstance(o, bool):
        return f"py_bool;;{int(o)}"
    if isinstance(o, int):
        return f"py_int;;{o}"
    if isinstance(o, float):
        return f"py_float;;{o!r}"
    return arr(o)


def emit(op, fn, *operands, extra=()):
    try:
        with np.errstate(all="ignore"):
            out = arr(fn(*operands))
    except Exception:
        out = "ERR"
    print("|".join([op] + [operand(o) for o in operands] + list(extra) + [out]))


BIN = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.true_divide,
       "maximum": np.maximum, "minimum": np.minimum}
for op, fn in BIN.items():
    for da in DTYPES:
        for db in DTYPES:
            emit(op, fn, values(da, 6).reshape(2, 3), values(db, 3))
        for s in [True, 3, -2, 300, 2.5]:
            emit(op, fn, values(da, 4), s)
            emit(op, fn, s, values(da, 4))
    emit(op, fn, 7, 2)
    emit(op, fn, values("float32", 0).reshape(0, 3), values("float32", 1).reshape(1, 1))
    emit(op, fn, np.array(3, dtype="int16"), values("int8", 2))

UN = {"neg": np.negative, "exp": np.exp, "sqrt": np.sqrt}
for op, fn in UN.items():
    for d in DTYPES:
        emit(op, fn, values(d, 5))
    emit(op, fn, 2)
    emit(op, fn, 2.0)

for d in DTYPES:
    x = values(d, 24).reshape(2, 3, 4)
    emit("sum", np.sum, x)
    for axis in [0, 1, -1, (0, 2)]:
        for keep in [False, True]:
            ax = ",".join(map(str, axis)) if isinstance(axis, tuple) else str(axis)
            emit("sum", lambda a, axis=axis, keep=keep: np.sum(a, axis=axis, keepdims=keep), x,
                 extra=[f"axis;;{ax}", f"keepdims;;{int(keep)}"])

for da in ["int8", "int32", "float16", "float32", "float64", "bool", "uint8"]:
    for db in ["int8", "float32", "float64", "bool"]:
        for sa, sb in [((2, 3), (3, 4)), ((3,), (3, 2)), ((2, 3), (3,)), ((3,), (3,)), ((2, 1, 2, 3), (4, 3, 2)), ((2, 3), (2, 3))]:
            a = values(da, int(np.prod(sa))).reshape(sa)
            b = values(db, int(np.prod(sb))).reshape(sb)
            emit("matmul", np.matmul, a, b)
