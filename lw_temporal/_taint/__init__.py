"""Taint: which runs read input nobody vetted, tracked by the runtime, not the agent.

``_book`` keeps the record of each tainted run (worker-side, authoritative, inherited
through the run tree); ``_sources`` says where untrusted input lies in an agent's view
(untrusted attaches and paths, files tainted runs wrote). What a tainted run's writes
do (held in quarantine, or marked) is the memory stores' business
(``lw_temporal.memory._gate``).
"""

from ._book import MAX_EVENTS, Source, TaintBook, TaintEvent, TaintRecord
from ._sources import TaintMarks, untrusted_at, untrusted_in_view, untrusted_paths

__all__ = [
    "MAX_EVENTS",
    "Source",
    "TaintBook",
    "TaintEvent",
    "TaintMarks",
    "TaintRecord",
    "untrusted_at",
    "untrusted_in_view",
    "untrusted_paths",
]
