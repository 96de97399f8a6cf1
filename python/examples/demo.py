"""The relaxvm demo: build a program, save it as a binary executable, load it and run it.

Run with ``./scripts/demo.sh`` from the repository root.
"""

import os
import tempfile

import numpy as np

import relaxvm as rx


@rx.register_func("my.scale", override=True)
def scale(x, k):
    """A packed function written in Python: the VM calls it with converted values."""
    return x.numpy() * k


def build() -> rx.Executable:
    """The program of the README: add two tensors, then scale the sum in Python."""
    ib = rx.ExecBuilder()
    with ib.function("main", num_inputs=2, param_names=["a", "b"]):
        ib.emit_call("vm.op.add", args=[ib.r(0), ib.r(1)], dst=ib.r(2))
        ib.emit_call("my.scale", args=[ib.r(2), ib.imm(3)], dst=ib.r(3))
        ib.emit_ret(ib.r(3))
    # A loop in bytecode: sum(n) = 0 + 1 + ... + (n - 1).
    with ib.function("sum", num_inputs=1, param_names=["n"]):
        ib.emit_call("vm.builtin.int.add", args=[ib.imm(0), ib.imm(0)], dst=ib.r(1))
        ib.emit_call("vm.builtin.int.add", args=[ib.imm(0), ib.imm(0)], dst=ib.r(2))
        ib.emit_call("vm.builtin.int.lt", args=[ib.r(2), ib.r(0)], dst=ib.r(3))
        ib.emit_if(ib.r(3), 4)
        ib.emit_call("vm.builtin.int.add", args=[ib.r(1), ib.r(2)], dst=ib.r(1))
        ib.emit_call("vm.builtin.int.add", args=[ib.r(2), ib.imm(1)], dst=ib.r(2))
        ib.emit_goto(-4)
        ib.emit_ret(ib.r(1))
    # The design document's shape heap: store a tensor's shape, then rebuild it.
    with ib.function("shape", num_inputs=1, param_names=["x"]):
        ib.emit_call("vm.builtin.alloc_shape_heap", args=[ib.imm(2)], dst=ib.r(1))
        ib.emit_call("vm.builtin.shape_of", args=[ib.r(0)], dst=ib.r(2))
        ib.emit_call("vm.builtin.store_shape", args=[ib.r(2), ib.r(1), ib.imm(0), ib.imm(1)])
        ib.emit_call("vm.builtin.load_shape", args=[ib.r(1), ib.imm(0), ib.imm(1)], dst=ib.r(3))
        ib.emit_ret(ib.r(3))
    return ib.get()


def main() -> None:
    ex = build()
    print(ex.stats())
    print(ex.as_text())
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "model.rvx")
        ex.save(path)
        print(f"saved {os.path.getsize(path)} bytes to {path}")
        vm = rx.VirtualMachine(rx.load_executable(path))
        out = vm["main"](np.ones(4), np.arange(4.0))
        print("main(ones(4), arange(4.0)) =", out.numpy())
        print("sum(1_000_000) =", vm["sum"](1_000_000))
        print("shape(zeros((32, 16))) =", tuple(vm["shape"](np.zeros((32, 16), "float32"))))
        try:
            vm["main"](np.ones(4), np.ones(5))
        except rx.VMError as e:
            print("a runtime error names the function and instruction:")
            print(" ", str(e).replace("\n", "\n  "))


if __name__ == "__main__":
    main()
