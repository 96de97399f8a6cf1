"""The README's benchmark table comes from the bench script (scripts/bench.py --update-readme):
it is exactly what the generator writes from the recorded run kept beside it
(docs/bench-run.json), that run measured every row issue #35 names, and the table's own first
sentence says how it was measured. Nothing here times anything."""

from __future__ import annotations

import copy
import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.join(os.path.dirname(__file__), "..")
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import bench  # noqa: E402
import bench_record  # noqa: E402

# The rows issue #35 names (a label each matches once), so a README run that lost one fails.
ISSUE_ROWS = [
    r"TVM MLP 32-32-10, batch 1 \(VM overhead\)",
    r"TVM resnet50 \(ONNX light model zoo\), batch 1",
    r"TVM resnet50: resident memory a run adds",
    r"TVM tiny Llama decode step \(begin_forward \+ decode \+ end_forward\), batch 1",
    r"TVM tiny Llama decode step, batch 4",
    r"compiled mode \(VM TIR\)",
    r"dispatch, call vm\.builtin\.copy",
    r"Python -> VM call, identity on a tensor",
    r"Python -> VM call, identity on a numpy array",
    r"Python -> VM call, identity on an int",
    r"VM -> registered Python function",
    r"shape-heap triple",
    r"counting loop",
    r"with a \d+ MiB constant: load \+ VM",
    r"with a \d+ MiB constant: load \+ VM .*, vs a bare read of the file",
    r"profiler cost per call",
]


def readme() -> str:
    with open(os.path.join(ROOT, "README.md")) as f:
        return f.read()


def readme_table() -> list[str]:
    text = readme()
    assert text.count(bench.README_START) == 1 and text.count(bench.README_END) == 1
    return text[text.index(bench.README_START) : text.index(bench.README_END)].splitlines()[1:]


def record() -> dict:
    return bench_record.load(bench_record.README_RECORD)


def test_the_readme_table_is_what_the_generator_writes_from_the_record():
    assert readme_table() == bench_record.render(record())


def test_the_recorded_rows_are_the_scripts():
    labels = {r["label"] for r in record()["rows"]}
    measured = {r.label for quick in (True, False) for r in bench.rows(quick)}
    extra = {"2 Python threads, each its own VM", "Ctrl-C in an endless loop to KeyboardInterrupt"}
    tvm_models = {label for label in labels if label.startswith("TVM ")}  # bench_tvm_models.py (needs TVM)
    assert labels - tvm_models <= measured | extra, sorted(labels - measured - extra - tvm_models)
    assert all(re.fullmatch(r"\|( [^|]* \|){6}", line) for line in readme_table()[2:]), readme_table()


def test_the_recorded_run_has_every_row_the_issue_names_with_its_peer():
    rows = record()["rows"]
    for pattern in ISSUE_ROWS:
        found = [r for r in rows if re.search(pattern, r["label"])]
        assert found, f"no row of the README's run matches {pattern!r}"
        # Each is a comparison, with TVM, CPython or a bare read; the profiler row has a limit.
        assert all(r["peer"] is not None or "profiler" in r["label"] for r in found), found


def test_the_recorded_run_is_the_whole_suite_and_says_how_it_ran():
    p = record()["provenance"]
    assert p["only"] is None and "--only" not in p["command"]
    assert p["quick"] == ("--quick" in p["command"].split())
    assert p["rounds"] >= 1 and p["seconds"] > 0 and p["date"] and p["commit"] and p["machine"]
    sentence = readme_table()[0]
    assert ("a quick run" in sentence) == p["quick"] and ("a full run" in sentence) != p["quick"]
    for what in (f"best of {p['rounds']} rounds", p["date"], f"commit {p['commit']}", p["machine"]):
        assert what in sentence, (what, sentence)


def test_render_writes_each_kind_of_row_and_the_provenance():
    rec = {
        "provenance": {
            "command": "scripts/bench.py --quick --update-readme",
            "quick": True,
            "rounds": 2,
            "clock": "thread",
            "only": None,
            "date": "2026-11-28 02:00 UTC",
            "commit": "0123456789",
            "relaxvm": "9.9.9",
            "peer": "0.27.0",
            "machine": "Some CPU, 2 CPUs",
            "load_start": 3.14,
            "load_end": 7.0,
            "seconds": 600.0,
        },
        "rows": [
            bench_record.row("a call", "ns/call", 80.0, "<= 1/4 peer", peer=320.0),
            bench_record.row("a loop", "ns/iter", 6.0, "<= 1/10 CPython", peer=60.0, reference="CPython"),
            bench_record.row("limit", "ns/call", 125.04, "<= 150"),
            bench_record.row("threads", "throughput", 1.934, ">= 1.9x", decimals=2, suffix="x one thread"),
        ],
    }
    lines = bench_record.render(rec)
    assert lines[0] == (
        "Written by `scripts/bench.py --quick --update-readme` from a quick run (`--quick`: the short "
        "programs, rows timed at least 0.05 s), best of 2 rounds per row, timed by the measuring "
        "thread's CPU time; finished 2026-11-28 02:00 UTC, commit 0123456789, relaxvm 9.9.9, Apache TVM 0.27.0; "
        "Some CPU, 2 CPUs, load average 3.1 at the start, 7.0 at the end; the run took 10 min."
    )
    assert lines[1:] == [
        "",
        *bench_record.HEADER,
        "| a call | ns/call | 80.0 | 320.0 | 4.0x | <= 1/4 peer |",
        "| a loop | ns/iter | 6.0 | CPython 60.0 | 10.00x | <= 1/10 CPython |",
        "| limit | ns/call | 125.0 | - | - | <= 150 |",
        "| threads | throughput | 1.93x one thread | - | - | >= 1.9x |",
    ]
    full = copy.deepcopy(rec)
    full["provenance"].update(quick=False, clock="wall", peer=None)
    assert "from a full run (the full programs, rows timed at least 0.2 s)" in bench_record.render(full)[0]
    assert "timed by wall time" in bench_record.render(full)[0]
    assert "no peer (TVM not installed)" in bench_record.render(full)[0]


def test_readme_from_rewrites_the_table_from_a_record(tmp_path):
    # The generator's own entry, in a copy of the tree's two files: the README and its record.
    rec = record()
    rec["rows"][0] = dict(rec["rows"][0], ours=rec["rows"][0]["ours"] * 2)
    path = tmp_path / "run.json"
    bench_record.save(rec, str(path))
    root = tmp_path / "tree"
    (root / "docs").mkdir(parents=True)
    (root / "README.md").write_text(readme())
    code = (
        "import sys, bench_record; "
        f"bench_record.ROOT = {str(root)!r}; bench_record.README_RECORD = {str(root / 'docs' / 'bench-run.json')!r}; "
        "import bench; sys.argv = ['bench.py', '--readme-from', sys.argv[1]]; bench.main()"
    )
    scripts = os.path.join(ROOT, "scripts")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([scripts, os.path.join(ROOT, "python"), *sys.path]))
    subprocess.run([sys.executable, "-c", code, str(path)], check=True, env=env, timeout=120)
    text = (root / "README.md").read_text()
    table = text[text.index(bench.README_START) : text.index(bench.README_END)].splitlines()[1:]
    assert table == bench_record.render(rec) and table != readme_table()
    assert bench_record.load(str(root / "docs" / "bench-run.json")) == rec
    assert text.replace("\n".join(table), "") == readme().replace("\n".join(readme_table()), "")


def test_an_only_record_is_refused_for_the_readme(tmp_path):
    rec = record()
    rec["provenance"]["only"] = "Python"
    path = tmp_path / "run.json"
    bench_record.save(rec, str(path))
    code = "import sys, bench; sys.argv = ['bench.py', '--readme-from', sys.argv[1]]; bench.main()"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.join(ROOT, "scripts"), *sys.path]))
    done = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode != 0 and "this record is of an --only run" in done.stderr


@pytest.mark.parametrize(
    "flags, named",
    [
        (["--only", "Python"], "--only"),
        (["--quick", "--record", "x.json"], "--quick, --record"),
        (["--clock", "thread"], "--clock"),
    ],
)
def test_readme_from_refuses_the_measuring_flags_it_would_ignore(tmp_path, flags, named):
    path = tmp_path / "run.json"
    bench_record.save(record(), str(path))
    code = "import sys, bench; sys.argv = ['bench.py', '--readme-from', *sys.argv[1:]]; bench.main()"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.join(ROOT, "scripts"), *sys.path]))
    done = subprocess.run(
        [sys.executable, "-c", code, str(path), *flags], capture_output=True, text=True, env=env, timeout=120
    )
    assert done.returncode == 2, done.stderr
    assert f"--readme-from measures nothing: {named} would be ignored" in done.stderr


def test_replace_table_swaps_only_the_table():
    text = f"before\n{bench.README_START}\n| old |\n{bench.README_END}\nafter\n"
    out = bench.replace_table(text, ["| a | b |", "| c | d |"])
    assert out == f"before\n{bench.README_START}\n| a | b |\n| c | d |\n{bench.README_END}\nafter\n"
