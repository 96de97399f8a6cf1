"""The rules of scripts/check-architecture.py, one module per rule (see its docstring), and
the reading of the workspace they share (workspace.py)."""
