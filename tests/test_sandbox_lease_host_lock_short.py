"""The host-wide lock under which numbers change hands is held only to choose a number
and record it (a rename): no ``fsync`` happens while it is held, so new agents of
every data dir on the host do not wait for each other's disk. Seen in the system
calls of a real grant."""

from __future__ import annotations

from pathlib import Path

from ._lease_trace_support import needs_strace, traced_grant


@needs_strace
def test_no_sync_while_the_host_lock_is_held(tmp_path: Path) -> None:
    number, calls = traced_grant(tmp_path)
    lock = f"<{tmp_path / 'ids.lock'}>"
    taken = next(
        i for i, call in enumerate(calls) if call.split()[1].startswith("flock(") and lock in call
    )
    released = next(
        i for i, call in enumerate(calls) if i > taken and "close(" in call and lock in call
    )
    held = calls[taken:released]
    assert any(f'/leases/{number}.json"' in call and "rename(" in call for call in held)
    assert not [call for call in held if "fsync(" in call or "fdatasync(" in call]
    assert [call for call in calls if "fsync(" in call]  # the grant is still durable
