"""The run's conversation, kept worker-side so the history grows only by what is new.

Workflow code sends ``lw.model`` only the new results of each turn; the activity keeps
every turn as one immutable file under the data dir's bookkeeping
(``.lw/conversations/<workflow id>/<first run id>/turn-NNNNNN.json``), assembles the
whole conversation from them and fits it into the context budget. A turn file is
written once (first writer wins, atomically), so a retried or duplicated activity gets
the reply the first attempt recorded, and workers sharing the data dir agree. When the
files are gone (another data dir, a cleaned ``.lw``) the activity says so and the
workflow resends what it holds: its run's turns, or after continue-as-new a bounded
tail, the rest summarised as unavailable.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections import OrderedDict
from collections.abc import Callable, Sequence
from pathlib import Path

from pydantic import BaseModel, Field, ValidationError

from ._protocol import Exchange, ModelResponse, ToolCall, ToolResult

#: Conservative bytes per token for the budget estimate (English text and JSON run at
#: about 4; code and non-Latin scripts lower).
BYTES_PER_TOKEN = 3
#: The default context budget of a turn, in tokens.
DEFAULT_CONTEXT_BUDGET = 120_000
_CACHED_CONVERSATIONS = 64


class TurnRecord(BaseModel):
    """One turn as stored: the results answering the previous turn's calls, and the
    model's reply (turn 0 holds the task instead of results)."""

    turn: int
    task: str = ""
    results: list[ToolResult] = Field(default_factory=list)
    reply: ModelResponse


class ConversationMissing(Exception):
    """Turn files the activity needs are absent: the workflow must resend them."""

    def __init__(self, turn: int) -> None:
        super().__init__(turn)
        self.turn = turn


class ConversationStore:
    """Turn files of every conversation under one root, with a small in-process cache
    (turn files never change once written, so a cached prefix is always valid)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._cache: OrderedDict[Path, list[TurnRecord]] = OrderedDict()

    def folder(self, segments: Sequence[str], conversation: str) -> Path:
        return self.root.joinpath(*segments, conversation)

    def _file(self, folder: Path, turn: int) -> Path:
        return folder / f"turn-{turn:06d}.json"

    def get(self, folder: Path, turn: int) -> TurnRecord | None:
        cached = self._cache.get(folder)
        if cached is not None and turn < len(cached):
            return cached[turn]
        try:
            data = self._file(folder, turn).read_bytes()
            return TurnRecord.model_validate_json(data)
        except (FileNotFoundError, ValidationError, ValueError):
            return None

    def load(self, folder: Path, upto: int) -> list[TurnRecord]:
        """Turns ``0..upto-1``; raises ConversationMissing naming the first absent one."""
        records = list(self._cache.get(folder, []))[:upto]
        for turn in range(len(records), upto):
            record = self.get(folder, turn)
            if record is None or record.turn != turn:
                raise ConversationMissing(turn)
            records.append(record)
        self._remember(folder, records)
        return records

    def put(self, folder: Path, record: TurnRecord) -> TurnRecord:
        """Write a turn once; when another attempt got there first, return its record."""
        folder.mkdir(parents=True, exist_ok=True)
        target = self._file(folder, record.turn)
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".turn-", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(record.model_dump_json().encode())
                out.flush()
                os.fsync(out.fileno())
            try:
                os.link(tmp, target)
            except FileExistsError:
                existing = self.get(folder, record.turn)
                if existing is not None:
                    return existing
                os.replace(tmp, target)  # a damaged file: the new record replaces it
                tmp = ""
        finally:
            if tmp:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(tmp)
        return record

    def forget(self) -> None:
        """Drop the in-process cache (the files stay the source of truth)."""
        self._cache.clear()

    def _remember(self, folder: Path, records: list[TurnRecord]) -> None:
        self._cache[folder] = records
        self._cache.move_to_end(folder)
        while len(self._cache) > _CACHED_CONVERSATIONS:
            self._cache.popitem(last=False)

    def rebuild(self, folder: Path, task: str, exchanges: Sequence[Exchange], upto: int) -> None:
        """Write the turns ``0..upto-1`` that are absent from what the workflow holds
        (``exchanges``, possibly only a tail); turns it no longer holds become one
        placeholder each, so the conversation stays in protocol order."""
        held = {e.turn: e for e in exchanges}
        for turn in range(upto):
            if self.get(folder, turn) is not None:
                continue
            exchange = held.get(turn)
            previous = held.get(turn - 1)
            reply = (
                exchange.reply
                if exchange is not None
                else ModelResponse(text=f"(turn {turn + 1} is no longer available)")
            )
            results = previous.results if previous is not None and exchange is not None else []
            self.put(folder, TurnRecord(turn=turn, task=task if turn == 0 else "", results=results,
                                        reply=reply))  # fmt: skip


CUT_NOTE = (
    "Your previous reply was cut off at the output token limit. Continue where you "
    "stopped, in shorter steps: call a tool, or finish."
)


def answer_all(
    turn: int, calls: Sequence[ToolCall], results: Sequence[ToolResult]
) -> list[ToolResult]:
    """Exactly one result per call, in call order (the protocols require it)."""
    by_id = {r.call_id: r for r in results}
    return [
        by_id.get(call.id)
        or ToolResult(
            call_id=call.id,
            tool=call.name,
            turn=turn,
            text="not run: an earlier call in the same reply ended the run",
            is_error=True,
        )
        for call in calls
    ]


def exchanges_of(records: Sequence[TurnRecord], pending: Sequence[ToolResult]) -> list[Exchange]:
    """The conversation as exchanges: each reply with the results answering it."""
    out: list[Exchange] = []
    for index, record in enumerate(records):
        results = records[index + 1].results if index + 1 < len(records) else pending
        note = CUT_NOTE if record.reply.stop_reason == "max_tokens" else ""
        if not record.reply.tool_calls and not note and index + 1 < len(records):
            note = "(continue)"
        out.append(
            Exchange(
                turn=record.turn,
                reply=record.reply,
                results=answer_all(record.turn, record.reply.tool_calls, results),
                note=note,
            )
        )
    return out


def _size(text: str) -> int:
    return len(text.encode("utf-8", "surrogateescape"))


def _reply_size(reply: ModelResponse) -> int:
    return _size(reply.text) + sum(
        _size(c.name) + _size(str(c.arguments)) + 32 for c in reply.tool_calls
    )


def tokens(size: int) -> int:
    return size // BYTES_PER_TOKEN + 1


def fit(
    exchanges: list[Exchange],
    fixed_bytes: int,
    budget_tokens: int,
    save: Callable[[ToolResult], str],
) -> tuple[list[Exchange], int]:
    """Clear the oldest tool results until the conversation fits ``budget_tokens``.

    The decision is replayed turn by turn with hysteresis (once over budget, clear down
    to three quarters of it), so the cleared prefix only grows and stays the same for
    many turns: a provider's prompt cache keeps hitting between clearings. A cleared
    result is replaced by where its output is saved (``save`` returns that path). The
    newest turn's results are never cleared. Returns the exchanges and the count cleared.
    """
    budget = budget_tokens * BYTES_PER_TOKEN
    flat = [(i, j) for i, e in enumerate(exchanges) for j in range(len(e.results))]
    sizes = {(i, j): _size(exchanges[i].results[j].text) + 64 for i, j in flat}
    cleared = 0  # results cleared, a prefix of `flat`
    running = fixed_bytes
    for index, exchange in enumerate(exchanges):
        running += _reply_size(exchange.reply) + _size(exchange.note)
        running += sum(sizes[(index, j)] for j in range(len(exchange.results)))
        if running <= budget:
            continue
        last_clearable = sum(len(e.results) for e in exchanges[:index])
        while running > budget * 3 // 4 and cleared < last_clearable:
            running -= sizes[flat[cleared]] - 320
            cleared += 1
    if not cleared:
        return exchanges, 0
    out = [e.model_copy(update={"results": list(e.results)}) for e in exchanges]
    for i, j in flat[:cleared]:
        result = out[i].results[j]
        where = result.ref or save(result)
        out[i].results[j] = result.model_copy(
            update={
                "text": (
                    f"[cleared to fit the context budget: this {result.tool} result of turn "
                    f"{result.turn + 1} was {_size(result.text)} bytes; it is saved in "
                    f"{where}: read it with sed -n, head -c, tail -c or grep]"
                )
            }
        )
    return out, cleared
