"""Listener hosts, Kafka's rules: where a node binds and what its broker registers.

- An empty host (`PLAINTEXT://:9092`) binds every interface: gRPC takes the node's `0.0.0.0`
  target as its dual-stack wildcard, so IPv4 and IPv6 clients both connect.
- The broker registers `advertised.listeners`, else `listeners`; an empty host in either is
  registered as the machine's canonical host name (Kafka's
  `ListenerInfo.withWildcardHostnamesResolved`), looked up only when some host is empty; a host
  name that does not resolve stops the broker with a `ConfigError` naming the entry.
- An advertised unspecified address (`0.0.0.0`, `::`) is a `ConfigError` when the config is
  read, naming the key and the entry, whether it comes from `advertised.listeners` or from
  `listeners` without it (Kafka's `KafkaConfig.validateValues`); a controller-only node
  registers nothing and may listen on `0.0.0.0`.
The resolver itself (`local_canonical_host_name`) is tested in tests/test_net_address.py.
"""

from __future__ import annotations

import re
import socket

import grpc
import pytest

from replog.errors import ConfigError
from replog.quorum.metadata.records import Endpoint
from replog.server.broker import broker_runtime
from replog.server.broker.broker_runtime import broker_config_from_node
from replog.server.config.node_config import NodeConfig
from tests.ipv6_loopback import needs_ipv6


def node(**extra: str) -> NodeConfig:
    """A broker (the voter is another node), with `extra` keys (dots written as-is)."""
    return NodeConfig.from_properties(
        {
            "process.roles": "broker",
            "node.id": "2",
            "cluster.id": "c",
            "controller.quorum.voters": "1@127.0.0.1:9093",
            "listeners": "PLAINTEXT://:9092",
            "log.dirs": "/tmp/unused",
            **extra,
        }
    )


@pytest.fixture
def canonical_name(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The machine's canonical name is `broker2.example.com`; the list counts the lookups."""
    calls: list[int] = []

    def resolve() -> str:
        calls.append(1)
        return "broker2.example.com"

    monkeypatch.setattr(broker_runtime, "local_canonical_host_name", resolve)
    return calls


def registered(config: NodeConfig) -> list[tuple[str, str, int]]:
    lifecycle, _ = broker_config_from_node(config)
    return [(e.name, e.host, e.port) for e in lifecycle.listeners]


# --- an empty host -------------------------------------------------------------------------------


def test_an_empty_listener_host_binds_the_wildcard_and_registers_the_canonical_name(
    canonical_name: list[int],
) -> None:
    config = node()
    assert config.listener == "0.0.0.0:9092"  # every interface (gRPC: both families)
    assert config.advertised_listeners == (Endpoint("PLAINTEXT", "", 9092),)  # not yet resolved
    # Before: the broker registered host "" and clients were sent an address they cannot dial.
    assert registered(config) == [("PLAINTEXT", "broker2.example.com", 9092)]
    assert len(canonical_name) == 1


def test_an_empty_advertised_host_is_resolved_too_and_named_hosts_are_kept(
    canonical_name: list[int],
) -> None:
    config = node(
        **{
            "listeners": "PLAINTEXT://h:9092",
            "advertised.listeners": "PLAINTEXT://:9092,SSL://[::1]:9093,SASL_SSL://:9094",
        }
    )
    assert config.advertised_listeners_key == "advertised.listeners"
    assert registered(config) == [
        ("PLAINTEXT", "broker2.example.com", 9092),
        ("SSL", "::1", 9093),
        ("SASL_SSL", "broker2.example.com", 9094),
    ]
    assert len(canonical_name) == 1  # one lookup for all the empty hosts


def test_named_hosts_need_no_lookup(canonical_name: list[int]) -> None:
    assert registered(node(listeners="PLAINTEXT://10.0.0.2:9092")) == [
        ("PLAINTEXT", "10.0.0.2", 9092)
    ]
    assert registered(node(**{"advertised.listeners": "PLAINTEXT://b2:9092"})) == [
        ("PLAINTEXT", "b2", 9092)
    ]
    assert canonical_name == []


def test_a_host_name_that_does_not_resolve_stops_the_broker_naming_the_entry(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def unresolvable() -> str:
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    monkeypatch.setattr(broker_runtime, "local_canonical_host_name", unresolvable)
    with pytest.raises(
        ConfigError,
        match=r"listeners entry 'PLAINTEXT://:9092': an empty host is advertised as this "
        r"machine's canonical host name, which cannot be found .*Name or service not known",
    ):
        broker_config_from_node(node())


# --- the non-routable meta-address ---------------------------------------------------------------


@pytest.mark.parametrize("host", ["0.0.0.0", "[::]", "[0:0:0:0:0:0:0:0]"])
def test_advertising_an_unspecified_address_is_refused_when_the_config_is_read(host: str) -> None:
    with pytest.raises(
        ConfigError,
        match=re.escape(f"advertised.listeners entry 'PLAINTEXT://{host}:9092': ")
        + "cannot advertise the non-routable meta-address",
    ):
        node(**{"advertised.listeners": f"PLAINTEXT://{host}:9092"})


def test_listeners_on_0_0_0_0_without_advertised_listeners_are_refused_as_kafka_does() -> None:
    with pytest.raises(
        ConfigError,
        match=r"listeners entry 'PLAINTEXT://0.0.0.0:9092': cannot advertise the non-routable "
        r"meta-address 0.0.0.0 \(advertised.listeners is unset.*PLAINTEXT://:9092",
    ):
        node(listeners="PLAINTEXT://0.0.0.0:9092")
    # A later entry counts too: the broker registers every listener.
    with pytest.raises(ConfigError, match=r"listeners entry 'SSL://\[::\]:9093'"):
        node(listeners="PLAINTEXT://h:9092,SSL://[::]:9093")


def test_listeners_on_0_0_0_0_with_a_routable_advertised_host_are_accepted() -> None:
    config = node(
        **{"listeners": "PLAINTEXT://0.0.0.0:9092", "advertised.listeners": "PLAINTEXT://b2:9092"}
    )
    assert config.listener == "0.0.0.0:9092"
    assert registered(config) == [("PLAINTEXT", "b2", 9092)]


def test_a_controller_only_node_registers_nothing_and_may_listen_on_0_0_0_0() -> None:
    config = node(
        **{
            "process.roles": "controller",
            "node.id": "1",
            "listeners": "CONTROLLER://0.0.0.0:9093",
        }
    )
    assert config.listener == "0.0.0.0:9093"


# --- binding -------------------------------------------------------------------------------------


@needs_ipv6
@pytest.mark.asyncio
async def test_the_wildcard_target_accepts_ipv4_and_ipv6_clients() -> None:
    server = grpc.aio.server()
    port = server.add_insecure_port(node(listeners="PLAINTEXT://:0").listener)
    await server.start()
    try:
        for family, host in ((socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::1")):
            with socket.socket(family) as client:
                client.settimeout(5)
                client.connect((host, port))  # refused if the bind were one family only
    finally:
        await server.stop(None)
