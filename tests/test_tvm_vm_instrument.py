# Ported from Apache TVM 0.27's tests/python/relax/test_vm_instrument.py (Apache-2.0). TVM's
# tests compile a small MLP (two bias-free linear layers, each followed by ReLU) when they run;
# the port uses the corpus's MLP, which TVM compiled (scripts/test.sh builds the corpus): its
# kernels are matmul, add, relu and matmul1. TVM's LibCompareVMInstrument runs each kernel again
# from `vm.module.imports[0]`; the port's comparator runs it again through the `func` the
# instrument receives, which is that same kernel.
"""TVM's VM-instrument tests, run on relaxvm."""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest

import relaxvm as rx

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "tvm_corpus"))
import located  # noqa: E402

SUITE = located.suite_dir("hand")
pytestmark = pytest.mark.skipif(SUITE is None, reason=located.SKIP_REASON)


@pytest.fixture
def mlp():
    return rx.VirtualMachine(rx.load_module(os.path.join(SUITE, "mlp", "model.so")), rx.cpu())


def test_instrument_counts_calls_and_skips_a_kernel(mlp):
    data_np = np.random.randn(1, 784).astype("float32")
    hit_count = {}

    def instrument(func, name, before_run, ret_val, *args):
        hit_count[(name, before_run)] = hit_count.get((name, before_run), 0) + 1
        assert callable(func)
        if before_run:
            assert ret_val is None
        if name == "matmul":
            return rx.VMInstrumentReturnKind.SKIP_RUN
        return None

    mlp.set_instrument(instrument)
    mlp["main"](rx.tensor(data_np))
    assert hit_count[("matmul", True)] == 1
    assert ("matmul", False) not in hit_count  # skipped: no call, no after-event
    assert hit_count[("matmul1", True)] == hit_count[("matmul1", False)] == 1
    assert hit_count[("relu", True)] == hit_count[("relu", False)] == 1


class KernelComparator:
    """Before each kernel call, runs the kernel on copies of its arguments; after the VM's own
    call, checks that every argument ended equal to its copy (kernels write their outputs)."""

    def __init__(self):
        self.pending = []
        self.compared = []

    def __call__(self, func, name, before_run, ret_val, *args):
        if name.startswith("vm.builtin.") or not all(isinstance(a, rx.Tensor) for a in args):
            return None
        if before_run:
            copies = [rx.tensor(a.numpy()) for a in args]
            func(*copies)
            self.pending.append((name, copies))
        else:
            want_name, copies = self.pending.pop()
            assert want_name == name
            for got, want in zip(args, copies):
                np.testing.assert_array_equal(got.numpy(), want.numpy(), err_msg=name)
            self.compared.append(name)
        return None


def test_lib_comparator(mlp):
    cmp = KernelComparator()
    mlp.set_instrument(cmp)
    mlp["main"](rx.tensor(np.random.randn(3, 784).astype("float32")))
    assert cmp.compared == ["shape_func", "matmul", "add", "relu", "matmul1"] and not cmp.pending
