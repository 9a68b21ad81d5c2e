"""No module of the package is over 500 lines: one module per concept, readable whole.

A module that grows past it splits along its concepts (move whole functions or
classes into a module of their own; see ARCHITECTURE.md), it does not get an exception.
"""

from __future__ import annotations

from ._layout_support import ROOT, modules

MAX_LINES = 500


def test_no_module_over_500_lines() -> None:
    long = {
        str(path.relative_to(ROOT.parent)): lines
        for path in modules().values()
        if (lines := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert not long, f"modules over {MAX_LINES} lines (split them by concept): {long}"
