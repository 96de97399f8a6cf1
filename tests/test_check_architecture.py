"""scripts/check-architecture.py: each rule fails on a tree that breaks it (a tiny fake workspace
in tmp_path), and passes on one that keeps them all."""

from __future__ import annotations

import importlib.util
import sys
import textwrap
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "check-architecture.py"
spec = importlib.util.spec_from_file_location("check_architecture", SCRIPT)
check = importlib.util.module_from_spec(spec)
sys.modules["check_architecture"] = check  # dataclasses look their module up
spec.loader.exec_module(check)

DOC = """\
# Architecture

## Crates

| layer | crate | directory | concern | unsafe | foreign code |
| --- | --- | --- | --- | --- | --- |
| 0 | `base` | `base/` | the data | yes: raw memory | no |
| 1 | `top` | `top/` | the rest | no | no |
| 2 | `edge` | `edge/` | the boundary (no public API) | yes | yes |

## Rules
"""

LIB = "//! A crate.\n#![deny(missing_docs)]\n"


def write(root: Path, rel: str, text: str) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))


def manifest(name: str, deps: list[str] = (), section: str = "dependencies") -> str:
    lines = [f'[package]\nname = "{name}"\nversion = "0.1.0"\n', f"[{section}]"]
    lines += [f'{d} = {{ path = "../{d}" }}' for d in deps]
    return "\n".join(lines) + "\n"


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A workspace that keeps every rule."""
    write(tmp_path, "Cargo.toml", '[workspace]\nmembers = ["base", "top", "edge"]\n')
    write(tmp_path, "docs/architecture.md", DOC)
    write(tmp_path, "base/Cargo.toml", manifest("base"))
    write(tmp_path, "base/src/lib.rs", LIB + "pub mod value;\npub mod tensor;\npub mod code;\n")
    write(
        tmp_path,
        "base/src/value.rs",
        "//! Values.\nuse crate::tensor::Tensor;\n/// A value.\npub struct Value(Tensor);\n",
    )
    write(
        tmp_path,
        "base/src/tensor.rs",
        """\
        //! Tensors.
        mod view;
        /// A tensor.
        pub struct Tensor;
        pub fn first(p: *const u8) -> u8 {
            // SAFETY: the caller passes a live pointer.
            unsafe { *p }
        }
        #[cfg(test)]
        mod tests {
            use crate::value::Value; // tests may use any module
        }
        """,
    )
    write(tmp_path, "base/src/tensor/view.rs", "use super::Tensor;\nuse crate::tensor::first;\n")
    write(
        tmp_path,
        "base/src/code.rs",
        """\
        pub enum Instruction { Call, Ret }
        pub fn arity(i: &Instruction) -> usize {
            match i {
                Instruction::Call => 1,
                Instruction::Ret => 0,
            }
        }
        pub fn name(s: &str) -> u8 {
            match s {
                "call" => 0,
                _ if Opcode::from(s) => 1,
                _ => 2,
            }
        }
        """,
    )
    write(tmp_path, "top/Cargo.toml", manifest("top", ["base"]) + manifest("x", ["edge"], "dev-dependencies")[40:])
    write(tmp_path, "top/src/lib.rs", LIB + "pub mod a;\npub mod b;\n")
    write(tmp_path, "top/src/a.rs", "use crate::b::B;\nuse base::value::Value;\n")
    write(tmp_path, "top/src/b.rs", "/// B.\npub struct B;\n")
    write(tmp_path, "edge/Cargo.toml", manifest("edge", ["base", "top"]))
    write(tmp_path, "edge/src/lib.rs", '#[no_mangle]\npub extern "C" fn f() {}\n')
    return tmp_path


def errors(root: Path) -> list[str]:
    crates = check.read_crates(root)
    return [e for c in check.CHECKS.values() for e in c(root, crates)]


def test_a_tree_that_keeps_the_rules_passes(tree: Path, capsys) -> None:
    assert errors(tree) == []
    assert check.main(["--root", str(tree)]) == 0
    assert "every rule" in capsys.readouterr().out


def test_a_dependency_on_a_higher_or_equal_layer_fails(tree: Path) -> None:
    write(tree, "base/Cargo.toml", manifest("base", ["top"]))
    assert any("base (layer 0) depends on top (layer 1)" in e for e in errors(tree))
    write(tree, "base/Cargo.toml", manifest("base", ["top"], "build-dependencies"))
    assert any("[build-dependencies] base (layer 0) depends on top" in e for e in errors(tree))


def test_a_crate_missing_from_the_table_fails(tree: Path) -> None:
    write(tree, "Cargo.toml", '[workspace]\nmembers = ["base", "top", "edge", "stray"]\n')
    assert any("workspace member stray has no row" in e for e in errors(tree))
    write(tree, "Cargo.toml", '[workspace]\nmembers = ["base", "top", "edge"]\n')
    write(tree, "top/Cargo.toml", manifest("top", ["base", "relaxvm-unlisted"]))
    assert any("relaxvm-unlisted is not in docs/architecture.md" in e for e in errors(tree))


def test_an_import_circle_between_sibling_modules_fails(tree: Path) -> None:
    write(tree, "top/src/b.rs", "/// B.\npub struct B;\nfn f() -> crate::a::A { todo!() }\n")
    found = errors(tree)
    assert any("circle among the modules of the crate root: a, b" in e for e in found), found


def test_a_circle_through_a_nested_module_and_an_import_fails(tree: Path) -> None:
    # tensor/view.rs uses value through tensor's import of it: value <-> tensor.
    write(
        tree,
        "base/src/tensor.rs",
        "//! Tensors.\nmod view;\npub use crate::value::Value;\n/// A tensor.\npub struct Tensor;\n",
    )
    write(tree, "base/src/tensor/view.rs", "use super::Value;\n")
    assert any("circle among the modules of the crate root: tensor, value" in e for e in errors(tree))


def test_a_listed_circle_passes_and_a_stale_listing_fails(tree: Path) -> None:
    write(tree, "top/src/b.rs", "use crate::a;\n")
    write(tree, "scripts/known-circles.txt", "# comment\ntop |  | a, b | being separated\n")
    assert errors(tree) == []
    write(tree, "top/src/b.rs", "/// B.\npub struct B;\n")
    assert any("top |  | a, b is no circle any more" in e for e in errors(tree))


def test_unsafe_in_a_crate_kept_free_of_it_fails(tree: Path) -> None:
    write(tree, "top/src/b.rs", "/// B.\npub struct B;\n// SAFETY: fine.\nunsafe impl Send for B {}\n")
    assert any("`unsafe` in top" in e for e in errors(tree))


def test_unsafe_in_comments_and_strings_is_not_code(tree: Path) -> None:
    write(tree, "top/src/b.rs", '/// B is never unsafe.\npub struct B;\nconst S: &str = "unsafe { }";\n')
    assert errors(tree) == []


def test_an_unsafe_block_without_a_safety_note_fails(tree: Path) -> None:
    write(tree, "base/src/value.rs", "//! Values.\npub fn f(p: *const u8) -> u8 {\n    unsafe { *p }\n}\n")
    assert any("value.rs:3: `unsafe` without a `// SAFETY:` comment" in e for e in errors(tree))


def test_foreign_code_in_a_crate_kept_free_of_it_fails(tree: Path) -> None:
    write(tree, "top/src/b.rs", '/// B.\npub struct B;\nextern "C" {\n    fn abs(x: i32) -> i32;\n}\n')
    assert any("foreign code in top" in e for e in errors(tree))


def test_a_wildcard_arm_over_instructions_fails(tree: Path) -> None:
    write(
        tree,
        "base/src/code.rs",
        """\
        pub enum Instruction { Call { n: usize }, Ret }
        pub fn arity(i: &Instruction) -> usize {
            match i {
                Instruction::Call { n } => {
                    *n
                }
                _ => 0,
            }
        }
        """,
    )
    assert any("code.rs:3: a `_` arm in a match over" in e for e in errors(tree))


def test_a_long_file_fails_unless_listed_and_a_listed_one_may_only_shrink(tree: Path) -> None:
    long = "//! Long.\n" + "// line\n" * 700
    write(tree, "top/src/b.rs", long)
    assert any("top/src/b.rs: 701 lines, more than 600" in e for e in errors(tree))
    write(tree, "scripts/long-files.txt", "top/src/b.rs | 701 | one table\n")
    assert errors(tree) == []
    write(tree, "top/src/b.rs", long + "// one more\n")
    assert any("702 lines, more than the 701 scripts/long-files.txt allows" in e for e in errors(tree))
    write(tree, "top/src/b.rs", "//! Short.\n")
    assert any("short enough: remove it" in e for e in errors(tree))
    (tree / "top/src/b.rs").unlink()
    write(tree, "top/src/lib.rs", LIB + "pub mod a;\n")
    write(tree, "top/src/a.rs", "\n")
    assert any("top/src/b.rs does not exist" in e for e in errors(tree))


def test_a_crate_without_deny_missing_docs_fails(tree: Path) -> None:
    write(tree, "top/src/lib.rs", "//! A crate.\npub mod a;\npub mod b;\n")
    assert any("top/src/lib.rs: no #![deny(missing_docs)]" in e for e in errors(tree))


def test_a_table_kept_by_a_conversions_only_crate_fails_unless_listed(tree: Path) -> None:
    # The Python binding's second registry of Python functions was such a table (#34 item 3).
    registry = (
        "//! A registry.\ntype Funcs = std::collections::HashMap<String, u32>;\n"
        "fn funcs() -> &'static std::sync::Mutex<Funcs> {\n"
        "    static FUNCS: std::sync::OnceLock<std::sync::Mutex<Funcs>> = std::sync::OnceLock::new();\n"
        "    FUNCS.get_or_init(Default::default)\n}\n"
        'static NAME: &str = "Vec<u8> in a string is no table";\n'
        "thread_local! { static SEEN: std::cell::Cell<u32> = const { std::cell::Cell::new(0) }; }\n"
    )
    write(tree, "edge/src/registry.rs", registry)
    assert errors(tree) == [], "the edge crate's row does not say (conversions only)"
    write(tree, "docs/architecture.md", DOC.replace("the boundary (no public API)", "the boundary (conversions only)"))
    assert [e for e in errors(tree) if "static" in e] == [
        "edge/src/registry.rs:4: static FUNCS keeps a process-wide table in edge, whose row says "
        "(conversions only): move the table and its logic into a crate below"
    ]
    write(tree, "edge/src/registry.rs", registry.replace("Funcs>> =", "Vec<u8>>> ="))
    assert any("static FUNCS keeps a process-wide table" in e for e in errors(tree)), "named directly"
    write(tree, "scripts/binding-state.txt", "# why\nedge/src/registry.rs | FUNCS | a reason\n")
    assert not any("static" in e for e in errors(tree))
    write(tree, "edge/src/registry.rs", "//! Nothing kept.\n")
    assert any("binding-state.txt: edge/src/registry.rs has no static FUNCS" in e for e in errors(tree))


def test_main_reports_violations_and_exits_1(tree: Path, capsys) -> None:
    write(tree, "top/src/lib.rs", "//! A crate.\npub mod a;\npub mod b;\n")
    assert check.main(["--root", str(tree)]) == 1
    assert "missing_docs" in capsys.readouterr().out


def test_the_manifest_reader_without_tomllib_finds_the_same_layer_violation(tree: Path, monkeypatch) -> None:
    monkeypatch.setattr(check, "tomllib", None)  # Python < 3.11 without tomli
    assert errors(tree) == []
    write(tree, "base/Cargo.toml", manifest("base", ["top"]).replace("top = {", "top.workspace = true\n#"))
    assert any("base (layer 0) depends on top (layer 1)" in e for e in errors(tree))
