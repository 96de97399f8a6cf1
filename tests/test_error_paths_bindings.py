"""Errors of the Python bindings whose text the Rust crates also have: the Python copies,
caused through the Python API (scripts/error-coverage.py counts a test only for the crates it
can reach)."""

import pytest

import relaxvm as rx


def one_function_executable():
    ib = rx.ExecBuilder()
    with ib.function("one", num_inputs=0):
        ib.emit_call("vm.builtin.int.add", args=[ib.imm(0), ib.imm(1)], dst=ib.r(0))
        ib.emit_ret(ib.r(0))
    return ib.get()


def test_negative_device_ids_are_refused_where_the_device_is_made():
    with pytest.raises(ValueError, match=r"^device id must be non-negative, got -1$"):
        rx.Device("cpu", -1)
    with pytest.raises(ValueError, match=r"^device id must be non-negative, got -2$"):
        rx.cpu(-2)


def test_an_unknown_function_name_is_a_key_error_naming_it():
    exe = one_function_executable()
    with pytest.raises(KeyError, match=r"no function named \"two\""):
        exe.param_names("two")
    with pytest.raises(KeyError, match=r"no function named \"three\""):
        exe.num_inputs("three")
