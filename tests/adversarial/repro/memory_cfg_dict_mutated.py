import relaxvm as rx

ib = rx.ExecBuilder()
with ib.function("f", num_inputs=1):
    ib.emit_ret(ib.r(0))
exe = ib.get()
cfg = {}


class Evil:
    def __index__(self):
        cfg["cpu:1"] = "pooled"  # grows the dict being iterated
        return 2


cfg[rx.cpu(0)] = Evil()
cfg["cpu:2"] = "naive"
try:
    vm = rx.VirtualMachine(exe, memory_cfg=cfg)
    print("accepted", getattr(vm, "memory_allocator", None))
except BaseException as e:
    print("raised", type(e).__name__, type(e).__mro__, str(e)[:200])
