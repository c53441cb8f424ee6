"""`host:port` text with IPv6 hosts (`replog.net_address`) and the places that write and read it.

- `format_host_port` brackets an IPv6 host, `parse_host_port` takes the brackets off again:
  a round trip for every host name, IPv4 and IPv6 literal (Hypothesis); an unbracketed IPv6
  host is refused with the bracketed spelling shown, in the site's error class.
- Each site: listeners, advertised listeners, bootstrap lists, client `bootstrap.servers`, the
  Raft transport (gRPC target and Fetch connection to a peer on ::1), the metrics endpoint and
  URL, the local cluster's files and port probe.
- The wildcard: which hosts bind every interface, and the name an empty host is advertised as
  (Java's `InetAddress.getLocalHost().getCanonicalHostName()`, over a fake resolver).
The end-to-end run of a node on ::1 is tests/cluster/test_cluster_ipv6.py.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import urllib.request
from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest
import pytest_asyncio
from hypothesis import given
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry

from replog.admin.bootstrap import parse_bootstrap
from replog.cli.cluster import check_ports_free
from replog.cli.local_cluster import LocalCluster, LocalNode, _metrics_address
from replog.client.config import admin_config
from replog.errors import ConfigError, ReplogError
from replog.net_address import (
    format_host_port,
    format_peer,
    is_wildcard,
    local_canonical_host_name,
    parse_host,
    parse_host_port,
)
from replog.pb import raft_pb2 as pb
from replog.pb import raft_pb2_grpc
from replog.quorum.raft.config import RaftConfig, VoterAddress
from replog.quorum.raft.messages import FetchRequest, Message
from replog.server.broker.broker_runtime import broker_config_from_node
from replog.server.config.node_config import NodeConfig
from replog.server.metrics.http_endpoint import MetricsEndpoint
from replog.server.raft.raft_fetch_server import FetchListener, Reply
from replog.server.raft.raft_transport import RaftTransport
from replog.testing import LoopTasks
from tests.ipv6_loopback import needs_ipv6

# --- the helpers ---------------------------------------------------------------------------------

ports = st.integers(0, 65535)
names = st.from_regex(r"\A[a-z0-9]([a-z0-9-]{0,20}[a-z0-9])?(\.[a-z0-9]{1,10}){0,3}\Z")
ipv4 = st.ip_addresses(v=4).map(str)
ipv6 = st.ip_addresses(v=6).map(str)


@given(st.one_of(names, ipv4), ports)
def test_names_and_ipv4_round_trip_unbracketed(host: str, port: int) -> None:
    text = format_host_port(host, port)
    assert text == f"{host}:{port}"
    assert parse_host_port(text, "address") == (host, port)


@given(ipv6, ports)
def test_ipv6_literals_round_trip_in_brackets(host: str, port: int) -> None:
    text = format_host_port(host, port)
    assert text == f"[{host}]:{port}"
    assert parse_host_port(text, "address") == (host, port)
    # Unbracketed it cannot be read back: refused, showing the bracketed spelling.
    with pytest.raises(ConfigError, match="IPv6 host must be written in brackets"):
        parse_host_port(f"{host}:{port}", "address")


def test_parse_examples() -> None:
    assert parse_host_port("[::1]:9092", "x") == ("::1", 9092)
    assert parse_host_port(" localhost:9092 ", "x") == ("localhost", 9092)
    assert parse_host_port("[fe80::1%eth0]:1", "x") == ("fe80::1%eth0", 1)
    assert parse_host_port("[::1]", "x", default_port=9092) == ("::1", 9092)
    assert parse_host_port("h", "x", default_port=9092) == ("h", 9092)
    assert parse_host_port(":9092", "x", empty_host=True) == ("", 9092)
    assert format_host_port("", 9092) == ":9092"


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("::1:9092", "an IPv6 host must be written in brackets, [::1]:9092"),
        ("2001:db8::7:9093", "an IPv6 host must be written in brackets, [2001:db8::7]:9093"),
        ("::1", "an IPv6 host must be written in brackets, [::1]:port"),
        ("a:b:c", "an IPv6 host must be written in brackets, [host]:port"),
        ("[::1", "expected [host]:port, no ']' closes the host"),
        ("[]:1", "expected [host]:port, the host is empty"),
        ("[::1]9092", "expected [host]:port, got '9092' after ']'"),
        ("[::1]", "expected [host]:port, got '' after ']'"),
        ("h", "expected host:port"),
        ("", "expected host:port"),
        ("h:", "expected host:port, the port '' is not a number"),
        ("h:x", "expected host:port, the port 'x' is not a number"),
        ("h:-1", "expected host:port, the port '-1' is not a number"),
        (":1", "expected host:port, the host is empty"),
        ("h:65536", "port must be in [0, 65535]"),
        ("[::1]:0065536", "port must be in [0, 65535]"),
    ],
)
def test_malformed_text_is_named_with_what_it_was(text: str, reason: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_host_port(text, "bootstrap.servers entry")
    assert str(caught.value) == f"bootstrap.servers entry {text!r}: {reason}"


def test_a_port_of_thousands_of_digits_is_the_typed_error_not_ints_value_error() -> None:
    # int() refuses strings over 4300 digits with a bare ValueError of its own.
    with pytest.raises(ConfigError, match=r"port must be in \[0, 65535\]"):
        parse_host_port("h:" + "9" * 5000, "listeners entry")
    assert parse_host_port("h:0000009092", "x") == ("h", 9092)  # leading zeros are no size


def test_the_lowest_port_is_the_callers_rule() -> None:
    assert parse_host_port("h:0", "listeners entry") == ("h", 0)  # a listener: any free port
    with pytest.raises(ConfigError, match=r"entry 'h:0': port must be in \[1, 65535\]"):
        parse_host_port("h:0", "entry", min_port=1)


@pytest.mark.parametrize(
    ("text", "host"),
    [
        ("localhost", "localhost"),
        (" ::1 ", "::1"),
        ("[::1]", "::1"),
        ("fe80::1%eth0", "fe80::1%eth0"),
    ],
)
def test_a_host_alone_is_read_bare(text: str, host: str) -> None:
    assert parse_host(text, "metrics.host") == host


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("", "must not be empty"),
        ("[]", "must not be empty"),
        ("localhost:9100", "expected a host alone"),
        ("[::1]:9100", "expected a host alone"),
        ("[::1", "expected a host alone"),
        ("a:b", "expected a host alone"),
    ],
)
def test_a_host_alone_refuses_a_port_or_stray_brackets(text: str, reason: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_host(text, "metrics.host")
    assert str(caught.value).startswith(f"metrics.host={text!r}: {reason}")


def test_the_error_is_the_callers_class() -> None:
    with pytest.raises(ValueError, match=r"metrics '::1:1': an IPv6 host"):
        parse_host_port("::1:1", "metrics", error=ValueError)


def test_the_suggestion_is_a_real_ipv6_literal() -> None:
    with pytest.raises(ConfigError) as caught:
        parse_host_port("::1:9092", "x")
    host, port = parse_host_port(str(caught.value).rsplit(", ", 1)[1], "x")
    assert ipaddress.IPv6Address(host) == ipaddress.IPv6Address("::1") and port == 9092


# --- the wildcard and the machine's canonical name ----------------------------------------------


@pytest.mark.parametrize(
    ("host", "wildcard"),
    [
        ("", True),
        (" ", True),
        ("0.0.0.0", True),
        ("::", True),
        ("0:0:0:0:0:0:0:0", True),
        ("127.0.0.1", False),
        ("::1", False),
        ("localhost", False),
        ("0.0.0.0.example", False),
    ],
)
def test_the_wildcard_is_empty_or_an_unspecified_address(host: str, wildcard: bool) -> None:
    assert is_wildcard(host) is wildcard


def fake_resolver(
    monkeypatch: pytest.MonkeyPatch,
    hostname: str,
    forward: dict[str, list[str]],
    reverse: dict[str, str],
) -> None:
    """`socket`'s lookups answered from the two tables (unknown: the resolver's own errors)."""

    def getaddrinfo(host: str, *args: object, **kwargs: object) -> list[tuple[object, ...]]:
        if host not in forward:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return [
            (socket.AF_INET6 if ":" in a else socket.AF_INET, socket.SOCK_STREAM, 6, "", (a, 0))
            for a in forward[host]
        ]

    def gethostbyaddr(address: str) -> tuple[str, list[str], list[str]]:
        if address not in reverse:
            raise socket.herror(1, "Unknown host")
        return reverse[address], [], [address]

    monkeypatch.setattr(socket, "gethostname", lambda: hostname)
    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    monkeypatch.setattr(socket, "gethostbyaddr", gethostbyaddr)


def test_the_canonical_name_is_the_reverse_name_of_the_first_ipv4_address(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fake_resolver(
        monkeypatch,
        "b2",
        forward={"b2": ["fd00::2", "10.0.0.2", "10.0.0.3"], "b2.example.com": ["10.0.0.2"]},
        reverse={"10.0.0.2": "b2.example.com", "fd00::2": "v6.example.com"},
    )
    assert local_canonical_host_name() == "b2.example.com"


def test_the_canonical_name_falls_back_to_the_address_as_java_does(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # No reverse name: the address.
    fake_resolver(monkeypatch, "b2", forward={"b2": ["10.0.0.2"]}, reverse={})
    assert local_canonical_host_name() == "10.0.0.2"
    # A reverse name that does not lead back to the address (Java's spoofing check).
    fake_resolver(
        monkeypatch,
        "b2",
        forward={"b2": ["10.0.0.2"], "elsewhere.example": ["10.9.9.9"]},
        reverse={"10.0.0.2": "elsewhere.example"},
    )
    assert local_canonical_host_name() == "10.0.0.2"
    # IPv6 only: its address, bare.
    fake_resolver(monkeypatch, "b2", forward={"b2": ["fd00::2"]}, reverse={})
    assert local_canonical_host_name() == "fd00::2"
    # `localhost` is the loopback, without a lookup of the name.
    fake_resolver(
        monkeypatch, "localhost", forward={"localhost": ["127.0.0.1"]}, reverse={"127.0.0.1": "lo"}
    )
    assert local_canonical_host_name() == "127.0.0.1"  # "lo" does not resolve back


def test_a_host_name_that_does_not_resolve_is_the_resolvers_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fake_resolver(monkeypatch, "b2", forward={}, reverse={})
    with pytest.raises(socket.gaierror):
        local_canonical_host_name()


def test_a_name_idna_refuses_is_the_resolvers_error_too(monkeypatch: pytest.MonkeyPatch) -> None:
    """Python's getaddrinfo raises UnicodeError, no OSError, for an empty or 64-character
    label: the broker's start-up then crashed instead of naming the setting."""
    monkeypatch.setattr(socket, "gethostname", lambda: "b2..example")
    with pytest.raises(socket.gaierror, match=r"'b2..example' is not a valid host name"):
        local_canonical_host_name()
    # A reverse name IDNA refuses: the address, as for any reverse name that does not resolve.
    fake_resolver(monkeypatch, "b2", forward={"b2": ["10.0.0.2"]}, reverse={"10.0.0.2": "x" * 64})
    monkeypatch.setattr(socket, "getaddrinfo", _idna_checked(socket.getaddrinfo))
    assert local_canonical_host_name() == "10.0.0.2"


def _idna_checked(getaddrinfo: Any) -> Any:
    """The fake resolver, refusing names as the real one does before any lookup."""

    def checked(host: str, *args: object, **kwargs: object) -> Any:
        host.encode("idna")
        return getaddrinfo(host, *args, **kwargs)

    return checked


# --- node configuration --------------------------------------------------------------------------


def _node(**extra: str) -> NodeConfig:
    return NodeConfig.from_properties(
        {
            "process.roles": "broker,controller",
            "node.id": "1",
            "cluster.id": "c",
            "controller.quorum.voters": "1@[::1]:9093",
            "listeners": "CONTROLLER://[::1]:9093",
            "log.dirs": "/tmp/unused",
            **extra,
        }
    )


def test_an_ipv6_listener_is_kept_bare_and_served_bracketed() -> None:
    node = _node()
    assert (node.listener_host, node.listener_port) == ("::1", 9093)  # asyncio binds "::1"
    assert node.listener == "[::1]:9093"  # gRPC binds "[::1]:9093"
    assert _node(listeners="PLAINTEXT://:9093").listener == "0.0.0.0:9093"
    with pytest.raises(ConfigError, match=r"listeners entry '::1:9093': an IPv6 host .*\[::1\]"):
        _node(listeners="CONTROLLER://::1:9093")


def test_metrics_host_may_be_written_in_brackets() -> None:
    assert _node(**{"metrics.host": "[::1]", "metrics.port": "9100"}).metrics_host == "::1"
    assert _node(**{"metrics.host": "::1", "metrics.port": "9100"}).metrics_host == "::1"
    # A port here would otherwise reach the bind as host "localhost:9100" (or "::1]:9100").
    for written in ("localhost:9100", "[::1]:9100"):
        with pytest.raises(ConfigError, match=r"metrics.host=.*: expected a host alone"):
            _node(**{"metrics.host": written, "metrics.port": "9100"})


def test_a_listener_port_above_65535_is_refused_where_it_is_read() -> None:
    with pytest.raises(
        ConfigError, match=r"listeners entry 'h:70000': port must be in \[0, 65535\]"
    ):
        _node(**{"process.roles": "broker", "listeners": "PLAINTEXT://h:70000"})
    with pytest.raises(ConfigError, match=r"advertised.listeners entry 'h:70000': port must be"):
        broker_config_from_node(_node(**{"advertised.listeners": "PLAINTEXT://h:70000"}))


def test_the_broker_registers_bare_hosts_and_dials_controllers_bracketed() -> None:
    config, controllers = broker_config_from_node(
        _node(**{"advertised.listeners": "PLAINTEXT://[::1]:9093,SSL://[fe80::2]:9094"})
    )
    assert [(e.name, e.host, e.port) for e in config.listeners] == [
        ("PLAINTEXT", "::1", 9093),
        ("SSL", "fe80::2", 9094),
    ]
    assert controllers == {1: "[::1]:9093"}
    with pytest.raises(ConfigError, match=r"advertised.listeners entry '::1:9093': an IPv6"):
        broker_config_from_node(_node(**{"advertised.listeners": "PLAINTEXT://::1:9093"}))


# --- bootstrap lists -----------------------------------------------------------------------------


def test_bootstrap_lists_take_bracketed_ipv6_hosts() -> None:
    parsed = parse_bootstrap("1@[::1]:9093,[::2]:9094,[::1]:9093")
    assert parsed.addresses == ("[::1]:9093", "[::2]:9094")
    assert parsed.node_addresses == {1: "[::1]:9093"}
    with pytest.raises(ConfigError, match=r"--bootstrap-server: '::1:9093': .*\[::1\]:9093"):
        parse_bootstrap("1@::1:9093", what="--bootstrap-server")


def test_client_bootstrap_servers_name_the_bad_entry() -> None:
    assert admin_config(bootstrap_servers="PLAINTEXT://[::1]:9093").bootstrap_servers == (
        "[::1]:9093",
    )
    with pytest.raises(ConfigError) as caught:
        admin_config(bootstrap_servers="a:1,::1:9092")
    assert "entry '::1:9092': an IPv6 host must be written in brackets, [::1]:9092" in str(
        caught.value
    )


# --- the Raft transport: gRPC and the Fetch connection to a peer on ::1 ------------------------


class _FetchEndpointOnly(raft_pb2_grpc.RaftQuorumServicer):
    def __init__(self, port: int) -> None:
        self.port = port

    async def FetchEndpoint(
        self, request: pb.FetchEndpointRequest, context: grpc.aio.ServicerContext
    ) -> pb.FetchEndpointResponse:
        return pb.FetchEndpointResponse(port=self.port)


@pytest_asyncio.fixture
async def ipv6_peer() -> AsyncIterator[tuple[int, asyncio.Queue[pb.FetchRequest]]]:
    """Node 2 on ::1: its gRPC port (FetchEndpoint only) and the Fetches it receives."""
    arrived: asyncio.Queue[pb.FetchRequest] = asyncio.Queue()

    def accept(caller_id: int, request: pb.FetchRequest, reply: Reply) -> int:
        arrived.put_nowait(request)
        return arrived.qsize()

    listener = FetchListener(accept, lambda handle: None)
    fetch_port = await listener.start("::1", 0)
    server = grpc.aio.server()
    raft_pb2_grpc.add_RaftQuorumServicer_to_server(_FetchEndpointOnly(fetch_port), server)  # type: ignore[no-untyped-call]
    grpc_port = server.add_insecure_port("[::1]:0")
    await server.start()
    try:
        yield grpc_port, arrived
    finally:
        await listener.close()
        await server.stop(None)


@needs_ipv6
@pytest.mark.asyncio
async def test_the_raft_fetch_connection_reaches_a_peer_on_ipv6(
    ipv6_peer: tuple[int, asyncio.Queue[pb.FetchRequest]],
) -> None:
    grpc_port, arrived = ipv6_peer
    voters = (VoterAddress(1, "::1", 1), VoterAddress(2, "::1", grpc_port))
    failures: list[object] = []
    transport = RaftTransport(
        1, RaftConfig(voters=voters), lambda m: None, failures.append, tasks=LoopTasks()
    )
    try:
        request = FetchRequest(
            correlation_id=7,
            replica_id=1,
            quorum_epoch=3,
            fetch_offset=11,
            last_fetched_epoch=2,
            high_watermark=4,
            max_wait_ms=0,
            max_bytes=1 << 20,
        )
        transport.send(Message(1, 2, request))
        received = await asyncio.wait_for(arrived.get(), 10)
    finally:
        await transport.close()
    assert (received.fetch_offset, received.quorum_epoch) == (11, 3)
    assert failures == []


@needs_ipv6
@pytest.mark.asyncio
async def test_the_fetch_listener_names_an_ipv6_peer_bracketed(
    caplog: pytest.LogCaptureFixture,
) -> None:
    listener = FetchListener(lambda caller, request, reply: 0, lambda handle: None)
    port = await listener.start("::1", 0)
    try:
        _, writer = await asyncio.open_connection("::1", port)
        local_port = writer.get_extra_info("sockname")[1]
        writer.write(b"HTTP/1.1 GET /")  # not a Fetch greeting: the listener logs and closes
        await writer.drain()
        for _ in range(500):
            if "Fetch connection from" in caplog.text:
                break
            await asyncio.sleep(0.01)
        writer.close()
    finally:
        await listener.close()
    assert f"Fetch connection from [::1]:{local_port}: not a Raft Fetch connection" in caplog.text


# --- metrics and the local cluster ---------------------------------------------------------------


@needs_ipv6
def test_the_metrics_endpoint_listens_on_ipv6_and_brackets_its_url() -> None:
    endpoint = MetricsEndpoint(CollectorRegistry(), "::1", 0)
    endpoint.start()
    try:
        assert endpoint.url == f"http://[::1]:{endpoint.port}/metrics"
        with urllib.request.urlopen(endpoint.url, timeout=5) as answer:
            assert answer.status == 200
    finally:
        endpoint.stop()


def test_local_cluster_metrics_addresses_take_ipv6_hosts() -> None:
    assert _metrics_address("http://[::1]:19192/metrics") == "[::1]:19192"
    with pytest.raises(ValueError, match=r"expected http://host:port/metrics .*IPv6"):
        _metrics_address("http://::1:19192/metrics")
    node = LocalNode(1, ("broker", "controller"), {"CONTROLLER": "[::1]:19092"}, "/n", "[::1]:1")
    properties = LocalCluster("/c", (node,)).node_properties(node)
    assert (properties["metrics.host"], properties["metrics.port"]) == ("::1", "1")
    assert properties["listeners"] == "CONTROLLER://[::1]:19092"


@needs_ipv6
def test_the_port_probe_binds_ipv6_hosts() -> None:
    with socket.socket(socket.AF_INET6) as taken:
        taken.bind(("::1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        node = LocalNode(1, ("controller",), {"CONTROLLER": f"[::1]:{port}"}, "/n")
        with pytest.raises(ReplogError, match=rf"cannot listen on \[::1\]:{port}: port .* in use"):
            check_ports_free([node])
    check_ports_free([node])  # free again


def test_a_peer_is_its_host_and_port_whatever_the_family() -> None:
    assert format_peer(("127.0.0.1", 9092)) == "127.0.0.1:9092"
    assert format_peer(("::1", 9092, 0, 0)) == "[::1]:9092"
    assert format_peer(None) == "unknown peer"
    assert format_peer("/run/replog.sock") == "/run/replog.sock"
