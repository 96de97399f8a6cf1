"""Calls back into the VM from Python callbacks nest on the thread's native stack: on a thread
with a small stack, deep re-entry ends with an error instead of a SIGSEGV; and an instrument
does not turn bytecode recursion into native re-entry."""

from attack import run_attack

REENTER = """
import threading, relaxvm as rx
ib = rx.ExecBuilder()
with ib.function("f", num_inputs=1):
    ib.emit_call("test.again", args=[ib.r(0)], dst=ib.r(1))
    ib.emit_ret(ib.r(1))
@rx.register_func("test.again", override=True)
def again(n):
    # One VM per level: a VM refuses to be re-entered from its own callbacks.
    return n if n == 0 else vms[n % len(vms)]["f"](n - 1)
exe = ib.get()
vms = [rx.VirtualMachine(exe) for _ in range(3000)]
vm = vms[0]
outcome = []
def body():
    try:
        outcome.append(vm["f"](2999))
    except BaseException as e:
        outcome.append(e)
threading.stack_size(STACK)
t = threading.Thread(target=body)
t.start()
t.join()
e = outcome[0]
print(type(e).__name__, "native stack" in str(e) or "recursion" in str(e).lower())
"""


def test_deep_reentry_on_a_128_kib_thread_is_an_error():
    out = run_attack("STACK = 128 << 10\n" + REENTER)
    out.assert_ok()
    printed = out.stdout.split("ATTACK-END")[0].split()
    assert printed[-1] == "True", out.describe()


def test_deep_reentry_on_an_8_mib_thread_is_an_error_too():
    out = run_attack("STACK = 8 << 20\n" + REENTER)
    out.assert_ok()
    assert out.stdout.split("ATTACK-END")[0].split()[-1] == "True", out.describe()


def test_a_stack_limit_kept_from_another_thread_is_not_applied():
    # Each VM is called on the main thread first (where it keeps the main thread's stack limit,
    # found once per thread), then re-entered deeply on a 128 KiB thread: the limit checked
    # there is the small thread's, so the nesting still ends with the error.
    warm = "for m in vms:\n    assert m['f'](0) == 0\nt = threading.Thread(target=body)"
    script = ("STACK = 128 << 10\n" + REENTER).replace("t = threading.Thread(target=body)", warm, 1)
    assert warm in script
    out = run_attack(script)
    out.assert_ok()
    assert out.stdout.split("ATTACK-END")[0].split()[-1] == "True", out.describe()


def test_instrumented_bytecode_recursion_is_not_reentry():
    run_attack(
        """
import relaxvm as rx
ib = rx.ExecBuilder()
with ib.function("down", num_inputs=1):
    ib.emit_call("vm.builtin.int.le", args=[ib.r(0), ib.imm(0)], dst=ib.r(1))
    ib.emit_if(ib.r(1), 2)
    ib.emit_ret(ib.r(0))
    ib.emit_call("vm.builtin.int.sub", args=[ib.r(0), ib.imm(1)], dst=ib.r(2))
    ib.emit_call("down", args=[ib.r(2)], dst=ib.r(1))
    ib.emit_ret(ib.r(1))
vm = rx.VirtualMachine(ib.get(), max_reentry=200)
calls = []
vm.set_instrument(lambda func, name, before, ret, *args: calls.append(name) if name == "down" else None)
print(vm["down"](500), len(calls))
"""
    ).assert_ok("0 1000")
