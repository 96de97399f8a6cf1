#!/usr/bin/env bash
# The C API from C and C++ (called by scripts/test.sh; runnable alone): builds librelaxvm_capi,
# assembles the example programs, compiles examples/c/*.c, *.cpp and capi/tests/c/misuse.c with
# the system's cc and c++ under AddressSanitizer (LeakSanitizer included), and runs them: with a
# TVM model from the corpus when RELAXVM_TVM_CORPUS is set. Any sanitizer report fails the run.
# Then capi/tests/c/runtime_symbols.c, with the repository's TVM model (tvm/tests/data/mlp.so), and
# capi/tests/c/anylist_symbols.c with a compiled-mode model of the corpus when it is set.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT

cargo build --quiet -p relaxvm-capi -p relaxvm-cli
lib="$root/target/debug"
"$lib/relaxvm" asm examples/c/add.txt -o "$out/add.rvx"
"$lib/relaxvm" asm capi/tests/c/loop.txt -o "$out/loop.rvx"
flags=(-g -O1 -fsanitize=address -fno-omit-frame-pointer -Wall -Wextra -Werror -Iinclude)
link=(-L"$lib" -lrelaxvm_capi -Wl,-rpath,"$lib" -lpthread)
cc -std=c11 "${flags[@]}" examples/c/run_model.c "${link[@]}" -o "$out/run_model_c"
c++ -std=c++17 "${flags[@]}" examples/c/run_model.cpp "${link[@]}" -o "$out/run_model_cpp"
cc -std=c11 "${flags[@]}" capi/tests/c/misuse.c "${link[@]}" -o "$out/misuse"

model=()
if [ -n "${RELAXVM_TVM_CORPUS:-}" ]; then
  model=("$RELAXVM_TVM_CORPUS/hand/mlp/model.so")
  [ -f "${model[0]}" ] || { echo "no ${model[0]}" >&2; exit 1; }
fi
# halt_on_error: the first report fails the run; detect_leaks: LeakSanitizer at exit.
export ASAN_OPTIONS=detect_leaks=1:halt_on_error=1:abort_on_error=0
for prog in run_model_c run_model_cpp; do
  echo "-- $prog"
  "$out/$prog" "$out/add.rvx" "${model[@]}"
done
echo "-- misuse"
"$out/misuse" "$out/loop.rvx"
# Kernels that could not bind relaxvm's error function (capi/tests/c/runtime_symbols.c), with the
# repository's TVM model (no sanitizer: the static library is not built with one, and a
# preloaded library comes before the sanitizer's runtime): a program linked with the static
# library without the export flags of relaxvm-tvm's build.rs, then one linked with the shared
# library run with a preloaded definition of the function.
model_so="$(realpath tvm/tests/data/mlp.so)"
cc -std=c11 -Wall -Wextra -Werror -Iinclude capi/tests/c/runtime_symbols.c "$lib/librelaxvm_capi.a" -lpthread -ldl -lm \
  -o "$out/unexported"
cc -std=c11 -Wall -Wextra -Werror -Iinclude capi/tests/c/runtime_symbols.c "${link[@]}" -o "$out/preloaded"
cc -std=c11 -Wall -Wextra -Werror -shared -fPIC capi/tests/c/preload_raised.c -o "$out/preload_raised.so"
echo "-- runtime symbols: unexported"
"$out/unexported" unexported "$model_so"
echo "-- runtime symbols: preloaded"
LD_PRELOAD="$out/preload_raised.so" "$out/preloaded" preloaded "$model_so"
# Compiled functions that could not bind relaxvm's AnyList functions (capi/tests/c/anylist_symbols.c),
# with a compiled-mode model of the corpus (the repository has none): a program exporting the
# error function only, then one run with a preloaded AnyList definition.
if [ -n "${RELAXVM_TVM_CORPUS:-}" ]; then
  compiled="$(realpath "$RELAXVM_TVM_CORPUS/vm_suite/test_vm_build/test_vm_compile_simple/compiled/model.so")"
  cc -std=c11 -Wall -Wextra -Werror -Iinclude capi/tests/c/anylist_symbols.c "$lib/librelaxvm_capi.a" \
    -Wl,--export-dynamic-symbol=RVMFFIErrorSetRaisedFromCStrParts -lpthread -ldl -lm -o "$out/anylist_unexported"
  cc -std=c11 -Wall -Wextra -Werror -Iinclude capi/tests/c/anylist_symbols.c "${link[@]}" -o "$out/anylist_preloaded"
  cc -std=c11 -Wall -Wextra -Werror -shared -fPIC capi/tests/c/preload_anylist.c -o "$out/preload_anylist.so"
  echo "-- AnyList symbols: unexported"
  "$out/anylist_unexported" unexported "$compiled"
  echo "-- AnyList symbols: preloaded"
  LD_PRELOAD="$out/preload_anylist.so" "$out/anylist_preloaded" preloaded "$compiled"
fi
