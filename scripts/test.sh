#!/usr/bin/env bash
# Runs every test: Rust formatting, lints and tests, the C API under AddressSanitizer, then the
# pytest suite through the Python package (built in release mode into .venv). Installs what it
# needs (README.md, "Set-up", says what and where).
#
# Each section's output goes to a log under target/test-logs/; a passing section prints one
# line, a failing one prints its log's end and stops the run. RELAXVM_TEST_VERBOSE=1 streams
# every section's output instead.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
logs="$root/target/test-logs"
rm -rf "$logs"
mkdir -p "$logs"
verbose="${RELAXVM_TEST_VERBOSE:-0}"

# section NAME CMD...: runs CMD, its output in $logs/NAME.log; one line with the time taken, or,
# on failure, the log's last 150 lines and the exit.
section() {
  local name="$1" t=$SECONDS status=0
  shift
  local log="$logs/$name.log"
  printf '== %-58s' "$name"
  if [ "$verbose" = 1 ]; then
    echo
    "$@" 2>&1 | tee "$log" || status=$?
  else
    # On a terminal, a dot every 10 s shows a long section is alive.
    local beat=
    if [ -t 1 ]; then
      (while sleep 10; do printf .; done) &
      beat=$!
    fi
    "$@" >"$log" 2>&1 || status=$?
    if [ -n "$beat" ]; then
      kill "$beat" 2>/dev/null || true
      wait "$beat" 2>/dev/null || true
      printf '\r== %-58s' "$name"
    fi
  fi
  if [ "$status" = 0 ]; then
    printf 'ok %5d s\n' $((SECONDS - t))
  else
    printf 'FAILED after %d s (exit %d); the end of %s:\n' $((SECONDS - t)) "$status" "$log"
    tail -n 150 "$log"
    exit "$status"
  fi
}

section fmt cargo fmt --all -- --check
# The rules docs/architecture.md states: layers, no import circles, where unsafe and foreign
# code may be, no `_` arm over instructions, file lengths, documented public items.
section architecture python3 "$root/scripts/check-architecture.py"
section clippy cargo clippy --workspace --all-targets --quiet -- -D warnings
section doc env RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --quiet
# The crates as crates.io would receive them; --no-verify: a verify build of each packaged crate
# would cost minutes of compiling what the test builds compile anyway.
section package cargo package --workspace --exclude relaxvm-python --no-verify --allow-dirty --quiet
lean_tree() {
  # The runtime an embedder links: relaxvm without its default `tooling` feature (and so the
  # layers below it: relaxvm-threads, relaxvm-core, relaxvm-isa and relaxvm-tools without theirs), the builtins
  # without their default `json` feature, and the builder without its CLI, compile none of the
  # tooling crates.
  local tree
  tree="$(for p in relaxvm relaxvm-threads relaxvm-core relaxvm-isa relaxvm-tools relaxvm-builtins relaxvm-builder; do
    cargo tree -p "$p" --no-default-features -e normal --prefix none; done)"
  if grep -E '^(zip|csv|serde_json|serde|tempfile|clap|indicatif|env_logger) ' <<<"$tree"; then
    echo "the lean runtime pulls the tooling crates above" >&2
    return 1
  fi
  cargo check --quiet -p relaxvm -p relaxvm-threads -p relaxvm-core -p relaxvm-isa -p relaxvm-tools --no-default-features
  # Without `json`, the builtins that read JSON stay registered and fail naming the feature.
  cargo test --quiet -p relaxvm-builtins --no-default-features --lib json_absent
  echo "lean runtime: $(sed 's/ (.*//' <<<"$tree" | sort -u | wc -l) crates"
}
section lean-runtime lean_tree
section cargo-test cargo test --workspace --exclude relaxvm-python

# core holds the unsafe memory code (storage, tensor views), isa the mapped format, builtins the
# kernels' unzeroed outputs, tvm the foreign calls into TVM libraries, capi the C API's entry
# points (raw pointers, DLPack, C callbacks; its C programs run under ASan below too). (The
# python crate's unsafe code has no Rust tests: scripts/asan-python.sh runs the pytest suite
# against an ASan build.)
# Stable rustc with RUSTC_BOOTSTRAP=1 accepts -Zsanitizer; an explicit --target keeps build
# scripts and proc macros uninstrumented. Huge-allocation tests need malloc to return null, not
# abort. Freed storage goes back to malloc (no block cache), so a use after free is seen.
host="$(rustc -vV | sed -n 's/^host: //p')"
asan=(env RELAXVM_BLOCK_CACHE=0 ASAN_OPTIONS=allocator_may_return_null=1:detect_leaks=1 RUSTC_BOOTSTRAP=1
  RUSTFLAGS="-Zsanitizer=address" RUSTDOCFLAGS="-Zsanitizer=address")
# ASan's quarantine keeps freed memory resident, so the resident-memory test (run above without
# it) would measure the sanitizer, not relaxvm.
section cargo-test-asan "${asan[@]}" cargo test --quiet -p relaxvm-threads -p relaxvm-core -p relaxvm-isa -p relaxvm-tools -p relaxvm -p relaxvm-builtins -p relaxvm-tvm \
  -p relaxvm-capi \
  --target "$host" --target-dir "$root/target/asan" --lib --tests -- --skip resident_memory_stays_flat_over_100k_calls

# fuzz/ is a workspace of its own (cargo-fuzz's layout); built as cargo-fuzz would without its
# coverage flags, which replaying does not need, into the ASan target dir (shared crates are
# built once). libFuzzer's -runs=0 runs every file of the corpus once and fuzzes nothing.
fuzz_replay() {
  "${asan[@]}" cargo build --quiet --manifest-path "$root/fuzz/Cargo.toml" --target "$host" \
    --target-dir "$root/target/asan" --bins
  for target in load asm interp tvm_import; do
    echo "replaying fuzz/corpus/$target"
    # -artifact_prefix: libFuzzer writes slow or crashing inputs there, not into the checkout.
    "${asan[@]}" "$root/target/asan/$host/debug/$target" -runs=0 -artifact_prefix="$logs/" \
      "$root/fuzz/corpus/$target" >"$logs/fuzz-$target.log" 2>&1 || { cat "$logs/fuzz-$target.log"; return 1; }
    grep -E '^Done [0-9]+ runs' "$logs/fuzz-$target.log"
  done
}
section fuzz-replay-asan fuzz_replay

section python-package "$root/scripts/setup-venv.sh"
# The optimiser may remove what a test observes (an unused impossible allocation, say): the
# kernels' unit tests run optimised too, after the package, whose release build of the crates
# they reuse. (The integration tests too would cost ten minutes of thin-LTO links per run.)
section cargo-test-release-builtins cargo test --quiet --release -p relaxvm-builtins --lib
# The scripts print the path they made last.
section wheel "$root/scripts/build-wheel.sh"
RELAXVM_WHEEL="$(tail -n 1 "$logs/wheel.log")"
export RELAXVM_WHEEL
section deploy-venv "$root/scripts/deploy-venv.sh"
section ruff sh -c "\"$root/.venv/bin/ruff\" format --check python tests examples scripts && \"$root/.venv/bin/ruff\" check python tests examples scripts"
# Every error message a user can cause is caused by a test, or listed with why not.
section error-coverage "$root/.venv/bin/python" "$root/scripts/error-coverage.py"
# ... and at every call site of a message-building helper (each field a reader names).
section error-coverage-sites "$root/.venv/bin/python" "$root/scripts/error-coverage-sites.py" --check
# Built by Apache TVM in its own venv; the tests run it in .venv, where TVM is absent.
# RELAXVM_TVM_FULL=1 builds every ONNX backend test instead of the default subset.
corpus_flags=()
[ "${RELAXVM_TVM_FULL:-0}" = 1 ] && corpus_flags+=(--full)
section tvm-corpus "$root/scripts/tvm-corpus.sh" "${corpus_flags[@]}"
RELAXVM_TVM_CORPUS="$(tail -n 1 "$logs/tvm-corpus.log")"
export RELAXVM_TVM_CORPUS
# The C API's Rust tests again, now with a TVM model; then C and C++ programs under ASan/LSan.
section capi-with-model cargo test --quiet -p relaxvm-capi
section capi-c-asan "$root/scripts/test-c-api.sh"
section pytest "$root/.venv/bin/python" -m pytest -q -p no:cacheprovider tests --junitxml "$logs/pytest.xml"
section skips "$root/.venv/bin/python" "$root/scripts/check-skips.py" "$logs/pytest.xml"
# The sections above use python3 (3.11 on CI); the binding reads CPython's ints in the layout of
# the interpreter it was built for, and 3.12 changed it: the package again, built for the newest
# CPython >= 3.12 found, and most of the pytest suite there (the script says which tests and why).
# No such Python fails the run unless RELAXVM_SKIP_NEWER_PYTHON=1.
section python-3.12+ "$root/scripts/test-python-versions.sh"

rust="$(awk '/^test result:/ {p += $4; i += $8} END {printf "%d passed, %d ignored", p, i}' "$logs/cargo-test.log")"
python="$(grep -E '^[0-9]+ passed' "$logs/pytest.log" | tail -n 1 | sed 's/ in [0-9.]*s.*//')"
newer="$(sed -n 's/^CPython \([0-9.]*\): .*/\1/p' "$logs/python-3.12+.log")"
newer_tests="$(grep -E '^[0-9]+ passed' "$logs/python-3.12+.log" | tail -n 1 | sed 's/ in [0-9.]*s.*//')"
if [ -n "$newer" ]; then
  python="$python; Python $newer: $newer_tests"
else
  python="$python; Python >= 3.12 skipped (RELAXVM_SKIP_NEWER_PYTHON=1)"
fi
echo "== summary: Rust: $rust; Python: $python; wheel: $(basename "$RELAXVM_WHEEL"); corpus: $RELAXVM_TVM_CORPUS"
echo "   logs in $logs; $((SECONDS / 60)) min $((SECONDS % 60)) s"
