"""Attack round 6 (this stop's speed work: the workspace pool, 16-byte decoded ops, the Python
call path's per-thread stack limit and inlined VM lock, allocation-site view hints and wider
on-stack kernel argument lists, compiled mode's reused storage as left, the KV cache's in-place
decode refill; second wave: Closure vectorcall for global functions, in-place register
truncation). One test per finding of the round (perfpy/01, fixed: the Closure entry counts a
level of Python recursion and checks the native stack as a VM entry does); what held is listed
in the stop's closing note. The other tests keep two new mechanisms whose failure would be
silent or a crash, and that no other test drives the way an attacker does:

- the process-wide workspace cache (mapped blocks) and the per-thread small-block cache, shared
  by kernels of two models running on several Python threads and pool workers at once: every
  result stays bit-identical to a single-threaded run;
- the native-stack limit a VM learns once per thread for the direct Python call path: calls
  nested through callbacks into thousands of VMs, each of which learned the thread's limit at
  the top of the stack first, still end with the VM's stack error, never a crash.

Every attack runs in a child process with a memory cap and a timeout (attack.py).
"""

from __future__ import annotations

import os
import sys

import pytest
from attack import run_attack

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tvm_corpus"))
import corpus  # noqa: E402
import located  # noqa: E402

SUITE = located.suite_dir("hand")
NAMES = {m["name"] for m in corpus.load_manifest(SUITE)["models"]} if SUITE else set()
CORPUS_DIR = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "tvm_corpus"))


@pytest.mark.skipif(
    not {"conv_pool", "transformer_block"} <= NAMES, reason=f"the corpus lacks the models: {located.SKIP_REASON}"
)
@pytest.mark.parametrize("threads", ["1", "2"])
def test_pool_workspaces_shared_by_threads_keep_every_result_bit_identical(threads: str) -> None:
    # conv_pool and transformer_block take workspaces of several sizes, mapped (128 KiB and more,
    # the process's cache) and small (the thread's cache); three Python threads run both models
    # interleaved, each with its own VMs, while the pool's workers run kernels too.
    run_attack(
        f"""
import sys, threading, numpy as np, relaxvm as rx
sys.path.insert(0, {CORPUS_DIR!r})
import corpus
SUITE = {SUITE!r}
models = {{}}
for m in corpus.load_manifest(SUITE)["models"]:
    if m["name"] in ("conv_pool", "transformer_block"):
        case = m["cases"][0]
        args, _ = corpus.load_case(SUITE, case)
        lib = rx.load_module(SUITE + "/" + m["library"])
        models[m["name"]] = (lib, case["function"], [rx.tensor(a) for a in args])
expected = {{}}
for name, (lib, fn, args) in models.items():
    expected[name] = rx.VirtualMachine(lib)[fn](*args).numpy()
bad = []
def worker(k):
    vms = {{name: rx.VirtualMachine(lib) for name, (lib, _, _) in models.items()}}
    order = sorted(models) if k % 2 else sorted(models, reverse=True)
    for i in range(6):
        for name in order:
            _, fn, args = models[name]
            got = vms[name][fn](*args).numpy()
            if not np.array_equal(got, expected[name]):
                bad.append((k, i, name))
ts = [threading.Thread(target=worker, args=(k,)) for k in range(3)]
for t in ts:
    t.start()
for t in ts:
    t.join()
print(bad)
""",
        env={"RELAXVM_NUM_THREADS": threads},
        timeout=120,
    ).assert_ok("[]")


def test_perfpy_a_learned_stack_limit_still_stops_nesting_through_callbacks() -> None:
    # 20,000 VMs of one function that calls back into Python, which calls the next VM: each VM
    # is first called once at the top of a 1 MiB thread (so it keeps that thread's stack limit),
    # then the chain nests until the stack runs short. The direct call path's check, with the
    # kept limit, must stop it with the VM's error before the stack overflows.
    run_attack(
        """
import sys, threading, relaxvm as rx
sys.setrecursionlimit(10**6)
N = 20000
@rx.register_func("adv.round6.down", override=True)
def down(i):
    return i if i + 1 >= N else vms[i + 1](i + 1)
ib = rx.ExecBuilder()
with ib.function("f", num_inputs=1):
    ib.emit_call("adv.round6.down", args=[ib.r(0)], dst=ib.r(1))
    ib.emit_ret(ib.r(1))
ex = ib.get()
vms = [rx.VirtualMachine(ex)["f"] for _ in range(N)]
out = []
def run():
    for v in vms:
        v(N - 1)
    try:
        out.append(vms[0](0))
    except rx.VMError as e:
        out.append("too deep" if "native stack" in str(e) else str(e))
threading.stack_size(1 << 20)
t = threading.Thread(target=run)
t.start()
t.join()
print(out)
""",
        timeout=120,
    ).assert_ok("['too deep']")


@pytest.mark.parametrize("stack_mib", [1, 2])
def test_perfpy_01_recursion_through_global_functions_is_an_error_not_a_crash(stack_mib: int) -> None:
    """perfpy/01: a registered function calling itself through `rx.get_global_func` 2,000 deep
    (default recursion limit) on a thread of 1 or 2 MiB died by SIGSEGV: the Closure vectorcall
    entry counts no recursion level (tp_call did) and no call path outside the VM checks the
    native stack. CPython's own C recursion raises RecursionError on the same threads."""
    run_attack(
        f"""
import threading, relaxvm as rx
f = rx.get_global_func
@rx.register_func("adv.round6.deep", override=True)
def d(n):
    return 0 if n == 0 else f("adv.round6.deep")(n - 1) + 1
out = []
def run():
    try:
        out.append(f("adv.round6.deep")(2000))
    except RecursionError:
        out.append("too deep")
    except rx.VMError as e:
        out.append("too deep" if "native stack" in str(e) else str(e))
threading.stack_size({stack_mib} << 20)
t = threading.Thread(target=run)
t.start()
t.join()
print(out)
""",
        timeout=60,
    ).assert_ok("['too deep']")
