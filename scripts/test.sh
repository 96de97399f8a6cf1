#!/usr/bin/env bash
# Runs every test: Rust formatting, lints and tests, then the pytest suite through the
# Python package (built in release mode into .venv). Installs what it needs.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

echo "== cargo fmt --check"
cargo fmt --all -- --check
echo "== cargo clippy"
cargo clippy --workspace --all-targets --quiet -- -D warnings
echo "== cargo test"
cargo test --workspace --exclude relaxvm-python

echo "== python package"
"$root/scripts/setup-venv.sh"
echo "== ruff"
"$root/.venv/bin/ruff" format --check python tests
"$root/.venv/bin/ruff" check python tests
echo "== pytest"
"$root/.venv/bin/python" -m pytest -q tests
