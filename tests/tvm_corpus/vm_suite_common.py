"""What the modules of the suite ``vm_suite`` share (tests/tvm_corpus/build_vm_suite.py): the
modes, the random inputs, what is not built and why, and the registry the models enter with
``@model(source)``. One module per group of TVM source files holds the models:
``vm_suite_build.py`` (test_vm_build.py), ``vm_suite_operators.py`` (test_relax_operators.py) and
``vm_suite_codegen.py`` (the scope, callback, codegen, codegen-TIR and multi-device files)."""

from __future__ import annotations

import os
import sys
from typing import Any, Callable

import numpy as np
import tvm.relax.testing.vm  # noqa: F401 - registers the test.vm.* functions TVM's tests call

import tvm

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(1, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))

MODES = ("bytecode", "compiled")
RNG = np.random.default_rng(20261127)
TARGET = tvm.target.Target("llvm", host="llvm")


def rand(*shape: int, dtype: str = "float32") -> np.ndarray:
    return RNG.random(shape).astype(dtype)


# What is not built, and why: (source file, test, reason).
SKIPPED = [
    ("test_vm_build.py", "test_vm_emit_te_constant_param_gpu", "needs a GPU (CUDA)"),
    ("test_vm_build.py", "test_vm_to_device", "needs a GPU (CUDA)"),
    ("test_vm_build.py", "test_relax_module_with_multiple_targets", "needs a GPU (CUDA)"),
    ("test_vm_build.py", "test_save_function_kwargs_rpc", "needs TVM's RPC server"),
    ("test_vm_build.py", "test_save_function_time_evaluator_rpc", "needs TVM's RPC server"),
    ("test_vm_build.py", "test_set_input_stateless_failure_rpc", "needs TVM's RPC server"),
    ("test_vm_build.py", "test_set_input_invoke_failure_rpc", "needs TVM's RPC server"),
    ("test_vm_build.py", "test_set_input_get_failure_rpc", "needs TVM's RPC server"),
    ("test_vm_multi_device.py", "test_multi_gpu", "needs several GPUs"),
    ("test_vm_multi_device.py", "test_multi_device", "needs a GPU (CUDA)"),
]

# Models --------------------------------------------------------------------------------------
# (source file, test name) -> function of nothing returning (module, cases); a case is a tuple
# (kind, function, args[, extra]) — see the module's docstring.
MODELS: dict[tuple[str, str], Callable[[], tuple[Any, list]]] = {}


def model(source: str, name: str | None = None) -> Callable:
    def register(f: Callable) -> Callable:
        MODELS[(source, name or f.__name__)] = f
        return f

    return register
