#!/usr/bin/env python3
"""Fails when pytest skipped a test that CI expects to run.

Usage: check-skips.py JUNIT_XML [ALLOW_LIST]

Reads the JUnit XML report of a pytest run (``pytest --junitxml=...``) and the allow-list
(default: tests/expected-skips.txt): one skip per line, ``NODE_ID_PATTERN | REASON`` where the
pattern is an fnmatch pattern of the test's id relative to tests/ (``test_x.py::test_y[param]``,
``adversarial/test_z.py::test_w``) and the
reason says why CI may skip it (an expected failure, ``xfail``, counts as a skip and is listed
too); ``#`` starts a comment. A skipped test no line allows fails the
check, naming the test and pytest's skip reason — so a missing TVM corpus, wheel or tool makes
CI fail instead of staying green with fewer tests. Prints what was skipped and allowed.
"""

from __future__ import annotations

import fnmatch
import os
import sys
import xml.etree.ElementTree as ET


def allowed(path: str) -> list[tuple[str, str]]:
    """The allow-list's (pattern, reason) pairs."""
    out = []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            pattern, sep, reason = (x.strip() for x in line.partition("|"))
            if not sep or not pattern or not reason:
                sys.exit(f"{path}:{n}: expected 'NODE_ID_PATTERN | REASON', found {line!r}")
            out.append((pattern, reason))
    return out


def skipped(junit: str) -> list[tuple[str, str]]:
    """(node id, skip message) of every skipped test in a JUnit XML report of pytest."""
    out = []
    for case in ET.parse(junit).getroot().iter("testcase"):
        skip = case.find("skipped")
        if skip is None:
            continue
        # pytest (rootdir tests/) writes classname "adversarial.test_x" (or "...test_x.TestClass")
        # and name "test_y[p]".
        module, _, cls = case.get("classname", "").partition(".Test")
        path = module.replace(".", "/") + ".py"
        name = case.get("name", "")
        node = f"{path}::Test{cls}::{name}" if cls else f"{path}::{name}"
        # An expected failure (xfail) is reported as skipped too: it must be listed as well.
        kind = "xfailed" if skip.get("type") == "pytest.xfail" else "skipped"
        out.append((node, f"{kind}: {skip.get('message', '')}"))
    return out


def main() -> int:
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    allow = allowed(sys.argv[2] if len(sys.argv) == 3 else os.path.join(root, "tests", "expected-skips.txt"))
    bad = []
    for node, why in skipped(sys.argv[1]):
        reason = next((r for p, r in allow if fnmatch.fnmatchcase(node, p)), None)
        if reason is None:
            bad.append(f"  {node}: {why}")
        else:
            print(f"skipped as expected: {node} ({reason})")
    if bad:
        print("tests skipped that CI expects to run (tests/expected-skips.txt allows none of them):")
        print("\n".join(bad))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
