"""A broker's data plane settings, read from a node's Kafka-named properties: where its
partition logs live, the replica links' and requests' limits, the fetch session cache, and the
group and transaction coordinators' configs.

Its own module, below the broker runtime, so that `replog cluster start` checks a node's
settings before spawning it without importing the whole broker (about a second of CPU)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from replog.config import non_negative_setting, positive_setting
from replog.replication.fetch_session_cache import CACHE_SLOTS_DEFAULT, EVICTION_MS_DEFAULT
from replog.replication.txn_verification import check_static_verification
from replog.server.config.group_coordinator_config import GroupCoordinatorConfig
from replog.server.config.node_config import NodeConfig
from replog.server.config.transaction_coordinator_config import TransactionCoordinatorConfig

REPLICA_SOCKET_TIMEOUT_MS_DEFAULT = 30_000  # replica.socket.timeout.ms
REQUEST_BYTES_MAX_DEFAULT = 104_857_600  # socket.request.max.bytes
# The node properties the broker runtime and its data plane read (the log, replica manager and
# group coordinator settings are their own configs' keys).
BROKER_PROPERTIES = frozenset(
    {
        "broker.rack",
        "broker.session.timeout.ms",
        "initial.broker.registration.timeout.ms",
        "replica.socket.timeout.ms",
        "socket.request.max.bytes",
        "max.incremental.fetch.session.cache.slots",
        "min.incremental.fetch.session.eviction.ms",
    }
)


@dataclass(frozen=True, slots=True)
class DataPlaneConfig:
    """Where the broker keeps partition logs and how its data plane is tuned."""

    log_dirs: tuple[str, ...]
    properties: Mapping[str, str]
    replica_socket_timeout_ms: int = REPLICA_SOCKET_TIMEOUT_MS_DEFAULT
    request_bytes_max: int = REQUEST_BYTES_MAX_DEFAULT
    group_coordinator: GroupCoordinatorConfig = field(default_factory=GroupCoordinatorConfig)
    transaction_coordinator: TransactionCoordinatorConfig = field(
        default_factory=TransactionCoordinatorConfig
    )
    # The Kafka listeners' fetch session cache (docs/kafka-protocol.md, "Fetch sessions").
    fetch_session_cache_slots: int = CACHE_SLOTS_DEFAULT
    fetch_session_eviction_ms: int = EVICTION_MS_DEFAULT


def data_plane_config_from_node(node: NodeConfig) -> DataPlaneConfig:
    """Where a node's broker keeps its partition logs, and its data plane's limits."""
    return data_plane_config(node.log_dirs, node.properties)


def data_plane_config(log_dirs: Sequence[str], properties: Mapping[str, str]) -> DataPlaneConfig:
    """A data plane keeping its partition logs in `log_dirs`, set by the Kafka-named
    `properties` (module docstring)."""
    check_static_verification(properties)
    return DataPlaneConfig(
        log_dirs=tuple(log_dirs),
        properties=dict(properties),
        replica_socket_timeout_ms=positive_setting(
            properties, "replica.socket.timeout.ms", REPLICA_SOCKET_TIMEOUT_MS_DEFAULT
        ),
        request_bytes_max=positive_setting(
            properties, "socket.request.max.bytes", REQUEST_BYTES_MAX_DEFAULT
        ),
        group_coordinator=GroupCoordinatorConfig.from_properties(properties),
        transaction_coordinator=TransactionCoordinatorConfig.from_properties(properties),
        fetch_session_cache_slots=non_negative_setting(
            properties, "max.incremental.fetch.session.cache.slots", CACHE_SLOTS_DEFAULT
        ),
        fetch_session_eviction_ms=non_negative_setting(
            properties, "min.incremental.fetch.session.eviction.ms", EVICTION_MS_DEFAULT
        ),
    )
