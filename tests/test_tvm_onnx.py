"""ONNX backend test models compiled by Apache TVM 0.27, run on relaxvm.

The suite ``onnx`` of the corpus in ``$RELAXVM_TVM_CORPUS`` (built by ``tests/tvm_corpus/build_onnx.py``
in ``.venv-tvm``) holds only models TVM itself runs correctly; relaxvm must reproduce TVM's
outputs bit for bit, since it runs the very kernels TVM compiled. Skipped when the corpus is
absent (TVM is not installed here, so the corpus cannot be built from this venv).
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

import relaxvm as rx

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "tvm_corpus"))
import corpus  # noqa: E402

SUITE = "onnx"


def _suite_dir() -> tuple[str | None, str]:
    """The suite's folder, or None and why it is unavailable."""
    root = os.environ.get("RELAXVM_TVM_CORPUS")
    if not root:
        return None, "RELAXVM_TVM_CORPUS is not set (scripts/test.sh builds the TVM corpus)"
    suite_dir = os.path.join(root, SUITE)
    if not os.path.exists(os.path.join(suite_dir, corpus.MANIFEST)):
        return None, f"no {SUITE}/{corpus.MANIFEST} in {root}"
    return suite_dir, ""


SUITE_DIR, SKIP_REASON = _suite_dir()
MANIFEST = corpus.load_manifest(SUITE_DIR) if SUITE_DIR else None
# Without a corpus one skipped parameter stands for the suite, so the reason shows in -ra.
MODELS = (
    [pytest.param(m, id=m["name"]) for m in MANIFEST["models"]]
    if MANIFEST
    else [pytest.param(None, id="no-corpus", marks=pytest.mark.skip(reason=SKIP_REASON))]
)


def _to_vm(value: Any) -> Any:
    """A stored argument as the VM takes it: arrays become relaxvm tensors, tuples stay tuples
    (TVM's Array), shapes become ``rx.Shape``."""
    if isinstance(value, np.ndarray):
        return rx.tensor(value)
    if isinstance(value, corpus.ShapeValue):
        return rx.Shape(list(value))
    if isinstance(value, tuple):
        return tuple(_to_vm(v) for v in value)
    return value


def assert_identical(got: Any, want: Any, where: str = "result") -> None:
    """relaxvm's ``got`` is exactly TVM's ``want``: same structure, dtypes, shapes and values
    (NaN equal to NaN, as it comes from the same kernel)."""
    if isinstance(want, np.ndarray):
        assert hasattr(got, "numpy"), f"{where}: expected a tensor, got {type(got).__name__}"
        arr = got.numpy()
        assert arr.dtype == want.dtype, f"{where}: dtype {arr.dtype} != TVM's {want.dtype}"
        assert arr.shape == want.shape, f"{where}: shape {arr.shape} != TVM's {want.shape}"
        equal_nan = want.dtype.kind in "fc"
        assert np.array_equal(arr, want, equal_nan=equal_nan), f"{where}: values differ from TVM's"
    elif isinstance(want, corpus.ShapeValue):
        assert isinstance(got, rx.Shape), f"{where}: expected a shape, got {type(got).__name__}"
        assert tuple(got) == tuple(want), f"{where}: shape {tuple(got)} != TVM's {tuple(want)}"
    elif isinstance(want, tuple):
        assert isinstance(got, Sequence) and not isinstance(got, (str, rx.Shape)), (
            f"{where}: expected a tuple, got {type(got).__name__}"
        )
        assert len(got) == len(want), f"{where}: {len(got)} fields != TVM's {len(want)}"
        for i, (g, w) in enumerate(zip(got, want)):
            assert_identical(g, w, f"{where}[{i}]")
    elif want is None:
        assert got is None, f"{where}: expected None, got {type(got).__name__}"
    else:
        # bool is an int in Python; the stored kind (bool/int/float) must survive too.
        assert type(got) is type(want), f"{where}: {type(got).__name__} != TVM's {type(want).__name__}"
        assert got == want or (got != got and want != want), f"{where}: {got!r} != TVM's {want!r}"


@pytest.mark.parametrize("model", MODELS)
def test_onnx_model(model: dict) -> None:
    assert SUITE_DIR is not None
    ex = rx.load_module(os.path.join(SUITE_DIR, model["library"]))
    vm = rx.VirtualMachine(ex, rx.cpu())
    for case in model["cases"]:
        args, want = corpus.load_case(SUITE_DIR, case)
        call = vm[case["function"]]
        if "error" in case:
            # TVM refused these arguments (an input of the wrong rank) with a message holding
            # case["error"]; relaxvm's check gives the same words, as a VMError.
            with pytest.raises(rx.VMError, match=re.escape(case["error"])):
                call(*[_to_vm(a) for a in args])
            continue
        assert_identical(call(*[_to_vm(a) for a in args]), want, f"{case['file']}: result")


def test_onnx_manifest(capsys: pytest.CaptureFixture[str]) -> None:
    """The manifest is consistent with itself and its files; prints how many models run."""
    if MANIFEST is None:
        pytest.skip(SKIP_REASON)
    assert SUITE_DIR is not None
    counts = MANIFEST["counts"]
    models = MANIFEST["models"]
    categories = {k: v for k, v in counts.items() if k != "total"}
    assert sum(categories.values()) == counts["total"]
    assert counts["passed"] == len(models)
    assert len({m["name"] for m in models}) == len(models)
    for m in models:
        assert os.path.exists(os.path.join(SUITE_DIR, m["library"])), m["library"]
        assert m["cases"], f"{m['name']} has no case"
        assert set(m["builtins"]) <= set(m["packed_functions"])
    assert MANIFEST["builtins"] == sorted({b for m in models for b in m["builtins"]})
    # Error cases exist, so test_onnx_model's refusal branch runs.
    assert sum("error" in c for m in models for c in m["cases"]) >= len(models) // 2
    with capsys.disabled():
        kind = "full set" if MANIFEST["full"] else "default subset"
        print(
            f"\nonnx suite ({kind}, TVM {MANIFEST['tvm_version']}): {len(models)} models run; "
            + ", ".join(f"{k} {v}" for k, v in counts.items())
        )
