"""Small inputs that would make large allocations, and allocations that fail: what a tensor-cache
load keeps is bounded by its files' sizes (records may not share bytes, a shard file may be named
once), and running out of memory while making bytes is a MemoryError, never a Rust panic."""

import json
import os

import pytest
from attack import run_attack

SHARD = 64 << 20

LOAD = """
import relaxvm as rx
ib = rx.ExecBuilder()
with ib.function("main", num_inputs=0):
    ib.emit_call("vm.builtin.tensor_cache.load", args=[ib.convert_constant({d!r}), ib.imm(1), ib.imm(0)], dst=ib.r(0))
    ib.emit_ret(ib.r(0))
rx.VirtualMachine(ib.get())["main"]()
"""


def write_cache(d, shards):
    """`shards`: (dataPath, size of a sparse file to create or None for an existing one,
    records as (name, byteOffset, nbytes) of uint8)."""
    meta = {"metadata": {}, "records": []}
    for path, size, records in shards:
        if size is not None:
            with open(os.path.join(d, path), "wb") as f:
                f.truncate(size)  # sparse: costs no disk
        recs = [
            {"name": n, "shape": [nb], "dtype": "uint8", "format": "raw", "nbytes": nb, "byteOffset": off}
            for n, off, nb in records
        ]
        nbytes = os.path.getsize(os.path.join(d, path))
        meta["records"].append({"dataPath": path, "format": "raw-shard", "nbytes": nbytes, "records": recs})
    with open(os.path.join(d, "tensor-cache.json"), "w") as f:
        json.dump(meta, f)
    return str(d)


def test_records_covering_the_same_bytes_are_refused_before_reading(tmp_path):
    # Twenty copies of one 64 MiB shard (1.3 GiB) from a 3 KB file: refused before the shard is read.
    recs = [(f"p{i}", 0, SHARD) for i in range(20)]
    d = write_cache(tmp_path, [("shard0.bin", SHARD, recs)])
    run_attack(LOAD.format(d=d)).assert_raises(
        "VMValueError", r"shard0\.bin: parameter \"p1\" \(bytes 0\.\.67108864\) overlaps parameter \"p0\""
    )


def test_partly_overlapping_records_are_refused_naming_both(tmp_path):
    d = write_cache(tmp_path, [("s.bin", 64, [("a", 0, 32), ("b", 16, 32), ("c", 48, 16)])])
    run_attack(LOAD.format(d=d)).assert_raises(
        "VMValueError", r"parameter \"b\" \(bytes 16\.\.48\) overlaps parameter \"a\" \(bytes 0\.\.32\)"
    )


@pytest.mark.parametrize("how", ["same path", "symlink", "hard link"])
def test_a_shard_file_named_twice_is_refused(tmp_path, how):
    with open(tmp_path / "shard0.bin", "wb") as f:
        f.truncate(SHARD)
    second = "shard0.bin"
    if how != "same path":
        second = "other.bin"
        (os.symlink if how == "symlink" else os.link)(tmp_path / "shard0.bin", tmp_path / second)
    d = write_cache(tmp_path, [("shard0.bin", None, [("w0", 0, SHARD)]), (second, None, [("w1", 0, SHARD)])])
    run_attack(LOAD.format(d=d)).assert_raises(
        "VMValueError", rf"from {second}: \"{second}\" is the same file as the earlier shard \"shard0\.bin\""
    )


def test_records_end_to_end_still_load(tmp_path):
    with open(tmp_path / "s.bin", "wb") as f:
        f.write(bytes(range(10)))
    d = write_cache(tmp_path, [("s.bin", None, [("a", 0, 4), ("empty", 4, 0), ("b", 4, 6)])])
    run_attack(
        LOAD.format(d=d)
        + """
ib = rx.ExecBuilder()
with ib.function("get", num_inputs=1):
    ib.emit_call("vm.builtin.tensor_cache.get", args=[ib.r(0)], dst=ib.r(1))
    ib.emit_ret(ib.r(1))
g = rx.VirtualMachine(ib.get())["get"]
print(g("a").numpy().tolist(), g("b").numpy().tolist(), g("empty").shape)
"""
    ).assert_ok("[0, 1, 2, 3] [4, 5, 6, 7, 8, 9] (0,)")


BIG_EXE = """
import numpy as np, pickle, relaxvm as rx
ib = rx.ExecBuilder()
c = ib.convert_constant(np.ones(300 << 18, "float32"))  # 300 MiB
with ib.function("get", num_inputs=0):
    ib.emit_call("vm.builtin.make_tuple", args=[c], dst=ib.r(0))
    ib.emit_ret(ib.r(0))
ex = ib.get()
t = rx.tensor(np.ones(300 << 18, "float32"))
kept = []
for _ in range(6):
    kept.append({what})
"""


OURS = r"cannot allocate (a bytes object of )?\d+ bytes"


@pytest.mark.parametrize(
    ("what", "match"),
    [
        ("ex.save_to_bytes()", OURS),
        ("pickle.dumps(ex)", OURS),
        ("t.tobytes()", OURS),
        # The pickler copies the bytes into its own buffer, whose MemoryError has no message.
        ("pickle.dumps(t, protocol=4)", ""),
    ],
)
def test_running_out_of_memory_while_making_bytes_is_memory_error(what, match):
    outcome = run_attack(BIG_EXE.format(what=what), memory=1800 << 20, timeout=120)
    outcome.assert_raises(("VMMemoryError", "MemoryError"), match)
