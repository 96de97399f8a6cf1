#!/usr/bin/env bash
# Creates .venv-tvm at the repository root (if needed) with Apache TVM 0.27 and onnx, pinned in
# tests/tvm_corpus/requirements.txt. Test-only: it compiles the model corpus that the pytest suite then
# runs on relaxvm in .venv, where TVM is not installed.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$root/.venv-tvm"
req="$root/tests/tvm_corpus/requirements.txt"
stamp="$venv/.requirements.sha256"
want="$(sha256sum "$req" | cut -d' ' -f1)"
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
fi
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$req"
  echo "$want" > "$stamp"
fi
