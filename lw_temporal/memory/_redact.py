"""Redaction: remove a pattern from a file and from every stored byte of its versions.

Versions are reverse deltas (:mod:`._versions`), so a secret can sit in a whole kept
copy, in the removed bytes of a splice, or only in the live file that prefix
references point into. Redaction therefore works on contents, not objects: every
version of the file is rebuilt, each one that contains the pattern is stored again
clean under its new address (the old address redirects there and its object is
removed), and any other object that referred to a removed one is first rewritten as a
whole copy of its own (unchanged) content, so no reference is left pointing at bytes
that are gone. The current file is rewritten without keeping its old content as a
version, and the store's journal is checkpointed (emptied) afterwards.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from ._records import RedactResult
from ._txn import StoreFiles, Txn
from ._versions import sha256


def redact_body(
    files: StoreFiles,
    parts: tuple[str, ...],
    shown: str,
    pattern: re.Pattern[bytes],
    replacement: bytes,
    version_shas: list[str],
    blob: Callable[[str], bytes | None],
) -> Callable[[Txn], RedactResult]:
    rel = "/".join(parts)
    versions = files.versions

    def body(txn: Txn) -> RedactResult:
        current = txn.content(parts, shown)
        current_sha = None if current is None else sha256(current)
        contents: dict[str, bytes] = {}
        for sha in dict.fromkeys(versions.resolve(s) for s in version_shas):
            if sha == current_sha:
                continue
            data = blob(sha)
            if data is not None and pattern.search(data) is not None:
                contents[sha] = data
        changed = current is not None and pattern.search(current) is not None
        mapping: dict[str, str] = {}
        doomed = set(contents) | ({current_sha} if changed and current_sha else set())
        # anything that refers to a version about to go keeps its own content whole
        for dependent in versions.dependents(doomed):
            if dependent in doomed:
                continue
            data = blob(dependent)
            if data is not None:
                versions.put_full(dependent, data)
        for sha, data in contents.items():
            clean = pattern.sub(replacement, data)
            mapping[sha] = sha256(clean)
            versions.put_full(mapping[sha], clean)
        if current is not None and changed:
            assert current_sha is not None
            clean = pattern.sub(replacement, current)
            before = txn.state(parts, shown)[0]
            after, _findings, _refusal = txn.stage_write(
                parts, clean, "redact", shown, before=before, old=current, scan=False,
                keep_before=False,
            )  # fmt: skip
            mapping[current_sha] = after.sha
            current_sha = after.sha
        for old, new in mapping.items():
            txn.ops.append({"k": "x", "old": old, "new": new})
        if mapping and not changed:
            txn.record("redact", rel, 0, current_sha, current_sha)
        if txn.audit:
            last = txn.audit[-1]
            txn.audit[-1] = last.model_copy(update={"detail": dict(mapping)})
        return RedactResult(
            path=shown,
            current_changed=changed,
            content_sha256=current_sha,
            versions_redacted=mapping,
        )

    return body
