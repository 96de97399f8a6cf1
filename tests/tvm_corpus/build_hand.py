"""Builds the hand-written suite of the TVM model corpus (see corpus.py for the format).

Run with Apache TVM 0.27 (``.venv-tvm``): ``build_hand.py OUT_DIR`` writes ``OUT_DIR/hand/``.
Each model is compiled with ``tvm.compile(mod, target="llvm")`` and exported with
``export_library``; its cases are run on TVM's own VM, whose results are recorded for relaxvm
to reproduce bit for bit. A model TVM cannot compile fails the build (the corpus must not
silently shrink).
"""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any, Callable

import numpy as np
from tvm.script import ir as I  # noqa: E741
from tvm.script import relax as R
from tvm.script import tirx as T

import tvm
from tvm import relax

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(1, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
import corpus  # noqa: E402
from progress import Progress  # noqa: E402

RNG = np.random.default_rng(20261123)


def rand(*shape: int, dtype: str = "float32") -> np.ndarray:
    if dtype == "bool":
        return RNG.integers(0, 2, size=shape).astype("bool")
    if dtype.startswith("int"):
        return RNG.integers(-50, 50, size=shape).astype(dtype)
    return RNG.standard_normal(shape).astype(dtype)


def const(*shape: int, dtype: str = "float32") -> relax.Constant:
    return relax.const(
        rand(*shape, dtype=dtype) / np.float32(8) if dtype.startswith("float") else rand(*shape, dtype=dtype)
    )


# Models ---------------------------------------------------------------------------------------
# Each returns (module, cases, notes); a case is (function, args) or (function, args, error).


def mlp():
    w1, b1, w2 = const(784, 128), const(128), const(128, 10)

    @I.ir_module
    class M:
        @R.function
        def main(x: R.Tensor(("n", 784), "float32")):
            with R.dataflow():
                h = R.nn.relu(R.add(R.matmul(x, w1), b1))
                y = R.matmul(h, w2)
                R.output(y)
            return y

    cases = [("main", [rand(n, 784)]) for n in (1, 4, 256)]
    cases += [
        ("main", [rand(4, 783)], "shape[1] mismatch to specified constant"),
        ("main", [rand(4, 784).astype("float64")], "expect Tensor with dtype float32 but get float64"),
        ("main", [rand(4, 784, 1)], "expect Tensor with ndim 2 but get 3"),
    ]
    return M, cases, {}


def mlp_params():
    @I.ir_module
    class M:
        @R.function
        def main(x: R.Tensor(("n", 32), "float32"), w: R.Tensor((32, 16), "float32"), b: R.Tensor((16,), "float32")):
            with R.dataflow():
                y = R.nn.relu(R.add(R.matmul(x, w), b))
                R.output(y)
            return y

    return M, [("main", [rand(n, 32), rand(32, 16), rand(16)]) for n in (1, 7)], {}


def transformer_block():
    d = 64
    wq, wk, wv, wo = const(d, d), const(d, d), const(d, d), const(d, d)
    g, bt = relax.const(np.ones(d, "float32")), relax.const(np.zeros(d, "float32"))
    w1, w2 = const(d, 4 * d), const(4 * d, d)

    @I.ir_module
    class M:
        @R.function
        def main(x: R.Tensor((16, 64), "float32")):
            with R.dataflow():
                q = R.matmul(x, wq)
                k = R.matmul(x, wk)
                v = R.matmul(x, wv)
                s = R.nn.softmax(R.divide(R.matmul(q, R.permute_dims(k)), R.const(8.0, "float32")), axis=-1)
                a = R.add(x, R.matmul(R.matmul(s, v), wo))
                h = R.nn.layer_norm(a, g, bt, axes=[-1])
                f = R.matmul(R.nn.gelu(R.matmul(h, w1)), w2)
                y = R.nn.layer_norm(R.add(h, f), g, bt, axes=[-1])
                R.output(y)
            return y

    return M, [("main", [rand(16, 64)])], {}


def conv_pool():
    w = const(8, 3, 3, 3)

    @I.ir_module
    class M:
        @R.function
        def main(x: R.Tensor((2, 3, 16, 16), "float32")):
            with R.dataflow():
                c = R.nn.relu(R.nn.conv2d(x, w, padding=[1, 1, 1, 1]))
                y = R.nn.max_pool2d(c, pool_size=[2, 2], strides=[2, 2])
                R.output(y)
            return y

    return M, [("main", [rand(2, 3, 16, 16)])], {}


def if_tensor_cond():
    @I.ir_module
    class M:
        @R.function
        def main(c: R.Tensor((), "bool"), x: R.Tensor((4,), "float32")):
            if c:
                y = R.multiply(x, R.const(2.0, "float32"))
            else:
                y = R.subtract(x, R.const(1.0, "float32"))
            return y

    x = rand(4)
    return M, [("main", [np.array(True), x]), ("main", [np.array(False), x])], {}


def tuples():
    @I.ir_module
    class M:
        @R.function
        def main(x: R.Tensor((3,), "float32"), y: R.Tensor((3,), "float32")):
            a = R.add(x, y)
            b = R.multiply(x, y)
            return (a, (b, x))

    return M, [("main", [rand(3), rand(3)])], {}


def several_functions():
    @I.ir_module
    class M:
        @R.function
        def double(x: R.Tensor(("n",), "float32")) -> R.Tensor(("n",), "float32"):
            return R.add(x, x)

        @R.function
        def main(x: R.Tensor(("n",), "float32")):
            cls = M
            y = cls.double(x)
            return R.exp(y)

    return M, [("main", [rand(5)]), ("double", [rand(3)])], {}


def call_tir_prim_func():
    @I.ir_module
    class M:
        @T.prim_func
        def scale_add(a: T.handle, b: T.handle, out: T.handle):
            n = T.int64()
            A = T.match_buffer(a, (n,), "float32")
            B = T.match_buffer(b, (n,), "float32")
            Out = T.match_buffer(out, (n,), "float32")
            for i in range(n):
                Out[i] = A[i] * T.float32(3) + B[i]

        @R.function
        def main(x: R.Tensor(("n",), "float32"), y: R.Tensor(("n",), "float32")):
            cls = M
            n = T.int64()
            return R.call_tir(cls.scale_add, (x, y), out_ty=R.Tensor((n,), "float32"))

    return M, [("main", [rand(10), rand(10)]), ("main", [rand(1), rand(1)])], {}


def parallel_loop():
    @I.ir_module
    class M:
        @T.prim_func
        def rowsum(a: T.Buffer((256, 64), "float32"), out: T.Buffer((256,), "float32")):
            for i in T.parallel(256):
                out[i] = T.float32(0)
                for j in range(64):
                    out[i] = out[i] + a[i, j]

        @R.function
        def main(x: R.Tensor((256, 64), "float32")):
            cls = M
            return R.call_tir(cls.rowsum, (x,), out_ty=R.Tensor((256,), "float32"))

    return M, [("main", [rand(256, 64)])], {"uses_parallel": True}


def symbolic_shapes():
    @I.ir_module
    class M:
        @R.function
        def main(x: R.Tensor(("n", "m"), "float32"), y: R.Tensor(("k", "m"), "float32")):
            n, m, k = T.int64(), T.int64(), T.int64()
            c = R.concat([x, y], axis=0)
            r = R.reshape(c, R.shape([(n + k) * 2, m // 2]))
            return (c, r)

    return M, [("main", [rand(3, 4), rand(2, 4)]), ("main", [rand(1, 6), rand(5, 6)])], {}


def big_constant():
    w = relax.const(rand(1024, 512))  # 2 MiB

    @I.ir_module
    class M:
        @R.function
        def main(x: R.Tensor((2, 1024), "float32")):
            return R.matmul(x, w)

    return M, [("main", [rand(2, 1024)])], {}


def dtypes():
    @I.ir_module
    class M:
        @R.function
        def main(
            h: R.Tensor((8,), "float16"),
            i: R.Tensor((8,), "int32"),
            j: R.Tensor((8,), "int64"),
            b: R.Tensor((8,), "bool"),
        ):
            h2 = R.multiply(h, h)
            i2 = R.add(i, R.const(7, "int32"))
            j2 = R.multiply(j, R.astype(i, "int64"))
            b2 = R.logical_not(b)
            gt = R.greater(R.astype(h, "float32"), R.const(0.0, "float32"))
            return (h2, i2, j2, b2, gt)

    args = [rand(8, dtype="float16"), rand(8, dtype="int32"), rand(8, dtype="int64"), rand(8, dtype="bool")]
    return M, [("main", args)], {}


def data_dependent():
    @I.ir_module
    class M:
        @R.function
        def main(x: R.Tensor((3, 4), "int64")):
            nz = R.nonzero(x)
            u = R.unique(R.reshape(x, R.shape([12])), sorted=True)
            s = R.tensor_to_shape(R.const(np.array([2, 6], "int64")))
            r = R.reshape(x, s)
            return (nz, u, r)

    x = np.array([[0, 1, 2, 0], [3, 0, 1, 1], [0, 0, 2, 5]], "int64")
    return M, [("main", [x])], {}


def sort_topk():
    @I.ir_module
    class M:
        @R.function
        def main(x: R.Tensor((4, 6), "float32")):
            s = R.sort(x, axis=1, descending=False)
            a = R.argsort(x, axis=-1, descending=True, dtype="int32")
            t = R.topk(x, k=3, axis=1, ret_type="both", largest=True, dtype="int64")
            return (s, a, t)

    x = rand(4, 6)
    x[0, 1] = x[0, 3]  # a tie: the stable order matters
    return M, [("main", [x])], {"uses_callbacks": True}


def kernel_assert():
    @I.ir_module
    class M:
        @T.prim_func
        def checked_sqrt(a: T.Buffer((2,), "float32"), out: T.Buffer((2,), "float32")):
            for i in range(2):
                assert a[i] >= T.float32(0), "input must be non-negative"
                out[i] = T.sqrt(a[i])

        @R.function
        def main(x: R.Tensor((2,), "float32")):
            cls = M
            return R.call_tir(cls.checked_sqrt, (x,), out_ty=R.Tensor((2,), "float32"))

    ok = np.array([1.0, 4.0], "float32")
    return M, [("main", [ok]), ("main", [np.array([-1.0, 2.0], "float32")], "input must be non-negative")], {}


def shapes_and_prim_values():
    @I.ir_module
    class M:
        @R.function
        def main(x: R.Tensor(("n", "m"), "float32")):
            n, m = T.int64(), T.int64()
            return (R.shape_of(x), R.prim_value(n * m + 1))

    return M, [("main", [rand(3, 5)])], {}


def parallel_callback():
    """A ``T.parallel`` loop whose every iteration calls a packed function back, on whichever
    pool thread runs it: what tests/adversarial/test_callbacks.py registers there re-enters
    VMs from pool workers. No cases: the function is the test's to register."""

    @I.ir_module
    class M:
        @T.prim_func
        def each(a: T.Buffer((64,), "float32"), out: T.Buffer((64,), "float32")):
            for i in T.parallel(64):
                out[i] = T.Cast("float32", T.call_packed("relaxvm.test.parallel_callback", a[i]))

        @R.function
        def main(x: R.Tensor((64,), "float32")):
            cls = M
            return R.call_tir(cls.each, (x,), out_ty=R.Tensor((64,), "float32"))

    return M, [], {"uses_parallel": True, "uses_callbacks": True}


MODELS: dict[str, Callable[[], Any]] = {
    f.__name__: f
    for f in (
        mlp,
        mlp_params,
        transformer_block,
        conv_pool,
        if_tensor_cond,
        tuples,
        several_functions,
        call_tir_prim_func,
        parallel_loop,
        symbolic_shapes,
        big_constant,
        dtypes,
        data_dependent,
        sort_topk,
        kernel_assert,
        shapes_and_prim_values,
        parallel_callback,
    )
}


# Recording -----------------------------------------------------------------------------------


def to_numpy(v: Any) -> Any:
    """A TVM value as the plain Python/numpy value corpus.flatten stores."""
    if isinstance(v, tvm.runtime.Tensor):
        return v.numpy()
    if isinstance(v, tvm.runtime.ShapeTuple):
        return corpus.ShapeValue(int(d) for d in v)
    if isinstance(v, (bool, int, float, str)) or v is None:
        return v
    if hasattr(v, "__len__") and hasattr(v, "__getitem__"):
        return tuple(to_numpy(v[i]) for i in range(len(v)))
    raise TypeError(f"cannot record a TVM value of type {type(v).__name__}")


def to_tvm(v: Any) -> Any:
    return tvm.runtime.tensor(v) if isinstance(v, np.ndarray) else v


def packed_functions(ex: Any) -> list[str]:
    text = ex.mod.as_text() if hasattr(ex.mod, "as_text") else ex.as_text()
    return [line.split()[0][1:] for line in text.splitlines() if line.strip().endswith("packed_func;")]


def exported_slots(so: str) -> set[str]:
    out = subprocess.run(["nm", "-D", so], capture_output=True, text=True, check=False).stdout
    return {line.split()[-1] for line in out.splitlines() if line.split()[-1].startswith("__TVM")}


def build(out_dir: str) -> None:
    suite = os.path.join(out_dir, "hand")
    os.makedirs(suite, exist_ok=True)
    models = []
    progress = Progress(len(MODELS), "hand corpus")
    for name, make in MODELS.items():
        progress.step(name)
        mod, cases, notes = make()
        folder = os.path.join(suite, name)
        os.makedirs(folder, exist_ok=True)
        ex = tvm.compile(mod, target="llvm")
        so = os.path.join(folder, "model.so")
        ex.export_library(so)
        ex.mod.write_to_file(os.path.join(folder, "model.vmexec"))
        vm = relax.VirtualMachine(tvm.runtime.load_module(so), tvm.cpu())
        entries = []
        for k, case in enumerate(cases):
            function, args = case[0], case[1]
            file = f"{name}/case{k}.npz"
            if len(case) == 3:
                try:
                    vm[function](*[to_tvm(a) for a in args])
                except Exception as e:  # noqa: BLE001 - any TVM error is what we record
                    assert case[2] in str(e), f"{name}: TVM's error {e} lacks {case[2]!r}"
                    entries.append(corpus.save_case(suite, file, function, args, error=case[2]))
                    continue
                raise AssertionError(f"{name}: TVM accepted case {k}, expected {case[2]!r}")
            result = to_numpy(vm[function](*[to_tvm(a) for a in args]))
            entries.append(corpus.save_case(suite, file, function, args, result))
        slots = exported_slots(so)
        if notes.get("uses_parallel"):
            assert "__TVMBackendParallelLaunch" in slots, f"{name}: no parallel launch in {slots}"
        if notes.get("uses_callbacks"):
            assert "__TVMFFIFunctionCall" in slots, f"{name}: no callback slot in {slots}"
        models.append(
            {
                "name": name,
                "library": f"{name}/model.so",
                "vmexec": f"{name}/model.vmexec",
                "packed_functions": packed_functions(ex),
                "slots": sorted(slots),
                "cases": entries,
                **notes,
            }
        )
    progress.clear()
    print(f"hand: {len(models)} models", file=sys.stderr)
    corpus.write_manifest(suite, {"suite": "hand", "tvm_version": tvm.__version__, "models": models})


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: build_hand.py OUT_DIR")
    build(sys.argv[1])
