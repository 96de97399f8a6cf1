"""A tiny Llama for the LLM example and the test corpus, compiled by Apache TVM 0.27 for the CPU.

Run in the environment that has TVM (``.venv-tvm``)::

    .venv-tvm/bin/python examples/llm_model.py OUT_DIR [MODEL]

writes ``OUT_DIR/model.so`` (the program and its kernels; relaxvm loads it without TVM) and
``OUT_DIR/params.npz`` (random weights, ``p0``, ``p1``, ... in the order the functions take them).

The model is written with ``tvm.relax.frontend.nn``, as MLC-LLM writes its models: token
embedding, decoder layers (RMSNorm, attention with fused QKV through the paged KV cache, a SiLU
gated MLP), final norm and LM head. The KV cache is ``nn.llm.TIRPagedKVCache``: for target llvm
it uses TVM's ``*_cpu`` TIR attention kernels (page size 16), which the model's ``.so`` holds and
passes to ``vm.builtin.paged_attention_kv_cache_create`` as function handles. The functions:

- ``embed(input_ids, params)``: token ids (int32, ``(n,)``) to embeddings ``(n, hidden)``;
- ``prefill(input_embed, cache, params)``: ``(1, n, hidden)``, any number of tokens of one or
  several sequences (those ``begin_forward`` named), to logits ``(1, n, vocab)`` and the cache;
- ``decode(input_embed, cache, params)``: one token of one sequence, ``(1, 1, hidden)``;
- ``batch_decode(input_embeds, cache, params)``: one token of each of ``b`` sequences,
  ``(b, 1, hidden)``, to logits ``(b, 1, vocab)``;
- ``create_paged_kv_cache(max_batch_size, max_total_seq_len, prefill_chunk_size, page_size,
  support_sliding_window)``: each a one-element shape.
"""

from __future__ import annotations

import os
import sys

import numpy as np

PAGE_SIZE = 16
"""Tokens per page: the CPU kernels of TVM 0.27 fix it at 16."""

# name: (vocab, hidden, layers, heads, kv_heads, head_dim, intermediate)
MODELS: dict[str, tuple[int, int, int, int, int, int, int]] = {
    "mha_h16_l2": (96, 64, 2, 4, 4, 16, 96),
    "gqa4_h16_l1": (80, 64, 1, 8, 2, 16, 64),
    "mqa_h32_l3": (64, 48, 3, 4, 1, 32, 64),
    "gqa2_h8_l2": (72, 32, 2, 4, 2, 8, 48),
    "micro_h8_l1": (64, 16, 1, 2, 2, 8, 32),
}
"""The shapes: grouped-query ratios 1, 2, 4 and 4 (one KV head), head sizes 8 to 32, 1 to 3 layers;
``micro_h8_l1`` is so small (hidden 16) that a step's time is mostly the runtime's own work."""


def compile_tiny_llama(name: str, folder: str, rng: np.random.Generator) -> dict:
    """Compiles model `name` of MODELS with TVM for the CPU (target llvm); writes
    `folder/model.so` and `folder/params.npz` (random weights from `rng`, in the order the
    functions take them); returns a description (name, config, parameter names)."""
    from tvm.relax.frontend import nn
    from tvm.relax.frontend.nn import op
    from tvm.relax.frontend.nn.llm.kv_cache import PagedKVCache, RopeMode, TIRPagedKVCache

    import tvm
    from tvm import relax

    vocab, hidden, layers, heads, kv_heads, head_dim, inter = MODELS[name]
    target = tvm.target.Target("llvm")

    class Attention(nn.Module):
        def __init__(self) -> None:
            self.qkv_proj = nn.Linear(hidden, (heads + 2 * kv_heads) * head_dim, bias=False)
            self.o_proj = nn.Linear(heads * head_dim, hidden, bias=False)

        def forward(self, x: nn.Tensor, cache: PagedKVCache, layer_id: int) -> nn.Tensor:
            b, s, _ = x.shape
            qkv = op.reshape(self.qkv_proj(x), (b, s, heads + 2 * kv_heads, head_dim))
            out = cache.attention_with_fused_qkv(layer_id, qkv, heads, sm_scale=head_dim**-0.5)
            return self.o_proj(op.reshape(out, (b, s, heads * head_dim)))

    class MLP(nn.Module):
        def __init__(self) -> None:
            self.gate_up_proj = nn.Linear(hidden, 2 * inter, bias=False)
            self.down_proj = nn.Linear(inter, hidden, bias=False)

        def forward(self, x: nn.Tensor) -> nn.Tensor:
            gate, up = op.split(self.gate_up_proj(x), 2, axis=-1)
            return self.down_proj(op.silu(gate) * up)

    class Layer(nn.Module):
        def __init__(self) -> None:
            self.self_attn = Attention()
            self.mlp = MLP()
            self.input_layernorm = nn.RMSNorm(hidden, -1, 1e-5, bias=False)
            self.post_attention_layernorm = nn.RMSNorm(hidden, -1, 1e-5, bias=False)

        def forward(self, x: nn.Tensor, cache: PagedKVCache, layer_id: int) -> nn.Tensor:
            h = self.self_attn(self.input_layernorm(x), cache, layer_id) + x
            return self.mlp(self.post_attention_layernorm(h)) + h

    class TinyLlama(nn.Module):
        def __init__(self) -> None:
            self.embed_tokens = nn.Embedding(vocab, hidden)
            self.layers = nn.ModuleList([Layer() for _ in range(layers)])
            self.norm = nn.RMSNorm(hidden, -1, 1e-5, bias=False)
            self.lm_head = nn.Linear(hidden, vocab, bias=False)

        def embed(self, input_ids: nn.Tensor) -> nn.Tensor:
            return self.embed_tokens(input_ids)

        def _forward(self, x: nn.Tensor, cache: PagedKVCache) -> nn.Tensor:
            for i, layer in enumerate(self.layers):
                x = layer(x, cache, i)
            return self.lm_head(self.norm(x))

        def prefill(self, input_embed: nn.Tensor, paged_kv_cache: PagedKVCache):
            return self._forward(input_embed, paged_kv_cache), paged_kv_cache

        def decode(self, input_embed: nn.Tensor, paged_kv_cache: PagedKVCache):
            return self._forward(input_embed, paged_kv_cache), paged_kv_cache

        def batch_decode(self, input_embeds: nn.Tensor, paged_kv_cache: PagedKVCache):
            return self._forward(input_embeds, paged_kv_cache), paged_kv_cache

        def create_paged_kv_cache(
            self, max_batch_size, max_total_seq_len, prefill_chunk_size, page_size, support_sliding_window
        ) -> PagedKVCache:
            return TIRPagedKVCache(
                attn_kind="mha",
                max_batch_size=max_batch_size,
                max_total_seq_len=max_total_seq_len,
                prefill_chunk_size=prefill_chunk_size,
                page_size=page_size,
                support_sliding_window=support_sliding_window,
                layer_partition=relax.ShapeExpr([0, layers]),
                num_hidden_layers=layers,
                num_attention_heads=heads,
                num_key_value_heads=kv_heads,
                qk_head_dim=head_dim,
                v_head_dim=head_dim,
                mla_original_qk_head_dim=0,
                mla_original_v_head_dim=0,
                rope_mode=RopeMode.NORMAL,
                rope_scale=1,
                rope_theta=10000,
                rope_scaling={},
                rope_ext_factors=relax.prim_value(0),
                rotary_dim=head_dim,
                enable_disaggregation=False,
                dtype="float32",
                target=target,
            )

    packed = {"param_mode": "packed", "effect_mode": "none"}
    cache_spec = nn.spec.Object(object_type=PagedKVCache)
    spec = {
        "embed": {"input_ids": nn.spec.Tensor(["seq_len"], "int32"), "$": packed},
        "prefill": {
            "input_embed": nn.spec.Tensor([1, "seq_len", hidden], "float32"),
            "paged_kv_cache": cache_spec,
            "$": packed,
        },
        "decode": {"input_embed": nn.spec.Tensor([1, 1, hidden], "float32"), "paged_kv_cache": cache_spec, "$": packed},
        "batch_decode": {
            "input_embeds": nn.spec.Tensor(["batch_size", 1, hidden], "float32"),
            "paged_kv_cache": cache_spec,
            "$": packed,
        },
        "create_paged_kv_cache": {
            "max_batch_size": int,
            "max_total_seq_len": int,
            "prefill_chunk_size": int,
            "page_size": int,
            "support_sliding_window": int,
            "$": {"param_mode": "none", "effect_mode": "none"},
        },
    }
    model = TinyLlama()
    mod, named_params = model.export_tvm(spec=spec)
    ex = tvm.compile(mod, target=target)
    os.makedirs(folder, exist_ok=True)
    ex.export_library(os.path.join(folder, "model.so"))
    params = []
    for pname, p in named_params:
        shape = [int(d) for d in p.shape]
        scale = 1.0 if "layernorm" in pname or pname == "norm.weight" else 1.0 / np.sqrt(shape[-1])
        w = rng.standard_normal(shape).astype("float32") * np.float32(scale)
        if "norm" in pname:
            w = (np.float32(1) + np.float32(0.1) * w).astype("float32")
        params.append(w)
    np.savez(os.path.join(folder, "params.npz"), **{f"p{i}": w for i, w in enumerate(params)})
    return {
        "name": name,
        "config": dict(
            zip(["vocab", "hidden", "layers", "heads", "kv_heads", "head_dim", "intermediate"], MODELS[name])
        ),
        "param_names": [n for n, _ in named_params],
    }


if __name__ == "__main__":
    out = sys.argv[1]
    name = sys.argv[2] if len(sys.argv) > 2 else "mha_h16_l2"
    info = compile_tiny_llama(name, out, np.random.default_rng(0))
    print(f"compiled {name} {info['config']} into {out}/model.so, weights in {out}/params.npz")
