"""The global registry is the one record of which functions call Python (#34 item 3): each
function register_func makes from a callable keeps it as its origin, and what the binding
reads back from there (the callable pickling records, whether a call keeps the GIL) follows
every replacement and removal."""

from __future__ import annotations

import pytest

import relaxvm as rx
from relaxvm import _relaxvm


def calls(name: str) -> rx.VirtualMachine:
    ib = rx.ExecBuilder()
    with ib.function("f", num_inputs=1):
        ib.emit_call(name, args=[ib.r(0)], dst=ib.r(1))
        ib.emit_ret(ib.r(1))
    return rx.VirtualMachine(ib.get())


def test_the_registry_answers_which_python_function_a_name_calls(unique_name):
    name = unique_name()

    def f(x):
        return x + 1

    def g(x):
        return x + 2

    rx.register_func(name, f)
    assert _relaxvm._registered_python_func(name) is f
    # A registered function comes back from get_global_func as a function object of that name.
    got = rx.get_global_func(name)
    assert got is not f and got.name == name and got(1) == 2
    # A call that reaches only Python keeps the GIL.
    assert calls(name)["f"].releases_gil is False
    with pytest.raises(ValueError, match="already registered"):
        rx.register_func(name, g)
    assert _relaxvm._registered_python_func(name) is f, "a refused registration changes nothing"
    rx.register_func(name, g, override=True)
    assert _relaxvm._registered_python_func(name) is g
    assert calls(name)["f"](1) == 3
    # Replaced by a function object (not Python's own callable): no Python function is behind it.
    rx.register_func(name, rx.get_global_func("vm.builtin.int.add"), override=True)
    assert _relaxvm._registered_python_func(name) is None
    assert calls(name)["f"].releases_gil is True
    rx.register_func(name, f, override=True)
    assert _relaxvm._registered_python_func(name) is f
    rx.remove_global_func(name)
    assert _relaxvm._registered_python_func(name) is None
    assert _relaxvm._registered_python_func("vm.builtin.copy") is None
