"""TVM's sampling and logit builtins (``lm_support.cc``) on relaxvm, bit for bit against TVM's
recorded outcomes (the corpus suite ``lm_support``, built by ``tests/tvm_corpus/build_lm_support.py``):
the returned token or tensor, every tensor argument after the call (the penalties and the softmax
write in place), and an error where TVM raises one. Then the calls TVM cannot be asked about
(it reads outside its inputs), which relaxvm refuses."""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest

import relaxvm as rx

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "tvm_corpus"))
import build_lm_support  # noqa: E402  (NaN scalars' bits; imports TVM only to build)
import corpus  # noqa: E402
from located import SKIP_REASON, suite_dir  # noqa: E402

SUITE = suite_dir("lm_support")
NAN_SORT = "std::sort read outside the vector"


def _manifest() -> dict:
    return corpus.load_manifest(SUITE) if SUITE else {"cases": []}


def _bits(a: np.ndarray) -> tuple:
    a = np.ascontiguousarray(a)
    return (a.dtype.str, a.shape, a.tobytes())


def _run(entry: dict):
    """relaxvm's outcome of a case: ("result", returned, tensors after) or ("error", exception)."""
    args, _ = corpus.load_case(SUITE, entry)
    args = build_lm_support.with_nan_bits(args, entry.get("nan_args", {}))
    vm_args = [rx.tensor(a) if isinstance(a, np.ndarray) else a for a in args]
    try:
        ret = rx.get_global_func(entry["function"])(*vm_args)
    except Exception as e:  # noqa: BLE001 - compared with TVM's outcome below
        return "error", e, args
    after = [t.numpy() for t in vm_args if isinstance(t, rx.Tensor)]
    return "result", (ret, after), args


@pytest.mark.skipif(SUITE is None, reason=SKIP_REASON)
def test_every_recorded_call_matches_tvm():
    cases = _manifest()["cases"]
    assert len(cases) > 900, len(cases)
    compared = refused_nan = tvm_errors = 0
    by_function: dict[str, int] = {}
    for k, entry in enumerate(cases):
        kind, outcome, args = _run(entry)
        where = f"case {k} ({entry['function']}, {entry['file']})"
        if "error" in entry:
            # TVM raised (or crashed); relaxvm raises too, never returns a value TVM did not.
            assert kind == "error", f"{where}: TVM raised {entry['error']!r}, relaxvm returned {outcome!r}"
            tvm_errors += 1
            continue
        tvm_ret, tvm_after = corpus.load_case(SUITE, entry)[1]
        if kind == "error":
            # Only a sort that NaN breaks is refused where TVM returned (undefined behaviour there).
            has_nan = any(isinstance(a, np.ndarray) and a.dtype.kind == "f" and np.isnan(a).any() for a in args)
            assert has_nan and NAN_SORT in str(outcome), (
                f"{where}: relaxvm raised {outcome!r}, TVM returned {tvm_ret!r}"
            )
            refused_nan += 1
            continue
        ret, after = outcome
        if isinstance(tvm_ret, np.ndarray):
            assert _bits(ret.numpy()) == _bits(tvm_ret), f"{where}: returned {ret.numpy()} vs TVM {tvm_ret}"
        else:
            assert ret == tvm_ret, f"{where}: returned {ret!r}, TVM {tvm_ret!r}"
        assert len(after) == len(tvm_after)
        for i, (a, b) in enumerate(zip(after, tvm_after)):
            assert _bits(a) == _bits(b), f"{where}: tensor argument {i} after the call:\n{a}\nTVM:\n{b}"
        compared += 1
        by_function[entry["function"]] = by_function.get(entry["function"], 0) + 1
    print(
        f"{compared} calls equal to TVM's bit for bit, {tvm_errors} TVM errors raised, {refused_nan} refused (NaN sort)"
    )
    print(by_function)
    assert compared > 700
    # Every builtin is compared on successful calls, not only on errors.
    assert len(by_function) == 6, by_function


@pytest.mark.skipif(SUITE is None, reason=SKIP_REASON)
def test_ties_are_broken_as_libstdcxx_does():
    """The suite holds tie-heavy rows where a stable order would return another token than
    libstdc++'s std::sort; relaxvm returns TVM's."""
    differing = 0
    for entry in _manifest()["cases"]:
        if entry["function"] != "vm.builtin.sample_top_p_from_logits" or "error" in entry:
            continue
        args, (tvm_ret, _) = corpus.load_case(SUITE, entry)
        logits, temperature = args[0].reshape(-1), args[1]
        if temperature < 1e-6 and not np.isnan(logits).any():
            stable_first = int(np.argsort(-logits, kind="stable")[0])
            differing += stable_first != tvm_ret
    assert differing > 0, "no case tells libstdc++'s tie order from a stable sort"


# Calls TVM reads outside its inputs on (not run on TVM): refused, with what was expected.


def f32(*a):
    return rx.tensor(np.array(a, dtype="float32"))


def test_multinomial_refuses_float64_samples():
    f = rx.get_global_func("vm.builtin.multinomial_from_uniform")
    prob = rx.tensor(np.array([[0.5, 0.5]], dtype="float32"))
    with pytest.raises(TypeError, match=r"float32.*uniform_samples.*found.*float64"):
        f(prob, rx.tensor(np.array([[0.7]], dtype="float64")))
    assert f(prob, rx.tensor(np.array([[0.7]], dtype="float32"))).numpy().tolist() == [[1]]


@pytest.mark.parametrize(
    "name,args,match",
    [
        ("vm.builtin.apply_repetition_penalty", lambda: [f32(1, 2), rx.tensor(np.array([2], "int32")), 1.5], "outside"),
        (
            "vm.builtin.apply_repetition_penalty",
            lambda: [f32(1, 2), rx.tensor(np.array([-1], "int32")), 1.5],
            "outside",
        ),
        (
            "vm.builtin.apply_presence_and_frequency_penalty",
            lambda: [f32(1, 2), rx.tensor(np.array([0, 1], "int32")), rx.tensor(np.array([1], "int32")), 0.1, 0.1],
            "token_freqs",
        ),
        ("vm.builtin.apply_softmax_with_temperature", lambda: [rx.tensor(np.float32(1.0)), 1.0], "0-d"),
        ("vm.builtin.apply_softmax_with_temperature", lambda: [rx.tensor(np.ones((2, 3), "float32")), 1.0], "leading"),
        ("vm.builtin.sample_top_p_from_logits", lambda: [rx.tensor(np.zeros(0, "float32")), 1.0, 0.9, 0.5], "empty"),
        (
            "vm.builtin.multinomial_from_uniform",
            lambda: [rx.tensor(np.ones(3, "float32")), rx.tensor(np.ones(3, "float32"))],
            "batch, vocab",
        ),
    ],
)
def test_calls_tvm_reads_outside_are_refused(name, args, match):
    a = args()
    before = [t.numpy().copy() for t in a if isinstance(t, rx.Tensor)]
    with pytest.raises(ValueError, match=match):
        rx.get_global_func(name)(*a)
    assert all(np.array_equal(t.numpy(), b) for t, b in zip([t for t in a if isinstance(t, rx.Tensor)], before))


def test_softmax_nans_have_tvms_sign():
    """Attack finding sampling/01: with an inf and a NaN logit the denominator becomes x86's
    default NaN (negative) and stays it, as TVM's `d * e + f` keeps its left operand's NaN;
    TVM's bytes, recorded with TVM 0.27."""
    x = rx.tensor(np.array([[1.0, np.inf, 2.0, np.nan]], dtype="float32"))
    rx.get_global_func("vm.builtin.apply_softmax_with_temperature")(x, 0.5)
    assert [hex(v) for v in x.numpy().view("uint32").ravel()] == [
        "0xffc00000",
        "0xffc00000",
        "0xffc00000",
        "0x7fc00000",
    ]
