"""The table of R.call_py_func (relaxvm-builtins' py_funcs, shared with Rust and C callers)
through Python: functions that use the table while they run or while they are dropped (a
`__del__` registering or clearing) neither hang nor crash, each in a capped child process."""

from __future__ import annotations

from attack import CALL_ONE, run_attack

TABLE = (
    CALL_ONE
    + """
register = rx.get_global_func("vm.builtin.register_py_func")
clear = rx.get_global_func("vm.builtin.clear_py_func_registry")
get = rx.get_global_func("vm.builtin.get_py_func")
call = prog("vm.builtin.call_py_func")
"""
)


def test_a_function_dropped_by_a_replacement_or_a_clear_may_use_the_table():
    """Dropping the replaced function runs `__del__`, which registers again: the table's lock
    is no longer held then (before, this deadlocked)."""
    out = run_attack(
        TABLE
        + """
class Owner:
    def __call__(self, x):
        return x
    def __del__(self):
        register("from_del", lambda: 7)
register("f", Owner())
register("f", lambda x: x + 1)  # drops the Owner
print(call(("f", (41,))), call(("from_del", ())))
register("g", Owner())
clear()  # drops the Owner, which registers from_del again
print(call(("from_del", ())))
"""
    )
    out.assert_ok("42 7\n7")


def test_a_function_may_change_the_table_while_it_runs():
    out = run_attack(
        TABLE
        + """
def self_replacing(x):
    register("h", lambda x: x * 10)
    get("h")
    return x + 1
register("h", self_replacing)
print(call(("h", (1,))), call(("h", (1,))))
def clearing(x):
    clear()
    return x
register("k", clearing)
print(call(("k", (5,))))
try:
    call(("k", (5,)))
except rx.VMValueError as e:
    print("gone:", "not found in the call_py_func registry" in str(e))
"""
    )
    out.assert_ok("2 10\n5\ngone: True")
