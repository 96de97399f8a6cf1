import relaxvm as rx

ib = rx.ExecBuilder()
with ib.function("inner", num_inputs=1):
    ib.emit_ret(ib.r(0))
with ib.function("mk", num_inputs=0):
    ib.emit_call(
        "vm.builtin.make_closure",
        args=[ib.f("inner"), ib.convert_constant(rx.Shape([]))] if False else [ib.f("inner")],
        dst=ib.r(0),
    )
    ib.emit_ret(ib.r(0))
vm2 = rx.VirtualMachine(ib.get())
clo = vm2["mk"]()
print(type(clo))
rx.register_func("adv.g", clo, override=True)
ib1 = rx.ExecBuilder()
with ib1.function("inner", num_inputs=1):
    ib1.emit_call("vm.builtin.copy", args=[ib1.convert_constant(999)], dst=ib1.r(1))
    ib1.emit_ret(ib1.r(1))
with ib1.function("main", num_inputs=1):
    ib1.emit_call("adv.g", args=[ib1.r(0)], dst=ib1.r(1))
    ib1.emit_ret(ib1.r(1))
vm1 = rx.VirtualMachine(ib1.get())
print(vm1["main"](7))
del vm2
import gc  # noqa: E402

gc.collect()
print(vm1["main"](8))
