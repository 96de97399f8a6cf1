"""TVM's Python API where relaxvm matches it: memory_cfg, instrument return kinds and arguments."""

import pickle

import numpy as np
import pytest

import relaxvm as rx


def program():
    ib = rx.ExecBuilder()
    with ib.function("main", num_inputs=1):
        ib.emit_call("vm.builtin.check_tensor_info", args=[ib.r(0), 1, rx.DataType("float32"), "x"], dst=None)
        ib.emit_call("vm.op.add", args=[ib.r(0), ib.r(0)], dst=ib.r(2))
        ib.emit_ret(ib.r(2))
    return ib.get()


@pytest.mark.parametrize(
    "cfg",
    [None, "naive", "pooled", {}, {rx.cpu(): rx.VirtualMachine.POOLED_ALLOCATOR}, {rx.cpu(0): "naive"}],
)
def test_memory_cfg_values_tvm_accepts(cfg):
    vm = rx.VirtualMachine(program(), rx.cpu(), memory_cfg=cfg)
    assert vm["main"](np.ones(2, "float32")).numpy().tolist() == [2, 2]
    assert (rx.VirtualMachine.NAIVE_ALLOCATOR, rx.VirtualMachine.POOLED_ALLOCATOR) == (1, 2)


@pytest.mark.parametrize(
    "cfg,error,match",
    [
        ("arena", ValueError, 'memory_cfg must be "naive" or "pooled", found "arena"'),
        (3, TypeError, "memory_cfg is expected be string or dictionary, but received int"),
        ({rx.cpu(): 7}, ValueError, r"memory_cfg\[.*\] must be VirtualMachine.NAIVE_ALLOCATOR"),
        ({"gpu": 1}, ValueError, "gpu"),
        # One device in two spellings with contradicting allocators (attack finding other/01).
        ({rx.cpu(0): "naive", "cpu:0": "pooled"}, ValueError, 'memory_cfg names cpu:0 twice: "naive" and "pooled"'),
    ],
)
def test_memory_cfg_rejects_what_tvm_rejects(cfg, error, match):
    with pytest.raises(error, match=match):
        rx.VirtualMachine(program(), rx.cpu(), memory_cfg=cfg)


def test_instrument_return_kinds_and_dtype_arguments_as_str():
    seen = []

    def instrument(func, name, before, ret, *args):
        seen.append((name, before, [type(a).__name__ for a in args]))
        if before and name == "vm.op.add":
            return rx.VMInstrumentReturnKind.SKIP_RUN
        return rx.VMInstrumentReturnKind.NO_OP

    vm = rx.VirtualMachine(program(), rx.cpu())
    vm.set_instrument(instrument)
    assert vm["main"](np.ones(2, "float32")) is None  # the add was skipped
    assert seen[0] == ("vm.builtin.check_tensor_info", True, ["Tensor", "int", "str", "str"])
    assert [s[:2] for s in seen] == [
        ("vm.builtin.check_tensor_info", True),
        ("vm.builtin.check_tensor_info", False),
        ("vm.op.add", True),
    ]
    assert int(rx.VMInstrumentReturnKind.SKIP_RUN) == 1 and rx.VMInstrumentReturnKind.NO_OP == 0
    vm.set_instrument(lambda *a: 5)
    with pytest.raises(ValueError, match="VMInstrumentReturnKind"):
        vm["main"](np.ones(2, "float32"))


def test_the_cli_comes_with_the_package(tmp_path):
    import os
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "relaxvm", "--version"], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.startswith("relaxvm "), out
    prog = tmp_path / "p.txt"
    prog.write_text(
        ".packed vm.builtin.int.add\n@main inputs=1 regs=2:\n  call vm.builtin.int.add in: %0, i1 dst: %1\n  ret %1\n"
    )
    out = subprocess.run(
        [sys.executable, "-m", "relaxvm", "run", str(prog), "main", "41"], capture_output=True, text=True
    )
    assert (out.returncode, out.stdout) == (0, "42\n"), out
    out = subprocess.run(
        [sys.executable, "-m", "relaxvm", "run", str(tmp_path / "none")], capture_output=True, text=True
    )
    assert out.returncode == 1 and out.stderr.startswith("error: "), out
    out = subprocess.run([sys.executable, "-m", "relaxvm", "bogus"], capture_output=True, text=True)
    assert out.returncode == 2 and "unrecognized subcommand" in out.stderr, out
    script = os.path.join(os.path.dirname(sys.executable), "relaxvm")
    if os.path.exists(script):  # installed by pip / maturin develop
        out = subprocess.run([script, "--help"], capture_output=True, text=True)
        assert out.returncode == 0 and "Assemble, inspect, verify and run" in out.stdout, out


def test_device_has_tvm_ffi_accessors():
    d = rx.cpu(1)
    assert (d.device_type, d.index, d.device_id, d.dlpack_device_type()) == (1, 1, 1, 1)


def test_tensor_takes_the_device_positionally_as_tvm_does():
    t = rx.tensor(np.arange(3, dtype="float32"), rx.cpu(0))
    assert t.dtype == "float32" and t.device == rx.cpu(0) and t.numpy().tolist() == [0, 1, 2]
    assert rx.tensor([1, 2], "int8").dtype == "int8"
    with pytest.raises(TypeError, match="device twice"):
        rx.tensor([1], rx.cpu(), device=rx.cpu())


def test_vm_key_error_shows_its_sentence_without_quotes():
    ib = rx.ExecBuilder()
    with ib.function("main", num_inputs=0):
        ib.emit_call("no.such", args=[], dst=ib.r(0))
        ib.emit_ret(ib.r(0))
    with pytest.raises(rx.VMKeyError) as info:
        rx.VirtualMachine(ib.get())
    assert str(info.value).startswith("packed function not found in any registry: no.such")
    assert isinstance(info.value, KeyError) and isinstance(info.value, rx.VMError)


def test_set_input_turns_numbers_into_tensors_as_tvm_does():
    ib = rx.ExecBuilder()
    with ib.function("main", num_inputs=3):
        ib.emit_call("vm.builtin.make_tuple", args=[ib.r(0), ib.r(1), ib.r(2)], dst=ib.r(3))
        ib.emit_ret(ib.r(3))
    vm = rx.VirtualMachine(ib.get())
    vm.set_input("main", 3, 2.5, (True, "s"))
    vm.invoke_stateful("main")
    a, b, (c, s) = vm.get_outputs("main")
    assert (a.dtype, a.shape, a.numpy().item()) == ("int32", (), 3)
    assert (b.dtype, b.numpy().item()) == ("float32", 2.5)
    assert (c.dtype, c.numpy().item()) == ("int32", 1) and s == "s"
    assert vm["main"](3, 2.5, (True, "s")) == (3, 2.5, (True, "s"))  # a direct call keeps numbers
    with pytest.raises(OverflowError, match="does not fit in int32"):
        vm.set_input("main", 1 << 40, 0, 0)


def test_set_input_keeps_numbers_a_signature_declares_scalar():
    ib = rx.ExecBuilder()
    with ib.function("main", signature="(n: i64, x: any, pair: tuple<f32, any>) -> any"):
        ib.emit_call("vm.builtin.make_tuple", args=[ib.r(0), ib.r(1), ib.r(2)], dst=ib.r(3))
        ib.emit_ret(ib.r(3))
    vm = rx.VirtualMachine(ib.get())
    vm.set_input("main", 7, 7, (0.5, 2))
    vm.invoke_stateful("main")
    n, x, (f, y) = vm.get_outputs("main")
    assert n == 7 and isinstance(x, rx.Tensor) and x.dtype == "int32"
    assert f == 0.5 and isinstance(y, rx.Tensor) and y.dtype == "int32"  # only the declared scalar stays


def test_convert_constant_makes_tuples_of_tuples_and_lists_as_tvm():
    ib = rx.ExecBuilder()
    with ib.function("main", num_inputs=0):
        ib.emit_call("vm.builtin.copy", args=[ib.convert_constant((1, [2.5, "a"], rx.Shape([2])))], dst=ib.r(0))
        ib.emit_ret(ib.r(0))
    ex = ib.get()
    assert 'tuple (int 1, tuple (float 2.5, str "a"), shape (2,))' in ex.as_text()
    assert rx.VirtualMachine(ex)["main"]() == (1, (2.5, "a"), rx.Shape([2]))
    ns: dict = {}
    exec(ex.as_python(), ns)
    assert ns["ex"].as_text() == ex.as_text()
    assert pickle.loads(pickle.dumps(ex)).as_text() == ex.as_text()
