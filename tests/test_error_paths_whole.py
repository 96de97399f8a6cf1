"""Refusals of the Python binding whose tests held only a part of the message that another
message shares (attack finding other/02; scripts/error-coverage.py): each caused here, with the
exception's exact class and its whole message (what was expected, what was found, where)."""

from __future__ import annotations

import numpy as np
import pytest

import relaxvm as rx


def raises(cls: type[BaseException], message: str, f, *args, **kwargs) -> None:
    """`f(*args, **kwargs)` raises exactly `cls` with exactly `message`."""
    with pytest.raises(cls) as e:
        f(*args, **kwargs)
    assert type(e.value) is cls and str(e.value) == message


def test_an_immediate_past_64_bits():
    ib = rx.ExecBuilder()
    with ib.function("main", num_inputs=1):
        raises(
            OverflowError,
            'immediate argument 0 of the call of "vm.builtin.copy": int 18446744073709551616 does not fit in int64 '
            "(-2^63..2^63-1)",
            ib.emit_call,
            "vm.builtin.copy",
            args=[2**64],
        )
        ib.emit_ret(ib.r(0))


def test_a_numpy_integer_past_int64():
    copy = rx.get_global_func("vm.builtin.copy")
    raises(
        OverflowError,
        "argument 0 of vm.builtin.copy: uint64 18446744073709551615 does not fit in int64 (-2^63..2^63-1)",
        copy,
        np.uint64(2**64 - 1),
    )
    # A Python int past int64: the same message, with its type (see tests/test_int_out_of_range.py).
    raises(
        OverflowError,
        "argument 0 of vm.builtin.copy: int 18446744073709551616 does not fit in int64 (-2^63..2^63-1)",
        copy,
        2**64,
    )


def test_export_library_with_a_compiler_option(tmp_path):
    ib = rx.ExecBuilder()
    with ib.function("main", num_inputs=1):
        ib.emit_ret(ib.r(0))
    raises(
        TypeError,
        "export_library got an unexpected keyword argument cc (compiler options do not apply to relaxvm)",
        ib.get().export_library,
        str(tmp_path / "x.so"),
        cc="g++",
    )


@pytest.mark.parametrize(("value", "kind"), [(42, "int"), (None, "NoneType"), (["a"], "list")])
def test_load_executable_of_something_else(value, kind):
    raises(
        TypeError,
        f"load_executable expects a path (str or os.PathLike) or a bytes-like object, not {kind}",
        rx.load_executable,
        value,
    )


def test_call_py_func_of_a_name_never_registered():
    call = rx.get_global_func("vm.builtin.call_py_func")
    raises(
        rx.VMValueError,
        'vm.builtin.call_py_func: Python function "test.never.registered" not found in the call_py_func registry '
        "(register it with vm.builtin.register_py_func)",
        call,
        ("test.never.registered", ()),
    )


@pytest.mark.parametrize("index", [2, 5, -3])
def test_a_shape_index_out_of_range(index):
    shape = rx.Shape([4, 5])
    raises(IndexError, f"shape index {index} out of range for 2 dimensions", shape.__getitem__, index)


def test_a_read_only_tensor_refuses_a_legacy_export_without_a_copy():
    a = np.arange(4, dtype="int64")
    a.flags.writeable = False
    t = rx.from_dlpack(a.__dlpack__(max_version=(1, 0)))
    raises(
        BufferError,
        "this tensor is read-only (a constant of an executable, or memory imported read-only through DLPack) and a "
        "DLPack 0.x consumer cannot be told so: allow a copy",
        t.__dlpack__,
        copy=False,
    )
    # A copy is allowed by default: the consumer gets the values.
    assert np.from_dlpack(t).tolist() == [0, 1, 2, 3]


def _identity_exe():
    ib = rx.ExecBuilder()
    with ib.function("main", num_inputs=1):
        ib.emit_ret(ib.r(0))
    return ib.get()


def test_a_builder_argument_that_is_no_register_says_what_it_must_be():
    ib = rx.ExecBuilder()
    with ib.function("main", num_inputs=1):
        raises(TypeError, "emit_ret's argument must be a register such as ib.r(2)", ib.emit_ret, "r0")
        ib.emit_ret(ib.r(0))


def test_a_query_about_a_missing_function_names_it():
    exe = _identity_exe()
    raises(KeyError, "'no function named \"nope\"'", exe.param_names, "nope")


def test_a_vm_asked_for_a_missing_function_names_it():
    vm = rx.VirtualMachine(_identity_exe(), rx.cpu())
    raises(rx.VMKeyError, 'unknown function "nope"', vm.__getitem__, "nope")


def test_a_link_module_pair_of_the_wrong_types():
    # A tuple that is no (name, Executable) pair; a module of another type says what it got.
    message = "link: a module is an Executable or a (name, Executable) pair"
    raises(TypeError, message, rx.link, [("m", 5)])
    raises(TypeError, message, rx.link, [("m",)])
