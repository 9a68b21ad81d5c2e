"""Approval rules: which of an agent's actions a person approves before they run.

A rule names an underlying action (``bash``, a memory operation, starting sub-runs or
steps), optionally narrowed by a pattern on the command or the memory path, a store,
the roles it applies to and, for sub-runs and steps, a count; it says how long a
request waits and what happens when nobody decides.

Patterns are compiled once, when the definition is built, so a bad one fails where it
is written. The command a ``bash`` rule tests is agent-written, so matching must cost
time linear in its length whatever the pattern and the command hold: Python's ``re``
backtracks (``(a+)+$`` on a few dozen characters runs for minutes, and workflow code
that does so stalls its workflow task), so patterns are RE2 (``google-re2``), which
never backtracks and refuses the constructs that would need it (backreferences,
lookaround). Path patterns are globs translated to RE2 too.
"""

from __future__ import annotations

import functools
import posixpath
from datetime import timedelta
from typing import Literal

import re2
from pydantic import Field, field_validator, model_validator

from .._base import FrozenModel
from .._ids import DEFINITION_ID_PATTERN, MEMORY_GROUP_FOLDERS, MEMORY_STORE_FOLDERS, Role

#: The actions a rule can name: what a tool call does, whichever tool the model used
#: (Claude's text editor and memory tool map onto bash and the memory operations).
ApprovalTool = Literal[
    "bash",
    "memory_read",
    "memory_list",
    "memory_write",
    "memory_append",
    "memory_replace",
    "memory_delete",
    "plan_workflow",
    "run_step",
]
MEMORY_ACTIONS = frozenset(
    {
        "memory_read",
        "memory_list",
        "memory_write",
        "memory_append",
        "memory_replace",
        "memory_delete",
    }
)
#: Memory actions that change a store: a rule on them also keeps bash out of the store.
MEMORY_MUTATIONS = frozenset({"memory_write", "memory_append", "memory_replace", "memory_delete"})
CHILD_ACTIONS = frozenset({"plan_workflow", "run_step"})

#: The roles each action is available to under a definition, and the default roles of
#: a rule that names none (the dreaming agent only when named: its output is already
#: reviewed before it reaches the target).
_ROLES: dict[str, frozenset[Role]] = {
    "plan_workflow": frozenset({Role.ORCHESTRATOR}),
    "run_step": frozenset({Role.PLANNER}),
}
_AGENT_ROLES = frozenset({Role.PLANNER, Role.WORKER, Role.DREAMING})
_DEFAULT_ROLES = frozenset({Role.PLANNER, Role.WORKER})

#: UTF-8 bytes of a command a pattern is tested on; a longer one (which lw.bash
#: refuses anyway) counts as matching, so size cannot be used to slip past a rule.
MATCHED_BYTES = 256 * 1024
#: The longest pattern a rule takes (RE2 compiles in time and memory linear in it).
PATTERN_CHARS = 4096
#: The mount names a memory path can be in (``store_of``): a rule naming another one
#: (``orgs``, ``workflows``) would never match, and so never ask.
_STORE = re2.compile(
    "|".join(MEMORY_STORE_FOLDERS)
    + rf"|(?:{'|'.join(MEMORY_GROUP_FOLDERS)})/{DEFINITION_ID_PATTERN}"
)


def _options() -> re2.Options:
    options = re2.Options()
    options.log_errors = False  # the error is raised, with the pattern, to the author
    return options


@functools.lru_cache(maxsize=512)
def compiled(pattern: str) -> re2._Regexp:
    """The RE2 form of ``pattern`` (cached: rules are few, and matched every turn)."""
    return re2.compile(pattern, options=_options())


def _check_pattern(field: str, pattern: str) -> str:
    if not pattern or len(pattern) > PATTERN_CHARS:
        raise ValueError(f"approval rule {field} must be 1 to {PATTERN_CHARS} characters")
    try:
        compiled(pattern)
    except re2.error as err:
        reason = err.args[0].decode() if err.args and isinstance(err.args[0], bytes) else err
        raise ValueError(
            f"approval rule {field} {pattern!r} is not an RE2 pattern ({reason}); RE2 is "
            "Python's re without backreferences or lookaround, which keeps matching linear "
            "in the length of what an agent wrote"
        ) from None
    return pattern


def glob_regex(glob: str) -> str:
    """A path glob as an anchored RE2 pattern: ``**`` any run of characters, ``*`` any
    run within one folder, ``?`` one character other than ``/``."""
    out: list[str] = []
    i = 0
    while i < len(glob):
        if glob.startswith("**", i):
            out.append(".*")
            i += 2
        elif glob[i] == "*":
            out.append("[^/]*")
            i += 1
        elif glob[i] == "?":
            out.append("[^/]")
            i += 1
        else:
            out.append(re2.escape(glob[i]))
            i += 1
    return "^" + "".join(out) + "$"


def normalized_path(path: str) -> str:
    """``path`` as the memory tools resolve it (``..``, ``.`` and doubled slashes
    folded), so ``/mnt/memory/org/../org/x`` meets a rule on ``/mnt/memory/org/**``."""
    folded = posixpath.normpath(path) if path else path
    return "/" + folded.lstrip("/") if folded.startswith("//") else folded


def store_of(path: str) -> str | None:
    """The mount name of a memory path: ``workflow``, ``pipeline``, ``org``, or
    ``peer-workflows/<id>`` and ``available-workflows/<id>``."""
    parts = normalized_path(path).split("/")
    if len(parts) < 4 or parts[1:3] != ["mnt", "memory"] or not parts[3]:
        return None
    if parts[3] in MEMORY_GROUP_FOLDERS:
        return f"{parts[3]}/{parts[4]}" if len(parts) > 4 and parts[4] else None
    return parts[3]


class ApprovalRule(FrozenModel):
    """A person approves each matching action before it runs.

    ``tool`` names the action: ``bash`` (every route to a command), a memory operation
    (``memory_write`` also covers Claude's memory tool and text editor writing there),
    ``plan_workflow`` (an orchestrator starting a sub-run of this definition) or
    ``run_step`` (this definition's planner starting a step). ``command`` is an RE2
    pattern searched in a bash command; ``path`` a glob on the memory path as the agent
    sees it (``/mnt/memory/org/**``); ``store`` the memory mount (``workflow``,
    ``pipeline``, ``org``, ``peer-workflows/<id>``); ``more_than`` asks only once the
    run has already started that many sub-runs of this definition (``plan_workflow``)
    or steps (``run_step``). ``roles`` defaults to the planner and its workers (the
    orchestrator for ``plan_workflow``). A request waits ``timeout``, then is decided
    by ``on_timeout`` (denied unless said otherwise); ``approvers``, when given, are the
    only names a decision is accepted from.
    """

    tool: ApprovalTool
    command: str | None = None
    path: str | None = None
    store: str | None = None
    roles: tuple[Role, ...] = ()
    more_than: int | None = Field(default=None, ge=0)
    timeout: timedelta = timedelta(days=1)
    on_timeout: Literal["deny", "approve"] = "deny"
    approvers: tuple[str, ...] = ()
    #: Shown to the reviewer beside each request (why this needs a person).
    reason: str = Field(default="", max_length=500)

    @field_validator("command")
    @classmethod
    def _command(cls, value: str | None) -> str | None:
        return None if value is None else _check_pattern("command", value)

    @field_validator("path")
    @classmethod
    def _path(cls, value: str | None) -> str | None:
        if value is None:
            return None
        if not value.startswith("/mnt/memory/"):
            raise ValueError(
                f"approval rule path {value!r} must be a glob on the agent's view of "
                "memory, starting /mnt/memory/ (e.g. /mnt/memory/org/policies/**)"
            )
        _check_pattern("path", glob_regex(value))
        return value

    @field_validator("store")
    @classmethod
    def _store(cls, value: str | None) -> str | None:
        if value is not None and not _STORE.fullmatch(value):
            raise ValueError(
                f"approval rule store {value!r} must name a memory mount: workflow, "
                "pipeline, org, or peer-workflows/<id>"
            )
        return value

    @field_validator("timeout")
    @classmethod
    def _timeout(cls, value: timedelta) -> timedelta:
        if not timedelta(seconds=1) <= value <= timedelta(days=366):
            raise ValueError(f"approval rule timeout must be 1s to 366 days, got {value}")
        return value

    @field_validator("approvers")
    @classmethod
    def _approvers(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for name in value:
            if not name.strip() or len(name) > 200:
                raise ValueError(f"approval rule approver {name!r} must be 1 to 200 characters")
        return value

    @model_validator(mode="after")
    def _fits_tool(self) -> ApprovalRule:
        tool = self.tool
        if self.command is not None and tool != "bash":
            raise ValueError(f"approval rule on {tool}: command= applies to bash rules only")
        if (self.path is not None or self.store is not None) and tool not in MEMORY_ACTIONS:
            raise ValueError(
                f"approval rule on {tool}: path= and store= apply to memory rules only"
            )
        if self.more_than is not None and tool not in CHILD_ACTIONS:
            raise ValueError(
                f"approval rule on {tool}: more_than= applies to plan_workflow and run_step only"
            )
        allowed = _ROLES.get(tool, _AGENT_ROLES)
        wrong = [r.value for r in self.roles if r not in allowed]
        if wrong:
            raise ValueError(
                f"approval rule on {tool}: role {', '.join(wrong)} cannot call it under a "
                f"definition (roles: {', '.join(sorted(r.value for r in allowed))})"
            )
        return self

    @property
    def applies_to(self) -> frozenset[Role]:
        if self.roles:
            return frozenset(self.roles)
        return _ROLES.get(self.tool, _DEFAULT_ROLES)

    def describe(self) -> str:
        """One line for the reviewer: what the rule asks about."""
        parts: list[str] = [self.tool]
        if self.command is not None:
            parts.append(f"command matching '{self.command}'")
        if self.store is not None:
            parts.append(f"in {self.store}")
        if self.path is not None:
            parts.append(f"path {self.path}")
        if self.more_than is not None:
            parts.append(f"beyond {self.more_than}")
        text = " ".join(parts)
        return f"{text}: {self.reason}" if self.reason else text

    def matches(self, action: Action, role: Role) -> bool:
        """Whether this rule asks about ``action`` done by an agent of ``role``."""
        if action.tool != self.tool or role not in self.applies_to:
            return False
        if self.command is not None:
            command = action.command
            if command is None:
                return False
            if len(command.encode("utf-8", "surrogatepass")) > MATCHED_BYTES:
                return True
            if compiled(self.command).search(command) is None:
                return False
        if self.store is not None and action.store != self.store:
            return False
        if self.path is not None and (
            action.path is None or compiled(glob_regex(self.path)).search(action.path) is None
        ):
            return False
        return self.more_than is None or action.started >= self.more_than


class Action(FrozenModel):
    """What one tool call would do, as rules see it: the action, and the command, the
    memory path (normalized) and its store, or how many children the run has started."""

    tool: str
    command: str | None = None
    path: str | None = None
    store: str | None = None
    #: For plan_workflow and run_step: children of the kind already started (this
    #: definition's sub-runs, or the planner's steps), earlier calls of the reply included.
    started: int = 0
    #: For plan_workflow: the definition the sub-run would run.
    workflow: str | None = None


def first_match(
    rules: tuple[ApprovalRule, ...], actions: list[Action], role: Role
) -> ApprovalRule | None:
    """The first rule (in definition order) asking about any of ``actions``."""
    for rule in rules:
        if any(rule.matches(action, role) for action in actions):
            return rule
    return None
