"""The on-disk form of a compiled-model corpus.

Shared by the scripts that build a corpus with Apache TVM (in ``.venv-tvm``) and the tests that
run it on relaxvm (in ``.venv``, where TVM is absent), so it needs numpy only.

A suite is a folder holding ``manifest.json``::

    {"suite": "hand", "tvm_version": "0.27.0.post1",
     "models": [{"name": "mlp",
                 "library": "mlp/model.so",          # export_library output, relative path
                 "vmexec": "mlp/model.vmexec",       # ex.mod.write_to_file output (optional)
                 "packed_functions": ["vm.builtin.match_shape", "matmul", ...],
                 "cases": [{"function": "main", "file": "mlp/case0.npz",
                            "args": <structure>, "result": <structure>}]}]}

A case's arguments and TVM's result are stored as *structures* whose tensors live in the
case's ``.npz`` (keys ``t0``, ``t1``, ... in order of appearance):

- ``"tensor"``: the next array of the npz;
- ``{"tuple": [s, ...]}``: a tuple (TVM's Array) of structures;
- ``{"shape": [int, ...]}``: a ShapeTuple;
- ``{"int": v}``, ``{"float": v}``, ``{"bool": v}``, ``{"str": v}``: scalars;
- ``"null"``: None.

A case that TVM itself refuses has ``"error": "<substring of TVM's message>"`` instead of a
``"result"``.
"""

from __future__ import annotations

import json
import math
import os
from typing import Any

import numpy as np

MANIFEST = "manifest.json"


class ShapeValue(tuple):
    """A shape (TVM's ShapeTuple) among the values of a case, stored as ``{"shape": [...]}``."""


def flatten(value: Any, tensors: list[np.ndarray]) -> Any:
    """The structure of a Python value made of numpy arrays, tuples/lists and scalars;
    appends its arrays to ``tensors``."""
    if value is None:
        return "null"
    if isinstance(value, np.ndarray):
        tensors.append(value)
        return "tensor"
    if isinstance(value, (bool, np.bool_)):
        return {"bool": bool(value)}
    if isinstance(value, (int, np.integer)):
        return {"int": int(value)}
    if isinstance(value, (float, np.floating)):
        v = float(value)
        return {"float": v if math.isfinite(v) else repr(v)}
    if isinstance(value, str):
        return {"str": value}
    if isinstance(value, ShapeValue):
        return {"shape": [int(d) for d in value]}
    if isinstance(value, (tuple, list)):
        return {"tuple": [flatten(v, tensors) for v in value]}
    raise TypeError(f"cannot store a value of type {type(value).__name__} in a corpus case")


def unflatten(structure: Any, tensors: list[np.ndarray]) -> Any:
    """The value a structure describes; consumes arrays from the front of ``tensors``."""
    if structure == "null":
        return None
    if structure == "tensor":
        return tensors.pop(0)
    ((kind, v),) = structure.items()
    if kind == "tuple":
        return tuple(unflatten(s, tensors) for s in v)
    if kind == "shape":
        return ShapeValue(int(d) for d in v)
    if kind == "float":
        return float(v)
    return {"int": int, "bool": bool, "str": str}[kind](v)


def save_case(
    suite_dir: str, file: str, function: str, args: list[Any], result: Any = None, error: str | None = None
) -> dict:
    """Writes a case's arrays to ``suite_dir/file`` (an .npz) and returns its manifest entry."""
    tensors: list[np.ndarray] = []
    entry: dict[str, Any] = {"function": function, "file": file, "args": flatten(list(args), tensors)}
    if error is None:
        entry["result"] = flatten(result, tensors)
    else:
        entry["error"] = error
    path = os.path.join(suite_dir, file)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    np.savez(path, **{f"t{i}": t for i, t in enumerate(tensors)})
    return entry


def load_case(suite_dir: str, entry: dict) -> tuple[list[Any], Any]:
    """The arguments (a list) and TVM's result (``None`` for an error case) of a case."""
    with np.load(os.path.join(suite_dir, entry["file"])) as z:
        tensors = [z[f"t{i}"] for i in range(len(z.files))]
    args = list(unflatten(entry["args"], tensors))
    result = unflatten(entry["result"], tensors) if "result" in entry else None
    return args, result


def write_manifest(suite_dir: str, manifest: dict) -> None:
    with open(os.path.join(suite_dir, MANIFEST), "w") as f:
        json.dump(manifest, f, indent=1, sort_keys=True)


def load_manifest(suite_dir: str) -> dict:
    with open(os.path.join(suite_dir, MANIFEST)) as f:
        return json.load(f)


def counter_floats(seed: int, shape: tuple[int, ...], dtype: str) -> np.ndarray:
    """Deterministic inputs in [-1, 1) that need no stored array: a multiplicative hash of the
    element index and ``seed`` (uint64 arithmetic, the same on every numpy), so a recording
    stores the seed and both sides make the same bits."""
    n = int(np.prod(shape, dtype=np.int64))
    with np.errstate(over="ignore"):
        x = np.arange(n, dtype=np.uint64) + np.uint64(seed) * np.uint64(0x9E3779B97F4A7C15)
        x ^= x >> np.uint64(31)
        x *= np.uint64(0xBF58476D1CE4E5B9)
        x ^= x >> np.uint64(29)
    return ((x >> np.uint64(40)).astype(np.float64) / float(1 << 23) - 1.0).astype(dtype).reshape(shape)


def digest(a: np.ndarray) -> str:
    """A bit-exact fingerprint of an array: its dtype, shape and the SHA-256 of its bytes."""
    import hashlib

    a = np.ascontiguousarray(a)
    return f"{a.dtype}{list(a.shape)}:{hashlib.sha256(a.tobytes()).hexdigest()[:32]}"
