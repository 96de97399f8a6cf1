"""The package's public surface: __all__, stubs, docstrings."""

import ast
import inspect
import pathlib
import pydoc

import relaxvm as rx

PKG = pathlib.Path(rx.__file__).parent


def stub_names():
    tree = ast.parse((PKG / "_relaxvm.pyi").read_text())
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef)):
            names.add(node.name)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return names


# Exports written in Python (typed by their own source, not by the extension's stub).
PURE_PYTHON = {"VMInstrumentReturnKind"}


def test_all_is_exact_and_sorted_by_intent():
    exported = {n for n in dir(rx._relaxvm) if not n.startswith("_")} | {"__version__"} | PURE_PYTHON
    assert set(rx.__all__) == exported
    for name in rx.__all__:
        assert hasattr(rx, name)


def test_every_export_has_a_stub():
    missing = set(rx.__all__) - stub_names() - PURE_PYTHON
    assert not missing
    for name in PURE_PYTHON:
        assert not getattr(rx, name).__module__.startswith("relaxvm._relaxvm"), name


def test_py_typed_marker():
    assert (PKG / "py.typed").exists()


def test_public_objects_have_docstrings():
    for name in rx.__all__:
        obj = getattr(rx, name)
        if name == "__version__":
            continue
        assert inspect.getdoc(obj), name
        if inspect.isclass(obj) and not issubclass(obj, BaseException):
            for attr, member in vars(obj).items():
                if attr.startswith("_"):
                    continue
                assert inspect.getdoc(member), f"{name}.{attr}"


def test_help_shows_documented_methods():
    text = pydoc.render_doc(rx.ExecBuilder, renderer=pydoc.plaintext)
    for method in ["emit_call", "emit_ret", "emit_goto", "emit_if", "function", "convert_constant", "get"]:
        assert method in text
    assert "Emits" in text and "immediate" in text


def test_version():
    assert isinstance(rx.__version__, str) and rx.__version__.count(".") == 2


def test_stubs_match_the_runtime():
    """mypy's stubtest agrees with the compiled module (skipped when mypy is not installed)."""
    import importlib.util
    import subprocess
    import sys

    import pytest

    if importlib.util.find_spec("mypy") is None:
        pytest.skip("mypy is not installed")
    proc = subprocess.run(
        [sys.executable, "-m", "mypy.stubtest", "relaxvm._relaxvm", "--ignore-disjoint-bases"],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
