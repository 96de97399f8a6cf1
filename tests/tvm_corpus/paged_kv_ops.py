"""What one op of the ``paged_kv`` suite does (``build_paged_kv.py`` documents the ops): the one
definition both sides use, the builder on TVM and ``tests/test_tvm_paged_kv_cache.py`` on
relaxvm, through an ``Api`` over either runtime."""

from __future__ import annotations

import json
import os
import sys
from typing import Any, Callable

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import corpus  # noqa: E402

RESULT_KEYS = (
    "error",
    "out",
    "lse",
    "k",
    "v",
    "result",
    "meta",
    "hash",
    "groups",
    "undefined_in_tvm",
    "nonfinite_rows",
)
QUERIES = {
    "num_available_pages": "vm.builtin.attention_kv_cache_get_num_available_pages",
    "total_sequence_length": "vm.builtin.attention_kv_cache_get_total_sequence_length",
    "sequence_length": "vm.builtin.attention_kv_cache_get_sequence_length",
    "empty": "vm.builtin.attention_kv_cache_empty",
}


class Api:
    """What an op needs of a runtime: global functions, tensors in and out, shapes."""

    def __init__(
        self, get_func: Callable[[str], Any], tensor: Callable[[np.ndarray], Any], shape: Callable[[list[int]], Any]
    ):
        self.get_func = get_func
        self.tensor = tensor
        self.shape = shape
        self._funcs: dict[str, Any] = {}

    def f(self, name: str) -> Any:
        if name not in self._funcs:
            self._funcs[name] = self.get_func(name)
        return self._funcs[name]


def qkv_input(cfg: dict, seed: int, rows: int) -> np.ndarray:
    heads = cfg["num_qo_heads"] + 2 * cfg["num_kv_heads"]
    return corpus.counter_floats(seed, (rows, heads, cfg["head_dim"]), cfg["dtype"])


def attention_out(o: np.ndarray) -> dict:
    """An attention output's record: its digest, except that token rows holding a NaN or an
    infinity are listed (``nonfinite_rows``) and digested as zeros. TVM's sliding-window
    prefill kernel leaves such rows from finite inputs (kvcache/01, docs/kv-cache.md), where
    relaxvm computes them again: the replay compares the other rows' bytes and checks those
    rows on their own."""
    bad = [int(r) for r in np.nonzero(~np.isfinite(o.reshape(o.shape[0], -1)).all(axis=1))[0]]
    if not bad:
        return {"out": corpus.digest(o)}
    kept = o.copy()
    kept[bad] = 0
    return {"out": corpus.digest(kept), "nonfinite_rows": bad}


def run_op(api: Api, cache: Any, cfg: dict, op: dict) -> dict:
    """Runs ``op`` on ``cache``; returns what it produced (digests, query results)."""
    kind = op["op"]
    f = api.f
    if kind == "add":
        f("vm.builtin.kv_state_add_sequence")(cache, op["seq"])
    elif kind == "remove":
        f("vm.builtin.kv_state_remove_sequence")(cache, op["seq"])
    elif kind == "fork":
        f("vm.builtin.kv_state_fork_sequence")(cache, op["parent"], op["child"], op["pos"])
    elif kind == "popn":
        f("vm.builtin.kv_state_popn")(cache, op["seq"], op["n"])
    elif kind == "clear":
        f("vm.builtin.kv_state_clear")(cache)
    elif kind == "enable_sw":
        f("vm.builtin.attention_kv_cache_enable_sliding_window_for_seq")(cache, op["seq"], op["window"], op["sink"])
    elif kind == "begin":
        tree = api.shape(op["tree"]) if "tree" in op else None
        f("vm.builtin.kv_state_begin_forward")(cache, api.shape(op["seqs"]), api.shape(op["lens"]), tree)
    elif kind == "commit":
        f("vm.builtin.attention_kv_cache_commit_accepted_token_tree_nodes")(
            cache, api.shape(op["seqs"]), api.shape(op["leaves"])
        )
    elif kind == "end":
        f("vm.builtin.kv_state_end_forward")(cache)
    elif kind == "attn":
        qkv = qkv_input(cfg, op["seed"], op["rows"])
        out = api.tensor(np.zeros((op["rows"], cfg["num_qo_heads"], cfg["head_dim"]), cfg["dtype"]))
        f("vm.builtin.attention_kv_cache_attention_with_fused_qkv")(
            cache, op["layer"], op["sm_scale"], api.tensor(qkv), out
        )
        return attention_out(out.numpy())
    elif kind in ("self_attn", "cross_attn", "attn_shared"):
        qo, kv, d, dt, n = cfg["num_qo_heads"], cfg["num_kv_heads"], cfg["head_dim"], cfg["dtype"], op["rows"]
        seed = op["seed"] * 4
        q = api.tensor(corpus.counter_floats(seed, (n, qo, d), dt))
        k = api.tensor(corpus.counter_floats(seed + 1, (n, kv, d), dt))
        v = api.tensor(corpus.counter_floats(seed + 2, (n, kv, d), dt))
        out = api.tensor(np.zeros((n, qo, d), dt))
        lse = api.tensor(np.zeros((n, qo), "float32"))
        if kind == "self_attn":
            f("vm.builtin.attention_kv_cache_self_attention")(cache, op["layer"], op["sm_scale"], q, k, v, out, lse)
        elif kind == "cross_attn":
            f("vm.builtin.attention_kv_cache_cross_attention")(cache, op["layer"], op["sm_scale"], q, out, lse)
        else:
            f("vm.builtin.attention_kv_cache_attention_with_shared_kv")(
                cache, op["layer"], op["sm_scale"], q, k, v, out
            )
            return attention_out(out.numpy())
        return {"out": corpus.digest(out.numpy()), "lse": corpus.digest(lse.numpy())}
    elif kind == "checkpoint":
        # Metadata, layout hash, every layer exported; then imported back into the cleared cache.
        meta = str(f("vm.builtin.attention_kv_cache_get_checkpoint_metadata")(cache, op["seq"]))
        layout = str(f("vm.builtin.attention_kv_cache_get_layout_hash")(cache))
        n = json.loads(meta)["groups"][0]["num_logical_pages"]
        shape = (1, n, 2, cfg["num_kv_heads"], cfg["page_size"], cfg["head_dim"])
        groups = []
        for g in range(cfg["num_layers"]):
            dst = api.tensor(np.full(shape, 7, cfg["dtype"]))
            f("vm.builtin.attention_kv_cache_export_page_group")(cache, op["seq"], g, dst)
            groups.append(dst.numpy())
        f("vm.builtin.attention_kv_cache_prepare_import")(cache, op["seq"], meta)
        for g, data in enumerate(groups):
            f("vm.builtin.attention_kv_cache_import_page_group")(cache, op["seq"], g, api.tensor(data))
        f("vm.builtin.attention_kv_cache_finish_import")(cache, op["seq"])
        return {"meta": meta, "hash": layout, "groups": [corpus.digest(g) for g in groups]}
    elif kind == "finish_import":
        f("vm.builtin.attention_kv_cache_finish_import")(cache, op["seq"])
    elif kind == "get_kv":
        shape = (cfg["num_layers"], op["end"] - op["start"], cfg["num_kv_heads"], cfg["head_dim"])
        k = api.tensor(np.zeros(shape, cfg["dtype"]))
        v = api.tensor(np.zeros(shape, cfg["dtype"]))
        f("vm.builtin.attention_kv_cache_debug_get_kv")(cache, op["seq"], op["start"], op["end"], k, v)
        return {"k": corpus.digest(k.numpy()), "v": corpus.digest(v.numpy())}
    elif kind == "query":
        r = f(QUERIES[op["fn"]])(cache, *op["args"])
        return {"result": bool(r) if op["fn"] == "empty" else int(r)}
    else:
        raise ValueError(f"unknown op {kind!r}")
    return {}
