"""Files changing under a loaded executable, and files changed before loading: the default load
reads every byte into memory of its own and checks it, so a truncated or rewritten file never
crashes the process or changes results, and a flipped bit is an error before anything runs."""

import numpy as np
import pytest
from attack import run_attack

import relaxvm as rx


def save_program(path) -> np.ndarray:
    data = np.arange(1 << 16, dtype="float32")
    ib = rx.ExecBuilder()
    c = ib.convert_constant(data)
    with ib.function("main", num_inputs=0):
        ib.emit_call("vm.op.sum", args=[c], dst=ib.r(0))
        ib.emit_ret(ib.r(0))
    with open(path, "wb") as f:
        f.write(ib.get().save_to_bytes())
    return data


@pytest.mark.parametrize("change", ["truncate", "rewrite"])
def test_a_file_changed_after_load_changes_nothing(tmp_path, change):
    path = tmp_path / "prog.rvx"
    expected = float(save_program(path).sum())
    outcome = run_attack(
        f"""
import os, relaxvm as rx
vm = rx.VirtualMachine(rx.load_executable({str(path)!r}))
if {change!r} == "truncate":
    os.truncate({str(path)!r}, 0)
else:
    with open({str(path)!r}, "r+b") as f:
        f.seek(4096)
        f.write(b"\\xff" * (200 << 10))
print(float(vm["main"]().numpy()))
"""
    )
    outcome.assert_ok(str(expected))


def test_a_flipped_bit_in_constant_data_is_refused_by_load_executable(tmp_path):
    path = tmp_path / "prog.rvx"
    save_program(path)
    raw = bytearray(path.read_bytes())
    raw[len(raw) // 2] ^= 0x10  # inside the 256 KiB of tensor data
    path.write_bytes(raw)
    run_attack(f"import relaxvm as rx; rx.load_executable({str(path)!r})").assert_raises(
        "VMValueError", "data checksum mismatch.*corrupt"
    )
    # The trusted opt-out maps the file and leaves the data unchecked (documented): it loads.
    run_attack(f"import relaxvm as rx; rx.load_executable({str(path)!r}, mmap=True); print('loaded')").assert_ok(
        "loaded"
    )
