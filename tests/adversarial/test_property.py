"""Property test: random nested Python structures (deep, shared, cyclic), random strided numpy
views (stride 0, negative, stepped, transposed, misaligned, non-native byte order, bool views of
any byte) and random dtypes through every public entry point — rx.tensor, convert_constant,
pickle, DLPack both ways, and every registered vm.builtin.* / vm.op.* builtin called through a
VM. Any Python exception is a fine outcome; a death by signal, a hang or a Rust panic is not.

The whole run is one child process with a memory cap; it prints each step before taking it, so
a crash report names the seed and the step."""

import pytest
from attack import run_attack

PROGRAM = r"""
import math, pickle, random
import numpy as np
import relaxvm as rx

SEED, STEPS = SEED_, STEPS_
rng = random.Random(SEED)
npr = np.random.default_rng(SEED)
DTYPES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
          "float16", "float32", "float64", "complex64", ">f4", "<i2", ">u8"]

def array():
    dt = np.dtype(rng.choice(DTYPES))
    ndim = rng.randint(0, 4)
    shape = tuple(rng.choice([0, 1, 2, 3, 5]) for _ in range(ndim))
    if dt.kind == "b":
        a = npr.integers(0, 256, size=shape, dtype=np.uint8).view(bool)
    elif dt.kind in "iu":
        info = np.iinfo(dt)
        a = npr.integers(info.min, info.max, size=shape, dtype=dt.newbyteorder("="), endpoint=True).astype(dt)
    elif dt.kind == "c":
        a = (npr.standard_normal(shape) + 1j).astype(dt)
    else:
        a = npr.standard_normal(shape).astype(dt)
        if a.size and rng.random() < 0.3:
            a.flat[0] = rng.choice([np.nan, np.inf, -np.inf, -0.0])
    view = rng.randint(0, 6)
    if view == 0 and a.ndim:
        a = a[tuple(slice(None, None, rng.choice([-2, -1, 1, 2])) for _ in range(a.ndim))]
    elif view == 1 and a.ndim >= 2:
        a = a.T
    elif view == 2:
        a = np.broadcast_to(a, (rng.randint(0, 4),) + a.shape)
    elif view == 3 and a.size:
        raw = np.frombuffer(b"\0" + a.tobytes(), dtype=a.dtype, offset=1, count=a.size)
        a = raw.reshape(a.shape)
    elif view == 4 and rng.random() < 0.05:
        a = np.broadcast_to(np.zeros((), a.dtype), (1 << rng.randint(20, 44),))
    return a

def value(depth=0):
    kind = rng.randint(0, 12)
    if kind == 0:
        return None
    if kind == 1:
        return rng.choice([0, -1, 7, 2**62, -(2**63), 2**63, 2**100])
    if kind == 2:
        return rng.choice([0.5, math.nan, math.inf, -0.0, 1e308])
    if kind == 3:
        return rng.random() < 0.5
    if kind == 4:
        text = "".join(chr(rng.randint(0, 0x10FFFF)) for _ in range(rng.randint(0, 5)))
        return text.encode("utf-8", "replace").decode("utf-8", "replace")
    if kind == 5:
        return rx.Shape([rng.randint(0, 5) for _ in range(rng.randint(0, 3))])
    if kind == 6:
        return rng.choice(["float32", "int64", "bool", rx.DataType("float16")])
    if kind == 7 and depth < 4:
        items = [value(depth + 1) for _ in range(rng.randint(0, 4))]
        if items and rng.random() < 0.3:
            items.append(items[0])  # shared
        return tuple(items) if rng.random() < 0.5 else items
    if kind == 8:
        deep = []
        for _ in range(rng.choice([10, 999, 1001, 5000])):
            deep = [deep]
        return deep
    if kind == 9:
        cyc = [1]
        cyc.append(cyc)
        return cyc
    if kind == 10:
        return rx.cpu()
    return array()

def attempt(label, f):
    print(label, flush=True)
    try:
        f()
    except Exception as e:  # any ordinary exception is a fine outcome
        assert "panicked" not in str(e), f"{label}: {e}"

BUILTINS = sorted(n for n in rx.list_global_func_names() if n.startswith(("vm.builtin.", "vm.op.")))
# Never print to the test log or sleep.
BUILTINS = [n for n in BUILTINS if n not in ("vm.builtin.print",)]
def program(name):
    ib = rx.ExecBuilder()
    for n in range(4):
        with ib.function(f"f{n}", num_inputs=n):
            ib.emit_call(name, args=[ib.r(i) for i in range(n)], dst=ib.r(n))
            ib.emit_ret(ib.r(n))
    return rx.VirtualMachine(ib.get())
VMS = {name: program(name) for name in BUILTINS}

for step in range(STEPS):
    v = value()
    attempt(f"{step} rx.tensor", lambda: rx.tensor(v))
    def constant():
        ib = rx.ExecBuilder()
        c = ib.convert_constant(v)
        with ib.function("g", num_inputs=0):
            ib.emit_call("vm.builtin.make_tuple", args=[c], dst=ib.r(0))
            ib.emit_ret(ib.r(0))
        exe = ib.get()
        rx.VirtualMachine(exe)["g"]()
        rx.load_executable(exe.save_to_bytes())
        exe.as_text()
    attempt(f"{step} convert_constant", constant)
    attempt(f"{step} pickle", lambda: pickle.loads(pickle.dumps(rx.tensor(v))).numpy())
    attempt(f"{step} from_dlpack", lambda: rx.from_dlpack(v).numpy())
    attempt(f"{step} to_dlpack", lambda: np.from_dlpack(rx.tensor(v)))
    attempt(f"{step} dlpack copy", lambda: rx.tensor(v).__dlpack__(copy=True))
    attempt(f"{step} vm argument", lambda: VMS["vm.builtin.make_tuple"]["f1"](v))
    for name in rng.sample(BUILTINS, 6):
        n = rng.randint(0, 3)
        args = [v] + [value() for _ in range(n - 1)] if n else []
        attempt(f"{step} {name}/{n}", lambda: VMS[name][f"f{n}"](*args))
print("ok")
"""


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_random_values_through_every_entry_point_never_kill_the_process(seed):
    code = PROGRAM.replace("SEED_", str(seed)).replace("STEPS_", "4000")
    outcome = run_attack(code, timeout=120)
    outcome.assert_ok()
    assert outcome.stdout.split("ATTACK-END")[0].rstrip().endswith("\nok"), outcome.describe()
