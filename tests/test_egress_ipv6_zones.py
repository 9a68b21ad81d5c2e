"""An IPv6 zone (``%eth0``) is an interface of the proxy's host, never part of an
address on the network: a pattern or a request that names one is refused, saying
why, whatever address it scopes (a public one included, which would otherwise be a
second, non-canonical spelling of that address in a policy)."""

from __future__ import annotations

import pytest

from lw_temporal import NetworkPolicy
from lw_temporal._egress._patterns import PatternError, request_host


@pytest.mark.parametrize(
    "pattern", ["[2606:4700:4700::1111%eth0]", "[2606:4700:4700::1111%25eth0]:443"]
)
def test_a_pattern_with_a_zone_is_refused(pattern: str) -> None:
    with pytest.raises(ValueError, match="IPv6 zone"):
        NetworkPolicy(allow=(pattern,), roles=("worker",))


@pytest.mark.parametrize(
    "host", ["[2606:4700:4700::1111%eth0]", "[fe80::1%25lo]", "2606:4700:4700::1111%1"]
)
def test_a_request_with_a_zone_is_refused(host: str) -> None:
    with pytest.raises(PatternError, match="IPv6 zone"):
        request_host(host)
    assert request_host("[2606:4700:4700::1111]").ip is not None  # without one: an address
