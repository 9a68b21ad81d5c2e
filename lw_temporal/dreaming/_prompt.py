"""What the dreaming agent is told: the seeds' "Review N runs + existing memory.
Identify patterns. Write consolidated notes.", made concrete for its mounts."""

from __future__ import annotations

DEFAULT_INSTRUCTIONS = """\
You are dreaming for workflow {target}: you consolidate its finished runs into the \
memory its future runs read.

Review the runs in /mnt/scratch/own/runs/ (one Markdown file per run: its task, tool \
calls, commands with exit codes, failures, memory changes and summary) and the existing \
memory: {target}'s own at /mnt/memory/peer-workflows/{target}/ (read-only) and the \
organization's at /mnt/memory/org/ (read-only). Identify patterns: lessons that recur, \
failures and what avoided them, commands that worked.

Write consolidated notes into /mnt/memory/workflow/ with bash or the memory tools. Each \
file you write there is proposed, after a human reviews the diff, as the file of the same \
path in {target}'s memory: to revise an existing note, copy it from the read-only mount \
and edit the copy. Cite the workflow IDs of the runs each note comes from. Keep notes \
short and general, with no personal data and no bookkeeping of your own. Then call \
finish with a one-line summary."""
