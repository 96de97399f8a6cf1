"""rx.link and ExecBuilder.import_executable: merging executables into one."""

import numpy as np
import pytest

import relaxvm as rx


def caller(const=None, helper="helper", sig=None):
    """``main(x) = helper(x)`` (plus ``const`` to the result when given), helper declared only."""
    ib = rx.ExecBuilder()
    ib.declare_function(helper)
    kw = {"signature": sig} if sig else {"num_inputs": 1}
    with ib.function("main", **kw):
        ib.emit_call(helper, args=[ib.r(0)], dst=ib.r(1))
        if const is None:
            ib.emit_ret(ib.r(1))
        else:
            ib.emit_call("vm.op.add", args=[ib.r(1), const], dst=ib.r(2))
            ib.emit_ret(ib.r(2))
    return ib.get()


def helper_ex(name="helper", const=None, extra=()):
    """``helper(y) = y * 2`` (or ``y + const``), plus functions named in ``extra``."""
    ib = rx.ExecBuilder()
    with ib.function(name, num_inputs=1):
        if const is None:
            ib.emit_call("vm.op.add", args=[ib.r(0), ib.r(0)], dst=ib.r(1))
        else:
            ib.emit_call("vm.op.add", args=[ib.r(0), const], dst=ib.r(1))
        ib.emit_ret(ib.r(1))
    for e in extra:
        with ib.function(e, num_inputs=1):
            ib.emit_ret(ib.r(0))
    return ib.get()


def test_declared_in_one_defined_in_another():
    linked = rx.link([caller(), helper_ex()])
    assert set(linked.function_names) == {"main", "helper"}
    assert "helper" not in linked.packed_function_names
    out = rx.VirtualMachine(linked)["main"](np.array([1.0, 2.0]))
    np.testing.assert_array_equal(out.numpy(), [2.0, 4.0])
    # Alone, the caller needs a registered helper.
    with pytest.raises(KeyError, match="helper"):
        rx.VirtualMachine(caller())


def test_remapping_and_constant_dedup():
    c = np.array([10.0, 20.0])
    a = caller(const=c)
    b = helper_ex(const=c, extra=["other"])
    linked = rx.link([a, b])
    assert linked.as_text().count("tensor float64") == 1  # one constant, shared
    vm = rx.VirtualMachine(linked)
    np.testing.assert_array_equal(vm["main"](np.array([1.0, 1.0])).numpy(), [21.0, 41.0])
    np.testing.assert_array_equal(vm["helper"](np.zeros(2)).numpy(), c)
    assert vm["other"](5) == 5


def test_duplicate_definition_names_both_modules():
    with pytest.raises(ValueError) as info:
        rx.link([("a.rvx", helper_ex()), ("b.rvx", helper_ex())])
    msg = str(info.value)
    assert '"helper"' in msg and "a.rvx" in msg and "b.rvx" in msg
    with pytest.raises(ValueError, match="module 0.*module 1"):
        rx.link([helper_ex(), helper_ex()])


def test_unresolved_declaration_resolved_by_registry(unique_name):
    name = unique_name()
    linked = rx.link([caller(helper=name), helper_ex(extra=["unrelated"])])
    assert name in linked.packed_function_names
    with pytest.raises(KeyError, match=name):
        rx.VirtualMachine(linked)
    rx.register_func(name, lambda x: x)
    assert rx.VirtualMachine(linked)["main"](7) == 7


def test_entry_and_dead_function_removal():
    linked = rx.link([caller(), helper_ex(extra=["dead"])], drop_unreachable=True)
    assert set(linked.function_names) == {"main", "helper"}
    assert linked.entry == "main"
    kept = rx.link([caller(), helper_ex(extra=["dead"])], drop_unreachable=True, keep=["dead"])
    assert "dead" in kept.function_names
    other = rx.link([caller(), helper_ex(extra=["dead"])], entry="helper", drop_unreachable=True)
    assert other.entry == "helper" and other.function_names == ["helper"]
    with pytest.raises(ValueError, match="nope"):
        rx.link([caller(), helper_ex()], entry="nope")
    with pytest.raises(
        ValueError, match=r"functions to keep \(dead\) only apply when unreachable functions are dropped"
    ):
        rx.link([caller(), helper_ex(extra=["dead"])], keep=["dead"])


def test_dead_constants_are_dropped():
    dead = rx.ExecBuilder()
    with dead.function("dead", num_inputs=1):
        dead.emit_call("vm.op.add", args=[dead.r(0), np.arange(1000.0)], dst=dead.r(1))
        dead.emit_ret(dead.r(1))
    linked = rx.link([caller(), helper_ex(), dead.get()], drop_unreachable=True)
    assert "dead" not in linked.function_names
    assert "tensor" not in linked.as_text()


def test_signatures_survive_linking_and_are_checked():
    a = caller(sig="(x: tensor<[n], f64>) -> tensor<[n], f64>")
    linked = rx.link([a, helper_ex()])
    assert linked.signature_text("main") == "(x: tensor<[n], f64>) -> tensor<[n], f64>"
    vm = rx.VirtualMachine(linked)
    np.testing.assert_array_equal(vm["main"]([1, 2]).numpy(), [2.0, 4.0])
    with pytest.raises(TypeError, match='"x"'):
        vm["main"](np.zeros(2, "float32"))


def test_link_through_save_load(tmp_path):
    a = rx.load_executable(caller().save_to_bytes())
    b = tmp_path / "b.rvx"
    helper_ex().save(b)
    linked = rx.link([a, rx.load_executable(b)], entry="main")
    again = rx.load_executable(linked.save_to_bytes())
    assert again.entry == "main"
    assert again.as_text() == linked.as_text()
    out = rx.VirtualMachine(again)["main"](np.array([3.0]))
    np.testing.assert_array_equal(out.numpy(), [6.0])


def test_link_argument_errors():
    with pytest.raises(ValueError):
        rx.link([])
    with pytest.raises(TypeError):
        rx.link([object()])
    with pytest.raises(TypeError):
        rx.link([("a", 1)])


def test_import_executable():
    ib = rx.ExecBuilder()
    with ib.function("main", num_inputs=1):
        ib.emit_call("helper", args=[ib.r(0)], dst=ib.r(1))
        ib.emit_ret(ib.r(1))
    ib.import_executable(helper_ex())
    ex = ib.get()
    assert "helper" in ex.function_names and "helper" not in ex.packed_function_names
    np.testing.assert_array_equal(rx.VirtualMachine(ex)["main"](np.array([2.0])).numpy(), [4.0])


def test_import_executable_before_use_and_conflicts():
    ib = rx.ExecBuilder()
    ib.import_executable(helper_ex())
    with ib.function("main", num_inputs=1):
        with pytest.raises(ValueError, match="function scope"):
            ib.import_executable(helper_ex("x"))
        ib.emit_call("helper", args=[ib.r(0)], dst=ib.r(1))
        ib.emit_ret(ib.r(1))
    with pytest.raises(rx.CheckError, match="helper"):
        ib.import_executable(helper_ex())
    # The failed import left the builder unchanged.
    ex = ib.get()
    np.testing.assert_array_equal(rx.VirtualMachine(ex)["main"](np.array([1.0])).numpy(), [2.0])


def test_import_executable_takes_entry_and_signatures():
    lib = rx.ExecBuilder()
    with lib.function("start", signature="(x: i64) -> i64"):
        lib.emit_ret(lib.r(0))
    lib.set_entry("start")
    assert lib.entry == "start"
    ib = rx.ExecBuilder()
    ib.import_executable(lib.get())
    ex = ib.get()
    assert ex.entry == "start"
    assert ex.signature("start") == {"a": ["i64"], "r": ["i64"]}
    with pytest.raises(TypeError, match='"x"'):
        rx.VirtualMachine(ex)["start"]("1")


def test_set_entry_must_be_defined():
    ib = rx.ExecBuilder()
    ib.set_entry("missing")
    with ib.function("main", num_inputs=0):
        ib.emit_call("vm.builtin.null_value", dst=ib.r(0))
        ib.emit_ret(ib.r(0))
    with pytest.raises(rx.CheckError, match="missing"):
        ib.get()
