#!/usr/bin/env bash
# Nightly-style (about an hour on two cores, too slow for every CI run): the pytest suite against
# an AddressSanitizer build of the extension, so the python crate's unsafe code (DLPack, the
# buffer protocol, numpy views, callbacks) runs under the sanitizer too. Extra arguments go to
# pytest (e.g. `./scripts/asan-python.sh tests/test_tensor_protocols.py`).
#
# The extension lives in its own venv (.venv-asan), built with -Zsanitizer=address (stable rustc
# with RUSTC_BOOTSTRAP=1). rustc links its ASan runtime into executables only, and python is not
# one of ours, so the runtime rustc ships (librustc-stable_rt.asan.a) is made into a shared
# library and preloaded: the instrumented code and its runtime are then the same LLVM version.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$root/.venv-asan"
host="$(rustc -vV | sed -n 's/^host: //p')"
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
fi
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$root/python/requirements-dev.txt"
runtime="$venv/libasan-rustc.so"
archive="$(rustc --print sysroot)/lib/rustlib/$host/lib/librustc-stable_rt.asan.a"
if [ ! -f "$runtime" ] || [ "$archive" -nt "$runtime" ]; then
  # Every object but the pre-init hook (.preinit_array is for executables only; preloading runs
  # the runtime's initialisation first anyway).
  objects="$(mktemp -d)"
  (cd "$objects" && ar x "$archive" && rm -f asan_preinit.cpp.o)
  cc -shared -o "$runtime" "$objects"/*.o -lpthread -ldl -lm -lrt -lstdc++
  rm -rf "$objects"
fi
# Debug build: ASan reports name the line; --target keeps build scripts uninstrumented.
(cd "$root/python" && VIRTUAL_ENV="$venv" PATH="$venv/bin:$PATH" RUSTC_BOOTSTRAP=1 \
  RUSTFLAGS="-Zsanitizer=address" CARGO_TARGET_DIR="$root/target/asan-python" \
  "$venv/bin/maturin" develop --quiet --target "$host")
# Python's own allocations are not freed at exit: leaks are not reported. Freed storage goes back
# to malloc (no block cache), so a use after free is seen.
LD_PRELOAD="$runtime" RELAXVM_BLOCK_CACHE=0 \
  ASAN_OPTIONS=detect_leaks=0:allocator_may_return_null=1:abort_on_error=0 \
  "$venv/bin/python" -m pytest -q -p no:cacheprovider "${@:-$root/tests}"
