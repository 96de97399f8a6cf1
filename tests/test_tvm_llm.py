"""Tiny Llamas compiled by TVM (``TIRPagedKVCache``, the ``*_cpu`` kernels) replayed on relaxvm
byte for byte: every schedule of the corpus suite ``llm`` (``tests/tvm_corpus/build_llm.py``) —
prefill, chunked and batch prefill, token-by-token and batched decode, forks at and inside pages,
popn into a shared prefix, remove, clear, greedy and top-p generation — through the same driver
as TVM ran, with TVM's logits and sampled tokens required bit for bit. And TVM's
``test_pipeline_with_kv_cache``: a compiled program driving the legacy cache."""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest

import relaxvm as rx

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "tvm_corpus"))
import build_llm  # noqa: E402  (the driver; imports TVM only to build)
from located import SKIP_REASON, suite_dir  # noqa: E402

SUITE = suite_dir("llm")


def _manifest() -> dict:
    import json

    if SUITE is None:
        return {"models": []}
    with open(os.path.join(SUITE, "manifest.json")) as f:
        return json.load(f)


MANIFEST = _manifest()


def _runtime(model: dict) -> build_llm.Runtime:
    vm = rx.VirtualMachine(rx.load_module(os.path.join(SUITE, model["library"])), rx.cpu())
    params = build_llm.load_params(os.path.join(SUITE, model["params"]))
    return build_llm.Runtime(vm, rx.get_global_func, rx.tensor, rx.Shape, [rx.tensor(p) for p in params])


def _bits(a: np.ndarray) -> tuple:
    a = np.ascontiguousarray(a)
    return (a.dtype.str, a.shape, a.tobytes())


@pytest.mark.skipif(SUITE is None, reason=SKIP_REASON)
@pytest.mark.parametrize(
    "model,k",
    [(m["name"], k) for m in MANIFEST["models"] for k in range(len(m["schedules"]))],
)
def test_schedule_replays_bit_for_bit(model, k):
    m = next(x for x in MANIFEST["models"] if x["name"] == model)
    sched = m["schedules"][k]
    logits, tokens = build_llm.run_schedule(_runtime(m), sched["schedule"])
    assert tokens == sched["tokens"]
    with np.load(os.path.join(SUITE, sched["file"])) as z:
        expected = [z[f"l{i}"] for i in range(len(z.files))]
    assert len(logits) == len(expected) == sched["forwards"]
    for i, (ours, theirs) in enumerate(zip(logits, expected)):
        if _bits(ours) != _bits(theirs):
            diff = np.abs(ours.astype("float64") - theirs.astype("float64")).max()
            step = [s for s in sched["schedule"]["steps"] if s["op"] in ("forward", "generate")]
            pytest.fail(f"forward {i} differs from TVM's (max abs diff {diff}); schedule steps: {step}")


@pytest.mark.skipif(SUITE is None, reason=SKIP_REASON)
def test_corpus_covers_the_engine_protocol():
    """The schedules hold every kind of step the suite promises, on every model."""
    assert len(MANIFEST["models"]) >= 4
    kinds = set()
    for m in MANIFEST["models"]:
        c = m["config"]
        kinds.add(("ratio", c["heads"] // c["kv_heads"]))
        for s in m["schedules"]:
            for step in s["schedule"]["steps"]:
                kinds.add(step["op"])
                if step["op"] == "fork":
                    kinds.add("fork_mid_page" if step["pos"] % build_llm.PAGE_SIZE else "fork_page_boundary")
                if step["op"] == "forward" and len(step["seqs"]) > 1:
                    kinds.add("batch_decode" if all(len(t) == 1 for t in step["tokens"]) else "batch_prefill")
                if step["op"] == "generate":
                    kinds.add("greedy" if step["temperature"] == 0 else "top_p")
    for want in ["add", "fork", "popn", "remove", "forward", "generate", "batch_decode", "greedy", "top_p"]:
        assert want in kinds, (want, kinds)
    assert {("ratio", 1), ("ratio", 2), ("ratio", 4)} <= kinds


@pytest.mark.skipif(SUITE is None, reason=SKIP_REASON)
def test_legacy_cache_pipeline():
    """TVM's test_pipeline_with_kv_cache on relaxvm: each step's view equals TVM's bit for bit."""
    legacy = MANIFEST["legacy"]
    vm = rx.VirtualMachine(rx.load_module(os.path.join(SUITE, legacy["library"])), rx.cpu())
    cache = vm["create_kv_cache"](rx.Shape([1]))
    with np.load(os.path.join(SUITE, legacy["file"])) as z:
        for i in range(legacy["steps"]):
            kv, cache = vm["main"](rx.tensor(z[f"x{i}"]), rx.tensor(z[f"y{i}"]), rx.Shape((i + 1, 4)), cache)
            assert _bits(kv.numpy()) == _bits(z[f"kv{i}"]), i
    assert repr(cache) == (
        "<relaxvm.Object relax.vm.AttentionKVCacheLegacy: dtype=float32, reserved=(16, 4), fill_count=9, window_pos=0>"
    )


@pytest.mark.skipif(SUITE is None, reason=SKIP_REASON)
def test_the_example_runs_on_relaxvm_alone():
    """examples/llm.py on the corpus's compiled model (no TVM in this environment): prefill,
    greedy decode, forks decoded as one batch with top-p, the cache's repr after each phase."""
    import ast
    import subprocess

    model = next(m for m in MANIFEST["models"] if m["name"] == "mha_h16_l2")
    folder = os.path.dirname(os.path.join(SUITE, model["library"]))
    example = os.path.join(os.path.dirname(__file__), "..", "examples", "llm.py")
    done = subprocess.run(
        [sys.executable, example, folder, "--steps", "4"], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("greedy:") and len(ast.literal_eval(lines[0].split(":", 1)[1])) == 4, done.stdout
    assert sum(line.startswith("top-p, sequence") for line in lines) == 4, done.stdout
    assert "sequences {0: 26, 1: 23, 2: 23, 3: 23}" in done.stdout, done.stdout
    assert "sequences {0: 26}" in lines[-1], done.stdout


@pytest.mark.skipif(SUITE is None, reason=SKIP_REASON)
def test_profile_and_trace_of_a_decode_step_list_the_cache_kernels():
    """The kernels the paged KV cache runs for a layer (split/RoPE, append, decode attention)
    are calls the profiler and the tracer see, inside the cache builtin that made them and at
    its instruction, under their own names, as kernel rows."""
    m = next(x for x in MANIFEST["models"] if x["name"] == "mha_h16_l2")
    vm = rx.VirtualMachine(rx.load_module(os.path.join(SUITE, m["library"])), rx.cpu(), profile=True)
    params = [rx.tensor(p) for p in build_llm.load_params(os.path.join(SUITE, m["params"]))]
    f = rx.get_global_func
    cache = vm["create_paged_kv_cache"](*[rx.Shape([d]) for d in (4, 256, 64, build_llm.PAGE_SIZE, 0)])
    f("vm.builtin.kv_state_add_sequence")(cache, 0)
    hidden = m["config"]["hidden"]
    f("vm.builtin.kv_state_begin_forward")(cache, rx.Shape([0]), rx.Shape([5]))
    vm["prefill"](rx.tensor(np.ones((1, 5, hidden), "float32")), cache, params)
    f("vm.builtin.kv_state_end_forward")(cache)
    x = rx.tensor(np.ones((1, 1, hidden), "float32"))
    fused = "vm.builtin.attention_kv_cache_attention_with_fused_qkv"
    kernels = {"fused_rope", "tir_kv_cache_transpose_append", "batch_decode_paged_kv_cpu"}

    f("vm.builtin.kv_state_begin_forward")(cache, rx.Shape([0]), rx.Shape([1]))
    report = vm.profile("decode", x, cache, params)
    f("vm.builtin.kv_state_end_forward")(cache)
    rows = {r.name: r for r in report.rows}
    layers = m["config"]["layers"]
    for k in kernels:
        assert k in rows, list(rows)
        assert rows[k].kind == "kernel" and rows[k].count == layers, (k, rows[k].kind, rows[k].count)
    assert rows[fused].count == layers

    f("vm.builtin.kv_state_popn")(cache, 0, 1)
    f("vm.builtin.kv_state_begin_forward")(cache, rx.Shape([0]), rx.Shape([1]))
    trace = vm.trace("decode", x, cache, params)
    f("vm.builtin.kv_state_end_forward")(cache)
    steps = list(trace)
    for s in steps:
        if s.callee in kernels:
            # Inside the builtin: one level deeper, at its instruction.
            parent = max((p for p in steps if p.callee == fused and p.index < s.index), key=lambda p: p.index)
            assert s.depth == parent.depth + 1 and (s.function, s.pc) == (parent.function, parent.pc)
    assert {s.callee for s in steps} >= kernels | {fused}
