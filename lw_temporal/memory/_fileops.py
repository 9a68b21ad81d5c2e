"""File mutations described as data: what another process can commit for this one.

``append``, ``write``, ``replace`` and ``delete`` are each a :class:`FileOp`, a small
record of what was asked (the path, the new bytes or the text to replace, the
precondition). :meth:`FileOp.body` turns it into the body the writer plans in a batch
(:mod:`._writer`), the same in the process that asked and in any other that holds the
store's lock and commits it from the store's spool (:mod:`._spool`): the rules it
checks are the ones the request carries (its quota) or that both processes share (the
scanner, by fingerprint), never the committing process's own.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from ..errors._kinds import INVALID_REQUEST, MEMORY_NOT_FOUND, lw_error
from . import _fs
from ._records import MutationResult, Provenance
from ._rules import check_file_kind, check_precondition, file_parts, refuse
from ._txn import Txn

Kind = Literal["append", "write", "replace", "delete"]
Body = Callable[[Txn], MutationResult]


@dataclass(frozen=True, slots=True)
class FileOp:
    """One file mutation as data (``shown`` is the path as its caller wrote it)."""

    kind: Kind
    path: str
    shown: str
    content: bytes = b""
    old: str = ""
    new: str = ""
    if_sha256: str | None = None
    recursive: bool = False

    def body(self, provenance: Provenance) -> Body:
        """The mutation's body, checked and staged against a batch (raises the typed
        refusal for a request that breaks a rule, before anything is staged)."""
        if self.kind == "append":
            return _append(self, provenance)
        if self.kind == "delete":
            return _delete(self, provenance)
        if self.kind == "replace":
            return file_body(self, provenance, replacer(self, provenance))
        content = self.content
        return file_body(self, provenance, lambda _old: content)

    # -- the spool's form ----------------------------------------------------------
    def as_json(self) -> dict[str, Any]:
        raw: dict[str, Any] = {"kind": self.kind, "path": self.path, "shown": self.shown}
        if self.content:
            raw["content"] = base64.b64encode(self.content).decode("ascii")
        if self.kind == "replace":
            raw["old"], raw["new"] = self.old, self.new
        if self.if_sha256 is not None:
            raw["if_sha256"] = self.if_sha256
        if self.recursive:
            raw["recursive"] = True
        return raw

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> FileOp:
        kind = raw["kind"]
        if kind not in ("append", "write", "replace", "delete"):
            raise ValueError(f"not a file mutation: {kind!r}")
        return cls(
            kind=kind,
            path=str(raw["path"]),
            shown=str(raw["shown"]),
            content=base64.b64decode(raw.get("content", "")),
            old=str(raw.get("old", "")),
            new=str(raw.get("new", "")),
            if_sha256=None if raw.get("if_sha256") is None else str(raw["if_sha256"]),
            recursive=bool(raw.get("recursive", False)),
        )


def _append(op: FileOp, provenance: Provenance) -> Body:
    """Add bytes at the end of a file (creating it). It costs what it adds: the file is
    not read, re-hashed or copied, and only the added bytes (with the seam before
    them) are scanned, so an old finding does not block every later append while a
    secret split across two appends is still caught."""
    shown = op.shown
    parts = file_parts(op.path, shown, provenance)
    who = provenance.who()
    content, if_sha256 = op.content, op.if_sha256

    def body(txn: Txn) -> MutationResult:
        check_file_kind(txn, parts, shown, who)
        before, after, findings, refusal = txn.stage_append(parts, content, "append", shown)
        check_precondition(if_sha256, None if before is None else before.sha, shown, who)
        refuse(txn, "append", shown, who, refusal, after.size)
        return MutationResult(
            path=shown,
            op="append",
            content_sha256=after.sha,
            previous_sha256=None if before is None else before.sha,
            bytes=after.size,
            findings=tuple(findings),
        )

    return body


def replacer(op: FileOp, provenance: Provenance) -> Callable[[bytes | None], bytes]:
    """``str_replace``: the single occurrence of ``old`` becomes ``new``."""
    where, old, new = op.shown, op.old, op.new

    def edit(before: bytes | None) -> bytes:
        if before is None:
            raise lw_error(MEMORY_NOT_FOUND, f"{provenance.who()}: {where} does not exist")
        try:
            text = before.decode("utf-8")
        except UnicodeDecodeError:
            raise lw_error(INVALID_REQUEST, f"{where} is not UTF-8 text") from None
        count = text.count(old)
        if count != 1:
            problem = (
                "does not contain the text to replace; read it and copy the text exactly"
                if count == 0
                else f"contains the text to replace {count} times; include more "
                "surrounding text so that it occurs once"
            )
            raise lw_error(INVALID_REQUEST, f"{provenance.who()}: {where} {problem}")
        return text.replace(old, new, 1).encode("utf-8")

    return edit


def file_body(
    op: FileOp,
    provenance: Provenance,
    edit: Callable[[bytes | None], bytes],
    *,
    scan: bool = True,
    name: str | None = None,
) -> Body:
    """A whole new content from the old one (``edit``): write, replace, restore."""
    shown = op.shown
    parts = file_parts(op.path, shown, provenance)
    who = provenance.who()
    kind, if_sha256 = name or op.kind, op.if_sha256

    def body(txn: Txn) -> MutationResult:
        check_file_kind(txn, parts, shown, who)
        before, old = txn.state(parts, shown)
        check_precondition(if_sha256, None if before is None else before.sha, shown, who)
        if before is not None and old is None:
            old = txn.content(parts, shown)
        new = edit(old)
        refuse(txn, kind, shown, who, None, len(new), early=True)
        after, findings, refusal = txn.stage_write(
            parts, new, kind, shown, before=before, old=old, scan=scan
        )
        refuse(txn, kind, shown, who, refusal, len(new))
        return MutationResult(
            path=shown,
            op=kind,
            content_sha256=after.sha,
            previous_sha256=None if before is None else before.sha,
            bytes=len(new),
            findings=tuple(findings),
        )

    return body


def _delete(op: FileOp, provenance: Provenance) -> Body:
    """Remove a file, or a folder with everything in it when ``recursive``."""
    shown = op.shown
    parts = _fs.clean_relative(op.path, shown)
    who = provenance.who()
    recursive, if_sha256 = op.recursive, op.if_sha256
    if not parts:
        raise lw_error(
            INVALID_REQUEST, f"{who}: {shown} is the store root; delete what is inside it"
        )

    def body(txn: Txn) -> MutationResult:
        kind = txn.kind(parts, shown)
        if kind is None:
            raise lw_error(MEMORY_NOT_FOUND, f"{who}: {shown} does not exist")
        if kind == "dir":
            if not recursive:
                raise lw_error(
                    INVALID_REQUEST,
                    f"{who}: {shown} is a folder; pass recursive=True to delete it and "
                    "everything in it",
                )
            if if_sha256 is not None:
                raise lw_error(INVALID_REQUEST, f"{who}: if_sha256 applies to files only")
            deleted = txn.stage_delete_tree(parts, shown)
            return MutationResult(
                path=shown,
                op="delete",
                content_sha256=None,
                previous_sha256=None,
                bytes=0,
                deleted=tuple(deleted),
            )
        before = txn.state(parts, shown)[0] if kind == "file" else None
        check_precondition(if_sha256, None if before is None else before.sha, shown, who)
        before_sha = txn.stage_delete_file(parts, shown, kind)
        return MutationResult(
            path=shown,
            op="delete",
            content_sha256=None,
            previous_sha256=before_sha,
            bytes=0,
            deleted=("/".join(parts),),
        )

    return body
