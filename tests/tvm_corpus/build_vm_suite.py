"""Builds the suite ``vm_suite``: Apache TVM 0.27's end-to-end Relax VM tests
(``tests/python/relax/test_vm_build.py`` and neighbours), each model compiled in both exec modes
(``bytecode`` and ``compiled``: VM TIR functions), exported with ``export_library`` and run on TVM's
own VM, whose outcomes are recorded for relaxvm to reproduce (see corpus.py for the format).

Run with TVM (``.venv-tvm``): ``build_vm_suite.py OUT_DIR`` writes ``OUT_DIR/vm_suite/``. The
tests ``tests/test_tvm_vm_suite_*.py`` (one per TVM source file) run the recorded cases on relaxvm.

A model is one TVM test's module in one mode (``test_vm_build.py::test_vm_tuple[compiled]``);
its cases are what the test does with the VM, by kind:

- ``call``: ``vm[function](*args)``: the result, or the class of TVM's error; with
  ``after``, also the arguments after the call (a packed function writing into one);
- ``saved``: TVM's ``check_saved_func``: the call, then the same call through ``save_function``;
- ``stateful``: ``set_input`` (positional, or ``kwargs``), ``invoke_stateful``, ``get_outputs``,
  with which outputs are the very input tensors (``aliases``);
- ``saved_kwargs``: ``save_function`` with keyword arguments, then the saved function;
- ``set_input_then_call``, ``invoke_without_input``, ``set_input_then_get``: the misuses TVM
  refuses (the error class);
- ``time_stateful``, ``time_saved``: ``time_evaluator`` on ``invoke_stateful`` and on a saved
  function (whether it produced results).

Tests TVM runs only on a GPU, through its RPC server, or that inspect TVM's own IR are not built;
``SKIPPED`` lists each with its reason (the test files turn them into skips).
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
from typing import Any

import numpy as np
import tvm.relax.testing.vm  # noqa: F401 - registers the test.vm.* functions TVM's tests call
import tvm_ffi

import tvm
from tvm import relax

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(1, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
import corpus  # noqa: E402
import vm_suite_build  # noqa: E402, F401 - the models register themselves on import
import vm_suite_codegen  # noqa: E402, F401
import vm_suite_operators  # noqa: E402, F401
from progress import Progress  # noqa: E402
from vm_suite_common import MODELS, MODES, SKIPPED, TARGET  # noqa: E402


def to_numpy(v: Any) -> Any:
    """A TVM value as the plain Python/numpy value corpus.flatten stores."""
    if isinstance(v, tvm.runtime.Tensor):
        return v.numpy()
    if isinstance(v, tvm_ffi.Shape):
        return corpus.ShapeValue(int(d) for d in v)
    if isinstance(v, (bool, int, float, str)) or v is None:
        return v
    if hasattr(v, "__len__") and hasattr(v, "__getitem__"):
        return tuple(to_numpy(v[i]) for i in range(len(v)))
    raise TypeError(f"cannot record a TVM value of type {type(v).__name__}")


def to_tvm(v: Any) -> Any:
    if isinstance(v, np.ndarray):
        return tvm.runtime.tensor(v)
    if isinstance(v, corpus.ShapeValue):
        return tvm_ffi.Shape(list(v))
    if isinstance(v, tuple):
        return tuple(to_tvm(x) for x in v)
    return v


def aliases(outs: Any, inputs: list) -> list[list[int]]:
    """[output index, input index] of each output (item of a tuple output) that is an input."""
    items = list(outs) if isinstance(outs, (tvm_ffi.Array, tuple, list)) else [outs]
    return [
        [i, j]
        for i, o in enumerate(items)
        for j, a in enumerate(inputs)
        if isinstance(o, tvm.runtime.Tensor) and isinstance(a, tvm.runtime.Tensor) and o.same_as(a)
    ]


def run_case(vm: Any, kind: str, function: str, args: list, extra: dict) -> tuple[Any, dict]:
    """Runs one case on TVM's VM: (the value recorded, extra manifest keys)."""
    tvm_args = [to_tvm(a) for a in args]
    kwargs = {k: to_tvm(v) for k, v in extra.get("kwargs", {}).items()}
    if kind == "call":
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            raw = vm[function](*tvm_args)
        out = to_numpy(raw)
        more = {"aliases": aliases(raw, tvm_args)}
        if extra.get("stdout"):
            more["stdout"] = printed.getvalue()
        if extra.get("after"):
            return (out, tuple(to_numpy(a) for a in tvm_args)), {**more, "after": True}
        return out, more
    if kind == "saved":
        vm.save_function(function, function + "_saved", *tvm_args)
        direct = to_numpy(vm[function](*tvm_args))
        saved = to_numpy(vm[function + "_saved"]())
        assert corpus.flatten(direct, []) == corpus.flatten(saved, []), (direct, saved)
        return direct, {}
    if kind == "stateful":
        vm.set_input(function, *tvm_args, **kwargs)
        vm.invoke_stateful(function)
        outs = vm.get_outputs(function)
        return to_numpy(outs), {"aliases": aliases(outs, tvm_args)}
    if kind == "saved_kwargs":
        vm.save_function(function, "saved_main", **kwargs)
        return to_numpy(vm["saved_main"]()), {}
    if kind == "set_input_then_call":
        vm.set_input(function, *tvm_args)
        return to_numpy(vm[function]()), {}
    if kind == "invoke_without_input":
        vm.invoke_stateful(function)
        return None, {}
    if kind == "set_input_then_get":
        vm.set_input(function, *tvm_args)
        return to_numpy(vm.get_outputs(function)), {}
    if kind == "callback_store":
        stored = []
        out = vm[function](*tvm_args, stored.append)
        return (to_numpy(out), to_numpy(stored[0])), {}
    if kind == "callback_make":
        return to_numpy(vm[function](lambda: tvm_args[0])), {}
    if kind == "callback_raise":

        def raising():
            raise RuntimeError("Error thrown from callback")

        try:
            vm[function](raising)
        except RuntimeError as err:
            stack = err.__traceback__
            while stack.tb_next is not None:
                stack = stack.tb_next
            # TVM's test: the innermost frame is the Python callback's.
            code = stack.tb_frame.f_code
            assert (code.co_filename, code.co_name) == (raising.__code__.co_filename, "raising"), code
            raise
        return None, {}
    if kind == "time_stateful":
        vm.set_input(function, *tvm_args)
        return bool(vm.time_evaluator("invoke_stateful", tvm.cpu())(function).results), {}
    if kind == "time_saved":
        vm.save_function(function, "saved_main", *tvm_args)
        return bool(vm.time_evaluator("saved_main", tvm.cpu())().results), {}
    raise ValueError(f"unknown case kind {kind!r}")


def build(out_dir: str) -> None:
    suite = os.path.join(out_dir, "vm_suite")
    os.makedirs(suite, exist_ok=True)
    models = []
    progress = Progress(len(MODELS) * len(MODES), "vm suite")
    for (source, test), make in MODELS.items():
        mod, cases, *notes = make()
        opt_level = notes[0].get("opt_level") if notes else None
        lowered = bool(notes and notes[0].get("codegen"))
        for mode in MODES:
            name = f"{source[:-3]}/{test}/{mode}"
            progress.step(name)
            folder = os.path.join(suite, name)
            os.makedirs(folder, exist_ok=True)
            if lowered:
                builder = relax.ExecBuilder()
                tir_mod = relax.vm_build._vmcodegen(builder, mod, exec_mode=mode)
                ex = relax.vm_build._vmlink(builder, TARGET, tir_mod)
            elif test == "test_vm_compile_without_target_arg":
                ex = relax.build(mod, exec_mode=mode)
            elif opt_level is not None:
                with tvm.transform.PassContext(opt_level=opt_level):
                    ex = relax.build(mod, target="llvm", exec_mode=mode)
            else:
                ex = relax.build(mod, TARGET, exec_mode=mode)
            so = os.path.join(folder, "model.so")
            ex.export_library(so)
            loaded = tvm.runtime.load_module(so)
            shared_vm = relax.VirtualMachine(loaded, tvm.cpu())
            entries = []
            for k, case in enumerate(cases):
                kind, function, args = case[:3]
                extra = case[3] if len(case) > 3 else {}
                file = f"{name}/case{k}.npz"
                kwargs = extra.get("kwargs", {})
                stored_args = list(args) + [kwargs[key] for key in sorted(kwargs)]
                meta = {"kind": kind, "kwargs": sorted(kwargs)}
                vm = shared_vm
                if "memory_cfg" in extra:
                    vm = relax.VirtualMachine(loaded, tvm.cpu(), memory_cfg=extra["memory_cfg"])
                    meta["memory_cfg"] = extra["memory_cfg"]
                if "error" in extra:
                    try:
                        run_case(vm, kind, function, args, extra)
                    except Exception as e:  # noqa: BLE001 - TVM's error class is what we record
                        want = {
                            "RuntimeError": RuntimeError,
                            "ValueError": ValueError,
                            "TypeError": TypeError,
                            "AssertionError": AssertionError,
                        }
                        assert isinstance(e, want[extra["error"]]), f"{name}: {type(e).__name__} {e}"
                        entry = corpus.save_case(suite, file, function, stored_args, error=str(e).splitlines()[0])
                        entries.append({**entry, **meta, "error_class": extra["error"]})
                        continue
                    raise AssertionError(f"{name}: TVM accepted case {k}, expected {extra['error']}")
                if kind == "multi_device":
                    devices = [tvm.cpu(0), tvm.cpu(1)]
                    multi = relax.VirtualMachine(loaded, devices)
                    placed = [tvm.runtime.tensor(a, d) for a, d in zip(args, [devices[0], devices[0], devices[1]])]
                    value, more = to_numpy(multi[function](*placed)), {}
                elif kind == "text_roundtrip":
                    # TVM's test: the exported library's program prints as the executable did.
                    value, more = ex.as_text() == loaded["as_text"](), {}
                else:
                    value, more = run_case(vm, kind, function, args, extra)
                entry = corpus.save_case(suite, file, function, stored_args, value)
                entries.append({**entry, **meta, **more})
            models.append(
                {
                    "name": name,
                    "source": source,
                    "test": test,
                    "exec_mode": mode,
                    "library": f"{name}/model.so",
                    "cases": entries,
                }
            )
    progress.clear()
    # Python functions left in TVM's registry crash its process at exit.
    tvm.get_global_func("vm.builtin.clear_py_func_registry")()
    skipped = [{"source": s, "test": t, "reason": r} for s, t, r in SKIPPED]
    print(f"vm_suite: {len(models)} models", file=sys.stderr)
    corpus.write_manifest(
        suite, {"suite": "vm_suite", "tvm_version": tvm.__version__, "models": models, "skipped": skipped}
    )


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: build_vm_suite.py OUT_DIR")
    build(sys.argv[1])
