"""Span attributes and metric points derived from an activity's typed input and result.

One function per activity family reads the request and result models the activities
already return, so telemetry needs no change to the activities themselves. What is
recorded is what an operator needs to debug a run, and never what the agent saw: no
file content, no command output, no command text unless the worker opts in (a
sha256 of the command is always there, to correlate repeats), no rejection path.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from temporalio import activity
from temporalio.common import MetricMeter
from temporalio.exceptions import ApplicationError

from .._ids import InvalidWorkflowId, parse_workflow_id
from ..errors._kinds import QUOTA_EXCEEDED, SCAN_BLOCKED
from ._summary import secret_start

AttributeValue = str | bool | int | float | Sequence[str]
Attributes = dict[str, AttributeValue]

#: Characters of a command kept in a span when the worker opts in to command text.
COMMAND_TEXT_CAP = 1024
_MEMORY_MOUNT = "/mnt/memory/"
_REFUSALS = {QUOTA_EXCEEDED: "quota", SCAN_BLOCKED: "scan"}


def workflow_attributes(workflow_id: str | None, workflow_type: str | None) -> Attributes:
    """Who acted: the workflow, its role and its definition (read from its ID)."""
    attributes: Attributes = {}
    if workflow_id:
        attributes["lw.workflow_id"] = workflow_id
    if workflow_type:
        attributes["lw.workflow_type"] = workflow_type
    if workflow_id:
        try:
            agent_id = parse_workflow_id(workflow_id)
        except InvalidWorkflowId:
            return attributes
        attributes["lw.role"] = agent_id.role.value
        if agent_id.definition_id:
            attributes["lw.definition_id"] = agent_id.definition_id
    return attributes


def store_of(path: object) -> str:
    """The mount a virtual memory path is in (``workflow``, ``pipeline``, ``org``...)."""
    if not isinstance(path, str) or not path.startswith(_MEMORY_MOUNT):
        return "unknown"
    return path[len(_MEMORY_MOUNT) :].split("/", 1)[0] or "unknown"


def reason_of(message: str) -> str:
    """The fixed phrase of a refusal (``path is read-only``) without the path."""
    return message.split(":", 1)[0].strip()[:64] or "refused"


def command_text(command: str) -> str:
    """The command as an opted-in span shows it: capped, and cut where it starts to
    look like it carries a secret (a span is never the place for one)."""
    text = command[:COMMAND_TEXT_CAP]
    cut = secret_start(text)
    return text if cut is None else text[:cut] + "…[redacted]"


def refusal_of(reason: str) -> str | None:
    """``quota`` or ``scan`` for a refused bash-made memory change, else None (bash
    results carry the store's reason as text: its wording is the contract)."""
    if "quota" in reason:
        return "quota"
    if "the content contains" in reason or "scan" in reason:
        return "scan"
    return None


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()


def _number(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


@dataclass
class Facts:
    """What one activity execution tells: span attributes and metric points."""

    activity_type: str
    model_name: str | None = None
    attributes: Attributes = field(default_factory=dict)
    counters: list[tuple[str, str, int, Mapping[str, str]]] = field(default_factory=list)
    durations: list[tuple[str, str, timedelta, Mapping[str, str]]] = field(default_factory=list)

    @property
    def span_name(self) -> str:
        return self.activity_type

    def count(self, name: str, description: str, value: int, **labels: str) -> None:
        if value > 0:
            self.counters.append((name, description, value, labels))

    # -- inputs ---------------------------------------------------------------------
    def on_start(self, info: activity.Info, args: Sequence[Any], *, trace_commands: bool) -> None:
        self.attributes.update(workflow_attributes(info.workflow_id, info.workflow_type))
        self.attributes["lw.activity"] = info.activity_type
        self.attributes["lw.attempt"] = info.attempt
        self.attributes["lw.local_activity"] = info.is_local
        request = args[0] if args else None
        if request is None:
            return
        if self.activity_type == "lw.bash":
            command = getattr(request, "command", None)
            if isinstance(command, str):
                self.attributes["lw.bash.command_sha256"] = _sha256(command)
                self.attributes["lw.bash.command_bytes"] = len(command.encode("utf-8", "replace"))
                if trace_commands:
                    self.attributes["lw.bash.command"] = command_text(command)
        elif self.activity_type == "lw.model":
            turn = _number(getattr(request, "turn", None))
            if turn is not None:
                self.attributes["lw.model.turn"] = turn + 1
            if self.model_name:
                self.attributes["gen_ai.request.model"] = self.model_name
        elif self.activity_type.startswith("lw.memory."):
            path = getattr(request, "path", None)
            if isinstance(path, str):
                self.attributes["lw.memory.path"] = path
                self.attributes["lw.memory.store"] = store_of(path)
            content = getattr(request, "content", None)
            if isinstance(content, str):
                self.attributes["lw.memory.content_bytes"] = len(content.encode("utf-8"))

    # -- results --------------------------------------------------------------------
    def on_result(self, result: object) -> None:
        if self.activity_type == "lw.bash":
            self._bash(result)
        elif self.activity_type == "lw.model":
            self._model(result)
        elif self.activity_type.startswith("lw.memory."):
            self._memory(result)

    def on_error(self, err: BaseException) -> None:
        kind = err.type if isinstance(err, ApplicationError) else None
        self.attributes["lw.error.type"] = kind or type(err).__name__
        refusal = _REFUSALS.get(kind or "")
        if refusal is not None and self.activity_type.startswith("lw.memory."):
            store = str(self.attributes.get("lw.memory.store", "unknown"))
            self.attributes["lw.memory.refusal"] = refusal
            self.count(
                "lw_memory_refusals",
                "memory writes refused by a quota or the content scan",
                1,
                store_kind=store,
                reason=refusal,
            )
        if self.activity_type == "lw.bash":
            self.count("lw_bash_commands", "lw.bash commands run", 1, outcome="error")

    def _bash(self, result: object) -> None:
        exit_code = _number(getattr(result, "exit_code", None))
        rejection = getattr(result, "rejection", None)
        sandbox = str(getattr(result, "sandbox", "") or "none")
        duration = getattr(result, "duration_seconds", 0.0)
        timed_out = bool(getattr(result, "timed_out", False))
        attributes = self.attributes
        if exit_code is not None:
            attributes["lw.bash.exit_code"] = exit_code
        attributes["lw.bash.sandbox"] = sandbox
        guarantees = getattr(result, "guarantees", None)
        if isinstance(guarantees, list | tuple) and guarantees:
            attributes["lw.bash.guarantees"] = [str(g) for g in guarantees]
        if isinstance(duration, int | float):
            attributes["lw.bash.duration_seconds"] = float(duration)
        for stream in ("stdout", "stderr"):
            size = _number(getattr(result, f"{stream}_bytes", None))
            if size is not None:
                attributes[f"lw.bash.{stream}_bytes"] = size
            if getattr(result, f"{stream}_truncated", False):
                attributes[f"lw.bash.{stream}_truncated"] = True
        attributes["lw.bash.timed_out"] = timed_out
        refused = getattr(result, "memory_refused", ()) or ()
        # The lists are capped; the counts are of all of them.
        for kind in ("changes", "refused"):
            count = _number(getattr(result, f"memory_{kind}_count", None))
            if count is None:
                count = len(getattr(result, f"memory_{kind}", ()) or ())
            attributes[f"lw.bash.memory_{kind}"] = count
        stopped = getattr(result, "stopped", None)
        if isinstance(stopped, str) and stopped:
            attributes["lw.bash.stopped"] = stopped[:200]
        self._network(getattr(result, "network", None))
        if isinstance(rejection, str) and rejection:
            reason = reason_of(rejection)
            attributes["lw.bash.rejection"] = reason
            outcome = "rejected"
            self.count(
                "lw_bash_rejections", "commands refused by the path pre-check", 1, reason=reason
            )
        elif timed_out:
            outcome = "timed_out"
        else:
            outcome = "ok" if exit_code == 0 else "failed"
        self.count("lw_bash_commands", "lw.bash commands run", 1, outcome=outcome, sandbox=sandbox)
        if isinstance(duration, int | float) and outcome != "rejected":
            self.durations.append(
                (
                    "lw_bash_duration",
                    "wall time of lw.bash commands",
                    timedelta(seconds=float(duration)),
                    {"sandbox": sandbox},
                )
            )
        reasons = [refusal_of(str(line)) for line in refused]
        if any(reasons):
            attributes["lw.bash.memory_refusals"] = [r for r in reasons if r]
        for line, refusal in zip(refused, reasons, strict=True):
            if refusal is not None:
                self.count(
                    "lw_memory_refusals",
                    "memory writes refused by a quota or the content scan",
                    1,
                    store_kind=store_of(str(line).split(":", 1)[0]),
                    reason=refusal,
                )

    def _network(self, network: object) -> None:
        """A command's use of the egress proxy (agents with a network policy)."""
        if network is None:
            return
        counts = {
            name: _number(getattr(network, name, None)) or 0
            for name in ("attempts", "allowed", "refused", "bytes_sent", "bytes_received")
        }
        for name, value in counts.items():
            self.attributes[f"lw.bash.network.{name}"] = value
        hosts = getattr(network, "hosts", ()) or ()
        if hosts:
            self.attributes["lw.bash.network.hosts"] = [str(h) for h in hosts]
        for decision in ("allowed", "refused"):
            self.count(
                "lw_egress_connections",
                "connection attempts of commands through the egress proxy",
                counts[decision],
                decision=decision,
            )
        for direction, name in (("sent", "bytes_sent"), ("received", "bytes_received")):
            self.count(
                "lw_egress_bytes",
                "bytes through the egress proxy",
                counts[name],
                direction=direction,
            )

    def _model(self, result: object) -> None:
        calls = getattr(result, "tool_calls", None) or []
        names = [str(getattr(c, "name", "?")) for c in calls]
        self.attributes["lw.model.tool_calls"] = len(names)
        if names:
            self.attributes["lw.model.tools"] = names
        usage = getattr(result, "usage", None)
        source = usage if usage is not None else result
        model = getattr(result, "model", None) or getattr(usage, "model", None) or self.model_name
        if isinstance(model, str) and model:
            self.attributes["gen_ai.response.model"] = model
        stop = getattr(result, "stop_reason", None) or getattr(usage, "stop_reason", None)
        if isinstance(stop, str) and stop:
            self.attributes["gen_ai.response.finish_reasons"] = [stop]
        label = model if isinstance(model, str) and model else "unknown"
        tokens = {
            "input": ("input_tokens",),
            "output": ("output_tokens",),
            "cached": ("cached_tokens", "cache_read_tokens", "cache_read_input_tokens"),
        }
        keys = {
            "input": "gen_ai.usage.input_tokens",
            "output": "gen_ai.usage.output_tokens",
            "cached": "gen_ai.usage.cache_read.input_tokens",
        }
        for kind, names_ in tokens.items():
            for name in names_:
                value = _number(getattr(source, name, None))
                if value is not None:
                    self.attributes[keys[kind]] = value
                    self.count(
                        "lw_model_tokens", "model tokens by model", value, model=label, kind=kind
                    )
                    break
        self.count(
            "lw_model_turns", "model turns", 1, model=label, stop_reason=str(stop or "unknown")
        )

    def _memory(self, result: object) -> None:
        written = _number(getattr(result, "bytes", None))
        digest = getattr(result, "content_sha256", None)
        op = getattr(result, "op", None)
        if isinstance(op, str):
            self.attributes["lw.memory.op"] = op
        if isinstance(digest, str):
            self.attributes["lw.memory.sha256"] = digest
        if getattr(result, "replayed", False):
            self.attributes["lw.memory.replayed"] = True
        findings = getattr(result, "findings", None)
        if isinstance(findings, tuple | list):
            self.attributes["lw.memory.findings"] = len(findings)
        if written is None or self.activity_type in ("lw.memory.read", "lw.memory.list"):
            return
        self.attributes["lw.memory.bytes"] = written
        if op in ("delete", "rmdir") or getattr(result, "replayed", False):
            return
        # What this call wrote (an append's text, not the file it grew).
        content_bytes = self.attributes.get("lw.memory.content_bytes")
        self.count(
            "lw_memory_bytes_written",
            "bytes written to memory stores",
            content_bytes if isinstance(content_bytes, int) else written,
            store_kind=str(self.attributes.get("lw.memory.store", "unknown")),
        )


def record_metrics(meter: MetricMeter, facts: Facts) -> None:
    """Add the facts' points to the runtime's meter (a no-op without a metrics sink)."""
    for name, description, value, labels in facts.counters:
        meter.create_counter(name, description).add(value, dict(labels))
    for name, description, duration, labels in facts.durations:
        meter.create_histogram_timedelta(name, description, unit="ms").record(
            duration, dict(labels)
        )
