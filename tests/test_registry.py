"""rx.register_func, get_global_func, list_global_func_names, remove_global_func."""

import pytest

import relaxvm as rx
from conftest import call_packed_vm


def test_register_with_function(unique_name):
    name = unique_name()
    f = lambda a, b: a * b  # noqa: E731
    assert rx.register_func(name, f) is f
    assert name in rx.list_global_func_names()
    assert call_packed_vm(name, 2)["main"](6, 7) == 42


def test_register_as_decorator(unique_name):
    name = unique_name()

    @rx.register_func(name)
    def neg(x):
        return -x

    assert neg(3) == -3  # the decorator returns the function itself
    assert rx.get_global_func(name)(5) == -5


def test_register_bare_decorator_uses_the_function_name():
    @rx.register_func
    def test_registry_bare_decorated(x):
        return x + 100

    try:
        assert rx.get_global_func("test_registry_bare_decorated")(1) == 101
    finally:
        rx.remove_global_func("test_registry_bare_decorated")


def test_register_twice_needs_override(unique_name):
    name = unique_name()
    rx.register_func(name, lambda: 1)
    with pytest.raises(ValueError, match="already registered"):
        rx.register_func(name, lambda: 2)
    assert rx.get_global_func(name)() == 1
    rx.register_func(name, lambda: 3, override=True)
    assert rx.get_global_func(name)() == 3


def test_builtins_cannot_be_replaced_by_accident():
    with pytest.raises(ValueError):
        rx.register_func("vm.builtin.move", lambda x: x)


def test_register_non_callable_is_a_type_error(unique_name):
    with pytest.raises(TypeError, match="not callable"):
        rx.register_func(unique_name(), 3)
    with pytest.raises(TypeError):
        rx.register_func(3)


def test_get_global_func(unique_name):
    with pytest.raises(ValueError, match='no global function named "test.registry.missing"'):  # as TVM
        rx.get_global_func("test.registry.missing")
    assert rx.get_global_func("test.registry.missing", allow_missing=True) is None
    f = rx.get_global_func("vm.builtin.int.add")
    assert isinstance(f, rx.Closure)
    assert f.name == "vm.builtin.int.add"
    assert f(2, 3) == 5
    assert "packed" in repr(f)


def test_list_contains_builtins():
    names = rx.list_global_func_names()
    for n in ["vm.builtin.alloc_shape_heap", "vm.builtin.shape_of", "vm.op.add", "vm.builtin.make_closure"]:
        assert n in names


def test_remove(unique_name):
    name = unique_name()
    rx.register_func(name, lambda: 0)
    rx.remove_global_func(name)
    assert name not in rx.list_global_func_names()
    with pytest.raises(KeyError, match=f'cannot remove "{name}": no global function has that name'):
        rx.remove_global_func(name)


def test_register_a_closure(unique_name):
    name = unique_name()
    rx.register_func(name, rx.get_global_func("vm.builtin.int.mul"))
    assert call_packed_vm(name, 2)["main"](3, 4) == 12


def test_vm_resolves_functions_when_built(unique_name):
    name = unique_name()
    rx.register_func(name, lambda: "old")
    vm = call_packed_vm(name, 0)
    rx.register_func(name, lambda: "new", override=True)
    assert vm["main"]() == "old"
    assert call_packed_vm(name, 0)["main"]() == "new"
