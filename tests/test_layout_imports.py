"""The package's imports go one way: no circle, and no module imports a higher layer.

Read from the source with ``ast`` (nothing is imported), so an import inside a function
counts as much as one at the top; imports under ``if TYPE_CHECKING:`` are checked for
circles on their own (they never run, but a circle of types is still a knot a reader
has to untie). The layers are those of ARCHITECTURE.md; a new module either falls under
one of the prefixes below or makes this test say where it has to be placed.
"""

from __future__ import annotations

import pytest

from ._layout_support import Edge, circles, edges, modules

PACKAGE = "lw_temporal"

#: Public faces: a public package's ``__init__`` (and the package itself) sits on top;
#: only the command line and the demo, users of the public API, import one; the rest of
#: the library imports the defining module.
FACES = {"", "ids", "options", "errors", "memory", "dreaming", "models", "testing"}

#: Top to bottom. A module's layer is that of its longest matching prefix.
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("command line and demo", ("_cli", "_ui")),
    (
        "workflows, the plugin and client calls",
        (
            "_plugin",
            "_workflows",
            "_live",
            "_failures",
            "_schedules",
            "_devserver",
            "options._groups",
            "dreaming._workflow",
            "dreaming._client",
            "memory._retention",
            "memory._retention._workflow",
            "memory._retention._client",
            "_privacy",
            "_approvals._audit",
            "_approvals._client",
            "_telemetry._worker",
            "_trust",
        ),
    ),
    (
        "activities",
        (
            "_bash",
            "_bash_parts",
            "_bash_staging",
            "_bash_identity",
            "_agent",
            "_edit",
            "_approvals",
            "_config",
            "_telemetry",
            "_egress",
            "_listen",
            "_privacy._codec",
            "_privacy._keys",
            "_privacy._registry",
            "_privacy._places",
            "dreaming",
            "models",
            "memory._activities",
            "memory._retention._activities",
            "memory._retention._gc",
        ),
    ),
    (
        "stores and sandbox",
        (
            "memory",
            "_sandbox",
            "_pathcheck",
            "_topology",
            "_locks",
            "_changes",
            "_callers",
            "_vouch",
        ),
    ),
    (
        "ids and records",
        (
            "_ids",
            "errors._kinds",
            "_definitions",
            "_base",
            "_mode",
            "_terminal",
            "_scope",
            "_scan",
            "_tree",
            "_bash_models",
            "models._errors",
            "_egress._policy",
            "_egress._use",
            "_egress._patterns",
            "_egress._suffixes",
            "_egress._addresses",
            "_approvals._rules",
            "_taint",
            "_placement",
            "_failure_text",
        ),
    ),
]
RECORDS = len(LAYERS) - 1


def layer_of(module: str) -> int | None:
    """The layer index (0 on top); ``None`` for a module no prefix covers."""
    rel = module.removeprefix(PACKAGE).removeprefix(".")
    if rel in FACES:
        return -1
    if rel.split(".")[-1] == "_records":  # a package's pure data sits at the bottom
        return RECORDS
    best: tuple[int, int] | None = None
    for index, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if (rel == prefix or rel.startswith(prefix + ".")) and (
                best is None or len(prefix) > best[0]
            ):
                best = (len(prefix), index)
    return None if best is None else best[1]


def _show(group: list[str], found: list[Edge]) -> str:
    inside = set(group)
    return "\n".join(
        f"  {e.source} -> {e.target} (line {e.line}, {e.kind})"
        for e in found
        if e.source in inside and e.target in inside
    )


@pytest.mark.parametrize("kinds", [("module", "function"), ("typing",)], ids=["run", "typing"])
def test_no_import_circle(kinds: tuple[str, ...]) -> None:
    found = [e for e in edges() if e.kind in kinds]
    knots = circles(found)
    assert not knots, "import circles:\n" + "\n\n".join(_show(g, found) for g in knots)


def test_no_circle_through_a_package_init() -> None:
    """Importing ``a.b.c`` runs ``a/b/__init__.py`` first: a face that imports what
    imports into its package closes a circle that only import order hides."""
    found = [e for e in edges(implicit_parents=True) if e.kind != "typing"]
    knots = circles(found)
    assert not knots, "circles through a package __init__:\n" + "\n\n".join(
        _show(g, found) for g in knots
    )


def test_every_module_has_a_layer() -> None:
    unplaced = [m for m in modules() if layer_of(m) is None]
    assert not unplaced, f"place these in a layer (tests/{__name__.split('.')[-1]}.py): {unplaced}"


def test_no_import_from_a_higher_layer() -> None:
    upward = []
    for edge in edges():
        if edge.kind == "typing":
            continue
        source, target = layer_of(edge.source), layer_of(edge.target)
        if source is None or target is None or source == -1:
            continue  # unplaced: the test above says so; a face may gather any layer
        if target == -1 and source == 0:
            continue  # the command line and the demo are users of the public API
        if target < source:
            name = "a public face" if target == -1 else LAYERS[target][0]
            upward.append(
                f"{edge.source} ({LAYERS[source][0]}) imports {edge.target} ({name}), "
                f"line {edge.line}"
            )
    assert not upward, "imports against the layers:\n" + "\n".join(upward)
