"""Trace files and traces as untrusted input (#31 class 7), through rx.Trace.load and
`relaxvm trace --compare`: a small archive naming one compressed array many times (each name
read it again: 3.8 GB from 66 KB), arrays past the load limit, JSON nested deeper than a trace
needs, headers and counts that contradict each other (a crafted `skipped` made first_difference
compare nothing and report no difference), and the listing of a 40,000-deep recursion (a panic).
Each runs in a child process with a memory cap (see attack.py)."""

import io
import json
import zipfile

import numpy as np
import pytest
from attack import run_attack

import relaxvm as rx

#: `down(n)` recurses n deep: three calls per level (int.le, int.sub, down).
DOWN = """
import relaxvm as rx
ib = rx.ExecBuilder()
with ib.function("down", num_inputs=1):
    ib.emit_call("vm.builtin.int.le", args=[ib.r(0), ib.imm(0)], dst=ib.r(1))
    ib.emit_if(ib.r(1), 2)
    ib.emit_ret(ib.r(0))
    ib.emit_call("vm.builtin.int.sub", args=[ib.r(0), ib.imm(1)], dst=ib.r(2))
    ib.emit_call("down", args=[ib.r(2)], dst=ib.r(1))
    ib.emit_ret(ib.r(1))
exe = ib.get()
"""

#: Runs the CLI from inside an attack (it inherits the attack's memory cap) and prints its exit
#: status and the last line of its stderr.
CLI = """
import subprocess, sys
def cli(*args):
    done = subprocess.run([sys.executable, "-m", "relaxvm", *args], capture_output=True, text=True, timeout=100)
    assert "panicked at" not in done.stderr, done.stderr
    lines = done.stderr.strip().splitlines() or [""]
    return done.returncode, lines[-1], done.stdout
"""


def npy_bytes(arr: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, arr)
    return buf.getvalue()


def step(index, args=None, depth=0, end=None, outputs=None):
    values = None if args is None else {"args": args, "result": "null", "outputs": outputs or []}
    return {
        "index": index,
        "function": "main",
        "pc": index,
        "callee": "f",
        "depth": depth,
        "end": index + 1 if end is None else end,
        "failed": False,
        "values": values,
    }


def write_trace(path, steps, skipped=0, result="null", arrays=None, json_text=None, version=1):
    """A trace file as relaxvm writes it (members deflated, as np.savez_compressed would);
    version 1 unless it uses version 2's `same`."""
    meta = {
        "format": "relaxvm-trace",
        "version": version,
        "function": "main",
        "skipped": skipped,
        "max_bytes": 1,
        "steps": steps,
        "result": result,
    }
    text = json_text if json_text is not None else json.dumps(meta)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("__trace__.npy", npy_bytes(np.frombuffer(text.encode(), np.uint8)))
        for name, data in (arrays or {}).items():
            z.writestr(f"{name}.npy", data if isinstance(data, bytes) else npy_bytes(data))
    return path


def zeros_member(z: zipfile.ZipFile, name: str, n: int) -> None:
    """Writes an .npy of n zero bytes into z, deflated, without holding it in memory."""
    header = npy_bytes(np.zeros(0, np.uint8)).replace(b"(0,)", f"({n},)".encode())
    # The header's padding keeps its length a multiple of 64: trim spaces for the longer shape.
    grow = len(f"({n},)") - len("(0,)")
    header = header[: -1 - grow] + b"\n"
    with z.open(f"{name}.npy", "w", force_zip64=True) as f:
        f.write(header)
        chunk = bytes(1 << 20)
        for _ in range(n >> 20):
            f.write(chunk)


def tensor_ref(array, n):
    return {"tensor": {"array": array, "dtype": "uint8", "shape": [n]}}


def test_an_array_named_60_times_is_read_once(tmp_path):
    # 64 MiB of zeros deflate to 64 KiB; named 60 times it was read 60 times (3.8 GB).
    n = 64 << 20
    path = write_trace(tmp_path / "bomb.npz", [step(0, [tensor_ref("z", n)] * 60)], arrays={"z": np.zeros(n, np.uint8)})
    assert path.stat().st_size < 200 << 10
    run_attack(
        f"""
import relaxvm as rx
t = rx.Trace.load({str(path)!r})
args = t[0].args
print(len(args), args[0].shape, sum(int(a.numpy()[-1]) for a in args))
try:
    rx.Trace.load({str(path)!r}, limit=32 << 20)
except rx.VMValueError as e:
    print("limit:", 'array "z" needs 67108992 bytes' in str(e) and "load limit of 33554432" in str(e))
"""
    ).assert_ok("60 (67108864,) 0\nlimit: True")


def test_an_array_past_the_default_limit_is_refused_by_load_and_the_cli(tmp_path):
    # 320 MiB of zeros in a ~330 KB file: past 256 MiB + 16 bytes per file byte.
    n = 320 << 20
    path = write_trace(tmp_path / "big.npz", [step(0, [tensor_ref("z", n)])])
    with zipfile.ZipFile(path, "a", zipfile.ZIP_DEFLATED) as z:
        zeros_member(z, "z", n)
    prog = tmp_path / "down.rvx"
    exec(DOWN, ns := {})
    ns["exe"].save(prog)
    run_attack(
        CLI
        + f"""
import relaxvm as rx
try:
    rx.Trace.load({str(path)!r})
except rx.VMValueError as e:
    print("load:", 'array "z" needs 335544448 bytes' in str(e), "load limit of" in str(e))
code, last, _ = cli("trace", {str(prog)!r}, "--function", "down", "--arg", "2", "-q", "--compare", {str(path)!r})
print("cli:", code, 'array "z" needs 335544448 bytes' in last, {str(path)!r} in last)
"""
    ).assert_ok("load: True True\ncli: 1 True True")


def test_print_of_a_40000_deep_recursion_and_every_operation_on_it(tmp_path):
    path = tmp_path / "deep.npz"
    run_attack(
        DOWN
        + f"""
t = rx.VirtualMachine(exe).trace("down", 40_000)
text = str(t)
lines = text.splitlines()
assert max(len(line) for line in lines) < 200, max(len(line) for line in lines)
print(len(lines) - 1, t.total_steps, "[depth 40000]" in lines[-2] or "[depth 40000]" in lines[-1])
assert repr(t).startswith("<relaxvm.Trace")
assert sum(1 for s in t) == len(t) == t.total_steps
assert max(s.depth for s in t) == 40_000
t.save({str(path)!r})
u = rx.Trace.load({str(path)!r})
print(str(u) == text, rx.Trace.first_difference(t, u))
""",
        timeout=120,
    ).assert_ok("120001 120001 True\nTrue None")


def test_the_cli_lists_and_compares_a_40000_deep_recursion(tmp_path):
    prog, saved = tmp_path / "down.rvx", tmp_path / "deep.npz"
    exec(DOWN, ns := {})
    ns["exe"].save(prog)
    run_attack(
        CLI
        + f"""
code, last, out = cli("trace", {str(prog)!r}, "--function", "down", "--arg", "40000", "--save", {str(saved)!r})
print(code, "[depth 40000]" in out, len(out.splitlines()))
code, last, out = cli("trace", {str(prog)!r}, "--function", "down", "--arg", "40000", "-q", "--compare", {str(saved)!r})
print(code, out.strip().startswith("no step differs"))
""",
        timeout=120,
    ).assert_ok("0 True 120002\n0 True")


INCONSISTENT = {
    "skipped past 2**64": (
        dict(steps=[step(0)], skipped=2**64 - 1),
        "skipped = 18446744073709551615 with 1 kept steps: more steps than can be counted",
    ),
    "index": (dict(steps=[step(0), step(7)]), r"field index: expected 1 \(skipped = 0 plus its position\)"),
    "end before start": (dict(steps=[step(0, end=0)]), r"field end: 0 is not after the step's start"),
    "end past the run": (dict(steps=[step(0, end=9)]), r"field end: 9 is not after .* at most the 1 steps"),
    "depth": (dict(steps=[step(0, depth=3)]), r"field depth: 3, but no kept call encloses it and only 0"),
    "nesting": (dict(steps=[step(0, end=2), step(1)]), r"field depth: 0, but the call enclosing it is at depth 0"),
    "outputs": (dict(steps=[step(0, args=[], outputs=[[2, "null"]])]), r"field outputs: argument index 2"),
}


@pytest.mark.parametrize("case", INCONSISTENT)
def test_inconsistent_counts_and_indices_are_refused(tmp_path, case):
    kwargs, match = INCONSISTENT[case]
    path = write_trace(tmp_path / "bad.npz", **kwargs)
    out = run_attack(
        f"""
import relaxvm as rx
rx.Trace.load({str(path)!r})
"""
    )
    where = r"(step at position \d+ \(index \d+\), )?"
    out.assert_raises("VMValueError", f"cannot read trace .*bad.npz: __trace__: {where}{match}")


def test_a_trace_that_dropped_steps_the_other_kept_is_not_called_equal(tmp_path):
    # Consistent but compares nothing: every step "dropped" (skipped near 2**64, no kept step).
    path = write_trace(tmp_path / "skipped.npz", [], skipped=2**64 - 2)
    prog = tmp_path / "down.rvx"
    exec(DOWN, ns := {})
    ns["exe"].save(prog)
    run_attack(
        DOWN
        + CLI
        + f"""
crafted = rx.Trace.load({str(path)!r})
real = rx.VirtualMachine(exe).trace("down", 3)
d = rx.Trace.first_difference(crafted, real)
print(d.what, d.index, d.a, d.b is not None)
print(rx.Trace.first_difference(real, real))
code, last, _ = cli("trace", {str(prog)!r}, "--function", "down", "--arg", "3", "-q", "--compare", {str(path)!r})
print(code, "not compared" in last)
"""
    ).assert_ok("skipped 0 None True\nNone\n1 True")


def test_json_nested_past_what_a_trace_needs_is_refused(tmp_path):
    deep = "null"
    for _ in range(200):
        deep = {"tuple": [deep]}
    path = write_trace(tmp_path / "deep.npz", [], result=deep)
    run_attack(f"import relaxvm as rx; rx.Trace.load({str(path)!r})").assert_raises(
        "VMValueError", r"__trace__: the JSON nests 401 deep at byte \d+, more than the 80 a trace needs"
    )


def test_arrays_that_contradict_their_header_or_the_json_are_refused(tmp_path):
    four = npy_bytes(np.ones(4, np.float32))
    lying = four.replace(b"(4,)", b"(9,)")
    ref = {"tensor": {"array": "x", "dtype": "float32", "shape": [9]}}
    path = write_trace(tmp_path / "header.npz", [], result=ref, arrays={"x": lying})
    run_attack(f"import relaxvm as rx; rx.Trace.load({str(path)!r})").assert_raises(
        "VMValueError", r'array "x": .*needs 36 bytes of data, found 16'
    )
    path = write_trace(tmp_path / "shape.npz", [], result=ref, arrays={"x": four})
    run_attack(f"import relaxvm as rx; rx.Trace.load({str(path)!r})").assert_raises(
        "VMValueError", r'array "x" is float32\(4,?\), the trace says float32\(9,?\) \(value result\)'
    )
    path = write_trace(tmp_path / "same.npz", [], result={"same": "step0.result"}, version=2)
    run_attack(f"import relaxvm as rx; rx.Trace.load({str(path)!r})").assert_raises(
        "VMValueError", 'value result: refers to tuple "step0.result", which is not stored before it'
    )


def test_a_trace_of_exponentially_shared_tuples_is_linear(tmp_path):
    # 2**40 leaves unfolded: recording, listing, saving, loading and comparing touch 41 tuples.
    path = tmp_path / "shared.npz"
    run_attack(
        f"""
import relaxvm as rx
ib = rx.ExecBuilder()
with ib.function("id", num_inputs=1):
    ib.emit_call("vm.builtin.copy", args=[ib.r(0)], dst=ib.r(1))
    ib.emit_ret(ib.r(1))
v = 1
for _ in range(40):
    v = (v, v)
t = rx.VirtualMachine(ib.get()).trace("id", v)
str(t)
t.save({str(path)!r})
u = rx.Trace.load({str(path)!r})
r = u[0].result
print(r[0] is r[1], rx.Trace.first_difference(t, u))
""",
        timeout=30,
    ).assert_ok("True None")


def test_the_default_limit_is_documented_and_loads_what_save_writes(tmp_path):
    x = np.arange(1 << 20, dtype=np.float32)
    ib = rx.ExecBuilder()
    with ib.function("f", num_inputs=1):
        ib.emit_call("vm.builtin.copy", args=[ib.r(0)], dst=ib.r(1))
        ib.emit_ret(ib.r(1))
    t = rx.VirtualMachine(ib.get()).trace("f", x)
    t.save(tmp_path / "t.npz")
    u = rx.Trace.load(tmp_path / "t.npz")
    assert rx.Trace.first_difference(t, u) is None
    # A limit smaller than the arrays refuses the file it just saved.
    with pytest.raises(rx.VMValueError, match=r'array "step0\.args\.0" needs 4194432 bytes'):
        rx.Trace.load(tmp_path / "t.npz", limit=1 << 20)
