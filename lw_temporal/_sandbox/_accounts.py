"""Who a command is inside the sandbox, as programs ask: an ordinary Unix account.

Programs look their user up (``whoami``, ``id -un``, ``getpass.getuser()``, ssh, pip),
resolve ``localhost``, and git needs an author. Every command gets the same few files,
generated in one place (:func:`account_files`) from the uid and gid it runs as *inside*
the sandbox (whatever the backend maps it to) and the spec's :class:`Account`: passwd
and group entries for that user plus ``root`` and ``nobody`` (the owners ``ls`` shows
for system files and for files of other uids), ``hosts`` naming ``localhost`` and the
sandbox's host name, a system ``gitconfig`` with the author (an agent's own
``git config`` overrides it), and an ``nsswitch.conf`` that reads files only; and
``USER``/``LOGNAME`` beside ``HOME`` in the environment.

bwrap writes the files into its read-only root at ``/etc``. Landlock's ``/etc`` is the
host's, so there they live in the command's private folder, readable only, and
programs are pointed at them: git by ``GIT_CONFIG_SYSTEM``, the account lookups of
libc by nss_wrapper (Debian ``libnss-wrapper``, an ``LD_PRELOAD`` library made for
exactly this) where it is installed.
"""

from __future__ import annotations

import functools
import glob
import os
from collections.abc import Sequence
from dataclasses import dataclass

#: The name of the sandbox's user (and of its group).
USER_NAME = "agent"
#: The sandbox's host name (bwrap sets it in a UTS namespace of its own).
HOSTNAME = "sandbox"
#: The files :func:`account_files` generates, by their path inside the sandbox.
GENERATED_FILES = (
    "/etc/passwd",
    "/etc/group",
    "/etc/hosts",
    "/etc/gitconfig",
    "/etc/nsswitch.conf",
    "/etc/wgetrc",
)


@dataclass(frozen=True, slots=True)
class Account:
    """The account a command has inside the sandbox (the same name on every backend)."""

    #: ``Name <email>``: who the command's git commits are by, unless it configures
    #: another author itself.
    git_author: str = f"{USER_NAME} <{USER_NAME}@{HOSTNAME}.invalid>"
    name: str = USER_NAME
    hostname: str = HOSTNAME

    def environment(self) -> dict[str, str]:
        return {"USER": self.name, "LOGNAME": self.name}


def homes(home: str, name: str = USER_NAME) -> dict[str, str]:
    """Home folder by user name, as the sandbox's passwd says (``~name`` expands to it)."""
    return {"root": "/root", name: home, "nobody": "/nonexistent"}


def account_files(
    account: Account, uid: int, gid: int, home: str, others: Sequence[int] = ()
) -> dict[str, bytes]:
    """The generated system files by their ``/etc`` path, for a command running as
    ``uid``/``gid`` inside the sandbox with ``home`` as its home folder, holding the
    groups ``others`` too (each named ``lw-<number>``, so ``groups`` and ``id -Gn``
    find a name for every group of the command)."""
    users = {0: ("root", 0, "/root", "/usr/sbin/nologin")}
    users[65534] = ("nobody", 65534, "/nonexistent", "/usr/sbin/nologin")
    users[uid] = (account.name, gid, home, "/bin/bash")
    groups = {g: f"lw-{g}" for g in others}
    groups |= {0: "root", 65534: "nogroup", gid: account.name}
    passwd = "".join(
        f"{name}:x:{u}:{g}:{name}:{path}:{shell}\n"
        for u, (name, g, path, shell) in sorted(users.items())
    )
    group = "".join(f"{name}:x:{g}:\n" for g, name in sorted(groups.items()))
    author, _, email = account.git_author.rpartition(" <")
    gitconfig = (
        "[user]\n"
        f"\tname = {_git_value(author)}\n"
        f"\temail = {_git_value(email.rstrip('>'))}\n"
        # Every folder the sandbox shows is the agent's to use; files of another uid
        # (a store, a planner's scratch) are not a reason for git to refuse a repo.
        "[safe]\n"
        "\tdirectory = *\n"
    )
    hosts = (
        "127.0.0.1\tlocalhost\n"
        f"127.0.1.1\t{account.hostname}\n"
        "::1\tlocalhost ip6-localhost ip6-loopback\n"
    )
    nsswitch = "passwd: files\ngroup: files\nshadow: files\nhosts: files dns\n"
    return {
        "/etc/passwd": passwd.encode(),
        "/etc/group": group.encode(),
        "/etc/hosts": hosts.encode(),
        "/etc/gitconfig": gitconfig.encode(),
        "/etc/nsswitch.conf": nsswitch.encode(),
        # Empty: wget's defaults. Under Landlock the host's own would be there, closed,
        # and wget complains on every run that it cannot read it.
        "/etc/wgetrc": b"",
    }


def _git_value(text: str) -> str:
    """A git config value, quoted so that ``#``, ``;`` and ``\\`` stay text."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


@functools.cache
def nss_wrapper() -> str | None:
    """The nss_wrapper library, where installed (Debian/Ubuntu ``libnss-wrapper``)."""
    for pattern in (
        "/usr/lib/*/libnss_wrapper.so",
        "/usr/lib64/libnss_wrapper.so",
        "/usr/lib/libnss_wrapper.so",
    ):
        found = sorted(glob.glob(pattern))
        if found and os.path.isfile(found[0]):
            return found[0]
    return None


def redirected_environment(account: Account, files: dict[str, str]) -> dict[str, str]:
    """The environment that points programs at generated files kept away from
    ``/etc`` (``files``: ``/etc`` path -> where it really is), for a backend that
    cannot place them at ``/etc`` itself."""
    env = {"GIT_CONFIG_SYSTEM": files["/etc/gitconfig"], "SYSTEM_WGETRC": files["/etc/wgetrc"]}
    library = nss_wrapper()
    if library is not None:
        env.update(
            {
                "LD_PRELOAD": library,
                "NSS_WRAPPER_PASSWD": files["/etc/passwd"],
                "NSS_WRAPPER_GROUP": files["/etc/group"],
                "NSS_WRAPPER_HOSTS": files["/etc/hosts"],
                "NSS_WRAPPER_HOSTNAME": account.hostname,
            }
        )
    return env
