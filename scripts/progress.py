"""A progress line for the long scripts (the bench suite, the TVM corpus build): ``[3/16] name
12s``, rewritten in place on standard error when it is a terminal, and nothing otherwise (logs
and CI output stay clean)."""

from __future__ import annotations

import sys
import time
from typing import TextIO


class Progress:
    """Counts ``total`` steps of ``what``: ``step(label)`` before each; ``clear()`` before printing
    anything else to the terminal, and at the end (leaving the ``with`` block clears too)."""

    def __init__(self, total: int, what: str, stream: TextIO | None = None) -> None:
        self.total, self.what, self.k = total, what, 0
        self.stream = stream if stream is not None else sys.stderr
        self.live = bool(getattr(self.stream, "isatty", lambda: False)())
        self.start = time.monotonic()

    def step(self, label: str) -> None:
        """Shows that step ``k + 1`` (``label``) has begun."""
        self.k += 1
        if self.live:
            elapsed = int(time.monotonic() - self.start)
            line = f"{self.what} [{self.k}/{self.total}] {label} {elapsed}s"
            self.stream.write("\r\x1b[2K" + line[:200])
            self.stream.flush()

    def clear(self) -> None:
        """Clears the line (the next ``step`` draws it again)."""
        if self.live:
            self.stream.write("\r\x1b[2K")
            self.stream.flush()

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.clear()
