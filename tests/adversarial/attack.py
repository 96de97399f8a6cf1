"""Runs one attack in a fresh Python process with a memory cap and a timeout.

An attack is a snippet of Python that ends by itself: with a value it prints, or with an
exception. The child prints one last line, ``ATTACK-END <kind> <text>``, so a test can tell a
clean error from a death by signal, a hang, a panic backtrace or a silent wrong answer. A process
killed by a signal, stopped by the timeout or printing a Rust panic fails every assertion here.
"""

from __future__ import annotations

import dataclasses
import os
import re
import resource
import signal
import subprocess
import sys
import textwrap

#: Address-space cap for an attack's process: far above what a correct run needs, far below the
#: machine, so a runaway allocation is a MemoryError (or a death the test reports), not a swap storm.
MEMORY_CAP = 3 << 30
#: Seconds an attack may take before it counts as a hang.
TIMEOUT = 60.0

#: Attack code that defines `prog(name, n)`: a VM function calling the packed function `name`
#: with its `n` inputs and returning the result.
CALL_ONE = """
import relaxvm as rx
def prog(name, n=1):
    ib = rx.ExecBuilder()
    with ib.function("f", num_inputs=n):
        ib.emit_call(name, args=[ib.r(i) for i in range(n)], dst=ib.r(n))
        ib.emit_ret(ib.r(n))
    return rx.VirtualMachine(ib.get())["f"]
"""

_PRELUDE = """\
import sys, traceback
def _attack_end(kind, text):
    sys.stdout.flush()
    print("\\nATTACK-END", kind, str(text).replace("\\n", " | ")[:2000], flush=True)
try:
    exec(compile(_ATTACK_CODE, "<attack>", "exec"), {"__name__": "__attack__"})
except BaseException as e:
    _attack_end(type(e).__name__, e)
else:
    _attack_end("ok", "")
"""


@dataclasses.dataclass
class Outcome:
    """How an attack's process ended."""

    returncode: int | None  # None: killed by the timeout
    stdout: str
    stderr: str

    @property
    def signal(self) -> str | None:
        """The signal that killed the process, by name, or None."""
        if self.returncode is not None and self.returncode < 0:
            return signal.Signals(-self.returncode).name
        return None

    @property
    def end(self) -> tuple[str, str]:
        """The attack's last line: ('ok', '') or (exception type name, message)."""
        for line in reversed(self.stdout.splitlines()):
            if line.startswith("ATTACK-END "):
                kind, _, text = line[len("ATTACK-END ") :].partition(" ")
                return kind, text
        return ("no end line", "")

    def describe(self) -> str:
        how = "timed out" if self.returncode is None else f"exit {self.returncode} ({self.signal or 'no signal'})"
        return f"{how}\n--- stdout\n{self.stdout[-3000:]}\n--- stderr\n{self.stderr[-3000:]}"

    def assert_ended_by_itself(self) -> None:
        """No signal, no timeout, no panic message, and the end line was reached."""
        assert self.returncode is not None, "the attack hung:\n" + self.describe()
        assert self.signal is None, "the attack died by signal:\n" + self.describe()
        assert "panicked at" not in self.stderr, "a Rust panic reached the user:\n" + self.describe()
        assert self.end[0] != "no end line", "the attack ended without its end line:\n" + self.describe()

    def assert_raises(self, exc: str | tuple[str, ...], match: str = "") -> None:
        """The attack ended with an exception of the type named `exc` whose message matches."""
        self.assert_ended_by_itself()
        kinds = (exc,) if isinstance(exc, str) else exc
        kind, text = self.end
        assert kind in kinds, f"expected {kinds}, got {kind}: {text}\n" + self.describe()
        assert re.search(match, text), f"{kind} message {text!r} does not match {match!r}"

    def assert_ok(self, expected_stdout: str | None = None) -> None:
        """The attack finished without an exception (and printed `expected_stdout` first, if given)."""
        self.assert_ended_by_itself()
        assert self.end[0] == "ok", f"expected success, got {self.end}\n" + self.describe()
        if expected_stdout is not None:
            printed = self.stdout.rsplit("ATTACK-END", 1)[0].strip()
            assert printed == expected_stdout.strip(), self.describe()


def _limit(memory: int) -> None:
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def run_attack(code: str, *, memory: int = MEMORY_CAP, timeout: float = TIMEOUT, env: dict | None = None) -> Outcome:
    """Runs `code` (dedented) in a child Python with `memory` bytes of address space."""
    source = f"_ATTACK_CODE = {textwrap.dedent(code)!r}\n" + _PRELUDE
    child_env = {**os.environ, "RUST_BACKTRACE": "0", **(env or {})}
    try:
        done = subprocess.run(
            [sys.executable, "-c", source],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=child_env,
            preexec_fn=lambda: _limit(memory),
        )
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        err = e.stderr.decode() if isinstance(e.stderr, bytes) else (e.stderr or "")
        return Outcome(None, out, err)
    return Outcome(done.returncode, done.stdout, done.stderr)
