"""rx.ExecBuilder: argument handles, constants, scopes, locations, check and warnings."""

import numpy as np
import pytest

import relaxvm as rx


def test_handles_are_hashable_comparable_and_readable():
    ib = rx.ExecBuilder()
    assert ib.r(2) == ib.r(2) and ib.r(2) != ib.r(3)
    assert ib.r(1) != ib.imm(1) != ib.c(1)
    assert len({ib.r(0), ib.r(0), ib.imm(0), ib.c(0), ib.vm_state(), ib.void_arg()}) == 5
    assert [repr(h) for h in [ib.r(2), ib.imm(-3), ib.c(0), ib.vm_state(), ib.void_arg(), ib.f("g")]] == [
        "r(2)",
        "imm(-3)",
        "c(0)",
        "vm_state()",
        "void_arg()",
        'f("g")',
    ]
    assert (ib.r(4).kind, ib.r(4).value) == ("reg", 4)
    assert (ib.imm(-7).kind, ib.imm(-7).value) == ("imm", -7)
    assert (ib.vm_state().kind, ib.vm_state().value) == ("vm_state", None)
    assert ib.f("g") == ib.f("g") and ib.f("g").kind == "func"


@pytest.mark.parametrize(
    "a, b, equal",
    [
        ("s", "s", True),
        ("s", "t", False),
        (1.5, 1.5, True),
        ((1, 2), rx.Shape([1, 2]), False),  # a tuple constant (TVM's Array) is not a shape
        ((1, 2), [1, 2], True),
        ((1, 2), (1, 3), False),
        (rx.DataType("int8"), "int8", False),  # a dtype and a string are different constants
        (np.arange(3), np.arange(3), True),
        (np.arange(3, dtype="int32"), np.arange(3, dtype="int64"), False),
        (rx.cpu(0), rx.cpu(0), True),
    ],
)
def test_convert_constant_dedups_equal_constants(a, b, equal):
    ib = rx.ExecBuilder()
    assert (ib.convert_constant(a) == ib.convert_constant(b)) is equal


def test_constants_do_not_alias_caller_memory():
    a = np.zeros(2, "float32")
    ib = rx.ExecBuilder()
    with ib.function("main", num_inputs=0):
        ib.emit_call("vm.builtin.move", args=[a], dst=ib.r(0))
        ib.emit_ret(ib.r(0))
    a[:] = 5
    out = rx.VirtualMachine(ib.get())["main"]()
    assert out.numpy().tolist() == [0.0, 0.0]


def test_tensors_inside_tuple_constants_do_not_alias_caller_memory():
    a, t = np.zeros(2, "float32"), rx.tensor(np.zeros(2, "float32"))
    ib = rx.ExecBuilder()
    with ib.function("main", num_inputs=0):
        ib.emit_call("vm.builtin.copy", args=[ib.convert_constant((a, [t]))], dst=ib.r(0))
        ib.emit_ret(ib.r(0))
    ex = ib.get()
    a[:] = 5
    t[:] = 7  # the caller's tensor stays writeable: the constant is a copy
    got_a, (got_t,) = rx.VirtualMachine(ex)["main"]()
    assert got_a.numpy().tolist() == [0.0, 0.0] and got_t.numpy().tolist() == [0.0, 0.0]


def test_argument_kinds_in_emit_call():
    ib = rx.ExecBuilder()
    with ib.function("main", num_inputs=1):
        ib.emit_call(
            "test.vm.move",
            args=[
                ib.r(0),
                7,
                (2, 3),
                np.ones(1, "int8"),
                rx.tensor([1.0]),
                rx.DataType("int32"),
                rx.Shape([4]),
                "s",
                2.5,
                None,
                rx.cpu(1),
                True,
            ],
            dst=ib.r(1),
        )
        ib.emit_ret(ib.r(1))
    text = ib.get().as_text()
    assert "in: %0, i7, c[0], c[1], c[2], c[3], c[4], c[5], c[6], %void, c[7], i1" in text
    assert ".const c[0] = shape (2, 3)" in text
    assert ".const c[3] = dtype int32" in text
    assert '.const c[5] = str "s"' in text
    assert ".const c[7] = device cpu:1" in text


def test_list_argument_is_rejected():
    ib = rx.ExecBuilder()
    with ib.function("main", num_inputs=0):
        with pytest.raises(TypeError, match="use a tuple"):
            ib.emit_call("vm.builtin.move", args=[[1, 2]])
        ib.emit_call("vm.builtin.null_value", dst=ib.r(0))
        ib.emit_ret(ib.r(0))


def test_dst_forms():
    ib = rx.ExecBuilder()
    with ib.function("main", num_inputs=0):
        ib.emit_call("vm.builtin.null_value", dst=0)
        ib.emit_call("vm.builtin.null_value", dst=ib.void_arg())
        with pytest.raises(TypeError, match="register"):
            ib.emit_call("vm.builtin.null_value", dst=ib.imm(1))
        ib.emit_ret(0)
    assert "dst: void" in ib.get().as_text()


def test_emit_outside_a_function_is_an_error():
    ib = rx.ExecBuilder()
    for emit in [
        lambda: ib.emit_call("vm.builtin.move"),
        lambda: ib.emit_ret(ib.r(0)),
        lambda: ib.emit_goto(1),
        lambda: ib.emit_if(ib.r(0), 1),
    ]:
        with pytest.raises(ValueError, match="function scope"):
            emit()


def test_nested_functions_and_get_inside_are_errors():
    ib = rx.ExecBuilder()
    with ib.function("a", num_inputs=0):
        with pytest.raises(ValueError, match="nest"):
            ib.function("b")
        with pytest.raises(ValueError, match="function scope"):
            ib.get()
        ib.emit_call("vm.builtin.null_value", dst=ib.r(0))
        ib.emit_ret(ib.r(0))
    ib.get()


def test_check_error_for_unwritten_register():
    # The check runs when the function closes (the end of the with block).
    ib = rx.ExecBuilder()
    with pytest.raises(rx.CheckError, match=r'"main", instruction 0 .*reads %5') as info:
        with ib.function("main", num_inputs=1):
            ib.emit_call("vm.builtin.move", args=[ib.r(5)], dst=ib.r(1))
            ib.emit_ret(ib.r(1))
    e = info.value
    assert (e.function, e.func, e.pc, e.kind) == ("main", "main", 0, "undefined_register")
    assert e.instr == "call  vm.builtin.move  in: %5  dst: %1"
    assert e.location is None


def test_check_error_names_the_location_and_kind():
    ib = rx.ExecBuilder()
    with pytest.raises(rx.CheckError, match=r'at "model.py":7:3: reads %1, which is not written on every path') as info:
        with ib.function("main", num_inputs=1):
            ib.emit_if(ib.r(0), 2)
            ib.emit_call("vm.builtin.move", args=[ib.r(0)], dst=ib.r(1))
            ib.emit_ret(ib.r(1), loc=rx.Location.file("model.py", 7, 3))
    e = info.value
    assert (e.function, e.pc, e.kind, e.location) == ("main", 2, "maybe_unassigned", '"model.py":7:3')


def test_check_error_for_missing_ret():
    ib = rx.ExecBuilder()
    with pytest.raises(rx.CheckError, match="runs off the end") as info:
        with ib.function("main", num_inputs=1):
            ib.emit_call("vm.builtin.move", args=[ib.r(0)], dst=ib.r(1))
        ib.get()
    assert (info.value.function, info.value.pc, info.value.kind) == ("main", 0, "runs_off_end")


def test_duplicate_function_is_a_check_error():
    ib = rx.ExecBuilder()
    with ib.function("f", num_inputs=1):
        ib.emit_ret(ib.r(0))
    with pytest.raises(rx.CheckError, match="already defined") as info:
        ib.function("f", num_inputs=1)
    # Misuse of the builder, not a verifier finding: no structured detail.
    assert (info.value.function, info.value.pc, info.value.kind) == (None, None, None)


def test_body_exception_wins_over_scope_error():
    ib = rx.ExecBuilder()
    with pytest.raises(ZeroDivisionError):
        with ib.function("main", num_inputs=0):
            _ = 1 / 0


def test_unused_input_warns():
    ib = rx.ExecBuilder()
    with ib.function("main", num_inputs=3):
        ib.emit_call("vm.builtin.move", args=[ib.r(0)], dst=ib.r(3))
        ib.emit_call("vm.builtin.move", args=[ib.r(2)], dst=ib.r(4))
        ib.emit_ret(ib.r(4))
    with pytest.warns(UserWarning, match="main") as record:
        ib.get()
    assert any("1" in str(w.message) for w in record)
    assert record[0].filename == __file__  # the warning points at the call to get()


def test_declare_function():
    ib = rx.ExecBuilder()
    h = ib.declare_function("later", kind="bytecode")
    assert repr(h) == 'f("later")'
    ib.declare_function("vm.builtin.move")
    with pytest.raises(ValueError, match="kind"):
        ib.declare_function("x", kind="native")
    with ib.function("main", num_inputs=1):
        ib.emit_call("later", args=[ib.r(0)], dst=ib.r(1))
        ib.emit_ret(ib.r(1))
    with ib.function("later", num_inputs=1):
        ib.emit_call("vm.builtin.move", args=[ib.r(0)], dst=ib.r(1))
        ib.emit_ret(ib.r(1))
    ex = ib.get()
    assert ex.function_names == ["later", "main"] or ex.function_names == ["main", "later"]
    assert rx.VirtualMachine(ex)["main"](9) == 9


def test_param_names():
    ib = rx.ExecBuilder()
    with ib.function("main", num_inputs=2, param_names=["x", "y"]):
        ib.emit_call("vm.builtin.int.add", args=[ib.r(0), ib.r(1)], dst=ib.r(2))
        ib.emit_ret(ib.r(2))
    ex = ib.get()
    assert ex.param_names("main") == ["x", "y"]
    assert ex.num_inputs("main") == 2
    assert "params=(x, y)" in ex.as_text()
    with pytest.raises(KeyError):
        ex.param_names("nope")
    ib2 = rx.ExecBuilder()
    with pytest.raises(rx.CheckError, match="parameter name"):
        ib2.function("main", num_inputs=2, param_names=["x"])


def test_locations():
    f = rx.Location.file("model.py", 4, 2)
    n = rx.Location.name("add")
    assert str(f) == '"model.py":4:2'
    assert str(rx.Location.callsite(n, f)) == 'callsite("add" at "model.py":4:2)'
    assert str(rx.Location.fused([f, n])) == 'fused["model.py":4:2, "add"]'
    assert f == rx.Location.file("model.py", 4, 2) and hash(f) == hash(rx.Location.file("model.py", 4, 2))
    assert f != n
    assert "Location(" in repr(f)
    ib = rx.ExecBuilder()
    with ib.function("main", num_inputs=1):
        ib.emit_call("vm.builtin.move", args=[ib.r(0)], dst=ib.r(1), loc=f)
        ib.emit_goto(1, loc=n)
        ib.emit_if(ib.r(1), 1, loc=rx.Location.callsite(n, f))
        ib.emit_ret(ib.r(1), loc=rx.Location.fused([f, n]))
    text = ib.get().as_text()
    assert 'loc("model.py":4:2)' in text
    assert 'loc(fused["model.py":4:2, "add"])' in text


def test_f_handle_passes_a_function():
    ib = rx.ExecBuilder()
    with ib.function("double", num_inputs=1):
        ib.emit_call("vm.builtin.int.mul", args=[ib.r(0), ib.imm(2)], dst=ib.r(1))
        ib.emit_ret(ib.r(1))
    with ib.function("main", num_inputs=1):
        ib.emit_call("vm.builtin.invoke_closure", args=[ib.vm_state(), ib.f("double"), ib.r(0)], dst=ib.r(1))
        ib.emit_ret(ib.r(1))
    assert rx.VirtualMachine(ib.get())["main"](21) == 42
