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
import datetime
import os
import re
import sys
import time

import bench_measure
import bench_record
from bench_measure import Row, best_time, ctrl_c_latency_ms, measure_row, ours, peer, scale, threads_ratio, tvm
from bench_rows import rows

import relaxvm as rx

__all__ = ["README_END", "README_START", "Row", "replace_table", "rows"]


README_START = "<!-- bench table: written by scripts/bench.py --update-readme -->"
README_END = "<!-- end of bench table -->"
README_RECORD_REL = os.path.relpath(bench_record.README_RECORD, bench_record.ROOT)


def replace_table(readme: str, table: list[str]) -> str:
    """``readme`` with the lines between the bench-table markers replaced by ``table``."""
    start, end = readme.index(README_START), readme.index(README_END)
    return readme[: start + len(README_START)] + "\n" + "\n".join(table) + "\n" + readme[end:]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--quick", action="store_true", help="fewer rounds and shorter programs")
    ap.add_argument(
        "--rounds",
        type=int,
        default=None,
        help="rounds per row, an even number: each side is timed first in half of them (default 6, quick 2)",
    )
    ap.add_argument(
        "--update-readme",
        action="store_true",
        help=f"also write the table into README.md, and the record it comes from into {README_RECORD_REL}",
    )
    ap.add_argument("--record", metavar="FILE", help="also write the run's record (JSON) into FILE")
    ap.add_argument(
        "--readme-from",
        metavar="FILE",
        help="measure nothing: write README.md's table from a record FILE (and copy it to the README's record)",
    )
    ap.add_argument("--only", metavar="REGEX", help="run only the rows whose label matches (and no thread rows)")
    ap.add_argument(
        "--clock",
        choices=("wall", "thread"),
        default="wall",
        help="time rows by wall time (default) or by the measuring thread's CPU time (on a loaded machine)",
    )
    args = ap.parse_args()
    if args.readme_from:
        measuring = [
            flag
            for flag, given in (
                ("--quick", args.quick),
                ("--rounds", args.rounds is not None),
                ("--update-readme", args.update_readme),
                ("--record", args.record),
                ("--only", args.only),
                ("--clock", args.clock != "wall"),
            )
            if given
        ]
        if measuring:
            ap.error(f"--readme-from measures nothing: {', '.join(measuring)} would be ignored")
        write_readme(bench_record.load(args.readme_from))
        return
    bench_measure.set_clock(args.clock)
    if args.only and args.update_readme:
        ap.error("--update-readme writes the whole table: run it without --only")
    rounds = args.rounds if args.rounds is not None else (2 if args.quick else 6)
    if rounds < 2 or rounds % 2:
        ap.error(
            f"--rounds must be an even number of at least 2 (each side is timed first in half of them), not {rounds}"
        )
    min_seconds = 0.05 if args.quick else 0.2
    started, load_start = time.monotonic(), os.getloadavg()[0]
    backends = [b for b in (ours(), peer()) if b is not None]
    print(f"relaxvm {rx.__version__}; peer: {'Apache TVM ' + tvm.__version__ if tvm else 'not installed'}")
    print()
    print("\n".join(bench_record.HEADER))
    import bench_tvm_models  # beside this file; needs TVM, so only the bench venv has its rows
    from progress import Progress  # beside this file

    all_rows = rows(args.quick) + bench_tvm_models.rows(Row, args.quick)
    if args.only:
        all_rows = [r for r in all_rows if re.search(args.only, r.label)]
    progress = Progress(len(all_rows) + 2, "bench")
    recorded: list[dict] = []

    def emit(r: dict) -> None:
        progress.clear()
        recorded.append(r)
        print(bench_record.render_row(r), flush=True)

    for r in all_rows:
        progress.step(r.label)
        best = measure_row(r, backends, rounds, min_seconds)
        ours_v, peer_v, reference = best["relaxvm"], best.get("tvm"), None
        if r.reference is not None:
            reference, fn = r.reference
            peer_v = min(best_time(fn, min_seconds) for _ in range(rounds)) / r.per * scale(r.unit)
        emit(bench_record.row(r.label, r.unit, ours_v, r.target, peer_v, reference))
    if not args.only:
        progress.step("2 Python threads")
        threads = threads_ratio(min_seconds)
        progress.step("Ctrl-C latency")
        ctrl_c = ctrl_c_latency_ms()
        emit(
            bench_record.row(
                "2 Python threads, each its own VM", "throughput", threads, ">= 1.9x", decimals=2, suffix="x one thread"
            )
        )
        emit(
            bench_record.row(
                "Ctrl-C in an endless loop to KeyboardInterrupt", "ms, worst of 5", ctrl_c, "<= 100", decimals=2
            )
        )
    progress.clear()
    record = {
        "provenance": {
            "command": " ".join(["scripts/bench.py", *sys.argv[1:]]),
            "quick": args.quick,
            "rounds": rounds,
            "clock": args.clock,
            "only": args.only,
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "commit": bench_record.commit(),
            "relaxvm": rx.__version__,
            "peer": tvm.__version__ if tvm else None,
            "machine": bench_record.machine(),
            "load_start": load_start,
            "load_end": os.getloadavg()[0],
            "seconds": time.monotonic() - started,
        },
        "rows": recorded,
    }
    print(f"\n{bench_record.provenance_text(record['provenance'])}")
    if args.record:
        bench_record.save(record, args.record)
    if args.update_readme:
        write_readme(record)


def write_readme(record: dict) -> None:
    """Writes ``record``'s table into README.md and the record beside it (README_RECORD)."""
    if record["provenance"]["only"]:
        raise SystemExit("the README's table is the whole suite: this record is of an --only run")
    path = os.path.join(bench_record.ROOT, "README.md")
    with open(path) as f:
        readme = f.read()
    table = bench_record.render(record)
    bench_record.save(record, bench_record.README_RECORD)
    with open(path, "w") as f:
        f.write(replace_table(readme, table))


if __name__ == "__main__":
    main()
