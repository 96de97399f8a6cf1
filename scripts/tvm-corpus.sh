#!/usr/bin/env bash
# Builds the corpus of models compiled by Apache TVM (in .venv-tvm) that the pytest suite runs on
# relaxvm, and prints its root folder on the last line of standard output. One subfolder per
# suite, each written by one builder, tests/tvm_corpus/build_SUITE.py (hand/, onnx/, ...).
#
# Each builder's output is cached on its own, outside the repository, keyed on a hash of what can
# change it: the pinned requirements, corpus.py, the helpers the builder imports (modules of
# tests/tvm_corpus/ and scripts/, and theirs), the builder itself and its flags (--full for the
# ONNX suite):
#   ${RELAXVM_CACHE_DIR:-${XDG_CACHE_HOME:-~/.cache}/relaxvm}/tvm-corpus/suites/SUITE-KEY/
# so adding or changing one builder rebuilds only its suite. The root the tests read
# (RELAXVM_TVM_CORPUS) is a folder of links to the current suites, tvm-corpus/roots/KEY/.
# Without a cache every suite is built (about a minute; --full builds every ONNX backend test
# instead of the default subset, a few minutes).
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
py="$root/.venv-tvm/bin/python"
corpus_dir="$root/tests/tvm_corpus"
cache="${RELAXVM_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/relaxvm}/tvm-corpus"
mkdir -p "$cache/suites" "$cache/roots"

# The files a builder's output depends on, one per line: requirements.txt, corpus.py, and the
# builder with the local modules it imports (transitively; from tests/tvm_corpus, scripts and
# examples, where build_llm.py finds its model).
inputs() {
  "$py" - "$1" "$corpus_dir" "$root/scripts" "$root/examples" <<'PY'
import os, re, sys
builder, *dirs = sys.argv[1:]
found, todo = [], [builder]
while todo:
    path = todo.pop()
    if path in found:
        continue
    found.append(path)
    with open(path) as f:
        for m in re.finditer(r"^\s*(?:from|import)\s+(\w+)", f.read(), re.M):
            for d in dirs:
                candidate = os.path.join(d, m.group(1) + ".py")
                if os.path.isfile(candidate):
                    todo.append(candidate)
print("\n".join([os.path.join(dirs[0], "requirements.txt"), os.path.join(dirs[0], "corpus.py")] + found))
PY
}

suites=()
for builder in "$corpus_dir"/build_*.py; do
  name="$(basename "$builder" .py)"
  name="${name#build_}"
  flags=()
  [ "$name" = onnx ] && flags=("${full[@]}")
  key="$({ while read -r f; do echo "== ${f#"$root"/}"; cat "$f"; done < <(inputs "$builder"); echo "flags: ${flags[*]:-}"; } | sha256sum | cut -c1-16)"
  dest="$cache/suites/$name-$key"
  if [ ! -f "$dest/.complete" ]; then
    tmp="$(mktemp -d "$cache/suites/.build-XXXXXX")"
    trap 'rm -rf "$tmp"' EXIT
    echo "building the TVM corpus suite $name into $dest" >&2
    nice -n 5 "$py" "$builder" "$tmp" "${flags[@]}" >&2
    touch "$tmp/.complete"
    rm -rf "$dest"
    mv "$tmp" "$dest"
    trap - EXIT
  fi
  suites+=("$dest")
done

# The root: one link per subfolder the suites wrote (two builders may not write the same one).
key="$(printf '%s\n' "${suites[@]}" | sha256sum | cut -c1-16)"
dest="$cache/roots/$key"
if [ ! -f "$dest/.complete" ]; then
  tmp="$(mktemp -d "$cache/roots/.build-XXXXXX")"
  trap 'rm -rf "$tmp"' EXIT
  for suite in "${suites[@]}"; do
    for sub in "$suite"/*/; do
      sub="${sub%/}"
      if [ -e "$tmp/$(basename "$sub")" ]; then
        echo "tvm-corpus: two builders write the suite folder $(basename "$sub")" >&2
        exit 1
      fi
      ln -s "$sub" "$tmp/$(basename "$sub")"
    done
  done
  touch "$tmp/.complete"
  rm -rf "$dest"
  mv "$tmp" "$dest"
  trap - EXIT
fi
echo "$dest"
