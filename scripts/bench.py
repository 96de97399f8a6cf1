"""The relaxvm benchmark suite, side by side with Apache TVM's Relax VM when it is installed.

Run with ``./scripts/bench.sh`` (sets up ``.venv-bench`` with apache-tvm) or directly with any
Python that has ``relaxvm`` (peer rows are skipped without ``tvm``). Each row is measured
alternately for both VMs over several rounds in one run, and the best round of each is kept, so
machine noise affects both sides alike. Prints a Markdown table: ours, the peer's, and the ratio
(peer time / our time: above 1 means we are faster).

The rows are in bench_rows.py (programs in bench_programs.py, measurement in bench_measure.py);
this file runs them and writes the README table.
"""

from __future__ import annotations

import argparse
import os
import re

import bench_measure
from bench_measure import Row, best_time, ctrl_c_latency_ms, measure_row, ours, peer, scale, threads_ratio, tvm
from bench_rows import rows

import relaxvm as rx

__all__ = ["README_END", "README_START", "Row", "replace_table", "rows"]


README_START = "<!-- bench table: written by scripts/bench.py --update-readme -->"
README_END = "<!-- end of bench table -->"


def replace_table(readme: str, table: list[str]) -> str:
    """``readme`` with the lines between the bench-table markers replaced by ``table``."""
    start, end = readme.index(README_START), readme.index(README_END)
    return readme[: start + len(README_START)] + "\n" + "\n".join(table) + "\n" + readme[end:]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--quick", action="store_true", help="fewer rounds and shorter programs")
    ap.add_argument("--rounds", type=int, default=None)
    ap.add_argument("--update-readme", action="store_true", help="also write the table into README.md")
    ap.add_argument("--only", metavar="REGEX", help="run only the rows whose label matches (and no thread rows)")
    ap.add_argument(
        "--clock",
        choices=("wall", "thread"),
        default="wall",
        help="time rows by wall time (default) or by the measuring thread's CPU time (on a loaded machine)",
    )
    args = ap.parse_args()
    bench_measure.set_clock(args.clock)
    if args.only and args.update_readme:
        ap.error("--update-readme writes the whole table: run it without --only")
    rounds = args.rounds or (2 if args.quick else 5)
    min_seconds = 0.05 if args.quick else 0.2
    backends = [b for b in (ours(), peer()) if b is not None]
    print(f"relaxvm {rx.__version__}; peer: {'Apache TVM ' + tvm.__version__ if tvm else 'not installed'}")
    print()
    table = ["| row | unit | relaxvm | peer | peer / relaxvm | target |", "| --- | --- | ---: | ---: | ---: | --- |"]
    print("\n".join(table))
    import bench_tvm_models  # beside this file; needs TVM, so only the bench venv has its rows
    from progress import Progress  # beside this file

    all_rows = rows(args.quick) + bench_tvm_models.rows(Row, args.quick)
    if args.only:
        all_rows = [r for r in all_rows if re.search(args.only, r.label)]
    progress = Progress(len(all_rows) + 2, "bench")

    def emit(line: str) -> None:
        progress.clear()
        table.append(line)
        print(line, flush=True)

    for row in all_rows:
        progress.step(row.label)
        best = measure_row(row, backends, rounds, min_seconds)
        ours_v, peer_v = best["relaxvm"], best.get("tvm")
        peer_s = f"{peer_v:.1f}" if peer_v is not None else "-"
        ratio = f"{peer_v / ours_v:.1f}x" if peer_v is not None else "-"
        if row.reference is not None:
            who, fn = row.reference
            ref = min(best_time(fn, min_seconds) for _ in range(rounds)) / row.per * scale(row.unit)
            peer_s, ratio = f"{who} {ref:.1f}", f"{ref / ours_v:.2f}x"
        emit(f"| {row.label} | {row.unit} | {ours_v:.1f} | {peer_s} | {ratio} | {row.target} |")
    if args.only:
        return
    progress.step("2 Python threads")
    threads = threads_ratio(min_seconds)
    progress.step("Ctrl-C latency")
    ctrl_c = ctrl_c_latency_ms()
    emit(f"| 2 Python threads, each its own VM | throughput | {threads:.2f}x one thread | - | - | >= 1.9x |")
    emit(f"| Ctrl-C in an endless loop to KeyboardInterrupt | ms, worst of 5 | {ctrl_c:.2f} | - | - | <= 100 |")
    if args.update_readme:
        path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "README.md")
        with open(path) as f:
            readme = f.read()
        with open(path, "w") as f:
            f.write(replace_table(readme, table))


if __name__ == "__main__":
    main()
