"""A number is reused only when no process of this host holds it as its real,
effective, saved or filesystem uid: the look through ``/proc`` finds each of them."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from lw_temporal._sandbox._lease_folders import has_processes

UID = 0x6FFF_F0F0  # inside no range a test leases from

root_only = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to take other uids")

HOLD = (
    "import os, sys, time\n"
    "os.setresuid(*map(int, sys.argv[1:4]))\n"
    "print('ready', flush=True)\n"
    "time.sleep(60)\n"
)


@root_only
@pytest.mark.parametrize(
    "ids",
    [(UID, UID, UID), (UID, 0, 0), (0, 0, UID), (0, UID, 0)],
    ids=["all", "real", "saved", "effective"],
)
def test_a_process_holding_the_uid_in_any_slot_is_found(ids: tuple[int, int, int]) -> None:
    assert not has_processes(UID)
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLD, *map(str, ids)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
        assert has_processes(UID)
    finally:
        proc.kill()
        proc.wait()
    deadline = time.monotonic() + 5
    while has_processes(UID) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not has_processes(UID)
