"""``lw-temporal memory``: inspect and repair the memory stores of a data dir.

No Temporal server is needed: every command works on the data dir through
:class:`MemoryStores`, taking a store's lock like a worker does. The names a user
types (a store, a file, a version prefix, a redaction pattern) are resolved and
checked by the stores themselves, the same way for the library and this command
line; this module only declares the verbs and prints.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from temporalio.exceptions import ApplicationError

from .._scope import StoreRef
from ..memory._names import STORE_FORMS, StoreNotFound
from ..memory._records import Provenance
from ..memory._stores import MemoryStores
from ._common import Commands, Handler, failed, say
from ._datadir import Refused, data_dir_config
from ._quarantine import add_quarantine

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


@dataclass(frozen=True)
class Target:
    """What a verb's arguments name, resolved once: the data dir's stores, the store
    STORE names, and the file PATH names in it (``rel``, shown as ``where``)."""

    stores: MemoryStores
    named: StoreRef | None = None
    rel: str = ""
    where: str = ""

    @property
    def store(self) -> StoreRef:
        if self.named is None:
            raise Refused("this command names no store")
        return self.named

    @property
    def label(self) -> str:
        return self.stores.label(self.store)


Body = Callable[[Target, argparse.Namespace], int]
#: What a verb addresses: the data dir, a store, or a file of a store.
Scope = Literal["data dir", "store", "file"]


def add_memory(sub: Commands) -> None:
    memory = sub.add_parser(
        "memory",
        help="audit, versions, restore and redact memory stores on a data dir (no server)",
        description=_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    verbs = memory.add_subparsers(dest="memory_command", required=True)

    def verb(
        name: str,
        help_text: str,
        body: Body,
        scope: Scope = "file",
        *,
        by: str | None = None,
        by_required: bool = True,
    ) -> argparse.ArgumentParser:
        """A verb on ``scope``; ``by`` (e.g. "who restores") when it changes a store."""
        parser = verbs.add_parser(
            name,
            help=help_text,
            description=f"{help_text}.\n\n{_HELP}",
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        parser.add_argument("--data-dir", required=True, help="the workers' data dir")
        if scope != "data dir":
            parser.add_argument("store", metavar="STORE", help=STORE_FORMS)
        if scope == "file":
            parser.add_argument("path", metavar="PATH", help="a file, relative to the store root")
        if by is not None:
            parser.add_argument("--by", required=by_required, help=f"{by} (kept in the audit log)")
        parser.set_defaults(handler=_handler(name, scope, body))
        return parser

    audit = verb(
        "audit", "print a store's audit log, oldest first, one line per change", _audit, "store"
    )
    audit.add_argument("--path", default=None, help="only the entries of this file")
    audit.add_argument("--limit", type=_positive_int, default=None, help="only the last N entries")

    verb("versions", "list the kept versions of a file, oldest first", _versions)

    restore = verb(
        "restore", "make a kept version of a file its current content again", _restore,
        by="who restores",
    )  # fmt: skip
    restore.add_argument(
        "sha256", metavar="SHA256", help="the version (see versions; a unique prefix will do)"
    )
    restore.add_argument("--definitions", default=None, help=_QUOTA_HELP)

    redact = verb(
        "redact",
        "remove text from a file, every kept version of it and the runs' copies "
        "(conversations, scratch, dream bookkeeping); print every other place it stays",
        _redact,
        by="who redacts",
    )  # fmt: skip
    redact.add_argument(
        "pattern", metavar="PATTERN", help="the text to remove (replaced by [REDACTED])"
    )
    redact.add_argument("--regex", action="store_true", help="PATTERN is a Python regex")

    retention = verb(
        "retention", "show or set how many kept versions of each file a store keeps", _retention,
        "store", by="who sets it", by_required=False,
    )  # fmt: skip
    _add_keep_options(retention, "keep", "also keep")

    prune = verb(
        "prune", "drop the kept versions a store's retention policy does not keep (audited)",
        _prune, "store", by="who prunes",
    )  # fmt: skip
    _add_keep_options(prune, "this time keep", "this time also keep")

    manifest = verb(
        "manifest",
        "show what a run started from: definition, pipeline, stores and snapshots",
        _manifest,
        "data dir",
    )
    manifest.add_argument("workflow_id", metavar="WORKFLOW_ID", help="the run's workflow id")

    readers = verb(
        "readers", "list the runs that started while a version of a file was current "
        "(with --tainted: the runs that read a version a tainted run wrote)", _readers,
    )  # fmt: skip
    readers.add_argument(
        "sha256", metavar="VERSION", nargs="?",
        help="the version's sha256 (see versions; a prefix will do)",
    )  # fmt: skip
    readers.add_argument(
        "--tainted", action="store_true",
        help="instead of one version's readers, every run that read a tainted version",
    )  # fmt: skip

    search = verb(
        "search",
        "rank a store's files by a query's words, best first, one line per file "
        "(PATH:LINE, score, the best matching line); exit code 1 when none matches",
        _search,
        "store",
    )
    search.add_argument("query", metavar="QUERY", help="the words to look for")
    search.add_argument(
        "--limit", type=_positive_int, default=10, help="most files to print (default 10, max 50)"
    )
    search.add_argument(
        "--path", dest="within", default="", help="only files at or below this folder or file"
    )

    verb(
        "reindex", "build a store's search index again from its files (it is otherwise kept "
        "by every commit and repaired by the next search)", _reindex, "store",
    )  # fmt: skip

    add_quarantine(verbs)


def _add_keep_options(parser: argparse.ArgumentParser, keep: str, also_keep: str) -> None:
    """``--keep-last``/``--keep-days``: a retention policy (``retention``) or a one-off
    override of it (``prune``)."""
    parser.add_argument(
        "--keep-last",
        type=_positive_int,
        default=None,
        help=f"{keep} the last N versions of each file (the current one always)",
    )
    parser.add_argument(
        "--keep-days",
        type=float,
        default=None,
        help=f"{also_keep} every version younger than this many days",
    )


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive whole number")
    return value


def _handler(verb: str, scope: Scope, body: Body) -> Handler:
    """Resolve what the arguments name, run ``body``, and turn every refusal (the
    stores', or this module's) into one line and exit code 1."""

    async def handler(args: argparse.Namespace) -> int:
        try:
            return body(_target(args, scope), args)
        except ApplicationError as err:
            return failed(f"memory {verb}", Refused(err.message))
        except (Refused, StoreNotFound, ValueError, OSError) as err:
            return failed(f"memory {verb}", err)

    return handler


def _target(args: argparse.Namespace, scope: Scope) -> Target:
    stores = MemoryStores.for_config(
        data_dir_config(args.data_dir, getattr(args, "definitions", None))
    )
    if scope == "data dir":
        return Target(stores)
    store = stores.find_store(args.store)
    path: str | None = getattr(args, "path", None)  # PATH, or audit's --path
    rel, where = ("", "") if path is None else stores.admin_path(store, path)
    return Target(stores, store, rel, where)


def _admin(args: argparse.Namespace) -> Provenance:
    return Provenance.admin(args.by)


def _short_time(iso: str) -> str:
    return iso[:19] + "Z" if iso.endswith("+00:00") else iso


def _audit(target: Target, args: argparse.Namespace) -> int:
    entries = target.stores.audit(target.store, path=target.rel or None)
    if target.rel and not entries:
        raise Refused(f"{target.where} has no audit entries (never written to this store)")
    if not entries:
        say(f"{target.label}: no audit entries")
    for entry in entries if args.limit is None else entries[-args.limit :]:
        after = entry.sha256_after[:12] if entry.sha256_after else "-"
        say(
            f"{_short_time(entry.time)}  {entry.op:<7}  {entry.path}  {entry.bytes} bytes  "
            f"sha256 {after}  by {entry.by()}"
        )
    return 0


def _versions(target: Target, args: argparse.Namespace) -> int:
    stores, store, rel, where = target.stores, target.store, target.rel, target.where
    versions = stores.versions(store, rel)
    if not versions:
        raise Refused(f"{where} has no kept versions (never written to this store)")
    current = stores.read(store, rel, shown=where).content_sha256
    for version in versions:
        notes = "  (current)" if version.sha256 == current else ""
        notes += "" if version.available else "  (content pruned; cannot restore)"
        say(
            f"{version.sha256}  {version.bytes} bytes  {_short_time(version.time)}  "
            f"{version.op} by {version.by()}{notes}"
        )
    return 0


def _restore(target: Target, args: argparse.Namespace) -> int:
    stores, store, rel, where = target.stores, target.store, target.rel, target.where
    sha = stores.find_version(store, rel, args.sha256)
    result = stores.restore(store, rel, sha, provenance=_admin(args), shown=where)
    before = result.previous_sha256[:12] if result.previous_sha256 else "absent"
    say(
        f"restored {where} to {result.content_sha256} ({result.bytes} bytes; was {before}) "
        f"by {args.by}"
    )
    return 0


def _redact(target: Target, args: argparse.Namespace) -> int:
    stores, store, rel, where = target.stores, target.store, target.rel, target.where
    result = stores.redact(
        store, rel, args.pattern, regex=args.regex, provenance=_admin(args), shown=where
    )
    if not result.versions_redacted:
        say(f"{where}: the pattern is not in the file or its kept versions; the file is unchanged")
    else:
        rewritten = len(result.versions_redacted) - (1 if result.current_changed else 0)
        current = (
            f"the file is now {result.content_sha256}"
            if result.current_changed
            else "the current file did not contain it"
        )
        say(f"redacted {where} by {args.by}: {current}; {rewritten} earlier version(s) rewritten")
    from ._redact_reach import print_reach

    return print_reach(stores, store, rel, args, result)


def _retention(target: Target, args: argparse.Namespace) -> int:
    stores, store = target.stores, target.store
    policy = stores.retention_with(store, keep_last=args.keep_last, keep_days=args.keep_days)
    if args.keep_last is not None or args.keep_days is not None:
        if not args.by:
            raise Refused("setting a retention policy needs --by (who sets it)")
        policy = stores.set_retention(store, policy, provenance=_admin(args))
    days = "" if policy.keep_days is None else f" and those younger than {policy.keep_days} days"
    say(f"{target.label}: keeps the last {policy.keep_last} versions of each file{days}")
    return 0


def _prune(target: Target, args: argparse.Namespace) -> int:
    stores, store = target.stores, target.store
    result = stores.prune(
        store, keep_last=args.keep_last, keep_days=args.keep_days, provenance=_admin(args)
    )
    say(
        f"{target.label}: removed {result.removed} kept versions of {result.files} "
        f"files ({result.freed_bytes} bytes) by {args.by}; the store holds "
        f"{stores.usage(store).bytes} bytes on disk, versions included"
    )
    return 0


def _manifest(target: Target, args: argparse.Namespace) -> int:
    from .._ids import parse_workflow_id
    from ..memory._manifest import read_manifest

    try:
        parse_workflow_id(args.workflow_id)
    except ValueError as err:
        raise Refused(f"WORKFLOW_ID {args.workflow_id!r}: {err}") from None
    manifest = read_manifest(target.stores.layout, args.workflow_id)
    if manifest is None:
        raise Refused(
            f"no run manifest for {args.workflow_id!r} in {args.data_dir}: the run never "
            "reached a worker of this data dir"
        )
    say(f"run {manifest.workflow_id} ({manifest.workflow_type}, {manifest.role})")
    say(f"  run id          {manifest.run_id}")
    say(f"  started         {_short_time(manifest.started)}")
    say(f"  definition      {manifest.definition_id} sha256 {manifest.definition_hash}")
    say(f"  pipeline key    {manifest.pipeline_key or '-'}")
    for entry in manifest.stores:
        snapshot = entry.snapshot_id or "not counted yet"
        say(f"  {entry.mount}/ ({entry.mode})  {entry.store}  snapshot {snapshot}")
    taint = manifest.tainted
    say(f"  {'not tainted' if taint is None else taint.line()}")
    return 0


def _readers(target: Target, args: argparse.Namespace) -> int:
    from ..memory._manifest import readers

    stores, store, rel, where = target.stores, target.store, target.rel, target.where
    if args.tainted:
        from ..memory._manifest import tainted_readers

        tainted = tainted_readers(stores, store, rel)
        if not tainted:
            say(f"no recorded run read a tainted version of {where}")
        for workflow_id, how in tainted:
            say(f"{workflow_id}  {how}")
        return 0
    if args.sha256 is None:
        raise Refused("name a VERSION (see versions), or ask --tainted")
    sha = stores.find_version(store, rel, args.sha256, require_kept=False)
    found = readers(stores, store, rel, sha)
    if not found:
        say(f"no recorded run started while {where} was at {sha[:12]}")
    for manifest in found:
        mode = next((s.mode for s in manifest.stores if s.store == str(store)), "?")
        taint = "" if manifest.tainted is None else f"  {manifest.tainted.line()}"
        say(
            f"{_short_time(manifest.started)}  {manifest.workflow_id}  ({manifest.role}, "
            f"mounted {mode}){taint}"
        )
    return 0


def _search(target: Target, args: argparse.Namespace) -> int:
    stores, store = target.stores, target.store
    if args.limit > 50:
        raise Refused("--limit is at most 50")
    result = stores.search(store, args.query, limit=args.limit, path=args.within)
    for hit in result.hits:
        first = hit.lines[0] if hit.lines else None
        where = hit.path if first is None else f"{hit.path}:{first.number}"
        say(f"{where}  {hit.score:.4g}  {'' if first is None else first.text}".rstrip())
    more = f"; {result.omitted} more files matched (raise --limit)" if result.omitted else ""
    said = f"{target.label}: {len(result.hits)} files ranked {result.ranking}{more}"
    say(said, err=True)
    return 0 if result.hits else 1


def _reindex(target: Target, args: argparse.Namespace) -> int:
    target.stores.reindex(target.store)
    size = target.stores.usage(target.store).index
    say(f"{target.label}: search index built again from its files ({size} bytes)")
    return 0
