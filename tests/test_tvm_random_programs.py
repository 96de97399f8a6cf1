"""3,000 random programs, run by Apache TVM's Relax VM when the corpus was built
(tests/tvm_corpus/build_random.py) and here by relaxvm, built through the same ExecBuilder calls
and called the same way (directly, or through set_input / invoke_stateful / get_outputs).

Where both return, the results must be equal; where both raise, relaxvm's exception must be an
instance of the built-in class TVM's is. The generator zeroes each shape heap it allocates
(TVM's starts uninitialized), so values are compared wherever TVM defines them: only a result
computed from a tensor in uninitialized storage is compared by kinds, dtypes and shapes alone
(``undefined_registers``). Every other outcome must be one of the differences relaxvm makes on
purpose, each listed in DIFFERENCES with its reason and in docs/tvm-compat.md: almost all are
inputs on which TVM reads uninitialized or out-of-bounds memory, or crashes, and relaxvm raises
instead. A program called through set_input with a shape input is compared with TVM's direct
call of it with set_input's conversions but the shape (TVM's set_input turns a shape into a
tuple of tensors). The programs run in a
child process, so a crash of relaxvm on one fails the test naming the program instead of
taking the test run down.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from typing import Any, Callable

import numpy as np
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "tvm_corpus"))
import build_random as br  # noqa: E402  (its generator and structures need only numpy)
import located  # noqa: E402

SUITE = located.suite_dir("random")
pytestmark = pytest.mark.skipif(SUITE is None, reason=located.SKIP_REASON)


def _calls(p: dict, name: str) -> bool:
    return any(c["func"] == name for c in p["body"])


def _skeleton(s: Any) -> Any:
    """A result structure with the values left out: kinds, tensor dtypes and shapes."""
    if not isinstance(s, dict):
        return s
    ((kind, v),) = s.items()
    if kind == "tensor":
        return ("tensor", v["dtype"], tuple(v["shape"]))
    if kind == "tuple":
        return ("tuple", tuple(_skeleton(x) for x in v))
    if kind == "shape":
        return ("shape", len(v))
    return kind


def undefined_registers(p: dict) -> set[int]:
    """The registers whose values TVM leaves undefined: a tensor ``alloc_tensor`` made (its
    storage is uninitialized memory), a shape heap no ``init`` call zeroed, and whatever a call
    computes from one of those (a call that reads an undefined value also taints the heaps it
    may store into). Conservative: a result that only depends on such a value's shape is also
    counted undefined."""
    undefined: set[int] = set()
    zeroed = {c["args"][1]["reg"] for c in p["body"] if c.get("init")}
    for c in p["body"]:
        regs = [a["reg"] for a in c["args"] if "reg" in a]
        if c["func"] == "vm.builtin.alloc_tensor":
            undefined.add(c["dst"])
        elif c["func"] == "vm.builtin.alloc_shape_heap":
            n = c["args"][1].get("imm", 0) if len(c["args"]) == 2 else None
            if c["dst"] not in zeroed and n != 0:
                undefined.add(c["dst"])
        elif undefined & set(regs):
            undefined.add(c["dst"])
            heaps = {b["dst"] for b in p["body"] if b["func"] == "vm.builtin.alloc_shape_heap"}
            undefined |= heaps & set(regs)
    return undefined


def _returns_its_input(p: dict, o: dict) -> bool:
    """The program returns one of its inputs (a register no call writes) and relaxvm's result
    is that input: the program's own semantics confirm it."""
    written = {c["dst"] for c in p["body"]}
    ret = p["ret"]
    return ret < len(p["inputs"]) and ret not in written and o.get("result") == p["inputs"][ret]


def _same_but_undefined_values(p: dict, t: dict, o: dict) -> bool:
    """Both returned a value TVM leaves undefined, alike in kinds, dtypes and shapes."""
    return (
        "result" in t
        and "result" in o
        and p["ret"] in undefined_registers(p)
        and _skeleton(t["result"]) == _skeleton(o["result"])
    )


#: Outcomes that differ on purpose: (name, reason, test of (program, TVM's outcome, ours)).
DIFFERENCES: list[tuple[str, str, Callable[[dict, dict, dict], bool]]] = [
    (
        "uninitialized storage",
        "TVM's alloc_storage returns uninitialized memory, so a tensor nothing wrote holds whatever "
        "was there (relaxvm's storage starts zeroed); only the result's kinds, dtypes and shapes "
        "are compared, and only for a result computed from such a tensor",
        lambda p, t, o: _same_but_undefined_values(p, t, o),
    ),
    (
        "a shape heap that is not one",
        "TVM's make_shape and make_prim_value read memory at whatever their heap argument holds "
        "(an int, the VM state); relaxvm raises TypeError",
        lambda p, t, o: "(shape heap) of vm.builtin.make_" in o.get("error", ["", ""])[1],
    ),
    (
        "alloc_storage's size and scope",
        "relaxvm's alloc_storage also takes its size as an int and no scope (None), so a call TVM "
        "refuses for their types fails in relaxvm on the values that follow, with another class",
        lambda p, t, o: (
            "vm.builtin.alloc_storage(0: void*, 1: ffi.Shape" in t.get("error", ["", ""])[1]
            and ("got `int`" in t["error"][1] or "Expected `str` but got `void*`" in t["error"][1])
        ),
    ),
    (
        "to_device with a negative device id",
        "relaxvm checks device ids; TVM's to_device copies to a CPU device of id -1",
        lambda p, t, o: "vm.builtin.to_device: expected a device id" in o.get("error", ["", ""])[1],
    ),
    (
        "shape heap index out of range",
        "TVM reads and writes outside the shape heap for an out-of-range slot; relaxvm raises IndexError",
        lambda p, t, o: "out of range for shape heap" in o.get("error", ["", ""])[1],
    ),
    (
        "read_if_cond of an empty tensor",
        "TVM reads the first element of a tensor with none (memory past its end); relaxvm raises",
        lambda p, t, o: "read_if_cond: expected a one-element tensor" in o.get("error", ["", ""])[1],
    ),
    (
        "reshape to another element count",
        "TVM's vm.builtin.reshape does not compare element counts and returns a view of other memory; relaxvm raises",
        lambda p, t, o: "cannot reshape a tensor of shape" in o.get("error", ["", ""])[1],
    ),
    (
        "tensor outside or misaligned in its storage",
        "TVM's alloc_tensor does not check that the tensor lies inside its storage, aligned; relaxvm raises",
        lambda p, t, o: (
            "vm.builtin.alloc_tensor" in o.get("error", ["", ""])[1]
            and any(w in o["error"][1] for w in ("multiple of", "needs", "storage has", "offset"))
        ),
    ),
    (
        "TVM crashes",
        "TVM's process dies (a type confusion inside a builtin); relaxvm raises an error of a built-in "
        "class, or returns what the program's own semantics give (an input returned unchanged)",
        lambda p, t, o: "crash" in t and (("error" in o and o["error"][0] != "Exception") or _returns_its_input(p, o)),
    ),
    (
        "too few arguments",
        "TVM's builtins read past the end of their arguments when given too few; relaxvm raises "
        "TypeError naming how many it expects",
        lambda p, t, o: (
            "arguments, got" in o.get("error", ["", ""])[1] or "argument, got" in o.get("error", ["", ""])[1]
        ),
    ),
    (
        "host device index -1",
        "relaxvm's alloc_storage takes device index -1 as the host, as Relax means it; TVM's "
        "compares it unsigned against the device count and refuses it",
        lambda p, t, o: "device_index < vm->devices.size() (-1" in t.get("error", ["", ""])[1],
    ),
    (
        "tensor_to_shape of unsigned integers",
        "relaxvm reads a shape from any integer tensor; TVM only from signed ones",
        lambda p, t, o: "arr->dtype.code == kDLInt" in t.get("error", ["", ""])[1] and "result" in o,
    ),
]


# -- the child process: run every program on relaxvm ------------------------------------------


def _value(v: Any) -> Any:
    import relaxvm as rx

    if isinstance(v, br.Shape):
        return rx.Shape(list(v))
    if isinstance(v, br.DType):
        return rx.DataType(str(v))
    if isinstance(v, np.ndarray):
        return rx.tensor(v)
    if isinstance(v, tuple):
        return tuple(_value(x) for x in v)
    return v


def _plain(v: Any) -> Any:
    import relaxvm as rx

    if isinstance(v, rx.Tensor):
        return np.frombuffer(v.tobytes(), dtype=v.dtype).reshape(v.shape).copy()
    if isinstance(v, rx.Shape):
        return br.Shape(int(d) for d in v)
    if isinstance(v, rx.DataType):
        return br.DType(str(v))
    if isinstance(v, (tuple, list)):
        return tuple(_plain(x) for x in v)
    return v


def run_on_relaxvm(program: dict) -> dict:
    """relaxvm's outcome, in the form build_random records TVM's, plus the exception's classes."""
    import warnings

    import relaxvm as rx

    ib = rx.ExecBuilder()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "input %1 is never used": random programs are sloppy
            br.emit(ib, program, _value)
            ex = ib.get()
        inputs = [_value(br.from_structure(s)) for s in program["inputs"]]
        out = br.invoke(rx.VirtualMachine(ex, rx.cpu()), program, inputs)
        return {"result": br.to_structure(_plain(out))}
    except Exception as e:  # noqa: BLE001 - the exception is the outcome
        mro = [c.__name__ for c in type(e).__mro__]
        return {"error": [br.error_class(e), str(e)[:300]], "mro": mro}


def verdict(p: dict, t: dict, o: dict) -> str | None:
    """ "same result", "same error class", a DIFFERENCES name, or None (unexplained)."""
    if "direct" in t:
        # set_input of a shape: TVM's set_input turns the shape into a tuple of int32 tensors,
        # relaxvm's passes the shape, so the reference is TVM's direct call with the inputs
        # converted as its set_input converts them, but the shapes passed as shapes.
        return verdict({**p, "via": "call"}, t["direct"], o)
    if "result" in t and "result" in o and t["result"] == o["result"]:
        return "same result"
    # "Exception" (no built-in class known) matches nothing: such errors must be explained.
    if "error" in t and "error" in o and t["error"][0] != "Exception" and t["error"][0] in o["mro"]:
        return "same error class"
    return next((n for n, _, test in DIFFERENCES if test(p, t, o)), None)


def compare(programs: list[dict], progress_path: str) -> dict:
    """Each program's verdict: "same result", "same error class", a DIFFERENCES name, or
    "unexplained"; set_input programs given a shape are counted apart too ("via direct call")."""
    verdicts: Counter = Counter()
    unexplained = []
    with open(progress_path, "w") as progress:
        for i, p in enumerate(programs):
            progress.write(f"{i}\n")
            progress.flush()
            t, o = p["tvm"], run_on_relaxvm(p)
            name = verdict(p, t, o)
            verdicts[name or "unexplained"] += 1
            if "direct" in t:
                verdicts["set_input of a shape, against TVM's direct call"] += 1
            if name is None:
                unexplained.append({"index": i, "tvm": t, "relaxvm": o})
    return {"verdicts": dict(verdicts), "unexplained": unexplained[:20]}


# -- the test -----------------------------------------------------------------------------------


def test_relaxvm_agrees_with_tvm_on_random_programs(tmp_path):
    programs_path = os.path.join(SUITE, "programs.json")
    progress = tmp_path / "progress.txt"
    done = subprocess.run(
        [sys.executable, __file__, programs_path, str(progress), str(tmp_path / "summary.json")],
        capture_output=True,
        text=True,
        timeout=900,
    )
    if done.returncode != 0:
        last = progress.read_text().split()[-1] if progress.exists() else "?"
        pytest.fail(f"relaxvm's process died on program {last} (status {done.returncode}): {done.stderr[-2000:]}")
    summary = json.loads((tmp_path / "summary.json").read_text())
    verdicts = summary["verdicts"]
    print("verdicts:", json.dumps(verdicts, sort_keys=True))
    direct = verdicts.pop("set_input of a shape, against TVM's direct call", 0)
    assert sum(verdicts.values()) == br.N_PROGRAMS
    assert direct > 0, "no set_input program was given a shape"
    assert not summary["unexplained"], json.dumps(summary["unexplained"], indent=1)[:6000]
    # The programs are not all errors: a few hundred compute the same results on both VMs.
    assert verdicts.get("same result", 0) >= 300, verdicts


def test_every_documented_difference_is_in_the_docs():
    with open(os.path.join(os.path.dirname(__file__), "..", "docs", "tvm-compat.md")) as f:
        docs = f.read()
    for name, _, _ in DIFFERENCES:
        assert name in docs, f"docs/tvm-compat.md does not describe {name!r}"


if __name__ == "__main__":
    with open(sys.argv[1]) as f:
        suite = json.load(f)
    result = compare(suite["programs"], sys.argv[2])
    with open(sys.argv[3], "w") as f:
        json.dump(result, f)
