"""relaxvm: a register-based virtual machine whose one real instruction calls a packed function.

Scripted from Python the way Apache TVM's Relax VM is::

    import numpy as np
    import relaxvm as rx

    ib = rx.ExecBuilder()
    with ib.function("main", num_inputs=2):
        ib.emit_call("vm.op.add", args=[ib.r(0), ib.r(1)], dst=ib.r(2))
        ib.emit_ret(ib.r(2))
    ex = ib.get()
    vm = rx.VirtualMachine(ex, rx.cpu())
    vm["main"](np.ones(3), np.ones(3)).numpy()   # array([2., 2., 2.])
"""

from . import types as types
from ._relaxvm import (
    Arg,
    BenchmarkResult,
    CheckError,
    Closure,
    DataType,
    Device,
    ExecBuilder,
    Executable,
    FunctionScope,
    Location,
    Object,
    ProfileReport,
    ProfileRow,
    Shape,
    Tensor,
    TimeEvaluator,
    Trace,
    TraceDifference,
    TraceStep,
    VirtualMachine,
    VMError,
    VMFunction,
    VMIndexError,
    VMKeyError,
    VMMemoryError,
    VMTypeError,
    VMValueError,
    __version__,
    clear_array_cache,
    cpu,
    device,
    empty,
    from_dlpack,
    get_global_func,
    link,
    list_global_func_names,
    load_executable,
    load_module,
    register_func,
    remove_global_func,
    tensor,
    tensor_from_bytes,
)
from .instrument import VMInstrumentReturnKind

__all__ = [
    "Arg",
    "BenchmarkResult",
    "CheckError",
    "Closure",
    "DataType",
    "Device",
    "ExecBuilder",
    "Executable",
    "FunctionScope",
    "Location",
    "Object",
    "ProfileReport",
    "ProfileRow",
    "Shape",
    "Tensor",
    "TimeEvaluator",
    "Trace",
    "TraceDifference",
    "TraceStep",
    "VMError",
    "VMFunction",
    "VMIndexError",
    "VMInstrumentReturnKind",
    "VMKeyError",
    "VMMemoryError",
    "VMTypeError",
    "VMValueError",
    "VirtualMachine",
    "__version__",
    "clear_array_cache",
    "cpu",
    "device",
    "empty",
    "from_dlpack",
    "get_global_func",
    "link",
    "list_global_func_names",
    "load_executable",
    "load_module",
    "register_func",
    "remove_global_func",
    "tensor",
    "tensor_from_bytes",
]
