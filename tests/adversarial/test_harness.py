"""The attack harness itself tells every way a process can end apart."""

import pytest
from attack import run_attack


def test_a_value_an_exception_a_signal_and_a_hang_are_told_apart():
    run_attack("print(6 * 7)").assert_ok("42")
    run_attack("raise MemoryError('too big')").assert_raises("MemoryError", "too big")
    died = run_attack("import os, signal; os.kill(os.getpid(), signal.SIGSEGV)")
    assert died.signal == "SIGSEGV"
    with pytest.raises(AssertionError, match="died by signal"):
        died.assert_ended_by_itself()
    hung = run_attack("import time; time.sleep(30)", timeout=1)
    with pytest.raises(AssertionError, match="hung"):
        hung.assert_ended_by_itself()
    panicked = run_attack("import sys; sys.stderr.write(\"thread 'main' panicked at x.rs\")")
    with pytest.raises(AssertionError, match="panic"):
        panicked.assert_ended_by_itself()


def test_the_memory_cap_holds():
    run_attack("b = bytearray(1 << 34)", memory=1 << 30).assert_raises("MemoryError")
