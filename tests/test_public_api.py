"""The public surface: each public module lists its names in ``__all__``, and every
name there says what it is for (a docstring, or a line of its module's docstring for
a constant or a type alias)."""

from __future__ import annotations

import importlib
import inspect
from types import ModuleType

import pytest

PUBLIC_MODULES = (
    "lw_temporal.dreaming",
    "lw_temporal.errors",
    "lw_temporal.ids",
    "lw_temporal.memory",
    "lw_temporal.models",
    "lw_temporal.testing",
)


def _undocumented(module: ModuleType) -> list[str]:
    missing = []
    for name in module.__all__:
        value = getattr(module, name)
        if inspect.isclass(value):
            documented = bool((value.__dict__.get("__doc__") or "").strip())
        elif inspect.isfunction(value):
            documented = bool((value.__doc__ or "").strip())
        else:  # a constant or a type alias: its module's docstring names it
            documented = f"``{name}``" in (module.__doc__ or "")
        if not documented:
            missing.append(name)
    return missing


@pytest.mark.parametrize("name", PUBLIC_MODULES)
def test_every_public_name_is_documented(name: str) -> None:
    module = importlib.import_module(name)
    assert (module.__doc__ or "").strip(), f"{name} has no module docstring"
    assert sorted(module.__all__) == sorted(set(module.__all__))
    assert _undocumented(module) == []
