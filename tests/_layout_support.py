"""The package's own imports, read from the source (no import runs): what each module
of ``lw_temporal`` imports of ``lw_temporal``, and how (at module level, inside a
function, or for type checking only)."""

from __future__ import annotations

import ast
import functools
from dataclasses import dataclass
from pathlib import Path

import lw_temporal

ROOT = Path(lw_temporal.__file__).parent


@dataclass(frozen=True)
class Edge:
    source: str
    target: str
    line: int
    #: "module", "function" (inside a def: runs when called) or "typing" (under
    #: ``if TYPE_CHECKING:``, never at run time).
    kind: str


@functools.cache
def modules() -> dict[str, Path]:
    """Every module of the package by dotted name (a package by its ``__init__``)."""
    found = {}
    for path in sorted(ROOT.rglob("*.py")):
        parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _targets(name: str, is_package: bool, node: ast.ImportFrom, known: set[str]) -> list[str]:
    if node.level:
        base = name.split(".") if is_package else name.split(".")[:-1]
        base = base[: len(base) - (node.level - 1)]
        module = ".".join(base + ([node.module] if node.module else []))
    else:
        module = node.module or ""
    out: list[str] = []
    for alias in node.names:
        # `from pkg import sub` imports the module pkg.sub; any other name is pkg's
        sub = f"{module}.{alias.name}"
        target = sub if sub in known else module
        if target in known and target not in out:
            out.append(target)
    return out


@functools.cache
def edges(*, implicit_parents: bool = False) -> tuple[Edge, ...]:
    """Each import of one package module by another. With ``implicit_parents``, an
    import of ``a.b.c`` from outside ``a.b`` also counts as an import of ``a.b`` (its
    ``__init__`` runs first), which is how a package's public face can close a circle."""
    known = modules()
    found: list[Edge] = []
    for name, path in known.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        typing_only: set[int] = set()
        in_function: set[int] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                typing_only.update(id(n) for n in ast.walk(node))
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                in_function.update(id(n) for n in ast.walk(node) if n is not node)
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                targets = _targets(name, path.name == "__init__.py", node, set(known))
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names if a.name in known]
            else:
                continue
            kind = (
                "typing"
                if id(node) in typing_only
                else "function"
                if id(node) in in_function
                else "module"
            )
            for target in targets:
                chain = [target]
                if implicit_parents:
                    parts = target.split(".")
                    chain += [
                        ".".join(parts[:i])
                        for i in range(2, len(parts))
                        if not name.startswith(".".join(parts[:i]) + ".")
                    ]
                for each in chain:
                    if each != name and each in known:
                        found.append(Edge(name, each, node.lineno, kind))
    return tuple(found)


def circles(found: list[Edge] | tuple[Edge, ...]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan's algorithm)."""
    graph: dict[str, set[str]] = {}
    for edge in found:
        graph.setdefault(edge.source, set()).add(edge.target)
        graph.setdefault(edge.target, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                group.append(top)
                if top == node:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return groups
