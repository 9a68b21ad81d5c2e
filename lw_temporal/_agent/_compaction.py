"""Compaction: when clearing old tool results no longer frees enough room, the older
turns are replaced by a summary the model writes, so a session never ends for its
length alone.

The summary is asked for with the turn's own request plus one instruction
(:data:`COMPACT_NOTE`), so the provider's prompt cache serves nearly all of it; it is
recorded once beside the turn files (``summary-NNNNNN.json``, first writer wins, so a
retried turn reuses it) and shown after the task from then on, where it is cached like
the rest. The newest turns stay verbatim; the compacted ones are saved in full in the
agent's scratch (``context-compacted/``), so nothing the model saw is out of its reach.
Workflow code is not involved: the history still grows only by each turn's news.

Anthropic's server-side compaction (the beta ``compact_20260112`` context edit) is not
used: it runs only on the beta Messages endpoint and answers with an opaque, signed
compaction block that must be sent back verbatim, which would tie the conversation
files, shared by every adapter, to one provider's blobs. This summarising turn works
the same for every adapter and for a script.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from ._protocol import Exchange

#: What the summarising call adds to the turn's request.
COMPACT_NOTE = (
    "[Context budget] This conversation is being compacted: the older turns will be "
    "replaced by your summary of them. Write that summary now: the task, what you did "
    "and found (files and paths, results, decisions), and what remains to do, so that "
    "you can continue from it alone. Reply with the summary as plain text; call no tool."
)
#: Folder of the agent's own scratch holding the compacted turns in full.
COMPACTED_FOLDER = "context-compacted"
#: UTF-8 bytes of a summary kept (a longer one is cut), and its share of the room.
SUMMARY_BYTES = 16 * 1024
SUMMARY_SHARE = 0.2
#: The newest turns kept verbatim after a compaction fill at most this share of the room.
KEEP_SHARE = 0.25
_RESULT_IN_FALLBACK = 200


def summary_cap(room_bytes: int) -> int:
    return max(1024, min(SUMMARY_BYTES, int(room_bytes * SUMMARY_SHARE)))


def keep_from(exchanges: Sequence[Exchange], room_bytes: int) -> int:
    """The first exchange kept verbatim: the newest ones within KEEP_SHARE of the room,
    always the newest (its results are what the model has not seen yet)."""
    budget = room_bytes * KEEP_SHARE
    first = len(exchanges) - 1
    used = _exchange_bytes(exchanges[first]) if exchanges else 0
    while first > 0:
        more = _exchange_bytes(exchanges[first - 1])
        if used + more > budget:
            break
        used += more
        first -= 1
    return max(first, 0)


def summary_block(text: str, upto: int) -> str:
    """The summary as the model reads it after the task."""
    return (
        f"[Turns 1-{upto} of this run were compacted to fit the context budget; their "
        f"full transcript is in /mnt/scratch/own/{COMPACTED_FOLDER}/ (one file per "
        "compaction; read it with sed -n, head -c or grep). Your summary of them:]\n" + text
    )


def transcript(exchanges: Sequence[Exchange]) -> str:
    """Compacted turns in full, for the agent to re-read."""
    out: list[str] = []
    for exchange in exchanges:
        out.append(f"## Turn {exchange.turn + 1}\n")
        if exchange.reply.text:
            out.append(exchange.reply.text + "\n")
        answers = {r.call_id: r for r in exchange.results}
        for call in exchange.reply.tool_calls:
            out.append(f"### {call.name} {json.dumps(call.arguments, ensure_ascii=False)}\n")
            result = answers.get(call.id)
            if result is not None:
                flag = " (error)" if result.is_error else ""
                out.append(f"Result{flag}:\n{result.text}\n")
        if exchange.note:
            out.append(exchange.note + "\n")
    return "\n".join(out)


def fallback_summary(exchanges: Sequence[Exchange]) -> str:
    """A summary made without the model (it answered none, or the model is a script):
    each turn's text and calls, results cut short."""
    lines = []
    for exchange in exchanges:
        calls = ", ".join(
            f"{c.name} {json.dumps(c.arguments, ensure_ascii=False)[:120]}"
            for c in exchange.reply.tool_calls
        )
        said = " ".join(exchange.reply.text.split())[:200]
        results = "; ".join(" ".join(r.text.split())[:_RESULT_IN_FALLBACK]
                            for r in exchange.results)  # fmt: skip
        lines.append(f"- turn {exchange.turn + 1}: {said} [{calls}] -> {results}")
    return "\n".join(lines)


def _exchange_bytes(exchange: Exchange) -> int:
    return len(exchange.model_dump_json().encode())


def model_free_summary(summary: str, exchanges: Sequence[Exchange]) -> str:
    """The earlier summary, if any, then :func:`fallback_summary` of the turns since."""
    return "\n".join(part for part in (summary, fallback_summary(exchanges)) if part)
