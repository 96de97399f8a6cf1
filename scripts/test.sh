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
echo "== cargo test under AddressSanitizer: the crates with unsafe code (vm, builtins, tvm)"
# vm holds the unsafe memory code (storage, tensor views, the mapped format), builtins the
# kernels' unzeroed outputs, tvm the foreign calls into TVM libraries. (The python crate's unsafe
# code has no Rust tests: scripts/asan-python.sh runs the pytest suite against an ASan build.)
# Stable rustc with RUSTC_BOOTSTRAP=1 accepts -Zsanitizer; an explicit --target keeps build
# scripts and proc macros uninstrumented. Huge-allocation tests need malloc to return null, not
# abort. Freed storage goes back to malloc (no block cache), so a use after free is seen.
host="$(rustc -vV | sed -n 's/^host: //p')"
asan=(env RELAXVM_BLOCK_CACHE=0 ASAN_OPTIONS=allocator_may_return_null=1:detect_leaks=1 RUSTC_BOOTSTRAP=1
  RUSTFLAGS="-Zsanitizer=address" RUSTDOCFLAGS="-Zsanitizer=address")
timed() { local t=$SECONDS; "$@"; echo "(took $((SECONDS - t)) s)"; }
# ASan's quarantine keeps freed memory resident, so the resident-memory test (run above without
# it) would measure the sanitizer, not relaxvm.
timed "${asan[@]}" cargo test --quiet -p relaxvm -p relaxvm-builtins -p relaxvm-tvm --target "$host" \
  --target-dir "$root/target/asan" --lib --tests -- --skip resident_memory_stays_flat_over_100k_calls

echo "== fuzz targets under AddressSanitizer: build, and replay each corpus input once"
# fuzz/ is a workspace of its own (cargo-fuzz's layout); built as cargo-fuzz would without its
# coverage flags, which replaying does not need, into the ASan target dir (shared crates are
# built once). libFuzzer's -runs=0 runs every file of the corpus once and fuzzes nothing.
timed "${asan[@]}" cargo build --quiet --manifest-path "$root/fuzz/Cargo.toml" --target "$host" \
  --target-dir "$root/target/asan" --bins
for target in load asm interp tvm_import; do
  echo "replaying fuzz/corpus/$target"
  # -artifact_prefix: libFuzzer writes slow or crashing inputs there, not into the checkout.
  timed "${asan[@]}" "$root/target/asan/$host/debug/$target" -runs=0 -artifact_prefix="$logs/" \
    "$root/fuzz/corpus/$target" 2>"$logs/fuzz" \
    || { tail -n 40 "$logs/fuzz"; exit 1; }
  grep -E '^Done [0-9]+ runs' "$logs/fuzz"
done

echo "== python package"
"$root/scripts/setup-venv.sh"
echo "== cargo test --release of the builtins crate's unit tests"
# The optimiser may remove what a test observes (an unused impossible allocation, say): the
# kernels' unit tests run optimised too, after the package, whose release build of the crates
# they reuse. (The integration tests too would cost ten minutes of thin-LTO links per run.)
timed cargo test --quiet --release -p relaxvm-builtins --lib
echo "== release wheel (manylinux2014, stripped)"
RELAXVM_WHEEL="$("$root/scripts/build-wheel.sh" | tail -n 1)"
export RELAXVM_WHEEL
echo "wheel: $RELAXVM_WHEEL"
echo "== scale-out venv (Ray, Dask) for the examples"
"$root/scripts/deploy-venv.sh" >/dev/null
echo "== ruff"
"$root/.venv/bin/ruff" format --check python tests examples scripts
"$root/.venv/bin/ruff" check python tests examples scripts
"$root/.venv/bin/python" "$root/scripts/error-coverage.py"  # every error message is caused by a test, or listed with why
echo "== TVM model corpus (compiled in .venv-tvm, cached)"
# Built by Apache TVM in its own venv; the tests run it in .venv, where TVM is absent.
# RELAXVM_TVM_FULL=1 builds every ONNX backend test instead of the default subset.
corpus_flags=()
[ "${RELAXVM_TVM_FULL:-0}" = 1 ] && corpus_flags+=(--full)
RELAXVM_TVM_CORPUS="$("$root/scripts/tvm-corpus.sh" "${corpus_flags[@]}" | tail -n 1)"
export RELAXVM_TVM_CORPUS
echo "corpus: $RELAXVM_TVM_CORPUS"
echo "== pytest"
"$root/.venv/bin/python" -m pytest -q tests --junitxml "$logs/pytest.xml" | tee "$logs/pytest"
echo "== skipped tests (tests/expected-skips.txt lists the skips CI allows)"
"$root/.venv/bin/python" "$root/scripts/check-skips.py" "$logs/pytest.xml"

rust="$(awk '/^test result:/ {p += $4; i += $8} END {printf "%d passed, %d ignored", p, i}' "$logs/cargo")"
echo "== summary: Rust: $rust; Python: $(tail -n 1 "$logs/pytest" | sed 's/^=* *//; s/ *=*$//'); $((SECONDS / 60)) min $((SECONDS % 60)) s"
