"""Pooled allocation (TVM's default `memory_cfg`): each allocation site hands out the storage
and tensor header it made at the last call again, once nothing else holds them. The hazard is a
block or header handed out while something still uses it: a result the caller kept (or only a
numpy view of it), a tensor a callback stashed, a value another thread holds. Each attack keeps
such a value, runs the model many more times, and checks the kept values never changed. Each
runs in a child process with a memory cap and a timeout (see attack.py)."""

import pytest
from attack import run_attack

#: `f(x)`: storage and a tensor view of it from their sites, filled from `x` by the Python
#: callback `adv.fill` (which may stash what it is given), returned.
MODEL = """
import threading
import numpy as np
import relaxvm as rx

STASH = []
def fill(x, out):
    out.copyfrom(x)
    if KEEP_IN_CALLBACK:
        STASH.append(out)
rx.register_func("adv.fill", fill, override=True)

def model(memory_cfg=None):
    ib = rx.ExecBuilder()
    with ib.function("f", num_inputs=1):
        ib.emit_call("vm.builtin.alloc_storage",
                     args=[ib.vm_state(), ib.convert_constant(rx.Shape([16])), 0, rx.DataType("uint8")],
                     dst=ib.r(1))
        ib.emit_call("vm.builtin.alloc_tensor",
                     args=[ib.r(1), 0, ib.convert_constant(rx.Shape([4])), rx.DataType("float32")],
                     dst=ib.r(2))
        ib.emit_call("adv.fill", args=[ib.r(0), ib.r(2)], dst=None)
        ib.emit_ret(ib.r(2))
    return rx.VirtualMachine(ib.get(), memory_cfg=memory_cfg)

def x(v):
    return np.full(4, v, "float32")
"""


def attack(body: str, keep_in_callback: bool = False):
    return run_attack(f"KEEP_IN_CALLBACK = {keep_in_callback}\n" + MODEL + body, timeout=60)


def test_kept_results_and_numpy_views_of_them_never_change():
    attack(
        """
vm = model()
f = vm["f"]
kept = [f(x(k)) for k in range(50)]
views = [np.asarray(f(x(100 + k))) for k in range(50)]  # the tensor objects themselves are gone
for k in range(1000):
    assert f(x(-k)).numpy().tolist() == [-k] * 4
assert all(t.numpy().tolist() == [k] * 4 for k, t in enumerate(kept))
assert all(v.tolist() == [100 + k] * 4 for k, v in enumerate(views))
print(vm.memory_allocator)
"""
    ).assert_ok("pooled")


def test_tensors_a_callback_stashed_never_change():
    attack(
        """
f = model()["f"]
for k in range(500):
    f(x(k))
assert len({id(t) for t in STASH}) == 500
assert all(t.numpy().tolist() == [k] * 4 for k, t in enumerate(STASH))
print("ok")
""",
        keep_in_callback=True,
    ).assert_ok("ok")


def test_results_other_threads_hold_never_change():
    attack(
        """
f = model()["f"]
held, errors = [], []
def worker(base):
    try:
        mine = [(base + k, f(x(base + k))) for k in range(200)]
        held.extend(mine)
    except BaseException as e:
        errors.append(e)
threads = [threading.Thread(target=worker, args=(1000 * i,)) for i in range(4)]
for t in threads: t.start()
for t in threads: t.join()
assert not errors, errors
assert len(held) == 800 and all(t.numpy().tolist() == [v] * 4 for v, t in held)
print("ok")
"""
    ).assert_ok("ok")


@pytest.mark.parametrize("cfg", ["naive", "pooled", None])
def test_memory_cfg_chooses_the_allocator(cfg):
    attack(
        f"""
vm = model({cfg!r})
f = vm["f"]
print(vm.memory_allocator, [float(f(x(k)).numpy()[0]) for k in range(3)])
"""
    ).assert_ok(f"{cfg or 'pooled'} [0.0, 1.0, 2.0]")


@pytest.mark.parametrize(
    ("cfg", "chosen"),
    [
        ("{rx.cpu(0): rx.VirtualMachine.NAIVE_ALLOCATOR}", "naive"),
        ("{rx.cpu(0): rx.VirtualMachine.POOLED_ALLOCATOR}", "pooled"),
        # Another device's entry does not apply to the VM's device, which is then pooled.
        ("{rx.cpu(1): rx.VirtualMachine.NAIVE_ALLOCATOR}", "pooled"),
    ],
)
def test_a_memory_cfg_dict_chooses_the_allocator_of_the_vms_device(cfg, chosen):
    attack(f"print(model({cfg}).memory_allocator)").assert_ok(chosen)


def test_a_pooled_site_reuses_a_result_once_it_is_dropped():
    # The mechanism works (no test that cannot fail): with the result dropped, the next call
    # gets the same memory back; with it kept, other memory.
    attack(
        """
f = model()["f"]
a = f(x(1))
addr = a.__array_interface__["data"][0]
del a
b = f(x(2))
same = b.__array_interface__["data"][0] == addr
c = f(x(3))
print(same, c.__array_interface__["data"][0] != b.__array_interface__["data"][0])
"""
    ).assert_ok("True True")


def test_a_memory_cfg_dict_changed_while_read_is_read_from_a_snapshot():
    # Attack finding perf/01: reading a kind (`__index__`) or a device can run Python code that
    # changes the dict; a live iteration of it panicked. The items are read from a snapshot.
    attack(
        """
cfg = {}
class Evil:
    def __index__(self):
        cfg["cpu:1"] = "pooled"  # grows the dict being read
        return 1
    def __repr__(self):
        cfg.clear()
        return "Evil()"
cfg[rx.cpu(0)] = Evil()
cfg["cpu:2"] = "naive"
print(model(cfg).memory_allocator)
cfg = {rx.cpu(0): Evil(), "cpu:3": 7}
try:
    model(cfg)
except ValueError as e:
    print("ValueError", "must be VirtualMachine.NAIVE_ALLOCATOR" in str(e))
"""
    ).assert_ok("naive\nValueError True")
