#!/usr/bin/env bash
# The main job: sets up .venv with the relaxvm package (release build) and runs the demo.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$root/scripts/setup-venv.sh"
exec "$root/.venv/bin/python" "$root/python/examples/demo.py" "$@"
