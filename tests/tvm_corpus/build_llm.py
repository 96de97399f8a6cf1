"""Builds the suite ``llm``: tiny Llamas written with ``tvm.relax.frontend.nn`` and
``tvm.relax.frontend.nn.llm`` (``TIRPagedKVCache``; for target llvm the ``*_cpu`` TIR kernels, page
size 16), compiled by TVM 0.27 with seeded random weights, each driven through seeded random
schedules of the calls an engine makes; TVM's logits and sampled tokens are recorded for
``tests/test_tvm_llm.py`` to replay on relaxvm byte for byte.

Run with Apache TVM 0.27 (``.venv-tvm``): ``build_llm.py OUT_DIR`` writes ``OUT_DIR/llm/``: per model
``model.so``, ``params.npz`` (the weights, passed packed as the functions' last argument) and, per
schedule, ``schedN.npz`` with every output; ``manifest.json`` lists models, shapes and schedules
(the steps spelled out, so the replay needs no generator).

The driver (``run_schedule``) is shared with the test, which imports this file without TVM: the
same steps, on either runtime, through a small adapter (``Runtime``).

Schedule steps (``op``):

- ``add`` (seq), ``remove`` (seq), ``fork`` (parent, child, pos: -1 or a position, mid-page and
  page boundaries included), ``popn`` (seq, n; also into a prefix shared after a fork), ``clear``;
- ``forward`` (seqs, tokens per seq): ``begin_forward`` → ``embed`` → ``prefill`` (one ragged batch
  of any lengths: single prefill, a chunk of a chunked prefill, batch prefill) or ``batch_decode``
  (one token per sequence) or ``decode`` (one sequence, one token) → ``end_forward``; records the
  logits;
- ``generate`` (seq, n, temperature, top_p, uniforms): n decode steps, each token sampled from the
  last logits with ``vm.builtin.sample_top_p_from_logits`` (temperature 0: greedy); records tokens
  and logits.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any, Callable

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
# The model itself is the example's (one definition): examples/llm_model.py.
sys.path.insert(1, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples"))
from llm_model import MODELS, PAGE_SIZE, compile_tiny_llama  # noqa: E402

SUITE = "llm"
# ------------------------------------------------------------------------------------ driver


class Runtime:
    """What the driver needs from a runtime: its VM's functions, global functions, tensors."""

    def __init__(
        self,
        vm: Any,
        get_global_func: Callable[[str], Any],
        tensor: Callable[[np.ndarray], Any],
        shape: Callable[[list[int]], Any],
        params: Any,
    ):
        self.vm, self.func, self.tensor, self.shape, self.params = vm, get_global_func, tensor, shape, params


def run_schedule(rt: Runtime, schedule: dict) -> tuple[list[np.ndarray], list[int]]:
    """Runs `schedule` on `rt`; returns every forward's logits (in order) and every sampled token."""
    f = rt.func
    add, remove, fork = (
        f("vm.builtin.kv_state_add_sequence"),
        f("vm.builtin.kv_state_remove_sequence"),
        f("vm.builtin.kv_state_fork_sequence"),
    )
    popn, clear = f("vm.builtin.kv_state_popn"), f("vm.builtin.kv_state_clear")
    begin, end = f("vm.builtin.kv_state_begin_forward"), f("vm.builtin.kv_state_end_forward")
    sample = f("vm.builtin.sample_top_p_from_logits")
    c = schedule["cache"]
    # Each `int` of the function's spec is a one-element shape (nn.spec turns ints into shapes).
    dims = [c["max_batch_size"], c["max_total_seq_len"], c["prefill_chunk_size"], PAGE_SIZE, 0]
    cache = rt.vm["create_paged_kv_cache"](*[rt.shape([d]) for d in dims])
    logits_out: list[np.ndarray] = []
    tokens_out: list[int] = []

    def forward(seqs: list[int], tokens: list[list[int]]) -> np.ndarray:
        nonlocal cache
        begin(cache, rt.shape(seqs), rt.shape([len(t) for t in tokens]))
        ids = np.array([t for ts in tokens for t in ts], dtype="int32")
        emb = np.asarray(rt.vm["embed"](rt.tensor(ids), rt.params).numpy())
        hidden = emb.shape[-1]
        if all(len(t) == 1 for t in tokens) and len(seqs) > 1:
            logits, cache = rt.vm["batch_decode"](rt.tensor(emb.reshape(len(seqs), 1, hidden)), cache, rt.params)
        elif len(seqs) == 1 and len(tokens[0]) == 1:
            logits, cache = rt.vm["decode"](rt.tensor(emb.reshape(1, 1, hidden)), cache, rt.params)
        else:
            logits, cache = rt.vm["prefill"](rt.tensor(emb.reshape(1, len(ids), hidden)), cache, rt.params)
        end(cache)
        out = np.asarray(logits.numpy())
        logits_out.append(out)
        return out

    for step in schedule["steps"]:
        op = step["op"]
        if op == "add":
            add(cache, step["seq"])
        elif op == "remove":
            remove(cache, step["seq"])
        elif op == "fork":
            fork(cache, step["parent"], step["child"], step["pos"])
        elif op == "popn":
            popn(cache, step["seq"], step["n"])
        elif op == "clear":
            clear(cache)
        elif op == "forward":
            forward(step["seqs"], step["tokens"])
        elif op == "generate":
            last = np.ascontiguousarray(logits_out[-1].reshape(-1, logits_out[-1].shape[-1])[-1])
            for u in step["uniforms"]:
                tok = int(sample(rt.tensor(last), step["temperature"], step["top_p"], u))
                tokens_out.append(tok)
                out = forward([step["seq"]], [[tok]])
                last = np.ascontiguousarray(out.reshape(-1, out.shape[-1])[-1])
        else:
            raise ValueError(f"unknown step {op!r}")
    return logits_out, tokens_out


# ------------------------------------------------------------------------------------ schedules


def make_schedule(rng: np.random.Generator, vocab: int, chunk: int) -> dict:
    """A random valid schedule over a few sequences (lengths kept within the cache)."""
    steps: list[dict] = []
    lengths: dict[int, int] = {}
    next_id = 0

    def tokens(n: int) -> list[int]:
        return [int(t) for t in rng.integers(0, vocab, size=n)]

    def prefill(seq: int, n: int) -> None:
        # Chunked when longer than the chunk size (and sometimes anyway).
        done = 0
        while done < n:
            part = min(n - done, chunk, int(rng.integers(1, chunk + 1)) if rng.random() < 0.3 else chunk)
            steps.append({"op": "forward", "seqs": [seq], "tokens": [tokens(part)]})
            done += part
        lengths[seq] += n

    def new_seq() -> int:
        nonlocal next_id
        s = next_id
        next_id += 1
        steps.append({"op": "add", "seq": s})
        lengths[s] = 0
        return s

    root = new_seq()
    prefill(root, int(rng.integers(PAGE_SIZE + 1, 3 * PAGE_SIZE)))
    for _ in range(int(rng.integers(7, 11))):
        live = sorted(lengths)
        r = rng.random()
        if r < 0.22 and len(live) < 5:
            parent = int(rng.choice(live))
            plen = lengths[parent]
            choices = [-1, plen, max(1, plen // 2), min(plen, PAGE_SIZE), max(1, plen - 1)]
            if plen > PAGE_SIZE + 3:
                choices += [PAGE_SIZE + 3, 2 * PAGE_SIZE if plen >= 2 * PAGE_SIZE else PAGE_SIZE]
            pos = int(rng.choice(choices))
            child = next_id
            next_id += 1
            steps.append({"op": "fork", "parent": parent, "child": child, "pos": pos})
            lengths[child] = plen if pos == -1 else pos
            prefill(child, int(rng.integers(1, 12)))
        elif r < 0.45:
            seqs = [int(s) for s in rng.permutation(live)[: int(rng.integers(1, min(4, len(live)) + 1))]]
            steps.append({"op": "forward", "seqs": seqs, "tokens": [tokens(1) for _ in seqs]})
            for s in seqs:
                lengths[s] += 1
        elif r < 0.6:
            seqs = [int(s) for s in rng.permutation(live)[: int(rng.integers(1, min(3, len(live)) + 1))]]
            lens = [int(rng.integers(1, 6)) for _ in seqs]
            if sum(lens) <= chunk:
                steps.append({"op": "forward", "seqs": seqs, "tokens": [tokens(n) for n in lens]})
                for s, n in zip(seqs, lens):
                    lengths[s] += n
        elif r < 0.72:
            s = int(rng.choice(live))
            if lengths[s] > 2:
                n = int(rng.integers(1, min(lengths[s] - 1, 20) + 1))
                steps.append({"op": "popn", "seq": s, "n": n})
                lengths[s] -= n
                steps.append({"op": "forward", "seqs": [s], "tokens": [tokens(1)]})
                lengths[s] += 1
        elif r < 0.8 and len(live) > 1:
            s = int(rng.choice(live[1:]))
            steps.append({"op": "remove", "seq": s})
            del lengths[s]
        else:
            s = int(rng.choice(live))
            greedy = rng.random() < 0.5
            steps.append({"op": "forward", "seqs": [s], "tokens": [tokens(1)]})
            n = int(rng.integers(2, 5))
            steps.append(
                {
                    "op": "generate",
                    "seq": s,
                    "temperature": 0.0 if greedy else float(rng.choice([0.7, 1.0, 1.3])),
                    "top_p": 1.0 if greedy else float(rng.choice([0.5, 0.9, 0.95])),
                    "uniforms": [float(u) for u in rng.random(n)],
                }
            )
            lengths[s] += 1 + n
    if rng.random() < 0.5:
        steps.append({"op": "clear"})
        lengths.clear()
        s = new_seq()
        prefill(s, int(rng.integers(2, 20)))
    return {"cache": {"max_batch_size": 8, "max_total_seq_len": 512, "prefill_chunk_size": chunk}, "steps": steps}


# ------------------------------------------------------------------------------------ legacy cache


def build_legacy(out_dir: str, rng: np.random.Generator) -> dict:
    """TVM's test_pipeline_with_kv_cache (tests/python/relax/test_pipeline.py): a compiled program
    that appends to the legacy cache (`vm.builtin.attention_kv_cache_*`) and views it, starting from
    one reserved row so that the cache grows by doubling; records every step's view."""
    import tvm_ffi
    from tvm.script import relax as R
    from tvm.script import tirx as T

    import tvm
    from tvm import relax

    @tvm.script.ir_module
    class Mod:
        @R.function
        def create_kv_cache(reserve_slots: R.Shape(["m"])):
            m = T.int64()
            init_data = R.ones((1, 4), "float32")
            kv_cache = R.call_pure_packed(
                "vm.builtin.attention_kv_cache_create", init_data, R.shape([m, 4]), 0, ty_args=[R.Any()]
            )
            return kv_cache

        @R.function(pure=False)
        def main(
            x: R.Tensor((1, 4), "float32"), y: R.Tensor((1, 4), "float32"), shape: R.Shape(["L", 4]), kv_cache: R.Any
        ):
            L = T.int64()
            curr_value = R.add(x, y)
            kv_cache = R.call_packed("vm.builtin.attention_kv_cache_append", kv_cache, curr_value, ty_args=[R.Any])
            kv = R.call_packed(
                "vm.builtin.attention_kv_cache_view", kv_cache, shape, ty_args=[R.Tensor((L, 4), "float32")]
            )
            return (kv, kv_cache)

    target = tvm.target.Target("llvm", host="llvm")
    ex = tvm.compile(relax.pipeline.get_default_pipeline(target)(Mod), target)
    folder = os.path.join(out_dir, "legacy_pipeline")
    os.makedirs(folder, exist_ok=True)
    ex.export_library(os.path.join(folder, "model.so"))
    vm = relax.VirtualMachine(tvm.runtime.load_module(os.path.join(folder, "model.so")), tvm.cpu())
    kv_cache = vm["create_kv_cache"](tvm_ffi.Shape([1]))
    arrays = {}
    steps = 9
    for i in range(steps):
        x, y = rng.random((1, 4)).astype("float32"), rng.random((1, 4)).astype("float32")
        kv, kv_cache = vm["main"](tvm.runtime.tensor(x), tvm.runtime.tensor(y), tvm_ffi.Shape((i + 1, 4)), kv_cache)
        arrays.update({f"x{i}": x, f"y{i}": y, f"kv{i}": kv.numpy()})
    np.savez(os.path.join(folder, "steps.npz"), **arrays)
    return {"library": "legacy_pipeline/model.so", "file": "legacy_pipeline/steps.npz", "steps": steps}


def load_params(path: str) -> list[np.ndarray]:
    with np.load(path) as z:
        return [z[f"p{i}"] for i in range(len(z.files))]


def tvm_runtime(library: str, params: list[np.ndarray]) -> Runtime:
    import tvm_ffi

    import tvm
    from tvm import relax

    vm = relax.VirtualMachine(tvm.runtime.load_module(library), tvm.cpu())
    return Runtime(
        vm,
        tvm.get_global_func,
        lambda a: tvm.runtime.tensor(a),
        lambda s: tvm_ffi.Shape(s),
        [tvm.runtime.tensor(p) for p in params],
    )


def main() -> None:
    import tvm

    out_dir = os.path.join(sys.argv[1], SUITE)
    only = sys.argv[2:] or list(MODELS)  # model names, to build some while developing
    os.makedirs(out_dir, exist_ok=True)
    rng = np.random.default_rng(20261127)
    models = []
    for k, name in enumerate(only):
        t0 = time.time()
        entry = compile_tiny_llama(name, os.path.join(out_dir, name), rng)
        entry["library"], entry["params"] = f"{name}/model.so", f"{name}/params.npz"
        t1 = time.time()
        params = load_params(os.path.join(out_dir, entry["params"]))
        rt = tvm_runtime(os.path.join(out_dir, entry["library"]), params)
        entry["schedules"] = []
        for j in range(3):
            chunk = [32, 16, 64][(j + k) % 3]
            sched = make_schedule(rng, MODELS[name][0], chunk)
            logits, tokens = run_schedule(rt, sched)
            again, tokens2 = run_schedule(rt, sched)
            # Deterministic on TVM, or it is no reference.
            assert tokens == tokens2 and all(np.array_equal(a, b) for a, b in zip(logits, again)), name
            file = f"{name}/sched{j}.npz"
            np.savez(os.path.join(out_dir, file), **{f"l{i}": x for i, x in enumerate(logits)})
            entry["schedules"].append({"file": file, "schedule": sched, "tokens": tokens, "forwards": len(logits)})
        models.append(entry)
        steps = sum(len(s["schedule"]["steps"]) for s in entry["schedules"])
        print(f"{SUITE}: {name} compiled in {t1 - t0:.1f} s, {steps} steps recorded in {time.time() - t1:.1f} s")
    legacy = build_legacy(out_dir, rng)
    manifest = {
        "suite": SUITE,
        "tvm_version": tvm.__version__,
        "page_size": PAGE_SIZE,
        "models": models,
        "legacy": legacy,
    }
    with open(os.path.join(out_dir, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)


if __name__ == "__main__":
    main()
