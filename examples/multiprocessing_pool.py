"""Scale-out with the standard library: a pickled executable sent to a pool of worker
processes, each holding one VM, and the throughput at 1 and 2 workers.

Run: python examples/multiprocessing_pool.py [--tasks N] [--steps N]
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import pickle
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np  # noqa: E402
from model import build, inputs, reference  # noqa: E402

import relaxvm as rx  # noqa: E402

_vm = None


def init(pickled: bytes) -> None:
    """Worker initializer: one VM per process, from the pickled executable."""
    global _vm
    _vm = rx.VirtualMachine(pickle.loads(pickled))


def run(args: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
    """One task: a call of ``main`` in this worker's VM."""
    assert _vm is not None
    return _vm["main"](*args).numpy().copy()


def throughput(workers: int, pickled: bytes, tasks: list, ctx) -> tuple[float, list]:
    """Tasks per second with ``workers`` processes (pool start-up excluded)."""
    with ctx.Pool(workers, initializer=init, initargs=(pickled,)) as pool:
        pool.map(run, tasks[:workers])  # warm up every worker
        start = time.perf_counter()
        results = pool.map(run, tasks, chunksize=1)
        return len(tasks) / (time.perf_counter() - start), results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=40)
    parser.add_argument("--steps", type=int, default=200)
    a = parser.parse_args()
    pickled = pickle.dumps(build(a.steps))
    x, w = inputs()
    tasks = [(x, w)] * a.tasks
    ctx = mp.get_context("spawn")  # what macOS and Windows use; fork would hide pickling
    one, results = throughput(1, pickled, tasks, ctx)
    two, _ = throughput(2, pickled, tasks, ctx)
    np.testing.assert_allclose(results[0], reference(x, w, a.steps), rtol=1e-3, atol=1e-3)
    print(f"multiprocessing: 1 worker {one:.1f} tasks/s, 2 workers {two:.1f} tasks/s, {two / one:.2f}x")


if __name__ == "__main__":
    main()
