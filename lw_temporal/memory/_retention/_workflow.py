"""``lw.ScratchRetention``: one retention pass, started by a Schedule."""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy

from ...errors._kinds import NON_RETRYABLE
from ._records import RETENTION_GC, RETENTION_WORKFLOW, GcReport, RetentionPolicy


@workflow.defn(name=RETENTION_WORKFLOW)
class ScratchRetentionWorkflow:
    """One retention pass; a Schedule runs it periodically."""

    @workflow.run
    async def run(self, policy: RetentionPolicy) -> GcReport:
        report: GcReport = await workflow.execute_activity(
            RETENTION_GC,
            policy,
            result_type=GcReport,
            start_to_close_timeout=timedelta(hours=2),
            heartbeat_timeout=timedelta(minutes=2),
            retry_policy=RetryPolicy(
                maximum_attempts=3, non_retryable_error_types=list(NON_RETRYABLE)
            ),
        )
        return report
