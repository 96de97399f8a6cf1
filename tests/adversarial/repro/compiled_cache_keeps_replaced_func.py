import gc
import os
import weakref

import numpy as np

import relaxvm as rx

SO = os.path.join(
    os.environ.get("RELAXVM_TVM_CORPUS", ""), "vm_suite", "test_vm_build", "test_time_evaluator", "compiled", "model.so"
)


class Marker:
    pass


def install():
    m = Marker()

    def add(a, b, _m=m):
        return rx.tensor(a.numpy() + b.numpy())

    rx.register_func("test.vm.add", add, override=True)
    return weakref.ref(m)


vm = rx.VirtualMachine(rx.load_module(SO))
x = rx.tensor(np.ones(1, "float32"))
w = install()
print(vm["main"](x, x).numpy().tolist())
rx.register_func("test.vm.add", lambda a, b: rx.tensor(a.numpy() * 3), override=True)
gc.collect()
print("replaced callable still alive:", w() is not None)
rx.remove_global_func("test.vm.add")
gc.collect()
print("after removal still alive:", w() is not None)


# cycle: a callback holding its VM
def leak_vm():
    vm2 = rx.VirtualMachine(rx.load_module(SO))
    m = Marker()
    vm2_marker = weakref.ref(m)

    def add(a, b, _vm=vm2, _m=m):
        return rx.tensor(a.numpy() + b.numpy())

    rx.register_func("test.vm.add", add, override=True)
    vm2["main"](x, x)
    rx.remove_global_func("test.vm.add")
    return vm2_marker


w2 = leak_vm()
gc.collect()
print("vm whose callback was removed still alive:", w2() is not None)
