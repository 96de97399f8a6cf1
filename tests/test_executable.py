"""rx.Executable: stats, text and Python dumps, the binary format and pickling."""

import pickle

import numpy as np
import pytest

import relaxvm as rx


@pytest.fixture
def ex():
    ib = rx.ExecBuilder()
    with ib.function("main", num_inputs=2, param_names=["x", "y"]):
        ib.emit_call("vm.op.add", args=[ib.r(0), ib.r(1)], dst=ib.r(2), loc=rx.Location.file("m.py", 3, 1))
        ib.emit_call("vm.op.mul", args=[ib.r(2), np.full(3, 2.0, "float32")], dst=ib.r(3), loc=rx.Location.name("mul"))
        ib.emit_call(
            "vm.builtin.make_tuple",
            args=[ib.r(3), (3,), rx.DataType("float32"), "s", 1.5, ib.imm(-2), ib.void_arg()],
            dst=ib.r(4),
        )
        ib.emit_ret(ib.r(4))
    with ib.function("helper", num_inputs=0):
        ib.emit_call("vm.builtin.null_value", dst=ib.r(0))
        ib.emit_ret(ib.r(0))
    return ib.get()


def run(ex):
    x = np.arange(3, dtype="float32")
    out = rx.VirtualMachine(ex)["main"](x, x)
    return out[0].numpy().tolist(), out[1:]


def test_names(ex):
    assert ex.function_names == ["main", "helper"]
    assert ex.packed_function_names == ["vm.op.add", "vm.op.mul", "vm.builtin.make_tuple", "vm.builtin.null_value"]
    assert "main" in repr(ex)


def test_stats(ex):
    s = ex.stats()
    assert s.startswith("Relax VM executable statistics:")
    assert "Globals (#2): [main, helper]" in s
    assert "Packed functions (#4): [vm.op.add, vm.op.mul, vm.builtin.make_tuple, vm.builtin.null_value]" in s


def test_as_text_and_alias(ex):
    text = ex.as_text()
    assert "@main inputs=2 regs=5 params=(x, y):" in text
    assert 'call  vm.op.add  in: %0, %1  dst: %2  loc("m.py":3:1)' in text
    assert ex.astext() == text


def test_as_python_rebuilds_an_identical_executable(ex):
    src = ex.as_python()
    assert src.startswith("import relaxvm as rx")
    assert ex.aspython() == src
    scope = {}
    exec(src, scope)
    rebuilt = scope["ex"]
    assert isinstance(rebuilt, rx.Executable)
    assert rebuilt.as_text() == ex.as_text()
    assert run(rebuilt) == run(ex)


@pytest.mark.parametrize("strip", [False, True])
def test_save_to_bytes_round_trip(ex, strip):
    data = ex.save_to_bytes(strip_debug=strip)
    assert isinstance(data, bytes) and data[:4] == b"\x89RVX"
    back = rx.load_executable(data)
    assert run(back) == run(ex)
    if strip:
        assert "loc(" not in back.as_text() and "params=" not in back.as_text()
    else:
        assert back.as_text() == ex.as_text()
    assert rx.load_executable(bytearray(data)).as_text() == back.as_text()
    assert rx.load_executable(memoryview(data)).as_text() == back.as_text()


def test_save_and_load_file(ex, tmp_path):
    path = tmp_path / "model.rvx"
    ex.save(path)
    back = rx.load_executable(path)
    assert back.as_text() == ex.as_text()
    assert run(back) == run(ex)
    ex.save(str(path), strip_debug=True)
    assert "loc(" not in rx.load_executable(str(path)).as_text()


def test_pickle(ex):
    back = pickle.loads(pickle.dumps(ex))
    assert back.as_text() == ex.as_text()
    assert run(back) == run(ex)


def test_unsavable_constant_is_refused():
    ib = rx.ExecBuilder()
    with pytest.raises(rx.CheckError, match="cannot be a constant"):
        ib.convert_constant(rx.get_global_func("vm.builtin.move"))
