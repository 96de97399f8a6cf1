"""Trace files rx.Trace.load refuses that no other test caused (scripts/error-coverage.py): an
array past the load limit, zip entries whose sizes contradict their data, a __trace__ member of
the wrong dtype, and tuples nested deeper than a trace records. Each test checks the exception's
class and its whole message. (Attacks on trace files, in capped child processes, are in
tests/adversarial/test_trace_files.py.)"""

from __future__ import annotations

import io
import json
import re
import struct
import zipfile

import numpy as np
import pytest

import relaxvm as rx


def npy_bytes(arr: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, arr)
    return buf.getvalue()


def meta(result="null") -> bytes:
    text = json.dumps(
        {
            "format": "relaxvm-trace",
            "version": 1,
            "function": "main",
            "skipped": 0,
            "max_bytes": 1,
            "steps": [],
            "result": result,
        }
    )
    return npy_bytes(np.frombuffer(text.encode(), np.uint8))


def write(path, members: dict[str, bytes], compression=zipfile.ZIP_DEFLATED):
    with zipfile.ZipFile(path, "w", compression) as z:
        for name, data in members.items():
            z.writestr(name, data)
    return path


def claim_size(path, member: str, size: int) -> None:
    """Rewrites the uncompressed size `member`'s local and central headers record (the data,
    its CRC and its compressed size stay)."""
    data = bytearray(path.read_bytes())
    name = member.encode()
    # Local header: signature, then the uncompressed size at offset 22; central: at offset 24.
    for sig, at in ((b"PK\x03\x04", 22), (b"PK\x01\x02", 24)):
        start = 0
        while (i := data.find(sig, start)) >= 0:
            start = i + 4
            name_at = i + (30 if sig == b"PK\x03\x04" else 46)
            if data[name_at : name_at + len(name)] == name:
                data[i + at : i + at + 4] = struct.pack("<I", size)
    path.write_bytes(bytes(data))


def load_error(path, **kwargs) -> str:
    with pytest.raises(rx.VMValueError) as e:
        rx.Trace.load(path, **kwargs)
    assert type(e.value) is rx.VMValueError
    return str(e.value)


def tensor_result(n: int) -> dict:
    return {"tensor": {"array": "z", "dtype": "uint8", "shape": [n]}}


def test_an_array_past_the_load_limit(tmp_path):
    members = {"__trace__.npy": meta(tensor_result(4096)), "z.npy": npy_bytes(np.zeros(4096, np.uint8))}
    path = write(tmp_path / "t.npz", members)
    e = load_error(path, limit=5000)
    # (The literals are split after "bytes,": scripts/error-coverage.py would take the phrase for
    # the TVM reader's truncation message, which this test does not cause.)
    left = re.fullmatch(r'.*: array "z" needs 4224 bytes, ' r"but only (\d+) of the load limit of 5000 are left .*", e)
    assert left and int(left.group(1)) < 4224, e
    assert e == (
        f'cannot read trace {path}: array "z" needs 4224 bytes, '
        f"but only {left.group(1)} of the load limit of 5000 "
        "are left (a larger limit loads it: Trace::load_within, rx.Trace.load(path, limit=...))"
    )


def test_zip_entries_whose_sizes_contradict_their_data(tmp_path):
    data = npy_bytes(np.zeros(200, np.uint8))
    members = {"__trace__.npy": meta(tensor_result(200)), "z.npy": data}
    # A stored entry claiming far more than its bytes could inflate to.
    path = write(tmp_path / "bomb.npz", members, zipfile.ZIP_STORED)
    claim_size(path, "z.npy", 1 << 30)
    assert load_error(path) == (
        f'cannot read trace {path}: array "z" claims {1 << 30} bytes from {len(data)} compressed, more than its '
        "data can hold"
    )
    # Stored entries whose data is longer, or shorter, than the size they record.
    path = write(tmp_path / "long.npz", members, zipfile.ZIP_STORED)
    claim_size(path, "z.npy", 100)
    assert load_error(path) == f'cannot read trace {path}: array "z" holds more than 100 bytes, its zip entry says 100'
    path = write(tmp_path / "short.npz", members, zipfile.ZIP_STORED)
    claim_size(path, "z.npy", len(data) + 50)
    assert load_error(path) == (
        f'cannot read trace {path}: array "z" holds {len(data)} bytes, its zip entry says {len(data) + 50}'
    )


def test_a_trace_member_of_the_wrong_dtype(tmp_path):
    path = write(tmp_path / "t.npz", {"__trace__.npy": npy_bytes(np.zeros(2, np.float32))})
    assert load_error(path) == f"cannot read trace {path}: __trace__ must be a 1-D uint8 array, found float32(2,)"


def test_tuples_nested_deeper_than_a_trace_records(tmp_path):
    deep = "null"
    for _ in range(33):
        deep = {"tuple": [deep]}
    path = write(tmp_path / "t.npz", {"__trace__.npy": meta(deep)})
    where = "value result" + ".0" * 32
    assert load_error(path) == f"cannot read trace {path}: {where}: tuples nest deeper than 32"
