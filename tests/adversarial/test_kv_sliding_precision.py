"""Attack finding kvcache/02: TVM 0.27's causal sliding-window prefill kernel starts a row
on the running maximum the row before left; when that stale maximum lies 87 to 103 (natural
units) above the row's own scores, its weights are float32 subnormals of a few bits and the row
comes out finite but wrong by up to ~10% (in one sequence, and across the sequences of a batch).
relaxvm keeps TVM's bytes only where the kernel's own log-sum-exps certify the row
(builtins/src/paged_kv_cache/stale_max.rs) and computes the others again one kernel row per call.

Both reproducers (tests/adversarial/repro/) are swept over the query scales of the finding,
including the factors that failed (51, 54, 78), each sweep in one capped child process, against
a float64 windowed attention at a float32 tolerance."""

from __future__ import annotations

import os
import sys

import pytest
from attack import run_attack

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "tvm_corpus"))
import located  # noqa: E402

KV_SUITE = located.suite_dir("paged_kv")

#: The finding's sweep: the factors that failed, their neighbourhood and the far scales.
FACTORS = [2, 24, 48, 51, 52, 54, 56, 60, 66, 72, 78, 84, 90, 100, 1000]


def sweep(script: str, factors: list[int]) -> list[str]:
    """Runs reproducer ``script`` once per query-scale factor in one child; its verdict lines."""
    path = os.path.join(HERE, "repro", script)
    code = (
        "import runpy, sys\n"
        f"for f in {factors!r}:\n"
        f"    sys.argv = [{path!r}, str(f), '16']\n"
        "    print('factor', f)\n"
        f"    runpy.run_path({path!r})\n"
    )
    env = dict(os.environ, RELAXVM_TVM_CORPUS=os.path.dirname(KV_SUITE or ""))
    out = run_attack(code, env=env, timeout=120.0)
    out.assert_ended_by_itself()
    verdicts = [line for line in out.stdout.splitlines() if line.startswith("mismatching (row, head):")]
    assert len(verdicts) == len(factors), out.describe()
    return [f"factor {f}: {v}" for f, v in zip(factors, verdicts)]


@pytest.mark.skipif(KV_SUITE is None, reason=located.SKIP_REASON)
def test_rows_with_subnormal_weights_are_the_windowed_attention() -> None:
    bad = [v for v in sweep("kv_sliding_stale_max.py", FACTORS) if " 0 of " not in v]
    assert not bad, bad


@pytest.mark.skipif(KV_SUITE is None, reason=located.SKIP_REASON)
def test_another_sequences_scale_leaves_a_sequences_rows_right() -> None:
    bad = [v for v in sweep("kv_sliding_cross_sequence.py", FACTORS) if " 0 of " not in v]
    assert not bad, bad
