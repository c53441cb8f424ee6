"""Ephemeral listener ports (port 0), Kafka's rule (`ListenerInfo.withEphemeralPortsCorrected`):
the node binds first, then registers the port it bound wherever an advertised endpoint says 0.

- Port 0 in `listeners` (without `advertised.listeners`) or in `advertised.listeners` is
  registered as the bound port; every other port is registered as configured; an empty host
  with port 0 gets both the canonical host name and the bound port.
- Without a bound port a port-0 endpoint is refused, naming the entry: the broker never
  registers port 0.
- `Node(config)` binds its listener before it builds the broker role: `listener_port` is the
  OS's choice, and the broker's registration carries it. A port in use is an `OSError` naming
  `listeners`.
- A controller cannot listen on port 0 (voters dial the port `controller.quorum.voters`
  names): a `ConfigError` when the config is read. The Raft Fetch port may be 0 (peers learn it
  over gRPC, `FetchEndpoint`), as it is by default. A controller announces its Kafka listener
  as `advertised.listeners` names it (else as `listeners` does), port 0 as the port it bound.
The end-to-end check (a client producing through a broker bound on port 0) is
tests/cluster/test_cluster_ephemeral_port.py.
"""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from replog.errors import ConfigError
from replog.quorum.metadata.records import Endpoint
from replog.server.broker import broker_runtime
from replog.server.broker.broker_runtime import broker_config_from_node
from replog.server.config.node_config import NodeConfig
from replog.server.process.node import Node
from tests.server.broker.test_advertised_listeners import node as broker_node


def node(**extra: str) -> NodeConfig:
    """The broker of test_advertised_listeners, listening on 127.0.0.1 port 0 unless `extra`
    says otherwise."""
    return broker_node(**{"listeners": "PLAINTEXT://127.0.0.1:0", **extra})


def registered(config: NodeConfig, bound_port: int | None) -> list[tuple[str, str, int]]:
    lifecycle, _ = broker_config_from_node(config, bound_port=bound_port)
    return [(e.name, e.host, e.port) for e in lifecycle.listeners]


# --- the substitution rule -----------------------------------------------------------------------


def test_a_listener_on_port_0_is_registered_with_the_bound_port() -> None:
    config = node()
    assert config.advertised_listeners == (Endpoint("PLAINTEXT", "127.0.0.1", 0),)
    # Before: the broker registered port 0, and clients were told to dial it.
    assert registered(config, 41234) == [("PLAINTEXT", "127.0.0.1", 41234)]


def test_a_configured_port_is_kept() -> None:
    assert registered(node(listeners="PLAINTEXT://127.0.0.1:9092"), 9092) == [
        ("PLAINTEXT", "127.0.0.1", 9092)
    ]
    # No bound port is needed when no endpoint says 0 (every fixed-port caller).
    assert registered(node(listeners="PLAINTEXT://127.0.0.1:9092"), None) == [
        ("PLAINTEXT", "127.0.0.1", 9092)
    ]


def test_port_0_in_advertised_listeners_is_the_bound_port_and_other_ports_are_kept() -> None:
    config = node(
        **{
            "listeners": "PLAINTEXT://127.0.0.1:9092",
            "advertised.listeners": "PLAINTEXT://b2.example:0,SSL://proxy.example:19092",
        }
    )
    assert registered(config, 9092) == [
        ("PLAINTEXT", "b2.example", 9092),
        ("SSL", "proxy.example", 19092),  # e.g. a proxy's port: never replaced
    ]
    # The listeners' own port 0 does not leak into a fixed advertised port either.
    config = node(**{"advertised.listeners": "PLAINTEXT://b2.example:9000"})
    assert registered(config, 41234) == [("PLAINTEXT", "b2.example", 9000)]


def test_every_port_0_entry_gets_the_one_bound_port() -> None:
    # A node binds one socket (its first listener's) and serves every listener name on it
    # that is not a Kafka listener of its own (a name that is no security protocol and that
    # `listener.security.protocol.map` does not map).
    config = node(listeners="PLAINTEXT://127.0.0.1:0,REPLICATION://127.0.0.1:0")
    assert registered(config, 41234) == [
        ("PLAINTEXT", "127.0.0.1", 41234),
        ("REPLICATION", "127.0.0.1", 41234),
    ]


def test_an_empty_host_on_port_0_gets_the_canonical_name_and_the_bound_port(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(broker_runtime, "local_canonical_host_name", lambda: "b2.example")
    config = node(listeners="PLAINTEXT://:0")
    assert config.listener == "0.0.0.0:0"
    assert registered(config, 41234) == [("PLAINTEXT", "b2.example", 41234)]


@pytest.mark.parametrize("bound_port", [None, 0, 70000])
def test_port_0_without_a_bound_port_is_refused_naming_the_entry(bound_port: int | None) -> None:
    with pytest.raises(
        ValueError,
        match=r"listeners entry 'PLAINTEXT://127.0.0.1:0': port 0 \(an ephemeral port\) is "
        rf"registered as the port the node's listener bound, and that is not known "
        rf"\(bound port: {bound_port}\)",
    ):
        broker_config_from_node(node(), bound_port=bound_port)
    with pytest.raises(ValueError, match=r"advertised.listeners entry 'SSL://b2:0'"):
        broker_config_from_node(
            node(**{"advertised.listeners": "PLAINTEXT://b2:9092,SSL://b2:0"}),
            bound_port=bound_port,
        )


# --- the node binds first ------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_a_node_binds_before_it_builds_the_broker_and_registers_the_bound_port(
    tmp_path: Path,
) -> None:
    built = Node(node(**{"log.dirs": str(tmp_path / "logs")}))
    try:
        assert built.listener_port != 0
        assert built.broker is not None
        assert built.broker.config.listeners == (
            Endpoint("PLAINTEXT", "127.0.0.1", built.listener_port),
        )
        # The port is really bound to this node: nobody else can take it.
        with socket.socket() as other, pytest.raises(OSError):
            other.bind(("127.0.0.1", built.listener_port))
    finally:
        await built._close_unstarted()


@pytest.mark.asyncio
async def test_a_listener_port_in_use_is_an_os_error_naming_listeners(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        config = node(
            **{"listeners": f"PLAINTEXT://127.0.0.1:{port}", "log.dirs": str(tmp_path / "logs")}
        )
        with pytest.raises(OSError, match=rf"listeners: cannot listen on 127.0.0.1:{port}: "):
            Node(config)


@pytest.mark.asyncio
async def test_a_node_that_fails_after_the_bind_closes_its_metadata_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, storage_events: list[str]
) -> None:
    """The broker role is built after the bind; when it fails (here: the wildcard host's
    canonical name cannot be found) the metadata log must not stay open."""

    def unresolvable() -> str:
        raise OSError("no such host")

    monkeypatch.setattr(broker_runtime, "local_canonical_host_name", unresolvable)
    config = node(**{"listeners": "PLAINTEXT://:0", "log.dirs": str(tmp_path / "logs")})
    with pytest.raises(ConfigError, match="canonical host name"):
        Node(config)
    assert storage_events == ["opened", "closed"]


# --- controllers ---------------------------------------------------------------------------------


def test_a_controller_on_port_0_is_a_config_error_naming_the_voter_port() -> None:
    with pytest.raises(
        ConfigError,
        match=r"listeners: node 1 listens on port 0 but controller.quorum.voters gives port 9093",
    ):
        node(**{"process.roles": "broker,controller", "node.id": "1"})
    with pytest.raises(ConfigError, match=r"controller.quorum.voters: '1@127.0.0.1:0': port '0'"):
        node(
            **{
                "process.roles": "controller",
                "node.id": "1",
                "controller.quorum.voters": "1@127.0.0.1:0",
            }
        )


def test_the_raft_fetch_port_may_be_0() -> None:
    config = node(
        **{
            "process.roles": "broker,controller",
            "node.id": "1",
            "listeners": "CONTROLLER://127.0.0.1:9093",
            "controller.quorum.fetch.port": "0",
        }
    )
    assert config.raft.fetch_port == 0  # any free port; peers ask for it (FetchEndpoint)


@pytest.mark.parametrize(
    ("advertised", "announced"),
    [
        ("CONTROLLER_KAFKA://ctl1.example:9300", ("ctl1.example", 9300)),
        ("CONTROLLER_KAFKA://ctl1.example:0", ("ctl1.example", None)),  # None: the bound port
        ("", ("127.0.0.1", None)),
    ],
)
@pytest.mark.asyncio
async def test_a_controller_announces_its_kafka_listener_as_advertised(
    tmp_path: Path, advertised: str, announced: tuple[str, int | None]
) -> None:
    """Kafka's `effectiveAdvertisedControllerListeners`: the `advertised.listeners` entry of the
    controller listener's name, else the listener, with port 0 as the port it bound."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        grpc_port = probe.getsockname()[1]
    grpc = f"CONTROLLER://127.0.0.1:{grpc_port}"
    config = NodeConfig.from_properties(
        {
            "process.roles": "controller",
            "node.id": "1",
            "cluster.id": "c",
            "controller.quorum.voters": f"1@127.0.0.1:{grpc_port}",
            "listeners": f"{grpc},CONTROLLER_KAFKA://127.0.0.1:0",
            "controller.listener.names": "CONTROLLER,CONTROLLER_KAFKA",
            "log.dirs": str(tmp_path / "logs"),
            **({"advertised.listeners": f"{grpc},{advertised}"} if advertised else {}),
        }
    )
    built = Node(config)
    try:
        assert built.controller_listener is not None
        host, port = announced
        assert built._bound_controller_endpoint() == Endpoint(
            "CONTROLLER_KAFKA", host, port or built.controller_listener.port
        )
    finally:
        await built._close_unstarted()
