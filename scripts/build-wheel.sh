#!/usr/bin/env bash
# Builds the release wheel for .venv's Python into dist/: manylinux2014 (glibc 2.17, linked with
# zig so that the build machine's newer glibc does not leak in), stripped, with the README and
# LICENSE in its metadata. Prints the wheel's path. Needs .venv: scripts/setup-venv.sh (or
# scripts/demo.sh) makes it.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$root/.venv"
if [ ! -x "$venv/bin/maturin" ]; then
  echo "$venv/bin/maturin not found: run ./scripts/setup-venv.sh (or ./scripts/demo.sh) first" >&2
  exit 1
fi
quiet=(--quiet)
[ -t 2 ] && quiet=()
rm -rf "$root/dist"
(cd "$root/python" && VIRTUAL_ENV="$venv" PATH="$venv/bin:$PATH" \
  "$venv/bin/maturin" build --release --zig "${quiet[@]}" -i "$venv/bin/python" \
  -o "$root/dist" --target-dir "$root/target/wheel") >&2
ls "$root"/dist/relaxvm-*.whl
