"""Definitions validate where they are written, and hash as DESIGN section 3 says."""

from __future__ import annotations

import hashlib
import json

import pytest
from pydantic import ValidationError

from lw_temporal import LittleWorkflowPlugin, MemoryConfig, WorkflowDefinition
from lw_temporal._definitions import DefinitionRegistry, canonical_json
from lw_temporal.ids import pipeline_key


def test_memory_defaults_follow_the_seeds() -> None:
    config = MemoryConfig()
    assert (config.workflow, config.org, config.attach) == ("rw", "ro", ())


def test_attach_mode_other_than_ro_says_what_to_change() -> None:
    with pytest.raises(ValidationError, match="attach mode must be 'ro'"):
        MemoryConfig(attach=[{"id": "candidate-review", "mode": "rw"}])


@pytest.mark.parametrize("bad", ["Candidate", "", "-x", "a/b", "a" * 64, "x..y/z", "ü"])
def test_an_id_outside_the_grammar_is_refused(bad: str) -> None:
    with pytest.raises(ValidationError, match="definition id"):
        WorkflowDefinition(id=bad)


@pytest.mark.parametrize("field", ["workflow", "org"])
def test_access_is_rw_ro_or_none(field: str) -> None:
    with pytest.raises(ValidationError):
        MemoryConfig(**{field: "write"})


def test_unknown_fields_are_refused() -> None:
    with pytest.raises(ValidationError):
        WorkflowDefinition(id="x", memroy={})  # type: ignore[call-arg]


def test_duplicate_definition_ids_are_refused() -> None:
    with pytest.raises(ValueError, match="registered twice"):
        LittleWorkflowPlugin(
            "/tmp/unused", [WorkflowDefinition(id="a"), WorkflowDefinition(id="a")]
        )


def test_attaching_an_unregistered_definition_is_refused() -> None:
    scoring = WorkflowDefinition(
        id="candidate-scoring",
        memory=MemoryConfig(attach=[{"id": "candidate-review"}]),
    )
    with pytest.raises(ValueError, match="not registered"):
        DefinitionRegistry([scoring])


def test_attaching_twice_or_self_is_refused() -> None:
    with pytest.raises(ValidationError, match="twice"):
        MemoryConfig(attach=[{"id": "a"}, {"id": "a"}])
    with pytest.raises(ValueError, match="attaches itself"):
        DefinitionRegistry([WorkflowDefinition(id="a", memory=MemoryConfig(attach=[{"id": "a"}]))])


def test_the_dreaming_id_is_reserved() -> None:
    with pytest.raises(ValueError, match="reserved"):
        DefinitionRegistry([WorkflowDefinition(id="memory.dreaming")])


def test_canonical_json_is_sorted_compact_utf8() -> None:
    assert canonical_json({"b": 1, "a": ["é", {"d": 2, "c": None}]}) == (
        '{"a":["é",{"c":null,"d":2}],"b":1}'.encode()
    )


def test_definition_hash_and_pipeline_key_match_the_formula() -> None:
    review = WorkflowDefinition(id="candidate-review", instructions="review")
    scoring = WorkflowDefinition(id="candidate-scoring")
    dumped = json.dumps(
        review.model_dump(mode="json"), sort_keys=True, separators=(",", ":"), ensure_ascii=False
    ).encode()
    assert review.definition_hash == hashlib.sha256(dumped).hexdigest()
    hashes = sorted([review.definition_hash, scoring.definition_hash])
    expected = hashlib.sha256(json.dumps(hashes, separators=(",", ":")).encode()).hexdigest()
    assert pipeline_key([scoring, review]) == pipeline_key([review, scoring]) == expected
    changed = WorkflowDefinition(id="candidate-review", instructions="other")
    assert pipeline_key([changed, scoring]) != expected
