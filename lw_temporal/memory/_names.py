"""The names an operator types for stores, paths and versions, resolved once here
for every tool (the CLI, admin scripts) instead of by each of them."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

from .._ids import DataLayout, check_definition_id
from .._scope import StoreKind, StoreRef
from ..errors._kinds import INVALID_REQUEST, lw_error
from . import _fs

if TYPE_CHECKING:
    from ._records import VersionInfo

STORE_FORMS = "workflow:<definition id>, pipeline:<pipeline key>, org or dreaming:<definition id>"


class StoreNotFound(LookupError):
    """A store, path or version an operator named does not exist (nothing changed)."""


class StoreNames:
    """Name resolution for :class:`MemoryStores` (a mixin: it needs ``layout``,
    ``root``, ``state_dir``, ``versions``, ``blob`` and ``_version_shas``)."""

    layout: DataLayout

    def root(self, store: StoreRef) -> Path:
        raise NotImplementedError

    def state_dir(self, store: StoreRef) -> Path:
        raise NotImplementedError

    def versions(self, store: StoreRef, path: str) -> list[VersionInfo]:
        raise NotImplementedError

    def blob(self, store: StoreRef, sha256: str) -> bytes | None:
        raise NotImplementedError

    def _version_shas(self, store: StoreRef, rel: str) -> list[str]:
        raise NotImplementedError

    def known_stores(self, kind: StoreKind) -> list[str]:
        """The keys of the stores of ``kind`` that have files or bookkeeping."""
        folders = (
            self.layout.memory / ("workflows" if kind is StoreKind.WORKFLOW else "pipelines"),
            self.layout.state / "stores" / kind.value,
        )
        return sorted({p.name for f in folders if f.is_dir() for p in f.iterdir() if p.is_dir()})

    def stores(self) -> list[StoreRef]:
        """Every store of the data dir that has files or bookkeeping."""
        found = [StoreRef(StoreKind.WORKFLOW, k) for k in self.known_stores(StoreKind.WORKFLOW)]
        found += [StoreRef(StoreKind.PIPELINE, k) for k in self.known_stores(StoreKind.PIPELINE)]
        org = StoreRef(StoreKind.ORG, "org")
        if self.root(org).is_dir() or self.state_dir(org).is_dir():
            found.append(org)
        return found

    def find_store(self, text: str) -> StoreRef:
        """The existing store ``text`` names: ``workflow:<id>``, ``pipeline:<key or a
        unique prefix>``, ``org`` or ``dreaming:<id>`` (dreaming's notes about ``id``)."""
        kind_text, sep, key = text.partition(":")
        if kind_text == "org" and key in ("", "org"):
            store = StoreRef(StoreKind.ORG, "org")
        elif kind_text in ("workflow", "dreaming") and sep and key:
            try:
                store = StoreRef(StoreKind(kind_text), check_definition_id(key))
            except ValueError as err:
                raise StoreNotFound(f"STORE {text!r}: {err}") from None
        elif kind_text == "pipeline" and sep and key:
            if not re.fullmatch(r"[0-9a-f]{1,64}", key):
                raise StoreNotFound(
                    f"STORE {text!r}: a pipeline key is lowercase hex (sha256), "
                    "as in memory/pipelines/<key>/"
                )
            matches = [k for k in self.known_stores(StoreKind.PIPELINE) if k.startswith(key)]
            if len(key) < 64 and len(matches) > 1:
                raise StoreNotFound(
                    f"STORE {text!r} matches {len(matches)} pipeline stores "
                    f"({', '.join(m[:16] for m in matches)}); give more of the key"
                )
            store = StoreRef(StoreKind.PIPELINE, matches[0] if len(matches) == 1 else key)
        else:
            raise StoreNotFound(f"STORE {text!r} is not a memory store; write {STORE_FORMS}")
        if not self.root(store).is_dir() and not self.state_dir(store).is_dir():
            names = self.known_stores(store.kind) if store.kind is not StoreKind.ORG else []
            listed = f" (known {store.kind.value} stores: {', '.join(names)})" if names else ""
            raise StoreNotFound(
                f"no store {self.label(store)} in data dir {self.layout.root}{listed}"
            )
        return store

    @staticmethod
    def label(store: StoreRef) -> str:
        """A store as an operator spells it (``org``, not ``org:org``)."""
        return "org" if store.kind is StoreKind.ORG else str(store)

    def admin_path(self, store: StoreRef, path: str) -> tuple[str, str]:
        """``path`` relative to the store root, cleaned as every mutation cleans it, and
        how messages show it (``STORE:PATH``)."""
        parts = _fs.clean_relative(path, f"{self.label(store)}:{path}")
        if not parts:
            raise StoreNotFound(f"{self.label(store)}:{path} is the store root; name a file in it")
        rel = "/".join(parts)
        return rel, f"{self.label(store)}:{rel}"

    def find_version(
        self, store: StoreRef, rel: str, prefix: str, *, require_kept: bool = True
    ) -> str:
        """The version of ``rel`` that ``prefix`` (7 to 64 hex digits) names (kept,
        unless not ``require_kept``); addresses from before a redaction resolve too."""
        where = f"{self.label(store)}:{rel}"
        wanted = prefix.strip().lower()
        if not re.fullmatch(r"[0-9a-f]{7,64}", wanted):
            raise StoreNotFound(
                f"SHA256 {prefix!r} is not a sha256: give the 64 hex digits shown by "
                "'memory versions' (or a unique prefix of at least 7)"
            )
        known: dict[str, None] = {v.sha256: None for v in self.versions(store, rel)}
        if not known:
            raise StoreNotFound(f"{where} has no kept versions (never written to this store)")
        known.update({sha: None for sha in self._version_shas(store, rel)})
        matches = [sha for sha in known if sha.startswith(wanted)]
        if len(matches) != 1:
            problem = "is not a kept version of" if not matches else "matches several versions of"
            raise StoreNotFound(f"{prefix} {problem} {where}; see 'lw-temporal memory versions'")
        if require_kept and self.blob(store, matches[0]) is None:
            raise StoreNotFound(f"version {matches[0]} of {where} is no longer kept (pruned)")
        return matches[0]


def redaction_pattern(pattern: str, *, regex: bool = False) -> re.Pattern[bytes]:
    """The bytes pattern a redaction removes: ``pattern`` literally, or as a regex.

    A pattern that matches empty text would put the replacement between every byte of
    every version, so it is refused like one that does not compile."""
    try:
        compiled = re.compile(pattern.encode() if regex else re.escape(pattern.encode()))
    except re.error as err:
        raise lw_error(
            INVALID_REQUEST, f"redaction pattern {pattern!r} is not a valid regex: {err}"
        ) from None
    if compiled.search(b"") is not None:
        raise lw_error(
            INVALID_REQUEST,
            f"redaction pattern {pattern!r} matches empty text; give the text to remove",
        )
    return compiled
