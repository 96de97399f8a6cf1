"""error-coverage.py counts a message as tested when any 24-character window of its longest
fragment appears in a test string. This lists messages counted as tested although no test string
contains any of their fragments whole (only a window of it, which another message may share)."""

import importlib.util
import os
import sys

here = os.path.dirname(os.path.abspath(__file__))
root = os.environ.get("RELAXVM_ROOT", os.path.join(here, "..", "..", ".."))
spec = importlib.util.spec_from_file_location("ec", os.path.join(root, "scripts", "error-coverage.py"))
ec = importlib.util.module_from_spec(spec)
sys.modules["ec"] = ec
spec.loader.exec_module(ec)
messages, tests = ec.collect()
n = 0
for m in messages:
    if not any(w in tests for p in m.pieces for w in ec.windows(p)):
        continue
    if any(p in tests for p in m.pieces):
        continue
    n += 1
    print(f"{m.path}:{m.line}: {m.fragment!r}")
print(n, "messages counted as tested with no test containing a whole fragment")
sys.exit(1 if n else 0)
