"""Constants are immutable: shared by every VM and thread running an executable, they refuse
writes from builtins (store_shape used to change them — a race between threads), and the numpy
and DLPack views Python gets of them are read-only."""

from attack import run_attack

SETUP = """
import threading, numpy as np, relaxvm as rx
ib = rx.ExecBuilder()
heap = ib.convert_constant(np.zeros(2, "int64"))
with ib.function("store", num_inputs=1):
    ib.emit_call("vm.builtin.shape_of", args=[ib.r(0)], dst=ib.r(1))
    ib.emit_call("vm.builtin.store_shape", args=[ib.r(1), heap, ib.imm(0)], dst=ib.void_arg())
    ib.emit_call("vm.builtin.make_tuple", args=[heap], dst=ib.r(2))
    ib.emit_ret(ib.r(2))
with ib.function("get", num_inputs=0):
    ib.emit_call("vm.builtin.make_tuple", args=[heap], dst=ib.r(0))
    ib.emit_ret(ib.r(0))
exe = ib.get()
"""


def test_store_shape_into_a_constant_is_an_error_on_every_thread():
    run_attack(
        SETUP
        + """
errors = []
def worker(n):
    vm = rx.VirtualMachine(exe)
    for _ in range(2000):
        try:
            vm["store"](np.zeros(n, "float32"))
        except rx.VMError as e:
            errors.append("read-only" in str(e))
threads = [threading.Thread(target=worker, args=(n,)) for n in (3, 5)]
[t.start() for t in threads]
[t.join() for t in threads]
print(len(errors), all(errors), rx.VirtualMachine(exe)["get"]()[0].numpy().tolist())
"""
    ).assert_ok("4000 True [0, 0]")


def test_numpy_and_dlpack_views_of_a_constant_are_read_only():
    run_attack(
        SETUP
        + """
t = rx.VirtualMachine(exe)["get"]()[0]
a = t.numpy()
print(a.flags.writeable)
try:
    a[0] = 7
except ValueError:
    print("refused")
b = np.from_dlpack(t)
if b.flags.writeable:
    b[0] = 7  # numpy without DLPack 1.0 read-only support gets a copy, not the constant
print(rx.VirtualMachine(exe)["get"]()[0].numpy().tolist())
"""
    ).assert_ok("False\nrefused\n[0, 0]")
