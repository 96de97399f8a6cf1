"""Rust-side diagnostics go through the log crate: to Python's logging in the package, to stderr
at the level RELAXVM_LOG names in the CLI. Checked on a model TVM compiled (the corpus's MLP):
opening its library, and a strided numpy view passed to a kernel through an aligned copy."""

from __future__ import annotations

import logging
import os
import subprocess
import sys

import numpy as np
import pytest

import relaxvm as rx

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "tvm_corpus"))
import located  # noqa: E402

SUITE = located.suite_dir("hand")
pytestmark = pytest.mark.skipif(SUITE is None, reason=located.SKIP_REASON)


def test_diagnostics_reach_python_logging(caplog):
    path = os.path.join(SUITE, "mlp", "model.so")
    with caplog.at_level(logging.DEBUG, logger="relaxvm_tvm"):
        vm = rx.VirtualMachine(rx.load_module(path))
        vm["main"](np.ones((2, 785), "float32")[:, 1:])  # a strided view
    messages = [(r.name, r.levelno, r.getMessage()) for r in caplog.records if r.name.startswith("relaxvm_tvm")]
    assert ("relaxvm_tvm.ffi.library", logging.DEBUG) in {(n, lv) for n, lv, _ in messages}, messages
    assert any('kernel "matmul": argument 0 ((2, 784))' in m and "aligned copy" in m for _, _, m in messages), messages


def test_quiet_unless_asked(caplog):
    with caplog.at_level(logging.WARNING):
        rx.VirtualMachine(rx.load_module(os.path.join(SUITE, "mlp", "model.so")))
    assert not [r for r in caplog.records if r.name.startswith("relaxvm")]


def test_the_cli_logs_at_the_level_relaxvm_log_names(tmp_path):
    x = tmp_path / "x.npy"
    np.save(x, np.ones((1, 784), "float32"))
    args = [sys.executable, "-m", "relaxvm", "run", os.path.join(SUITE, "mlp", "model.so"), "--input", str(x)]
    loud = subprocess.run(args, capture_output=True, text=True, env=dict(os.environ, RELAXVM_LOG="debug"))
    assert loud.returncode == 0 and "opened " in loud.stderr and "5 kernels" in loud.stderr, loud.stderr
    quiet = subprocess.run(
        args, capture_output=True, text=True, env={k: v for k, v in os.environ.items() if k != "RELAXVM_LOG"}
    )
    assert quiet.returncode == 0 and quiet.stderr == "", quiet.stderr
