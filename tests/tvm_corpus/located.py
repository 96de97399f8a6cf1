"""Where the built corpus is, for the tests: ``$RELAXVM_TVM_CORPUS`` (``scripts/test.sh`` sets it)."""

from __future__ import annotations

import os

from corpus import MANIFEST

SKIP_REASON = "RELAXVM_TVM_CORPUS is not set to a built corpus (scripts/test.sh builds one)"


def suite_dir(suite: str) -> str | None:
    """The folder of ``suite`` (``"hand"``, ``"onnx"``) when the corpus is built, else None."""
    root = os.environ.get("RELAXVM_TVM_CORPUS")
    path = os.path.join(root, suite) if root else None
    return path if path and os.path.exists(os.path.join(path, MANIFEST)) else None
