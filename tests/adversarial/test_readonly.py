"""Read-only memory stays unchanged (docs/memory.md): a DLPack import flagged read-only (a
read-only memory map, an immutable bytes object, a constant's own capsule) refuses every write,
and a TVM kernel given a constant where it writes its result (a program built with
rx.ExecBuilder; after rx.link, another model's weight) fails with a clear error while the
constant keeps its bytes and the process runs the model normally afterwards; one given
read-only foreign memory where it writes fails naming the kernel and argument (it wrote into a
private copy, so the foreign pages stay unwritten)."""

import os

from attack import run_attack

MLP = os.path.join(os.path.dirname(__file__), "..", "..", "tvm", "tests", "data", "mlp.so")

#: Defines `writes(t)`: every way Python and the VM's builtins write into a tensor, each
#: reported as "ok" or the exception's type name, and `readable(t)`.
WRITES = """
import numpy as np, relaxvm as rx
ib = rx.ExecBuilder()
with ib.function("store", num_inputs=2):
    ib.emit_call("vm.builtin.shape_of", args=[ib.r(0)], dst=ib.r(2))
    ib.emit_call("vm.builtin.store_shape", args=[ib.r(2), ib.r(1), ib.imm(0)], dst=ib.void_arg())
    ib.emit_ret(ib.r(1))
store = rx.VirtualMachine(ib.get())["store"]

def attempt(f):
    try:
        f()
        return "ok"
    except Exception as e:
        assert "read-only" in str(e) or "readonly" in str(e), str(e)
        return type(e).__name__

def writes(t):
    out = [
        attempt(lambda: t.__setitem__(0, 1)),
        attempt(lambda: t.copyfrom(np.ones(t.shape, t.dtype))),
        attempt(lambda: memoryview(t).cast("B").__setitem__(0, 1)),
        attempt(lambda: rx.from_dlpack(np.ones(t.shape, t.dtype)).copyto(t)),
        attempt(lambda: t.numpy().__setitem__(0, 1)),
        str(t.numpy().flags.writeable),
    ]
    if t.dtype == "int64":  # a shape heap
        out.append(attempt(lambda: store(np.zeros(3, "float32"), t)))
    return " ".join(out)
"""

REFUSED = "ValueError ValueError TypeError ValueError ValueError False"


def test_a_read_only_memory_map_imports_read_only_and_refuses_every_write(tmp_path):
    path = tmp_path / "heap.bin"
    run_attack(
        WRITES
        + f"""
np.array([4, 5], "int64").tofile({str(path)!r})
mm = np.memmap({str(path)!r}, dtype="int64", mode="r")
# numpy's convention: a read-only array is exported only with DLPack 1.x's read-only flag.
try:
    mm.__dlpack__()
except BufferError:
    print("legacy export refused")
for t in (rx.from_dlpack(mm), rx.from_dlpack(mm.__dlpack__(max_version=(1, 0)))):
    print(writes(t))
    print(t.numpy().tolist())
print(np.fromfile({str(path)!r}, "int64").tolist())
"""
    ).assert_ok(
        "legacy export refused\n" + f"{REFUSED} VMValueError\n[4, 5]\n" + f"{REFUSED} VMValueError\n[4, 5]\n" + "[4, 5]"
    )


def test_an_immutable_bytes_object_is_never_written():
    run_attack(
        WRITES
        + """
b = bytes(range(16))
t = rx.from_dlpack(np.frombuffer(b, dtype="int64"))
print(writes(t))
f = rx.from_dlpack(np.frombuffer(b, dtype="float32"))
print(writes(f))
# Passed on, it stays read-only: DLPack 1.x says so, 0.x gets a copy.
again = rx.from_dlpack(t.__dlpack__(max_version=(1, 0)))
print(writes(again), np.from_dlpack(t).flags.writeable, np.shares_memory(again.numpy(), t.numpy()))
legacy = rx.from_dlpack(t.__dlpack__())
legacy[0] = 99
print(b == bytes(range(16)), np.frombuffer(b, "int64").tolist() == t.numpy().tolist())
"""
    ).assert_ok(f"{REFUSED} VMValueError\n{REFUSED}\n{REFUSED} VMValueError False True\nTrue True")


def test_a_frozen_constants_own_capsule_cannot_rewrite_it():
    run_attack(
        WRITES
        + """
ib = rx.ExecBuilder()
heap = ib.convert_constant(np.array([1, 2], "int64"))
with ib.function("get", num_inputs=0):
    ib.emit_call("vm.builtin.make_tuple", args=[heap], dst=ib.r(0))
    ib.emit_ret(ib.r(0))
exe = ib.get()
get = lambda: rx.VirtualMachine(exe)["get"]()[0]
c = get()
print(writes(c))
# DLPack 1.x: the capsule says read-only, and the import is.
print(writes(rx.from_dlpack(c.__dlpack__(max_version=(1, 0)))))
print(np.from_dlpack(c).flags.writeable)
# DLPack 0.x cannot say so: a copy, whose writes never reach the constant; no copy is refused.
copy = rx.from_dlpack(c.__dlpack__())
copy[0] = 9
try:
    c.__dlpack__(copy=False)
except BufferError:
    print("no-copy legacy export refused")
print(copy.numpy().tolist(), get().numpy().tolist())
"""
    ).assert_ok(f"{REFUSED} VMValueError\n{REFUSED} VMValueError\nFalse\nno-copy legacy export refused\n[9, 2] [1, 2]")


#: Loads the TVM-compiled MLP (kernels `matmul(x, w, out)`, `add(a, b, out)`, `relu(x, out)`)
#: and defines its first weight `w` (8x4, read from the text form) and `x`, `want`.
MLP_SETUP = f"""
import re, threading, numpy as np, relaxvm as rx
mlp = rx.load_module({MLP!r})
text = re.search(r"c\\[4\\] = tensor float32 \\(8, 4\\) \\[([^\\]]*)\\]", mlp.as_text()).group(1)
w = np.array([np.float32(v) for v in text.split(",")], "float32").reshape(8, 4)
x = np.random.default_rng(0).standard_normal((3, 8)).astype("float32")
want = rx.VirtualMachine(mlp)["main"](x).numpy().copy()

def attacker(weight):
    # relu(input, out) with a constant as `out`; `get` returns the constant.
    ib = rx.ExecBuilder()
    c = ib.convert_constant(weight)
    with ib.function("attack", num_inputs=1):
        ib.emit_call("relu", args=[ib.r(0), c], dst=ib.void_arg())
        ib.emit_ret(ib.r(0))
    with ib.function("get", num_inputs=0):
        ib.emit_call("vm.builtin.make_tuple", args=[c], dst=ib.r(0))
        ib.emit_ret(ib.r(0))
    return ib.get()
"""


def test_a_kernel_given_a_constant_as_its_output_is_an_error_and_the_constant_stays():
    run_attack(
        MLP_SETUP
        + """
mine = np.arange(32, dtype="float32").reshape(8, 4) - 16
vm = rx.VirtualMachine(rx.link([mlp, attacker(mine)]))
for _ in range(3):
    try:
        vm["attack"](np.full((8, 4), 5, "float32"))
    except rx.VMError as e:
        print(str(e).split(" at 0x")[0], "|", "the constant is unchanged" in str(e))
print(np.array_equal(vm["get"]()[0].numpy(), mine), np.array_equal(vm["main"](x).numpy(), want))
"""
    ).assert_ok('kernel "relu" wrote to read-only memory | True\n' * 3 + "True True")


def test_a_fault_leaves_every_threads_signal_mask_as_it_was_and_ctrl_c_still_arrives():
    # The guard's jump out of the SIGSEGV handler restores no signal mask: the handler is
    # installed with SA_NODEFER and an empty mask, so the mask stays the one the kernel was
    # called with. A SIGSEGV left blocked would end the process at the next fault; SIGINT left
    # blocked would lose Ctrl-C. Two faults each on the main thread and on a Python thread.
    run_attack(
        MLP_SETUP
        + """
import signal
mine = np.arange(32, dtype="float32").reshape(8, 4) - 16
linked = rx.link([mlp, attacker(mine)])
def faults():
    vm = rx.VirtualMachine(linked)
    before = signal.pthread_sigmask(signal.SIG_BLOCK, [])
    seen = []
    for _ in range(2):
        try:
            vm["attack"](np.full((8, 4), 5, "float32"))
        except rx.VMError as e:
            seen.append("wrote to read-only memory" in str(e))
    after = signal.pthread_sigmask(signal.SIG_BLOCK, [])
    blocked = {signal.SIGSEGV, signal.SIGBUS, signal.SIGINT} & after
    return seen, before == after, sorted(blocked)
print(faults())
out = []
t = threading.Thread(target=lambda: out.append(faults()))
t.start()
t.join()
print(out[0])
try:
    signal.raise_signal(signal.SIGINT)
    for _ in range(1000):
        pass
    print("no interrupt")
except KeyboardInterrupt:
    print("interrupted")
print(np.array_equal(rx.VirtualMachine(linked)["main"](x).numpy(), want))
"""
    ).assert_ok("([True, True], True, [])\n([True, True], True, [])\ninterrupted\nTrue")


def test_after_linking_a_kernel_cannot_write_another_models_weight():
    # The attacker's constant equals the MLP's weight, so linking stores them once: its `relu`
    # writes the MLP's weight. From several threads while others run the model.
    run_attack(
        MLP_SETUP
        + """
linked = rx.link([mlp, attacker(w.copy())])
assert linked.as_text().count(".const") == mlp.as_text().count(".const"), "the weight was not shared"
errors, results = [], []
def attack():
    vm = rx.VirtualMachine(linked)
    for _ in range(200):
        try:
            vm["attack"](np.full((8, 4), 5, "float32"))
        except rx.VMError as e:
            errors.append("wrote to read-only memory" in str(e))
def run():
    vm = rx.VirtualMachine(linked)
    for _ in range(200):
        results.append(np.array_equal(vm["main"](x).numpy(), want))
threads = [threading.Thread(target=f) for f in (attack, attack, run)]
[t.start() for t in threads]
[t.join() for t in threads]
print(len(errors), all(errors), len(results), all(results))
print(np.array_equal(rx.VirtualMachine(linked)["get"]()[0].numpy(), w))
print(np.array_equal(rx.VirtualMachine(mlp)["main"](x).numpy(), want))
"""
    ).assert_ok("400 True 200 True\nTrue\nTrue")


def test_a_kernel_writing_into_read_only_foreign_memory_is_an_error_naming_it():
    # The kernel gets a private copy (the foreign pages are never written); what it writes
    # there cannot be delivered, so the call fails instead of returning the unchanged tensor.
    run_attack(
        MLP_SETUP
        + """
b = np.full((8, 4), 3, "float32").tobytes()
out = rx.from_dlpack(np.frombuffer(b, "float32").reshape(8, 4))
ib = rx.ExecBuilder()
with ib.function("relu_into", num_inputs=2):
    ib.emit_call("relu", args=[ib.r(0), ib.r(1)], dst=ib.void_arg())
    ib.emit_ret(ib.r(1))
relu_into = rx.VirtualMachine(rx.link([mlp, ib.get()]))["relu_into"]
try:
    relu_into(np.full((8, 4), -5, "float32"), out)
    print("no error")
except rx.VMError as e:
    print(str(e).split(", which")[0])
print(b == np.full((8, 4), 3, "float32").tobytes())
# Writing the values already there changes nothing: no error. As an input it is read.
print(relu_into(np.full((8, 4), 3, "float32"), out).numpy().max())
r = relu_into(out, np.zeros((8, 4), "float32"))
print(r.numpy().min(), r.numpy().max())
"""
    ).assert_ok('kernel "relu" wrote to argument 1 (a float32 tensor of shape (8, 4))\nTrue\n3.0\n3.0 3.0')
