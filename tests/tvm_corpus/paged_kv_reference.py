"""The float64 reference of a causal sliding-window attention step and the float32 tolerance a
kernel's output is held to against it: the one definition (review R-kv-3) that
``tests/test_tvm_paged_kv_cache.py`` and the kvcache/02 reproducers
(``tests/adversarial/repro/kv_sliding_*.py``) use.

Independent of relaxvm's and TVM's kernels: plain numpy in float64, no RoPE (the corpus's
sliding configuration has rope mode 0)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: Relative tolerance of a float32 attention row: a window of terms summed, one division and
#: at most one merge of partial results, each a few units of float32's 2^-24 round-off (1e-5
#: leaves two orders of magnitude of room; a wrong column, window or merge moves an output of
#: order-1 inputs by far more).
RTOL = 1e-5
#: Absolute floor of the tolerance, for outputs near 0 (where rtol gives no room).
ATOL = 1e-6
#: Units in the last place of the largest base-2 score that the scores' own rounding may add.
SCORE_ULPS = 4


@dataclass
class Reference:
    """A step's float64 attention ``out`` (``(rows, qo_heads, dim)``) and, per row and head,
    the absolute tolerance ``atol`` (``(rows, qo_heads)``) of a float32 kernel's output."""

    out: np.ndarray
    atol: np.ndarray

    def mismatches(self, got: np.ndarray) -> list[tuple[int, int]]:
        """The (row, head) pairs of ``got`` outside the tolerance (a non-finite one included)."""
        got = np.asarray(got, "float64")
        bound = self.atol[..., None] + RTOL * np.abs(self.out)
        bad = ~(np.abs(got - self.out) <= bound).all(axis=-1)
        return [(int(r), int(h)) for r, h in zip(*np.nonzero(bad))]

    def assert_close(self, got: np.ndarray, what: str) -> None:
        bad = self.mismatches(got)
        if bad:
            r, h = bad[0]
            raise AssertionError(
                f"{what}: {len(bad)} (row, head) pairs differ from the float64 windowed attention; "
                f"first ({r}, {h}): got {np.asarray(got)[r, h][:4]}, want {self.out[r, h][:4]}, "
                f"atol {self.atol[r, h]:.3g}, rtol {RTOL}"
            )


def float32_atol(scores: np.ndarray, values: np.ndarray) -> float:
    """The absolute tolerance of one row and head: the kernels round each score in base-2 units
    (``s · log2 e``) to float32, so a score is off by a few units in the last place of the
    row's largest one; that moves every weight by as much (relative), so the output by as much
    times the values' scale. At 1000 times the usual query scale this is ~1e-4, and a fresh
    float32 computation is that far off too."""
    ulp = float(np.spacing(np.float32(np.abs(scores).max() * np.log2(np.e))))
    return ATOL + SCORE_ULPS * ulp * float(np.abs(values).max())


def windowed_attention(q, k_cached, v_cached, k_new, v_new, window: int, scale: float) -> Reference:
    """One sequence's step: query row ``r`` of ``q`` (``(n, qo, d)``) sees the cached tokens the
    window still holds (``k_cached[len - window + 1 + r:]``) and the step's tokens up to itself;
    grouped-query heads share their kv head (``k_*``/``v_*`` are ``(tokens, kv, d)``)."""
    q, kc, vc, kn, vn = (np.asarray(x, "float64") for x in (q, k_cached, v_cached, k_new, v_new))
    n, qo, _ = q.shape
    group = qo // kc.shape[1]
    out, atol = np.zeros(q.shape), np.zeros((n, qo))
    for r in range(n):
        keys = np.concatenate([kc[max(0, len(kc) - window + 1 + r) :], kn[: r + 1]])
        vals = np.concatenate([vc[max(0, len(vc) - window + 1 + r) :], vn[: r + 1]])
        for h in range(qo):
            s = keys[:, h // group] @ q[r, h] * scale
            p = np.exp(s - s.max())
            out[r, h] = (p / p.sum()) @ vals[:, h // group]
            atol[r, h] = float32_atol(s, vals[:, h // group])
    return Reference(out, atol)
