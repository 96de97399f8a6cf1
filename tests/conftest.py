"""Shared helpers for the relaxvm test suite.

The packed functions TVM's tests take from C++ (``test.vm.add`` and friends) are registered
here in Python, as a migrating user would.
"""

from __future__ import annotations

import signal

import numpy as np
import pytest

import relaxvm as rx

# A test run started in the background by a shell (`./scripts/test.sh &`) inherits SIGINT
# ignored, and CPython then installs no handler: every Ctrl-C test would wait for a signal that
# never comes (and the child processes of the attack tests inherit the same). The suite tests
# Ctrl-C, so it always has Python's default handler, as an interactive run does.
signal.signal(signal.SIGINT, signal.default_int_handler)


@rx.register_func("test.vm.add", override=True)
def _add(a, b):
    return rx.tensor(a.numpy() + b.numpy())


@rx.register_func("test.vm.mul", override=True)
def _mul(a, b):
    return rx.tensor(a.numpy() * b.numpy())


@rx.register_func("test.vm.add_scalar", override=True)
def _add_scalar(a, b):
    return a + b


@rx.register_func("test.vm.get_device_id", override=True)
def _get_device_id(dev):
    return dev.device_id


@rx.register_func("test.vm.move", override=True)
def _move(x):
    return x


def check_saved_func(vm: rx.VirtualMachine, func_name: str, *inputs):
    """Calls ``func_name`` directly and through ``save_function``; both must agree.

    TVM's ``tvm.relax.testing.vm.check_saved_func``.
    """
    res1 = vm[func_name](*inputs)
    vm.save_function(func_name, func_name + "_saved", *inputs)
    res2 = vm[func_name + "_saved"]()
    np.testing.assert_allclose(np.asarray(res1), np.asarray(res2))
    return res1


def build(body, num_inputs: int = 1, name: str = "main", param_names=None) -> rx.Executable:
    """An executable with one function whose body ``body(ib)`` emits."""
    ib = rx.ExecBuilder()
    with ib.function(name, num_inputs=num_inputs, param_names=param_names):
        body(ib)
    return ib.get()


def identity_vm(num_inputs: int = 1) -> rx.VirtualMachine:
    """A VM whose ``id`` returns its first input unchanged (the other inputs are moved)."""

    def body(ib):
        for i in range(1, num_inputs):
            ib.emit_call("vm.builtin.move", args=[ib.r(i)])
        ib.emit_ret(ib.r(0))

    return rx.VirtualMachine(build(body, num_inputs=num_inputs, name="id"))


def call_packed_vm(func: str, num_inputs: int) -> rx.VirtualMachine:
    """A VM whose ``main`` calls packed function ``func`` on its inputs and returns the result."""

    def body(ib):
        ib.emit_call(func, args=[ib.r(i) for i in range(num_inputs)], dst=ib.r(num_inputs))
        ib.emit_ret(ib.r(num_inputs))

    return rx.VirtualMachine(build(body, num_inputs=num_inputs))


@pytest.fixture
def unique_name(request):
    """A registry name unique to the test (names are process-wide)."""
    names = []

    def make(suffix: str = "f") -> str:
        n = f"test.{request.node.name}.{suffix}.{len(names)}"
        names.append(n)
        return n

    yield make
    for n in names:
        if rx.get_global_func(n, allow_missing=True) is not None:
            rx.remove_global_func(n)


def counting_builder(name: str = "spin") -> rx.ExecBuilder:
    """A builder holding `name(n)`, a loop of n steps that returns n (long calls of it release
    the GIL and poll for Ctrl-C; shared by the tests of interrupts and threads)."""
    ib = rx.ExecBuilder()
    with ib.function(name, num_inputs=1):
        ib.emit_call("vm.builtin.int.add", args=[ib.imm(0), ib.imm(0)], dst=ib.r(1))
        ib.emit_call("vm.builtin.int.lt", args=[ib.r(1), ib.r(0)], dst=ib.r(2))
        ib.emit_if(ib.r(2), 3)
        ib.emit_call("vm.builtin.int.add", args=[ib.r(1), ib.imm(1)], dst=ib.r(1))
        ib.emit_goto(-3)
        ib.emit_ret(ib.r(1))
    return ib
