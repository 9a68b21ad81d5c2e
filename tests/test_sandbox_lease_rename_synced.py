"""A grant's lease record is durable, rename included: its data is synced before it
is renamed into the table and the table's folder is synced after, before the number
owns anything (a record lost in a crash of the host would leave the folder it names
to the number's next holder). Seen in the system calls of a real grant."""

from __future__ import annotations

from pathlib import Path

from ._lease_trace_support import needs_strace, traced_grant


@needs_strace
def test_the_record_and_its_rename_are_synced_before_the_folder_is_given(
    tmp_path: Path,
) -> None:
    number, calls = traced_grant(tmp_path)
    leases = tmp_path / "state" / "identities" / "leases"
    renamed = next(
        i
        for i, call in enumerate(calls)
        if "rename(" in call and f'{leases}/{number}.json"' in call
    )
    tmp = calls[renamed].split('"')[1]
    assert any(f"fsync({n}" in c for c in calls[:renamed] for n in _fds_of(calls, tmp)), (
        "the record's data was not synced before its rename"
    )
    synced = next(
        (
            i
            for i, call in enumerate(calls)
            if i > renamed and "fsync(" in call and f"<{leases}>)" in call
        ),
        None,
    )
    assert synced is not None, "the leases folder was not synced after the rename"
    given = next(i for i, call in enumerate(calls) if f"<{tmp_path / 'k1'}>" in call)
    assert synced < given, "the folder was given to the number before the rename was on disk"


def _fds_of(calls: list[str], path: str) -> set[str]:
    """The descriptors (as ``strace -y`` shows them) that were opened on ``path``."""
    return {
        c.split("= ", 1)[1].split("<", 1)[0] for c in calls if "openat(" in c and f'"{path}"' in c
    }
