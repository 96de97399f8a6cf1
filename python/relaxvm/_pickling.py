"""Pickled executables carry the Python functions they call.

An executable that calls a function registered with ``register_func`` needs that function in
the process that runs it. When the function can be imported by its module and qualified name
(a module-level function, as multiprocessing, Ray and Dask workers can import), the pickle
records that path and loading registers the function again, unless the name is already
registered there. Closures, lambdas and methods of instances cannot be imported: register them
in the worker (for example in a ``multiprocessing.Pool`` initializer); see docs/deploy.md.
"""

from __future__ import annotations

import importlib
from typing import Any

from . import _relaxvm


def _import_path(f: Any) -> tuple[str, str] | None:
    """``(module, qualname)`` when importing that path gives back ``f`` itself, else None."""
    module, qualname = getattr(f, "__module__", None), getattr(f, "__qualname__", None)
    if not isinstance(module, str) or not isinstance(qualname, str) or "<" in qualname:
        return None
    try:
        obj: Any = importlib.import_module(module)
        for part in qualname.split("."):
            obj = getattr(obj, part)
    except Exception:
        return None
    return (module, qualname) if obj is f else None


def function_refs(names: list[str]) -> list[tuple[str, str, str]]:
    """``(name, module, qualname)`` of each of ``names`` registered as an importable Python
    function in this process."""
    refs = []
    for name in names:
        f = _relaxvm._registered_python_func(name)
        path = _import_path(f) if f is not None else None
        if path is not None:
            refs.append((name, *path))
    return refs


def load(data: bytes, refs: list[tuple[str, str, str]]) -> _relaxvm.Executable:
    """Unpickles an executable: registers each function of ``refs`` whose name is not yet
    registered here by importing it (one that fails to import stays unregistered: the VM then
    names it as missing), then loads ``data``, opening the native libraries it references
    (``native_libraries=True``): unpickling is trust, as Python's pickle documents (a pickle
    can run any code anyway), so a pickled model with TVM kernels loads whole in a worker."""
    for name, module, qualname in refs:
        if _relaxvm.get_global_func(name, allow_missing=True) is not None:
            continue
        try:
            obj: Any = importlib.import_module(module)
            for part in qualname.split("."):
                obj = getattr(obj, part)
        except Exception:
            continue
        # Importing the module may have registered it already (a register_func decorator).
        if _relaxvm.get_global_func(name, allow_missing=True) is None:
            _relaxvm.register_func(name, obj)
    return _relaxvm.load_executable(data, native_libraries=True)
