"""Bash's view of a store a memory rule guards: read-only.

A command changes a writable memory mount through its overlay, committed after the
command, with no tool call the loop could hold for approval; so a rule on memory
writes (``memory_write``, ``memory_append``, ``memory_replace``, ``memory_delete``) that
could match inside a store makes that store read-only to the rule's roles' bash
commands. Their writes there are refused as ``path is read-only``; the agent writes
with the memory tools instead, which ask. Reads are unchanged.
"""

from __future__ import annotations

import dataclasses

from .._mode import Mode
from .._scope import MNT, Mount, Scope
from ._rules import MEMORY_MUTATIONS, ApprovalRule

_WILD = ("*", "?", "[")


def _literal_prefix(glob: str) -> str:
    cut = min((i for i in (glob.find(w) for w in _WILD) if i >= 0), default=len(glob))
    return glob[:cut]


def _guards(rule: ApprovalRule, mount: Mount) -> bool:
    name = mount.virtual.relative_to(MNT / "memory").as_posix()
    if rule.store is not None and rule.store != name:
        return False
    if rule.path is None:
        return True
    prefix = _literal_prefix(rule.path)
    folder = f"{mount.virtual}/"
    return prefix.startswith(folder) or folder.startswith(prefix)


def bash_view(scope: Scope) -> Scope:
    """``scope`` with every writable store a memory-write rule of its definition could
    match turned read-only (for bash's sandbox and pre-check)."""
    definition = scope.definition
    if definition is None or not definition.approvals:
        return scope
    rules = [
        r for r in definition.approvals if r.tool in MEMORY_MUTATIONS and scope.role in r.applies_to
    ]
    if not rules:
        return scope
    mounts = tuple(
        dataclasses.replace(m, mode=Mode.RO)
        if m.store is not None and m.writable and any(_guards(r, m) for r in rules)
        else m
        for m in scope.mounts
    )
    return dataclasses.replace(scope, mounts=mounts)
