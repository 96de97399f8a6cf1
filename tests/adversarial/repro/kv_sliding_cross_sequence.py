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
# two sequences: seq 0 short (window never full, no masking), huge queries; seq 1 past the window
c0, c1, step, seed = 4, w + CACHED_EXTRA, 8, 9_000
pkv.run_op(API, cache, cfg, {"op": "add", "seq": 0})
pkv.run_op(API, cache, cfg, {"op": "add", "seq": 1})
pkv.run_op(API, cache, cfg, {"op": "begin", "seqs": [0, 1], "lens": [c0, c1]})
for layer in range(cfg["num_layers"]):
    pkv.run_op(
        API, cache, cfg, {"op": "attn", "layer": layer, "sm_scale": scale, "seed": seed + layer, "rows": c0 + c1}
    )
pkv.run_op(API, cache, cfg, {"op": "end"})
qkv = pkv.qkv_input(cfg, seed, c0 + c1).astype("float64")
kc, vc = qkv[:, qo : qo + kv], qkv[:, qo + kv :]
kcs, vcs = [kc[:c0], kc[c0:]], [vc[:c0], vc[c0:]]
pkv.run_op(API, cache, cfg, {"op": "begin", "seqs": [0, 1], "lens": [step, step]})
s0 = seed + 100
n = 2 * step
qn32 = corpus.counter_floats(4 * s0, (n, qo, d), "float32").copy()
k = corpus.counter_floats(4 * s0 + 1, (n, kv, d), "float32")
v = corpus.counter_floats(4 * s0 + 2, (n, kv, d), "float32")
qn32[:step] *= FACT
q = rx.tensor(qn32)
out = rx.tensor(np.zeros((n, qo, d), "float32"))
rx.get_global_func("vm.builtin.attention_kv_cache_attention_with_shared_kv")(
    cache, 0, scale, q, rx.tensor(k), rx.tensor(v), out
)
got, bad = out.numpy(), 0
for sq in (0, 1):
    rows = slice(sq * step, (sq + 1) * step)
    want = ref.windowed_attention(qn32[rows], kcs[sq], vcs[sq], k[rows], v[rows], w, scale)
    for r, h in want.mismatches(got[rows]):
        bad += 1
        if bad <= 4:
            print(f"seq {sq} row {r} head {h}: got {got[rows][r, h][:3]} want {want.out[r, h][:3]}")
print("mismatching (row, head):", bad, "of", n * qo)
