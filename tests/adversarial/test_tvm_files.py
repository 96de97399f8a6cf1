"""Crafted TVM files never kill the process (issue 31, class 4).

- A ``relax.VMExecutable`` whose instruction offsets all point into one long call (192 KiB)
  made every instruction decode that call again: a quadratic allocation and SIGABRT. It is an
  error now, in ``rx.load_module`` and in ``relaxvm dis``, as a standalone file and inside a
  ``.so``.
- Corrupt dynamic-linking structures of a model's ``.so`` (relocations, ``DT_RELAENT``, dynamic
  symbols, the GNU hash table) made the dynamic loader crash or ``_exit(127)``. They are refused
  before ``dlopen`` now; a seeded sample of the bit-flip campaign (``scripts/elf_bitflip.py``)
  checks that no flip of those structures kills the process.

Every attack runs in a child process with a memory cap and a timeout. The model is the committed
fixture ``tvm/tests/data/mlp.so`` (45 KB, written by TVM's ``export_library``), so these tests
need neither TVM nor the corpus.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import struct
import subprocess
import sys

import pytest
from attack import MEMORY_CAP, run_attack

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DATA = os.path.join(ROOT, "tvm", "tests", "data")
MLP = os.path.join(DATA, "mlp.so")
MLP_X = os.path.join(DATA, "mlp_x.bin")
BITFLIP = os.path.join(ROOT, "scripts", "elf_bitflip.py")

#: The exception types a refused file raises (a format error).
REFUSED = ("VMError", "VMValueError")

VMEXEC_MAGIC = 0xD225_DE2F_4214_151E


def crafted_vmexec(n: int = 12_000) -> bytes:
    """A relax.VMExecutable of about 192 KiB: one function whose `n` instruction offsets all
    point at word 0, where one call with `n` arguments starts."""

    def string(s: str) -> bytes:
        return struct.pack("<Q", len(s)) + s.encode()

    out = struct.pack("<Q", VMEXEC_MAGIC) + string("0.14")
    # One VM function main(x): kind 1, start 0, end n, 1 argument, 2 registers, param "x".
    out += struct.pack("<Q", 1) + struct.pack("<i", 1) + string("main")
    out += struct.pack("<qqqq", 0, n, 1, 2) + struct.pack("<Q", 1) + string("x")
    out += struct.pack("<Q", 0)  # memory scopes
    out += struct.pack("<Q", 0)  # constants
    out += struct.pack("<Q", n) + struct.pack(f"<{n}q", *([0] * n))  # every offset is 0
    call = [1, 1 << 54, 0, n] + [0] * n  # call main(%0, %0, ...) into the void register
    out += struct.pack("<Q", len(call)) + struct.pack(f"<{len(call)}q", *call)
    return out


def test_the_crafted_vmexec_is_192_kib():
    assert 180 << 10 < len(crafted_vmexec()) < 200 << 10


def _so_with_blob(tmp_path, blob: bytes) -> str:
    """A shared library exporting `blob` as TVM's module tree, built with the C compiler."""
    cc = os.environ.get("CC", "cc")
    if shutil.which(cc) is None:
        pytest.fail(f"the C compiler {cc!r} is needed for this test")
    tree = struct.pack("<QQ", 0, 0)  # import_tree_indptr, import_tree_child_indices: empty
    tree += struct.pack("<Q", len("relax.VMExecutable")) + b"relax.VMExecutable"
    tree += struct.pack("<Q", len(blob)) + blob
    data = struct.pack("<Q", len(tree)) + tree
    src = tmp_path / "crafted.c"
    values = ",".join(str(b) for b in data)
    vis = '__attribute__((visibility("default")))'
    src.write_text(f"const unsigned char __tvm_ffi__library_bin[{len(data)}] {vis} = {{{values}}};\n")
    so = str(tmp_path / "model.so")
    subprocess.run([cc, "-shared", "-fPIC", "-o", so, str(src)], check=True, capture_output=True)
    return so


@pytest.fixture
def crafted_files(tmp_path):
    path = tmp_path / "model.vmexec"
    path.write_bytes(crafted_vmexec())
    return {"vmexec": str(path), "so": _so_with_blob(tmp_path, crafted_vmexec())}


@pytest.mark.parametrize("kind", ["vmexec", "so"])
def test_offsets_into_one_long_call_are_an_error_in_load_module(crafted_files, kind):
    run_attack(f"import relaxvm as rx; rx.load_module({crafted_files[kind]!r})").assert_raises(
        REFUSED, "instruction 1: offset 0 does not follow instruction 0"
    )


def _cap() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP, MEMORY_CAP))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def dis(path: str) -> subprocess.CompletedProcess:
    """`relaxvm dis path` in a capped child: it must fail with an error (exit 1 or 2), not die."""
    out = subprocess.run(
        [sys.executable, "-m", "relaxvm", "dis", path], capture_output=True, text=True, timeout=60, preexec_fn=_cap
    )
    assert out.returncode in (1, 2), (out.returncode, out.stderr)
    assert "panicked" not in out.stderr, out.stderr
    return out


@pytest.mark.parametrize("kind", ["vmexec", "so"])
def test_offsets_into_one_long_call_are_an_error_in_dis(crafted_files, kind):
    out = dis(crafted_files[kind])
    assert "instruction 1: offset 0 does not follow instruction 0" in out.stderr, out.stderr
    assert "panicked" not in out.stderr


def _u(fmt: str, b: bytes, at: int) -> int:
    return struct.unpack_from(fmt, b, at)[0]


def _sections(b: bytes) -> dict[str, tuple[int, int]]:
    shoff, shentsize, shnum, shstrndx = _u("<Q", b, 40), _u("<H", b, 58), _u("<H", b, 60), _u("<H", b, 62)
    heads = [struct.unpack_from("<IIQQQQ", b, shoff + i * shentsize) for i in range(shnum)]
    names = heads[shstrndx][4]
    out = {}
    for name, _t, _f, _a, off, size in heads:
        out[b[names + name : b.index(b"\0", names + name)].decode()] = (off, size)
    return out


def _dynamic_entry(b: bytes, tag: int) -> int:
    off, size = _sections(b)[".dynamic"]
    return next(at for at in range(off, off + size, 16) if _u("<q", b, at) == tag)


def _dynsym(b: bytes, name: str) -> int:
    (off, size), (stroff, _) = _sections(b)[".dynsym"], _sections(b)[".dynstr"]
    target = name.encode() + b"\0"
    return next(at for at in range(off, off + size, 24) if b[stroff + _u("<I", b, at) :].startswith(target))


def _mutants() -> dict[str, tuple[bytes, str]]:
    """Damaged copies of the model, each with what the error must say."""
    with open(MLP, "rb") as f:
        good = f.read()
    s = _sections(good)

    def patch(*edits: tuple[int, str, int]) -> bytes:
        m = bytearray(good)
        for at, fmt, value in edits:
            struct.pack_into(fmt, m, at, value)
        return bytes(m)

    rela, gnu, init = s[".rela.dyn"][0], s[".gnu.hash"][0], s[".init_array"][0]
    add = _dynsym(good, "__tvm_ffi_add")
    return {
        "relaent": (patch((_dynamic_entry(good, 9) + 8, "<Q", 16)), "DT_RELAENT is 16, expected 24"),
        "relocation into code": (patch((rela + 24 * 3, "<Q", 0x1000)), "not 8 aligned bytes of a writable segment"),
        "relocation symbol": (patch((rela + 24 * 6 + 12, "<I", 4)), "undefined but no relocation uses it"),
        # The init_array relocation's addend and the linker's copy at the target both moved.
        "initializer moved": (
            patch((init, "<Q", _u("<Q", good, init) + 1), (rela + 16, "<Q", _u("<Q", good, rela + 16) + 1)),
            "DT_INIT_ARRAY entry 0 is 0x1101, which is not the address of a function",
        ),
        # Deaths of the full campaign before their checks: DT_RELAENT's tag flipped to DT_NEEDED
        # (glibc read the missing entry size through NULL), an import made hidden (bound to the
        # library's own base, called at exit).
        "relaent tag": (patch((_dynamic_entry(good, 9), "<Q", 1)), "DT_RELA without DT_RELAENT"),
        "hidden import": (patch((_dynsym(good, "__cxa_finalize") + 5, "<B", 2)), "visibility 2"),
        "dynsym value": (patch((add + 8, "<Q", _u("<Q", good, add + 8) + 16)), "in the symbol table"),
        "gnu.hash bloom": (patch((gnu + 8, "<I", 3)), "power-of-two Bloom size"),
    }


@pytest.mark.parametrize("name", list(_mutants()))
def test_corrupt_dynamic_structures_are_refused_before_dlopen(tmp_path, name):
    data, message = _mutants()[name]
    path = tmp_path / "model.so"
    path.write_bytes(data)
    run_attack(f"import relaxvm as rx; rx.load_module({str(path)!r})").assert_raises(
        REFUSED, "invalid ELF shared library: .*" + message.replace("(", r"\(").replace(")", r"\)")
    )
    out = dis(str(path))
    assert message in out.stderr, out.stderr


def test_the_unchanged_model_still_loads_and_runs():
    run_attack(
        f"""
import numpy as np, relaxvm as rx
x = np.fromfile({MLP_X!r}, dtype="<f4").reshape(3, 8)
y = rx.VirtualMachine(rx.load_module({MLP!r}))["main"](x).numpy()
expected = np.fromfile({os.path.join(DATA, "mlp_y.bin")!r}, dtype="<f4").reshape(3, 4)
print(bool(np.array_equal(y, expected)))
"""
    ).assert_ok("True")


def test_a_sample_of_the_bit_flip_campaign_kills_nothing(tmp_path):
    """300 seeded flips of the loader's structures (the full campaign flips every bit of them:
    run ``scripts/elf_bitflip.py`` by hand). Each mutant loads in its own capped child."""
    summary = tmp_path / "summary.json"
    done = subprocess.run(
        [sys.executable, BITFLIP, MLP, f"{MLP_X}:3,8", "--sample", "300", "--seed", "31", "--json", str(summary)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert summary.exists(), done.stderr
    result = json.loads(summary.read_text())
    assert result["deaths"] == [], json.dumps(result["deaths"], indent=1)
    outcomes = result["outcomes"]
    assert sum(outcomes.values()) == result["flips"] == 300, outcomes
    # Both kinds of survivor are exercised: most flips are refused, some harmless ones load and run.
    assert outcomes["refused"] > 100 and outcomes["ran"] > 0, outcomes
    assert done.returncode == 0, done.stderr
