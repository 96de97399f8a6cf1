import os
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, os.path.join(ROOT, "tests"))
sys.path.insert(0, os.path.join(ROOT, "tests", "tvm_corpus"))
import paged_kv_reference as ref  # noqa: E402
import test_tvm_paged_kv_cache as T  # noqa: E402

import relaxvm as rx  # noqa: E402

pkv, corpus, API = T.pko, T.corpus, T.API
cfg = next(c for c in T.CONFIGS if c.get("layer_window"))
print("config", cfg["name"], cfg["layer_window"], cfg["num_qo_heads"], cfg["num_kv_heads"], cfg["head_dim"])
w, qo, kv, d = cfg["layer_window"], cfg["num_qo_heads"], cfg["num_kv_heads"], cfg["head_dim"]
scale = d**-0.5
FACT = float(sys.argv[1]) if len(sys.argv) > 1 else 1000.0
CACHED_EXTRA = int(sys.argv[2]) if len(sys.argv) > 2 else 16
cache = T.new_cache(cfg)
cached, step, seed = w + CACHED_EXTRA, 8, 9_000
pkv.run_op(API, cache, cfg, {"op": "add", "seq": 0})
pkv.run_op(API, cache, cfg, {"op": "begin", "seqs": [0], "lens": [cached]})
for layer in range(cfg["num_layers"]):
    pkv.run_op(API, cache, cfg, {"op": "attn", "layer": layer, "sm_scale": scale, "seed": seed + layer, "rows": cached})
pkv.run_op(API, cache, cfg, {"op": "end"})
qkv = pkv.qkv_input(cfg, seed, cached).astype("float64")
k_cached, v_cached = qkv[:, qo : qo + kv], qkv[:, qo + kv :]
pkv.run_op(API, cache, cfg, {"op": "begin", "seqs": [0], "lens": [step]})
s0 = seed + 100
qn32 = corpus.counter_floats(4 * s0, (step, qo, d), "float32").copy()
k = corpus.counter_floats(4 * s0 + 1, (step, kv, d), "float32")
v = corpus.counter_floats(4 * s0 + 2, (step, kv, d), "float32")
# hostile: make row r's scores much larger than row r+1's (stale running max)
for r in range(0, step, 2):
    qn32[r] *= FACT
q = rx.tensor(qn32)
out = rx.tensor(np.zeros((step, qo, d), "float32"))
rx.get_global_func("vm.builtin.attention_kv_cache_attention_with_shared_kv")(
    cache, 0, scale, q, rx.tensor(k), rx.tensor(v), out
)
bad = ref.windowed_attention(qn32, k_cached, v_cached, k, v, w, scale).mismatches(out.numpy())
for r, h in bad[:5]:
    print(f"row {r} head {h}: got {out.numpy()[r, h][:4]}")
print("mismatching (row, head):", len(bad), "of", step * qo)
