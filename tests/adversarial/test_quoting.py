"""Names and strings drawn from all of Unicode survive `as_python()` (valid Python that rebuilds
the executable) and the text form of signatures (one quoting rule, the VM's, on both sides)."""

import random

import relaxvm as rx
from relaxvm import types as T

#: Every Unicode scalar value (surrogates cannot be in a str that Rust holds).
ALL = [chr(c) for c in range(0x110000) if not 0xD800 <= c < 0xE000]


def random_names(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    controls = [chr(c) for c in range(0x20)] + ["\x7f", "\x85", "\u2028", "\u2029", '"', "\\", "'"]
    return [
        "".join(rng.choice(controls if rng.random() < 0.5 else ALL) for _ in range(rng.randint(1, 6))) for _ in range(n)
    ]


def rebuild(source: str) -> rx.Executable:
    scope: dict = {}
    exec(compile(source, "<as_python>", "exec"), scope)
    return scope["ib"].get()


def test_as_python_of_every_character_compiles_and_rebuilds_the_same_executable():
    ib = rx.ExecBuilder()
    # All of Unicode in string constants, 4096 characters each.
    consts = [ib.convert_constant("".join(ALL[i : i + 4096])) for i in range(0, len(ALL), 4096)]
    for k, name in enumerate(random_names(40, seed=1)):
        with ib.function(f"f{k}{name}", num_inputs=0):
            ib.emit_call(
                "vm.builtin.make_tuple",
                args=[consts[k % len(consts)]],
                dst=ib.r(0),
                loc=rx.Location.file(f"model{name}.py", k + 1, 2),
            )
            ib.emit_ret(ib.r(0))
    exe = ib.get()
    again = rebuild(exe.as_python())
    assert again.as_text() == exe.as_text()
    assert again.function_names == exe.function_names


def test_signature_names_print_the_same_in_python_and_in_the_vm():
    for name in random_names(300, seed=2):
        sig = T.Signature([(name, T.int64), ("plain", T.Dict({name: T.float32}))], T.int64)
        ib = rx.ExecBuilder()
        with ib.function("f", signature=sig):
            ib.emit_call("vm.builtin.make_tuple", args=[ib.r(0), ib.r(1)], dst=ib.r(2))
            ib.emit_ret(ib.r(2))
        assert ib.get().signature_text("f") == str(sig), repr(name)
