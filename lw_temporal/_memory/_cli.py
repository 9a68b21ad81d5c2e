"""``lw-temporal memory``: inspect and repair the memory stores of a data dir.

No Temporal server is needed: every command works on the data dir through
:class:`MemoryStores`, taking a store's lock like a worker does. The names a user
types (a store, a version prefix) are resolved by the stores themselves; this module
only parses arguments and prints.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

from ._stores import MemoryStores, StoreNotFound

Handler = Callable[[argparse.Namespace], Coroutine[Any, Any, int]]

STORE_FORMS = "workflow:<definition id>, pipeline:<pipeline key>, org or dreaming:<definition id>"

_HELP = """\
Inspect and repair the memory stores of a data dir directly: no Temporal server is
needed. STORE is workflow:<definition id>, pipeline:<pipeline key> (the 64 hex digits of
memory/pipelines/<key>/, or a unique prefix of them) or org; PATH is relative to the
store root (lessons.md, not /mnt/memory/workflow/lessons.md). restore and redact take the
store's lock like a worker does, so they are safe while workers run, and they either
apply whole (a new version and an audit line naming --by) or change nothing. restore
checks the store's quota like a write (see --definitions); redact is not quota-checked.
"""

_QUOTA_HELP = (
    "module:attribute naming the worker's list of WorkflowDefinition objects, so a "
    "workflow store keeps its definition's quota; without it every store is checked "
    "against the default MemoryQuota (64 MiB, 10000 files, 4 MiB per file)"
)


class Refused(Exception):
    """A memory admin command that cannot run as asked (nothing was changed)."""


def add_memory_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    memory = sub.add_parser(
        "memory",
        help="audit, versions, restore and redact memory stores on a data dir (no server)",
        description=_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    verbs = memory.add_subparsers(dest="memory_command", required=True)

    def verb(
        name: str, help_text: str, *, store: bool = True, path: bool = True
    ) -> argparse.ArgumentParser:
        parser = verbs.add_parser(
            name,
            help=help_text,
            description=f"{help_text}.\n\n{_HELP}",
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        parser.add_argument("--data-dir", required=True, help="the workers' data dir")
        if store:
            parser.add_argument("store", metavar="STORE", help=STORE_FORMS)
        if store and path:
            parser.add_argument("path", metavar="PATH", help="a file, relative to the store root")
        return parser

    audit = verb(
        "audit", "print a store's audit log, oldest first, one line per change", path=False
    )
    audit.add_argument("--path", default=None, help="only the entries of this file")
    audit.add_argument("--limit", type=_positive_int, default=None, help="only the last N entries")
    audit.set_defaults(handler=_handler("audit", _audit))

    versions = verb("versions", "list the kept versions of a file, oldest first")
    versions.set_defaults(handler=_handler("versions", _versions))

    restore = verb("restore", "make a kept version of a file its current content again")
    restore.add_argument(
        "sha256", metavar="SHA256", help="the version (see versions; a unique prefix will do)"
    )
    restore.add_argument("--by", required=True, help="who restores (kept in the audit log)")
    restore.add_argument("--definitions", default=None, help=_QUOTA_HELP)
    restore.set_defaults(handler=_handler("restore", _restore))

    redact = verb("redact", "remove text from a file and from every kept version of it")
    redact.add_argument(
        "pattern", metavar="PATTERN", help="the text to remove (replaced by [REDACTED])"
    )
    redact.add_argument("--regex", action="store_true", help="PATTERN is a Python regex")
    redact.add_argument("--by", required=True, help="who redacts (kept in the audit log)")
    redact.set_defaults(handler=_handler("redact", _redact))

    retention = verb(
        "retention", "show or set how many kept versions of each file a store keeps", path=False
    )
    retention.add_argument(
        "--keep-last",
        type=_positive_int,
        default=None,
        help="keep the last N versions of each file (the current one always)",
    )
    retention.add_argument(
        "--keep-days",
        type=float,
        default=None,
        help="also keep every version younger than this many days",
    )
    retention.add_argument("--by", default=None, help="who sets it (kept in the audit log)")
    retention.set_defaults(handler=_handler("retention", _retention))

    prune = verb(
        "prune",
        "drop the kept versions a store's retention policy does not keep (audited)",
        path=False,
    )
    prune.add_argument(
        "--keep-last",
        type=_positive_int,
        default=None,
        help="this time keep the last N instead of the policy's",
    )
    prune.add_argument(
        "--keep-days",
        type=float,
        default=None,
        help="this time also keep versions younger than this many days",
    )
    prune.add_argument("--by", required=True, help="who prunes (kept in the audit log)")
    prune.set_defaults(handler=_handler("prune", _prune))

    manifest = verb(
        "manifest",
        "show what a run started from: definition, pipeline, stores and snapshots",
        store=False,
    )
    manifest.add_argument("workflow_id", metavar="WORKFLOW_ID", help="the run's workflow id")
    manifest.set_defaults(handler=_handler("manifest", _manifest))

    readers = verb("readers", "list the runs that started while a version of a file was current")
    readers.add_argument(
        "sha256", metavar="VERSION", help="the version's sha256 (see versions; a prefix will do)"
    )
    readers.set_defaults(handler=_handler("readers", _readers))


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive whole number")
    return value


def _handler(verb: str, body: Callable[[argparse.Namespace], int]) -> Handler:
    async def handler(args: argparse.Namespace) -> int:
        from temporalio.exceptions import ApplicationError

        from .._cli import _failed

        try:
            return body(args)
        except ApplicationError as err:
            return _failed(f"memory {verb}", Refused(err.message))
        except (Refused, StoreNotFound, ValueError, OSError) as err:
            return _failed(f"memory {verb}", err)

    return handler


def _stores(args: argparse.Namespace) -> MemoryStores:
    from .._cli import load_object
    from .._config import LwConfig

    data_dir = Path(args.data_dir)
    if not data_dir.is_dir():
        raise Refused(f"data dir {data_dir} does not exist")
    spec = getattr(args, "definitions", None)
    try:
        config = LwConfig.create(data_dir, [] if spec is None else load_object(spec))
    except (TypeError, ValueError) as err:
        raise Refused(f"--definitions {spec}: {err}") from None
    return MemoryStores.for_config(config)


def _store(args: argparse.Namespace) -> tuple[MemoryStores, Any]:
    """The data dir's stores and the existing store STORE names."""
    stores = _stores(args)
    return stores, stores.find_store(args.store)


def _short_time(iso: str) -> str:
    return iso[:19] + "Z" if iso.endswith("+00:00") else iso


def _audit(args: argparse.Namespace) -> int:
    stores, store = _store(args)
    label = stores.label(store)
    rel, where = (None, "") if args.path is None else stores.admin_path(store, args.path)
    entries = stores.audit(store, path=rel)
    if rel is not None and not entries:
        raise Refused(f"{where} has no audit entries (never written to this store)")
    if not entries:
        print(f"{label}: no audit entries")
    for entry in entries if args.limit is None else entries[-args.limit :]:
        after = entry.sha256_after[:12] if entry.sha256_after else "-"
        print(
            f"{_short_time(entry.time)}  {entry.op:<7}  {entry.path}  {entry.bytes} bytes  "
            f"sha256 {after}  by {entry.by()}"
        )
    return 0


def _versions(args: argparse.Namespace) -> int:
    stores, store = _store(args)
    rel, where = stores.admin_path(store, args.path)
    versions = stores.versions(store, rel)
    if not versions:
        raise Refused(f"{where} has no kept versions (never written to this store)")
    current = stores.read(store, rel, shown=where).content_sha256
    for version in versions:
        notes = "  (current)" if version.sha256 == current else ""
        notes += "" if version.available else "  (content pruned; cannot restore)"
        print(
            f"{version.sha256}  {version.bytes} bytes  {_short_time(version.time)}  "
            f"{version.op} by {version.by()}{notes}"
        )
    return 0


def _restore(args: argparse.Namespace) -> int:
    from ._records import Provenance

    stores, store = _store(args)
    rel, where = stores.admin_path(store, args.path)
    provenance = Provenance.admin(args.by)
    sha = stores.find_version(store, rel, args.sha256)
    result = stores.restore(store, rel, sha, provenance=provenance, shown=where)
    before = result.previous_sha256[:12] if result.previous_sha256 else "absent"
    print(
        f"restored {where} to {result.content_sha256} ({result.bytes} bytes; was {before}) "
        f"by {args.by}"
    )
    return 0


def _redact(args: argparse.Namespace) -> int:
    from ._records import Provenance

    stores, store = _store(args)
    rel, where = stores.admin_path(store, args.path)
    provenance = Provenance.admin(args.by)
    pattern = args.pattern.encode() if args.regex else re.escape(args.pattern.encode())
    try:
        compiled = re.compile(pattern)
    except re.error as err:
        raise Refused(f"PATTERN {args.pattern!r} is not a valid regex: {err}") from None
    if compiled.search(b"") is not None:
        raise Refused(f"PATTERN {args.pattern!r} matches empty text; give the text to remove")
    if not stores.read(store, rel, shown=where).exists and not stores.versions(store, rel):
        raise Refused(f"{where} does not exist and has no kept versions")
    result = stores.redact(store, rel, args.pattern, regex=args.regex, provenance=provenance)
    if not result.versions_redacted:
        print(f"{where}: PATTERN not found in the file or its kept versions; nothing changed")
        return 0
    rewritten = len(result.versions_redacted) - (1 if result.current_changed else 0)
    current = (
        f"the file is now {result.content_sha256}"
        if result.current_changed
        else "the current file did not contain it"
    )
    print(f"redacted {where} by {args.by}: {current}; {rewritten} earlier version(s) rewritten")
    return 0


def _retention(args: argparse.Namespace) -> int:
    from ._records import Provenance, VersionRetention

    stores, store = _store(args)
    label = stores.label(store)
    if args.keep_last is None and args.keep_days is None:
        policy = stores.retention(store)
    else:
        if not args.by:
            raise Refused("setting a retention policy needs --by (who sets it)")
        current = stores.retention(store)
        policy = stores.set_retention(
            store,
            VersionRetention(
                keep_last=current.keep_last if args.keep_last is None else args.keep_last,
                keep_days=args.keep_days,
            ),
            provenance=Provenance.admin(args.by),
        )
    days = "" if policy.keep_days is None else f" and those younger than {policy.keep_days} days"
    print(f"{label}: keeps the last {policy.keep_last} versions of each file{days}")
    return 0


def _prune(args: argparse.Namespace) -> int:
    from ._records import Provenance

    stores, store = _store(args)
    result = stores.prune(
        store, keep_last=args.keep_last, keep_days=args.keep_days,
        provenance=Provenance.admin(args.by),
    )  # fmt: skip
    print(
        f"{stores.label(store)}: removed {result.removed} kept versions of {result.files} "
        f"files ({result.freed_bytes} bytes) by {args.by}; the store holds "
        f"{stores.usage(store).bytes} bytes on disk, versions included"
    )
    return 0


def _manifest(args: argparse.Namespace) -> int:
    from .._ids import parse_workflow_id
    from ._manifest import read_manifest

    stores = _stores(args)
    try:
        parse_workflow_id(args.workflow_id)
    except ValueError as err:
        raise Refused(f"WORKFLOW_ID {args.workflow_id!r}: {err}") from None
    manifest = read_manifest(stores.layout, args.workflow_id)
    if manifest is None:
        raise Refused(
            f"no run manifest for {args.workflow_id!r} in {args.data_dir}: the run never "
            "reached a worker of this data dir"
        )
    print(f"run {manifest.workflow_id} ({manifest.workflow_type}, {manifest.role})")
    print(f"  run id          {manifest.run_id}")
    print(f"  started         {_short_time(manifest.started)}")
    print(f"  definition      {manifest.definition_id} sha256 {manifest.definition_hash}")
    print(f"  pipeline key    {manifest.pipeline_key or '-'}")
    for entry in manifest.stores:
        snapshot = entry.snapshot_id or "not counted yet"
        print(f"  {entry.mount}/ ({entry.mode})  {entry.store}  snapshot {snapshot}")
    return 0


def _readers(args: argparse.Namespace) -> int:
    from ._manifest import readers

    stores, store = _store(args)
    rel, where = stores.admin_path(store, args.path)
    sha = stores.find_version(store, rel, args.sha256, require_kept=False)
    found = readers(stores, store, rel, sha)
    if not found:
        print(f"no recorded run started while {where} was at {sha[:12]}")
    for manifest in found:
        mode = next((s.mode for s in manifest.stores if s.store == str(store)), "?")
        print(
            f"{_short_time(manifest.started)}  {manifest.workflow_id}  ({manifest.role}, "
            f"mounted {mode})"
        )
    return 0
