"""Executables that call Python-registered functions work in other processes: the pickle
records each importable function's path and loading registers it again; export_library writes
relaxvm's format, which load_module reads back."""

import os
import pickle
import subprocess
import sys

import pickled_funcs
import pytest

import relaxvm as rx

HERE = os.path.dirname(os.path.abspath(__file__))


def run_child(code: str, data: bytes) -> subprocess.CompletedProcess:
    """Runs ``code`` in a fresh interpreter that can import this folder, with ``data`` on stdin."""
    env = dict(os.environ, PYTHONPATH=HERE)
    return subprocess.run([sys.executable, "-c", code], input=data, capture_output=True, env=env, timeout=120)


def test_a_pickled_executable_registers_its_python_functions_in_another_process():
    data = pickle.dumps(pickled_funcs.build())
    code = (
        "import pickle, sys, numpy as np, relaxvm as rx\n"
        "assert rx.get_global_func('test.pickled.scale', allow_missing=True) is None\n"
        "ex = pickle.loads(sys.stdin.buffer.read())\n"
        "print(rx.VirtualMachine(ex)['main'](np.arange(3.0), 2).numpy().tolist())\n"
    )
    done = run_child(code, data)
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout.decode().strip() == "[0.0, 2.0, 4.0]"


def test_a_function_registered_by_name_is_registered_again_by_its_import_path():
    rx.register_func("test.pickled.double", pickled_funcs.double, override=True)
    ib = rx.ExecBuilder()
    with ib.function("main", num_inputs=1):
        ib.emit_call("test.pickled.double", args=[ib.r(0)], dst=ib.r(1))
        ib.emit_ret(ib.r(1))
    code = (
        "import pickle, sys, numpy as np, relaxvm as rx\n"
        "ex = pickle.loads(sys.stdin.buffer.read())\n"
        "assert rx.get_global_func('test.pickled.double').name == 'test.pickled.double'\n"
        "print(rx.VirtualMachine(ex)['main'](np.arange(2.0)).numpy().tolist())\n"
    )
    done = run_child(code, pickle.dumps(ib.get()))
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout.decode().strip() == "[0.0, 2.0]"


def test_a_function_that_cannot_be_imported_there_is_named_missing_by_the_vm():
    rx.register_func("test.pickled.double", pickled_funcs.double, override=True)
    ib = rx.ExecBuilder()
    with ib.function("main", num_inputs=1):
        ib.emit_call("test.pickled.double", args=[ib.r(0)], dst=ib.r(1))
        ib.emit_ret(ib.r(1))
    code = "import pickle, sys, relaxvm as rx\nrx.VirtualMachine(pickle.loads(sys.stdin.buffer.read()))"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # pickled_funcs is not importable
    done = subprocess.run([sys.executable, "-c", code], input=pickle.dumps(ib.get()), capture_output=True, env=env)
    assert done.returncode == 1, done.stderr.decode()
    assert "test.pickled.double" in done.stderr.decode() and "VMKeyError" in done.stderr.decode()


def test_a_function_registered_in_the_loading_process_is_kept():
    data = pickle.dumps(pickled_funcs.build())
    code = (
        "import pickle, sys, numpy as np, relaxvm as rx\n"
        "rx.register_func('test.pickled.scale', lambda x, k: rx.tensor(np.asarray(x) + k))\n"
        "ex = pickle.loads(sys.stdin.buffer.read())\n"
        "print(rx.VirtualMachine(ex)['main'](np.arange(3.0), 2).numpy().tolist())\n"
    )
    done = run_child(code, data)
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout.decode().strip() == "[2.0, 3.0, 4.0]"


def test_a_closure_is_not_recorded_and_the_vm_names_it_missing(unique_name):
    name = unique_name()
    k = 3
    rx.register_func(name, lambda x: x * k)
    ib = rx.ExecBuilder()
    with ib.function("main", num_inputs=1):
        ib.emit_call(name, args=[ib.r(0)], dst=ib.r(1))
        ib.emit_ret(ib.r(1))
    ex = ib.get()
    assert pickle.loads(pickle.dumps(ex)).as_text() == ex.as_text()  # works here, as before
    done = run_child(
        "import pickle, sys, relaxvm as rx\nrx.VirtualMachine(pickle.loads(sys.stdin.buffer.read()))", pickle.dumps(ex)
    )
    assert done.returncode == 1 and name in done.stderr.decode()


def test_export_library_writes_relaxvm_format(tmp_path):
    ex = pickled_funcs.build()
    path = tmp_path / "exec.so"  # TVM users name it .so; the bytes are relaxvm's format
    ex.export_library(str(path))
    loaded = rx.load_module(str(path))
    assert loaded["as_text"]() == ex.as_text() == loaded.as_text()
    assert path.read_bytes()[:4] == b"\x89RVX"
    with pytest.raises(ValueError, match="fcompile does not apply"):
        ex.export_library(str(path), fcompile=lambda *a: None)
    with pytest.raises(TypeError, match="unexpected keyword argument cc"):
        ex.export_library(str(path), cc="g++")
    with pytest.raises(KeyError, match="as_text, as_python and stats"):
        loaded["main"]
