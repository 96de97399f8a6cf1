"""Parameter and result types of function signatures (the IREE ABI), as Python objects.

Each type renders (``str(t)``) to the text form the VM parses and prints in ``as_text()``::

    import relaxvm as rx
    from relaxvm import types as T

    sig = T.Signature(
        [("x", T.Tensor(("n", 16), "float32")), ("k", T.float32), ("cfg", T.Dict({"depth": T.int64}))],
        T.Tuple(T.Tensor(None, "float32"), T.int64),
    )
    str(sig)  # '(x: tensor<[n, 16], f32>, k: f32, cfg: dict<{depth: i64}>) -> tuple<tensor<*, f32>, i64>'

    ib = rx.ExecBuilder()
    with ib.function("main", signature=sig):  # num_inputs and param_names come from it
        ...

Wherever a type is expected, its text form (a ``str``) is accepted too.

Tensor dimensions: an ``int`` is a fixed size, a ``str`` a symbol (every dimension with the same
symbol must agree in one call), ``None`` any size; ``shape=None`` is an unknown rank.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Union

from . import _relaxvm

__all__ = [
    "Any",
    "Dict",
    "List",
    "Object",
    "Scalar",
    "Shape",
    "Signature",
    "Str",
    "Tensor",
    "Tuple",
    "Type",
    "TypeLike",
    "bfloat16",
    "bool_",
    "float16",
    "float32",
    "float64",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
]

# Element type names (numpy spelling, short spelling) -> the short name of the text form.
_SHORT = {
    "bool": "bool",
    "int8": "i8",
    "int16": "i16",
    "int32": "i32",
    "int64": "i64",
    "uint8": "u8",
    "uint16": "u16",
    "uint32": "u32",
    "uint64": "u64",
    "float16": "f16",
    "bfloat16": "bf16",
    "float32": "f32",
    "float64": "f64",
}
_SHORT.update({v: v for v in list(_SHORT.values())})
_SHORT["i1"] = "bool"


def _dtype_text(dtype: object) -> str:
    """The short name of a dtype-like (``"float32"``, ``"f32"``, ``np.float32``, ``rx.DataType``)."""
    name = dtype if isinstance(dtype, str) else getattr(dtype, "name", None)
    if not isinstance(name, str):
        import numpy as np

        try:
            name = np.dtype(dtype).name  # type: ignore[call-overload]
        except TypeError:
            raise TypeError(f"not a dtype: {dtype!r}") from None
    short = _SHORT.get(name)
    if short is None:
        raise ValueError(f"unknown element type {name!r} (expected one of {', '.join(sorted(_SHORT))})")
    return short


def _name_text(name: str) -> str:
    """A parameter name or dict key, quoted when it is not a plain name (as the VM prints it)."""
    if not isinstance(name, str):
        raise TypeError(f"names are str, got {type(name).__name__}")
    return _relaxvm._name_text(name)


class Type:
    """A parameter or result type. ``str(t)`` is its text form; types compare by it."""

    __slots__ = ()

    def _text(self) -> str:
        raise NotImplementedError

    def __str__(self) -> str:
        return self._text()

    def __repr__(self) -> str:
        return f"<relaxvm.types {self._text()}>"

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Type):
            return self._text() == other._text()
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._text())


#: A type, or its text form.
TypeLike = Union[Type, str]


def _type_text(t: TypeLike) -> str:
    if isinstance(t, Type):
        return str(t)
    if isinstance(t, str):
        return t
    raise TypeError(f"expected a relaxvm.types type or its text form, got {type(t).__name__}")


class Any(Type):
    """Anything (``any``)."""

    __slots__ = ()

    def _text(self) -> str:
        return "any"


class Object(Type):
    """An opaque object (``object``)."""

    __slots__ = ()

    def _text(self) -> str:
        return "object"


class Str(Type):
    """A string (``str``)."""

    __slots__ = ()

    def _text(self) -> str:
        return "str"


class Scalar(Type):
    """A scalar of one element type: ``Scalar("int64")`` is ``i64``; ``Scalar("bool")`` is ``bool``."""

    __slots__ = ("dtype",)

    def __init__(self, dtype: object) -> None:
        self.dtype: str = _dtype_text(dtype)

    def _text(self) -> str:
        return self.dtype


class Tensor(Type):
    """A tensor: ``Tensor((None, 16), "float32")`` is ``tensor<[?, 16], f32>``.

    ``shape``: a sequence of dimensions (``int`` fixed, ``str`` symbolic, ``None`` any), or
    ``None`` for an unknown rank. ``dtype``: the element type, or ``None`` for any.
    ``contiguous``: the callee needs C-contiguous data (strided arguments are copied).
    """

    __slots__ = ("shape", "dtype", "contiguous")

    def __init__(
        self,
        shape: Sequence[int | str | None] | None = None,
        dtype: object = None,
        contiguous: bool = False,
    ) -> None:
        if shape is not None:
            if isinstance(shape, (str, int)):
                raise TypeError("shape is a sequence of dimensions, e.g. (None, 16)")
            dims = tuple(shape)
            for d in dims:
                if d is not None and not isinstance(d, (int, str)) or isinstance(d, bool):
                    raise TypeError(f"a dimension is an int, a symbol (str) or None, got {d!r}")
                if isinstance(d, int) and d < 0:
                    raise ValueError(f"a fixed dimension is non-negative, got {d}")
                if isinstance(d, str) and not _relaxvm._is_plain_name(d):
                    raise ValueError(f"a symbolic dimension is a plain name, got {d!r}")
            self.shape: tuple[int | str | None, ...] | None = dims
        else:
            self.shape = None
        self.dtype: str | None = None if dtype is None else _dtype_text(dtype)
        self.contiguous = bool(contiguous)

    def _text(self) -> str:
        if self.shape is None:
            dims = "*"
        else:
            dims = "[" + ", ".join("?" if d is None else str(d) for d in self.shape) + "]"
        out = f"tensor<{dims}, {self.dtype or '?'}"
        if self.contiguous:
            out += ", contiguous"
        return out + ">"


class Shape(Type):
    """A shape with ``ndim`` dimensions (``None``: any), e.g. ``shape<2>``."""

    __slots__ = ("ndim",)

    def __init__(self, ndim: int | None = None) -> None:
        if ndim is not None and (not isinstance(ndim, int) or isinstance(ndim, bool) or ndim < 0):
            raise ValueError(f"ndim is a non-negative int or None, got {ndim!r}")
        self.ndim = ndim

    def _text(self) -> str:
        return f"shape<{'?' if self.ndim is None else self.ndim}>"


class Tuple(Type):
    """A tuple with one type per slot: ``Tuple(int64, Str())``. Accepts a tuple or a list."""

    __slots__ = ("slots",)

    def __init__(self, *slots: TypeLike) -> None:
        self.slots: tuple[TypeLike, ...] = slots
        for s in slots:
            _type_text(s)

    def _text(self) -> str:
        return "tuple<" + ", ".join(_type_text(s) for s in self.slots) + ">"


class List(Type):
    """A list of any length whose items share one type: ``List(float32)``."""

    __slots__ = ("item",)

    def __init__(self, item: TypeLike) -> None:
        _type_text(item)
        self.item = item

    def _text(self) -> str:
        return f"list<{_type_text(self.item)}>"


class Dict(Type):
    """A structure with named slots: ``Dict({"depth": int64, "name": Str()})``. Accepts a Python
    dict with exactly these keys; it is passed as a tuple in sorted key order."""

    __slots__ = ("slots",)

    def __init__(self, slots: Mapping[str, TypeLike] | Iterable[tuple[str, TypeLike]]) -> None:
        items = list(slots.items()) if isinstance(slots, Mapping) else list(slots)
        keys = [k for k, _ in items]
        if len(set(keys)) != len(keys):
            raise ValueError("dict keys must be distinct")
        for k, t in items:
            _name_text(k)
            _type_text(t)
        self.slots: dict[str, TypeLike] = dict(sorted(items, key=lambda kv: kv[0].encode()))

    def _text(self) -> str:
        return "dict<{" + ", ".join(f"{_name_text(k)}: {_type_text(t)}" for k, t in self.slots.items()) + "}>"


class Signature:
    """A function's parameters and result: ``Signature([("x", Tensor(("n",), "f32"))], float32)``.

    ``str(sig)`` is the text form ``(x: tensor<[n], f32>) -> f32`` that
    ``ExecBuilder.function(..., signature=...)`` accepts.
    """

    __slots__ = ("params", "result")

    def __init__(self, params: Iterable[tuple[str, TypeLike]] = (), result: TypeLike = "any") -> None:
        self.params: list[tuple[str, TypeLike]] = [(n, t) for n, t in params]
        names = [n for n, _ in self.params]
        if len(set(names)) != len(names):
            raise ValueError("parameter names must be distinct")
        for n, t in self.params:
            _name_text(n)
            _type_text(t)
        _type_text(result)
        self.result = result

    @property
    def param_names(self) -> list[str]:
        """The parameters' names, in order."""
        return [n for n, _ in self.params]

    def __str__(self) -> str:
        params = ", ".join(f"{_name_text(n)}: {_type_text(t)}" for n, t in self.params)
        return f"({params}) -> {_type_text(self.result)}"

    def __repr__(self) -> str:
        return f"<relaxvm.types.Signature {self}>"

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Signature):
            return str(self) == str(other)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(str(self))


bool_ = Scalar("bool")
int8 = Scalar("int8")
int16 = Scalar("int16")
int32 = Scalar("int32")
int64 = Scalar("int64")
uint8 = Scalar("uint8")
uint16 = Scalar("uint16")
uint32 = Scalar("uint32")
uint64 = Scalar("uint64")
float16 = Scalar("float16")
bfloat16 = Scalar("bfloat16")
float32 = Scalar("float32")
float64 = Scalar("float64")
