"""Rule 1, ``layers``: a crate depends only on crates of lower layers."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from .workspace import Crate


def check_layers(root: Path, crates: list[Crate], load_toml: Callable[[str], dict]) -> list[str]:
    """The violations of rule 1; `load_toml` reads a manifest (the runner's reader)."""
    errors = []
    by_name = {c.name: c for c in crates}
    for c in crates:
        manifest = root / c.directory / "Cargo.toml"
        if not manifest.is_file():
            errors.append(f"{c.directory}/Cargo.toml: missing (crate {c.name} of docs/architecture.md)")
            continue
        toml = load_toml(manifest.read_text())
        if toml.get("package", {}).get("name") != c.name:
            errors.append(f"{c.directory}/Cargo.toml: the package is not named {c.name}")
        for section in ("dependencies", "build-dependencies"):
            for dep in toml.get(section, {}):
                other = by_name.get(dep)
                if dep.startswith("relaxvm") and other is None:
                    errors.append(f"{c.directory}/Cargo.toml: [{section}] {dep} is not in docs/architecture.md's table")
                elif other is not None and other.layer >= c.layer:
                    errors.append(
                        f"{c.directory}/Cargo.toml: [{section}] {c.name} (layer {c.layer}) depends on "
                        f"{dep} (layer {other.layer}): crates depend only on lower layers"
                    )
    members = load_toml((root / "Cargo.toml").read_text()).get("workspace", {}).get("members", [])
    for m in members:
        if m.rstrip("/") not in {c.directory for c in crates}:
            errors.append(f"Cargo.toml: workspace member {m} has no row in docs/architecture.md's table of crates")
    return errors
