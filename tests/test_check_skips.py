"""The skips rule of CI (#37 item 7): scripts/check-skips.py fails on a skipped or xfailed test no
line of the allow-list allows, passes one a line allows, and scripts/test.sh runs it on the
pytest run's report (removing the section fails here)."""

from __future__ import annotations

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "scripts", "check-skips.py")

REPORT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest">
<testcase classname="test_alpha" name="test_runs" />
<testcase classname="test_alpha" name="test_needs_tvm"><skipped type="pytest.skip" message="no corpus" /></testcase>
<testcase classname="adversarial.test_beta.TestGroup" name="test_x[1]">
<skipped type="pytest.xfail" message="known" /></testcase>
</testsuite></testsuites>
"""


def _run(tmp_path, allow: str) -> subprocess.CompletedProcess:
    (tmp_path / "report.xml").write_text(REPORT)
    (tmp_path / "allow.txt").write_text(allow)
    return subprocess.run(
        [sys.executable, SCRIPT, str(tmp_path / "report.xml"), str(tmp_path / "allow.txt")],
        capture_output=True,
        text=True,
    )


def test_a_skip_no_line_allows_fails_naming_the_test(tmp_path) -> None:
    r = _run(tmp_path, "test_alpha.py::test_needs_tvm | CI has no GPU\n")
    assert r.returncode == 1, r.stdout
    # The xfail counts as a skip, with its class in the node id.
    assert "adversarial/test_beta.py::TestGroup::test_x[1]: xfailed: known" in r.stdout
    assert "skipped as expected: test_alpha.py::test_needs_tvm (CI has no GPU)" in r.stdout


def test_every_skip_allowed_passes(tmp_path) -> None:
    r = _run(tmp_path, "test_alpha.py::test_needs_tvm | reason one\nadversarial/test_beta.py::* | reason two\n")
    assert r.returncode == 0, r.stdout


def test_a_line_without_a_reason_is_refused(tmp_path) -> None:
    r = _run(tmp_path, "test_alpha.py::test_needs_tvm\n")
    assert r.returncode != 0
    assert "expected 'NODE_ID_PATTERN | REASON'" in r.stderr


def test_ci_checks_the_skips_of_its_pytest_run() -> None:
    with open(os.path.join(ROOT, "scripts", "test.sh")) as f:
        lines = [line for line in f if line.startswith("section ")]
    pytest_line = next(line for line in lines if line.split()[1] == "pytest")
    skips_line = next(line for line in lines if line.split()[1] == "skips")
    assert "--junitxml" in pytest_line and "check-skips.py" in skips_line
    assert lines.index(pytest_line) < lines.index(skips_line)
