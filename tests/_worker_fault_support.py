"""Definitions for ``lw-temporal worker`` whose plugin fails inside, after every start
check passed: importing this module (as ``--definitions`` does) makes the lw plugin's
own start raise (``LW_TEST_FAULT=raise``, as a data dir turned read-only would) or
never finish (``LW_TEST_FAULT=hang``), so the tests can see the worker end anyway."""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator

from lw_temporal._bash import BashActivities
from workflows.pipeline import DEFINITIONS as _SAMPLE

DEFINITIONS = _SAMPLE


@contextlib.asynccontextmanager
async def _faulty(self: BashActivities) -> AsyncIterator[None]:
    if os.environ.get("LW_TEST_FAULT") == "hang":
        print("lw-test: the plugin's start hangs", flush=True)
        await asyncio.Event().wait()
    raise OSError(30, "Read-only file system", str(self.config.layout.local_state))
    yield  # pragma: no cover


BashActivities.serving = _faulty  # type: ignore[method-assign]
