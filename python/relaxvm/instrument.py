"""What an instrument (``VirtualMachine.set_instrument``) returns, named as Apache TVM names it."""

from enum import IntEnum


class VMInstrumentReturnKind(IntEnum):
    """The return value of an instrument callback: ``NO_OP`` (or ``None``) runs the call,
    ``SKIP_RUN`` (before a call only) skips it and leaves ``None`` in its destination."""

    NO_OP = 0
    SKIP_RUN = 1
