#!/usr/bin/env bash
# Makes .venv-deploy: Ray and Dask (examples/requirements.txt) for the scale-out examples, with
# the relaxvm package that scripts/setup-venv.sh built into python/relaxvm (same interpreter)
# made importable by a .pth file. Prints the venv's python.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$root/.venv-deploy"
stamp="$venv/.requirements"
if [ ! -x "$venv/bin/python" ] || ! cmp -s "$root/examples/requirements.txt" "$stamp"; then
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$root/examples/requirements.txt" >&2
  cp "$root/examples/requirements.txt" "$stamp"
fi
site="$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
echo "$root/python" > "$site/relaxvm-source.pth"
echo "$venv/bin/python"
