"""The pre-write scan: the default blocks secret shapes (the store stays unchanged,
the error names the rule without echoing the secret) and reports personal data
without blocking; a custom Scanner plugs in."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import WorkflowEnvironment

from lw_temporal import DefaultScanner, Finding, LittleWorkflowPlugin, WorkflowDefinition
from lw_temporal.memory import Provenance, StoreKind, StoreRef
from lw_temporal.options import MemoryOptions

from ._memory_support import call, memory_harness

# Built at run time so that no literal secret shape sits in the repository.
SECRETS = {
    "private-key": "-----BEGIN " + "OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXk=\n",
    "aws-access-key-id": "key id AKIA" + "Q3EGRIXTWJ7LUMEN here",
    "aws-secret-access-key": "aws_secret_access_key = "
    + "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    "github-token": "token ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8",
    "slack-token": "xoxb-" + "123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx",
    "openai-api-key": "OPENAI=sk-proj-" + "abcDEF123456ghiJKL789012mnoPQR",
    "anthropic-api-key": "sk-ant-" + "api03-abcdefghijklmnopqrstuvwxyz0123456789",
    "google-api-key": "AIza" + "SyA1234567890abcdefghijklmnopqrstuv",
}


@pytest.mark.parametrize("rule", sorted(SECRETS))
def test_default_scanner_blocks_secret_shapes(rule: str) -> None:
    findings = DefaultScanner().scan("notes.md", SECRETS[rule].encode())
    blocking = [f for f in findings if f.blocking]
    assert [f.rule for f in blocking] == [rule]
    assert blocking[0].kind == "secret"
    secret_tail = SECRETS[rule].strip()[-12:]
    assert secret_tail not in blocking[0].excerpt


def test_default_scanner_reports_pii_without_blocking() -> None:
    text = (
        "contact jane.doe@example.com or +1 415-555-0132\n"
        "card 4111 1111 1111 1111 on file\n"
        "order number 4111 1111 1111 1112 is not a card\n"
        "released 2026-11-30, build 1234567\n"
    )
    findings = DefaultScanner().scan("n.md", text.encode())
    assert not any(f.blocking for f in findings)
    assert sorted((f.rule, f.line) for f in findings) == [
        ("card-number", 2),
        ("email", 1),
        ("phone-number", 1),
    ]
    assert all(f.excerpt != "jane.doe@example.com" for f in findings)
    assert DefaultScanner(block_pii=True).scan("n.md", b"a@b.io")[0].blocking


async def test_blocked_write_leaves_the_store_unchanged(
    dev_env: WorkflowEnvironment, data_dir: Path, task_queue: str
) -> None:
    plugin = LittleWorkflowPlugin(data_dir, [WorkflowDefinition(id="notes")])
    path = "/mnt/memory/workflow/creds.md"
    leaked = SECRETS["github-token"]
    async with memory_harness(dev_env, plugin, task_queue) as run:
        out = await run(
            f"run_notes@{task_queue}",
            call("lw.memory.write", path=path, content="safe note\n"),
            call("lw.memory.append", path=path, content=f"use {leaked}\n"),
            call("lw.memory.write", path=path, content=leaked),
            call("lw.memory.replace", path=path, old="safe note", new=leaked),
            call("lw.memory.append", path=path, content="ping ops@example.com\n"),
        )
    assert out[0].ok
    assert [o.error_type for o in out[1:4]] == ["LwScanBlocked"] * 3
    for o in out[1:4]:
        assert "github-token" in (o.message or "") and leaked[-20:] not in (o.message or "")
    assert out[4].ok and [f["rule"] for f in out[4].result["findings"]] == ["email"]
    text = (data_dir / "memory/workflows/notes/creds.md").read_text()
    assert text == "safe note\nping ops@example.com\n"
    store = StoreRef(StoreKind.WORKFLOW, "notes")
    assert [e.op for e in plugin.memory.audit(store)] == ["write", "append"]
    for blob in (data_dir / ".lw").rglob("*"):
        if blob.is_file():
            assert leaked.encode() not in blob.read_bytes(), blob


class _NoTodo:
    def scan(self, path: str, content: bytes) -> Sequence[Finding]:
        if b"TODO" in content:
            return [Finding(rule="todo", kind="secret", blocking=True, path=path, line=1,
                            excerpt="TODO")]  # fmt: skip
        return []


def test_custom_scanner_plugs_in(data_dir: Path) -> None:
    plugin = LittleWorkflowPlugin(
        data_dir, [WorkflowDefinition(id="n")], memory=MemoryOptions(scanner=_NoTodo())
    )
    store = StoreRef(StoreKind.WORKFLOW, "n")
    with pytest.raises(ApplicationError) as err:
        plugin.memory.write(store, "a.md", b"TODO later", provenance=Provenance.admin("t"))
    assert err.value.type == "LwScanBlocked"
    # the custom scanner replaces the default: a key shape passes
    plugin.memory.write(store, "b.md", SECRETS["google-api-key"].encode(),
                        provenance=Provenance.admin("t"))  # fmt: skip
