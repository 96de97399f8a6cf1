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

Printing is the VM's: each type describes itself to the native module (``_spec()``: its form of
the type grammar and its parts), which prints it as ``as_text()`` prints signatures; a text form
given for a part is read by the VM's parser (so it is checked where it is given).

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


def _check_name(name: object) -> None:
    """A parameter name or dict key is a ``str`` (the VM quotes it where it is not plain)."""
    if not isinstance(name, str):
        raise TypeError(f"names are str, got {type(name).__name__}")


class Type:
    """A parameter or result type. ``str(t)`` is its text form; types compare by it."""

    __slots__ = ()

    def _spec(self) -> tuple[object, ...]:
        """Its form of the type grammar and its parts, for the native printer."""
        raise NotImplementedError

    def _text(self) -> str:
        return _relaxvm._type_text(self._spec())

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


def _spec(t: TypeLike) -> object:
    """What describes ``t`` to the native printer: a type's ``_spec()``, or the text form."""
    if isinstance(t, Type):
        return t._spec()
    if isinstance(t, str):
        return t
    raise TypeError(f"expected a relaxvm.types type or its text form, got {type(t).__name__}")


class Any(Type):
    """Anything (``any``)."""

    __slots__ = ()

    def _spec(self) -> tuple[object, ...]:
        return ("any",)


class Object(Type):
    """An opaque object (``object``)."""

    __slots__ = ()

    def _spec(self) -> tuple[object, ...]:
        return ("object",)


class Str(Type):
    """A string (``str``)."""

    __slots__ = ()

    def _spec(self) -> tuple[object, ...]:
        return ("str",)


class Scalar(Type):
    """A scalar of one element type: ``Scalar("int64")`` is ``i64``; ``Scalar("bool")`` is ``bool``."""

    __slots__ = ("dtype",)

    def __init__(self, dtype: object) -> None:
        self.dtype: str = _dtype_text(dtype)

    def _spec(self) -> tuple[object, ...]:
        return ("scalar", self.dtype)


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

    def _spec(self) -> tuple[object, ...]:
        return ("tensor", self.shape, self.dtype, self.contiguous)


class Shape(Type):
    """A shape with ``ndim`` dimensions (``None``: any), e.g. ``shape<2>``."""

    __slots__ = ("ndim",)

    def __init__(self, ndim: int | None = None) -> None:
        if ndim is not None and (not isinstance(ndim, int) or isinstance(ndim, bool) or ndim < 0):
            raise ValueError(f"ndim is a non-negative int or None, got {ndim!r}")
        self.ndim = ndim

    def _spec(self) -> tuple[object, ...]:
        return ("shape", self.ndim)


class Tuple(Type):
    """A tuple with one type per slot: ``Tuple(int64, Str())``. Accepts a tuple or a list."""

    __slots__ = ("slots",)

    def __init__(self, *slots: TypeLike) -> None:
        self.slots: tuple[TypeLike, ...] = slots
        self._text()  # checks the slots

    def _spec(self) -> tuple[object, ...]:
        return ("tuple", [_spec(s) for s in self.slots])


class List(Type):
    """A list of any length whose items share one type: ``List(float32)``."""

    __slots__ = ("item",)

    def __init__(self, item: TypeLike) -> None:
        self.item = item
        self._text()  # checks the item

    def _spec(self) -> tuple[object, ...]:
        return ("list", _spec(self.item))


class Dict(Type):
    """A structure with named slots: ``Dict({"depth": int64, "name": Str()})``. Accepts a Python
    dict with exactly these keys; it is passed as a tuple in sorted key order."""

    __slots__ = ("slots",)

    def __init__(self, slots: Mapping[str, TypeLike] | Iterable[tuple[str, TypeLike]]) -> None:
        items = list(slots.items()) if isinstance(slots, Mapping) else list(slots)
        keys = [k for k, _ in items]
        if len(set(keys)) != len(keys):
            raise ValueError("dict keys must be distinct")
        for k, _ in items:
            _check_name(k)
        self.slots: dict[str, TypeLike] = dict(sorted(items, key=lambda kv: kv[0].encode()))
        self._text()  # checks the slots' types

    def _spec(self) -> tuple[object, ...]:
        return ("dict", [(k, _spec(t)) for k, t in self.slots.items()])


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
        for n, _ in self.params:
            _check_name(n)
        self.result = result
        str(self)  # checks the types

    @property
    def param_names(self) -> list[str]:
        """The parameters' names, in order."""
        return [n for n, _ in self.params]

    def __str__(self) -> str:
        return _relaxvm._signature_text([(n, _spec(t)) for n, t in self.params], _spec(self.result))

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
