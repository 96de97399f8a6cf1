"""Scale-out with Ray: a task that builds its VM from the pickled executable, and actors that
each hold a VM for many calls; the throughput at 1 and 2 actors.

Run: python examples/ray_actor.py [--tasks N] [--steps N]   (needs `pip install ray`)
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np  # noqa: E402
import ray  # noqa: E402
from model import build, inputs, reference  # noqa: E402

import relaxvm as rx  # noqa: E402


@ray.remote
def run_once(ex: rx.Executable, x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """A task: the executable travels pickled, the VM lives for one call."""
    return rx.VirtualMachine(ex)["main"](x, w).numpy().copy()


@ray.remote(num_cpus=1)
class Runner:
    """An actor holding one VM for every call it serves."""

    def __init__(self, ex: rx.Executable) -> None:
        self.vm = rx.VirtualMachine(ex)

    def run(self, x: np.ndarray, w: np.ndarray) -> np.ndarray:
        return self.vm["main"](x, w).numpy().copy()


def throughput(actors: list, tasks: int, x_ref, w_ref) -> float:
    """Calls per second spread over ``actors`` (round robin)."""
    ray.get([a.run.remote(x_ref, w_ref) for a in actors])  # warm up
    start = time.perf_counter()
    ray.get([actors[i % len(actors)].run.remote(x_ref, w_ref) for i in range(tasks)])
    return tasks / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=40)
    parser.add_argument("--steps", type=int, default=200)
    a = parser.parse_args()
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        ex = build(a.steps)
        x, w = inputs()
        got = ray.get(run_once.remote(ex, x, w))
        np.testing.assert_allclose(got, reference(x, w, a.steps), rtol=1e-3, atol=1e-3)
        x_ref, w_ref = ray.put(x), ray.put(w)
        one = throughput([Runner.remote(ex)], a.tasks, x_ref, w_ref)
        two = throughput([Runner.remote(ex), Runner.remote(ex)], a.tasks, x_ref, w_ref)
        print(f"ray: task ok; 1 actor {one:.1f} calls/s, 2 actors {two:.1f} calls/s, {two / one:.2f}x")
    finally:
        ray.shutdown()


if __name__ == "__main__":
    main()
