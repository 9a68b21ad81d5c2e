"""Each command is an ordinary Unix user inside the sandbox, on both backends: a name
for its uid, a group, ``HOME``/``USER``/``LOGNAME``, a host name, and a git author
(the definition's) that commits work; the files behind it are generated from the ids
the command really has and cannot be changed by it."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path, PurePosixPath

import pytest
from pydantic import ValidationError
from temporalio.testing import WorkflowEnvironment

from lw_temporal import LittleWorkflowPlugin, WorkflowDefinition
from lw_temporal._sandbox import SandboxSpec, SandboxUser
from lw_temporal._sandbox._accounts import Account, account_files, nss_wrapper
from lw_temporal._sandbox._bwrap import INSIDE_IDS, BwrapBackend
from lw_temporal._sandbox._landlock import write_account_files
from tests._bash_support import SANDBOXES, bash_worker

PLANNER = "run_cr@identity"
AUTHOR = "Review Bot <review-bot@example.com>"


def test_account_files_follow_the_ids_they_are_made_for() -> None:
    files = account_files(Account(), 4242, 4343, "/home/x")
    passwd = files["/etc/passwd"].decode().splitlines()
    assert "agent:x:4242:4343:agent:/home/x:/bin/bash" in passwd
    assert passwd[0].startswith("root:x:0:0:") and passwd[-1].startswith("nobody:x:65534:")
    assert "agent:x:4343:" in files["/etc/group"].decode().splitlines()
    gitconfig = files["/etc/gitconfig"].decode()
    assert '\tname = "agent"' in gitconfig and "\tdirectory = *" in gitconfig
    odd = Account(git_author='A "quoted" # name; \\ <a@b>')
    assert (
        '\tname = "A \\"quoted\\" # name; \\\\"'
        in account_files(odd, 1, 1, "/")["/etc/gitconfig"].decode()
    )


def test_each_backend_generates_them_for_the_ids_its_command_has(tmp_path: Path) -> None:
    spec = SandboxSpec(
        argv=("/bin/true",),
        cwd=PurePosixPath("/mnt/scratch/own"),
        mounts=(),
        private_dir=tmp_path,
        user=SandboxUser(4242, 4343),
    )
    written = write_account_files(spec, "/real/home")
    assert "agent:x:4242:4343:agent:/real/home:" in Path(written["/etc/passwd"]).read_text()
    fds = BwrapBackend().root_fds(dataclasses.replace(spec, user=SandboxUser(5, 5)))
    try:
        by_path = {path: Path(f"/proc/self/fd/{fd}").read_bytes() for fd, path in fds}
    finally:
        for fd, _ in fds:
            os.close(fd)
    uid, gid = INSIDE_IDS
    assert f"agent:x:{uid}:{gid}:agent:/mnt/scratch/own:" in by_path["/etc/passwd"].decode()


def test_a_git_author_is_validated_and_moves_no_memory() -> None:
    plain = WorkflowDefinition(id="cr")
    authored = WorkflowDefinition(id="cr", git_author=AUTHOR)
    assert authored.definition_hash == plain.definition_hash
    with pytest.raises(ValidationError, match="Name <email>"):
        WorkflowDefinition(id="cr", git_author="no email")


@pytest.mark.parametrize("sandbox", SANDBOXES)
async def test_an_ordinary_user_on_each_backend(
    dev_env: WorkflowEnvironment, data_dir: Path, sandbox: str
) -> None:
    if sandbox == "landlock" and nss_wrapper() is None:
        pytest.skip("needs libnss-wrapper (the Makefile's system-deps installs it)")
    definition = WorkflowDefinition(id="cr", git_author=AUTHOR)
    plugin = LittleWorkflowPlugin(data_dir, [definition], sandbox=sandbox)
    async with bash_worker(dev_env, plugin) as bash:
        who, git, write, built, mode, after = await bash.run(
            PLANNER,
            [
                "whoami; id -un; id -gn; echo $USER $LOGNAME $HOME; hostname; "
                "python3 -c 'import getpass; print(getpass.getuser())'",
                "git init -q r && cd r && echo a > a && git add a && git commit -qm first && "
                "git log --format='%an <%ae>|%s'",
                "echo evil >> /etc/passwd",
                "f=/etc/pass; echo evil >> ${f}wd",
                "f=/etc/pass; chmod 666 ${f}wd 2>/dev/null; echo evil >> ${f}wd",
                "grep -c evil /etc/passwd; grep -c '^agent:' /etc/passwd",
            ],
        )
    assert who.exit_code == 0, who.stderr
    assert who.stdout == "agent\nagent\nagent\nagent agent /mnt/scratch/own\nsandbox\nagent\n"
    assert git.exit_code == 0, git.stderr
    assert git.stdout == f"{AUTHOR}|first\n"
    assert write.rejection == "path is read-only: /etc/passwd"
    assert built.exit_code != 0 and mode.exit_code != 0
    assert after.stdout == "0\n1\n"
