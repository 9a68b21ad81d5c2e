"""Approval rules as data: validated where they are written, hashed with the
definition, matched in time linear in what the agent wrote, on the action a call takes
whichever tool asked for it; and a rule on memory writes keeps bash out of the store."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from lw_temporal import ApprovalRule, MemoryConfig, Role, WorkflowDefinition
from lw_temporal._approvals._actions import actions_of
from lw_temporal._approvals._bashview import bash_view
from lw_temporal._approvals._rules import MATCHED_BYTES, first_match
from lw_temporal._definitions import DefinitionRegistry
from lw_temporal._mode import Mode
from lw_temporal._scope import derive_scope
from lw_temporal.ids import DataLayout


@pytest.mark.parametrize(
    ("rule", "says"),
    [
        (dict(tool="bash", command="(a)\\1"), "is not an RE2 pattern (invalid escape sequence"),
        (dict(tool="bash", command="(?=x)"), "is not an RE2 pattern"),
        (dict(tool="bash", command="(unclosed"), "missing )"),
        (dict(tool="memory_write", command="x"), "command= applies to bash rules only"),
        (dict(tool="bash", path="/mnt/memory/**"), "path= and store= apply to memory rules"),
        (dict(tool="memory_write", path="notes.md"), "must be a glob on the agent's view"),
        (dict(tool="memory_write", store="Org!"), "must name a memory mount"),
        (dict(tool="bash", more_than=3), "more_than= applies to plan_workflow and run_step"),
        (dict(tool="run_step", roles=("worker",)), "role worker cannot call it"),
        (dict(tool="bash", roles=("orchestrator",)), "role orchestrator cannot call it"),
        (dict(tool="bash", timeout=timedelta(0)), "timeout must be 1s to 366 days"),
        (dict(tool="shell"), "Input should be 'bash'"),
        (dict(tool="bash", approvers=(" ",)), "approver ' ' must be 1 to 200 characters"),
    ],
)
def test_a_bad_rule_fails_where_it_is_written(rule: dict[str, object], says: str) -> None:
    with pytest.raises(ValidationError) as caught:
        ApprovalRule.model_validate(rule)
    assert says in str(caught.value)


def test_the_definition_hash_covers_the_rules_and_nothing_else_changes() -> None:
    plain = WorkflowDefinition(id="x")
    # A definition without rules hashes as it did before rules existed.
    assert plain.definition_hash == (
        "221c135b214b5413710679bba4310bf963fcb980198b8ab2565edc836fcae46b"
    )
    push = WorkflowDefinition(id="x", approvals=(ApprovalRule(tool="bash", command="push"),))
    pull = WorkflowDefinition(id="x", approvals=(ApprovalRule(tool="bash", command="pull"),))
    assert len({plain.definition_hash, push.definition_hash, pull.definition_hash}) == 3


def test_hostile_commands_match_in_linear_time() -> None:
    # Patterns that make a backtracking engine run for ages on these commands.
    rules = tuple(
        ApprovalRule(tool="bash", command=pattern)
        for pattern in (r"(a+)+$", r"(a|a)*b", r"(.*a){20}z", r"^(\w+\s?)*$")
    )
    for command in ("a" * 200_000 + "!", "a " * 100_000 + "!"):
        actions = actions_of("bash", {"command": command})
        assert first_match(rules, actions, Role.PLANNER) is None
    # Beyond what lw.bash accepts, a command counts as matching: size is no way past a rule.
    huge = actions_of("bash", {"command": "x" * (MATCHED_BYTES + 1)})
    assert first_match(rules, huge, Role.PLANNER) is rules[0]


def _match(rule: ApprovalRule, tool: str, role: Role = Role.PLANNER, **arguments: Any) -> bool:
    return first_match((rule,), actions_of(tool, arguments), role) is rule


def test_rules_match_the_action_whichever_tool_asks() -> None:
    write_org = ApprovalRule(tool="memory_write", store="org")
    assert _match(write_org, "memory_write", path="/mnt/memory/org/policy.md", content="x")
    assert not _match(write_org, "memory_write", path="/mnt/memory/workflow/a.md", content="x")
    # Claude's memory tool and text editor reach the same files.
    assert _match(write_org, "memory", command="create", path="/memories/org/p.md", file_text="x")
    renamed: dict[str, Any] = {"old_path": "/memories/workflow/a", "new_path": "/memories/org/b"}
    assert _match(write_org, "memory", command="rename", **renamed)
    assert _match(
        write_org, "str_replace_based_edit_tool", command="insert", path="/mnt/memory/org/p.md"
    )
    assert not _match(
        write_org, "str_replace_based_edit_tool", command="view", path="/mnt/memory/org/p.md"
    )
    replace = ApprovalRule(tool="memory_replace", path="/mnt/memory/org/policies/**")
    assert _match(replace, "memory", command="str_replace", path="/memories/org/policies/a/b.md")
    # A path folded back into the guarded folder is still in it.
    assert _match(replace, "memory_replace", path="/mnt/memory/workflow/../org//policies/x.md")
    assert not _match(replace, "memory_replace", path="/mnt/memory/org/policies.md")
    # Any bash call: the editor's edits of scratch files too (there is no command text).
    every = ApprovalRule(tool="bash")
    assert _match(every, "str_replace_based_edit_tool", command="create", path="/mnt/scratch/own/a")
    assert _match(every, "bash", command="ls")
    assert not _match(every, "bash", restart=True)  # nothing runs
    push = ApprovalRule(tool="bash", command=r"git\s+push")
    assert _match(push, "bash", command="cd repo && git  push origin")
    assert not _match(push, "str_replace_based_edit_tool", command="create", path="/mnt/scratch/x")
    # Roles: the planner and its workers by default; the dreaming agent when named.
    assert _match(push, "bash", Role.WORKER, command="git push")
    assert not _match(push, "bash", Role.DREAMING, command="git push")
    dreams = ApprovalRule(tool="bash", command="push", roles=(Role.DREAMING,))
    assert _match(dreams, "bash", Role.DREAMING, command="git push")


def test_a_memory_write_rule_makes_its_store_read_only_to_bash(tmp_path: Path) -> None:
    layout = DataLayout.at(tmp_path)
    definitions = DefinitionRegistry(
        [
            WorkflowDefinition(
                id="curated",
                memory=MemoryConfig(org="rw"),
                approvals=(ApprovalRule(tool="memory_write", path="/mnt/memory/org/policies/*"),),
            ),
            WorkflowDefinition(
                id="steps-only",
                approvals=(ApprovalRule(tool="memory_delete", roles=(Role.WORKER,)),),
            ),
        ]
    )

    def modes(workflow_id: str) -> dict[str, Mode]:
        scope = bash_view(derive_scope(workflow_id, "lw.Planner", definitions, layout))
        return {str(m.virtual): m.mode for m in scope.mounts if m.store is not None}

    assert modes("run_curated@1") == {
        "/mnt/memory/workflow": Mode.RW,
        "/mnt/memory/org": Mode.RO,
    }
    assert modes("run_steps-only@1")["/mnt/memory/workflow"] is Mode.RW
