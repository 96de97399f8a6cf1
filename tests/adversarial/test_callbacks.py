"""Kernels calling Python back, and long products, attacked:

- a Python override of ``tvm.contrib.sort.sort`` (called from inside a compiled kernel) keeps the
  tensors it is given and reads them after the kernel has freed its memory: it reads owned
  copies (the values as they were when it returned), never freed memory, whichever way it wrote
  its output;
- a callback from a ``T.parallel`` kernel, on a pool worker, re-entering the VM its launcher
  holds gets the re-entry error on any number of threads (no deadlock), another VM works from
  there, and ``vm.interrupt()`` / Ctrl-C end a wait for a busy VM; Ctrl-C ends a launch whose
  worker's callback waits (through another thread) for the VM the launcher holds;
- ``KeyboardInterrupt`` and ``SystemExit`` raised in a kernel's callback, on the launcher or a
  pool worker, reach the caller as themselves;
- one ``1 x 2^36 @ 2^36 x 1`` product on stride-0 views (a single output element) stops at
  Ctrl-C and ``vm.interrupt()``.

Every interrupt is sent after the child has signalled that the long operation started (an
event set by a callback), never after a sleep.
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
CORPUS_DIR = os.path.join(os.path.dirname(__file__), "..", "tvm_corpus")


def needs(model: str):
    return pytest.mark.skipif(model not in NAMES, reason=f"the corpus has no {model!r} model: {located.SKIP_REASON}")


def model_prelude(model: str) -> str:
    return f"""
import sys, threading, numpy as np, relaxvm as rx
sys.path.insert(0, {os.path.abspath(CORPUS_DIR)!r})
import corpus
SUITE = {SUITE!r}
MODEL = next(m for m in corpus.load_manifest(SUITE)["models"] if m["name"] == {model!r})
EX = rx.load_module(SUITE + "/" + MODEL["library"])
"""


# Class 6: tensors a kernel lends a callback --------------------------------------------------

WRITES = {
    "copyfrom": "out.copyfrom(v)",
    "setitem": "out[:] = v",
    "numpy-view": "out.numpy()[...] = v",
    "buffer-protocol": "np.copyto(np.asarray(memoryview(out)).view(np.float32).reshape(out.shape), v)",
    "dlpack": "np.copyto(np.from_dlpack(out), v)",
}


@needs("sort_topk")
@pytest.mark.parametrize("how", sorted(WRITES))
def test_a_sort_override_keeping_its_tensors_reads_owned_copies(how: str) -> None:
    # The override keeps everything it can reach: the tensors, numpy views, a memoryview, a
    # DLPack capsule. After the kernel returned (and freed its memory, and another run reused
    # it), each still holds the values of its own call; and the model's result is TVM's.
    run_attack(
        model_prelude("sort_topk")
        + f"""
args, want = corpus.load_case(SUITE, MODEL["cases"][0])
kept = []
@rx.register_func("tvm.contrib.sort.sort", override=True)
def sort(x, out, axis, ascend):
    v = np.sort(x.numpy(), axis=axis, kind="stable")
    if not ascend:
        v = np.flip(v, axis=axis)
    {WRITES[how]}
    kept.append((x, out, x.numpy(), out.numpy(), memoryview(out), out.__dlpack__()))
vm = rx.VirtualMachine(EX)
first = vm["main"](rx.tensor(args[0]))
assert first[0].numpy().tobytes() == want[0].tobytes(), "the override's output did not reach the model"
for _ in range(3):
    vm["main"](rx.tensor(np.random.default_rng(1).standard_normal(args[0].shape).astype("float32")))
x, out, xv, outv, mv, cap = kept[0]
sorted0 = np.sort(args[0], axis=1, kind="stable")
assert np.array_equal(x.numpy(), args[0]) and np.array_equal(xv, args[0])
assert np.array_equal(out.numpy(), sorted0) and np.array_equal(outv, sorted0)
assert np.array_equal(np.frombuffer(mv, "float32").reshape(4, 6), sorted0)
assert np.array_equal(rx.from_dlpack(cap).numpy(), sorted0)
# Writing what was kept changes the copy, not the model's memory.
out[:] = 0
assert vm["main"](rx.tensor(args[0]))[0].numpy().tobytes() == want[0].tobytes()
print(len(kept))
"""
    ).assert_ok("5")


@needs("sort_topk")
def test_the_builtin_sort_still_matches_tvm_bit_for_bit() -> None:
    run_attack(
        model_prelude("sort_topk")
        + """
args, want = corpus.load_case(SUITE, MODEL["cases"][0])
got = rx.VirtualMachine(EX)["main"](rx.tensor(args[0]))
def flat(v):
    return [v] if isinstance(v, np.ndarray) else [x for w in v for x in flat(w)]
def leaves(v):
    return [v.numpy()] if isinstance(v, rx.Tensor) else [x for w in v for x in leaves(w)]
assert [a.tobytes() for a in leaves(got)] == [a.tobytes() for a in flat(want)]
"""
    ).assert_ok()


# Class 9: callbacks on pool workers -----------------------------------------------------------

PARALLEL = """
threads, errors = set(), []
main = threading.get_ident()
vm = rx.VirtualMachine(EX)
x = rx.tensor(np.arange(64, dtype="float32"))
"""


@needs("parallel_callback")
@pytest.mark.parametrize("threads", [1, 2, 4])
def test_re_entering_the_vm_from_a_pool_worker_is_the_re_entry_error(threads: int) -> None:
    # Every call re-enters; with more than one thread some run on workers, whose launcher (the
    # main thread) holds the VM and waits for them: without the lineage this deadlocked.
    run_attack(
        model_prelude("parallel_callback")
        + PARALLEL
        + """
@rx.register_func("relaxvm.test.parallel_callback", override=True)
def cb(v):
    threads.add(threading.get_ident())
    try:
        vm["main"](x)
    except RuntimeError as e:
        errors.append(str(e))
        raise
    return 0
try:
    vm["main"](x)
except rx.VMError as e:
    assert "already running" in str(e), e
assert errors and all("already running on this thread" in e for e in errors), errors
print(len(threads) > 1 if THREADS > 1 else threads == {main})
""".replace("THREADS", str(threads)),
        env={"RELAXVM_NUM_THREADS": str(threads)},
    ).assert_ok("True")


@needs("parallel_callback")
def test_a_callback_on_a_pool_worker_calls_another_vm() -> None:
    run_attack(
        model_prelude("parallel_callback")
        + PARALLEL
        + """
ib = rx.ExecBuilder()
with ib.function("double", num_inputs=1):
    ib.emit_call("vm.builtin.int.add", args=[ib.r(0), ib.r(0)], dst=ib.r(1))
    ib.emit_ret(ib.r(1))
other = rx.VirtualMachine(ib.get())
@rx.register_func("relaxvm.test.parallel_callback", override=True)
def cb(v):
    threads.add(threading.get_ident())
    return other["double"](int(v))
got = vm["main"](x).numpy()
assert np.array_equal(got, 2 * np.arange(64, dtype="float32")), got
print(len(threads) > 1)
""",
        env={"RELAXVM_NUM_THREADS": "2"},
    ).assert_ok("True")


@needs("parallel_callback")
@pytest.mark.parametrize("threads", [1, 2])
def test_keyboard_interrupt_and_system_exit_from_a_kernel_s_callback_pass_through(threads: int) -> None:
    # As from callbacks the VM calls directly: the kernel is told an error happened, and the
    # original exception is raised when it returns, from the launcher's task or a worker's.
    run_attack(
        model_prelude("parallel_callback")
        + PARALLEL
        + """
raised = [KeyboardInterrupt(), SystemExit(3), ValueError("ordinary")]
@rx.register_func("relaxvm.test.parallel_callback", override=True)
def cb(v):
    raise raised[0]
for exc in list(raised):
    raised[0] = exc
    try:
        vm["main"](x)
    except BaseException as e:
        print(type(e).__name__, e.args == exc.args if type(e) is type(exc) else str(e).split(":")[0])
@rx.register_func("relaxvm.test.parallel_callback", override=True)
def ok(v):
    return 0
print(vm["main"](x).numpy().sum())
""",
        env={"RELAXVM_NUM_THREADS": str(threads)},
    ).assert_ok('KeyboardInterrupt True\nSystemExit True\nVMError kernel "each" raised RuntimeError\n0.0')


@needs("parallel_callback")
def test_ctrl_c_ends_a_launch_whose_worker_waits_for_the_vm_the_launcher_holds() -> None:
    # The main thread holds the VM and waits for the launch; a worker's callback joins a thread
    # that waits for the VM. Ctrl-C, polled by the launch's wait, ends that thread's wait, the
    # launch once its worker is done, and the call with KeyboardInterrupt; the VM works after.
    run_attack(
        model_prelude("parallel_callback")
        + PARALLEL
        + """
import os, signal
first, done = threading.Event(), threading.Event()
armed = True
def on_sigint(signum, frame):
    if armed:
        raise KeyboardInterrupt
signal.signal(signal.SIGINT, on_sigint)
@rx.register_func("relaxvm.test.parallel_callback", override=True)
def cb(v):
    if threading.get_ident() == main or first.is_set():
        return 0
    first.set()
    def other():
        try:
            vm["main"](x)
        except rx.VMError as e:
            errors.append(str(e))
    t = threading.Thread(target=other)
    t.start()
    t.join()
    return 1
def press():
    first.wait()
    # Pressed until the call ends: a press may land in the launcher's own callback first.
    while not done.wait(0.01):
        os.kill(os.getpid(), signal.SIGINT)
threading.Thread(target=press, daemon=True).start()
try:
    vm["main"](x)
    print("returned")
except KeyboardInterrupt:
    print("KeyboardInterrupt")
finally:
    armed = False
    done.set()
print([e.split(":")[0] for e in errors])
@rx.register_func("relaxvm.test.parallel_callback", override=True)
def ok(v):
    return 0
print(vm["main"](x).numpy().sum())
""",
        env={"RELAXVM_NUM_THREADS": "2"},
    ).assert_ok("KeyboardInterrupt\n['interrupted while waiting for this VirtualMachine']\n0.0")


# A VM `busy` that another thread holds inside a Python callback until released.
BUSY = """
holding, release, waiting, done = (threading.Event() for _ in range(4))
def hold():
    holding.set()
    release.wait()
rx.register_func("test.hold", hold, override=True)
ib = rx.ExecBuilder()
with ib.function("hold", num_inputs=0):
    ib.emit_call("test.hold", args=[], dst=ib.r(0))
    ib.emit_ret(ib.r(0))
with ib.function("id", num_inputs=1):
    ib.emit_ret(ib.r(0))
busy = rx.VirtualMachine(ib.get())
def holder():
    try:
        busy["hold"]()
    except rx.VMError:
        pass  # interrupted after its release: the presses below reach it too
holder_thread = threading.Thread(target=holder, daemon=True)
holder_thread.start()
holding.wait()
"""


@needs("parallel_callback")
def test_interrupt_ends_a_pool_worker_s_wait_for_a_busy_vm() -> None:
    run_attack(
        model_prelude("parallel_callback")
        + PARALLEL
        + BUSY
        + """
@rx.register_func("relaxvm.test.parallel_callback", override=True)
def cb(v):
    waiting.set()
    return busy["id"](1)
def press():
    waiting.wait()
    while not done.wait(0.01):
        busy.interrupt()
threading.Thread(target=press, daemon=True).start()
try:
    vm["main"](x)
except rx.VMError as e:
    print("interrupted while waiting" in str(e))
finally:
    done.set()
    release.set()
    holder_thread.join()  # not left inside a callback while the interpreter exits
""",
        env={"RELAXVM_NUM_THREADS": "2"},
    ).assert_ok("True")


def test_ctrl_c_and_interrupt_end_a_wait_for_a_busy_vm() -> None:
    run_attack(
        "import os, signal, threading, relaxvm as rx\n"
        + BUSY
        + """
def press_interrupt():
    while not done.wait(0.01):
        busy.interrupt()
presser = threading.Thread(target=press_interrupt, daemon=True)
presser.start()
try:
    busy["id"](1)
except rx.VMError as e:
    print("interrupted while waiting" in str(e))
done.set()
presser.join()
try:
    # The wait never ends by itself (the VM stays busy until `release`), so the signal ends it
    # wherever it lands: in the wait, or before it.
    threading.Thread(target=lambda: os.kill(os.getpid(), signal.SIGINT)).start()
    busy["id"](1)
except KeyboardInterrupt:
    print("KeyboardInterrupt")
release.set()
holder_thread.join()
"""
    ).assert_ok("True\nKeyboardInterrupt")


# Class 10: one long product, one output element ----------------------------------------------

THIN = """
import os, signal, threading, numpy as np, relaxvm as rx
ib = rx.ExecBuilder()
with ib.function("mm", num_inputs=2):
    ib.emit_call("test.started", args=[], dst=ib.r(2))
    ib.emit_call("vm.op.matmul", args=[ib.r(0), ib.r(1)], dst=ib.r(3))
    ib.emit_ret(ib.r(3))
started, done = threading.Event(), threading.Event()
rx.register_func("test.started", lambda: started.set(), override=True)
vm = rx.VirtualMachine(ib.get())
k = 2**36
one = np.ones(1, "float32")
# numpy's broadcast_to, writeable (a read-only one would be copied: 256 GiB).
a = np.lib.stride_tricks.as_strided(one, (1, k), (0, 0))
b = np.lib.stride_tricks.as_strided(one, (k, 1), (0, 0))
"""


def test_interrupt_stops_a_thin_product_of_2_to_the_36_multiply_adds() -> None:
    run_attack(
        THIN
        + """
def press():
    started.wait()
    while not done.wait(0.01):
        vm.interrupt()
threading.Thread(target=press, daemon=True).start()
try:
    vm["mm"](a, b)
finally:
    done.set()
"""
    ).assert_raises("VMError", "interrupted.*vm.op.matmul")


def test_ctrl_c_stops_a_thin_product_of_2_to_the_36_multiply_adds() -> None:
    run_attack(
        THIN
        + """
def press():
    started.wait()
    os.kill(os.getpid(), signal.SIGINT)
threading.Thread(target=press, daemon=True).start()
try:
    vm["mm"](a, b)
except KeyboardInterrupt:
    print("interrupted")
print(vm["mm"](np.ones((1, 3), "float32"), np.ones((3, 1), "float32")).numpy().tolist())
"""
    ).assert_ok("interrupted\n[[3.0]]")
