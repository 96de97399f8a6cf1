#!/usr/bin/env bash
# Creates .venv at the repository root (if needed) with the Python tools the project uses, and
# builds and installs the relaxvm package into it (release build). Sourced by test.sh and demo.sh.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$root/.venv"
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
fi
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --upgrade pip
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$root/python/requirements-dev.txt"
# maturin develop installs the extension in place (editable), reusing cargo's build cache.
(cd "$root/python" && VIRTUAL_ENV="$venv" PATH="$venv/bin:$PATH" \
  "$venv/bin/maturin" develop --release --quiet)
