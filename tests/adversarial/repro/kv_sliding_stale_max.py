import os
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, os.path.join(ROOT, "tests"))
sys.path.insert(0, os.path.join(ROOT, "tests", "tvm_corpus"))
import test_tvm_paged_kv_cache as T  # noqa: E402

import relaxvm as rx  # noqa: E402


def float32_atol(scores, values):
    """The absolute tolerance of a row in float32: TVM's kernel rounds each score (in base-2
    units, ``s * log2 e``) to float32, so a score is off by a few units in the last place of the
    largest one, which moves the softmax's output by as much (relative) times the values' scale
    (at 1000 times the scale, ~1e-4: a fresh float32 computation is that far off too)."""
    ulp = float(np.spacing(np.float32(np.abs(scores).max() * np.log2(np.e))))
    return 1e-5 + 4 * ulp * float(np.abs(values).max())


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
got, qn = out.numpy(), qn32.astype("float64")
bad = 0
for r in range(step):
    keys = np.concatenate([k_cached[max(0, cached - w + 1 + r) :], k[: r + 1].astype("float64")])
    vals = np.concatenate([v_cached[max(0, cached - w + 1 + r) :], v[: r + 1].astype("float64")])
    for h in range(qo):
        g = h // (qo // kv)
        s = keys[:, g] @ qn[r, h] * scale
        p = np.exp(s - s.max())
        want = (p / p.sum()) @ vals[:, g]
        if not np.allclose(got[r, h], want, rtol=1e-4, atol=float32_atol(s, vals[:, g])):
            bad += 1
            if bad <= 5:
                print(f"row {r} head {h}: got {got[r, h][:4]} want {want[:4]}")
print("mismatching (row, head):", bad, "of", step * qo)
