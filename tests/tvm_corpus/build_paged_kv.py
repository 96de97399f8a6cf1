"""Builds the suite ``paged_kv``: TVM's paged KV cache driven through recorded schedules.

Run with Apache TVM 0.27 (``.venv-tvm``): ``build_paged_kv.py OUT_DIR`` writes
``OUT_DIR/paged_kv/``. For each configuration (heads, grouped-query ratio, head size, layers,
dtype, RoPE mode, sliding windows) a module holding only ``create_paged_kv_cache`` (made by
``tvm.relax.frontend.nn.llm.kv_cache.TIRPagedKVCache`` for target llvm, as a compiled LLM has
it, with the ``*_cpu`` TIR kernels) is compiled and exported; then schedules of cache operations
run on TVM's runtime and every result is recorded. ``tests/test_tvm_paged_kv_cache.py`` replays
them on relaxvm (no TVM) and compares bit for bit.

Schedules: the ones of TVM's ``tests/python/relax/test_runtime_builtin_paged_attention_kv_cache_cpu.py``
(prefill and decode, remove, fork, popn, unlimited depth, sliding window, sliding-window fork),
and seeded random ones (add, chunked and batch prefill, single and batched decode, forks mid-page
and at page boundaries, popn into shared prefixes, remove, clear, and refused calls after which
the cache must still give TVM's bytes).

``manifest.json``: ``{"suite": "paged_kv", "tvm_version": ..., "configs": [{"name", "library",
"create_args": [reserved_num_seqs, capacity, prefill_chunk_size, page_size, sliding_window],
"dtype", "num_layers", "num_qo_heads", "num_kv_heads", "head_dim", "schedules": [{"name",
"ops": [op, ...]}]}]}``. An op is a dict with ``"op"`` one of ``add``, ``remove``, ``fork``,
``popn``, ``clear``, ``enable_sw``, ``begin``, ``attn`` (qkv made by ``corpus.counter_floats``
from ``seed``; ``out``: the digest of the output), ``end``, ``get_kv`` (digests ``k``, ``v``),
``query`` (``fn``, ``args``, ``result``); ``"error": true`` when TVM refused the call (then
relaxvm must refuse it too, and the schedule goes on); ``"undefined_in_tvm": true`` (and no
``out``) for attention on a sliding layer where TVM's sliding-window prefill kernel may read an
uninitialised value (see ``Recorder.sliding_undefined``): it runs, its output is not compared.
``paged_kv_ops.run_op`` is the one definition of what an op does, used by both sides;
``paged_kv_recorder.py`` records on TVM, ``paged_kv_schedules.py`` holds the schedules.
"""

from __future__ import annotations

import os
import sys
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import corpus  # noqa: E402
from paged_kv_ops import Api  # noqa: E402
from paged_kv_recorder import Recorder  # noqa: E402
from paged_kv_schedules import random_schedule, tvm_test_schedules  # noqa: E402

SUITE = "paged_kv"

# Configurations: several shapes (grouped-query ratios, head sizes, layer counts, dtypes, RoPE
# modes, sliding windows). Each costs a compile of about 2 s on one core.
CONFIGS = [
    {
        "name": "sliding_layer_gqa2_d32_f32",
        "num_layers": 2,
        "num_qo_heads": 4,
        "num_kv_heads": 2,
        "head_dim": 32,
        "dtype": "float32",
        "rope_mode": 0,
        "sliding": 0,
        "layer_window": 24,
    },
    {
        "name": "gqa4_d64_f32_normal",
        "num_layers": 2,
        "num_qo_heads": 8,
        "num_kv_heads": 2,
        "head_dim": 64,
        "dtype": "float32",
        "rope_mode": 1,
        "sliding": 0,
    },
    {
        "name": "mha_d32_f16_none",
        "num_layers": 3,
        "num_qo_heads": 4,
        "num_kv_heads": 4,
        "head_dim": 32,
        "dtype": "float16",
        "rope_mode": 0,
        "sliding": 0,
    },
    {
        "name": "gqa3_d16_f32_inline_sw",
        "num_layers": 2,
        "num_qo_heads": 6,
        "num_kv_heads": 2,
        "head_dim": 16,
        "dtype": "float32",
        "rope_mode": 2,
        "sliding": 1,
    },
]


def build_config(out_dir: str, cfg: dict) -> dict:
    import tvm_ffi
    from tvm.relax.frontend import nn
    from tvm.relax.frontend.nn.llm.kv_cache import PagedKVCache, TIRPagedKVCache

    import tvm
    from tvm import relax, tirx

    window = cfg.get("layer_window")

    class M(nn.Module):
        def create_paged_kv_cache(
            self,
            max_batch_size: tirx.Var,
            max_total_seq_len: tirx.Var,
            prefill_chunk_size: tirx.Var,
            page_size: tirx.Var,
            support_sliding_window: tirx.Var,
        ) -> PagedKVCache:
            return TIRPagedKVCache(
                attn_kind=(["mha_sliding"] + ["mha"] * (cfg["num_layers"] - 1)) if window else "mha",
                max_batch_size=max_batch_size,
                max_total_seq_len=max_total_seq_len,
                prefill_chunk_size=prefill_chunk_size,
                page_size=page_size,
                support_sliding_window=support_sliding_window,
                layer_partition=relax.ShapeExpr([0, cfg["num_layers"]]),
                num_hidden_layers=cfg["num_layers"],
                num_attention_heads=cfg["num_qo_heads"],
                num_key_value_heads=cfg["num_kv_heads"],
                qk_head_dim=cfg["head_dim"],
                v_head_dim=cfg["head_dim"],
                mla_original_qk_head_dim=0,
                mla_original_v_head_dim=0,
                rope_mode=cfg["rope_mode"],
                rope_scale=1,
                rope_theta=10000,
                rope_scaling={},
                rope_ext_factors=relax.prim_value(0),
                rotary_dim=cfg["head_dim"],
                enable_disaggregation=False,
                dtype=cfg["dtype"],
                target=tvm.target.Target("llvm"),
                layer_sliding_window_size=window or 1024,
            )

    names = ["max_batch_size", "max_total_seq_len", "prefill_chunk_size", "page_size", "support_sliding_window"]
    spec = {"create_paged_kv_cache": {**{n: int for n in names}, "$": {"param_mode": "none", "effect_mode": "none"}}}
    # TVM 0.27's TIRPagedKVCache passes the two tree-mask kernels for llvm in each other's
    # places (argument 20 must be the one with paged KV, 21 the ragged one): a model compiled as
    # is fails on TVM the first time a token tree attends. Swapped back here so that token
    # trees can be recorded (TVM's own CPU test passes them in this order).
    orig_call = relax.call_pure_packed

    def call_fixed(name: str, *args: Any, **kw: Any) -> Any:
        if name == "vm.builtin.paged_attention_kv_cache_create":
            args = args[:20] + (args[21], args[20]) + args[22:]
        return orig_call(name, *args, **kw)

    relax.call_pure_packed = call_fixed
    try:
        mod, _ = M().export_tvm(spec=spec)
    finally:
        relax.call_pure_packed = orig_call
    ex = tvm.compile(mod, target="llvm")
    folder = os.path.join(out_dir, cfg["name"])
    os.makedirs(folder, exist_ok=True)
    ex.export_library(os.path.join(folder, "model.so"))
    vm = relax.VirtualMachine(ex, tvm.cpu())
    create_args = [32, 2048, 512, 16, cfg["sliding"]]
    entry = {
        "layer_window": None,
        **cfg,
        "library": f"{cfg['name']}/model.so",
        "create_args": create_args,
        "page_size": 16,
        "schedules": [],
    }
    api = Api(tvm.get_global_func, lambda a: tvm.runtime.tensor(a, tvm.cpu()), lambda v: tvm_ffi.Shape(v))

    def factory(name: str) -> Recorder:
        cache = vm["create_paged_kv_cache"](*[tvm_ffi.Shape([v]) for v in create_args])
        return Recorder(api, cache, entry, f"{cfg['name']}/{name}")

    for name, rec in tvm_test_schedules(factory, bool(cfg["sliding"]), window is not None):
        entry["schedules"].append({"name": f"tvm_test/{name}", "ops": rec.ops})
    for k in range(3):
        rec = factory(f"random{k}")
        random_schedule(rec, seed=1000 * k + len(cfg["name"]), steps=40)
        entry["schedules"].append({"name": f"random/{k}", "ops": rec.ops})
    return entry


def main() -> None:
    import tvm

    out = os.path.join(sys.argv[1], SUITE)
    os.makedirs(out, exist_ok=True)
    configs = [build_config(out, cfg) for cfg in CONFIGS]
    corpus.write_manifest(out, {"suite": SUITE, "tvm_version": tvm.__version__, "configs": configs})
    n_ops = sum(len(s["ops"]) for c in configs for s in c["schedules"])
    print(f"paged_kv: {len(configs)} configurations, {n_ops} recorded operations", file=sys.stderr)


if __name__ == "__main__":
    main()
