#!/usr/bin/env bash
# Builds the corpus of models compiled by Apache TVM (in .venv-tvm) that the pytest suite runs on
# relaxvm, and prints its root folder on the last line of standard output. One subfolder per
# suite: hand/ (tests/tvm_corpus/build_hand.py) and onnx/ (tests/tvm_corpus/build_onnx.py).
#
# The corpus is cached outside the repository, keyed on a hash of the scripts that build it and
# of the pinned requirements: ${RELAXVM_CACHE_DIR:-${XDG_CACHE_HOME:-~/.cache}/relaxvm}/tvm-corpus/KEY.
# Without a cache it is built (about a minute). --full builds every ONNX backend test instead of
# the default subset (a few minutes).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
full=()
for a in "$@"; do
  case "$a" in
    --full) full=(--full) ;;
    *) echo "usage: $0 [--full]" >&2; exit 2 ;;
  esac
done
"$root/scripts/setup-venv-tvm.sh" >&2
# examples/llm_model.py is the model build_llm.py compiles.
key="$(cd "$root/tests/tvm_corpus" && { cat requirements.txt corpus.py; for f in $(ls build_*.py | sort); do cat "$f"; done; cat ../../examples/llm_model.py; echo "${full[*]:-}"; } | sha256sum | cut -c1-16)"
cache="${RELAXVM_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/relaxvm}/tvm-corpus"
dest="$cache/$key"
if [ ! -f "$dest/.complete" ]; then
  mkdir -p "$cache"
  tmp="$(mktemp -d "$cache/.build-XXXXXX")"
  trap 'rm -rf "$tmp"' EXIT
  echo "building the TVM model corpus into $dest" >&2
  for builder in "$root"/tests/tvm_corpus/build_*.py; do
    extra=()
    [ "$(basename "$builder")" = build_onnx.py ] && extra=("${full[@]}")
    nice -n 5 "$root/.venv-tvm/bin/python" "$builder" "$tmp" "${extra[@]}" >&2
  done
  touch "$tmp/.complete"
  rm -rf "$dest"
  mv "$tmp" "$dest"
  trap - EXIT
fi
echo "$dest"
