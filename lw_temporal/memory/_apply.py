"""Applying journal records to a store, and redoing them after a crash.

Every operation can be applied twice: before a change it checks whether the file is
already at the journal's ``sha``, and a kept version is only ever added. Applying
writes nothing with fsync; :func:`checkpoint` flushes what the journal's records
touched and then empties the journal.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from contextlib import suppress
from pathlib import Path
from typing import Any

from temporalio.exceptions import ApplicationError

from . import _fs
from ._index import FileState, Usage
from ._prune import write_policy
from ._txn import StoreFiles
from ._versions import Splice, sha256, unb64


def apply_record(
    files: StoreFiles,
    root_fd: int | None,
    record: dict[str, Any],
    *,
    states: Mapping[str, FileState] | None = None,
    contents: Mapping[str, bytes] | None = None,
    recovering: bool = False,
) -> None:
    """Apply one journal record (a batch of commits). ``states`` and ``contents``
    carry what planning already knows (the new versions' hash states and contents, by
    sha256) so that applying reads nothing back."""
    states = states or {}
    contents = contents or {}
    audit, ledger = files.audit, files.ledger
    dropped = False
    lines: list[dict[str, Any]] = []
    # The batch's version references and ledger records each go in one write.
    with files.versions.log.holding(), ledger.log.holding():
        for commit in record["commits"]:
            for op in commit["ops"]:
                dropped = dropped or op["k"] in ("x", "u")
                try:
                    _apply_op(files, root_fd, op, states, contents, recovering)
                except (ApplicationError, OSError):
                    if not recovering:
                        raise
                    # a redone op whose path became unsafe (a link, a folder in the way)
                    # is skipped rather than blocking the store forever
            if commit["audit"] and not (recovering and audit.has(commit["op_id"])):
                lines += commit["audit"]
            if commit["key"] is not None:
                ledger.put(commit["key"], commit["op"], commit["result"], commit["attachment"])
    audit.append(lines)
    if dropped:  # a redaction or a prune: its dropped references leave the disk now
        files.versions.compact()
    files.index.write_usage(Usage.from_json(record["usage"]))


def _apply_op(
    files: StoreFiles,
    root_fd: int | None,
    op: dict[str, Any],
    states: Mapping[str, FileState],
    contents: Mapping[str, bytes],
    recovering: bool,
) -> None:
    kind = op["k"]
    versions = files.versions
    if kind == "x":
        versions.redirect(op["old"], op["new"])
        versions.remove(op["old"])
        return
    if kind == "u":
        versions.remove(op["sha"])
        return
    if kind == "p":
        write_policy(files.state, op["policy"])
        return
    if root_fd is None:
        return
    rel: str = op["p"]
    parts = tuple(rel.split("/"))
    shown = f"store path {rel}"
    if kind == "m":
        with _fs.opened_dir(root_fd, parts, create=True, shown=shown):
            return
    create = kind in ("a", "w", "s")
    with _fs.opened_dir(root_fd, parts[:-1], create=create, shown=shown) as fd:
        if fd is None:
            return
        name = parts[-1]
        if kind == "r":
            with suppress(OSError):
                os.rmdir(name, dir_fd=fd)
            return
        if kind == "d":
            if op["prev"] is not None and _fs.kind_at(fd, name) == "file":
                versions.keep_file(op["prev"], fd, name)
            with suppress(FileNotFoundError):
                os.unlink(name, dir_fd=fd)
            files.index.forget(rel)
            return
        sha: str = op["sha"]
        prev: str | None = op.get("prev")
        live: bytes | None = None
        if recovering:
            live = _fs.read_at(fd, name, shown)
            if live is not None and sha256(live) == sha:
                versions.put_live(sha, rel)
                files.index.remember(fd, name, rel, FileState(sha, len(live)))
                return
        if kind == "a":
            data = unb64(op["d"])
            at = int(op["at"])
            if recovering and (live is None or len(live) < at or sha256(live[:at]) != prev):
                return  # not the version this append extends: nothing safe to do
            assert prev is not None
            versions.put_prefix(prev, sha, at)
            file = os.open(name, os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
            try:
                os.pwrite(file, data, at)
                os.ftruncate(file, at + len(data))
            finally:
                os.close(file)
            state = states.get(sha) or FileState(sha, at + len(data))
        elif kind == "s":
            splice = Splice(int(op["at"]), unb64(op["rm"]), unb64(op["in"]))
            content = contents.get(sha)
            if content is None:
                old = live if live is not None else _fs.read_at(fd, name, shown)
                if old is None or sha256(old) != prev:
                    return
                end = splice.offset + len(splice.removed)
                content = old[: splice.offset] + splice.inserted + old[end:]
            assert prev is not None
            versions.put_splice(prev, sha, splice)
            _fs.write_atomic_at(fd, name, content, sync=False)
            state = states.get(sha) or FileState(sha, len(content))
        else:
            content = contents.get(sha)
            if content is None:
                content = unb64(op["d"])
            if prev is not None and _fs.kind_at(fd, name) == "file":
                versions.keep_file(prev, fd, name)
            _fs.write_atomic_at(fd, name, content, sync=False)
            state = states.get(sha) or FileState(sha, len(content))
        versions.put_live(sha, rel)
        if state.sha == sha:
            files.index.remember(fd, name, rel, state)


#: State dirs whose earlier-layout bookkeeping this process has already moved.
_migrated: set[Path] = set()


def migrate(files: StoreFiles) -> None:
    """Move what the earlier layout kept one file per record (ledger records,
    version references) into the store's logs, once per process (call under the
    lock). Nothing is dropped: the logs are flushed before an old file goes."""
    if files.state in _migrated:
        return
    files.ledger.migrate()
    files.versions.migrate()
    _migrated.add(files.state)


def recover(files: StoreFiles) -> None:
    """Redo what the journal holds beyond what was applied (call under the lock)."""
    migrate(files)
    journal = files.journal
    pending = journal.pending()
    if pending is None:
        return
    records, end = pending
    root_fd = _fs.open_root(files.root, create=bool(records), shown=str(files.store))
    try:
        for record in records:
            apply_record(files, root_fd, record, recovering=True)
    finally:
        if root_fd is not None:
            os.close(root_fd)
    del end
    checkpoint(files)


def checkpoint(files: StoreFiles) -> None:
    """Flush everything the journal's records touched, then empty the journal."""
    journal = files.journal
    records = journal.records()
    if not records:
        journal.reset()
        return
    dirs: set[Path] = set()
    paths: set[Path] = set()
    for record in records:
        for commit in record["commits"]:
            for op in commit["ops"]:
                if "p" in op:
                    paths.add(files.root / op["p"])
                for sha in (op.get("sha"), op.get("prev"), op.get("old"), op.get("new")):
                    if sha:
                        paths.update(files.versions.written_paths(sha))
                        paths.add(files.state / "redirects" / sha)
    paths.update({files.audit.path, files.index.usage_path, files.state / "retention.json"})
    paths.update({files.ledger.path, files.versions.log.path})
    files.search.flush()  # so that a power loss after this finds it in step
    for path in paths:
        _fs.fsync_path(path)
        dirs.add(path.parent)
    for folder in dirs:
        _fs.fsync_path(folder)
    journal.reset()
