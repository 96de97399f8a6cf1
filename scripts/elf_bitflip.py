#!/usr/bin/env python3
"""Bit-flip campaign against the dynamic-linking structures of a TVM model's ``.so``.

Flips every bit (or a seeded sample) of what the dynamic loader reads -- the ELF header, the
program headers, the dynamic section, the relocation tables, the dynamic symbol and string
tables, the hash tables, the version tables and the init/fini arrays -- one at a time, and
loads each mutant with ``rx.load_module`` in a forked child with an address-space cap and a
timeout. A mutant that loads must also run: ``main`` is called with the given input and must
return or raise. Outcomes:

- ``refused``: ``load_module`` raised (a clean error);
- ``ran``: it loaded and ``main`` returned;
- ``run_error``: it loaded and ``main`` raised (a clean error);
- ``death``: the child was killed by a signal, timed out, or exited by any other way (the dynamic
  loader's ``_exit(127)``, an abort).

The goal is 0 deaths. Usage::

    python scripts/elf_bitflip.py MODEL.so INPUT.npy|INPUT.bin:SHAPE [--sample N --seed S] [--json OUT]

Only standard library, numpy and relaxvm are used; the children are forked from a parent that
has imported relaxvm but run nothing, so each child starts clean and cheaply.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import signal
import struct
import sys
import tempfile
import time

#: Child exit codes (any other ending is a death).
CODES = {10: "refused", 11: "ran", 12: "run_error"}
MEMORY_CAP = 2 << 30
TIMEOUT = 20.0

#: Sections that hold what the loader reads, by name (found through the section headers, which
#: the loader does not read and the campaign does not flip).
LOADER_SECTIONS = (
    ".dynamic",
    ".rela.dyn",
    ".rela.plt",
    ".relr.dyn",
    ".dynsym",
    ".dynstr",
    ".gnu.hash",
    ".hash",
    ".gnu.version",
    ".gnu.version_r",
    ".gnu.version_d",
    ".init_array",
    ".fini_array",
)


def regions(data: bytes) -> list[tuple[str, int, int]]:
    """The (name, file offset, size) of every structure the campaign flips."""
    phoff, shoff = struct.unpack_from("<QQ", data, 32)
    phentsize, phnum, shentsize, shnum, shstrndx = struct.unpack_from("<HHHHH", data, 54)
    out = [("ELF header", 0, 64), ("program headers", phoff, phentsize * phnum)]
    sections = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
    names = sections[shstrndx][4]
    for name_off, _type, _flags, _addr, offset, size, *_ in sections:
        end = data.index(b"\0", names + name_off)
        name = data[names + name_off : end].decode()
        if name in LOADER_SECTIONS and size:
            out.append((name, offset, size))
    return out


def load_input(spec: str):
    import numpy as np

    if spec.endswith(".npy"):
        return np.load(spec)
    path, _, shape = spec.partition(":")
    return np.fromfile(path, dtype="<f4").reshape([int(d) for d in shape.split(",")])


def child(path: str, x) -> int:
    """Runs in the forked child: load, then run; returns the exit code."""
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP, MEMORY_CAP))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    signal.signal(signal.SIGALRM, signal.SIG_DFL)
    signal.alarm(int(TIMEOUT))
    import relaxvm as rx

    try:
        ex = rx.load_module(path)
    except Exception:
        return 10
    try:
        rx.VirtualMachine(ex)["main"](x)
    except Exception:
        return 12
    return 11


def run_one(path: str, x) -> tuple[str, str]:
    """Loads `path` in a forked child: (outcome, detail)."""
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        # Silence the child's output (errors are expected); keep nothing of the parent's state.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.dup2(devnull, 2)
        code = 99
        try:
            code = child(path, x)
            # C's exit, not os._exit: the loader then runs the library's finalizers (fini
            # arrays, DT_FINI), which a corrupted file can break too. Python's own exit
            # handlers (the parent's) do not run.
            import ctypes

            ctypes.CDLL(None).exit(code)
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        return "death", "timeout" if sig == signal.SIGALRM else signal.Signals(sig).name
    code = os.WEXITSTATUS(status)
    if code in CODES:
        return CODES[code], ""
    return "death", f"exit {code}"


def flips(data: bytes) -> list[tuple[str, int, int]]:
    """Every (region, byte offset, bit) of the loader's structures, without repeats."""
    seen = set()
    out = []
    for name, offset, size in regions(data):
        for at in range(offset, offset + size):
            if at in seen:
                continue
            seen.add(at)
            out.extend((name, at, bit) for bit in range(8))
    return out


def campaign(model: str, x, sample: int | None, seed: int, workdir: str, log=None) -> dict:
    with open(model, "rb") as f:
        data = f.read()
    todo = flips(data)
    if sample is not None and sample < len(todo):
        todo = random.Random(seed).sample(todo, sample)
    counts = {"refused": 0, "ran": 0, "run_error": 0, "death": 0}
    deaths = []
    os.makedirs(workdir, exist_ok=True)
    path = os.path.join(workdir, "mutant.so")
    start = time.monotonic()
    for n, (name, at, bit) in enumerate(todo):
        mutant = bytearray(data)
        mutant[at] ^= 1 << bit
        with open(path, "wb") as f:
            f.write(mutant)
        outcome, detail = run_one(path, x)
        counts[outcome] += 1
        if outcome == "death":
            deaths.append({"region": name, "offset": at, "bit": bit, "how": detail})
            keep = os.path.join(workdir, f"death-{at:x}-{bit}.so")
            os.replace(path, keep)
        if log and (n + 1) % 500 == 0:
            print(f"{n + 1}/{len(todo)} {counts}", file=log, flush=True)
    return {
        "model": model,
        "flips": len(todo),
        "bytes": len({at for _, at, _ in todo}),
        "regions": {name: size for name, _, size in regions(data)},
        "outcomes": counts,
        "deaths": deaths,
        "seconds": round(time.monotonic() - start, 1),
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("model")
    p.add_argument("input", help="an .npy file, or raw float32 as PATH:D0,D1,...")
    p.add_argument("--sample", type=int, help="flip this many random bits instead of all")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", help="write the summary here too")
    p.add_argument("--keep", help="folder for the mutants that killed the process (default: a temporary one)")
    args = p.parse_args()
    import relaxvm  # noqa: F401  (imported once here, so that each forked child has it)

    x = load_input(args.input)
    with tempfile.TemporaryDirectory() as tmp:
        result = campaign(args.model, x, args.sample, args.seed, args.keep or tmp, log=sys.stderr)
    text = json.dumps(result, indent=1)
    print(text)
    if args.json:
        with open(args.json, "w") as f:
            f.write(text + "\n")
    return 1 if result["deaths"] else 0


if __name__ == "__main__":
    sys.exit(main())
