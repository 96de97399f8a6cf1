"""Random programs run on Apache TVM's Relax VM: the reference for the differential test that runs
the same programs on relaxvm (tests/test_tvm_random_programs.py).

Each program is one function ``main`` of 1 to 3 inputs and 1 to 3 calls of runtime builtins both
VMs provide, emitted through ``ExecBuilder`` (the same API on both sides), then returning a
register. Arguments mostly fit the builtin (registers holding the kind of value it takes, shape
codes, dtypes, contexts), but any may be swapped for a value of another kind, an immediate, a
constant or the VM state, and a call may lose or gain an argument: the programs probe both what
each VM computes and what it accepts. A third of the programs pass their inputs through
``set_input`` / ``invoke_stateful`` / ``get_outputs`` instead of a direct call.

Usage: build_random.py OUT_DIR writes OUT_DIR/random/programs.json: for each program its
description (inputs, constants and results as *structures*, below) and TVM's outcome — a result,
an error (its Python class and message), or a crash of TVM's process (each program is run in a
worker process that is replaced when it dies).

Structures (JSON): ``null``; ``{"int": v}``, ``{"float": v}`` (``"inf"``/``"nan"`` as strings),
``{"bool": v}``, ``{"str": v}``; ``{"shape": [...]}``; ``{"dtype": "float32"}``;
``{"tensor": {"dtype", "shape", "hex"}}`` (the bytes, C order); ``{"tuple": [...]}``; and, for
results only, ``{"object": "object"}`` for values with no structure (storage, functions).

This module's generator and structure helpers need only numpy (the test imports them in the
package's venv); TVM is imported by the functions that run programs.
"""

from __future__ import annotations

import json
import math
import os
import random
import subprocess
import sys
from typing import Any

import numpy as np

N_PROGRAMS = 3000
SEED = 17
#: Per program, the chance that an argument is replaced by one of any kind, and of an arity change.
SWAP, ARITY = 0.06, 0.03
DTYPES = ["float32", "float64", "int32", "int64", "uint8", "bool", "float16"]
#: What a builtin's argument may be: a register of some kind, an immediate, a constant, the VM state.
#: Each builtin's pattern names, in order, the kind each argument should have.
BUILTINS: dict[str, list[str]] = {
    "vm.builtin.copy": ["any"],
    "vm.builtin.shape_of": ["tensor"],
    "vm.builtin.reshape": ["tensor", "shape_const"],
    "vm.builtin.make_tuple": ["any", "any"],
    "vm.builtin.tuple_getitem": ["tuple", "index"],
    "vm.builtin.null_value": [],
    "vm.builtin.read_if_cond": ["any"],
    "vm.builtin.ensure_zero_offset": ["tensor"],
    "vm.builtin.tensor_to_shape": ["int_tensor"],
    "vm.builtin.alloc_shape_heap": ["vm_state", "heap_size"],
    "vm.builtin.make_shape": ["heap", "shape_codes_make"],
    "vm.builtin.match_shape": ["tensor_or_shape", "heap", "shape_codes_match", "ctx"],
    "vm.builtin.check_tensor_info": ["tensor", "ndim", "dtype_const", "ctx"],
    "vm.builtin.check_shape_info": ["shape", "ndim", "ctx"],
    "vm.builtin.check_tuple_info": ["tuple", "index", "ctx"],
    "vm.builtin.check_prim_value_info": ["scalar", "dtype_const", "ctx"],
    "vm.builtin.check_func_info": ["any", "ctx"],
    "vm.builtin.make_prim_value": ["heap", "code_make", "index"],
    "vm.builtin.match_prim_value": ["scalar", "heap", "code_match", "index", "ctx"],
    "vm.builtin.alloc_storage": ["vm_state", "shape_const", "device_index", "dtype_const", "scope"],
    "vm.builtin.alloc_tensor": ["storage", "index", "shape_const", "dtype_const"],
    "vm.builtin.to_device": ["tensor", "dev_type", "dev_id"],
}


# -- structures ------------------------------------------------------------------------------


class Shape(tuple):
    """A shape value (TVM's ``ffi.Shape``, relaxvm's ``rx.Shape``) in a description."""


class DType(str):
    """A data type value (TVM's ``dtype``, relaxvm's ``rx.DataType``) in a description."""


def to_structure(v: Any) -> Any:
    """The structure of a Python value made of numpy arrays, Shape, DType, tuples and scalars."""
    if v is None:
        return "null"
    if isinstance(v, np.ndarray):
        a = np.ascontiguousarray(v)
        return {"tensor": {"dtype": str(a.dtype), "shape": list(a.shape), "hex": a.tobytes().hex()}}
    if isinstance(v, Shape):
        return {"shape": [int(d) for d in v]}
    if isinstance(v, DType):
        return {"dtype": str(v)}
    if isinstance(v, (bool, np.bool_)):
        return {"bool": bool(v)}
    if isinstance(v, (int, np.integer)):
        return {"int": int(v)}
    if isinstance(v, (float, np.floating)):
        f = float(v)
        return {"float": f if math.isfinite(f) else repr(f)}
    if isinstance(v, str):
        return {"str": v}
    if isinstance(v, (tuple, list)):
        return {"tuple": [to_structure(x) for x in v]}
    return {"object": "object"}  # storage, functions...: the kind's name differs between VMs


def from_structure(s: Any) -> Any:
    """The value of a structure (``{"object": ...}`` stays a dict: it has no value)."""
    if s == "null":
        return None
    ((kind, v),) = s.items()
    if kind == "tensor":
        a = np.frombuffer(bytes.fromhex(v["hex"]), dtype=v["dtype"]).reshape(v["shape"])
        return a.copy()
    if kind == "shape":
        return Shape(v)
    if kind == "dtype":
        return DType(v)
    if kind == "tuple":
        return tuple(from_structure(x) for x in v)
    if kind == "float":
        return float(v)
    if kind == "object":
        return s
    return {"int": int, "bool": bool, "str": str}[kind](v)


# -- the generator ---------------------------------------------------------------------------


def _tensor(rng: random.Random, dtype: str | None = None, ndim: int | None = None) -> np.ndarray:
    dtype = dtype or rng.choice(DTYPES)
    ndim = rng.randint(0, 3) if ndim is None else ndim
    shape = [rng.randint(0, 4) for _ in range(ndim)]
    n = int(np.prod(shape)) if shape else 1
    vals = [rng.randint(-5, 5) for _ in range(n)]
    return np.array(vals).astype(dtype).reshape(shape)


def _value(rng: random.Random) -> Any:
    """An input or constant of any kind."""
    k = rng.randrange(9)
    if k <= 2:
        return _tensor(rng)
    if k == 3:
        return rng.randint(-3, 6)
    if k == 4:
        return rng.choice([0.5, -2.0, 3.0, float("inf")])
    if k == 5:
        return Shape(rng.randint(0, 4) for _ in range(rng.randint(0, 3)))
    if k == 6:
        return rng.choice(["", "ctx", "float32"])
    if k == 7:
        return DType(rng.choice(DTYPES))
    return tuple(_tensor(rng) for _ in range(rng.randint(0, 2)))


def _const(v: Any) -> dict:
    return {"const": to_structure(v)}


def _args_for(rng: random.Random, kind: str, regs: dict[int, str]) -> list[dict]:
    """The argument(s) a pattern kind stands for; ``regs`` maps registers to the kind of value
    they are known to hold ("tensor", "shape", "tuple", "heap", "storage", "other")."""

    def reg_of(*kinds: str) -> dict:
        good = [r for r, k in regs.items() if k in kinds]
        return {"reg": rng.choice(good or list(regs))}

    if kind == "any":
        return [{"reg": rng.choice(list(regs))}]
    if kind in ("tensor", "int_tensor"):
        return [reg_of("tensor")]
    if kind == "tensor_or_shape":
        return [reg_of("tensor", "shape")]
    if kind in ("tuple", "heap", "storage", "shape"):
        return [reg_of(kind)]
    if kind == "scalar":
        return [reg_of("other")]
    if kind == "vm_state":
        return [{"vm_state": True}]
    if kind == "heap_size":
        return [{"imm": rng.randint(0, 4)}]
    if kind == "index":
        return [{"imm": rng.randint(-1, 3)}]
    if kind == "ndim":
        return [{"imm": rng.randint(-1, 3)}]
    if kind == "device_index":
        return [{"imm": rng.choice([0, 0, 0, 1, -1])}]
    if kind in ("dev_type", "dev_id"):
        return [{"imm": rng.choice([1, 1, 1, 0, 2]) if kind == "dev_type" else rng.choice([0, 0, 1])}]
    if kind == "shape_const":
        return [_const(Shape(rng.randint(0, 6) for _ in range(rng.randint(0, 3))))]
    if kind == "dtype_const":
        return [_const(DType(rng.choice(DTYPES)))]
    if kind == "ctx":
        return [_const(rng.choice(["", "myctx"]))]
    if kind == "scope":
        return [_const(rng.choice(["global", "global", "local"]))]
    if kind in ("shape_codes_make", "shape_codes_match"):
        n = rng.randint(0, 3)
        codes = [0, 1] if kind == "shape_codes_make" else [0, 1, 2, 3]
        out: list[dict] = [{"imm": n}]
        for _ in range(n):
            out += [{"imm": rng.choice(codes)}, {"imm": rng.randint(0, 3)}]
        return out
    if kind in ("code_make", "code_match"):
        return [{"imm": rng.choice([0, 1] if kind == "code_make" else [0, 1, 2, 3])}]
    raise ValueError(kind)


def _kind_of(v: Any) -> str:
    if isinstance(v, np.ndarray):
        return "tensor"
    if isinstance(v, Shape):
        return "shape"
    if isinstance(v, tuple):
        return "tuple"
    return "other"


def _random_arg(rng: random.Random, regs: dict[int, str]) -> dict:
    k = rng.randrange(4)
    if k == 0:
        return {"reg": rng.choice(list(regs))}
    if k == 1:
        return {"imm": rng.randint(-2, 5)}
    if k == 2:
        return _const(_value(rng))
    return {"vm_state": True}


def generate(index: int) -> dict:
    """Program ``index``: its inputs, instructions and how it is called."""
    rng = random.Random(SEED * 1_000_003 + index)
    inputs = [_value(rng) for _ in range(rng.randint(1, 3))]
    if rng.random() < 0.7:  # most programs work on a tensor
        inputs[0] = _tensor(rng)
    regs = {i: _kind_of(v) for i, v in enumerate(inputs)}
    body = []
    for _ in range(rng.randint(1, 3)):
        name = rng.choice(list(BUILTINS))
        # A builtin that takes a tuple, heap, storage or shape gets one made first when no
        # register holds one, so that most programs get past their first calls.
        for need in {"tuple", "heap", "storage", "shape"} & set(BUILTINS[name]):
            if need not in regs.values():
                _call(rng, PRODUCERS[need], regs, body, swap=False)
        _call(rng, name, regs, body, swap=True)
    ret = rng.choice([body[-1]["dst"], rng.choice(list(regs))])
    return {
        "inputs": [to_structure(v) for v in inputs],
        "body": body,
        "ret": ret,
        "via": "set_input" if index % 3 == 2 else "call",
    }


#: What makes a value of each kind that some builtin needs.
PRODUCERS = {
    "tuple": "vm.builtin.make_tuple",
    "heap": "vm.builtin.alloc_shape_heap",
    "storage": "vm.builtin.alloc_storage",
    "shape": "vm.builtin.shape_of",
}
#: The kind of value each builtin returns, for the registers that hold them.
RESULT_KIND = {
    "vm.builtin.shape_of": "shape",
    "vm.builtin.make_shape": "shape",
    "vm.builtin.tensor_to_shape": "shape",
    "vm.builtin.make_tuple": "tuple",
    "vm.builtin.alloc_shape_heap": "heap",
    "vm.builtin.alloc_storage": "storage",
    "vm.builtin.reshape": "tensor",
    "vm.builtin.alloc_tensor": "tensor",
    "vm.builtin.to_device": "tensor",
}


def _call(rng: random.Random, name: str, regs: dict[int, str], body: list, swap: bool) -> None:
    """Appends a call of ``name`` to ``body``, its result in a new register."""
    args: list[dict] = []
    for kind in BUILTINS[name]:
        args += _args_for(rng, kind, regs)
    if swap:
        args = [_random_arg(rng, regs) if rng.random() < SWAP else a for a in args]
        if rng.random() < ARITY:
            if args and rng.random() < 0.5:
                args.pop(rng.randrange(len(args)))
            else:
                args.insert(rng.randrange(len(args) + 1), _random_arg(rng, regs))
    dst = len(regs)
    regs[dst] = RESULT_KIND.get(name, "other")
    body.append({"func": name, "args": args, "dst": dst})
    if name == "vm.builtin.alloc_shape_heap":
        _zero_heap(args, dst, regs, body)


def _zero_heap(args: list[dict], heap: int, regs: dict[int, str], body: list) -> None:
    """After a well-formed ``alloc_shape_heap(vm_state, n)``, stores 0 in each of its ``n`` slots
    (a ``match_shape`` of a shape of zeros, every code "store"), so that the heap holds defined
    values on both VMs: TVM's heap starts uninitialized, relaxvm's zeroed, and a program that reads
    a slot before storing to it must still give TVM's result. The call is marked ``init``."""
    if len(args) != 2 or "vm_state" not in args[0] or "imm" not in args[1] or args[1]["imm"] <= 0:
        return
    n = args[1]["imm"]
    codes: list[dict] = []
    for slot in range(n):
        codes += [{"imm": 1}, {"imm": slot}]  # kStoreToHeap
    init = [_const(Shape([0] * n)), {"reg": heap}, {"imm": n}, *codes, _const("")]
    dst = len(regs)
    regs[dst] = "other"
    body.append({"func": "vm.builtin.match_shape", "args": init, "dst": dst, "init": True})


def emit(ib: Any, program: dict, constant: Any) -> None:
    """Emits ``program`` into ``ib`` (TVM's or relaxvm's ExecBuilder); ``constant(value)`` turns a
    described constant into what that builder's ``convert_constant`` takes."""
    with ib.function("main", num_inputs=len(program["inputs"])):
        for call in program["body"]:
            args = []
            for a in call["args"]:
                ((kind, v),) = a.items()
                if kind == "reg":
                    args.append(ib.r(v))
                elif kind == "imm":
                    args.append(ib.imm(v))
                elif kind == "vm_state":
                    args.append(ib.vm_state())
                else:
                    args.append(ib.convert_constant(constant(from_structure(v))))
            ib.emit_call(call["func"], args=args, dst=ib.r(call["dst"]))
        ib.emit_ret(ib.r(program["ret"]))


def invoke(vm: Any, program: dict, inputs: list) -> Any:
    """Calls ``main`` of ``vm`` (TVM's or relaxvm's: the same methods) the way ``program`` says:
    directly, or through ``set_input`` / ``invoke_stateful`` / ``get_outputs``."""
    if program["via"] == "set_input":
        vm.set_input("main", *inputs)
        vm.invoke_stateful("main")
        return vm.get_outputs("main")
    return vm["main"](*inputs)


def error_class(e: BaseException) -> str:
    """The built-in exception class an error is an instance of (the most specific one known)."""
    for cls in (IndexError, KeyError, TypeError, ValueError, MemoryError, AttributeError, RuntimeError):
        if isinstance(e, cls):
            return cls.__name__
    return "Exception"


# -- running on TVM ----------------------------------------------------------------------------


def _tvm_value(v: Any) -> Any:
    import tvm_ffi

    import tvm

    if isinstance(v, np.ndarray):
        return tvm.runtime.tensor(v)
    if isinstance(v, Shape):
        return tvm_ffi.Shape(list(v))
    if isinstance(v, DType):
        return tvm.runtime.DataType(str(v))
    if isinstance(v, tuple):
        return tvm.runtime.convert([_tvm_value(x) for x in v])
    return v


def _from_tvm(v: Any) -> Any:
    import tvm_ffi

    import tvm

    if isinstance(v, tvm.runtime.Tensor):
        return v.numpy()
    if isinstance(v, tvm_ffi.Shape):
        return Shape(int(d) for d in v)
    if isinstance(v, tvm_ffi.dtype):
        return DType(str(v))
    if isinstance(v, (tvm_ffi.Array, list, tuple)):
        return tuple(_from_tvm(x) for x in v)
    return v


def run_on_tvm(program: dict) -> dict:
    """TVM's outcome for one program: ``{"result": structure}`` or ``{"error": [class, message],
    "stage": "build" | "run"}``."""
    import tvm
    from tvm import relax

    ib = relax.ExecBuilder()
    try:
        emit(ib, program, _tvm_value)
        ex = ib.get()
    except Exception as e:  # noqa: BLE001 - any error is the outcome
        return {"error": [error_class(e), str(e)[:300]], "stage": "build"}
    inputs = [_tvm_value(from_structure(s)) for s in program["inputs"]]
    try:
        out = invoke(relax.VirtualMachine(ex, tvm.cpu()), program, inputs)
        outcome: dict[str, Any] = {"result": to_structure(_from_tvm(out))}
    except Exception as e:  # noqa: BLE001
        outcome = {"error": [error_class(e), str(e)[:300]], "stage": "run"}
    if program["via"] == "set_input" and any(isinstance(v, Shape) for v in map(from_structure, program["inputs"])):
        outcome["direct"] = _set_input_reference(program)
    return outcome


def _set_input_reference(program: dict) -> dict:
    """The reference for relaxvm's set_input of a program given a shape: TVM's set_input turns
    the shape into a tuple of int32 tensors (it takes it for a Python tuple), relaxvm's passes
    the shape. So: TVM's direct call of the program, its inputs converted as TVM's set_input
    converts them (numbers become tensors) but shapes passed as shapes."""
    import tvm
    from tvm import relax

    ib = relax.ExecBuilder()
    emit(ib, program, _tvm_value)
    vm = relax.VirtualMachine(ib.get(), tvm.cpu())
    args: list[Any] = []
    for s in program["inputs"]:
        v = from_structure(s)
        if isinstance(v, Shape):
            args.append(_tvm_value(v))
        else:
            vm._convert(_tvm_value(v), args)  # what set_input does with each input
    try:
        return {"result": to_structure(_from_tvm(vm["main"](*args)))}
    except Exception as e:  # noqa: BLE001
        return {"error": [error_class(e), str(e)[:300]], "stage": "run"}


def _worker(start: int, stop: int) -> None:
    """Runs programs ``start..stop`` and prints one JSON line per outcome (the parent notices a
    crash by the missing line)."""
    for i in range(start, stop):
        print(json.dumps({"index": i, **run_on_tvm(generate(i))}), flush=True)


def build(out_dir: str, n: int = N_PROGRAMS) -> None:
    suite = os.path.join(out_dir, "random")
    os.makedirs(suite, exist_ok=True)
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
    from progress import Progress

    outcomes: dict[int, dict] = {}
    progress = Progress(n, "random programs")
    next_index = 0
    while next_index < n:
        proc = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "--worker", str(next_index), str(n)],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,  # a crash's stack dump; the outcome records the signal
            text=True,
        )
        assert proc.stdout is not None
        for line in proc.stdout:
            rec = json.loads(line)
            outcomes[rec.pop("index")] = rec
            next_index += 1
            progress.step(str(next_index))
        proc.wait()
        if next_index < n and proc.returncode != 0:
            outcomes[next_index] = {"crash": proc.returncode}  # TVM's process died on it
            next_index += 1
    progress.clear()
    programs = [{**generate(i), "tvm": outcomes[i]} for i in range(n)]
    with open(os.path.join(suite, "programs.json"), "w") as f:
        json.dump({"suite": "random", "seed": SEED, "programs": programs}, f)
    kinds = {k: sum(1 for p in programs if k in p["tvm"]) for k in ("result", "error", "crash")}
    print(f"random: {n} programs {kinds}", file=sys.stderr)
    # The manifest marks the suite complete for the tests (corpus.MANIFEST).
    with open(os.path.join(suite, "manifest.json"), "w") as f:
        json.dump({"suite": "random", "programs": "programs.json", "count": n}, f)


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--worker":
        _worker(int(sys.argv[2]), int(sys.argv[3]))
    elif len(sys.argv) == 2:
        build(sys.argv[1])
    else:
        sys.exit("usage: build_random.py OUT_DIR")
