"""``lw-temporal memory`` works on a data dir without a server: audit lines name who
changed what, versions are listed, restore and redact are applied whole and audited
with the ``--by`` actor, and a bad STORE, PATH or SHA256 is one clear line on stderr
with a non-zero exit and nothing changed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from lw_temporal._cli import main
from lw_temporal.ids import DataLayout
from lw_temporal.memory import MemoryStores, MutationResult, Provenance, StoreKind, StoreRef

STORE = StoreRef(StoreKind.WORKFLOW, "notes")
SECRET = "jane.doe@example.com"


def _seed(data_dir: Path) -> tuple[MemoryStores, MutationResult, MutationResult]:
    stores = MemoryStores(DataLayout.at(data_dir))
    v1 = stores.write(
        STORE, "a.md", f"call {SECRET}\n".encode(), provenance=Provenance.admin("alice")
    )
    v2 = stores.append(STORE, "a.md", b"called back\n", provenance=Provenance.admin("bob"))
    stores.write(STORE, "b.md", b"other\n", provenance=Provenance.admin("alice"))
    return stores, v1, v2


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["memory", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def _sha(result: MutationResult) -> str:
    assert result.content_sha256 is not None
    return result.content_sha256


def test_audit_lists_every_change_with_who(
    data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _stores, v1, v2 = _seed(data_dir)
    code, out, err = _run(capsys, "audit", "--data-dir", str(data_dir), "workflow:notes")
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert len(lines) == 3
    assert " write " in lines[0] and " a.md " in lines[0]
    assert f"sha256 {_sha(v1)[:12]}" in lines[0] and lines[0].endswith("by admin alice")
    assert " append " in lines[1] and f"sha256 {_sha(v2)[:12]}" in lines[1]
    assert f"{v2.bytes} bytes" in lines[1] and lines[1].endswith("by admin bob")
    assert " b.md " in lines[2]

    code, out, _ = _run(
        capsys, "audit", "--data-dir", str(data_dir), "workflow:notes", "--path", "a.md"
    )
    assert code == 0 and len(out.splitlines()) == 2
    code, out, _ = _run(
        capsys, "audit", "--data-dir", str(data_dir), "workflow:notes", "--limit", "1"
    )
    assert code == 0 and out.splitlines() == lines[-1:]


def test_audit_runs_as_a_process(data_dir: Path) -> None:
    _seed(data_dir)
    command = [sys.executable, "-m", "lw_temporal._cli", "memory", "audit"]
    done = subprocess.run(
        [*command, "--data-dir", str(data_dir), "workflow:notes"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert len(done.stdout.splitlines()) == 3 and done.stderr == ""
    failed = subprocess.run(
        [*command, "--data-dir", str(data_dir), "workflow:missing"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert failed.returncode != 0 and failed.stdout == ""
    assert failed.stderr.splitlines() == [
        "lw-temporal: memory audit failed: no store workflow:missing in data dir "
        f"{data_dir} (known workflow stores: notes)"
    ]


def test_versions_are_listed(data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _stores, v1, v2 = _seed(data_dir)
    code, out, err = _run(capsys, "versions", "--data-dir", str(data_dir), "workflow:notes", "a.md")
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert [line.split()[0] for line in lines] == [_sha(v1), _sha(v2)]
    assert f"{v1.bytes} bytes" in lines[0] and "write by admin alice" in lines[0]
    assert lines[1].endswith("(current)") and "(current)" not in lines[0]


def test_restore_brings_a_version_back_and_is_audited(
    data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    stores, v1, v2 = _seed(data_dir)
    code, out, err = _run(
        capsys,
        "restore",
        "--data-dir",
        str(data_dir),
        "workflow:notes",
        "a.md",
        _sha(v1)[:10],  # a unique prefix is enough
        "--by",
        "carol",
    )
    assert (code, err) == (0, "")
    assert out.startswith(f"restored workflow:notes:a.md to {_sha(v1)}")
    assert (data_dir / "memory/workflows/notes/a.md").read_text() == f"call {SECRET}\n"
    last = stores.audit(STORE)[-1]
    assert (last.op, last.path, last.actor) == ("restore", "a.md", "carol")
    assert (last.sha256_before, last.sha256_after) == (_sha(v2), _sha(v1))
    code, out, _ = _run(capsys, "audit", "--data-dir", str(data_dir), "workflow:notes")
    assert " restore " in out.splitlines()[-1] and out.splitlines()[-1].endswith("admin carol")


def test_redact_reaches_the_file_and_every_kept_version(
    data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    stores, _v1, _v2 = _seed(data_dir)
    code, out, err = _run(
        capsys,
        "redact",
        "--data-dir",
        str(data_dir),
        "workflow:notes",
        "a.md",
        r"[\w.]+@example\.com",
        "--regex",
        "--by",
        "dpo",
    )
    assert (code, err) == (0, "")
    assert out.startswith("redacted workflow:notes:a.md by dpo")
    assert stores.read(STORE, "a.md").content == "call [REDACTED]\ncalled back\n"
    for version in stores.versions(STORE, "a.md"):
        blob = stores.blob(STORE, version.sha256)
        assert blob is not None and SECRET.encode() not in blob
    for path in data_dir.rglob("*"):
        if path.is_file():
            assert SECRET.encode() not in path.read_bytes(), path
    last = stores.audit(STORE)[-1]
    assert (last.op, last.path, last.actor) == ("redact", "a.md", "dpo")
    assert stores.read(STORE, "b.md").content == "other\n"

    code, out, _ = _run(
        capsys, "redact", "--data-dir", str(data_dir), "workflow:notes", "a.md", SECRET,
        "--by", "dpo",
    )  # fmt: skip
    assert code == 0 and "the file is unchanged" in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["audit", "workflows:notes"],
            "STORE 'workflows:notes' is not a memory store; write workflow:<definition id>, "
            "pipeline:<pipeline key>, org or dreaming:<definition id>",
        ),
        (["audit", "workflow:Notes"], "definition id 'Notes' is not valid"),
        (["audit", "pipeline:xyz"], "a pipeline key is lowercase hex"),
        (["audit", "org"], "no store org in data dir"),
        (["audit", "workflow:notes", "--path", "gone.md"], "workflow:notes:gone.md has no audit"),
        (["versions", "workflow:notes", "gone.md"], "workflow:notes:gone.md has no kept versions"),
        (["versions", "workflow:notes", "../a.md"], "'..' is not allowed"),
        (
            ["restore", "workflow:notes", "gone.md", "0" * 64, "--by", "carol"],
            "workflow:notes:gone.md has no kept versions",
        ),
        (
            ["restore", "workflow:notes", "a.md", "not-a-sha", "--by", "carol"],
            "SHA256 'not-a-sha' is not a sha256",
        ),
        (
            ["restore", "workflow:notes", "a.md", "0" * 64, "--by", "carol"],
            f"{'0' * 64} is not a kept version of workflow:notes:a.md",
        ),
        (
            ["redact", "workflow:notes", "gone.md", "x", "--by", "dpo"],
            "workflow:notes:gone.md does not exist and has no kept versions",
        ),
        (["redact", "workflow:notes", "a.md", "(", "--regex", "--by", "dpo"], "not a valid regex"),
        (["redact", "workflow:notes", "a.md", "x*", "--regex", "--by", "dpo"], "matches empty"),
    ],
)
def test_errors_are_one_line_and_change_nothing(
    data_dir: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    stores, _v1, _v2 = _seed(data_dir)
    before = stores.audit(STORE)
    content = stores.read(STORE, "a.md").content
    verb, store, *rest = argv
    code, out, err = _run(capsys, verb, "--data-dir", str(data_dir), store, *rest)
    assert code != 0 and out == ""
    assert len(err.splitlines()) == 1, err
    assert err.startswith(f"lw-temporal: memory {verb} failed: ") and message in err
    assert stores.audit(STORE) == before
    assert stores.read(STORE, "a.md").content == content


def test_missing_data_dir_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _out, err = _run(capsys, "audit", "--data-dir", str(tmp_path / "nowhere"), "org")
    assert code != 0 and "does not exist" in err
    assert not (tmp_path / "nowhere").exists()


def test_pipeline_and_org_stores(data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    stores = MemoryStores(DataLayout.at(data_dir))
    key = "ab" * 32
    stores.write(
        StoreRef(StoreKind.PIPELINE, key), "p.md", b"p\n", provenance=Provenance.admin("x")
    )
    stores.write(StoreRef(StoreKind.ORG, "org"), "o.md", b"o\n", provenance=Provenance.admin("y"))
    for store, path in ((f"pipeline:{key}", "p.md"), ("pipeline:abab", "p.md"), ("org", "o.md")):
        code, out, err = _run(capsys, "audit", "--data-dir", str(data_dir), store)
        assert (code, err) == (0, ""), store
        assert f" {path} " in out and len(out.splitlines()) == 1
