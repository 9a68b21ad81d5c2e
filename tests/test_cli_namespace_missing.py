"""``status`` and ``cancel`` of a workflow in a namespace the server does not have say
that the namespace is missing (they said the workflow was), in one line."""

from __future__ import annotations

import pytest
from temporalio.testing import WorkflowEnvironment

from ._live_support import lw


@pytest.mark.parametrize("verb", ["status", "cancel"])
async def test_a_missing_namespace_is_named(dev_env: WorkflowEnvironment, verb: str) -> None:
    code, out, err = await lw(dev_env, verb, "pipeline_x", "--namespace", "no-such-ns")
    assert code == 1, (out, err)
    assert err.endswith(
        "no namespace 'no-such-ns' on "
        f"{dev_env.client.service_client.config.target_host}: pass --namespace NAME "
        "(or $TEMPORAL_NAMESPACE), or create it\n"
    ), err
    assert err.count("\n") == 1
