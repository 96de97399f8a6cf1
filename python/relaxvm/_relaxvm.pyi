"""Type stubs for the compiled module ``relaxvm._relaxvm`` (re-exported by ``relaxvm``)."""

from __future__ import annotations

import inspect
import os
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Literal, SupportsIndex, Union, final, overload

import numpy as np
import numpy.typing as npt

from .types import Signature as _TypesSignature

__version__: str
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
    "_cli_main",
    "_is_plain_name",
    "_register_panicking_func",
    "_keeps_gil_next",
    "_note_short_call",
    "_small_int_decode",
    "_small_int_self_check",
    "_tensor_from_buffer",
    "_registered_python_func",
    "_signature_text",
    "_type_text",
]

_DTypeLike = Union["DataType", str, np.dtype[Any], type]
_DeviceLike = Union["Device", str, None]
_ShapeLike = Union["Shape", Sequence[int]]
_TensorLike = Union["Tensor", npt.NDArray[Any]]
#: A signature: its text form, e.g. ``"(x: tensor<[n], f32>) -> f32"``, or ``rx.types.Signature``.
_SignatureLike = str | _TypesSignature
#: The IREE reflection record of a signature: ``{"a": [arg, ...], "r": [result]}``.
_Reflection = dict[str, list[Any]]
#: What the VM accepts as an argument (and what it returns, with tensors as ``Tensor``).
_VMValue = Any

# --------------------------------------------------------------------------------------------
# Exceptions
# --------------------------------------------------------------------------------------------

class VMError(RuntimeError):
    """A failure while running bytecode.

    The message names the function, the instruction (its index and text) and the source
    location when the instruction has one. The same detail is available as attributes when the
    failure happened at an instruction.
    """

    func: str | None
    """The bytecode function that was running."""
    pc: int | None
    """The index of the failing instruction within that function."""
    instr: str | None
    """The failing instruction, as ``Executable.as_text()`` prints it."""
    location: str | None
    """The instruction's source location, if it has one."""
    kind: str | None
    """For an executable that fails verification when loaded: what is wrong, as
    ``CheckError.kind`` names it; None otherwise."""

class VMTypeError(VMError, TypeError):
    """A VM failure that is also a ``TypeError``: a wrong argument type or count."""

class VMKeyError(VMError, KeyError):
    """A VM failure that is also a ``KeyError``: an unknown function name."""

class VMIndexError(VMError, IndexError):
    """A VM failure that is also an ``IndexError``."""

class VMValueError(VMError, ValueError):
    """A VM failure that is also a ``ValueError``."""

class VMMemoryError(VMError, MemoryError):
    """A VM failure that is also a ``MemoryError``: an allocation that could not be made."""

class CheckError(RuntimeError):
    """``ExecBuilder`` refused the program: the check failed (e.g. a register is read before it
    is written) or the builder was misused.

    When the verifier found the problem, the attributes say where and what; otherwise (misuse
    of the builder) they are all None.
    """

    func: str | None
    """The function at fault (as on ``VMError``)."""
    function: str | None
    """The same as ``func``."""
    pc: int | None
    """The index of the instruction at fault within the function."""
    instr: str | None
    """That instruction, as ``Executable.as_text()`` prints it."""
    location: str | None
    """The instruction's source location, if it has one."""
    kind: str | None
    """What is wrong, as a stable name: ``"maybe_unassigned"``, ``"undefined_register"``,
    ``"jump_outside"``, ``"runs_off_end"``, ``"arity"``, ``"const_out_of_range"``,
    ``"func_out_of_range"``, ``"register_outside"``, ``"empty"``, ``"never_defined"``..."""

# --------------------------------------------------------------------------------------------
# Values
# --------------------------------------------------------------------------------------------

@final
class DataType:
    """An element data type, e.g. ``DataType("float32")``.

    Equal to (and hashing like) its name, so ``DataType("int64") == "int64"``. Accepts names
    (``"float32"``), short names (``"f32"``) and anything ``numpy.dtype`` accepts.
    """

    def __new__(cls, dtype: _DTypeLike) -> DataType: ...
    @property
    def name(self) -> str:
        """The canonical name, e.g. ``"float32"``."""
    @property
    def bits(self) -> int:
        """Width of one element in bits (``bool`` counts 8)."""
    @property
    def lanes(self) -> int:
        """Vector lanes (always 1)."""
    @property
    def type_code(self) -> int:
        """The DLPack type code (0 int, 1 uint, 2 float, 4 bfloat, 6 bool)."""
    @property
    def itemsize(self) -> int:
        """Size of one element in bytes."""
    def __eq__(self, value: object, /) -> bool: ...
    def __hash__(self) -> int: ...

@final
class Device:
    """A device: a DLPack type code (``1`` is CPU) and an id. Compare with ``==``.

    ``Device("cpu", 0)``, ``Device(1, 0)`` or ``Device("cpu:0")``; usually made by ``cpu(n)``.
    """

    def __new__(cls, device_type: str | int, device_id: int | None = None) -> Device: ...
    @property
    def device_type(self) -> int:
        """The DLPack device type code (``1`` for CPU)."""
    @property
    def device_id(self) -> int:
        """The index among devices of this type."""
    @property
    def index(self) -> int:
        """The index among devices of this type (tvm_ffi's name for ``device_id``)."""
    @property
    def type_name(self) -> str:
        """The device type's name (``"cpu"``)."""
    def dlpack_device(self) -> tuple[int, int]:
        """``(device_type, device_id)``, as ``__dlpack_device__`` returns it."""
    def dlpack_device_type(self) -> int:
        """The DLPack device type code (``1`` for CPU), as tvm_ffi's ``Device.dlpack_device_type()``."""
    def __eq__(self, value: object, /) -> bool: ...
    def __hash__(self) -> int: ...

def cpu(dev_id: int = 0) -> Device:
    """CPU device number ``dev_id``."""

def device(dev_type: str | int, dev_id: int | None = None) -> Device:
    """A device by type and id: ``device("cpu", 0)``, ``device("cpu:1")``."""

@final
class Shape(Sequence[int]):
    """A shape tuple (TVM's ``ShapeTuple``), shared with the VM without copying.

    Behaves like a tuple of ints: ``len``, indexing, slicing (a ``Shape``), iteration,
    ``in``, and equality and hashing with tuples: ``Shape([32, 16]) == (32, 16)``.
    """

    def __new__(cls, dims: Sequence[int] | None = None) -> Shape: ...
    def __len__(self) -> int: ...
    @overload
    def __getitem__(self, key: SupportsIndex, /) -> int: ...
    @overload
    def __getitem__(self, key: slice, /) -> Shape: ...
    def __iter__(self) -> Iterator[int]: ...
    def __contains__(self, value: object, /) -> bool: ...
    def __eq__(self, value: object, /) -> bool: ...
    def __lt__(self, value: Shape | tuple[int, ...], /) -> bool: ...
    def __le__(self, value: Shape | tuple[int, ...], /) -> bool: ...
    def __gt__(self, value: Shape | tuple[int, ...], /) -> bool: ...
    def __ge__(self, value: Shape | tuple[int, ...], /) -> bool: ...
    def __hash__(self) -> int: ...
    def to_tuple(self) -> tuple[int, ...]:
        """The dimensions as a plain tuple."""
    @property
    def numel(self) -> int | None:
        """The number of elements a tensor of this shape holds (``None`` on overflow)."""

@final
class Tensor:
    """An n-dimensional array on a device (TVM's ``NDArray`` / ``runtime.Tensor``).

    Make one with ``tensor(data)``; numpy arrays are accepted wherever a tensor is.
    ``numpy()`` and ``np.asarray(t)`` view the tensor's memory without copying, and
    ``np.from_dlpack(t)`` shares it through DLPack, ``memoryview(t)`` through the buffer
    protocol. There is one Python object per tensor: a tensor put into a tuple and taken out
    again is the object put in. Tensors compare by identity (TVM's ``same_as``); compare
    contents through numpy. Pickling with protocol 5 passes the bytes out of band.
    """

    @property
    def shape(self) -> tuple[int, ...]:
        """The shape, as a tuple of ints."""
    @property
    def dtype(self) -> str:
        """The element type's name, e.g. ``"float32"``."""
    @property
    def device(self) -> Device:
        """The device the data lives on."""
    @property
    def ndim(self) -> int:
        """The number of dimensions."""
    @property
    def size(self) -> int:
        """The number of elements."""
    @property
    def nbytes(self) -> int:
        """The size of the elements in bytes."""
    @property
    def strides(self) -> tuple[int, ...]:
        """Strides in elements."""
    @property
    def is_contiguous(self) -> bool:
        """True when the elements are laid out C-contiguously."""
    def numpy(self) -> npt.NDArray[Any]:
        """A numpy array viewing this tensor's memory (no copy; its ``base`` is the tensor,
        which it keeps alive). Writes through the array change the tensor."""
    def __array__(self, dtype: Any = None, copy: bool | None = None) -> npt.NDArray[Any]:
        """numpy's array protocol: ``np.asarray(tensor)`` views the tensor's memory."""
    def copyfrom(self, source: Tensor | npt.ArrayLike) -> Tensor:
        """Copies ``source`` (same shape) into this tensor in place; returns ``self``."""
    def __dlpack__(
        self,
        *,
        stream: int | None = None,
        max_version: tuple[int, int] | None = None,
        dl_device: tuple[int, int] | None = None,
        copy: bool | None = None,
    ) -> Any:
        """DLPack export: a capsule sharing this tensor's memory (versioned when the consumer
        passes ``max_version >= (1, 0)``)."""
    def __dlpack_device__(self) -> tuple[int, int]:
        """``(device_type, device_id)``: ``(1, 0)`` is CPU 0."""
    def same_storage(self, other: Tensor) -> bool:
        """True when both tensors view the same memory block."""
    def same_as(self, other: object) -> bool:
        """True when both are the same tensor object (TVM's ``same_as``)."""
    def tobytes(self) -> bytes:
        """The elements' bytes in C order (numpy's ``tobytes``); the way to read bfloat16 data."""
    def numel(self) -> int:
        """The number of elements (TVM's ``Tensor.numel()``)."""
    def data_ptr(self) -> int:
        """The address of the first element."""
    def copyto(self, target: Tensor | Device) -> Tensor:
        """Copies this tensor into ``target`` (a tensor of the same shape and dtype, which is
        returned) or to a device (the new tensor there is returned)."""
    def __setitem__(self, index: Any, value: Any, /) -> None:
        """numpy's assignment, in place: ``t[:] = x`` fills the whole tensor."""
    @property
    def __array_interface__(self) -> dict[str, Any]:
        """numpy's array interface (version 3): address, type string, shape and strides."""
    def __reduce_ex__(self, protocol: SupportsIndex, /) -> tuple[Any, tuple[Any, ...]]:
        """Pickling: protocol 5 passes the bytes as a ``pickle.PickleBuffer`` (out of band
        when the pickler takes buffers); older protocols copy them into the pickle."""
    def __eq__(self, other: object, /) -> bool: ...
    def __hash__(self) -> int: ...
    def __len__(self) -> int: ...

def tensor(data: Any, dtype: _DTypeLike | Device | None = None, device: _DeviceLike = None) -> Tensor:
    """A new tensor holding a copy of ``data`` (a tensor, a numpy array, or anything
    ``numpy.asarray`` accepts), converted to ``dtype`` when given. A ``Device`` as the second
    argument is the device, as in TVM's ``tvm.runtime.tensor(arr, dev)``."""

def tensor_from_bytes(data: bytes, shape: _ShapeLike, dtype: _DTypeLike) -> Tensor:
    """A tensor from raw little-endian bytes (as ``Executable.as_python()`` writes constants)."""

def _registered_python_func(name: str) -> Callable[..., Any] | None:
    """The Python callable ``register_func`` registered under ``name``, else None."""

def _tensor_from_buffer(buffer: Any, shape: _ShapeLike, dtype: _DTypeLike) -> Tensor:
    """Rebuilds a pickled tensor from a buffer of its bytes (viewed in place when writeable)."""

def empty(shape: _ShapeLike, dtype: _DTypeLike | None = None, device: _DeviceLike = None) -> Tensor:
    """A zero-filled tensor (``float32`` unless ``dtype`` is given)."""

def clear_array_cache() -> None:
    """Drops the tensors this thread keeps for the small numpy arrays it passed to VMs last
    (up to 8 of up to 64 KiB each, kept so that an array passed again skips its conversion),
    and with them their references to the arrays."""

def from_dlpack(x: Any) -> Tensor:
    """A tensor sharing ``x``'s memory through the DLPack protocol (``x`` has ``__dlpack__``,
    e.g. a numpy array, or is a DLPack capsule). Read-only memory is copied."""

@final
class Closure:
    """A function value from the VM: a bytecode function (run it with
    ``VirtualMachine.invoke_closure``) or a packed function (call it directly), with the values
    it captured, which are passed after each call's own arguments."""

    @property
    def name(self) -> str:
        """The function's name."""
    @property
    def is_bytecode(self) -> bool:
        """True for a bytecode function (which needs a VM to run)."""
    @property
    def num_captured(self) -> int:
        """How many values it captured."""
    def __call__(self, *args: _VMValue) -> _VMValue:
        """Calls a packed function outside any VM (bytecode closures raise ``VMError``)."""

@final
class Object:
    """A VM value with no Python counterpart (storage, the VM-state marker, opaque objects).
    It goes back into the VM as the same value. ``repr`` of an object that describes itself
    (e.g. a paged KV cache) shows its type and state."""

    @property
    def type_name(self) -> str:
        """The VM's name for the value's type (``"storage"``, ``"vm_state"``, ``"object"``)."""

# --------------------------------------------------------------------------------------------
# Building executables
# --------------------------------------------------------------------------------------------

@final
class Arg:
    """An instruction argument handle: ``r(i)``, ``imm(v)``, ``c(i)``, ``f(name)``,
    ``vm_state()`` or ``void_arg()``. Hashable; equal handles denote the same argument."""

    @property
    def kind(self) -> Literal["reg", "imm", "const", "func", "vm_state", "void"]:
        """What the handle denotes."""
    @property
    def value(self) -> int | None:
        """The register, immediate, constant or function index (``None`` for special registers)."""
    def __eq__(self, value: object, /) -> bool: ...
    def __hash__(self) -> int: ...

@final
class Location:
    """A source location attached to an instruction with ``loc=``; printed in MLIR's syntax."""

    @staticmethod
    def file(file: str, line: int = 1, col: int = 1) -> Location:
        """A file, line and column: ``"model.py":4:2``."""
    @staticmethod
    def name(name: str) -> Location:
        """A name, e.g. of the operator an instruction lowers."""
    @staticmethod
    def callsite(callee: Location, caller: Location) -> Location:
        """``callee`` inlined at ``caller``."""
    @staticmethod
    def fused(locations: Sequence[Location]) -> Location:
        """Several locations fused into one instruction."""
    def __eq__(self, value: object, /) -> bool: ...
    def __hash__(self) -> int: ...

@final
class FunctionScope:
    """The scope of a function being emitted, returned by ``ExecBuilder.function``; leaving
    the ``with`` block ends the function."""

    @property
    def name(self) -> str:
        """The function's name."""
    def __enter__(self) -> FunctionScope: ...
    def __exit__(self, exc_type: Any = None, exc: Any = None, tb: Any = None) -> bool: ...

_InstrArg = (
    Arg | int | None | tuple[int, ...] | Tensor | npt.NDArray[Any] | DataType | Shape | Device | str | float | bool
)

@final
class ExecBuilder:
    """Emits instructions and builds an ``Executable`` (TVM's ``relax.ExecBuilder``)::

    ib = ExecBuilder()
    with ib.function("main", num_inputs=2):
        ib.emit_call("vm.op.add", args=[ib.r(0), ib.r(1)], dst=ib.r(2))
        ib.emit_ret(ib.r(2))
    ex = ib.get()
    """

    def __new__(cls) -> ExecBuilder: ...
    def r(self, idx: int) -> Arg:
        """Register ``idx`` of the current frame; the first ``num_inputs`` hold the inputs."""
    def imm(self, value: int) -> Arg:
        """An immediate: a 64-bit integer inlined in the instruction."""
    def c(self, idx: int) -> Arg:
        """Constant number ``idx`` of the constant pool."""
    def f(self, name: str) -> Arg:
        """Function ``name`` as a value (declared as packed if not yet known)."""
    def vm_state(self) -> Arg:
        """The VM-state register: lets a builtin reach the VM (e.g. ``vm.builtin.alloc_storage``)."""
    def void_arg(self) -> Arg:
        """The void register: passes ``None``."""
    def convert_constant(self, value: Any) -> Arg:
        """Adds ``value`` to the constant pool and returns its handle ``c(i)``; equal constants
        share one entry. As in TVM, a tuple or list becomes a tuple constant (``rx.Shape`` makes
        a shape); numpy arrays and tensors, also inside tuples, are copied."""
    def declare_function(self, name: str, kind: Literal["packed", "bytecode"] = "packed") -> Arg:
        """Declares ``name`` as a packed function (provided by a registry when a VM is built) or
        a bytecode function (defined later); returns its handle ``f(name)``."""
    def function(
        self,
        name: str,
        num_inputs: int | None = None,
        param_names: Sequence[str] | None = None,
        signature: _SignatureLike | None = None,
    ) -> FunctionScope:
        """Starts bytecode function ``name`` whose ``num_inputs`` inputs arrive in registers
        ``0..num_inputs``; ``param_names`` allows keyword calls. Use as a context manager.

        ``signature`` declares the parameter and result types (text form or
        ``rx.types.Signature``); calls are checked against it before any instruction runs. With
        a signature ``num_inputs`` and ``param_names`` may be omitted (they come from it)."""
    def set_entry(self, name: str) -> None:
        """Makes ``name`` the entry function (``Executable.entry``); ``get()`` fails unless it is
        a bytecode function by then."""
    @property
    def entry(self) -> str | None:
        """The entry function set with ``set_entry``."""
    def import_executable(self, ex: Executable) -> None:
        """Imports every function and constant of ``ex`` (as ``link`` does): names the builder
        only referenced become direct calls; a name both define raises ``CheckError``."""
    def emit_call(
        self,
        name: str,
        args: Sequence[_InstrArg] | None = None,
        dst: Arg | int | None = None,
        loc: Location | None = None,
    ) -> None:
        """Emits ``call name(args...) -> dst``. In ``args`` handles pass through, plain ints are
        immediates, tuples shape constants, ``None`` the void register, and tensors, numpy
        arrays, dtypes, shapes, devices, strings and floats become constants."""
    def emit_ret(self, result: Arg | int, loc: Location | None = None) -> None:
        """Emits ``ret result``."""
    def emit_goto(self, offset: int, loc: Location | None = None) -> None:
        """Emits ``goto offset``, relative to this instruction (negative loops back)."""
    def emit_if(self, cond: Arg | int, false_offset: int, loc: Location | None = None) -> None:
        """Emits ``if cond false_offset``: falls through when ``cond`` is non-zero, else jumps
        by ``false_offset``."""
    def get(self) -> Executable:
        """Checks, renumbers registers densely and returns the executable.

        Raises ``CheckError`` when a function reads a register that is neither an input nor
        written on every path before; emits a ``UserWarning`` for inputs never used."""

@final
class Executable:
    """An executable: function table, constant pool and bytecode. Immutable; picklable: the
    pickle also records the import path of each Python function registered with
    ``register_func`` that it calls, and loading it registers them again when absent."""

    def stats(self) -> str:
        """A summary: constants, bytecode functions, packed functions, instruction count."""
    def as_text(self) -> str:
        """The text form, which the assembler parses back."""
    def as_python(self) -> str:
        """Python source that rebuilds this executable with ``ExecBuilder``; running it with
        ``exec`` binds ``ex`` to an executable with the same ``as_text()``."""
    def astext(self) -> str:
        """Old TVM spelling of ``as_text()``."""
    def aspython(self) -> str:
        """Old TVM spelling of ``as_python()``."""
    @property
    def function_names(self) -> list[str]:
        """Names of the bytecode functions, in table order."""
    @property
    def packed_function_names(self) -> list[str]:
        """Names of the packed functions the executable calls, in table order."""
    def param_names(self, name: str) -> list[str]:
        """The parameter names of bytecode function ``name``."""
    def num_inputs(self, name: str) -> int:
        """The number of inputs of bytecode function ``name``."""
    def signature(self, name: str) -> _Reflection | None:
        """The IREE reflection record of function ``name``'s signature, ``{"a": [...], "r": [...]}``
        (e.g. ``["ndarray", "f32", 2, "n", 16]`` for ``tensor<[n, 16], f32>``), or ``None`` when
        it has none. Unknown names raise ``KeyError``."""
    def signature_text(self, name: str) -> str | None:
        """The text form of function ``name``'s signature (``None`` when it has none)."""
    @property
    def entry(self) -> str | None:
        """The entry function: the one set when built or linked, else ``main`` if it exists."""
    def save_to_bytes(self, strip_debug: bool = False) -> bytes:
        """The executable in the binary ``.rvx`` format (without locations if ``strip_debug``)."""
    def save(self, path: str | os.PathLike[str], strip_debug: bool = False) -> None:
        """Writes the binary format to ``path``."""
    def export_library(
        self,
        file_name: str | os.PathLike[str],
        fcompile: None = None,
        addons: None = None,
        workspace_dir: None = None,
        **kwargs: Any,
    ) -> None:
        """TVM's ``export_library``: writes relaxvm's binary format to ``file_name`` (any
        suffix; ``load_module`` reads it back). The compiler options must be left unset."""
    def __getitem__(self, name: str, /) -> Callable[[], str]:
        """``ex["as_text"]()`` is ``ex.as_text()`` (also ``as_python`` and ``stats``), as TVM's
        executable module exposes them."""
    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]: ...

def link(
    modules: Sequence[Executable | tuple[str, Executable]],
    entry: str | None = None,
    drop_unreachable: bool = False,
    keep: Sequence[str] | None = None,
) -> Executable:
    """Links executables into one: a function one declares and another defines becomes a
    direct call, equal constants are stored once, every index is remapped. A name two modules
    define raises ``ValueError`` naming both. ``drop_unreachable`` leaves out what ``entry``
    (and ``keep``) cannot reach."""

def load_executable(
    path_or_bytes: str | os.PathLike[str] | bytes | bytearray | memoryview,
    *,
    mmap: bool = False,
    native_libraries: bool | str | os.PathLike[str] | Sequence[str | os.PathLike[str]] | None = None,
    max_input_size: int | None = None,
) -> Executable:
    """Loads an executable from a ``.rvx`` file or from bytes. The native libraries it references
    (an imported TVM model keeps its ``.so`` by path and hash) are opened, which runs their code,
    only as ``native_libraries`` allows: ``None`` (none: such a file is an error naming them), a
    path or list of paths (library files, or folders whose files are allowed), or ``True`` (any
    library the file references). A file is read into memory with every byte checked;
    ``mmap=True`` maps a trusted file instead (fast, but the file must not change while the
    executable lives). Files over ``max_input_size`` bytes (16 GiB by default) are refused."""

def load_module(
    path: str | os.PathLike[str],
    *,
    native_libraries: bool | str | os.PathLike[str] | Sequence[str | os.PathLike[str]] | None = None,
    max_input_size: int | None = None,
) -> Executable:
    """Loads a model compiled by Apache TVM 0.27: a ``.so`` written by ``export_library``
    (program and kernels) or a ``relax.VMExecutable`` written by ``write_to_file`` (program
    only). Opening a ``.so`` runs its native code, as TVM's ``load_module`` does: naming it is
    consent for that file. A ``.rvx`` loads as ``load_executable`` loads it."""

# --------------------------------------------------------------------------------------------
# Running
# --------------------------------------------------------------------------------------------

@final
class VMFunction:
    """A bytecode (or saved) function of a VM, resolved once. Call it with positional
    arguments, or keyword arguments by parameter name."""

    @property
    def name(self) -> str:
        """The function's name."""
    @property
    def param_names(self) -> list[str]:
        """The parameter names (empty when the function was built without them)."""
    @property
    def releases_gil(self) -> bool:
        """Whether calls release the GIL while they run: functions that may run long (loops,
        recursion, a few hundred instructions or more, native builtins that are not
        constant-time) release it; short ones keep it, since releasing would cost more."""
    @property
    def signature_text(self) -> str | None:
        """The text form of the function's signature (``None`` without one)."""
    @property
    def __name__(self) -> str:
        """The function's name."""
    @property
    def __signature__(self) -> inspect.Signature:
        """The parameters for ``inspect.signature``, annotated with their types' text forms."""
    def __get__(self, instance: object, owner: type | None = None, /) -> VMFunction: ...
    def __call__(self, *args: _VMValue, **kwargs: _VMValue) -> _VMValue: ...

@final
class ProfileRow:
    """One callee's calls in a ``ProfileReport``, aggregated."""

    @property
    def name(self) -> str:
        """The callee's name (``"(vm overhead)"`` for the interpreter's own time)."""
    @property
    def kind(self) -> str:
        """``"builtin"``, ``"kernel"``, ``"python"``, ``"vm"`` or ``"overhead"``."""
    @property
    def count(self) -> int:
        """How many calls returned."""
    @property
    def total_ns(self) -> int:
        """Their time: exclusive for leaf callees, inclusive for kind ``"vm"``."""
    @property
    def mean_ns(self) -> int:
        """The mean time per call."""
    @property
    def min_ns(self) -> int:
        """The shortest call."""
    @property
    def max_ns(self) -> int:
        """The longest call."""
    @property
    def percent(self) -> float:
        """The share of the report's ``total_ns``; all rows but kind ``"vm"`` add up to 100."""
    @property
    def shapes(self) -> list[str]:
        """The distinct argument types and shapes seen, e.g. ``"float32(2, 3), int"``."""

@final
class ProfileReport:
    """Where the time of one call went (``VirtualMachine.profile``). ``str(report)`` is
    ``report.table()``."""

    @property
    def function(self) -> str:
        """The function that was run."""
    @property
    def total_ns(self) -> int:
        """The wall time of the whole call."""
    @property
    def rows(self) -> list[ProfileRow]:
        """One row per callee in order of first return, the ``(vm overhead)`` row last."""
    def table(self, sort_by: str = "total", top: int | None = None) -> str:
        """A table sorted by ``"total"``, ``"count"``, ``"mean"`` or ``"name"``, at most ``top``
        rows."""
    def csv(self) -> str:
        """CSV: a header and one row per callee, times in nanoseconds."""
    def json(self) -> str:
        """JSON: ``{"function": ..., "total_ns": ..., "calls": [...]}``."""
    def save_trace(self, path: str | os.PathLike[str]) -> None:
        """Writes the run in the Chrome trace event format (open it at ui.perfetto.dev): one
        event per call, nested by depth, with shapes, caller and pc."""

@final
class TraceStep:
    """One call of a traced run (``VirtualMachine.trace``); values are copies taken when it ran."""

    @property
    def index(self) -> int:
        """The step's number: calls are numbered from 0 in the order they start."""
    @property
    def function(self) -> str:
        """The bytecode function making the call."""
    @property
    def pc(self) -> int:
        """The index of the ``call`` instruction within ``function``."""
    @property
    def callee(self) -> str:
        """The called function's name."""
    @property
    def depth(self) -> int:
        """How many traced calls enclose this one (0 for calls of the entry function)."""
    @property
    def end(self) -> int:
        """How many steps had started when this one returned."""
    @property
    def failed(self) -> bool:
        """True when the call raised the run's error."""
    @property
    def dropped(self) -> bool:
        """True when the values were dropped to stay within ``max_bytes``."""
    @property
    def args(self) -> list[_VMValue] | None:
        """Copies of the arguments, taken before the call (``None`` when dropped)."""
    @property
    def result(self) -> _VMValue:
        """A copy of the result (``None`` when the call returns nothing, raised or was dropped)."""
    @property
    def outputs(self) -> dict[int, _VMValue]:
        """The tensor arguments the call wrote, by index, copied after it (the results of
        destination-passing kernels such as TVM's)."""

@final
class TraceDifference:
    """Where two traces first differ (``Trace.first_difference``)."""

    @property
    def index(self) -> int:
        """The step's number."""
    @property
    def a(self) -> TraceStep | None:
        """The first trace's step (``None`` when it has no step with this number)."""
    @property
    def b(self) -> TraceStep | None:
        """The second trace's step."""
    @property
    def what(self) -> str:
        """``"step"`` (the calls differ), ``"result"``, ``"outputs"``, ``"outputs[i]"`` or
        ``"skipped"`` (steps one trace kept and the other dropped, not compared)."""
    @property
    def detail(self) -> str:
        """How they differ, e.g. the number of differing elements and the largest difference."""

@final
class Trace:
    """Every call of one run, in order, with copies of its values (``VirtualMachine.trace``).
    ``str(trace)`` lists the steps."""

    @property
    def function(self) -> str:
        """The function that was run."""
    @property
    def skipped(self) -> int:
        """How many of the first steps were dropped whole to stay within ``max_bytes``."""
    @property
    def dropped(self) -> int:
        """How many kept steps lost their values to ``max_bytes``."""
    @property
    def total_steps(self) -> int:
        """The number of steps the run made, including skipped ones."""
    @property
    def max_bytes(self) -> int:
        """The budget the trace was recorded with."""
    @property
    def result(self) -> _VMValue:
        """The run's result."""
    def __len__(self) -> int:
        """The number of kept steps."""
    def __getitem__(self, i: int, /) -> TraceStep:
        """The kept step at position ``i`` (negative counts from the end)."""
    def __iter__(self) -> Iterator[TraceStep]:
        """The kept steps, in order."""
    def find(self, callee: str | None = None, function: str | None = None) -> list[TraceStep]:
        """The steps calling ``callee`` (and made by ``function``, when given), in order."""
    def save(self, path: str | os.PathLike[str]) -> None:
        """Writes a numpy ``.npz`` file: one array per copied tensor (``step3.result``,
        ``step3.args.0``, ``step3.outputs.1``) and the steps as JSON in ``__trace__``."""
    @staticmethod
    def load(path: str | os.PathLike[str], limit: int | None = None) -> Trace:
        """Reads a trace written by ``save``, decompressing and parsing at most ``limit``
        bytes (``None``: 256 MiB plus 16 bytes per byte of the file)."""
    @staticmethod
    def first_difference(a: Trace, b: Trace, rtol: float = 1e-05, atol: float = 1e-08) -> TraceDifference | None:
        """The first step whose result or written arguments differ (in the order calls
        returned), or where the calls themselves differ, or steps only one trace kept
        (``what == "skipped"``); ``None`` when every step was compared and agrees."""

@final
class BenchmarkResult:
    """Timing of repeated runs, in seconds per run (TVM's ``BenchmarkResult``)."""

    @property
    def results(self) -> list[float]:
        """Mean seconds per run of each repeat."""
    @property
    def mean(self) -> float:
        """The mean of ``results``."""
    @property
    def median(self) -> float:
        """The median of ``results``."""
    @property
    def min(self) -> float:
        """The smallest of ``results``."""
    @property
    def max(self) -> float:
        """The largest of ``results``."""
    @property
    def std(self) -> float:
        """The standard deviation of ``results``."""

@final
class TimeEvaluator:
    """Returned by ``VirtualMachine.time_evaluator``: call it with the function's arguments."""

    def __call__(self, *args: _VMValue, **kwargs: _VMValue) -> BenchmarkResult: ...

_InstrumentCallback = Callable[..., int | None]

@final
class VirtualMachine:
    """A virtual machine running one executable (TVM's ``relax.VirtualMachine``).

    The GIL is released while bytecode and native builtins run; Python callbacks take it back
    for their call. One VM used from several threads serialises the calls. A callback that
    calls the VM it runs in raises ``RuntimeError`` (use a second VM).
    """

    NAIVE_ALLOCATOR: int
    POOLED_ALLOCATOR: int
    @property
    def memory_allocator(self) -> str:
        """The allocator ``memory_cfg`` chose for the VM's device: ``"pooled"`` (the default) or ``"naive"``."""
    def __new__(
        cls,
        exec: Executable,
        device: _DeviceLike | Sequence[Device] = None,
        memory_cfg: str | dict[Device, int | str] | None = None,
        profile: bool = False,
        *,
        max_call_depth: int | None = None,
        max_reentry: int | None = None,
        step_budget: int | None = None,
        max_stack_registers: int | None = None,
    ) -> VirtualMachine:
        """A VM for ``exec`` whose builtins allocate on ``device`` (default ``cpu()``). Every
        packed function the executable calls must be registered, else ``VMKeyError``.

        The keyword-only limits turn runaway programs into ``VMError`` (``None`` keeps the
        default): ``max_call_depth`` bytecode frames (100,000); ``max_reentry`` nested calls
        back into the VM from packed functions such as ``invoke_closure`` (200); ``step_budget``
        bytecode calls and backward jumps per top-level call (unlimited); ``max_stack_registers``
        registers held by all frames together (16,777,216, i.e. 256 MiB). Each must be >= 1.
        ``profile=True`` enables ``profile()``; it does not slow other calls. ``memory_cfg`` is
        checked as TVM checks it (``"naive"``, ``"pooled"``, or a dict from devices to
        ``NAIVE_ALLOCATOR``/``POOLED_ALLOCATOR``; anything else raises) and chooses the
        allocator for the VM's device (``memory_allocator``): pooled, TVM's default, hands each
        allocation site's last block and tensor header out again once nothing holds it; naive
        allocates at every call."""
    def profile(self, func_name: str, *args: _VMValue, **kwargs: _VMValue) -> ProfileReport:
        """Runs ``func_name`` once and returns where its time went, per callee. Needs
        ``profile=True``; raises ``VMValueError`` otherwise, and the call's own error if it
        fails (the VM stays usable)."""
    def trace(self, func_name: str, *args: _VMValue, max_bytes: int = 268435456, **kwargs: _VMValue) -> Trace:
        """Runs ``func_name`` once and returns every call it made, with copies of their values,
        keeping at most ``max_bytes`` of copies (older values are dropped past it). An error is
        raised as the call would raise it, with the trace up to it as its ``trace`` attribute."""
    def __getitem__(self, key: str, /) -> VMFunction:
        """Function ``name`` (bytecode or saved) as a callable; unknown names raise ``KeyError``."""
    def signature(self, name: str) -> _Reflection | None:
        """The IREE reflection record of function ``name``'s signature (see
        ``Executable.signature``); ``None`` without one (saved functions have none)."""
    @property
    def executable(self) -> Executable:
        """The executable this VM runs."""
    def invoke_closure(self, closure: Closure, *args: _VMValue) -> _VMValue:
        """Calls a closure (e.g. one the VM returned) with ``args`` then its captured values."""
    def save_function(
        self, func_name: str, saved_name: str, *args: _VMValue, include_return: bool = True, **kwargs: _VMValue
    ) -> None:
        """Saves ``func_name`` with ``args`` (and ``kwargs``, by parameter name) bound as
        ``saved_name``, callable with no arguments as ``vm[saved_name]()``; it returns ``None``
        when ``include_return`` is false."""
    def set_input(self, func_name: str, *args: _VMValue, **kwargs: _VMValue) -> None:
        """Sets the inputs of a later ``invoke_stateful(func_name)``."""
    def invoke_stateful(self, func_name: str) -> None:
        """Runs ``func_name`` on the inputs given to ``set_input``, keeping its result."""
    def get_outputs(self, func_name: str) -> _VMValue:
        """The result of the last ``invoke_stateful(func_name)``."""
    def set_instrument(self, callback: _InstrumentCallback | None) -> None:
        """Installs ``callback(func, func_symbol, before_run, ret_value, *args)``, called before
        every ``call`` instruction and after each that returns (as TVM: not after one that
        raised). dtype arguments arrive as ``str``, as TVM passes them. Returning ``None`` or
        ``VMInstrumentReturnKind.NO_OP`` continues; returning ``SKIP_RUN`` before a call skips
        it (its destination receives ``None``). ``None`` removes it."""
    def time_evaluator(
        self,
        func_name: str,
        dev: Device | None = None,
        number: int = 10,
        repeat: int = 1,
        min_repeat_ms: float = 0.0,
        cooldown_interval_ms: float = 0.0,
        repeats_to_cooldown: int = 1,
        f_preproc: str = "",
    ) -> TimeEvaluator:
        """A callable that runs ``func_name`` ``number`` times per repeat, ``repeat`` times
        (each repeat lasting at least ``min_repeat_ms``), and returns a ``BenchmarkResult``.
        ``"invoke_stateful"`` times ``invoke_stateful``: the callable then takes the name of the
        function whose inputs ``set_input`` gave."""
    def interrupt(self) -> None:
        """Stops the call running in another thread with a ``VMError`` at its next call or
        backward jump."""

# --------------------------------------------------------------------------------------------
# The function registry
# --------------------------------------------------------------------------------------------

_F = Callable[..., Any]

@overload
def register_func(func_name: str, f: None = None, override: bool = False) -> Callable[[_F], _F]:
    """Registers ``f`` process-wide under ``func_name``; VMs look packed functions up there.

    Use as ``register_func("name", f)``, as a decorator ``@register_func("name")``, or bare
    ``@register_func`` (the function's own name). The VM calls ``f`` with its arguments
    converted to Python and converts the result back (a numpy array becomes a tensor). An
    exception ``f`` raises reaches the VM's caller with its own type. Registering a name twice
    without ``override=True`` raises ``ValueError``.
    """

@overload
def register_func(func_name: str, f: _F, override: bool = False) -> _F: ...
@overload
def register_func(func_name: _F, f: None = None, override: bool = False) -> _F: ...
def get_global_func(name: str, allow_missing: bool = False) -> Closure:
    """The function registered under ``name`` as a callable; ``ValueError`` when there is none, as TVM
    (``None`` with ``allow_missing``)."""

def list_global_func_names() -> list[str]:
    """Every registered name, in registration order (builtins included)."""

def remove_global_func(name: str) -> None:
    """Removes ``name`` from the registry (``KeyError`` when absent)."""

def _register_panicking_func(name: str, message: str) -> None:
    """Test aid: registers under ``name`` a native function that panics with ``message``."""

def _keeps_gil_next(f: VMFunction | Closure, *args: Any) -> bool:
    """Test aid: whether the next call of ``f`` with ``args`` keeps the GIL."""

def _note_short_call(f: VMFunction | Closure, *args: Any) -> None:
    """Test aid: records that the last call of ``f`` with ``args`` ran short."""

def _small_int_decode(word: int, digit: int, tagged: bool) -> tuple[int | None, bool]:
    """Test aid: the direct read's value for an int's size ``word`` and first ``digit`` (3.12+'s
    tag layout when ``tagged``), and whether it read the digit."""

def _small_int_self_check(tagged: bool) -> tuple[list[int], bool]:
    """Test aid: the ints the import-time check reads wrongly taking the layout ``tagged`` says,
    and whether ints are read directly in this process."""

def _is_plain_name(name: str) -> bool:
    """True when ``name`` needs no quotes in the text form (the VM's rule)."""

def _type_text(spec: Any) -> str:
    """The VM's text form of the type ``spec`` describes (a ``relaxvm.types`` type's ``_spec()``,
    or a type's text form)."""

def _signature_text(params: list[tuple[str, Any]], result: Any) -> str:
    """The VM's text form of a signature from ``(name, spec)`` pairs and the result's spec."""

def _cli_main(argv: list[str]) -> int:
    """Runs the ``relaxvm`` command line ``argv`` (the program's name first); returns its exit
    status."""
