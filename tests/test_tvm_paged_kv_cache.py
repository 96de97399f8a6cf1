"""TVM's paged KV cache on relaxvm, bit for bit: the "paged_kv" suite of the corpus
(tests/tvm_corpus/build_paged_kv.py) holds, per configuration, a .so compiled by TVM 0.27 whose
``create_paged_kv_cache`` builds the cache with the ``*_cpu`` TIR kernels, and schedules of cache
operations (TVM's own CPU test and seeded random ones) with every result TVM produced. Here,
without TVM, each schedule is replayed through ``rx.get_global_func`` and every attention
output, cached K/V and query result must be identical (SHA-256 of the bytes), and every call TVM
refused must be refused (and leave the cache giving TVM's bytes afterwards)."""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest

import relaxvm as rx

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "tvm_corpus"))
import build_paged_kv as pkv  # noqa: E402
import corpus  # noqa: E402
import located  # noqa: E402
import paged_kv_ops as pko  # noqa: E402
import paged_kv_reference as ref  # noqa: E402

SUITE = located.suite_dir(pkv.SUITE)
AVAILABLE = SUITE is not None
pytestmark = pytest.mark.skipif(not AVAILABLE, reason=located.SKIP_REASON)
CONFIGS = corpus.load_manifest(SUITE)["configs"] if AVAILABLE else []
SCHEDULES = [(c["name"], s["name"]) for c in CONFIGS for s in c["schedules"]]

API = pko.Api(rx.get_global_func, rx.tensor, rx.Shape)
_vms: dict[str, rx.VirtualMachine] = {}


def config(name: str) -> dict:
    return next(c for c in CONFIGS if c["name"] == name)


def new_cache(cfg: dict):
    if cfg["name"] not in _vms:
        _vms[cfg["name"]] = rx.VirtualMachine(rx.load_module(os.path.join(SUITE, cfg["library"])), rx.cpu())
    return _vms[cfg["name"]]["create_paged_kv_cache"](*[rx.Shape([v]) for v in cfg["create_args"]])


def replay(cfg: dict, ops: list[dict], cache) -> int:
    """Replays ``ops``; returns how many results were compared."""
    compared = 0
    for i, op in enumerate(ops):
        call = {k: v for k, v in op.items() if k not in pko.RESULT_KEYS}
        if op.get("error"):
            # TVM's refusal is recorded without its text (TVM's messages are not relaxvm's): the
            # refusal must be a clean one, not a caught panic or an internal error.
            with pytest.raises(rx.VMError) as info:
                pko.run_op(API, cache, cfg, call)
            message = str(info.value)
            assert "panicked" not in message and "internal error" not in message, f"op {i} {call}: {message}"
            continue
        if op.get("undefined_in_tvm"):
            # TVM's kernel read an uninitialised value here, so its bytes are no reference:
            # relaxvm's output is compared with the same layer computed one kernel row per call.
            assert_matches_by_row(cfg, cache, call, i)
            compared += 1
            continue
        if op.get("nonfinite_rows"):
            assert_nonfinite_rows_recomputed(cfg, cache, call, op, i)
            compared += 1
            continue
        got = pko.run_op(API, cache, cfg, call)
        for key, value in got.items():
            assert value == op[key], f"op {i} {call}: {key} differs from TVM's\n  relaxvm {value}\n  TVM     {op[key]}"
            compared += 1
    return compared


def assert_matches_by_row(cfg: dict, cache, op: dict, i: int) -> None:
    """Runs attention op ``op`` (fused QKV on a sliding layer, in a step of several tokens)
    twice: as the model does, then through ``relaxvm.kv_cache.attention_with_fused_qkv_by_row``,
    which computes every row on a kernel row of its own (so no row starts on another's running
    maximum; docs/kv-cache.md). The second call appends the same K/V at the same positions
    again, and reads only the columns cached before the step, so it sees what the first saw.

    Tolerance: the two differ only in the maximum each row's exponentials are taken against
    (a stale one is larger), which scales every weight of a row by the same factor before the
    normalisation: float32 rounding of at most a window of terms and one merge, the float32
    tolerance of ``paged_kv_reference`` (``RTOL``, ``ATOL``)."""
    assert op["op"] == "attn", f"op {i}: only fused attention is undefined in TVM, found {op}"
    got, want = fused_and_by_row(cfg, cache, op)
    assert np.isfinite(got).all(), f"op {i} {op}: non-finite output"
    np.testing.assert_allclose(got, want, rtol=ref.RTOL, atol=ref.ATOL, err_msg=f"op {i} {op}")


def fused_and_by_row(cfg: dict, cache, op: dict) -> tuple[np.ndarray, np.ndarray]:
    """Fused attention op ``op`` as the model runs it, then through the by-row builtin (see
    assert_matches_by_row for why the second sees what the first saw): both outputs."""
    qkv = pko.qkv_input(cfg, op["seed"], op["rows"])
    shape = (op["rows"], cfg["num_qo_heads"], cfg["head_dim"])
    outs = []
    for name in (
        "vm.builtin.attention_kv_cache_attention_with_fused_qkv",
        "relaxvm.kv_cache.attention_with_fused_qkv_by_row",
    ):
        out = rx.tensor(np.zeros(shape, cfg["dtype"]))
        API.f(name)(cache, op["layer"], op["sm_scale"], rx.tensor(qkv), out)
        outs.append(out.numpy())
    return outs[0], outs[1]


def assert_nonfinite_rows_recomputed(cfg: dict, cache, call: dict, op: dict, i: int) -> None:
    """An attention op where TVM's output has rows holding NaN (its sliding-window prefill
    kernel: a row starting on a stale maximum, or past the window with no cached column it may
    see; kvcache/01). relaxvm gives TVM's bytes on every other row (the recorded digest zeroes
    those rows) and computes those rows again one kernel row per call: finite. For fused
    attention the whole output is also compared with the by-row builtin (assert_matches_by_row),
    which checks the rows TVM computed against their own one-row computations."""
    bad = op["nonfinite_rows"]
    if call["op"] == "attn":
        got, want = fused_and_by_row(cfg, cache, call)
        np.testing.assert_allclose(got, want, rtol=ref.RTOL, atol=ref.ATOL, err_msg=f"op {i} {call}")
    else:
        assert call["op"] == "attn_shared", f"op {i}: unexpected non-finite output of {call}"
        qo, kv, d, dt, n = cfg["num_qo_heads"], cfg["num_kv_heads"], cfg["head_dim"], cfg["dtype"], call["rows"]
        seed = call["seed"] * 4
        q, k, v = (
            corpus.counter_floats(seed, (n, qo, d), dt),
            corpus.counter_floats(seed + 1, (n, kv, d), dt),
            corpus.counter_floats(seed + 2, (n, kv, d), dt),
        )
        out = rx.tensor(np.zeros((n, qo, d), dt))
        API.f("vm.builtin.attention_kv_cache_attention_with_shared_kv")(
            cache, call["layer"], call["sm_scale"], rx.tensor(q), rx.tensor(k), rx.tensor(v), out
        )
        got = out.numpy()
    assert np.isfinite(got[bad]).all(), f"op {i} {call}: rows {bad} are still non-finite"
    kept = got.copy()
    kept[bad] = 0
    assert corpus.digest(kept) == op["out"], f"op {i} {call}: the rows TVM computed differ from TVM's"


@pytest.mark.parametrize(("config_name", "schedule"), SCHEDULES)
def test_schedule_matches_tvm(config_name: str, schedule: str) -> None:
    cfg = config(config_name)
    ops = next(s for s in cfg["schedules"] if s["name"] == schedule)["ops"]
    assert replay(cfg, ops, new_cache(cfg)) > 0


def test_the_cache_is_an_object_that_shows_its_state() -> None:
    cfg = CONFIGS[0]
    cache = new_cache(cfg)
    add = rx.get_global_func("vm.builtin.kv_state_add_sequence")
    add(cache, 0)
    add(cache, 7)
    rx.get_global_func("vm.builtin.kv_state_begin_forward")(cache, rx.Shape([7]), rx.Shape([20]), None)
    text = repr(cache)
    assert "PagedAttentionKVCache" in text
    assert "pages in use 2/129" in text, text
    assert "{0: 0, 7: 20}" in text, text
    assert "in a forward step" in text


def test_refused_calls_say_what_was_expected_and_leave_the_cache_usable() -> None:
    """Every class of bad call is refused with a clear message; afterwards the schedule's next
    steps still give TVM's bytes (the first TVM test schedule, replayed after the refusals)."""
    cfg = next(c for c in CONFIGS if not c["sliding"])
    cache = new_cache(cfg)
    f = rx.get_global_func
    ops = next(s for s in cfg["schedules"] if s["name"] == "tvm_test/prefill_and_decode")["ops"]
    # Replay up to the first step after the clear, then refuse things, then go on.
    head = 1 + next(i for i, op in enumerate(ops) if op["op"] == "end")
    replay(cfg, ops[:head], cache)
    before = repr(cache)
    cases = [
        (lambda: f("vm.builtin.kv_state_add_sequence")(cache, 0), "already in the KV cache"),
        (lambda: f("vm.builtin.kv_state_popn")(cache, 0, 7), "expected 0 to its length 6"),
        (lambda: f("vm.builtin.kv_state_fork_sequence")(cache, 5, 9, -1), "cannot fork from sequence 5"),
        (
            lambda: f("vm.builtin.kv_state_fork_sequence")(cache, 0, 0, -1),
            "cannot fork onto sequence 0: it is already in the KV cache",
        ),
        (lambda: f("vm.builtin.kv_state_remove_sequence")(cache, 3), "not in the KV cache"),
        (lambda: f("vm.builtin.kv_state_begin_forward")(cache, rx.Shape([0, 3]), rx.Shape([1, 1]), None), "sequence 3"),
        (
            lambda: f("vm.builtin.kv_state_begin_forward")(cache, rx.Shape([0]), rx.Shape([513]), None),
            "prefill chunk size",
        ),
        (
            lambda: f("vm.builtin.kv_state_begin_forward")(cache, rx.Shape([0]), rx.Shape([1, 2]), None),
            "as many append lengths",
        ),
        (
            lambda: f("vm.builtin.attention_kv_cache_debug_get_kv")(
                cache, 0, 0, 99, rx.empty((1,), "float32"), rx.empty((1,), "float32")
            ),
            "start < end <= 6",
        ),
        (lambda: f("vm.builtin.attention_kv_cache_get_sequence_length")(cache, 42), "sequence 42"),
        (lambda: f("vm.builtin.kv_state_add_sequence")(rx.tensor(np.zeros(2)), 0), "paged KV cache"),
    ]
    for call, message in cases:
        with pytest.raises(rx.VMError, match=message):
            call()
        assert repr(cache) == before
    # A step with wrong tensors: refused before any kernel runs.
    f("vm.builtin.kv_state_begin_forward")(cache, rx.Shape([0]), rx.Shape([1]), None)
    heads = cfg["num_qo_heads"] + 2 * cfg["num_kv_heads"]
    d = cfg["head_dim"]
    attn = f("vm.builtin.attention_kv_cache_attention_with_fused_qkv")
    good_out = rx.tensor(np.zeros((1, cfg["num_qo_heads"], d), cfg["dtype"]))
    bad = [
        (rx.tensor(np.zeros((1, heads, d), "float64")), good_out, "expected dtype float32, found float64"),
        (rx.tensor(np.zeros((1, heads + 1, d), cfg["dtype"])), good_out, f"expected shape \\(_, {heads}, {d}\\)"),
        (rx.tensor(np.zeros((1, heads, d), cfg["dtype"])), rx.tensor(np.zeros((2, 1), cfg["dtype"])), "output"),
    ]
    for qkv, out, message in bad:
        with pytest.raises(rx.VMError, match=message):
            attn(cache, 0, 0.125, qkv, out)
    with pytest.raises(rx.VMError, match="layer 9 is not in this cache"):
        attn(cache, 9, 0.125, rx.tensor(np.zeros((1, heads, d), cfg["dtype"])), good_out)
    # The cache is back where the schedule was (undo the step by popping it), and the rest
    # of TVM's schedule gives TVM's bytes.
    f("vm.builtin.kv_state_end_forward")(cache)
    f("vm.builtin.kv_state_popn")(cache, 0, 1)
    assert repr(cache) == before
    assert replay(cfg, ops[head:], cache) > 0


def test_calls_from_several_threads_are_serialised() -> None:
    import threading

    cfg = CONFIGS[0]
    cache = new_cache(cfg)
    add = rx.get_global_func("vm.builtin.kv_state_add_sequence")
    remove = rx.get_global_func("vm.builtin.kv_state_remove_sequence")
    errors: list[BaseException] = []

    def work(base: int) -> None:
        try:
            for k in range(200):
                add(cache, base + k)
            for k in range(200):
                remove(cache, base + k)
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=work, args=(1000 * t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert rx.get_global_func("vm.builtin.attention_kv_cache_empty")(cache)


def test_a_sliding_layer_step_past_the_window_gives_the_windowed_attention() -> None:
    """kvcache/04: in a step of several tokens whose first sequence already holds a full
    window, TVM's sliding-window prefill kernel starts its first row on a masked column with
    an uninitialised running maximum (its result depends on stack leftovers; see
    docs/kv-cache.md). relaxvm skips those masked columns instead, so the result is defined;
    for queries of one scale (these) each row is its attention to exactly the last ``window``
    tokens (the cached ones the window still holds, and the step's own up to itself), as a
    float64 reference computes it. (Later rows go on from the row before's maximum, as TVM's
    kernel does; rows that this turns NaN are computed again on their own, kvcache/01.)"""
    cfg = next((c for c in CONFIGS if c.get("layer_window")), None)
    if cfg is None:
        pytest.skip("the corpus has no configuration with a sliding layer")
    w, qo, kv, d = cfg["layer_window"], cfg["num_qo_heads"], cfg["num_kv_heads"], cfg["head_dim"]
    assert cfg["rope_mode"] == 0 and cfg["dtype"] == "float32"  # the reference applies no RoPE
    cache = new_cache(cfg)
    scale = d**-0.5
    cached, step, seed = w + 16, 8, 9_000
    pko.run_op(API, cache, cfg, {"op": "add", "seq": 0})
    pko.run_op(API, cache, cfg, {"op": "begin", "seqs": [0], "lens": [cached]})
    for layer in range(cfg["num_layers"]):
        pko.run_op(
            API, cache, cfg, {"op": "attn", "layer": layer, "sm_scale": scale, "seed": seed + layer, "rows": cached}
        )
    pko.run_op(API, cache, cfg, {"op": "end"})
    # Layer 0's cached keys and values: the k and v parts of the first step's qkv.
    qkv = pko.qkv_input(cfg, seed, cached).astype("float64")
    k_cached, v_cached = qkv[:, qo : qo + kv], qkv[:, qo + kv :]
    pko.run_op(API, cache, cfg, {"op": "begin", "seqs": [0], "lens": [step]})
    outs = []
    for _ in range(2):  # the same bytes when asked twice
        op = {"op": "attn_shared", "layer": 0, "sm_scale": scale, "seed": seed + 100, "rows": step}
        q = rx.tensor(corpus.counter_floats(4 * op["seed"], (step, qo, d), "float32"))
        k = corpus.counter_floats(4 * op["seed"] + 1, (step, kv, d), "float32")
        v = corpus.counter_floats(4 * op["seed"] + 2, (step, kv, d), "float32")
        out = rx.tensor(np.zeros((step, qo, d), "float32"))
        rx.get_global_func("vm.builtin.attention_kv_cache_attention_with_shared_kv")(
            cache, 0, scale, q, rx.tensor(k), rx.tensor(v), out
        )
        outs.append(out.numpy())
    assert outs[0].tobytes() == outs[1].tobytes()
    # The last `w` tokens up to row r: cached tokens cached - w + 1 + r .. cached - 1, then the
    # step's rows 0..r.
    want = ref.windowed_attention(q.numpy(), k_cached, v_cached, k, v, w, scale)
    want.assert_close(outs[0], "the step past the window")
    pko.run_op(API, cache, cfg, {"op": "end"})


def test_recomputed_sliding_rows_are_the_float64_windowed_attention() -> None:
    """Review R-kv-3: the rows relaxvm computes again one kernel row per call (kvcache/01,
    kvcache/02) compared with an independent float64 windowed attention, not only with the same
    code. Two sequences, one short and one past the window, a step of 8 tokens each; queries of
    the first sequence and of every other row of the second 54 times the others' scale (the
    finding's failing scale: the stale maxima leave subnormal weights). Both the model's fused
    attention (rows the certificate does not keep are recomputed) and the by-row builtin (every
    row recomputed) must be the windowed attention."""
    cfg = next((c for c in CONFIGS if c.get("layer_window")), None)
    if cfg is None:
        pytest.skip("the corpus has no configuration with a sliding layer")
    w, qo, kv, d = cfg["layer_window"], cfg["num_qo_heads"], cfg["num_kv_heads"], cfg["head_dim"]
    assert cfg["rope_mode"] == 0 and cfg["dtype"] == "float32"  # the reference applies no RoPE
    cache = new_cache(cfg)
    scale = d**-0.5
    lens, step, seed = (4, w + 16), 8, 9_500
    for s in (0, 1):
        pko.run_op(API, cache, cfg, {"op": "add", "seq": s})
    pko.run_op(API, cache, cfg, {"op": "begin", "seqs": [0, 1], "lens": list(lens)})
    for layer in range(cfg["num_layers"]):
        op = {"op": "attn", "layer": layer, "sm_scale": scale, "seed": seed + layer, "rows": sum(lens)}
        pko.run_op(API, cache, cfg, op)
    pko.run_op(API, cache, cfg, {"op": "end"})
    cached = pko.qkv_input(cfg, seed, sum(lens))
    qkv = pko.qkv_input(cfg, seed + 100, 2 * step).copy()
    qkv[:step, :qo] *= 54
    qkv[step + 1 :: 2, :qo] *= 54
    pko.run_op(API, cache, cfg, {"op": "begin", "seqs": [0, 1], "lens": [step, step]})
    for name in (
        "vm.builtin.attention_kv_cache_attention_with_fused_qkv",
        "relaxvm.kv_cache.attention_with_fused_qkv_by_row",
    ):
        # The second call appends the same K/V at the same positions again and reads only the
        # columns cached before the step: it sees what the first saw.
        out = rx.tensor(np.zeros((2 * step, qo, d), "float32"))
        API.f(name)(cache, 0, scale, rx.tensor(qkv), out)
        got = out.numpy()
        for s, (a, b) in enumerate(((0, lens[0]), (lens[0], sum(lens)))):
            rows = slice(s * step, (s + 1) * step)
            q, k_new, v_new = qkv[rows, :qo], qkv[rows, qo : qo + kv], qkv[rows, qo + kv :]
            k_c, v_c = cached[a:b, qo : qo + kv], cached[a:b, qo + kv :]
            want = ref.windowed_attention(q, k_c, v_c, k_new, v_new, w, scale)
            want.assert_close(got[rows], f"{name}, sequence {s}")
    pko.run_op(API, cache, cfg, {"op": "end"})


def test_a_row_at_the_certificates_keep_threshold() -> None:
    """Review R-kv-2: a row put at the stale-maximum certificate's keep threshold
    (builtins/src/paged_kv_cache/stale_max.rs). A sequence past the window, a step of two
    tokens: row 0 starts fresh, row 1 on row 0's maximum (its first cached column is masked).
    Row 0's queries are scaled by ``f``, which raises the stale maximum row 1 starts on; ``f`` is
    bisected to the point where the certificate stops keeping row 1. Just inside, the step runs
    the kernel once and nothing else (the bytes are the kernel's, TVM's); just outside, row 1 is
    computed again (more kernel calls, as the profiler counts them); both are the float64
    windowed attention at the float32 tolerance."""
    cfg = next((c for c in CONFIGS if c.get("layer_window")), None)
    if cfg is None:
        pytest.skip("the corpus has no configuration with a sliding layer")
    w, qo, kv, d = cfg["layer_window"], cfg["num_qo_heads"], cfg["num_kv_heads"], cfg["head_dim"]
    assert cfg["rope_mode"] == 0 and cfg["dtype"] == "float32"  # the reference applies no RoPE
    cache = new_cache(cfg)
    scale = d**-0.5
    cached, step, seed = w + 16, 2, 9_700
    pko.run_op(API, cache, cfg, {"op": "add", "seq": 0})
    pko.run_op(API, cache, cfg, {"op": "begin", "seqs": [0], "lens": [cached]})
    for layer in range(cfg["num_layers"]):
        op = {"op": "attn", "layer": layer, "sm_scale": scale, "seed": seed + layer, "rows": cached}
        pko.run_op(API, cache, cfg, op)
    pko.run_op(API, cache, cfg, {"op": "end"})
    qkv = pko.qkv_input(cfg, seed, cached)
    k_cached, v_cached = qkv[:, qo : qo + kv], qkv[:, qo + kv :]
    q0 = corpus.counter_floats(4 * (seed + 100), (step, qo, d), "float32")
    k = corpus.counter_floats(4 * (seed + 100) + 1, (step, kv, d), "float32")
    v = corpus.counter_floats(4 * (seed + 100) + 2, (step, kv, d), "float32")
    # One call of the builtin in a VM function, for the profiler's count of its kernel calls.
    name = "vm.builtin.attention_kv_cache_attention_with_shared_kv"
    ib = rx.ExecBuilder()
    with ib.function("attn", num_inputs=7):
        ib.emit_call(name, args=[ib.r(i) for i in range(7)], dst=ib.r(7))
        ib.emit_ret(ib.r(7))
    vm = rx.VirtualMachine(ib.get(), rx.cpu(), profile=True)
    pko.run_op(API, cache, cfg, {"op": "begin", "seqs": [0], "lens": [step]})

    def run(f: float) -> tuple[np.ndarray, np.ndarray, int]:
        """Row 0's queries times ``f``: the queries, the output and the kernel calls made.
        (Each call appends nothing: shared K/V stay out of the cache.)"""
        q = q0.copy()
        q[0] *= np.float32(f)
        out = rx.tensor(np.zeros((step, qo, d), "float32"))
        report = vm.profile("attn", cache, 0, scale, rx.tensor(q), rx.tensor(k), rx.tensor(v), out)
        # The kernels are the rows besides the builtin's own and the VM's overhead (they come
        # from the corpus library, not this VM's, so the profiler lists them by their names).
        calls = sum(r.count for r in report.rows if r.name != name and r.kind != "overhead")
        return q, out.numpy(), calls

    plain = run(1.0)[2]
    lo, hi = 1.0, 1000.0
    assert run(hi)[2] > plain, "row 1 is recomputed far past the threshold"
    while hi / lo > 1 + 1e-6:
        mid = (lo * hi) ** 0.5
        lo, hi = (mid, hi) if run(mid)[2] == plain else (lo, mid)
    for f, kept in ((lo, True), (hi, False)):
        q, got, calls = run(f)
        assert (calls == plain) == kept, (f, calls, plain)
        want = ref.windowed_attention(q, k_cached, v_cached, k, v, w, scale)
        want.assert_close(got, f"queries of row 0 times {f} ({'kept' if kept else 'recomputed'})")
    pko.run_op(API, cache, cfg, {"op": "end"})
