"""Benchmark rows for models compiled by Apache TVM: the same ``.so`` run by TVM's Relax VM and
by relaxvm, per call, measured alternately in one run (see bench.py).

Needs TVM to compile the models, so the rows exist only in the bench environment. relaxvm
opens a copy of each library: the dynamic loader shares one mapping per file, and TVM's
loader fills the library's runtime-service slots with its own functions.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from typing import Any, Callable

import numpy as np

import relaxvm as rx


def _mlp(features: int, hidden: int, rng: np.random.Generator) -> Any:
    from tvm.script import ir as I  # noqa: E741
    from tvm.script import relax as R

    from tvm import relax

    w1 = relax.const(rng.standard_normal((features, hidden), dtype="float32"))
    w2 = relax.const(rng.standard_normal((hidden, 10), dtype="float32"))
    b1 = relax.const(rng.standard_normal((hidden,), dtype="float32"))

    @I.ir_module
    class Mlp:
        @R.function
        def main(x: R.Tensor(("n", features), "float32")):
            with R.dataflow():
                h = R.nn.relu(R.add(R.matmul(x, w1), b1))
                y = R.matmul(h, w2)
                R.output(y)
            return y

    return Mlp


def _models() -> dict[str, Any]:
    from tvm.script import ir as I  # noqa: E741
    from tvm.script import relax as R

    from tvm import relax

    rng = np.random.default_rng(0)
    d = 128
    wq = relax.const(rng.standard_normal((d, d), dtype="float32") / 16)
    wo = relax.const(rng.standard_normal((d, d), dtype="float32") / 16)
    gamma = relax.const(np.ones(d, "float32"))
    beta = relax.const(np.zeros(d, "float32"))

    @I.ir_module
    class Block:
        @R.function
        def main(x: R.Tensor((32, 128), "float32")):
            with R.dataflow():
                q = R.matmul(x, wq)
                s = R.nn.softmax(R.matmul(q, R.permute_dims(x)), axis=-1)
                a = R.matmul(R.matmul(s, x), wo)
                y = R.nn.layer_norm(R.add(x, a), gamma, beta, axes=[-1])
                R.output(y)
            return y

    return {"mlp": _mlp(784, 256, rng), "mlp_small": _mlp(32, 32, rng), "block": Block}


def rows(row_type: type, quick: bool) -> list[Any]:
    """The model rows, or none when TVM is not installed."""
    try:
        import tvm
        from tvm import relax
    except ImportError:
        return []
    folder = tempfile.mkdtemp(prefix="relaxvm-bench-")
    # The models (the large-constant rows write 2 x 256 MiB) go when the bench ends.
    atexit.register(shutil.rmtree, folder, True)
    libs: dict[str, tuple[str, str]] = {}
    for name, mod in _models().items():
        path = os.path.join(folder, f"{name}.so")
        tvm.compile(mod, target="llvm").export_library(path)
        copy = os.path.join(folder, f"{name}-relaxvm.so")
        shutil.copyfile(path, copy)
        libs[name] = (path, copy)
    # Compiled-mode twins (exec_mode="compiled": VM TIR functions) of two models.
    for name in ("mlp_small", "block"):
        path = os.path.join(folder, f"{name}-compiled.so")
        relax.build(_models()[name], target="llvm", exec_mode="compiled").export_library(path)
        copy = os.path.join(folder, f"{name}-compiled-relaxvm.so")
        shutil.copyfile(path, copy)
        libs[f"{name}-compiled"] = (path, copy)

    def model(name: str, x: np.ndarray) -> Callable[[Any], Callable[[], Any]]:
        def setup(b: Any) -> Callable[[], Any]:
            tvm_path, ours_path = libs[name]
            if b.name == "relaxvm":
                vm = rx.VirtualMachine(rx.load_module(ours_path), rx.cpu())
            else:
                vm = relax.VirtualMachine(tvm.runtime.load_module(tvm_path), tvm.cpu())
            f, arg = vm["main"], b.tensor(x)
            return lambda: f(arg)

        return setup

    rng = np.random.default_rng(1)
    return (
        _llm_rows(row_type, folder)
        + _llm_rows(row_type, folder, LLM_MICRO, 384)
        + _resnet_rows(row_type, folder, quick)
        + _load_rows(row_type, folder, quick)
        + [
            row_type(
                "TVM MLP 32-32-10, batch 1 (VM overhead)",
                "us/call",
                1,
                model("mlp_small", rng.standard_normal((1, 32), dtype="float32")),
                "<= 1/4 peer",
            ),
            row_type(
                "TVM MLP 784-256-10, batch 1",
                "us/call",
                1,
                model("mlp", rng.standard_normal((1, 784), dtype="float32")),
                "",
            ),
            row_type(
                "TVM MLP 784-256-10, batch 256",
                "us/call",
                1,
                model("mlp", rng.standard_normal((256, 784), dtype="float32")),
                "= peer",
            ),
            row_type(
                "TVM transformer block 32x128",
                "us/call",
                1,
                model("block", rng.standard_normal((32, 128), dtype="float32")),
                "",
            ),
            row_type(
                "TVM MLP 32-32-10, batch 1, compiled mode (VM TIR)",
                "us/call",
                1,
                model("mlp_small-compiled", rng.standard_normal((1, 32), dtype="float32")),
                "<= peer",
            ),
            row_type(
                "TVM transformer block 32x128, compiled mode (VM TIR)",
                "us/call",
                1,
                model("block-compiled", rng.standard_normal((32, 128), dtype="float32")),
                "<= peer",
            ),
        ]
    )


# The LLM rows: the tiny Llama of examples/llm_model.py (paged KV cache, TVM's CPU attention
# kernels), one engine step per call. Each call ends with `popn` of the tokens it added, so that
# every call runs at the same context length (the pops are in both sides' times).
LLM_MODEL = "mha_h16_l2"
# A model so small (hidden 16, one layer) that a step is mostly the runtime's own work (the VM,
# the cache's bookkeeping, kernel calls), with a cache of 384 tokens (TVM's CPU attention
# kernels loop over the whole page capacity, so a small one keeps them cheap too).
LLM_MICRO = "micro_h8_l1"
LLM_CONTEXT = 64  # tokens already in each sequence when a decode step is timed
LLM_PREFILL = 64  # tokens of the prefill row


def _llm_rows(row_type: type, folder: str, model: str = LLM_MODEL, capacity: int = 1024) -> list[Any]:
    import sys

    import tvm_ffi

    import tvm
    from tvm import relax

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))
    from llm_model import PAGE_SIZE, compile_tiny_llama

    out = os.path.join(folder, f"llm-{model}")
    info = compile_tiny_llama(model, out, np.random.default_rng(2))
    tvm_path, ours_path = os.path.join(out, "model.so"), os.path.join(out, "model-relaxvm.so")
    shutil.copyfile(tvm_path, ours_path)
    with np.load(os.path.join(out, "params.npz")) as z:
        params = [z[f"p{i}"] for i in range(len(z.files))]
    hidden, vocab = info["config"]["hidden"], info["config"]["vocab"]
    rng = np.random.default_rng(3)

    def engine(b: Any, batch: int) -> tuple[Any, ...]:
        """A VM with a cache holding `batch` sequences of LLM_CONTEXT tokens."""
        if b.name == "relaxvm":
            vm, func, shape = rx.VirtualMachine(rx.load_module(ours_path), rx.cpu()), rx.get_global_func, rx.Shape
        else:
            vm = relax.VirtualMachine(tvm.runtime.load_module(tvm_path), tvm.cpu())
            func, shape = tvm.get_global_func, tvm_ffi.Shape
        w = [b.tensor(p) for p in params]
        dims = [8, capacity, 256, PAGE_SIZE, 0]
        cache = vm["create_paged_kv_cache"](*[shape([d]) for d in dims])
        begin, end = func("vm.builtin.kv_state_begin_forward"), func("vm.builtin.kv_state_end_forward")
        popn = func("vm.builtin.kv_state_popn")
        seqs = list(range(batch))
        for s in seqs:
            func("vm.builtin.kv_state_add_sequence")(cache, s)
        ids = b.tensor(rng.integers(0, vocab, size=LLM_CONTEXT * batch).astype("int32"))
        emb = vm["embed"](ids, w).numpy().reshape(1, LLM_CONTEXT * batch, hidden)
        begin(cache, shape(seqs), shape([LLM_CONTEXT] * batch))
        vm["prefill"](b.tensor(emb), cache, w)
        end(cache)
        return vm, cache, w, begin, end, popn, shape, seqs

    def decode(batch: int) -> Callable[[Any], Callable[[], Any]]:
        def setup(b: Any) -> Callable[[], Any]:
            vm, cache, w, begin, end, popn, shape, seqs = engine(b, batch)
            f = vm["decode" if batch == 1 else "batch_decode"]
            x = b.tensor(rng.standard_normal((batch, 1, hidden)).astype("float32"))
            ids, lens = shape(seqs), shape([1] * batch)

            def step() -> Any:
                begin(cache, ids, lens)
                out = f(x, cache, w)
                end(cache)
                for s in seqs:
                    popn(cache, s, 1)
                return out

            return step

        return setup

    def cache_calls(b: Any) -> Callable[[], Any]:
        """The cache's own calls of a decode step, without the model: begin, end, popn."""
        vm, cache, w, begin, end, popn, shape, seqs = engine(b, 1)
        ids, lens = shape(seqs), shape([1])

        def step() -> Any:
            begin(cache, ids, lens)
            end(cache)
            return popn(cache, 0, 1)

        return step

    def prefill(b: Any) -> Callable[[], Any]:
        vm, cache, w, begin, end, popn, shape, seqs = engine(b, 1)
        x = b.tensor(rng.standard_normal((1, LLM_PREFILL, hidden)).astype("float32"))
        ids, lens = shape(seqs), shape([LLM_PREFILL])

        def step() -> Any:
            begin(cache, ids, lens)
            out = vm["prefill"](x, cache, w)
            end(cache)
            popn(cache, 0, LLM_PREFILL)
            return out

        return step

    # Labels start with "TVM " as the other rows of this file (tests/test_bench_table.py).
    ctx = f"{model}, context {LLM_CONTEXT}"
    return [
        row_type(
            f"TVM tiny Llama decode step (begin_forward + decode + end_forward), batch 1 ({ctx})",
            "us/call",
            1,
            decode(1),
            "<= 1/2 peer",
        ),
        row_type(f"TVM tiny Llama decode step, batch 4 ({ctx})", "us/call", 1, decode(4), "<= 1/2 peer"),
        row_type(f"TVM tiny Llama prefill of {LLM_PREFILL} tokens ({ctx})", "us/call", 1, prefill, "= peer"),
        row_type(
            f"TVM tiny Llama cache calls of a decode step (begin_forward + end_forward + popn), batch 1 ({ctx})",
            "us/call",
            1,
            cache_calls,
            "",
        ),
    ]


# resnet50: ONNX's light model (the wheel's data/light/light_resnet50.onnx), imported and compiled
# as tests/tvm_corpus/build_onnx.py does. Each run is a child process of its own (load, then the
# first call, whose peak resident memory above what the process held before it is what the run
# adds, then a second call, timed), alternately for each VM; the table gives the best time and
# the worst memory of the runs.
RESNET_RUNS = 5


def _resnet_child(backend: str, path: str) -> None:
    """One run (in a child process): prints seconds of the second call and bytes the first added."""
    import time

    def status(key: str) -> int:
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) * 1024 for line in f if line.startswith(key + ":"))

    x = np.random.default_rng(0).standard_normal((1, 3, 224, 224)).astype("float32")
    if backend == "relaxvm":
        vm = rx.VirtualMachine(rx.load_module(path), rx.cpu())
        arg = rx.tensor(x)
    else:
        import tvm
        from tvm import relax

        vm = relax.VirtualMachine(tvm.runtime.load_module(path), tvm.cpu())
        arg = tvm.runtime.tensor(x)
    f = vm["main"]
    with open("/proc/self/clear_refs", "w") as c:
        c.write("5")  # the peak resident size starts again from the current one
    before = status("VmRSS")
    out = f(arg)
    del out
    added = status("VmHWM") - before
    t = time.perf_counter()
    f(arg)
    print(time.perf_counter() - t, added)


def _resnet_rows(row_type: type, folder: str, quick: bool) -> list[Any]:
    import subprocess
    import sys

    import onnx
    from tvm.relax.frontend.onnx import from_onnx

    import tvm
    from tvm import relax

    tvm_path, ours_path = os.path.join(folder, "resnet50.so"), os.path.join(folder, "resnet50-relaxvm.so")

    def build() -> None:
        """Compiles the model (when a row is measured: --only may leave these out)."""
        path = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light", "light_resnet50.onnx")
        mod = from_onnx(onnx.load(path), keep_params_in_input=False)
        mod = relax.transform.LegalizeOps()(relax.transform.DecomposeOpsForInference()(mod))
        with tvm.transform.PassContext(opt_level=3):
            tvm.compile(mod, target="llvm").export_library(tvm_path)
        shutil.copyfile(tvm_path, ours_path)

    runs: dict[str, list[tuple[float, float]]] = {}

    def measure(names: list[str]) -> dict[str, list[tuple[float, float]]]:
        if not runs:
            build()
            env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
            here = os.path.dirname(os.path.abspath(__file__))
            for _ in range(2 if quick else RESNET_RUNS):
                for name in names:
                    code = (
                        f"import sys; sys.path.insert(0, {here!r}); "
                        "import bench_tvm_models as m; m._resnet_child(sys.argv[1], sys.argv[2])"
                    )
                    lib = ours_path if name == "relaxvm" else tvm_path
                    out = subprocess.run(
                        [sys.executable, "-c", code, name, lib], env=env, capture_output=True, text=True, check=True
                    )
                    seconds, added = out.stdout.split()[-2:]
                    runs.setdefault(name, []).append((float(seconds), float(added)))
        return runs

    time_row = row_type("TVM resnet50 (ONNX light model zoo), batch 1", "ms/call", 1, None, "<= peer")
    time_row.measure = lambda names: {n: min(r[0] for r in v) * 1e3 for n, v in measure(names).items()}
    memory_row = row_type("TVM resnet50: resident memory a run adds, worst run", "MB", 1, None, "<= peer")
    memory_row.measure = lambda names: {n: max(r[1] for r in v) / 1e6 for n, v in measure(names).items()}
    return [time_row, memory_row]


def _big_module(weight: np.ndarray) -> Any:
    """x + weight, the weight a constant of the module."""
    from tvm.script import ir as I  # noqa: E741
    from tvm.script import relax as R

    from tvm import relax

    w = relax.const(weight)
    n = weight.shape[0]

    @I.ir_module
    class Big:
        @R.function
        def main(x: R.Tensor((n,), "uint8")):
            y = R.add(x, w)
            return y

    return Big


def _load_rows(row_type: type, folder: str, quick: bool) -> list[Any]:
    """Loading an executable with one large constant: relaxvm's .rvx (read, every byte checked
    by its CRCs, and a VM made), TVM's .so (the only file its VM loads a program from) with the
    same constant, and a bare read of the .rvx file."""
    import tvm
    from tvm import relax

    mib = 64 if quick else 256
    so, rvx = os.path.join(folder, "big.so"), os.path.join(folder, "big.rvx")

    def build() -> None:
        """Writes both files (when a row is measured: --only may leave these out)."""
        if os.path.exists(rvx):
            return
        weight = np.arange(mib << 20, dtype="uint8")
        tvm.compile(_big_module(weight), target="llvm").export_library(so)
        ib = rx.ExecBuilder()
        with ib.function("main", num_inputs=0):
            ib.emit_call("vm.builtin.copy", args=[ib.convert_constant(weight)], dst=ib.r(0))
            ib.emit_ret(ib.r(0))
        ib.get().save(rvx)

    def load(b: Any) -> Callable[[], Any]:
        build()
        if b.name == "relaxvm":
            return lambda: rx.VirtualMachine(rx.load_executable(rvx), rx.cpu())
        return lambda: relax.VirtualMachine(tvm.runtime.load_module(so), tvm.cpu())

    def bare_read() -> bytes:
        build()
        with open(rvx, "rb") as f:
            return f.read()

    # Labels start with "TVM " as the other rows of this file (tests/test_bench_table.py).
    label = f"TVM .so / relaxvm .rvx with a {mib} MiB constant: load + VM (ours: every byte checked)"
    return [
        row_type(label, "ms/load", 1, load, "<= 1/2 peer"),
        row_type(f"{label}, vs a bare read of the file", "ms/load", 1, load, "<= 2x read", False, ("read", bare_read)),
    ]
