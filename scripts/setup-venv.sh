#!/usr/bin/env bash
# Creates .venv at the repository root (if needed) with the Python tools the project uses, and
# builds and installs the relaxvm package into it (release build). Run by test.sh and demo.sh.
# On a terminal cargo shows its progress (the first build takes minutes); elsewhere it is quiet.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$root/.venv"
if [ ! -x "$venv/bin/python" ]; then
  echo "creating $venv" >&2
  python3 -m venv "$venv"
fi
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --upgrade pip
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$root/python/requirements-dev.txt"
quiet=(--quiet)
if [ -t 2 ]; then
  quiet=()
  echo "building the relaxvm package (release; a few minutes the first time)" >&2
fi
# maturin develop installs the extension in place (editable), reusing cargo's build cache in
# target/ (`pip install ./python` builds in target/pip instead, python/.cargo/config.toml: its
# isolated build environment would otherwise make each rebuild the other's crates).
(cd "$root/python" && VIRTUAL_ENV="$venv" PATH="$venv/bin:$PATH" \
  "$venv/bin/maturin" develop --release "${quiet[@]}" --target-dir "$root/target")
