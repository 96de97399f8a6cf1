"""A registered function's destructor that calls back into the registry (capi/01): a Python
callable whose ``__del__`` registers another function, replaced or removed. The registry drops
what it replaces after releasing its locks, so this completes instead of deadlocking."""

from __future__ import annotations

import pytest
from attack import run_attack

ATTACK = r"""
import relaxvm as rx
class Cb:
    def __call__(self, *a):
        return 1
    def __del__(self):
        rx.register_func("atk.other", lambda *a: 2, override=True)
rx.register_func("atk.f", Cb(), override=True)
{how}
print(rx.get_global_func("atk.other")() == 2)
"""


@pytest.mark.parametrize(
    "how",
    ['rx.register_func("atk.f", lambda *a: 3, override=True)', 'rx.remove_global_func("atk.f")'],
    ids=["replaced", "removed"],
)
def test_a_destructor_that_registers_does_not_deadlock(how):
    out = run_attack(ATTACK.replace("{how}", how), timeout=30)
    out.assert_ok("True")
