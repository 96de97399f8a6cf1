"""Converting a Python argument is bounded and fails cleanly on memory (#31 finding 04): a list
whose `__getitem__` appends grew while it was converted until memory ran out, and then a Rust
allocation aborted (SIGABRT) or pyo3 panicked on a NULL from CPython. Growth past the length
first read is refused, and the vectors conversion builds are reserved fallibly (MemoryError).
Each runs in a child process with a memory cap and a timeout (see attack.py)."""

from attack import run_attack

IDENT = """
import relaxvm as rx
ib = rx.ExecBuilder()
with ib.function("ident", num_inputs=1):
    ib.emit_ret(ib.r(0))
f = rx.VirtualMachine(ib.get())["ident"]
"""


def test_a_list_growing_while_it_is_converted_is_refused():
    run_attack(
        IDENT
        + """
class L(list):
    def __getitem__(self, i):
        self.append(i)
        return i
f(L([1]))
""",
        timeout=60,
    ).assert_raises("ValueError", "grows while it is converted: it had 1 items")


def test_a_nested_list_growing_while_it_is_converted_is_refused():
    run_attack(
        IDENT
        + """
class L(list):
    def __getitem__(self, i):
        self.append(i)
        return list.__getitem__(self, i)
f((1, [2, L([3, 4])]))
""",
        timeout=60,
    ).assert_raises("ValueError", "grows while it is converted")


def test_a_list_shrinking_while_it_is_converted_converts_what_is_left():
    run_attack(
        IDENT
        + """
class L(list):
    def __getitem__(self, i):
        v = list.__getitem__(self, i)
        self.pop()
        return v
print(f(L([1, 2, 3, 4])))
""",
        timeout=60,
    ).assert_ok("(1, 2)")


def test_running_out_of_memory_while_converting_is_a_memory_error():
    # A list of 2**27 references to one int (1 GiB) needs 2 GiB of VM values: under the cap
    # the list fits and the VM values do not.
    run_attack(
        IDENT
        + """
big = [0] * (1 << 27)
f(big)
""",
        memory=3 << 30,
        timeout=120,
    ).assert_raises("MemoryError", "converting a tuple or list")


def test_running_out_of_memory_returning_a_big_tuple_is_a_memory_error():
    # 10**8 items: the argument converts (800 MB list, 1.6 GB of VM values), and the result's
    # 800 MB of Python references no longer fit under the cap.
    run_attack(
        IDENT
        + """
f([0] * 100_000_000)
""",
        memory=3 << 30,
        timeout=120,
    ).assert_raises("MemoryError", "converting a tuple or list of 100000000 items")
