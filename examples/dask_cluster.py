"""Scale-out with Dask: the executable scattered once to a local cluster of worker processes,
each building its VM on first use; the throughput at 1 and 2 workers.

Run: python examples/dask_cluster.py [--tasks N] [--steps N]   (needs `pip install distributed`)
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np  # noqa: E402
from dask.distributed import Client, LocalCluster, get_worker  # noqa: E402
from model import build, inputs, reference  # noqa: E402

import relaxvm as rx  # noqa: E402


def run(ex: rx.Executable, x: np.ndarray, w: np.ndarray, _i: int) -> np.ndarray:
    """One task; each worker keeps one VM per executable it has seen."""
    worker = get_worker()
    vms = worker.__dict__.setdefault("relaxvm_vms", {})
    key = id(ex)
    if key not in vms:
        vms[key] = rx.VirtualMachine(ex)
    return vms[key]["main"](x, w).numpy().copy()


def throughput(workers: int, ex: rx.Executable, x: np.ndarray, w: np.ndarray, tasks: int):
    """Tasks per second on a cluster of ``workers`` single-threaded processes."""
    with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        with Client(cluster) as client:
            ex_f, x_f, w_f = client.scatter([ex, x, w], broadcast=True)
            client.gather(client.map(run, [ex_f] * workers, [x_f] * workers, [w_f] * workers, range(workers)))
            start = time.perf_counter()
            results = client.gather(client.map(run, [ex_f] * tasks, [x_f] * tasks, [w_f] * tasks, range(tasks)))
            return tasks / (time.perf_counter() - start), results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=40)
    parser.add_argument("--steps", type=int, default=200)
    a = parser.parse_args()
    ex = build(a.steps)
    x, w = inputs()
    one, results = throughput(1, ex, x, w, a.tasks)
    two, _ = throughput(2, ex, x, w, a.tasks)
    np.testing.assert_allclose(results[0], reference(x, w, a.steps), rtol=1e-3, atol=1e-3)
    print(f"dask: 1 worker {one:.1f} tasks/s, 2 workers {two:.1f} tasks/s, {two / one:.2f}x")


if __name__ == "__main__":
    main()
