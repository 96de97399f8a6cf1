"""Python functions registered at module level, importable by workers: what a pickled
executable records and registers again in another process (tests/test_pickled_executables.py)."""

import numpy as np

import relaxvm as rx


@rx.register_func("test.pickled.scale", override=True)
def scale(x, k):
    """``x * k`` as a new tensor."""
    return rx.tensor(np.asarray(x) * k)


def build():
    """An executable whose ``main(x, k)`` calls ``test.pickled.scale``."""
    ib = rx.ExecBuilder()
    with ib.function("main", num_inputs=2):
        ib.emit_call("test.pickled.scale", args=[ib.r(0), ib.r(1)], dst=ib.r(2))
        ib.emit_ret(ib.r(2))
    return ib.get()


def double(x):
    """``2 * x``; registered by the test that uses it, not on import."""
    return rx.tensor(np.asarray(x) * 2)
