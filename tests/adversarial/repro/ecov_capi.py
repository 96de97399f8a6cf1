"""Reproducer: error messages of capi/src counted as tested by error-coverage.py although no
C API test contains them (only tests of other crates, which cannot reach capi/src)."""

import importlib.util
import sys

spec = importlib.util.spec_from_file_location(
    "ec",
    __import__("os").path.join(
        __import__("os").path.dirname(__import__("os").path.abspath(__file__)),
        "..",
        "..",
        "..",
        "scripts",
        "error-coverage.py",
    ),
)
ec = importlib.util.module_from_spec(spec)
sys.modules["ec"] = ec
spec.loader.exec_module(ec)
messages, alltests = ec.collect()
capi = []
for path in sorted((ec.ROOT / "capi").rglob("*")):
    if path.is_file() and "target" not in path.parts and path.suffix in (".rs", ".c", ".cpp"):
        src = path.read_text()
        if ec.is_test_file(path) or path.suffix != ".rs":
            capi.append(ec.test_strings(src))
        else:
            capi.append(ec.test_strings(ec.split_tests(src)[1]))
capi = "\n".join(capi)
bad = 0
for m in messages:
    if not m.path.startswith("capi/"):
        continue
    hit_all = any(w in alltests for p in m.pieces for w in ec.windows(p))
    hit_capi = any(w in capi for p in m.pieces for w in ec.windows(p))
    if hit_all and not hit_capi:
        bad += 1
        print(f"{m.path}:{m.line}: counted as tested, but no C API test has it: {m.text!r}")
print(bad, "capi messages counted as tested by other crates' tests")
sys.exit(1 if bad else 0)
