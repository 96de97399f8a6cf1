"""The language-model builtins under hostile inputs, each in a child process with a memory cap and
a timeout: small values that ask for huge caches or copies (stride-0 views of one element, a
reserve of 2^40 rows, a window that would double the reserve past memory) end in a MemoryError
or a clear ValueError, never a crash or a hang; a cache that refused a call still works; and
the in-place builtins refuse read-only constants and overlapping reads instead of writing."""

from __future__ import annotations

import pytest
from attack import CALL_ONE, run_attack

PRELUDE = (
    CALL_ONE
    + """
import numpy as np
from numpy.lib.stride_tricks import as_strided
create = rx.get_global_func("vm.builtin.attention_kv_cache_create")
append = rx.get_global_func("vm.builtin.attention_kv_cache_append")
view = rx.get_global_func("vm.builtin.attention_kv_cache_view")
window = rx.get_global_func("vm.builtin.attention_kv_cache_window_override")
def broadcast_rows(n, width=1):
    # n rows of `width` int32, all the same 4 bytes: a few bytes standing for 4 * n * width.
    one = np.zeros(1, "int32")
    return as_strided(one, shape=(n, width), strides=(0, 0))
"""
)


@pytest.mark.parametrize(
    "code",
    [
        # A stride-0 value of 2^32 rows (a zero-copy view): the reserve doubles to 2^33 rows.
        "c = create(rx.tensor(np.zeros((1, 1), 'int32')), rx.Shape([1, 1]), 0)\nappend(c, broadcast_rows(1 << 32))",
        # A reserve of 2^40 rows asked for directly.
        "create(rx.tensor(np.zeros((1, 1), 'int32')), rx.Shape([1 << 40, 1]), 0)",
        # Rows of 2^31 elements each.
        "create(rx.tensor(np.zeros((1, 1), 'int32')), rx.Shape([2, 1 << 31]), 0)",
    ],
    ids=["append-broadcast", "reserve-2^40", "wide-rows"],
)
def test_huge_caches_are_memory_errors(code):
    out = run_attack(PRELUDE + code + "\n")
    out.assert_raises("VMMemoryError", r"cannot allocate \d+ bytes")


def test_a_refused_window_leaves_the_cache_usable():
    out = run_attack(
        PRELUDE
        + """
# One entry in two reserved rows. A window of 8 whose 8 new rows do not fit it grows nothing and
# would write rows 1..9 (TVM writes past the reserve); a window of 2 cannot take 3 rows.
c = create(rx.tensor(np.zeros((2, 1), 'int32')), rx.Shape([2, 1]), 1)
for bad in [(rx.tensor(np.ones((8, 1), 'int32')), 8), (rx.tensor(np.ones((3, 1), 'int32')), 2)]:
    try:
        window(c, *bad)
    except ValueError as e:
        print("refused:", str(e).split(": ")[-1])
append(c, rx.tensor(np.full((1, 1), 9, 'int32')))
print(view(c).numpy().ravel().tolist())
"""
    )
    out.assert_ok()
    lines = out.stdout.rsplit("ATTACK-END", 1)[0].strip().splitlines()
    assert len(lines) == 3 and all(line.startswith("refused:") for line in lines[:2]), out.describe()
    assert "does not fit the 2 rows" in lines[0] and "found 3" in lines[1], out.describe()
    assert lines[2] == "[0, 9]", out.describe()


def test_sampling_a_huge_broadcast_vocabulary_is_bounded():
    # 2^31 logits from 4 bytes (a zero-copy view): copying them takes 8 GiB, a MemoryError.
    out = run_attack(
        PRELUDE
        + """
one = np.zeros(1, 'float32')
logits = as_strided(one, shape=(1 << 31,), strides=(0,))
rx.get_global_func("vm.builtin.sample_top_p_from_logits")(logits, 1.0, 0.9, 0.5)
"""
    )
    out.assert_raises("VMMemoryError", r"cannot allocate \d+ bytes")


def test_in_place_builtins_do_not_write_constants():
    out = run_attack(
        PRELUDE
        + """
ib = rx.ExecBuilder()
with ib.function("f", num_inputs=0):
    ib.emit_call("vm.builtin.apply_softmax_with_temperature",
                 args=[ib.convert_constant(rx.tensor(np.ones(4, 'float32'))), ib.imm(1)], dst=ib.r(0))
    ib.emit_ret(ib.r(0))
rx.VirtualMachine(ib.get())["f"]()
"""
    )
    out.assert_raises(("VMValueError", "ValueError"), r"read-only")


def test_a_penalty_on_logits_read_by_its_own_ids_is_refused_or_exact():
    # The ids tensor is a view of the logits' own bytes (int32 over float32): the builtin reads
    # both before writing, so it either works on the values it read or is refused; never a crash.
    out = run_attack(
        PRELUDE
        + """
buf = np.zeros(8, 'float32')
logits = rx.tensor(buf)
ids = rx.tensor(buf.view('int32')[:2])
rx.get_global_func("vm.builtin.apply_repetition_penalty")(logits, ids, 2.0)
print(logits.numpy().tolist())
"""
    )
    out.assert_ended_by_itself()
