"""scripts/tvm-corpus.sh caches each suite on its own: run in a copy of the repository's layout
with stand-in builders (no TVM), an added builder builds only its suite, --full only the ONNX
suite, a changed shared helper every suite that imports it, and a rerun nothing."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

BUILDER = """import os, sys
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
import corpus
{imports}
os.makedirs(os.path.join(sys.argv[1], "{suite}"))
with open(os.path.join(sys.argv[1], "{suite}", "flags.txt"), "w") as f:
    f.write(" ".join(sys.argv[2:]))
"""


def tree(tmp: Path) -> Path:
    """A repository layout with the real script, a stand-in venv setup and two builders."""
    repo = tmp / "repo"
    (repo / "scripts").mkdir(parents=True)
    (repo / "tests" / "tvm_corpus").mkdir(parents=True)
    (repo / ".venv-tvm" / "bin").mkdir(parents=True)
    shutil.copy(ROOT / "scripts" / "tvm-corpus.sh", repo / "scripts")
    (repo / "scripts" / "setup-venv-tvm.sh").write_text("#!/bin/sh\ntrue\n")
    (repo / "scripts" / "setup-venv-tvm.sh").chmod(0o755)
    (repo / ".venv-tvm" / "bin" / "python").symlink_to(sys.executable)
    (repo / "scripts" / "progress.py").write_text("P = 1\n")
    corpus_dir = repo / "tests" / "tvm_corpus"
    (corpus_dir / "requirements.txt").write_text("numpy\n")
    (corpus_dir / "corpus.py").write_text("X = 1\n")
    add_builder(repo, "hand", "from progress import P")
    add_builder(repo, "onnx", "")
    return repo


def add_builder(repo: Path, suite: str, imports: str) -> None:
    path = repo / "tests" / "tvm_corpus" / f"build_{suite}.py"
    path.write_text(BUILDER.format(suite=suite, imports=imports))


def run(repo: Path, cache: Path, *flags: str) -> tuple[Path, list[str]]:
    """The corpus root the script prints, and the suites it built."""
    env = {**os.environ, "RELAXVM_CACHE_DIR": str(cache)}
    p = subprocess.run(
        ["bash", str(repo / "scripts" / "tvm-corpus.sh"), *flags], env=env, capture_output=True, text=True, check=True
    )
    built = [line.split()[5] for line in p.stderr.splitlines() if line.startswith("building the TVM corpus suite")]
    return Path(p.stdout.splitlines()[-1]), built


def suites(root: Path) -> dict[str, str]:
    return {d.name: (d / "flags.txt").read_text() for d in sorted(root.iterdir()) if d.is_dir()}


def test_each_suite_is_cached_on_its_own(tmp_path):
    repo, cache = tree(tmp_path), tmp_path / "cache"
    # No cache: every suite is built, and the root holds one folder per suite.
    root, built = run(repo, cache)
    assert built == ["hand", "onnx"]
    assert suites(root) == {"hand": "", "onnx": ""}
    # A rerun builds nothing and prints the same root.
    assert run(repo, cache) == (root, [])
    # A new builder builds its suite only.
    add_builder(repo, "paged_kv", "")
    root2, built = run(repo, cache)
    assert built == ["paged_kv"] and suites(root2) == {"hand": "", "onnx": "", "paged_kv": ""}
    # --full changes the ONNX suite only.
    root3, built = run(repo, cache, "--full")
    assert built == ["onnx"] and suites(root3)["onnx"] == "--full"
    # A helper that one builder imports rebuilds that one; corpus.py rebuilds every suite.
    with open(repo / "scripts" / "progress.py", "a") as f:
        f.write("Q = 2\n")
    assert run(repo, cache)[1] == ["hand"]
    with open(repo / "tests" / "tvm_corpus" / "corpus.py", "a") as f:
        f.write("Y = 2\n")
    assert run(repo, cache)[1] == ["hand", "onnx", "paged_kv"]


def test_two_builders_writing_one_suite_folder_are_refused(tmp_path):
    repo, cache = tree(tmp_path), tmp_path / "cache"
    (repo / "tests" / "tvm_corpus" / "build_other.py").write_text(BUILDER.format(suite="hand", imports=""))
    env = {**os.environ, "RELAXVM_CACHE_DIR": str(cache)}
    p = subprocess.run(["bash", str(repo / "scripts" / "tvm-corpus.sh")], env=env, capture_output=True, text=True)
    assert p.returncode == 1
    assert p.stderr.splitlines()[-1] == "tvm-corpus: two builders write the suite folder hand"
