"""Apache TVM and relaxvm in one process: each runtime's kernels report their errors to that
runtime, whichever was imported or opened a library first (attack compiled/03, second part).

relaxvm's definitions of the functions kernels import are bound only by the libraries relaxvm
opens (its private copies import them under relaxvm's own names); TVM's kernels keep binding
TVM's. The kernel of the hand suite's ``kernel_assert`` model raises for a negative input.
"""

from __future__ import annotations

import os
import sys

import pytest
from attack import run_attack

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tvm_corpus"))
import located  # noqa: E402

SUITE = located.suite_dir("hand")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TVM_LIB = os.path.join(ROOT, ".venv-tvm", "lib")
TVM_SITE = next(
    (
        os.path.join(TVM_LIB, d, "site-packages")
        for d in (sorted(os.listdir(TVM_LIB)) if os.path.isdir(TVM_LIB) else [])
        if os.path.isdir(os.path.join(TVM_LIB, d, "site-packages", "tvm"))
    ),
    None,
)
pytestmark = [
    pytest.mark.skipif(SUITE is None, reason=located.SKIP_REASON),
    pytest.mark.skipif(TVM_SITE is None, reason="needs TVM in .venv-tvm (scripts/setup-venv-tvm.sh)"),
]

MESSAGE = "input must be non-negative"


def _code(first: str) -> str:
    """Attack code: both runtimes load the model (relaxvm its copy, TVM the file), `first` first,
    then each runs the raising kernel twice and the good input once."""
    path = os.path.join(SUITE or "", "kernel_assert", "model.so")
    return f"""
import sys, numpy as np
sys.path.append({TVM_SITE!r})
bad, good = np.array([-1.0, 2.0], "float32"), np.array([1.0, 4.0], "float32")

def with_relaxvm():
    import relaxvm as rx
    vm = rx.VirtualMachine(rx.load_module({path!r}))
    def run(x):
        try:
            return vm["main"](rx.tensor(x)).numpy().tolist()
        except rx.VMError as e:
            return type(e).__name__ + ": " + str(e).splitlines()[0]
    return run

def with_tvm():
    import tvm
    from tvm import relax
    vm = relax.VirtualMachine(tvm.runtime.load_module({path!r}), tvm.cpu())
    def run(x):
        try:
            return vm["main"](tvm.runtime.tensor(x)).numpy().tolist()
        except Exception as e:
            return type(e).__name__ + ": " + str(e).splitlines()[0]
    return run

if {first!r} == "relaxvm":
    ours = with_relaxvm()
    theirs = with_tvm()
else:
    theirs = with_tvm()
    ours = with_relaxvm()
for name, run in (("relaxvm", ours), ("tvm", theirs), ("relaxvm", ours), ("tvm", theirs)):
    print(name, run(bad))
print("good", ours(good), theirs(good))
"""


@pytest.mark.parametrize("first", ["relaxvm", "tvm"])
def test_each_runtime_gets_its_own_kernel_errors(first: str) -> None:
    out = run_attack(_code(first))
    out.assert_ok()
    lines = [line for line in out.stdout.splitlines() if line.startswith(("relaxvm ", "tvm ", "good "))]
    assert len(lines) == 5, out.stdout
    for line in lines[:4]:
        who, said = line.split(" ", 1)
        assert MESSAGE in said, line
        # relaxvm's error names the kernel; TVM's is its own RuntimeError.
        expected = 'kernel "checked_sqrt" raised RuntimeError' if who == "relaxvm" else "RuntimeError: "
        assert expected in said, line
    assert lines[4] == "good [1.0, 2.0] [1.0, 2.0]", lines[4]
