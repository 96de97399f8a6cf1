"""VirtualMachine.profile: counts, times, the overhead row, the report's forms, errors."""

import csv
import io
import json

import numpy as np
import pytest

import relaxvm as rx


def program():
    ib = rx.ExecBuilder()
    # square(x) = x * x, called from main in a loop n times, plus an if/else and a closure.
    with ib.function("square", num_inputs=1):
        ib.emit_call("vm.op.mul", args=[ib.r(0), ib.r(0)], dst=ib.r(1))
        ib.emit_ret(ib.r(1))
    with ib.function("main", num_inputs=2, param_names=["x", "n"]):
        ib.emit_call("vm.builtin.copy", args=[ib.r(1)], dst=ib.r(2))  # counter
        ib.emit_call("vm.builtin.copy", args=[ib.r(0)], dst=ib.r(3))  # acc
        ib.emit_if(ib.r(2), 4)  # loop: while counter
        ib.emit_call("square", args=[ib.r(3)], dst=ib.r(3))
        ib.emit_call("vm.builtin.int.sub", args=[ib.r(2), ib.imm(1)], dst=ib.r(2))
        ib.emit_goto(-3)
        ib.emit_call("vm.builtin.make_closure", args=[ib.f("square")], dst=ib.r(4))
        ib.emit_call("vm.builtin.invoke_closure", args=[ib.vm_state(), ib.r(4), ib.r(3)], dst=ib.r(5))
        ib.emit_ret(ib.r(5))
    return ib.get()


def rows(report):
    return {r.name: r for r in report.rows}


def test_profile_needs_the_flag():
    vm = rx.VirtualMachine(program(), rx.cpu())
    with pytest.raises(rx.VMValueError, match="profile=True"):
        vm.profile("main", np.ones(2, "float32"), 3)


@pytest.mark.parametrize("n", [0, 1, 5])
def test_counts_are_the_executed_calls(n):
    vm = rx.VirtualMachine(program(), rx.cpu(), profile=True)
    report = vm.profile("main", np.ones(2, "float32"), n)
    r = rows(report)
    assert r["vm.builtin.copy"].count == 2
    assert r["vm.builtin.int.sub"].count == n if n else "vm.builtin.int.sub" not in r
    # square: a row for its n calls from the loop's call instruction (the closure's call comes
    # from a builtin, invoke_closure, whose time excludes it); its multiply runs n + 1 times
    assert r["square"].count == n and r["square"].kind == "vm" if n else "square" not in r
    assert r["vm.op.mul"].count == n + 1 and r["vm.op.mul"].kind == "builtin"
    assert r["vm.builtin.invoke_closure"].count == 1
    assert r["(vm overhead)"].kind == "overhead"
    assert report.function == "main" and report.total_ns > 0
    assert r["vm.op.mul"].shapes == ["float32(2,), float32(2,)"]
    # leaf and overhead rows add up to the whole call
    assert abs(sum(x.percent for x in report.rows if x.kind != "vm") - 100.0) < 1.0
    for x in report.rows:
        assert x.min_ns <= x.mean_ns <= x.max_ns or x.count == 0


def test_recursion_and_python_callbacks():
    calls = []

    def cb(x):
        calls.append(x)
        return x

    rx.register_func("test.profile.cb", cb, override=True)
    ib = rx.ExecBuilder()
    with ib.function("fact", num_inputs=1):  # fact(n) = n ? n * fact(n - 1) : 1, via the callback
        ib.emit_if(ib.r(0), 5)
        ib.emit_call("vm.builtin.int.sub", args=[ib.r(0), ib.imm(1)], dst=ib.r(2))
        ib.emit_call("fact", args=[ib.r(2)], dst=ib.r(3))
        ib.emit_call("vm.builtin.int.mul", args=[ib.r(0), ib.r(3)], dst=ib.r(4))
        ib.emit_ret(ib.r(4))
        ib.emit_call("test.profile.cb", args=[ib.imm(1)], dst=ib.r(1))
        ib.emit_ret(ib.r(1))
    vm = rx.VirtualMachine(ib.get(), profile=True)
    report = vm.profile("fact", 5)
    r = rows(report)
    assert r["fact"].count == 5  # the entry call is not a row
    assert r["vm.builtin.int.mul"].count == 5
    assert r["test.profile.cb"].count == 1 and r["test.profile.cb"].kind == "python"
    assert len(calls) == 1


def test_forms_hold_the_same_numbers(tmp_path):
    vm = rx.VirtualMachine(program(), rx.cpu(), profile=True)
    report = vm.profile("main", x=np.ones(2, "float32"), n=3)
    by_name = rows(report)
    parsed = list(csv.DictReader(io.StringIO(report.csv())))
    assert [p["name"] for p in parsed] == [r.name for r in report.rows]
    for p in parsed:
        assert int(p["count"]) == by_name[p["name"]].count
        assert int(p["total_ns"]) == by_name[p["name"]].total_ns
    doc = json.loads(report.json())
    assert doc["function"] == "main" and doc["total_ns"] == report.total_ns
    assert {c["name"]: c["count"] for c in doc["calls"]} == {r.name: r.count for r in report.rows}
    path = tmp_path / "trace.json"
    report.save_trace(str(path))
    events = json.loads(path.read_text())["traceEvents"]
    assert all(e["ph"] == "X" for e in events)
    assert events[0]["name"] == "main"
    calls = events[1:]
    leaf_and_vm = {r.name: r.count for r in report.rows if r.kind != "overhead"}
    assert {n: sum(1 for e in calls if e["name"] == n) for n in leaf_and_vm} == leaf_and_vm
    square = [e for e in calls if e["name"] == "vm.op.mul"]
    assert all(e["args"]["depth"] == 2 and e["args"]["caller"] == "square" and e["args"]["pc"] == 0 for e in square)
    text = report.table(sort_by="count", top=2)
    assert text.count("\n") == 4 and "calls" in text
    assert str(report) == report.table()
    with pytest.raises(ValueError, match="sort_by"):
        report.table(sort_by="bogus")


def test_an_error_mid_run_raises_and_leaves_the_vm_usable():
    def boom(x):
        raise ZeroDivisionError("planted")

    rx.register_func("test.profile.boom", boom, override=True)
    ib = rx.ExecBuilder()
    with ib.function("main", num_inputs=1):
        ib.emit_call("test.profile.boom", args=[ib.r(0)], dst=ib.r(1))
        ib.emit_ret(ib.r(1))
    with ib.function("ok", num_inputs=1):
        ib.emit_ret(ib.r(0))
    seen = []
    vm = rx.VirtualMachine(ib.get(), profile=True)
    vm.set_instrument(lambda *a: seen.append(a[1]))
    with pytest.raises(ZeroDivisionError, match="planted"):
        vm.profile("main", 1)
    assert vm["ok"](7) == 7
    assert vm.profile("ok", 7).rows[-1].kind == "overhead"
    # the user's instrument was set aside for the runs and is back
    seen.clear()
    with pytest.raises(ZeroDivisionError):
        vm["main"](1)
    assert seen == ["test.profile.boom"]
