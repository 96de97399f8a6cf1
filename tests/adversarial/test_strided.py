"""Non-contiguous numpy input through every entry point: stride-0 broadcasts, negative strides,
transposes, steps, non-native byte order and misaligned data each give numpy's values, and a
broadcast view too large to copy is a MemoryError (it used to abort the process)."""

from attack import CALL_ONE, run_attack

VIEWS = (
    CALL_ONE
    + """
import numpy as np, pickle, relaxvm as rx
base = np.arange(24.0, dtype="float32")
views = {
    "broadcast": np.broadcast_to(base[:3], (4, 3)),
    "negative": base[::-1],
    "transposed": base.reshape(4, 6).T,
    "stepped": base[::5],
    "big-endian": base.astype(">f4"),
    "misaligned": np.frombuffer(b"\\0" + base.tobytes(), dtype="float32", offset=1),
    "broadcast-reversed": np.broadcast_to(base[:3], (4, 3))[::-1, ::-1],
}
def dlpack(v, want):
    try:
        return rx.from_dlpack(v).numpy()
    except BufferError:  # numpy will not export negative strides or non-native byte order
        return want
total, reshape, ident = prog("vm.op.sum"), prog("vm.builtin.reshape", 2), prog("vm.builtin.make_tuple")
"""
)


def test_every_kind_of_view_gives_numpys_values_everywhere():
    run_attack(
        VIEWS
        + """
for name, v in views.items():
    want = np.ascontiguousarray(v, dtype="float32")
    ib = rx.ExecBuilder()
    c = ib.convert_constant(v)
    with ib.function("g", num_inputs=0):
        ib.emit_call("vm.builtin.make_tuple", args=[c], dst=ib.r(0))
        ib.emit_ret(ib.r(0))
    got = {
        "rx.tensor": rx.tensor(v).numpy(),
        "from_dlpack": dlpack(v, want),
        "vm argument": ident(v)[0].numpy(),
        "pickle": pickle.loads(pickle.dumps(ident(v)[0])).numpy(),
        "dlpack copy": np.from_dlpack(rx.tensor(v)),
        "convert_constant": rx.VirtualMachine(ib.get())["g"]()[0].numpy(),
        "reshape": reshape(v, rx.Shape([v.size])).numpy().reshape(v.shape),
    }
    for where, g in got.items():
        assert np.array_equal(g, want), (name, where, g, want)
    assert float(total(v).numpy()) == float(want.sum()), name
    rx.tensor(v).__dlpack__(copy=True)
print("ok")
"""
    ).assert_ok("ok")


def test_a_broadcast_too_large_to_copy_is_a_memory_error_wherever_it_goes():
    for use in [
        "rx.tensor(big)",
        "total(big)",
        "reshape(big, rx.Shape([1 << 40]))",
        "pickle.dumps(big)",
        "rx.ExecBuilder().convert_constant(big)",
        "big.__dlpack__(copy=True)",
        "big.numpy().copy()",
    ]:
        run_attack(
            VIEWS + "big = rx.from_dlpack(np.broadcast_to(np.float32(1.0), (1 << 40,)))\n" + use,
            memory=2 << 30,
        ).assert_raises(("MemoryError", "VMMemoryError"), "allocate")
