"""The public surface: each public module lists its names in ``__all__``, and every
name there says what it is for (a docstring, or a line of its module's docstring for
a constant or a type alias); the top level stays small, and the README lists it all."""

from __future__ import annotations

import importlib
import inspect
from pathlib import Path
from types import ModuleType

import pytest

PUBLIC_MODULES = (
    "lw_temporal.dreaming",
    "lw_temporal.errors",
    "lw_temporal.ids",
    "lw_temporal.memory",
    "lw_temporal.models",
    "lw_temporal.options",
    "lw_temporal.testing",
)


def _undocumented(module: ModuleType) -> list[str]:
    missing = []
    for name in module.__all__:
        value = getattr(module, name)
        if inspect.isclass(value):
            doc = (value.__dict__.get("__doc__") or "").strip()
            # a dataclass without a docstring gets its signature as one
            documented = bool(doc) and not doc.startswith(f"{name}(")
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


def test_the_top_level_is_small_and_documented() -> None:
    top = importlib.import_module("lw_temporal")
    assert len(top.__all__) <= 30, top.__all__
    assert _undocumented(top) == []


@pytest.mark.parametrize("name", ("lw_temporal", *PUBLIC_MODULES))
def test_the_readme_lists_every_public_name_under_its_module(name: str) -> None:
    readme = (Path(__file__).parents[1] / "README.md").read_text()
    api = readme.split("\n## API\n", 1)[1].split("\n## ", 1)[0]
    section = api.split(f"\n### `{name}`\n", 1)[1].split("\n### ", 1)[0]
    module = importlib.import_module(name)
    assert [n for n in module.__all__ if f"`{n}`" not in section] == []
