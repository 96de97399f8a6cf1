#!/usr/bin/env bash
# Builds the relaxvm package for the newest CPython >= 3.12 on this machine and runs the pytest
# suite there (scripts/test.sh's python-3.12+ section). CI's other sections use the default
# python3 (3.11), and python/src/small_int.rs reads ints directly in a layout that changed in
# 3.12 (`ob_size` became `lv_tag`): this is where the >= 3.12 read meets real CPython objects.
#
# Finds the interpreter on PATH (python3.13, then python3.12), else in pyenv's versions
# directory ($PYENV_ROOT, default ~/.pyenv; its shims refuse versions not selected, so each
# candidate is run to be believed); RELAXVM_NEWER_PYTHON=/path/to/python names one instead.
# Makes .venv-py3XX at the repository root, builds the package into it in release mode (maturin
# develop, in target/py3XX: pyo3's build differs per interpreter, and sharing target/ with .venv's
# build would rebuild it in each on every switch) and runs pytest there.
#
# No CPython >= 3.12 found fails the run, unless RELAXVM_SKIP_NEWER_PYTHON=1 opts out.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

if [ "${RELAXVM_SKIP_NEWER_PYTHON:-0}" = 1 ]; then
  echo "RELAXVM_SKIP_NEWER_PYTHON=1: the CPython >= 3.12 tests are skipped"
  exit 0
fi

# version PYTHON: prints "3.NN" for a working CPython >= 3.12 (with venv), nothing otherwise.
version() {
  "$1" - <<'EOF' 2>/dev/null || true
import sys, venv  # noqa: F401 (venv: a Python built without it cannot make the test venv)
if sys.implementation.name == "cpython" and sys.version_info >= (3, 12):
    print("%d.%d" % sys.version_info[:2])
EOF
}

best="" best_version=""
consider() {
  local v
  v="$(version "$1")"
  [ -n "$v" ] || return 0
  if [ -z "$best" ] || [ "$(printf '%s\n%s\n' "$best_version" "$v" | sort -V | tail -n 1)" != "$best_version" ]; then
    best="$1" best_version="$v"
  fi
}
if [ -n "${RELAXVM_NEWER_PYTHON:-}" ]; then
  consider "$RELAXVM_NEWER_PYTHON"
  if [ -z "$best" ]; then
    echo "RELAXVM_NEWER_PYTHON=$RELAXVM_NEWER_PYTHON is not a working CPython >= 3.12" >&2
    exit 1
  fi
else
  for name in python3.13 python3.12; do
    if command -v "$name" >/dev/null; then consider "$(command -v "$name")"; fi
  done
  # pyenv's versions: plain CPython ones only (3.13.0, not 3.13.0t, pypy3.10-..., miniconda...).
  for dir in "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.*; do
    if [[ "$(basename "$dir")" =~ ^3\.[0-9]+\.[0-9]+$ ]] && [ -x "$dir/bin/python3" ]; then
      consider "$dir/bin/python3"
    fi
  done
fi
if [ -z "$best" ]; then
  echo "no CPython >= 3.12 found (python3.13 or python3.12 on PATH, or in ${PYENV_ROOT:-$HOME/.pyenv}/versions):" \
    "install one, name it with RELAXVM_NEWER_PYTHON=/path/to/python, or skip these tests with RELAXVM_SKIP_NEWER_PYTHON=1" >&2
  exit 1
fi

tag="py${best_version/./}"
venv="$root/.venv-$tag"
echo "CPython $best_version: $best ($("$best" -c 'import sys; print(sys.version.split()[0])')), venv $venv"
if [ ! -x "$venv/bin/python" ]; then
  "$best" -m venv "$venv"
fi
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --upgrade pip
# What building and the tests need (the linters and the wheel's linker stay in .venv). The
# newest releases the ranges allow, as for .venv: NumPy may then differ from .venv's (NumPy 2.5
# needs CPython >= 3.12), so a failure here need not be the interpreter's; the log line below
# names the NumPy tested (review R-py312-1).
mapfile -t needs < <(grep -E '^(maturin|numpy|pytest)\b' "$root/python/requirements-dev.txt" | sed 's/ *#.*//')
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check "${needs[@]}"
(cd "$root/python" && VIRTUAL_ENV="$venv" PATH="$venv/bin:$PATH" \
  "$venv/bin/maturin" develop --release --quiet --target-dir "$root/target/$tag")

# Whether the import-time check turned the direct read of ints on (test_small_int_calls.py fails
# when it did not), for the log.
"$venv/bin/python" -c 'import relaxvm
wrong, direct = relaxvm._relaxvm._small_int_self_check(True)
import numpy
print(f"small ints read directly: {direct} (ints the lv_tag layout reads wrongly: {wrong}); NumPy {numpy.__version__}")'

# The whole suite, on 3.13 here: 7 min 20 s (2 min 45 s of CPU) on 2 cores shared with other
# builds (load 8 to 10); with the build above (5 CPU-minutes from a fresh clone, as on CI, the
# thin-LTO link the longest part) over the 4 minutes this section may add to CI. These files are
# left out (what is left took 2 min 45 s under the same load, 1 min 10 s of CPU): what they test
# does not depend on the interpreter (the Rust kernels' results on TVM models, files, the C API,
# the repository's scripts), or they cost the most for what a second interpreter adds. Every other
# test runs, new ones included.
left_out=(
  # TVM models run bit for bit against TVM, and profiled and traced runs of them: the kernels'
  # numerics, not the binding (test_tvm_models.py and the VM suites, which cross it, stay).
  test_tvm_onnx.py test_instrumented_runs.py test_tvm_paged_kv_cache.py adversarial/test_kv_cache.py
  # Crafted files, special files, native libraries, traces on disk, the C API through ctypes.
  adversarial/test_tvm_files.py adversarial/test_special_files.py adversarial/test_native_consent.py
  adversarial/test_trace_files.py adversarial/test_c_api.py
  # Long loops of kernels stopped by Ctrl-C (test_interrupts.py, the binding's side, stays).
  adversarial/test_polls.py
  # 3 x 4000 random values through every entry point: 92 s of the 440 s; test_convert.py,
  # test_python_values.py and test_conversion_memory.py cover the conversions' paths.
  adversarial/test_property.py
  # The repository's checking scripts and its release artefacts, made for .venv's Python: the
  # wheel (cp311), mypy's stub check (mypy is in .venv), the bench table.
  test_wheel.py test_typing.py test_bench_table.py test_check_architecture.py test_check_skips.py
  test_error_coverage_rules.py adversarial/test_attack_findings.py
  # TVM itself in this process: .venv-tvm's TVM is built for its own Python, not this one.
  adversarial/test_tvm_in_process.py adversarial/test_compiled_mode.py
)
ignore=()
for f in "${left_out[@]}"; do
  [ -f "$root/tests/$f" ] || { echo "tests/$f (left out below) does not exist" >&2; exit 1; }
  ignore+=(--ignore "$root/tests/$f")
done
junit="$root/target/$tag/pytest.xml"
# test_ray_and_dask runs the examples in .venv-deploy's Python, not this one.
"$venv/bin/python" -m pytest -q -p no:cacheprovider tests "${ignore[@]}" \
  --deselect test_deploy.py::test_ray_and_dask --junitxml "$junit" "$@"
# A skip tests/expected-skips.txt does not allow fails here as in the main run.
"$venv/bin/python" "$root/scripts/check-skips.py" "$junit"
