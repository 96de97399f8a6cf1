"""The closed findings of stop 41's attack round, each in a child process with a memory cap and
a timeout (attack.py): a KV cache result that a later step changed (kvcache/01, second round),
a type printing as another type (layers/01), compiled mode's storages not pooled (perf/01), and
a `memory_cfg` naming one device twice or a negative device (other/01)."""

from __future__ import annotations

import os
import sys

import pytest
from attack import run_attack

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "tvm_corpus"))
import located  # noqa: E402

KV_SUITE = located.suite_dir("paged_kv")
KV_ENV = dict(os.environ, RELAXVM_TVM_CORPUS=os.path.dirname(KV_SUITE or ""))
KV_PRELUDE = f"""
import sys, numpy as np
sys.path[:0] = [{os.path.join(ROOT, "tests")!r}, {os.path.join(ROOT, "tests", "tvm_corpus")!r}]
import test_tvm_paged_kv_cache as T
import relaxvm as rx
f = rx.get_global_func
"""


@pytest.mark.skipif(KV_SUITE is None, reason=located.SKIP_REASON)
def test_kvcache_01_query_positions_never_change_after_a_later_step() -> None:
    out = run_attack(
        KV_PRELUDE
        + """
cache = T.new_cache(T.CONFIGS[0])
f("vm.builtin.kv_state_add_sequence")(cache, 0)
def step(n):
    f("vm.builtin.kv_state_begin_forward")(cache, rx.Shape([0]), rx.Shape([n]), None)
    p = f("vm.builtin.attention_kv_cache_get_query_positions")(cache)
    f("vm.builtin.kv_state_end_forward")(cache)
    return p
kept = []
for k in range(4):
    p = step(1)
    kept.append((p, np.asarray(p), p.numpy().copy()))
print(all(p.numpy().tolist() == c.tolist() and v.tolist() == c.tolist() for p, v, c in kept))
""",
        env=KV_ENV,
    )
    out.assert_ok("True")


def test_layers_01_a_type_never_prints_as_another_type() -> None:
    out = run_attack(
        """
from relaxvm import types as T
refused = []
def case(label, make):
    try:
        text = make()
    except ValueError:
        refused.append(label)
    else:
        print(label, "printed", text)
def mutated(shape):
    t = T.Tensor(("n",), "float32")
    t.shape = shape
    return str(T.Signature([("x", t)], T.int64))
case("injected symbol", lambda: mutated(("n], f32>, y: tensor<[m",)))
case("empty symbol", lambda: mutated(("",)))
case("negative size", lambda: mutated((-1,)))
class Sneaky(T.Type):
    def _spec(self):
        return ("tensor", ("a, b",), "f32", False)
case("spec symbol", lambda: str(Sneaky()))
print(refused)
"""
    )
    out.assert_ok("['injected symbol', 'empty symbol', 'negative size', 'spec symbol']")


VM_SUITE = located.suite_dir("vm_suite")


@pytest.mark.skipif(VM_SUITE is None, reason=located.SKIP_REASON)
def test_perf_01_compiled_mode_pools_storage_as_bytecode_does() -> None:
    # The storage of a dropped result comes back at the next call in both modes (pooled).
    out = run_attack(
        f"""
import numpy as np, relaxvm as rx, os
@rx.register_func("test.vm.tile", override=True)
def _tile(a, b):
    b[:] = np.tile(a.numpy(), (1, 2))
for mode in ("bytecode", "compiled"):
    so = os.path.join({VM_SUITE!r}, "test_vm_build", "test_vm_compile_e2e", mode, "model.so")
    f = rx.VirtualMachine(rx.load_module(so), memory_cfg="pooled")["foo"]
    x = rx.tensor(np.ones((32, 16), "float32"))
    same, dummies = 0, []
    for k in range(20):
        r = f(x)
        a1 = np.asarray(r).ctypes.data
        del r
        dummies.append([np.empty(32 * 32, "float32") for _ in range(4)])
        r = f(x)
        a2 = np.asarray(r).ctypes.data
        del r
        same += a1 == a2
    print(mode, same)
"""
    )
    out.assert_ok("bytecode 20\ncompiled 20")


def test_other_01_a_memory_cfg_naming_one_device_twice_differently_is_an_error() -> None:
    out = run_attack(
        """
import relaxvm as rx
ib = rx.ExecBuilder()
with ib.function("f", num_inputs=1):
    ib.emit_ret(ib.r(0))
ex = ib.get()
refused = []
for label, cfg in [
    ("object then text", {rx.cpu(0): "naive", "cpu:0": "pooled"}),
    ("text then object", {"cpu:0": "pooled", rx.cpu(0): "naive"}),
    ("cpu and cpu:0", {"cpu": "naive", "cpu:0": "pooled"}),
    ("negative id", {"cpu:-1": "naive"}),
]:
    try:
        rx.VirtualMachine(ex, memory_cfg=cfg)
    except ValueError:
        refused.append(label)
print(refused)
"""
    )
    out.assert_ok("['object then text', 'text then object', 'cpu and cpu:0', 'negative id']")
