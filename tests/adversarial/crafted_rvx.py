"""Crafting `.rvx` files that reference native libraries, as an attacker would: save a model
imported from a real `.so`, then rewrite the library reference (a path of the same length and
any hash) and recompute the checksums, which guard against accidents, not authors."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import zlib
from pathlib import Path

#: A model TVM compiled, kept in the repository (tvm/tests/data).
MLP_SO = Path(__file__).resolve().parents[2] / "tvm" / "tests" / "data" / "mlp.so"


def _varint(b: bytes, pos: int) -> tuple[int, int]:
    """A PrefixVarInt at `pos`: (value, position after it)."""
    first = b[pos]
    if first == 0:
        return int.from_bytes(b[pos + 1 : pos + 9], "little"), pos + 9
    n = (first & -first).bit_length() - 1  # trailing zero bits: bytes that follow
    return int.from_bytes(b[pos : pos + n + 1], "little") >> (n + 1), pos + n + 1


def reseal(raw: bytes | bytearray) -> bytes:
    """The file with both CRC-32s recomputed (docs/format.md, "Checksums")."""
    b = bytearray(raw)
    _, pos = _varint(b, 4)
    plen, pos = _varint(b, pos)
    pos += plen
    bulk = []
    while True:
        id_at = pos
        sid = b[pos]
        length, pos = _varint(b, pos + 1)
        if sid & 0x80:
            align, pos = _varint(b, pos)
            pos = -(-pos // align) * align
        if sid & 0x3F == 63:
            break
        if sid & 0x40:
            bulk.append((pos, pos + length))
        pos += length
    meta, data, at = 0, 0, 0
    for start, end in bulk:
        meta = zlib.crc32(b[at:start], meta)
        data = zlib.crc32(b[start:end], data)
        at = end
    meta = zlib.crc32(b[at:id_at], meta)
    b[pos : pos + 8] = meta.to_bytes(4, "little") + data.to_bytes(4, "little")
    return bytes(b)


def relaxvm_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "relaxvm", *args], capture_output=True, text=True, timeout=120)


def recorded_hash(rvx: Path) -> int:
    """The hash the file records for its (one) library, as `relaxvm stats` lists it."""
    out = relaxvm_cli("stats", str(rvx)).stdout
    return int(re.search(r"XXH3-64 (0x[0-9a-f]{16})", out).group(1), 16)


def file_hash(path: Path) -> int:
    """XXH3-64 of a file's bytes, as relaxvm computes it: `relaxvm verify` of a file referencing
    `path` under a wrong hash reports the right one."""
    probe = Path(tempfile.mkdtemp(prefix="h", dir="/tmp"))
    try:
        rvx = probe / "p.rvx"
        write_reference(rvx, str(path), 0)
        err = relaxvm_cli("verify", str(rvx)).stderr
        return int(re.search(r"hash to (0x[0-9a-f]{16})", err).group(1), 16)
    finally:
        shutil.rmtree(probe)


def write_reference(rvx: Path, library: str, content_hash: int) -> None:
    """Writes at `rvx` the program of the repository's MLP model, referencing `library` (an
    absolute path) by `content_hash`: the model is imported from a copy of its `.so` at a path
    of the same length, saved, and the path and hash are rewritten in place."""
    import relaxvm as rx

    base = Path(tempfile.mkdtemp(prefix="r", dir="/tmp")).resolve()
    try:
        # base/ddd/m, as long as `library`.
        room = len(library.encode()) - len(str(base)) - 3
        if room < 1:
            raise ValueError(f"library path {library!r} is too short to craft (at least {len(str(base)) + 4} bytes)")
        stand_in = base / ("d" * room)
        stand_in.mkdir()
        so = stand_in / "m"
        assert len(str(so).encode()) == len(library.encode()), (so, library)
        shutil.copy(MLP_SO, so)
        # load_module opens the (trusted, repository) model to import it.
        rx.load_module(str(so)).save(str(rvx))
        old_hash = recorded_hash(rvx)
        raw = rvx.read_bytes()
        assert raw.count(str(so).encode()) == 1 and raw.count(old_hash.to_bytes(8, "little")) == 1
        raw = raw.replace(str(so).encode(), library.encode()).replace(
            old_hash.to_bytes(8, "little"), content_hash.to_bytes(8, "little")
        )
        rvx.write_bytes(reseal(raw))
    finally:
        shutil.rmtree(base)


def compile_marker_library(path: Path, marker: Path) -> None:
    """A shared library whose initializer appends a line to `marker`: proof that it was opened,
    and how many times."""
    cc = shutil.which(os.environ.get("CC", "cc"))
    if cc is None:
        import pytest

        pytest.skip("no C compiler (cc) to build the marker library")
    src = path.with_suffix(".c")
    src.write_text(
        "#include <stdio.h>\n"
        "__attribute__((constructor)) static void mark(void) {\n"
        f'  FILE* f = fopen("{marker}", "a"); if (f) {{ fputs("opened\\n", f); fclose(f); }}\n'
        "}\n"
        "int __tvm_ffi_k(void* s, void* a, int n, void* r) { return 0; }\n"
    )
    done = subprocess.run([cc, "-shared", "-fPIC", "-O1", "-o", str(path), str(src)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def _enc(v: int) -> bytes:
    """`v` as the format's varint (the count of trailing zero bits of the first byte, plus one,
    is the length)."""
    for n in range(8):
        if v < (1 << (7 * (n + 1))):
            return ((v << (n + 1)) | (1 << n)).to_bytes(n + 1, "little")
    return b"\0" + v.to_bytes(8, "little")


def repeat_reference(rvx: Path, times: int) -> None:
    """Rewrites `rvx`, which references one library, to reference it `times` times (the same
    path and hash in every entry of its libraries section)."""
    b = rvx.read_bytes()
    _, pos = _varint(b, 4)
    plen, pos = _varint(b, pos)
    pos += plen
    head, secs = b[:pos], []
    while True:
        sid = b[pos]
        length, p = _varint(b, pos + 1)
        align = None
        if sid & 0x80:
            align, p = _varint(b, p)
            p = -(-p // align) * align
        secs.append([sid, align, b[p : p + length]])
        pos = p + length
        if sid & 0x3F == 63:
            break
    h = recorded_hash(rvx).to_bytes(8, "little")
    sec = next(s for s in secs if h in s[2] and s[2].startswith(_enc(1)))
    _, p = _varint(sec[2], 0)
    sec[2] = _enc(times) + sec[2][p:] * times
    out = bytearray(head)
    for sid, align, data in secs:
        out.append(sid)
        out += _enc(len(data))
        if align is not None:
            out += _enc(align)
            while len(out) % align:
                out.append(0xCB)
        out += data
    rvx.write_bytes(reseal(out))
