"""A bench run as a file (scripts/bench.py ``--record``, ``--update-readme``): how it was measured
(quick or full, rounds, clock, machine, load, date, commit, versions, duration) and each row's
numbers, and the one renderer that turns such a record into the README's table.

The README's table is written from a record only (``render``), and the record it was written
from is kept beside it (``README_RECORD``), so tests/test_bench_table.py checks, without timing
anything, that the table is what the generator writes from that record.
"""

from __future__ import annotations

import json
import os
import subprocess
from typing import Any

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
# The record the README's table was written from (committed with the README).
README_RECORD = os.path.join(ROOT, "docs", "bench-run.json")
# The files a README run writes: their changes do not make the measured tree "modified".
WRITTEN = ("README.md", "docs/bench-run.json")

HEADER = [
    "| row | unit | relaxvm | peer | peer / relaxvm | target |",
    "| --- | --- | ---: | ---: | ---: | --- |",
]


def row(
    label: str,
    unit: str,
    ours: float,
    target: str,
    peer: float | None = None,
    reference: str | None = None,
    decimals: int = 1,
    suffix: str = "",
) -> dict[str, Any]:
    """One measured row: ``ours`` and ``peer`` in ``unit``; ``reference`` names the peer when it
    is not TVM (``"numpy"``, ``"CPython"``, ``"read"``); ``decimals`` and ``suffix`` say how
    ``ours`` is written (``1.93`` with ``"x one thread"``)."""
    return {
        "label": label,
        "unit": unit,
        "ours": ours,
        "peer": peer,
        "reference": reference,
        "target": target,
        "decimals": decimals,
        "suffix": suffix,
    }


def render_row(r: dict[str, Any]) -> str:
    """The table line of one recorded row."""
    ours, peer = r["ours"], r["peer"]
    ours_s = f"{ours:.{r['decimals']}f}{r['suffix']}"
    if peer is None:
        peer_s, ratio = "-", "-"
    elif r["reference"] is None:
        peer_s, ratio = f"{peer:.1f}", f"{peer / ours:.1f}x"
    else:
        peer_s, ratio = f"{r['reference']} {peer:.1f}", f"{peer / ours:.2f}x"
    return f"| {r['label']} | {r['unit']} | {ours_s} | {peer_s} | {ratio} | {r['target']} |"


def provenance_text(p: dict[str, Any]) -> str:
    """The sentence above the table: how, where and when the record was measured."""
    kind = (
        "a quick run (`--quick`: the short programs, rows timed at least 0.05 s)"
        if p["quick"]
        else "a full run (the full programs, rows timed at least 0.2 s)"
    )
    clock = "the measuring thread's CPU time" if p["clock"] == "thread" else "wall time"
    peer = f"Apache TVM {p['peer']}" if p["peer"] else "no peer (TVM not installed)"
    load = f"load average {p['load_start']:.1f} at the start, {p['load_end']:.1f} at the end"
    minutes = p["seconds"] / 60
    return (
        f"Written by `{p['command']}` from {kind}, best of {p['rounds']} rounds per row, "
        f"timed by {clock}; finished {p['date']}, commit {p['commit']}, relaxvm {p['relaxvm']}, {peer}; "
        f"{p['machine']}, {load}; the run took {minutes:.0f} min."
    )


def render(record: dict[str, Any]) -> list[str]:
    """The README's table of ``record``: its provenance sentence, then the rows."""
    return [provenance_text(record["provenance"]), "", *HEADER, *(render_row(r) for r in record["rows"])]


def machine() -> str:
    """The CPU model and the number of CPUs this process may use."""
    model = "unknown CPU"
    try:
        with open("/proc/cpuinfo") as f:
            model = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), model)
    except OSError:
        pass
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return f"{model}, {cpus} CPUs"


def commit() -> str:
    """The checked-out commit, and whether tracked files differ from it (other than those a
    README run writes)."""

    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", ROOT, *args], capture_output=True, text=True, check=True).stdout.strip()

    try:
        head = git("rev-parse", "--short=10", "HEAD")
        dirty = git("status", "--porcelain", "--untracked-files=no", "--", ".", *(f":!{w}" for w in WRITTEN))
    except (OSError, subprocess.CalledProcessError):
        return "unknown (not a git checkout)"
    return f"{head} with uncommitted changes" if dirty else head


def save(record: dict[str, Any], path: str) -> None:
    with open(path, "w") as f:
        json.dump(record, f, indent=1)
        f.write("\n")


def load(path: str) -> dict[str, Any]:
    with open(path) as f:
        return json.load(f)
