#!/usr/bin/env bash
# Runs every test: Rust formatting, lints and tests, then the pytest suite through the
# Python package (built in release mode into .venv). Installs what it needs.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
logs="$(mktemp -d)"
trap 'rm -rf "$logs"' EXIT

echo "== cargo fmt --check"
cargo fmt --all -- --check
echo "== cargo clippy"
cargo clippy --workspace --all-targets --quiet -- -D warnings
echo "== cargo doc (warnings are errors)"
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --quiet
echo "== cargo test"
cargo test --workspace --exclude relaxvm-python 2>&1 | tee "$logs/cargo"
echo "== cargo test of the vm crate under AddressSanitizer"
# The vm crate holds the unsafe memory code (storage, tensor views, the mapped format). Stable
# rustc with RUSTC_BOOTSTRAP=1 accepts -Zsanitizer; an explicit --target keeps build scripts and
# proc macros uninstrumented. Huge-allocation tests need malloc to return null, not abort.
# Freed storage goes back to malloc (no block cache), so a use after free is seen.
host="$(rustc -vV | sed -n 's/^host: //p')"
RELAXVM_BLOCK_CACHE=0 ASAN_OPTIONS=allocator_may_return_null=1:detect_leaks=1 RUSTC_BOOTSTRAP=1 \
  RUSTFLAGS="-Zsanitizer=address" RUSTDOCFLAGS="-Zsanitizer=address" \
  cargo test --quiet -p relaxvm --target "$host" --target-dir "$root/target/asan" --lib --tests

echo "== python package"
"$root/scripts/setup-venv.sh"
echo "== release wheel (manylinux2014, stripped)"
RELAXVM_WHEEL="$("$root/scripts/build-wheel.sh" | tail -n 1)"
export RELAXVM_WHEEL
echo "wheel: $RELAXVM_WHEEL"
echo "== scale-out venv (Ray, Dask) for the examples"
"$root/scripts/deploy-venv.sh" >/dev/null
echo "== ruff"
"$root/.venv/bin/ruff" format --check python tests examples scripts
"$root/.venv/bin/ruff" check python tests examples scripts
echo "== TVM model corpus (compiled in .venv-tvm, cached)"
# Built by Apache TVM in its own venv; the tests run it in .venv, where TVM is absent.
# RELAXVM_TVM_FULL=1 builds every ONNX backend test instead of the default subset.
corpus_flags=()
[ "${RELAXVM_TVM_FULL:-0}" = 1 ] && corpus_flags+=(--full)
RELAXVM_TVM_CORPUS="$("$root/scripts/tvm-corpus.sh" "${corpus_flags[@]}" | tail -n 1)"
export RELAXVM_TVM_CORPUS
echo "corpus: $RELAXVM_TVM_CORPUS"
echo "== pytest"
"$root/.venv/bin/python" -m pytest -q tests | tee "$logs/pytest"

rust="$(awk '/^test result:/ {p += $4; i += $8} END {printf "%d passed, %d ignored", p, i}' "$logs/cargo")"
echo "== summary: Rust: $rust; Python: $(tail -n 1 "$logs/pytest" | sed 's/^=* *//; s/ *=*$//'); $((SECONDS / 60)) min $((SECONDS % 60)) s"
