"""Attack round 7 (this stop's speed work: the lock-free shape heap of word storage, the
kernel guard on the compiler's setjmp, compiled mode's borrowed arguments, the Python call
path's small ints and inline tensor results, the workspace caches' keeping policy, the KV
cache's one layout). The round wrote no finding (what was tried and held is listed in
/work/attack-findings/round7-held.md); these tests keep the new mechanisms whose failure would
be silent or a crash, driven the way an attacker drives them:

- a word heap shared by threads and VMs, written by match_shape's lock-free stores while
  Python reads and rewrites it: every value read is one some thread wrote, never a torn or
  stale-forever one, and no call fails;
- a site that hands its heap out again (zeroed, without the storage's lock) must never zero a
  heap a caller kept (as a tensor, a numpy view, DLPack, a memoryview, or in a registered
  function's list);
- small-int results handed out as CPython's own objects keep CPython's reference counts
  (a missing or extra reference would free or leak an interned int) and their identity.

Every attack runs in a child process with a memory cap and a timeout (attack.py).
"""

from __future__ import annotations

from attack import run_attack

_HEAP_PROGRAM = """
import numpy as np, relaxvm as rx
ib = rx.ExecBuilder()
with ib.function("alloc", num_inputs=0):
    ib.emit_call("vm.builtin.alloc_shape_heap", args=[ib.imm(4)], dst=ib.r(0))
    ib.emit_ret(ib.r(0))
with ib.function("store", num_inputs=2):
    # heap[0], heap[1] = s; then the shape (heap[0], heap[1], 9)
    ib.emit_call("vm.builtin.match_shape", args=[ib.r(0), ib.r(1), ib.imm(2), ib.imm(1), ib.imm(0),
                 ib.imm(1), ib.imm(1), ib.convert_constant("st")], dst=ib.r(2))
    ib.emit_call("vm.builtin.make_shape", args=[ib.r(1), ib.imm(3), ib.imm(1), ib.imm(0), ib.imm(1),
                 ib.imm(1), ib.imm(0), ib.imm(9)], dst=ib.r(3))
    ib.emit_ret(ib.r(3))
ex = ib.get()
"""


def test_a_word_heap_shared_by_threads_shows_only_values_written_to_it() -> None:
    # Four threads on two VMs store pairs (a, f(a)) into one heap through match_shape (the
    # specialised site's lock-free stores) and read them back through make_shape; a fifth
    # thread reads the heap through numpy and rewrites it with copyfrom (the storage's doors,
    # which copy word storage). A slot only ever holds one of the values written to it.
    run_attack(
        _HEAP_PROGRAM
        + """
import threading
vms = [rx.VirtualMachine(ex), rx.VirtualMachine(ex)]
heap = vms[0]["alloc"]()
vals = [(a, a * 1000003 + 17) for a in range(1, 50)]
ok0 = {0} | {a for a, _ in vals}
ok1 = {0, -1} | {b for _, b in vals}
bad = []
def worker(k):
    f = vms[k % 2]["store"]
    for i in range(400):
        a, b = vals[(i * 7 + k) % len(vals)]
        out = f(rx.Shape([a, b]), heap)
        if out[0] not in ok0 or out[1] not in ok1 or out[2] != 9:
            bad.append(("make", tuple(out)))
def reader():
    for i in range(400):
        a = heap.numpy().copy()
        if a[0] not in ok0 or a[1] not in ok1:
            bad.append(("read", a.tolist()))
        if i % 50 == 0:
            heap.copyfrom(np.array([1, -1, 0, 0], dtype="int64"))
ts = [threading.Thread(target=worker, args=(k,)) for k in range(4)] + [threading.Thread(target=reader)]
for t in ts:
    t.start()
for t in ts:
    t.join()
print(bad[:3])
""",
        timeout=120,
    ).assert_ok("[]")


def test_a_site_never_zeroes_a_heap_its_caller_kept() -> None:
    # The allocating site hands its last heap out again, zeroed by atomic stores, when nothing
    # else holds it: each kept form below holds it, so every kept heap keeps its values.
    run_attack(
        """
import gc, numpy as np, relaxvm as rx
kept = []
@rx.register_func("adv.round7.keep", override=True)
def keep(h):
    kept.append(h)
    return 0
ib = rx.ExecBuilder()
with ib.function("f", num_inputs=2):
    ib.emit_call("vm.builtin.alloc_shape_heap", args=[ib.imm(3)], dst=ib.r(2))
    pairs = [ib.imm(1), ib.imm(0), ib.imm(1), ib.imm(2)]
    ib.emit_call("vm.builtin.match_shape", args=[ib.r(0), ib.r(2), ib.imm(2)] + pairs, dst=ib.r(3))
    ib.emit_if(ib.r(1), 3)
    ib.emit_call("adv.round7.keep", args=[ib.r(2)], dst=ib.r(4))
    ib.emit_goto(2)
    ib.emit_call("vm.builtin.null_value", args=[], dst=ib.r(4))
    ib.emit_call("vm.builtin.make_tuple", args=[ib.r(2)], dst=ib.r(5))
    ib.emit_ret(ib.r(5))
f = rx.VirtualMachine(ib.get())["f"]
views = []
for i in range(100):
    out = f(rx.Shape([i, i + 1]), i % 3 == 0)
    h = out[0]
    forms = [lambda: h, h.numpy, lambda: np.from_dlpack(h), lambda: memoryview(h.numpy()), lambda: None]
    v = forms[i % 5]()
    if v is not None:
        views.append((i, v))
    del out, h, v
    gc.collect()
bad = []
for i, v in views:
    a = np.asarray(v.numpy() if isinstance(v, rx.Tensor) else v)
    if a.tolist() != [i, 0, i + 1]:
        bad.append((i, a.tolist()))
for j, h in enumerate(kept):
    if h.numpy().tolist() != [3 * j, 0, 3 * j + 1]:
        bad.append(("kept", j, h.numpy().tolist()))
print(bad[:3], len(kept))
""",
    ).assert_ok("[] 34")


def test_small_int_results_keep_cpython_reference_counts_and_identity() -> None:
    # Results in -5..256 are CPython's shared objects with one more reference; 50 results of
    # each, dropped, leave every count as it was (one reference short would free an interned
    # int: a crash later). The edges of the range and past it are plain ints of the right value.
    run_attack(
        """
import gc, sys, threading, relaxvm as rx
ib = rx.ExecBuilder()
with ib.function("inc", num_inputs=1):
    ib.emit_call("vm.builtin.int.add", args=[ib.r(0), ib.imm(1)], dst=ib.r(1))
    ib.emit_ret(ib.r(1))
ex = ib.get()
f = rx.VirtualMachine(ex)["inc"]
before = {i: sys.getrefcount(i) for i in range(-6, 258)}
def many():
    own = rx.VirtualMachine(ex)["inc"]
    for _ in range(20):
        keep = [own(i - 1) for i in range(-5, 258)]
        assert keep == list(range(-5, 258))
        del keep
ts = [threading.Thread(target=many) for _ in range(3)]
for t in ts:
    t.start()
keep = [f(i - 1) for i in range(-5, 258) for _ in range(50)]
for t in ts:
    t.join()
del keep
gc.collect()
drift = {i: sys.getrefcount(i) - before[i] for i in before if abs(sys.getrefcount(i) - before[i]) > 5}
print(drift, [f(v) for v in [-7, -6, 255, 256, 2**30 - 1, -(2**30) - 1, 2**62]], f(-6) is -5, f(255) is 256)
""",
    ).assert_ok("{} [-6, -5, 256, 257, 1073741824, -1073741824, 4611686018427387905] True True")
