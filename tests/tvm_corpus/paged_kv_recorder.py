"""The builder's side of the ``paged_kv`` suite: ``Recorder`` runs ops on TVM's cache, records what
they produced and keeps the model of the cache the schedules need (lengths, forks, windows)."""

from __future__ import annotations

import os
import sys
import zlib
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from paged_kv_ops import Api, run_op  # noqa: E402


class Recorder:
    """Runs ops on TVM, keeping the model of the cache the schedules need (lengths)."""

    def __init__(self, api: Api, cache: Any, cfg: dict, name: str):
        self.api, self.cache, self.cfg = api, cache, cfg
        self.ops: list[dict] = []
        self.lens: dict[int, int] = {}
        self.seed = zlib.crc32(name.encode()) % 1000 * 100_000
        self.name = name
        self.sw: dict[int, int] = {}
        # Sequences that share blocks (forks, and the popn into a shared prefix they allow).
        self.forked: set[int] = set()
        # True while a step runs whose sliding-layer attention may be undefined in TVM.
        self.undefined = False

    def do(self, op: dict, expect_error: bool = False) -> dict:
        try:
            out = run_op(self.api, self.cache, self.cfg, op)
        except Exception as e:  # noqa: BLE001 - TVM's refusals are recorded, not raised
            if not expect_error:
                raise RuntimeError(f"{self.name}: TVM refused {op}: {e}") from e
            self.ops.append({**op, "error": True})
            return {}
        if expect_error:
            raise RuntimeError(f"{self.name}: TVM accepted {op}, expected a refusal")
        if self.undefined and op["op"] in ("attn", "attn_shared") and op["layer"] == 0:
            self.ops.append({**op, "undefined_in_tvm": True})
            return out
        if op["op"] == "fork":
            self.forked |= {op["parent"], op["child"]}
        self.ops.append({**op, **out})
        return out

    def sliding_undefined(self, batch: list[tuple[int, int]]) -> bool:
        """Whether TVM's sliding-window prefill kernel may read its uninitialised running
        maximum in this step (docs/kv-cache.md): on a cache with a sliding layer, a step of
        several tokens (it appends after attention, so the kernel runs causal) whose first
        sequence with cached tokens holds a full window (its first column is masked), or
        whose sequences share blocks (kernel rows this test does not model)."""
        w = self.cfg["layer_window"]
        if w is None or all(n == 1 for _, n in batch):
            return False
        if any(s in self.forked for s, _ in batch):
            return True
        cached = [self.lens[s] for s, _ in batch if self.lens[s] > 0]
        return bool(cached) and cached[0] >= w

    def query_all(self) -> None:
        self.do({"op": "query", "fn": "num_available_pages", "args": []})
        self.do({"op": "query", "fn": "total_sequence_length", "args": []})
        self.do({"op": "query", "fn": "empty", "args": []})

    def step(
        self,
        batch: list[tuple[Any, int]],
        check_kv: bool = True,
        extra: bool = False,
        trees: list[list[int]] | None = None,
        accepted: list[int] | None = None,
        shared_sliding: bool = False,
        defined: bool = False,
    ) -> None:
        """TVM's ``apply_attention``: forks/adds, a step over every layer, the cached K/V;
        ``shared_sliding``: shared-KV attention on layer 0 (sliding) after its own; ``defined``:
        the caller knows the sliding-layer attention is defined in TVM."""
        seqs, lens = [], []
        for sid, n in batch:
            if isinstance(sid, tuple):
                sid, parent, pos = sid
                self.do({"op": "fork", "parent": parent, "child": sid, "pos": pos})
                self.lens[sid] = self.lens[parent] if pos == -1 else pos
            elif sid not in self.lens:
                self.do({"op": "add", "seq": sid})
                self.lens[sid] = 0
            seqs.append(sid)
            lens.append(n)
        begin: dict[str, Any] = {"op": "begin", "seqs": seqs, "lens": lens}
        if trees is not None:
            begin["tree"] = [p for t, n in zip(trees, lens) for p in t[len(t) - n :]]
        self.do(begin)
        self.undefined = not defined and self.sliding_undefined(list(zip(seqs, lens)))
        total = sum(lens)
        for layer in range(self.cfg["num_layers"]):
            self.seed += 1
            self.do(
                {
                    "op": "attn",
                    "layer": layer,
                    "sm_scale": self.cfg["head_dim"] ** -0.5,
                    "seed": self.seed,
                    "rows": total,
                }
            )
            if shared_sliding and layer == 0:
                self.seed += 1
                op = {"op": "attn_shared", "layer": 0, "sm_scale": self.cfg["head_dim"] ** -0.5}
                self.do({**op, "seed": self.seed, "rows": total})
        if extra:
            self.extra_attention(total)
        self.undefined = False
        self.do({"op": "end"})
        for sid, n in zip(seqs, lens):
            self.lens[sid] += n
        if accepted is not None:
            self.do({"op": "commit", "seqs": seqs, "leaves": accepted})
            for sid in seqs:
                got = self.do({"op": "query", "fn": "sequence_length", "args": [sid]})
                self.lens[sid] = got["result"]
        for sid in seqs:
            if self.sw.get(sid):
                self.lens[sid] = min(self.lens[sid], self.sw[sid])
        if check_kv:
            for sid in seqs:
                if self.lens[sid] > 0:
                    self.get_kv(sid)

    def get_kv(self, sid: int) -> None:
        """Reads the cached K/V of ``sid`` (TVM's debug_get_kv reads MHA layers only)."""
        if self.cfg["layer_window"] is None:
            self.do({"op": "get_kv", "seq": sid, "start": 0, "end": self.lens[sid]})

    def extra_attention(self, total: int) -> None:
        """The other attention entry points, after the step's own attention (on a step that
        appends after attention): TVM's pages start uninitialised, so every page slot a kernel
        reads must have been written, which the fused attention of every layer has done."""
        c = self.cfg
        calls = [(kind, c["num_layers"] - 1, False) for kind in ["self_attn", "cross_attn", "attn_shared"]]
        if c["layer_window"] is not None:
            # Layer 0 slides: TVM runs self attention without RoPE there and refuses cross
            # attention. (Shared-KV attention on it is not asked here: in these random batches
            # the first sequence may hold a full window, where TVM's result is undefined, see
            # docs/kv-cache.md; sliding_layer_multi_token records it where it is defined.)
            calls += [("self_attn", 0, False), ("cross_attn", 0, True)]
        for kind, layer, refused in calls:
            self.seed += 1
            op = {"op": kind, "layer": layer, "sm_scale": c["head_dim"] ** -0.5, "seed": self.seed, "rows": total}
            self.do(op, expect_error=refused)

    def remove(self, sid: int) -> None:
        self.do({"op": "remove", "seq": sid})
        del self.lens[sid]

    def popn(self, sid: int, n: int) -> None:
        self.do({"op": "popn", "seq": sid, "n": n})
        self.lens[sid] -= n

    def clear(self) -> None:
        self.do({"op": "clear"})
        self.lens.clear()
        self.sw = {}
        self.forked = set()
