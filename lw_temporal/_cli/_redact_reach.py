"""What ``lw-temporal memory redact`` prints beyond the file: each place the text was
scrubbed from, and each place it stays with what erases it (the work is
:mod:`lw_temporal._privacy._reach`)."""

from __future__ import annotations

import argparse
import sys

from .._scope import StoreRef
from ..memory._names import redaction_pattern
from ..memory._records import RedactResult
from ..memory._stores import MemoryStores
from ._common import say


def print_reach(
    stores: MemoryStores,
    store: StoreRef,
    rel: str,
    args: argparse.Namespace,
    result: RedactResult,
) -> int:
    from .._privacy._reach import reach

    report = reach(
        stores,
        store,
        rel,
        redaction_pattern(args.pattern, regex=args.regex),
        result,
        # On a terminal only: piped, stderr is for problems.
        progress=(lambda line: say(line, err=True)) if sys.stderr.isatty() else None,
    )
    for place in report.changed:
        say(f"changed  {place.line()}")
    for place in report.remaining:
        say(f"remains  {place.line()}")
    cut = (report.changed_count - len(report.changed)) + (
        report.remaining_count - len(report.remaining)
    )
    if cut:
        say(f"... and {cut} more places (the lists are cut at {len(report.changed)})")
    say(
        f"outside {stores.label(store)}:{rel}: scrubbed {report.changed_count} places; "
        f"{report.remaining_count} places still hold it (each named above, with what "
        "erases it)"
        if report.remaining_count
        else f"outside {stores.label(store)}:{rel}: scrubbed {report.changed_count} places; "
        "no other copy found in the data dir"
    )
    return 0
