"""Which `listeners` entries are Kafka listeners, and their settings:

- none by default: the first entry is always the gRPC listener, so existing configs change
  nothing; each later entry whose security protocol is PLAINTEXT (its name, or
  `listener.security.protocol.map`) is one, and so is each SSL, SASL_PLAINTEXT and SASL_SSL
  entry (test_tls_settings.py, test_sasl_settings.py);
- a later entry named in `controller.listener.names` is the controller's Kafka listener (one
  at most, PLAINTEXT, on a controller only), never registered as a broker endpoint;
- a Kafka listener may not share a port with the gRPC listener or another Kafka listener;
- port 0 is registered as the port that listener bound, not the gRPC one;
- `queued.max.requests`, `connections.max.idle.ms`, `socket.request.max.bytes` must be positive;
- the fetch session cache takes Kafka's `max.incremental.fetch.session.cache.slots` and
  `min.incremental.fetch.session.eviction.ms` (0 or more);
- a Kafka listener port in use is an OSError naming the listener, and a failed start lets go of
  the Kafka ports it bound already;
- the Kafka listeners accept once the broker serves clients and the controller unfenced it
  (never, if its lifecycle gave up first).
"""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path
from types import SimpleNamespace

import pytest

from replog.errors import BrokerLifecycleError, ConfigError
from replog.quorum.metadata.records import Endpoint
from replog.server.broker.broker_runtime import broker_config_from_node
from replog.server.config.data_plane_config import data_plane_config_from_node
from replog.server.config.node_config import NodeConfig
from replog.server.kafka.kafka_listener import KafkaListenerConfig
from replog.server.process.known_properties import unknown_properties
from replog.server.process.node import Node
from tests.local_ports import free_port


def node(listeners: str, **extra: str) -> NodeConfig:
    return NodeConfig.from_properties(
        {
            "process.roles": "broker",
            "node.id": "2",
            "cluster.id": "c",
            "controller.quorum.voters": "1@127.0.0.1:9093",
            "listeners": listeners,
            "log.dirs": "/tmp/unused",
            **extra,
        }
    )


def test_no_kafka_listener_by_default() -> None:
    assert node("PLAINTEXT://127.0.0.1:9092").kafka_listeners == ()
    assert node("CONTROLLER://127.0.0.1:9093").kafka_listeners == ()


def test_a_later_plaintext_entry_is_a_kafka_listener() -> None:
    config = node("CONTROLLER://127.0.0.1:19092,PLAINTEXT://127.0.0.1:9092")
    assert config.kafka_listeners == (Endpoint("PLAINTEXT", "127.0.0.1", 9092),)
    assert config.listener == "127.0.0.1:19092"  # gRPC stays on the first


def test_the_security_protocol_map_names_kafka_listeners() -> None:
    config = node(
        "CONTROLLER://h:19092,CLIENT://h:9092,PLAINTEXT://h:9093",
        **{
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,CLIENT:PLAINTEXT, "
            "PLAINTEXT:SASL_PLAINTEXT",
            "sasl.enabled.mechanisms": "SCRAM-SHA-256",
        },
    )
    assert [(e.name, e.security_protocol) for e in config.kafka_listeners] == [
        ("CLIENT", "PLAINTEXT"),
        ("PLAINTEXT", "SASL_PLAINTEXT"),
    ]
    with pytest.raises(ConfigError, match=r"listener.security.protocol.map entry 'CLIENT'"):
        node("CONTROLLER://h:1,CLIENT://h:2", **{"listener.security.protocol.map": "CLIENT"})
    with pytest.raises(ConfigError, match=r"entry 'CLIENT:TLS': expected NAME:PROTOCOL"):
        node("CONTROLLER://h:1,CLIENT://h:2", **{"listener.security.protocol.map": "CLIENT:TLS"})
    assert unknown_properties({"listener.security.protocol.map": "A:PLAINTEXT"}) == []


@pytest.mark.parametrize(
    "listeners",
    ["CONTROLLER://h:9092,PLAINTEXT://h:9092", "CONTROLLER://h:1,PLAINTEXT://h:2,X://h:2"],
)
def test_a_kafka_listener_needs_its_own_port(listeners: str) -> None:
    extra = {"listener.security.protocol.map": "CONTROLLER:PLAINTEXT,X:PLAINTEXT"}
    with pytest.raises(ConfigError, match=r"each Kafka listener needs its own port"):
        node(listeners, **extra)


def test_the_later_entry_named_in_controller_listener_names_is_the_controllers() -> None:
    names = {"controller.listener.names": "CONTROLLER,CONTROLLER_KAFKA"}
    listeners = "CONTROLLER://h:9093,PLAINTEXT://h:9092,CONTROLLER_KAFKA://h:9192"
    config = node(listeners, **names, **{"process.roles": "broker,controller", "node.id": "1"})
    assert config.kafka_controller_listener == Endpoint("CONTROLLER_KAFKA", "h", 9192)
    assert [e.name for e in config.kafka_listeners] == ["PLAINTEXT"]
    # Not registered as a broker endpoint, whether advertised.listeners is set or not.
    assert [e.name for e in config.advertised_listeners] == ["CONTROLLER", "PLAINTEXT"]
    advertised = {"advertised.listeners": listeners}
    both = {**names, **advertised, "process.roles": "broker,controller", "node.id": "1"}
    assert [e.name for e in node(listeners, **both).advertised_listeners] == [
        "CONTROLLER",
        "PLAINTEXT",
    ]
    # The first entry stays the gRPC listener even when its name is a controller's.
    assert node("CONTROLLER://h:9093", **names).kafka_controller_listener is None
    with pytest.raises(ConfigError, match=r"no controller role \(process.roles\)"):
        node(listeners, **names)
    with pytest.raises(ConfigError, match=r"one controller listener"):
        node(
            "CONTROLLER://h:1,A://h:2,B://h:3",
            **{"controller.listener.names": "CONTROLLER,A,B", "process.roles": "controller"},
            **{"node.id": "1", "controller.quorum.voters": "1@h:1"},
        )
    # A controller's Kafka listener takes any of the four protocols, SASL ones with their
    # settings, as Kafka serves SASL on controller listeners.
    controller = {"controller.listener.names": "CONTROLLER,A", "process.roles": "controller"}
    controller |= {"node.id": "1", "controller.quorum.voters": "1@h:1"}
    ssl = node(
        "CONTROLLER://h:1,A://h:2",
        **controller,
        **{"listener.security.protocol.map": "CONTROLLER:PLAINTEXT,A:SSL"},
        **{"ssl.keystore.location": "k.pem"},
    )
    assert ssl.kafka_controller_listener == Endpoint("A", "h", 2, "SSL")
    sasl = node(
        "CONTROLLER://h:1,A://h:2",
        **controller,
        **{"listener.security.protocol.map": "CONTROLLER:PLAINTEXT,A:SASL_SSL"},
        **{"ssl.keystore.location": "k.pem", "sasl.enabled.mechanisms": "SCRAM-SHA-512"},
    )
    assert sasl.kafka_controller_listener == Endpoint("A", "h", 2, "SASL_SSL")
    assert sasl.sasl["A"].mechanisms == ("SCRAM-SHA-512",)


def test_port_0_is_registered_as_the_port_the_kafka_listener_bound() -> None:
    config = node("CONTROLLER://127.0.0.1:0,PLAINTEXT://127.0.0.1:0")
    lifecycle, _ = broker_config_from_node(
        config, bound_port=19092, kafka_ports={"PLAINTEXT": 9092}
    )
    assert [(e.name, e.port) for e in lifecycle.listeners] == [
        ("CONTROLLER", 19092),
        ("PLAINTEXT", 9092),
    ]


def test_the_listener_settings() -> None:
    assert KafkaListenerConfig.from_properties({}) == KafkaListenerConfig(104857600, 500, 600000)
    custom = KafkaListenerConfig.from_properties(
        {"queued.max.requests": "8", "connections.max.idle.ms": "1000"}
    )
    assert (custom.queued_max_requests, custom.connections_max_idle_ms) == (8, 1000)
    for key in ("queued.max.requests", "connections.max.idle.ms", "socket.request.max.bytes"):
        with pytest.raises(ConfigError, match=key):
            KafkaListenerConfig.from_properties({key: "0"})
    assert unknown_properties({"queued.max.requests": "1", "connections.max.idle.ms": "1"}) == []


@pytest.mark.asyncio
async def test_a_kafka_listener_port_in_use_is_an_os_error_naming_it(tmp_path: Path) -> None:
    grpc_port = free_port()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        first = free_port()
        config = node(
            f"PLAINTEXT://127.0.0.1:{grpc_port},PLAINTEXT2://127.0.0.1:{first},"
            f"PLAINTEXT3://127.0.0.1:{port}",
            **{
                "log.dirs": str(tmp_path / "logs"),
                "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,PLAINTEXT2:PLAINTEXT,"
                "PLAINTEXT3:PLAINTEXT",
            },
        )
        with pytest.raises(
            OSError, match=rf"listeners: cannot listen on PLAINTEXT3://127.0.0.1:{port}: "
        ):
            Node(config)
    # The listeners bound before the failure let their ports go with the failed start, the
    # gRPC port too (never bound: gRPC would keep it), so the same node can be built again.
    again = node(
        f"PLAINTEXT://127.0.0.1:{grpc_port},PLAINTEXT2://127.0.0.1:{first}",
        **{
            "log.dirs": str(tmp_path / "logs"),
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,PLAINTEXT2:PLAINTEXT",
        },
    )
    built = Node(again)
    assert built.listener_port == grpc_port
    assert [listener.port for listener in built.kafka_listeners] == [first]
    await built._close_unstarted()


def test_the_fetch_session_cache_settings_are_kafkas() -> None:
    listeners = "CONTROLLER://127.0.0.1:19092,PLAINTEXT://127.0.0.1:9092"
    default = data_plane_config_from_node(node(listeners))
    assert (default.fetch_session_cache_slots, default.fetch_session_eviction_ms) == (1000, 120_000)
    keys = {
        "max.incremental.fetch.session.cache.slots": "0",  # 0: no sessions, as in Kafka
        "min.incremental.fetch.session.eviction.ms": "5",
    }
    assert unknown_properties(keys) == []
    config = data_plane_config_from_node(node(listeners, **keys))
    assert (config.fetch_session_cache_slots, config.fetch_session_eviction_ms) == (0, 5)
    for key in keys:
        with pytest.raises(ConfigError, match=f"{key}=-1: must be 0 or more"):
            data_plane_config_from_node(node(listeners, **{key: "-1"}))


class _Broker:
    """Stands in for the broker role: it serves clients at once, and is unfenced (or gives up,
    as a lifecycle that shut down does) when the test says."""

    def __init__(self) -> None:
        self.kafka_apis = object()
        self.decided = asyncio.Event()
        self.gave_up = False

    async def wait_serving_clients(self) -> None:
        pass

    async def wait_until_running(self) -> None:
        await self.decided.wait()
        if self.gave_up:
            raise BrokerLifecycleError("the broker lifecycle shut down")


class _Listener:
    def __init__(self) -> None:
        self.served: object | None = None

    async def start(self, apis: object, credentials: object = None) -> None:
        self.served = apis


@pytest.mark.parametrize("gave_up", [False, True])
@pytest.mark.asyncio
async def test_the_kafka_listeners_accept_once_the_controller_unfenced_the_broker(
    gave_up: bool,
) -> None:
    """As Kafka's broker enables request processing: before, a Metadata answer would list no
    broker (the image has none unfenced, not even this one) and no controller."""
    listener, broker = _Listener(), _Broker()
    node = SimpleNamespace(kafka_listeners=[listener])
    serving = asyncio.ensure_future(Node._serve_kafka(node, broker))  # type: ignore[arg-type]
    for _ in range(20):
        await asyncio.sleep(0)
    assert listener.served is None and not serving.done()  # serving clients, still fenced
    broker.gave_up = gave_up
    broker.decided.set()
    await serving
    assert listener.served is (None if gave_up else broker.kafka_apis)
