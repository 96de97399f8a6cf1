"""Bool arrays whose bytes are not 0 or 1 (numpy views of other dtypes) read as numpy reads
them: any non-zero byte is True. They used to give wrong results, and reading such a byte as a
Rust bool is undefined behaviour."""

from attack import CALL_ONE, run_attack

SETUP = (
    CALL_ONE
    + """
import numpy as np, relaxvm as rx
raw = np.array([2, 0, 1, 255, 0, 7], np.uint8)
flags = raw.view(bool)
"""
)


def test_bool_views_of_other_bytes_read_as_numpy_reads_them():
    run_attack(
        SETUP
        + """
want = flags.astype(np.uint8)  # numpy: 1 0 1 1 0 1
print(rx.tensor(flags).numpy().view(np.uint8).tolist() == want.tolist())
print(prog("vm.builtin.make_tuple")(flags)[0].numpy().view(np.uint8).tolist() == want.tolist())
print(int(prog("vm.op.sum")(flags).numpy()), int(np.count_nonzero(flags)))
print(rx.from_dlpack(flags).numpy().view(np.uint8).tolist() == want.tolist())
print(prog("vm.op.sum")(raw[::2].view(bool)).numpy())
ib = rx.ExecBuilder()
c = ib.convert_constant(flags)
with ib.function("g", num_inputs=0):
    ib.emit_call("vm.builtin.make_tuple", args=[c], dst=ib.r(0))
    ib.emit_ret(ib.r(0))
exe = ib.get()
text = exe.as_text()
print("[true, false, true, true, false, true]" in text)
"""
    ).assert_ok("True\nTrue\n4 4\nTrue\n2\nTrue")
