"""What one command did on the network, as its ``BashResult`` carries it."""

from __future__ import annotations

from typing import Any

from .._base import FrozenModel


class NetworkUse(FrozenModel):
    """One command's connections through the egress proxy (the audit has each one).

    ``bytes_received`` counts the bytes of network responses that reached the
    sandbox (the proxy's own answers, such as a refusal, are not counted): more than
    zero means the command read something from the network.
    """

    attempts: int = 0
    allowed: int = 0
    refused: int = 0
    bytes_sent: int = 0
    bytes_received: int = 0
    #: The hosts reached (``host:port``), the first 20.
    hosts: tuple[str, ...] = ()
    #: Why connections were refused, the first 20 (also at the end of ``stderr``).
    refusals: tuple[str, ...] = ()
    refusals_omitted: int = 0
    #: Attempts past the command's bound on audit lines (counted, not listed).
    log_omitted: int = 0
    #: Set when the proxy ended before the command did (its network ended with it).
    proxy_error: str | None = None

    @property
    def read_network(self) -> bool:
        """Whether any network response reached the command."""
        return self.bytes_received > 0

    def notes(self) -> str:
        """The lines the command's ``stderr`` ends with: each refusal, and a proxy
        that ended before the command."""
        lines = [f"lw.bash: network: {text}\n" for text in self.refusals]
        if self.refusals_omitted:
            lines.append(
                f"lw.bash: network: {self.refusals_omitted} more refused "
                "(lw-temporal network log lists every attempt)\n"
            )
        if self.proxy_error:
            lines.append(f"lw.bash: network: {self.proxy_error}\n")
        return "".join(lines)

    @classmethod
    def from_summary(cls, summary: dict[str, Any]) -> NetworkUse:
        return cls(
            attempts=int(summary.get("attempts", 0)),
            allowed=int(summary.get("allowed", 0)),
            refused=int(summary.get("refused", 0)),
            bytes_sent=int(summary.get("bytes_sent", 0)),
            bytes_received=int(summary.get("bytes_received", 0)),
            hosts=tuple(str(h) for h in summary.get("hosts", ())),
            refusals=tuple(str(n) for n in summary.get("notices", ())),
            refusals_omitted=int(summary.get("notices_omitted", 0)),
            log_omitted=int(summary.get("log_omitted", 0)),
        )
