"""Network egress by allowlist: the worker's proxy and the policies it enforces.

A definition's ``NetworkPolicy`` names the hosts its agents may reach; ``lw.bash``
opens a session of the worker's egress proxy (its own process, outside every
sandbox) for each command of such an agent, the sandbox's connect broker hands the
command's connections to it, and the proxy decides, relays and audits each one.
Without a policy nothing here runs.

The proxy's own modules (``_server``, ``_proxy``, ``_patterns``, ``_addresses``,
``_http``, ``_tls``, ``_audit``) use the standard library alone: its process loads
them without this package's other imports.
"""

from __future__ import annotations

from ._audit import log_folder, log_path, records
from ._policy import PROXY_HOST, PROXY_PORT, PROXY_URL, NetworkPolicy, proxy_environment
from ._service import EgressService, EgressSession, ProxyLimits
from ._use import NetworkUse

__all__ = [
    "PROXY_HOST",
    "PROXY_PORT",
    "PROXY_URL",
    "EgressService",
    "EgressSession",
    "NetworkPolicy",
    "NetworkUse",
    "ProxyLimits",
    "log_folder",
    "log_path",
    "proxy_environment",
    "records",
]
