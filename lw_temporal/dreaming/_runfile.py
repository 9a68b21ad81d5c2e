"""One run as the dreaming agent reads it: ``/mnt/scratch/own/runs/<run>.md``."""

from __future__ import annotations

from ._records import RunRecord

#: UTF-8 bytes of one run file; a longer record is cut with a marker.
MAX_RUN_FILE = 32 * 1024
_ITEM = 400


def run_file_name(workflow_id: str) -> str:
    """A planner ID as one file name: ``pipeline_x/sub-runs/run_y@1`` becomes
    ``pipeline_x+run_y@1.md`` (``+`` is outside the ID grammar's segments)."""
    return workflow_id.replace("/sub-runs/", "+").replace("/", "+") + ".md"


def _item(text: str) -> str:
    text = text.strip()
    return text if len(text) <= _ITEM else text[: _ITEM - 1] + "…"


def _block(text: str) -> list[str]:
    return ["```", _item(text).replace("```", "` ` `"), "```"]


def render_run(record: RunRecord) -> str:
    closed = record.close_time.isoformat() if record.close_time else "unknown"
    lines = [
        f"# Run {record.workflow_id}",
        "",
        f"- status: {record.status}",
        f"- closed: {closed}",
        f"- tool calls: {record.tool_calls}",
        "",
        "## Task",
        "",
        *(_block(record.task) if record.task else ["(not recorded)"]),
        "",
        f"## Commands ({len(record.commands)})",
        "",
    ]
    for cmd in record.commands:
        if cmd.rejection:
            outcome = f"refused: {_item(cmd.rejection)}"
        else:
            outcome = f"exit {cmd.exit_code}" if cmd.exit_code is not None else "no exit code"
        if "\n" in cmd.command.strip():
            lines += [f"- {outcome}:", *_block(cmd.command)]
        else:
            lines.append(f"- {outcome}: `{_item(cmd.command)}`")
    lines += ["", f"## Failures ({len(record.failures)})", ""]
    lines += [f"- {f.source}: {_item(f.message)}" for f in record.failures] or ["- (none)"]
    changes = [op for op in record.memory_ops if op.op not in ("read", "list")]
    lines += ["", f"## Memory changes ({len(changes)})", ""]
    for op in changes:
        lines.append(f"- {op.op} {op.path or '?'}")
        if op.content:
            lines += _block(op.content)
    if not changes:
        lines.append("- (none)")
    lines += ["", "## Summary", "", record.summary or "(none)"]
    if record.truncated:
        lines += ["", "(this run did more than its record keeps; the list above is cut)"]
    text = "\n".join(lines) + "\n"
    data = text.encode("utf-8")
    if len(data) <= MAX_RUN_FILE:
        return text
    marker = f"\n...[run file cut at {MAX_RUN_FILE} of {len(data)} bytes]\n"
    return data[: MAX_RUN_FILE - len(marker)].decode("utf-8", "ignore") + marker
