"""Writes cases.jsonl: inputs and Apache TVM 0.27's outputs of tvm.contrib.sort.{sort,argsort,topk}.

Run with TVM installed (e.g. the repository's .venv-tvm): python gen.py. The inputs are drawn
from small value sets so that lines have ties, and for floats NaN, infinities and both zeros,
which is where sort implementations differ. Tensors are stored as hex of their little-endian
bytes (exact, and NaN-safe); outputs start zeroed (topk with k > n leaves the tail as it was).
"""

import json
import pathlib

import numpy as np
import tvm

rng = np.random.default_rng(20261124)
FLOAT_POOL = [0.0, -0.0, 1.0, -1.0, 2.5, np.inf, -np.inf, np.nan, 3.0, 1e-3]
INT_POOL = [0, 1, -1, 2, 7, -100, 100, 3]


def draw(dtype, shape):
    n = int(np.prod(shape))
    if dtype.startswith("float"):
        vals = rng.choice(np.array(FLOAT_POOL, dtype="float64"), size=n)
    else:
        pool = [v for v in INT_POOL if dtype != "uint8" or v >= 0]
        vals = rng.choice(np.array(pool, dtype="int64"), size=n)
    return vals.astype(dtype).reshape(shape)


def shapes():
    for n in [1, 2, 7, 8, 15, 29, 57, 70]:
        yield (n,), 0
    for shape, axis in [((3, 9), 1), ((9, 3), 0), ((2, 3, 8), -1), ((4, 5, 3), 1), ((2, 16, 2), -2), ((0, 4), 1)]:
        yield shape, axis


def hexed(a):
    return np.ascontiguousarray(a).tobytes().hex()


def run(name, inputs, outs, extra):
    f = tvm.get_global_func(f"tvm.contrib.sort.{name}")
    tins = [tvm.runtime.tensor(a) for a in inputs]
    touts = [tvm.runtime.tensor(a) for a in outs]
    f(*tins, *touts, *extra)
    return [hexed(t.numpy()) for t in touts]


cases = []
for shape, axis in shapes():
    for dtype in ["float32", "float64", "int32", "int64", "float16"]:
        x = draw(dtype, shape)
        for ascend in [True, False]:
            out = np.zeros(shape, dtype)
            case = dict(func="sort", dtype=dtype, shape=list(shape), input=hexed(x), axis=axis, ascend=ascend)
            case["outputs"] = [dict(dtype=dtype, shape=list(shape))]
            case["expected"] = run("sort", [x], [out], [axis, ascend])
            cases.append(case)
            out_dtype = ["int32", "int64", "float32", "float64"][len(cases) % 4]
            idx = np.zeros(shape, out_dtype)
            case = dict(func="argsort", dtype=dtype, shape=list(shape), input=hexed(x), axis=axis, ascend=ascend)
            case["outputs"] = [dict(dtype=out_dtype, shape=list(shape))]
            case["expected"] = run("argsort", [x], [idx], [axis, ascend])
            cases.append(case)
    for dtype in ["float32", "float64", "uint8", "int8", "int32", "int64", "float16"]:
        x = draw(dtype, shape)
        n = shape[axis]
        for k in sorted({0, 1, 3, n + 2}):
            for ret_type in [["both", "values", "indices"][len(cases) % 3]]:
                ascend = bool(rng.integers(2))
                idx_dtype = ["int32", "int64", "float32", "float64"][len(cases) % 4]
                if dtype in ("uint8", "int8") and len(cases) % 5 == 0:
                    idx_dtype = dtype
                kk = n if k < 1 else k
                out_shape = list(shape)
                out_shape[axis] = kk
                outs = []
                if ret_type in ("both", "values"):
                    outs.append(dict(dtype=dtype, shape=out_shape))
                if ret_type in ("both", "indices"):
                    outs.append(dict(dtype=idx_dtype, shape=out_shape))
                arrays = [np.zeros(o["shape"], o["dtype"]) for o in outs]
                case = dict(func="topk", dtype=dtype, shape=list(shape), input=hexed(x), axis=axis, ascend=ascend)
                case.update(k=k, ret_type=ret_type, outputs=outs)
                case["expected"] = run("topk", [x], arrays, [k, axis, ret_type, ascend])
                cases.append(case)

path = pathlib.Path(__file__).with_name("cases.jsonl")
path.write_text("".join(json.dumps(c, separators=(",", ":")) + "\n" for c in cases))
print(f"{len(cases)} cases, {path.stat().st_size} bytes, TVM {tvm.__version__}")
