"""``lw-temporal demo`` runs the sample pipeline end to end, twice on the same data dir,
and leaves exactly the seeds' layout on disk with memory in the right stores."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

from lw_temporal.ids import DataLayout, pipeline_key
from workflows.pipeline import DEFINITIONS, ORG_POLICY


def _demo(data_dir: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "lw_temporal._cli", "demo", "--data-dir", str(data_dir)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def _tree(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


def _expected_run_tree() -> set[str]:
    paths = {"scratch", "scratch/brief.md", "sub-runs"}
    for run, files, steps in (
        ("run_candidate-review@1", "findings.md", 3),
        ("run_candidate-scoring@2", "score.md", 2),
    ):
        base = f"sub-runs/{run}"
        paths |= {base, f"{base}/scratch", f"{base}/scratch/plan.md", f"{base}/steps"}
        for i in range(1, steps + 1):
            step = f"{base}/steps/step_{i}"
            paths |= {step, f"{step}/scratch", f"{step}/scratch/{files}"}
    return paths


def test_demo_twice_leaves_the_seeds_layout_and_accumulates_memory(tmp_path: Path) -> None:
    data_dir = tmp_path / "lw"
    outputs = [_demo(data_dir), _demo(data_dir)]
    for done in outputs:
        assert done.returncode == 0, done.stdout + done.stderr
        assert "Temporal UI: http://127.0.0.1:" in done.stdout
        assert "pipeline finished" in done.stdout
        assert "run tree:" in done.stdout

    layout = DataLayout.at(data_dir)
    runs = sorted(p.name for p in layout.runs.iterdir())
    pipelines = [r for r in runs if r.startswith("pipeline_")]
    dreams = [r for r in runs if r.startswith("dream_candidate-review@")]
    assert len(pipelines) == 2 and len(dreams) == 2 and len(runs) == 4
    for done in outputs:  # each demo ends with a dream by the agent, shown and approved
        assert "notes by the dreaming agent" in done.stdout
        assert "+++ b/candidate-review/consolidated.md" in done.stdout
        assert "approved by demo: promoted consolidated.md" in done.stdout
    for pipeline in pipelines:
        run_dir = layout.runs / pipeline
        assert _tree(run_dir) == _expected_run_tree()
        review = run_dir / "sub-runs/run_candidate-review@1"
        findings = (review / "steps/step_2/scratch/findings.md").read_text()
        # A worker read its planner's plan, its workflow's template and the brief.
        assert findings.splitlines() == [
            "# gap-analysis",
            "Steps: resume, gap-analysis, references.",
            "# Senior engineer",
            "Candidate: Dana Reyes, applying for job ABC-123 (senior engineer).",
        ]
        score = run_dir / "sub-runs/run_candidate-scoring@2/steps/step_1/scratch/score.md"
        assert "peer lessons read:" in score.read_text()

    # Memory: each store holds what its writers were allowed to write, nothing else.
    review_store = layout.workflow_memory("candidate-review")
    assert _tree(review_store) == {
        "lessons-learned.md",
        "job-templates",
        "job-templates/senior-engineer.md",
        "consolidated.md",
        "failures.md",
    }
    assert "<!--" not in (review_store / "consolidated.md").read_text()
    lessons = (review_store / "lessons-learned.md").read_text()
    for pipeline in pipelines:
        assert lessons.count(f"## {pipeline}/sub-runs/run_candidate-review@1\n") == 1
    assert _tree(layout.workflow_memory("candidate-scoring")) == {"rubric.md"}
    history = (layout.pipeline_memory(pipeline_key(DEFINITIONS)) / "history.md").read_text()
    assert [line.split(":")[0] for line in history.splitlines()] == [f"- {p}" for p in pipelines]
    assert (layout.org_memory / "policies/pii-handling.md").read_text() == ORG_POLICY
    assert _tree(layout.memory) == {
        "org",
        "org/policies",
        "org/policies/pii-handling.md",
        "pipelines",
        f"pipelines/{pipeline_key(DEFINITIONS)}",
        f"pipelines/{pipeline_key(DEFINITIONS)}/history.md",
        "workflows",
        "workflows/candidate-review",
        *(f"workflows/candidate-review/{p}" for p in _tree(review_store)),
        "workflows/candidate-scoring",
        "workflows/candidate-scoring/rubric.md",
        "workflows/memory.dreaming",
        "workflows/memory.dreaming/candidate-review",
        "workflows/memory.dreaming/candidate-review/consolidated.md",
        "workflows/memory.dreaming/candidate-review/failures.md",
    }

    # The audit log saw each mutation exactly once, from the role allowed to make it.
    audit: Counter[tuple[str, str, str]] = Counter()
    for log in layout.state.rglob("audit.jsonl"):
        for line in log.read_text().splitlines():
            entry = json.loads(line)
            audit[(entry["role"], entry["store"], entry["path"])] += 1
    assert audit == {
        ("planner", "workflow:candidate-review", "job-templates/senior-engineer.md"): 2,
        ("planner", "workflow:candidate-review", "lessons-learned.md"): 2,
        ("planner", "workflow:candidate-scoring", "rubric.md"): 2,
        ("orchestrator", f"pipeline:{pipeline_key(DEFINITIONS)}", "history.md"): 2,
        # The dreaming agent's bash wrote its own store; each approval, the target.
        # The second dream's failures.md said what the target already held.
        ("dreaming", "dreaming:candidate-review", "consolidated.md"): 2,
        ("dreaming", "dreaming:candidate-review", "failures.md"): 1,
        ("dreaming", "workflow:candidate-review", "consolidated.md"): 2,
        ("dreaming", "workflow:candidate-review", "failures.md"): 1,
    }
