"""Progress where a person waits, and only on a terminal: the CLI's spinner while a large
executable loads and its bar over `profile --repeat` runs (indicatif), and the progress line of
the bench suite and the corpus builds (scripts/progress.py)."""

from __future__ import annotations

import io
import os
import pty
import subprocess
import sys

import numpy as np

import relaxvm as rx

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "scripts"))
from progress import Progress  # noqa: E402


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_the_progress_line_draws_on_a_terminal_only():
    tty, pipe = Terminal(), io.StringIO()
    for stream in (tty, pipe):
        with Progress(2, "corpus", stream) as p:
            p.step("mlp")
            p.step("conv")
    assert pipe.getvalue() == ""
    text = tty.getvalue()
    assert "corpus [1/2] mlp 0s" in text and "corpus [2/2] conv" in text and text.endswith("\r\x1b[2K")


def big_executable(path: str) -> None:
    """An executable of 80 MiB (a constant), past the CLI's 64 MiB spinner threshold."""
    ib = rx.ExecBuilder()
    with ib.function("main", num_inputs=0):
        ib.emit_call("vm.builtin.copy", [ib.convert_constant(np.zeros(20 << 20, "float32"))], ib.r(0))
        ib.emit_call("vm.builtin.shape_of", [ib.r(0)], ib.r(1))
        ib.emit_ret(ib.r(1))
    ib.get().save(path)


def run_cli(args: list[str], stderr_tty: bool) -> tuple[int, str, str]:
    """Runs the CLI with stderr on a pseudo-terminal (or a pipe); returns status, stdout, stderr."""
    cmd = [sys.executable, "-m", "relaxvm", *args]
    if not stderr_tty:
        done = subprocess.run(cmd, capture_output=True, text=True)
        return done.returncode, done.stdout, done.stderr
    primary, secondary = pty.openpty()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=secondary)
    os.close(secondary)
    with proc.stdout:
        out = proc.stdout.read().decode()
    proc.wait()
    err = b""
    while True:
        try:
            chunk = os.read(primary, 65536)
        except OSError:  # the terminal's other end closed
            break
        if not chunk:
            break
        err += chunk
    os.close(primary)
    return proc.returncode, out, err.decode(errors="replace")


def test_the_cli_shows_loading_and_runs_on_a_terminal(tmp_path):
    path = str(tmp_path / "big.rvx")
    big_executable(path)
    status, out, err = run_cli(["profile", path, "--repeat", "3"], stderr_tty=True)
    assert status == 0 and "main" in out, err
    assert "loading " in err and "(80 MiB)" in err, err
    assert "profiling [" in err and "3/3" in err, err
    status, out, err = run_cli(["profile", path, "--repeat", "3"], stderr_tty=False)
    assert status == 0 and err == "", err
    status, out, err = run_cli(["run", path], stderr_tty=False)
    assert status == 0 and out.strip() == "(20971520,)" and err == ""
