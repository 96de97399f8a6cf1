"""The scale-out examples (examples/, docs/deploy.md) run end to end: multiprocessing in the
test environment, Ray and Dask in .venv-deploy (scripts/deploy-venv.sh, which scripts/test.sh
runs). Small workloads; the throughput they print is measured, not asserted (timings are
noisy on a shared machine)."""

import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEPLOY_PYTHON = os.path.join(ROOT, ".venv-deploy", "bin", "python")
LINE = r"{}: .*1 \w+ [0-9.]+ \w+/s, 2 \w+ [0-9.]+ \w+/s, [0-9.]+x"


def run_example(python: str, name: str) -> str:
    done = subprocess.run(
        [python, os.path.join(ROOT, "examples", name), "--tasks", "6", "--steps", "20"],
        capture_output=True,
        text=True,
        timeout=300,
        env=dict(os.environ, RELAXVM_NUM_THREADS="1"),
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_multiprocessing_pool():
    out = run_example(sys.executable, "multiprocessing_pool.py")
    assert re.search(LINE.format("multiprocessing"), out), out


@pytest.mark.skipif(not os.path.exists(DEPLOY_PYTHON), reason="no .venv-deploy (scripts/deploy-venv.sh makes it)")
@pytest.mark.parametrize("name, label", [("ray_actor.py", "ray"), ("dask_cluster.py", "dask")])
def test_ray_and_dask(name, label):
    out = run_example(DEPLOY_PYTHON, name)
    assert re.search(LINE.format(label), out), out
