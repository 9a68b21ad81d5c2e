"""A network policy is read one way everywhere: validated strictly where it is written,
normalised (case, trailing dot, punycode, order) so one policy has one hash, given
only to the roles it names, and matched by the proxy with the same rules; and what
the proxy reads from the wire (host spellings, addresses, a TLS ClientHello, HTTP
heads) is read the way clients and the kernel read it."""

from __future__ import annotations

import hashlib
import ipaddress
import json
import ssl

import pytest
from pydantic import ValidationError

from lw_temporal import BashResult, NetworkPolicy, WorkflowDefinition
from lw_temporal._config import LwConfig
from lw_temporal._egress import NetworkUse
from lw_temporal._egress._addresses import refusal
from lw_temporal._egress._http import (
    BadRequest,
    body_length,
    forward_target,
    forwarded_head,
    parse_head,
)
from lw_temporal._egress._patterns import PatternError, first_match, parse_rule, request_host
from lw_temporal._egress._tls import NotTLS, hello_length, server_name
from lw_temporal._telemetry._facts import Facts
from lw_temporal.options import EgressOptions

REFUSED_PATTERNS = {
    "*": "only a whole leading label",
    "*.com": "at least two labels",
    "a*.example.com": "only a whole leading label",
    "localhost": "needs a domain",
    "intranet.": "needs a domain",
    "10.0.0.1": "private",
    "[::1]": "loopback",
    "169.254.169.254": "metadata",
    "127.1": "four decimal octets",
    "2130706433": "four decimal octets",
    "2001:4860::8888": "in brackets",
    "faß.example": "punycode",
    "xn--zz.example": "not valid punycode",
    "pypi.org:0": "port",
    "pypi.org:http": "port",
    "py pi.org": "without spaces",
    "-bad.example": "DNS label",
    "": "without spaces",
    # A wildcard over a public suffix reaches every registrant's domain below it.
    "*.co.uk": "'*.co.uk': co.uk is a public suffix",
    "*.CO.UK.:443": "'*.co.uk:443': co.uk is a public suffix",
    "*.github.io": "name the registrable domain (*.example.github.io)",
    "*.githubusercontent.com:443": "githubusercontent.com is a public suffix",
    "*.kawasaki.jp": "kawasaki.jp is a public suffix",
    "*.xn--p1ai": "at least two labels",
}


@pytest.mark.parametrize("pattern", REFUSED_PATTERNS)
def test_bad_patterns_are_refused_saying_why(pattern: str) -> None:
    with pytest.raises(ValidationError) as caught:
        NetworkPolicy(allow=(pattern,), roles=("worker",))
    assert REFUSED_PATTERNS[pattern] in str(caught.value)


def test_spellings_of_one_policy_are_one_policy() -> None:
    one = NetworkPolicy(
        allow=("PyPI.org.", "*.Example.CO.uk:443", "bücher.example"), roles=("worker",)
    )
    other = NetworkPolicy(
        allow=("xn--bcher-kva.example", "pypi.org", "*.example.co.uk:443"),
        roles=("worker",),
    )
    assert one == other
    assert one.allow == ("*.example.co.uk:443", "pypi.org", "xn--bcher-kva.example")
    # below a public suffix, a registrable domain (and the suffix named exactly) is fine
    NetworkPolicy(
        allow=("*.lw-docs.github.io", "raw.githubusercontent.com", "co.uk", "*.city.kawasaki.jp"),
        roles=("worker",),
    )
    with pytest.raises(ValidationError, match="twice"):
        NetworkPolicy(allow=("pypi.org", "PYPI.ORG."), roles=("worker",))
    with pytest.raises(ValidationError, match="allow names no host"):
        NetworkPolicy(allow=(), roles=("worker",))
    with pytest.raises(ValidationError):
        NetworkPolicy(allow=("pypi.org",), roles=("orchestrator",))


def test_the_definition_hash_covers_the_policy_and_only_when_there_is_one() -> None:
    plain = WorkflowDefinition(id="cr")
    expected = hashlib.sha256(
        json.dumps(
            plain.model_dump(mode="json"), sort_keys=True, separators=(",", ":"), ensure_ascii=False
        ).encode()
    ).hexdigest()
    assert plain.definition_hash == expected
    assert "network" not in plain.model_dump()
    policy = NetworkPolicy(allow=("pypi.org",), roles=("worker",))
    with_policy = WorkflowDefinition(id="cr", network=policy)
    assert with_policy.definition_hash != plain.definition_hash
    respelt = WorkflowDefinition(
        id="cr", network=NetworkPolicy(allow=("PYPI.org.",), roles=("worker",))
    )
    assert respelt.definition_hash == with_policy.definition_hash
    wider = WorkflowDefinition(
        id="cr", network=NetworkPolicy(allow=("pypi.org",), roles=("worker", "planner"))
    )
    assert wider.definition_hash != with_policy.definition_hash
    assert WorkflowDefinition.model_validate(with_policy.model_dump()) == with_policy


def test_only_the_named_roles_get_the_policy(tmp_path: object) -> None:
    policy = NetworkPolicy(allow=("pypi.org", "*.example.com:8443"), roles=("worker",))
    config = LwConfig.create(str(tmp_path), [WorkflowDefinition(id="cr", network=policy)])
    worker = config.scope_of("run_cr@1/steps/step_1", "lw.Worker")
    planner = config.scope_of("run_cr@1", "lw.Planner")
    orchestrator = config.scope_of("pipeline_p", "lw.Orchestrator")
    assert worker.network == policy
    assert planner.network is None and orchestrator.network is None
    text = worker.describe()
    assert "http://127.0.0.1:3128" in text and "HTTPS_PROXY" in text
    assert "pypi.org (ports 80 and 443)" in text
    assert "any name below example.com (port 8443)" in text
    assert "Network" not in planner.describe()


def test_requests_match_as_clients_and_libc_read_hosts() -> None:
    rules = tuple(parse_rule(p) for p in ("pypi.org", "*.example.com:8443", "8.8.4.4:443"))
    assert first_match(rules, request_host("PYPI.ORG."), 443) is not None
    assert first_match(rules, request_host("pypi.org"), 8080) is None  # not a web port
    assert first_match(rules, request_host("a.b.example.com"), 8443) is not None
    assert first_match(rules, request_host("example.com"), 8443) is None  # the domain itself
    assert first_match(rules, request_host("evilexample.com"), 8443) is None
    assert first_match(rules, request_host("8.8.4.4"), 443) is not None
    # Every spelling of an IPv4 address is that address, never a name.
    for spelling in ("2130706433", "0x7f000001", "127.1", "0177.0.0.1", "[::ffff:127.0.0.1]"):
        host = request_host(spelling)
        assert host.ip is not None and refusal(host.ip) is not None, spelling
        assert first_match(rules, host, 443) is None
    for junk in ("ex ample.com", "bücher.example", "a..b", "1.2.3.4.5", ""):
        with pytest.raises(PatternError):
            request_host(junk)


@pytest.mark.parametrize(
    ("address", "why"),
    [
        ("0.0.0.0", "unspecified"),
        ("::", "unspecified"),
        ("127.0.0.1", "loopback"),
        ("::1", "loopback"),
        ("10.1.2.3", "private"),
        ("192.168.1.1", "private"),
        ("fd12:3456::1", "private"),
        ("169.254.1.1", "link-local"),
        ("fe80::1", "link-local"),
        ("169.254.169.254", "metadata"),
        ("fd00:ec2::254", "metadata"),
        ("168.63.129.16", "metadata"),
        ("100.100.100.200", "metadata"),
        ("100.64.0.1", "CGNAT"),
        ("224.0.0.1", "multicast"),
        ("ff02::1", "multicast"),
        ("240.0.0.1", "not globally reachable"),
        ("198.51.100.7", "not globally reachable"),
        ("::ffff:10.0.0.1", "private, carried in an IPv6 address"),
        ("2002:a00:1::", "private, carried"),
        ("64:ff9b::7f00:1", "loopback, carried"),
        ("1.1.1.1", None),
        ("2606:4700::1111", None),
    ],
)
def test_addresses_the_proxy_never_connects_to(address: str, why: str | None) -> None:
    found = refusal(ipaddress.ip_address(address))
    assert (found is None) if why is None else (found is not None and why in found), found


def _client_hello(server_hostname: str | None) -> bytes:
    context = ssl.create_default_context()
    context.check_hostname = server_hostname is not None
    if server_hostname is None:
        context.verify_mode = ssl.CERT_NONE
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls = context.wrap_bio(incoming, outgoing, server_hostname=server_hostname)
    with pytest.raises(ssl.SSLWantReadError):
        tls.do_handshake()
    return outgoing.read()


def test_the_server_name_of_a_real_client_hello() -> None:
    hello = _client_hello("files.test")
    size = hello_length(hello)
    assert size == len(hello) and server_name(hello) == "files.test"
    assert hello_length(hello[:20]) is None  # more is needed
    # The same handshake cut into two records (clients may fragment it).
    body = hello[5:]
    cut = 40
    records = b"".join(
        b"\x16\x03\x01" + len(part).to_bytes(2, "big") + part for part in (body[:cut], body[cut:])
    )
    assert hello_length(records) == len(records) and server_name(records) == "files.test"
    assert server_name(_client_hello(None)) is None
    with pytest.raises(NotTLS):
        hello_length(b"GET / HTTP/1.1\r\n\r\n")


def test_forwarded_requests_go_on_in_origin_form_one_per_connection() -> None:
    head = parse_head(
        b"GET http://git.test:8080/repo.git/info/refs?service=x HTTP/1.1\r\n"
        b"Host: git.test:8080\r\nProxy-Connection: keep-alive\r\nConnection: keep-alive, X-Drop\r\n"
        b"X-Drop: 1\r\nProxy-Authorization: secret\r\nAccept: */*\r\n\r\n"
    )
    target = forward_target(head)
    assert (target.host, target.port, target.path) == (
        "git.test",
        8080,
        "/repo.git/info/refs?service=x",
    )
    sent = forwarded_head(head, target, "git.test:8080").decode()
    assert sent.startswith("GET /repo.git/info/refs?service=x HTTP/1.1\r\nHost: git.test:8080\r\n")
    assert "Accept: */*" in sent and sent.endswith("Connection: close\r\n\r\n")
    for gone in ("Proxy-Connection", "keep-alive", "X-Drop", "secret"):
        assert gone not in sent
    for bad in (
        b"GET / HTTP/1.1\r\nHost: x.test\r\n\r\n",  # origin form: not a proxy request
        b"GET https://x.test/ HTTP/1.1\r\n\r\n",  # https goes through CONNECT
        b"GET http://user:pw@x.test/ HTTP/1.1\r\n\r\n",
    ):
        with pytest.raises(BadRequest):
            forward_target(parse_head(bad))
    with pytest.raises(BadRequest):
        parse_head(b"GET http://x.test/ HTTP/1.1\r\nBad Header: 1\r\n\r\n")
    # A bare LF another parser takes for a line end would hide a second Host header.
    with pytest.raises(BadRequest, match="bare CR, LF or NUL"):
        parse_head(b"GET http://x.test/ HTTP/1.1\r\nX: 1\nHost: evil.test\r\n\r\n")
    # A request's body is its own: nothing after it goes on (no second request).
    assert body_length(head) == 0
    assert (
        body_length(parse_head(b"POST http://x.test/ HTTP/1.1\r\nContent-Length: 12\r\n\r\n")) == 12
    )
    chunked = b"POST http://x.test/ HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
    assert body_length(parse_head(chunked)) is None


def test_the_test_resolver_is_checked_too() -> None:
    assert EgressOptions(resolve={"PyPI.Test.": "127.0.0.1"}).resolve == {"pypi.test": "127.0.0.1"}
    with pytest.raises(ValueError, match="needs a domain"):
        EgressOptions(resolve={"localhost": "127.0.0.1"})
    with pytest.raises(ValueError, match="does not appear to be an IPv4 or IPv6"):
        EgressOptions(resolve={"pypi.test": "not-an-address"})
    with pytest.raises(ValueError, match="positive"):
        EgressOptions(max_connections=0)


def test_a_command_span_and_metrics_say_what_it_reached() -> None:
    use = NetworkUse(
        attempts=3,
        allowed=2,
        refused=1,
        bytes_sent=120,
        bytes_received=4096,
        hosts=("pypi.org:443",),
    )
    facts = Facts("lw.bash")
    facts.on_result(BashResult(exit_code=0, stdout="", stderr="", network=use))
    assert facts.attributes["lw.bash.network.allowed"] == 2
    assert facts.attributes["lw.bash.network.refused"] == 1
    assert facts.attributes["lw.bash.network.bytes_received"] == 4096
    assert facts.attributes["lw.bash.network.hosts"] == ["pypi.org:443"]
    counted = {
        (name, tuple(sorted(labels.items()))): value for name, _, value, labels in facts.counters
    }
    assert counted[("lw_egress_connections", (("decision", "allowed"),))] == 2
    assert counted[("lw_egress_connections", (("decision", "refused"),))] == 1
    assert counted[("lw_egress_bytes", (("direction", "received"),))] == 4096
    assert use.read_network and not NetworkUse().read_network
