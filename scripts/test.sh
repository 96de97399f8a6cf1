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
echo "== cargo test of the vm crate under AddressSanitizer"
# The vm crate holds the unsafe memory code (storage, tensor views, the mapped format). Stable
# rustc with RUSTC_BOOTSTRAP=1 accepts -Zsanitizer; an explicit --target keeps build scripts and
# proc macros uninstrumented. Huge-allocation tests need malloc to return null, not abort.
host="$(rustc -vV | sed -n 's/^host: //p')"
ASAN_OPTIONS=allocator_may_return_null=1:detect_leaks=1 RUSTC_BOOTSTRAP=1 \
  RUSTFLAGS="-Zsanitizer=address" RUSTDOCFLAGS="-Zsanitizer=address" \
  cargo test --quiet -p relaxvm --target "$host" --target-dir "$root/target/asan" --lib --tests

echo "== python package"
"$root/scripts/setup-venv.sh"
echo "== ruff"
"$root/.venv/bin/ruff" format --check python tests
"$root/.venv/bin/ruff" check python tests
echo "== TVM model corpus (compiled in .venv-tvm, cached)"
# Built by Apache TVM in its own venv; the tests run it in .venv, where TVM is absent.
# RELAXVM_TVM_FULL=1 builds every ONNX backend test instead of the default subset.
corpus_flags=()
[ "${RELAXVM_TVM_FULL:-0}" = 1 ] && corpus_flags+=(--full)
RELAXVM_TVM_CORPUS="$("$root/scripts/tvm-corpus.sh" "${corpus_flags[@]}" | tail -n 1)"
export RELAXVM_TVM_CORPUS
echo "corpus: $RELAXVM_TVM_CORPUS"
echo "== pytest"
"$root/.venv/bin/python" -m pytest -q tests
