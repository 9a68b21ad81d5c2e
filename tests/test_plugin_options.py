"""The plugin's option groups: each reaches the part of the worker that reads it, leaving
a group out keeps the old defaults, and a bad value names its group and field."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Sequence
from datetime import timedelta
from pathlib import Path

import pytest

from lw_temporal import (
    DefaultScanner,
    DreamContext,
    LittleWorkflowPlugin,
    MemoryQuota,
    RunRecord,
    WorkflowDefinition,
)
from lw_temporal.dreaming import Consolidation, DefaultConsolidator
from lw_temporal.options import (
    BashOptions,
    DeploymentOptions,
    DreamingAgentOptions,
    Limits,
    MemoryOptions,
    ModelCallOptions,
    OrchestratorOptions,
)
from lw_temporal.testing import ScriptedModel

DEFINITIONS = [WorkflowDefinition(id="alpha", max_turns=7)]


class _Silent:
    def consolidate(self, context: DreamContext, runs: Iterator[RunRecord]) -> Consolidation:
        return Consolidation(notes=[])


def test_the_fixed_keywords_keep_working(tmp_path: Path) -> None:
    plugin = LittleWorkflowPlugin(
        data_dir=tmp_path,
        definitions=DEFINITIONS,
        model=ScriptedModel({}),
        sandbox="bwrap",
        tracing=False,
    )
    activities = plugin.activities
    assert isinstance(activities, Sequence)
    names = {getattr(a, "__temporal_activity_definition").name for a in activities}
    assert {"lw.bash", "lw.model", "lw.memory.read", "lw.memory.write"} <= names


def test_groups_left_out_keep_the_defaults(tmp_path: Path) -> None:
    bare = LittleWorkflowPlugin(tmp_path, DEFINITIONS)
    explicit = LittleWorkflowPlugin(
        tmp_path,
        DEFINITIONS,
        model_calls=ModelCallOptions(),
        orchestrator=OrchestratorOptions(),
        bash=BashOptions(),
        memory=MemoryOptions(),
        dreaming=DreamingAgentOptions(),
        deployment=DeploymentOptions(),
    )
    for plugin in (bare, explicit):
        settings = plugin.model_activities.worker_settings()
        assert (settings.local_model, settings.index_search_attributes) == (False, False)
        assert (settings.orchestrator_max_turns, settings.dreaming_max_turns) == (24, 24)
        assert settings.max_turns == {"alpha": 7}
        assert plugin.model_activities.context_budget_tokens == 120_000
        assert plugin.bash_activities.output_cap == 64 * 1024
        assert plugin.bash_activities.limits == Limits()
        assert isinstance(plugin.dreaming_activities.consolidator, DefaultConsolidator)
        assert plugin.config.topology.host is None


def test_each_group_reaches_the_part_that_reads_it(tmp_path: Path) -> None:
    scanner = DefaultScanner()
    consolidator = _Silent()
    plugin = LittleWorkflowPlugin(
        tmp_path,
        DEFINITIONS,
        model=ScriptedModel({}),
        model_calls=ModelCallOptions(local_activity=False, context_budget_tokens=9_000),
        orchestrator=OrchestratorOptions(instructions="run alpha", max_turns=5),
        bash=BashOptions(output_cap=1_000, limits=Limits(pids=64)),
        memory=MemoryOptions(scanner=scanner, store_quota=MemoryQuota(max_files=3)),
        dreaming=DreamingAgentOptions(per_target={"alpha": "dream {target}"}, max_turns=4,
                                      consolidator=consolidator),
        deployment=DeploymentOptions(search_attributes_registered=True, host="a",
                                     host_timeout=timedelta(seconds=30)),
    )  # fmt: skip
    settings = plugin.model_activities.worker_settings()
    assert (settings.local_model, settings.index_search_attributes) == (False, True)
    assert (settings.orchestrator_max_turns, settings.dreaming_max_turns) == (5, 4)
    assert plugin.model_activities.orchestrator_instructions == "run alpha"
    assert plugin.model_activities.context_budget_tokens == 9_000
    assert plugin.model_activities.dreaming_instructions("alpha") == "dream alpha"
    assert (plugin.bash_activities.output_cap, plugin.bash_activities.limits.pids) == (1_000, 64)
    assert plugin.memory.scanner is scanner
    assert plugin.dreaming_activities.consolidator is consolidator
    assert plugin.dreaming_activities.index_search_attributes
    assert plugin.config.topology.host == "a"
    assert plugin.config.topology.host_timeout == timedelta(seconds=30)


@pytest.mark.parametrize(
    ("host", "local"), [(None, True), ("a", False)], ids=["one-host", "pinned-host"]
)
def test_a_scripted_model_is_local_unless_the_worker_is_pinned(
    tmp_path: Path, host: str | None, local: bool
) -> None:
    plugin = LittleWorkflowPlugin(
        tmp_path, DEFINITIONS, model=ScriptedModel({}), deployment=DeploymentOptions(host=host)
    )
    assert plugin.model_activities.worker_settings().local_model is local


@pytest.mark.parametrize(
    ("build", "words"),
    [
        (lambda: ModelCallOptions(context_budget_tokens=0), "ModelCallOptions(context_budget"),
        (lambda: OrchestratorOptions(max_turns=-1), "OrchestratorOptions(max_turns=-1)"),
        (lambda: BashOptions(output_cap=0), "BashOptions(output_cap=0)"),
        (lambda: DreamingAgentOptions(max_turns=0), "DreamingAgentOptions(max_turns=0)"),
    ],
    ids=["model-calls", "orchestrator", "bash", "dreaming"],
)
def test_a_bad_value_names_its_group_and_field(build: object, words: str) -> None:
    with pytest.raises(ValueError, match="must be a positive integer") as err:
        build()  # type: ignore[operator]
    assert words in str(err.value)


def test_groups_are_frozen_so_one_object_can_serve_many_workers() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        BashOptions().output_cap = 1  # type: ignore[misc]
