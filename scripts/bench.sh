#!/usr/bin/env bash
# Benchmarks: the Rust criterion suite, then the Python suite side by side with Apache TVM.
# Usage: scripts/bench.sh [--quick] [--rounds N] [--no-rust] [--no-peer] [--update-readme]
#                         [--record FILE] [--only REGEX] [--clock thread]
# `scripts/bench.sh --update-readme` is the README's run: a full run of the Python suite (the
# Rust suite is then skipped), which writes the table into README.md and the record it comes from
# into docs/bench-run.json; the table says how it was measured (quick or full, rounds, clock,
# machine, load, date, commit). With `--quick` it is a quick run and the table says so.
# The peer lives in its own environment (.venv-bench) so the test environment stays lean; the
# relaxvm package built into .venv (in place, by maturin develop) is put on its path.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
rust=1 peer=1 pyargs=()
for a in "$@"; do
  case "$a" in
    --no-rust) rust=0 ;;
    --no-peer) peer=0 ;;
    --update-readme) rust=0 pyargs+=("$a") ;;
    *) pyargs+=("$a") ;;
  esac
done
"$root/scripts/setup-venv.sh"
python="$root/.venv/bin/python"
if [ "$peer" = 1 ]; then
  bench="$root/.venv-bench"
  [ -x "$bench/bin/python" ] || python3 -m venv "$bench"
  # The corpus's pinned set: the peer, and onnx for the resnet50 rows' model.
  if "$bench/bin/python" -m pip install --quiet --disable-pip-version-check -r "$root/tests/tvm_corpus/requirements.txt"; then
    python="$bench/bin/python"
  else
    echo "apache-tvm could not be installed: peer rows are skipped"
  fi
fi
if [ "$rust" = 1 ]; then
  (cd "$root" && cargo bench -p relaxvm-builder --bench vm -- --noplot)
fi
PYTHONPATH="$root/python${PYTHONPATH:+:$PYTHONPATH}" exec "$python" "$root/scripts/bench.py" "${pyargs[@]}"
