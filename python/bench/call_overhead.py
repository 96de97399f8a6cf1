"""Call overhead of the Python binding: ``python python/bench/call_overhead.py``.

Prints the best time per call (ns) over several repeats for:

* ``id(int)`` / ``id(tensor)`` / ``id(ndarray)``: ``vm["id"](x)`` where ``id`` is ``ret %0``;
* ``move(...)``: the same through the native builtin ``vm.builtin.move``;
* ``op(ndarray)``: ``vm.op.add`` on 4 floats (the GIL is released around native tensor ops);
* ``callback(int)``: a bytecode function calling a registered Python function ``lambda x: x``;
  ``callback - id`` is the VM -> Python callback overhead;
* ``python noop``: a plain Python function call, the floor any binding pays.

Set ``OPENBLAS_NUM_THREADS=1`` so numpy's idle threads do not compete for the CPU.
"""

import timeit

import numpy as np

import relaxvm as rx


def main(number: int = 200_000, repeat: int = 9) -> None:
    rx.register_func("bench.py_id", lambda x: x, override=True)
    ib = rx.ExecBuilder()
    with ib.function("id", num_inputs=1):
        ib.emit_ret(ib.r(0))
    with ib.function("move", num_inputs=1):
        ib.emit_call("vm.builtin.move", args=[ib.r(0)], dst=ib.r(1))
        ib.emit_ret(ib.r(1))
    with ib.function("op", num_inputs=1):
        ib.emit_call("vm.op.add", args=[ib.r(0), ib.r(0)], dst=ib.r(1))
        ib.emit_ret(ib.r(1))
    with ib.function("callback", num_inputs=1):
        ib.emit_call("bench.py_id", args=[ib.r(0)], dst=ib.r(1))
        ib.emit_ret(ib.r(1))
    vm = rx.VirtualMachine(ib.get())

    def noop(x):
        return x

    env = {
        "ident": vm["id"],
        "move": vm["move"],
        "op": vm["op"],
        "cb": vm["callback"],
        "noop": noop,
        "t": rx.tensor(np.arange(4.0)),
        "a": np.arange(4.0),
    }
    cases = [
        ("python noop", "noop(1)"),
        ("id(int)", "ident(1)"),
        ("id(tensor)", "ident(t)"),
        ("id(ndarray)", "ident(a)"),
        ("move(int)", "move(1)"),
        ("move(ndarray)", "move(a)"),
        ("op(ndarray)", "op(a)"),
        ("callback(int)", "cb(1)"),
    ]
    best = {}
    for label, stmt in cases:
        best[label] = min(timeit.repeat(stmt, globals=env, number=number, repeat=repeat)) / number * 1e9
        print(f"{label:15s} {best[label]:8.1f} ns")
    print(f"{'callback - id':15s} {best['callback(int)'] - best['id(int)']:8.1f} ns")


if __name__ == "__main__":
    main()
