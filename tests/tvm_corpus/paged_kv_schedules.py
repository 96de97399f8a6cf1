"""The schedules of the ``paged_kv`` suite: those of TVM's CPU test of the paged KV cache, the
multi-token sliding-layer steps, and seeded random ones."""

from __future__ import annotations

import os
import sys
from typing import Callable

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from paged_kv_recorder import Recorder  # noqa: E402


def tvm_test_schedules(
    rec_factory: Callable[[str], Recorder], sliding: bool, layer_window: bool
) -> list[tuple[str, Recorder]]:
    """The schedules of TVM's CPU test (which clears the cache first)."""
    out = []

    def new(name: str) -> Recorder:
        r = rec_factory(name)
        r.sw = {}
        r.clear()
        out.append((name, r))
        return r

    r = new("prefill_and_decode")
    ops = [[(0, 6)], [(1, 8)], [(2, 11)], [(3, 16)], [(4, 19), (5, 20)]]
    ops += [[(6, 21), (7, 24)], [(2, 5), (4, 7), (8, 24)]]
    ops += [[(6, 13)], [(8, 19)], [(0, 1)], [(1, 3), (3, 8), (5, 12), (7, 11)]]
    ops += [[(i, 1) for i in range(9)]] * 2
    ops += [[(0, 1), (2, 1), (4, 1), (6, 1), (8, 1)], [(4, 1), (5, 1), (6, 1), (7, 1), (8, 1)]]
    for b in ops:
        r.step(b)

    r = new("remove_sequence")
    for sid in range(5):
        r.step([(s, 1) for s in range(5)])
        r.remove(sid)
        for s in r.lens:
            r.get_kv(s)

    r = new("fork_sequence")
    r.step([(0, 60), (1, 88), (2, 17), (3, 4)])
    for b in [
        [((4, 3, -1), 35)],
        [((5, 0, -1), 20)],
        [((6, 5, -1), 102)],
        [((7, 0, -1), 3)],
        [((8, 5, -1), 71), ((9, 5, -1), 20)],
    ]:
        r.step(b)
    for b in [
        [(2, 1), (4, 1), (7, 1), (6, 1), (8, 1), (9, 1)],
        [(7, 1), (6, 1), (8, 1), (9, 1)],
        [(7, 1), (1, 1), (6, 1), (2, 1), (8, 1), (4, 1), (9, 1)],
        [(7, 10), (6, 2), (8, 3), (9, 4)],
    ]:
        r.step(b)
    for b in [
        [((10, 1, 33), 11)],
        [((11, 0, 60), 45), ((12, 0, 15), 14)],
        [((13, 0, 16), 19), ((14, 0, 17), 19)],
        [((15, 5, 60), 8), ((16, 5, 80), 10)],
        [((17, 5, 75), 11), ((18, 5, 76), 45), ((19, 5, 77), 14)],
    ]:
        r.step(b)
    for b in [
        [(6, 1), (11, 1), (13, 1), (9, 1)],
        [(10, 1), (16, 1), (18, 1), (19, 1)],
        [(8, 1), (15, 1), (17, 1), (12, 1), (14, 1)],
        [(10, 10), (6, 2), (8, 3), (19, 4)],
    ]:
        r.step(b)
    for i in range(20):
        r.remove(i)
        for s in sorted(r.lens):
            r.get_kv(s)
    r.query_all()
    for b in [
        [(0, 7), (1, 24)],
        [((2, 1, -1), 10)],
        [((3, 0, -1), 20)],
        [(2, 1), (3, 1)],
        [(10, 7), (11, 24)],
        [((12, 11, -1), 200)],
        [(10, 1), (12, 1)],
    ]:
        r.step(b)

    r = new("unlimited_depth")
    r.step([(0, 30)])
    for b in [
        ((1, 0, -1), 15),
        ((2, 1, -1), 5),
        ((3, 2, -1), 20),
        ((4, 3, -1), 26),
        ((5, 3, -1), 18),
        ((6, 5, -1), 22),
        ((7, 5, -1), 12),
        ((8, 7, -1), 29),
        ((9, 7, -1), 9),
        ((10, 9, -1), 31),
        ((11, 9, -1), 4),
    ]:
        r.step([b])
    for b in [[(3, 1), (6, 1), (9, 1)], [(4, 1), (8, 1), (10, 1)], [(5, 1), (7, 1), (11, 1)]]:
        r.step(b)
    for i in range(12):
        r.remove(i)
    r.query_all()

    r = new("popn")
    r.step([(0, 35), (1, 88), (2, 17), (3, 4)])
    r.step([((4, 3, -1), 35)])
    for sid, n in [(0, 17), (1, 57), (2, 16), (3, 0), (4, 37)]:
        r.popn(sid, n)
        for s in range(4):
            r.get_kv(s)
    for sid in range(5):
        r.remove(sid)
    r.query_all()
    if layer_window:
        # TVM's test_per_layer_sliding_window and test_attention_with_shared_kv: layer 0 slides.
        r = new("per_layer_sliding_window_and_shared_kv")
        for n in [3, 2, 1, 30, 1, 17, 1]:
            r.step([(0, n)])
            r.do({"op": "begin", "seqs": [0], "lens": [1]})
            r.seed += 1
            r.do({"op": "attn", "layer": 0, "sm_scale": r.cfg["head_dim"] ** -0.5, "seed": r.seed, "rows": 1})
            r.seed += 1
            r.do({"op": "attn_shared", "layer": 0, "sm_scale": r.cfg["head_dim"] ** -0.5, "seed": r.seed, "rows": 1})
            r.do({"op": "end"})
            r.lens[0] += 1
    if layer_window:
        # Steps of several tokens on the sliding layer, with shared-KV attention on it too:
        # each batch's first sequence with cached tokens holds fewer than the window, so TVM's
        # sliding-window prefill kernel starts from a visible column and its result is defined
        # (checked: the same bytes in separate TVM processes); the sequences after it, past the
        # window, start masked and go on from the value the row before left (defined too). A
        # first row past the window reads an uninitialised value in TVM: not recorded (see
        # docs/kv-cache.md; relaxvm's defined result is tested in test_tvm_paged_kv_cache.py).
        r = new("sliding_layer_multi_token")
        w = r.cfg["layer_window"]
        for b in [[(0, 5)], [(1, w + 16)], [(0, 6), (1, 5)], [(0, 4), (1, 7)], [(0, 2), ((2, 1, -1), 3), (1, 3)]]:
            r.step(b, check_kv=False, shared_sliding=True, defined=True)
        for b in [[(3, w - 4)], [(3, 9), (1, 4)], [(0, 1), (2, 2), (3, 3)]]:
            r.step(b, check_kv=False, shared_sliding=True, defined=True)
    if not sliding and not layer_window:
        r = new("tree_attn")
        if r.cfg["rope_mode"] != 2:  # TVM: token trees need RoPE applied outside the kernels
            prefix = [(0, 10), (1, 20), (2, 30), (3, 40)]
            r.step(prefix)
            binary3 = [-1, 0, 0, 1, 1, 2, 2]
            binary4 = [-1, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6]
            chain10 = list(range(-1, 9))
            two3 = [-1, 0, 0, 1, 1, 2, 2, -1, 7, 7, 8, 8, 9, 9]
            r.step(
                [(0, 7), (1, 15), (2, 10), (3, 14)], trees=[binary3, binary4, chain10, two3], accepted=[6, 11, 6, 13]
            )
            for _ in range(5):
                r.step([(s, 1) for s in range(4)])
            r.clear()
            r.step(prefix)
            chains = [list(range(-1, n - 1)) for n in (7, 15, 10, 14)]
            r.step([(0, 7), (1, 15), (2, 10), (3, 14)], trees=chains, accepted=[2, 6, -1, 4])
            for _ in range(5):
                r.step([(s, 1) for s in range(4)])
            r.clear()
            r.step(prefix)
            for i in range(5):
                leaves = 2**i
                parents = [(k - 1) // 2 for k in range(2 * leaves - 1)]
                r.step([(s, leaves) for s in range(4)], trees=[parents] * 4, accepted=[2, 6, -1, 4] if i == 4 else None)
    if not sliding and not layer_window:
        r = new("checkpoint")
        r.step([(0, 37), (1, 5)])
        r.step([(0, 1), (1, 1)])
        r.do({"op": "checkpoint", "seq": 1}, expect_error=True)
        r.do({"op": "finish_import", "seq": 0}, expect_error=True)
        r.do({"op": "checkpoint", "seq": 0})
        r.lens = {0: r.lens[0]}
        r.get_kv(0)
        for _ in range(3):
            r.step([(0, 1)])
        r.step([((2, 0, 20), 3), (0, 2)])
    if sliding:
        r = new("sliding_window")
        sizes, sinks = [20, 25, 30, 35, 40], [6, 4, 8, 3, 7]
        for sid, (w, s) in enumerate(zip(sizes, sinks)):
            r.do({"op": "add", "seq": sid})
            r.do({"op": "enable_sw", "seq": sid, "window": w, "sink": s})
            r.lens[sid] = 0
            r.sw[sid] = w
        for b in [
            [(0, 4)],
            [(1, 6)],
            [(2, 6), (3, 7), (4, 7)],
            [(0, 20), (1, 19), (2, 30), (3, 35), (4, 40)],
            [(0, 6), (1, 5), (2, 4), (3, 3), (4, 2)],
        ]:
            r.step(b)
        for _ in range(20):
            r.step([(i, 1) for i in range(5)])

        r = new("sliding_window_fork")
        sizes, sinks = [30, 35, 40], [15, 20, 25]
        for sid, (w, s) in enumerate(zip(sizes, sinks)):
            r.do({"op": "add", "seq": sid})
            r.do({"op": "enable_sw", "seq": sid, "window": w, "sink": s})
            r.lens[sid] = 0
            r.sw[sid] = w
        r.step([(0, 12), (1, 18), (2, 28)])
        r.step([((3, 0, 10), 8), ((4, 1, -1), 20), ((5, 2, 18), 18)])
        r.step([(0, 9), (1, 15), (2, 4), (3, 10), (4, 3), (5, 7)])
        r.do({"op": "fork", "parent": 3, "child": 6, "pos": 18})
        r.lens[6] = 18
        r.do({"op": "enable_sw", "seq": 6, "window": 25, "sink": 24})
        r.sw[6] = 25
        r.step([(3, 10), (6, 12)])
    return out


def random_schedule(r: Recorder, seed: int, steps: int) -> None:
    """Seeded random operations, each valid for the state, plus refused calls."""
    rng = np.random.default_rng(seed)
    ps = r.cfg["page_size"]
    r.clear()
    next_id = 0

    def fresh() -> int:
        nonlocal next_id
        next_id += 1
        return next_id - 1

    for _ in range(steps):
        live = sorted(r.lens)
        used = sum(r.lens.values())
        choice = rng.integers(0, 10)
        if not live or choice == 0:
            r.step([(fresh(), int(rng.integers(1, 3 * ps)))])
        elif choice <= 3:  # batched decode (or a short batch prefill)
            pick = [int(s) for s in rng.choice(live, size=min(len(live), int(rng.integers(1, 5))), replace=False)]
            n = 1 if choice <= 2 else int(rng.integers(2, 9))
            r.step([(s, n) for s in pick], extra=n > 1)
        elif choice == 4:  # chunked prefill: one sequence in several steps
            s = int(rng.choice(live))
            for _ in range(int(rng.integers(2, 4))):
                r.step([(s, int(rng.integers(ps // 2, 2 * ps + 3)))], check_kv=False)
            r.get_kv(s)
        elif choice == 5:  # fork mid-page or at a page boundary, then decode both
            p = int(rng.choice(live))
            if r.lens[p] == 0:
                continue
            boundary = [k * ps for k in range(r.lens[p] // ps + 1)]
            pos = int(rng.choice(boundary)) if rng.integers(0, 2) else int(rng.integers(0, r.lens[p] + 1))
            if rng.integers(0, 4) == 0:
                pos = -1
            c = fresh()
            r.step([((c, p, pos), int(rng.integers(1, ps + 2))), (p, 1)])
        elif choice == 6:  # popn, possibly into a shared prefix
            s = int(rng.choice(live))
            if r.lens[s]:
                r.popn(s, int(rng.integers(0, r.lens[s] + 1)))
                if r.lens[s]:
                    r.get_kv(s)
        elif choice == 7 and len(live) > 1:
            r.remove(int(rng.choice(live)))
        elif choice == 8:  # refused calls, then a decode that must still match
            s = int(rng.choice(live))
            bad = [
                {"op": "add", "seq": s},
                {"op": "popn", "seq": s, "n": r.lens[s] + 1},
                {"op": "fork", "parent": 10_000, "child": fresh(), "pos": -1},
                {"op": "fork", "parent": s, "child": s, "pos": -1},
                {"op": "remove", "seq": 10_000},
                # The missing sequence first: TVM grows the lengths of the ones before it
                # before it finds the missing one (relaxvm checks first).
                {"op": "begin", "seqs": [10_000, s], "lens": [1, 1]},
            ]
            r.do(bad[int(rng.integers(0, len(bad)))], expect_error=True)
            r.step([(s, 1)])
        elif choice == 9 and rng.integers(0, 6) == 0:
            r.clear()
            r.query_all()
        if used > 1000:
            r.remove(max(r.lens, key=lambda k: r.lens[k]))
        r.query_all()
    for s in sorted(r.lens):
        r.do({"op": "query", "fn": "sequence_length", "args": [s], "result": r.lens[s]})
