"""``NetworkPolicy``: which hosts a definition's agents may reach, and how they do.

A definition without one has no network at all (as every command had before). The
policy is data in the definition, so the definition's hash covers it; it is read
once into the agent's scope (its role must be listed) and from there by everything
that enforces or tells it: the proxy's session, the sandbox's connect broker and the
agent's prompt.
"""

from __future__ import annotations

from typing import Literal

from pydantic import field_validator

from .._base import FrozenModel
from ._patterns import HostRule, PatternError, parse_rule
from ._suffixes import check_wildcard

#: Where every command with a policy reaches the proxy (the proxy variables name it):
#: the sandbox's connect broker hands a connection to this address to the proxy.
PROXY_HOST, PROXY_PORT = "127.0.0.1", 3128
PROXY_URL = f"http://{PROXY_HOST}:{PROXY_PORT}"
#: The variables that send clients to the proxy (curl reads the lower-case
#: ``http_proxy`` only, pip and git either; ``NO_PROXY`` keeps a command's own
#: loopback servers direct).
PROXY_VARIABLES = (
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "http_proxy",
    "https_proxy",
    "all_proxy",
)
_NO_PROXY = "localhost,127.0.0.1,::1"

PolicyRole = Literal["planner", "worker"]


def proxy_environment() -> dict[str, str]:
    """The environment a command with a network policy gets."""
    env = dict.fromkeys(PROXY_VARIABLES, PROXY_URL)
    env.update(NO_PROXY=_NO_PROXY, no_proxy=_NO_PROXY)
    return env


class NetworkPolicy(FrozenModel):
    """The hosts a definition's agents may reach, through the worker's egress proxy.

    ``allow``: host patterns (``"pypi.org"``, ``"*.example.co.uk:443"``,
    ``"files.example.com:8443"``; without a port, 80 and 443), normalised (lower
    case, punycode, no trailing dot) and sorted, so two spellings of one policy hash
    the same; a wildcard over a public suffix (``*.co.uk``, ``*.github.io``) is
    refused. ``roles``: which of the definition's agents get it (``planner``,
    ``worker``; none by default).
    """

    allow: tuple[str, ...]
    roles: tuple[PolicyRole, ...] = ()

    @field_validator("allow")
    @classmethod
    def _allow(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if not value:
            raise ValueError(
                "allow names no host; leave WorkflowDefinition.network unset for no network"
            )
        seen: dict[str, str] = {}
        for text in value:
            try:
                rule = parse_rule(text)
                check_wildcard(rule)
            except PatternError as err:
                raise ValueError(str(err)) from None
            if rule.text in seen:
                raise ValueError(
                    f"allow lists {rule.text!r} twice ({seen[rule.text]!r} and {text!r}); "
                    "list each host once"
                )
            seen[rule.text] = text
        return tuple(sorted(seen))

    @field_validator("roles")
    @classmethod
    def _roles(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if len(set(value)) != len(value):
            raise ValueError(f"roles lists a role twice: {list(value)}")
        return tuple(sorted(value))

    @property
    def rules(self) -> tuple[HostRule, ...]:
        return tuple(parse_rule(text) for text in self.allow)

    def describe(self) -> str:
        """What the agent's prompt says about its network."""
        hosts = "; ".join(rule.describe() for rule in self.rules)
        return (
            f"Network: only through the egress proxy at {PROXY_URL} (HTTP_PROXY, HTTPS_PROXY "
            "and ALL_PROXY are set, so pip, git and curl use it), to these hosts: "
            f"{hosts}. Every other host, IP address and direct connection is refused "
            "and logged."
        )
