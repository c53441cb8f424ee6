"""The configuration of one replog node process, from Kafka's property names.

Required: `process.roles` (`controller`, `broker` or both), `node.id`, `cluster.id` (Kafka keeps it
in meta.properties; `replog cluster start` writes it here), `controller.quorum.voters`
(`id@host:port,...`), `listeners` (`NAME://host:port,...`; the node serves gRPC on the first; an
IPv6 host in brackets, `[::1]:9093`, kept bare in `listener_host`; a broker serves Kafka's protocol
on each later entry, `kafka_listener_endpoints`, an SSL or SASL_SSL one with the TLS settings of
`tls_config` (`ssl.keystore.location`, ...; per listener `listener.name.<listener>.ssl.*`; the
first entry mapped to SSL makes the links between nodes mutual TLS, `internal_tls_config`),
a SASL_PLAINTEXT or SASL_SSL one with the SASL settings
of `sasl_config` (`sasl.enabled.mechanisms`, ...); a controller serves it on the later entry named
in `controller.listener.names`, the controller listener Kafka's `--bootstrap-controller` tools
reach), `log.dirs` (comma list). Optional: `metadata.log.dir` (default: the first log dir; empty is
refused), every `controller.quorum.*` timer (`replog.quorum.raft.config`), the controller's settings
(`CONTROLLER_PROPERTIES`: `broker.session.timeout.ms`, `num.partitions`, ...), the broker configs
the controller uses as static defaults (`min.insync.replicas`, `unclean.leader.election.enable`,
every key of `config_definitions.BROKER_CONFIGS`), the snapshot schedule
(`metadata.log.max.record.bytes.between.snapshots`, `metadata.log.max.snapshot.interval.ms`) and
`broker.heartbeat.interval.ms`; `bootstrap.scram.credentials`, the SCRAM credentials a new
metadata log begins with (`scram_bootstrap_config`).

Listener hosts, Kafka's rules (`SocketServer`, `KafkaConfig.effectiveAdvertisedBrokerListeners`,
`ListenerInfo.withWildcardHostnamesResolved`):
- An empty host (`PLAINTEXT://:9092`) binds every interface: `listener_host` is then `0.0.0.0`,
  which gRPC binds as its dual-stack wildcard (IPv4 and IPv6, as Java's wildcard; IPv4 alone on a
  machine without IPv6); so does the Raft Fetch listener (`raft_fetch_server`).
- The endpoints a broker registers, `advertised_listeners`, are `advertised.listeners`, else
  `listeners`: every entry but a controller's Kafka listener (named in `controller.listener.names`
  after the first entry), as Kafka leaves controller listeners out; the first entry (gRPC) serves
  every role. A node without the controller role may not list a controller listener (Kafka's rule),
  and a node serves at most one. An empty host there is kept empty and advertised as the machine's
  canonical host name (`net_address.local_canonical_host_name`), resolved when the broker starts.
- What a controller announces as its Kafka listener (DescribeCluster of controllers, DescribeQuorum
  v2), `advertised_kafka_controller_listener`, is the `advertised.listeners` entry of that
  listener's name, else the listener itself (Kafka's `effectiveAdvertisedControllerListeners`): a
  controller bound to a private address is announced by a name its tools reach.
- A broker refuses to start advertising an unspecified address (`0.0.0.0`, `::`): no client can dial
  it. That holds for `listeners=PLAINTEXT://0.0.0.0:9092` without `advertised.listeners` too, as in
  Kafka (whose check compares with "0.0.0.0" only; `::` is the same mistake). A controller-only node
  registers nothing and may listen on `0.0.0.0`.

Metrics (replog's own, issue #9): `metrics.port` (default 0: no endpoint) serves Prometheus
metrics at `http://<metrics.host>:<metrics.port>/metrics`; `metrics.host` defaults to
127.0.0.1 (loopback only).

`metadata.log.raw.append.enable=true` (replog's own, default false) runs a controller node
without its controller: the metadata log then holds raw values appended through
`MetadataLog.Append`, as Kafka's TestRaftServer does, for the Raft tests and benchmarks. A log
written that way is not a metadata log, and a node with the controller refuses raw appends.

Rules: a controller must be one of the voters and listen where the voter list says it does;
every problem is a `ConfigError` naming the key. Kafka's dotted names map to the
`ControllerConfig` fields here and nowhere else. Integers are read as Kafka reads them
(`replog.config.parse_integer`: `node.id=1_0` is refused, not node 10).

Checked here, before anything starts, though the broker builds them only once it has caught up
with the metadata log: the log manager's and replica manager's settings (`LogManagerConfig`,
`ReplicaManagerConfig`). A bad value there is one error naming the key, and the node does not
start, rather than a broker stuck in recovery.

Static broker configs (what the controller describes as STATIC_BROKER_CONFIG and decides
with): the `BROKER_CONFIGS` keys of the file, except that each log setting is the value the
broker's logs use (`static_broker_configs`), under Kafka's broker key: `log.retention.hours`
and `log.retention.minutes` are reported as `log.retention.ms`, `log.roll.hours` as
`log.roll.ms`, a topic-level name in the file (`segment.bytes`) as its broker key, the later of
two synonyms wins as it does for the logs, and an unset `log.flush.interval.ms` is
`log.flush.scheduler.interval.ms`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

from replog.common import metadata_versions
from replog.config import integer_setting
from replog.errors import ConfigError
from replog.net_address import format_host_port, is_wildcard, parse_host, parse_host_port
from replog.quorum.controller.config_definitions import BROKER_CONFIGS, TOPIC_CONFIGS
from replog.quorum.controller.controller_config import ControllerConfig
from replog.quorum.metadata.records import Endpoint
from replog.quorum.metadata.snapshot_schedule import (
    METADATA_LOG_MAX_RECORD_BYTES_BETWEEN_SNAPSHOTS,
    METADATA_LOG_MAX_SNAPSHOT_INTERVAL_MS,
    METADATA_MAX_RETENTION_BYTES,
    METADATA_MAX_RETENTION_MS,
)
from replog.quorum.raft.config import RaftConfig
from replog.server.config.authorizer_config import NO_AUTHORIZATION, AuthorizerConfig
from replog.server.config.internal_tls_config import (
    SECURITY_PROTOCOLS,
    internal_link_settings,
    parse_protocol_map,
)
from replog.server.config.replica_manager_config import ReplicaManagerConfig
from replog.server.config.sasl_config import (
    SASL_PROTOCOLS,
    SaslListenerConfig,
    sasl_listener_config,
)
from replog.server.config.scram_bootstrap_config import (
    BOOTSTRAP_SCRAM_CREDENTIALS,
    parse_bootstrap_credentials,
)
from replog.server.config.tls_config import KEYSTORE_LOCATION, LISTENER_PREFIX, TlsConfig
from replog.storage.log_config import BY_DOTTED_NAME, LogConfig
from replog.storage.log_manager import LogManagerConfig
from replog.wire.link_security import LinkSettings

ROLES = frozenset({"controller", "broker"})
RAW_APPEND_PROPERTY = "metadata.log.raw.append.enable"
BROKER_HEARTBEAT_INTERVAL_MS_DEFAULT = 2000
METRICS_PORT_DEFAULT = 0  # no endpoint
METRICS_HOST_DEFAULT = "127.0.0.1"
WILDCARD_BIND_HOST = "0.0.0.0"  # gRPC binds it dual-stack: every interface, both families
TLS_PROTOCOLS = frozenset({"SSL", "SASL_SSL"})
# The keys read here, besides the Raft and controller settings (`known_properties` joins them
# with every other reader's). `controller.listener.names` names the controller's Kafka-protocol
# listener (module docstring); replog serves every gRPC service on the first listener.
NODE_PROPERTIES = frozenset(
    {
        "process.roles",
        "node.id",
        "cluster.id",
        "listeners",
        "advertised.listeners",
        "listener.security.protocol.map",
        "log.dirs",
        "metadata.log.dir",
        "controller.listener.names",
        RAW_APPEND_PROPERTY,
        "metadata.log.max.record.bytes.between.snapshots",
        "metadata.log.max.snapshot.interval.ms",
        "metadata.max.retention.bytes",
        "metadata.max.retention.ms",
        "broker.heartbeat.interval.ms",
        "metrics.port",
        "metrics.host",
    }
)


def _int(key: str, text: str) -> int:
    return integer_setting(key, text)


def _bool(key: str, text: str) -> bool:
    lowered = text.strip().lower()
    if lowered not in ("true", "false"):
        raise ConfigError(f"{key}={text!r}: expected true or false")
    return lowered == "true"


def _metadata_version(key: str, text: str) -> int:
    level = metadata_versions.level_of(text.strip())
    if level is not None:
        return level
    if text.strip().isdigit():
        return _int(key, text)
    known = ", ".join(metadata_versions.NAMES.values())
    raise ConfigError(f"{key}={text!r}: not a metadata.version level or one of {known}")


def _seconds_as_ms(key: str, text: str) -> int:
    return _int(key, text) * 1000


# Kafka's name -> (ControllerConfig field, parser): the one place the names are mapped.
CONTROLLER_PROPERTIES: Mapping[str, tuple[str, Callable[[str, str], object]]] = {
    "broker.session.timeout.ms": ("broker_session_timeout_ms", _int),
    "metadata.max.idle.interval.ms": ("metadata_max_idle_interval_ms", _int),
    "num.partitions": ("default_num_partitions", _int),
    "default.replication.factor": ("default_replication_factor", _int),
    "auto.leader.rebalance.enable": ("auto_leader_rebalance_enable", _bool),
    "eligible.leader.replicas.enable": ("eligible_leader_replicas_enable", _bool),
    "leader.imbalance.check.interval.seconds": (
        "leader_imbalance_check_interval_ms",
        _seconds_as_ms,
    ),
    # replog's own: the metadata.version a new cluster finalizes, a level or its name, 7 or
    # 3.3-IV3 (Kafka's `kafka-storage format --release-version 3.3-IV3`).
    "bootstrap.metadata.version": ("bootstrap_metadata_version", _metadata_version),
    # replog's own: the transaction.version a new cluster finalizes (Kafka's
    # `kafka-storage format --feature transaction.version=N`).
    "bootstrap.transaction.version": ("bootstrap_transaction_version", _int),
    # replog's own: the SCRAM credentials a new cluster begins with (Kafka's `kafka-storage
    # format --add-scram`; `scram_bootstrap_config`).
    BOOTSTRAP_SCRAM_CREDENTIALS: ("bootstrap_scram_credentials", parse_bootstrap_credentials),
}


@dataclass(frozen=True, slots=True)
class NodeConfig:
    node_id: int
    roles: frozenset[str]
    listener_host: str
    listener_port: int
    log_dirs: tuple[str, ...]
    metadata_log_dir: str
    raft: RaftConfig
    properties: dict[str, str]
    cluster_id: str
    # What the node's controller runs with (None: not a controller, or raw appends).
    controller: ControllerConfig | None
    raw_metadata_appends: bool = False
    snapshot_bytes_max: int = METADATA_LOG_MAX_RECORD_BYTES_BETWEEN_SNAPSHOTS
    snapshot_interval_ms: int = METADATA_LOG_MAX_SNAPSHOT_INTERVAL_MS
    retention_bytes: int = METADATA_MAX_RETENTION_BYTES  # negative: no limit
    retention_ms: int = METADATA_MAX_RETENTION_MS  # negative: no limit
    broker_heartbeat_interval_ms: int = BROKER_HEARTBEAT_INTERVAL_MS_DEFAULT
    metrics_port: int = METRICS_PORT_DEFAULT
    metrics_host: str = METRICS_HOST_DEFAULT
    # What a broker registers (`advertised.listeners`, else `listeners`); an empty host is
    # resolved when the broker starts. `advertised_listeners_key` names the key they came from.
    advertised_listeners: tuple[Endpoint, ...] = ()
    advertised_listeners_key: str = "listeners"
    # The `listeners` entries a broker serves with Kafka's protocol (`kafka_listener_endpoints`),
    # each with its security protocol.
    kafka_listeners: tuple[Endpoint, ...] = ()
    # The unprefixed `ssl.*` settings (None: no keystore named).
    tls: TlsConfig | None = None
    # What each SSL or SASL_SSL Kafka listener (a controller's too) runs with, by name: its
    # `listener.name.<listener>.ssl.*` settings over the unprefixed ones (`tls_config`).
    listener_tls: Mapping[str, TlsConfig] = dataclasses.field(default_factory=dict)
    # The internal links' mutual TLS (`internal_tls_config`; None: plaintext).
    internal_links: LinkSettings | None = None
    # Each SASL_PLAINTEXT or SASL_SSL Kafka listener's SASL settings, by listener name.
    sasl: Mapping[str, SaslListenerConfig] = dataclasses.field(default_factory=dict)
    # The Kafka listeners' authorization and TLS principal settings.
    authorizer: AuthorizerConfig = NO_AUTHORIZATION
    # The one a controller serves with Kafka's protocol: a `listeners` entry after the first
    # named in `controller.listener.names` (None: none).
    kafka_controller_listener: Endpoint | None = None
    # Where tools are sent for it: the `advertised.listeners` entry of its name, else itself.
    advertised_kafka_controller_listener: Endpoint | None = None

    @property
    def is_controller(self) -> bool:
        return "controller" in self.roles

    @property
    def runs_broker(self) -> bool:
        """The broker role, unless raw appends turned the node into a bare Raft log."""
        return "broker" in self.roles and not self.raw_metadata_appends

    @property
    def listener(self) -> str:
        return format_host_port(self.listener_host, self.listener_port)

    @classmethod
    def from_properties(cls, properties: dict[str, str]) -> NodeConfig:
        def required(key: str) -> str:
            value = properties.get(key, "").strip()
            if not value:
                raise ConfigError(f"{key}: required")
            return value

        roles = frozenset(r.strip() for r in required("process.roles").split(",") if r.strip())
        if not roles or not roles <= ROLES:
            raise ConfigError(
                f"process.roles={properties['process.roles']!r}: accepted values are "
                "controller, broker, or both"
            )
        node_id = _int("node.id", required("node.id"))
        if node_id < 0:
            raise ConfigError(f"node.id={node_id}: must be >= 0")
        listeners = listener_endpoints(required("listeners"), "listeners")
        if not listeners:
            raise ConfigError(f"listeners={properties['listeners']!r}: no listener")
        host, port = listeners[0].host or WILDCARD_BIND_HOST, listeners[0].port
        advertised_key = "advertised.listeners"
        advertised = listener_endpoints(properties.get(advertised_key, ""), advertised_key)
        if not advertised:
            advertised_key, advertised = "listeners", listeners
        controller_names = controller_listener_names(properties)
        kafka_listeners, kafka_controller_listener = split_controller_listener(
            kafka_listener_endpoints(
                listeners, properties.get("listener.security.protocol.map", ""), controller_names
            ),
            controller_names,
            roles,
        )
        advertised_controller_listener = kafka_controller_listener
        if kafka_controller_listener is not None:
            advertised_controller_listener = next(
                (e for e in advertised[1:] if e.name == kafka_controller_listener.name),
                kafka_controller_listener,
            )
            # A controller listener is no broker endpoint (Kafka's brokers never register one).
            advertised = tuple(
                e for i, e in enumerate(advertised) if i == 0 or e.name not in controller_names
            )
        if "broker" in roles:
            _refuse_unspecified(advertised, advertised_key)
        tls = TlsConfig.from_properties(properties)
        listener_tls: dict[str, TlsConfig] = {}
        kafka_served = [*kafka_listeners, *filter(None, [kafka_controller_listener])]
        for endpoint in kafka_served:
            if endpoint.security_protocol not in TLS_PROTOCOLS:
                continue
            found = TlsConfig.from_properties(properties, endpoint.name)
            if found is None:
                raise ConfigError(
                    f"listeners entry '{endpoint.name}://"
                    f"{format_host_port(endpoint.host, endpoint.port)}' is "
                    f"{endpoint.security_protocol}: set {KEYSTORE_LOCATION} (or "
                    f"{LISTENER_PREFIX}{endpoint.name.lower()}.{KEYSTORE_LOCATION}) to the PEM "
                    "file of its key and certificate chain"
                )
            listener_tls[endpoint.name] = found
        authorizer = AuthorizerConfig.from_properties(properties)
        internal_links = internal_link_settings(properties, listeners[0], authorizer)
        # A controller's Kafka listener takes SASL as a broker's does (Kafka serves SASL on
        # controller listeners: `--bootstrap-controller` tools sign in there).
        sasl = {
            e.name: sasl_listener_config(e.name, properties)
            for e in kafka_served
            if e.security_protocol in SASL_PROTOCOLS
        }
        log_dirs = tuple(d.strip() for d in required("log.dirs").split(",") if d.strip())
        if not log_dirs:
            raise ConfigError("log.dirs: names no directory")
        metadata_log_dir = properties.get("metadata.log.dir", log_dirs[0]).strip()
        if not metadata_log_dir:
            # Empty, it would put the metadata log in the current directory.
            raise ConfigError(
                "metadata.log.dir: empty; leave it out to keep the metadata log in the first "
                "of log.dirs"
            )
        # The broker's settings, checked now (module docstring); the log settings also give
        # the controller its static broker configs.
        log_manager = LogManagerConfig.from_properties(properties)
        ReplicaManagerConfig.from_properties(node_id, properties)
        raft_properties = {
            k: v for k, v in properties.items() if k.startswith("controller.quorum.")
        }
        raft = RaftConfig.from_properties(raft_properties)
        if "controller" in roles:
            mine = [v for v in raft.voters if v.node_id == node_id]
            if not mine:
                raise ConfigError(
                    f"controller.quorum.voters: node.id {node_id} has the controller role but is "
                    "not a voter"
                )
            if mine[0].port != port:
                raise ConfigError(
                    f"listeners: node {node_id} listens on port {port} but "
                    f"controller.quorum.voters gives port {mine[0].port}"
                )
        cluster_id = required("cluster.id")
        raw = _bool(RAW_APPEND_PROPERTY, properties.get(RAW_APPEND_PROPERTY, "false"))
        controller = None
        if "controller" in roles and not raw:
            controller = controller_config_from_properties(
                node_id, cluster_id, properties, log_manager.log
            )
        snapshot_bytes_key = "metadata.log.max.record.bytes.between.snapshots"
        snapshot_interval_key = "metadata.log.max.snapshot.interval.ms"
        snapshot_bytes_max = _int(
            snapshot_bytes_key,
            properties.get(
                snapshot_bytes_key, str(METADATA_LOG_MAX_RECORD_BYTES_BETWEEN_SNAPSHOTS)
            ),
        )
        snapshot_interval_ms = _int(
            snapshot_interval_key,
            properties.get(snapshot_interval_key, str(METADATA_LOG_MAX_SNAPSHOT_INTERVAL_MS)),
        )
        # Kafka's: any long, a negative one for no limit.
        retention_bytes_key = "metadata.max.retention.bytes"
        retention_bytes = _int(
            retention_bytes_key,
            properties.get(retention_bytes_key, str(METADATA_MAX_RETENTION_BYTES)),
        )
        retention_ms_key = "metadata.max.retention.ms"
        retention_ms = _int(
            retention_ms_key, properties.get(retention_ms_key, str(METADATA_MAX_RETENTION_MS))
        )
        if snapshot_bytes_max <= 0:
            raise ConfigError(f"{snapshot_bytes_key}={snapshot_bytes_max}: must be positive")
        if snapshot_interval_ms < 0:
            raise ConfigError(f"{snapshot_interval_key}={snapshot_interval_ms}: must be >= 0")
        heartbeat_key = "broker.heartbeat.interval.ms"
        heartbeat_ms = _int(
            heartbeat_key,
            properties.get(heartbeat_key, str(BROKER_HEARTBEAT_INTERVAL_MS_DEFAULT)),
        )
        if heartbeat_ms <= 0:
            raise ConfigError(f"{heartbeat_key}={heartbeat_ms}: must be positive")
        metrics_port = _int(
            "metrics.port", properties.get("metrics.port", str(METRICS_PORT_DEFAULT))
        )
        if not 0 <= metrics_port <= 65535:
            raise ConfigError(f"metrics.port={metrics_port}: must be in [0, 65535] (0: none)")
        # A host alone; `[::1]` is accepted as Kafka users write IPv6 hosts so.
        metrics_host = parse_host(
            properties.get("metrics.host", METRICS_HOST_DEFAULT), "metrics.host"
        )
        return cls(
            node_id=node_id,
            roles=roles,
            listener_host=host,
            listener_port=port,
            log_dirs=log_dirs,
            metadata_log_dir=metadata_log_dir,
            raft=raft,
            properties=dict(properties),
            cluster_id=cluster_id,
            controller=controller,
            raw_metadata_appends=raw,
            snapshot_bytes_max=snapshot_bytes_max,
            snapshot_interval_ms=snapshot_interval_ms,
            retention_bytes=retention_bytes,
            retention_ms=retention_ms,
            broker_heartbeat_interval_ms=heartbeat_ms,
            metrics_port=metrics_port,
            metrics_host=metrics_host,
            advertised_listeners=advertised,
            advertised_listeners_key=advertised_key,
            kafka_listeners=kafka_listeners,
            tls=tls,
            listener_tls=listener_tls,
            internal_links=internal_links,
            sasl=sasl,
            authorizer=authorizer,
            kafka_controller_listener=kafka_controller_listener,
            advertised_kafka_controller_listener=advertised_controller_listener,
        )


def controller_config_from_properties(
    node_id: int,
    cluster_id: str,
    properties: Mapping[str, str],
    log_config: LogConfig,
) -> ControllerConfig:
    """The `ControllerConfig` a node's properties describe (Kafka's names, Kafka's defaults).
    `log_config`: the default log settings the broker resolves from the same properties
    (`LogManagerConfig.from_properties`)."""
    values: dict[str, object] = {}
    for key, (field, parse) in CONTROLLER_PROPERTIES.items():
        if key in properties:
            values[field] = parse(key, properties[key])
    static = static_broker_configs(properties, log_config)
    try:
        return ControllerConfig(
            node_id=node_id,
            cluster_id=cluster_id,
            static_broker_configs=static,
            **values,  # type: ignore[arg-type]  # each parser returns its field's type
        )
    except ValueError as error:
        raise ConfigError(str(error)) from None


# Log field -> Kafka's broker key of it, for the log settings the controller knows.
_LOG_BROKER_KEYS: Mapping[str, str] = {
    BY_DOTTED_NAME[name][0]: definition.broker_name
    for name, definition in TOPIC_CONFIGS.items()
    if name in BY_DOTTED_NAME and definition.broker_name is not None
}


def static_broker_configs(properties: Mapping[str, str], log_config: LogConfig) -> dict[str, str]:
    """The node's static broker configs (module docstring): the `BROKER_CONFIGS` keys set in
    `properties`, with each log setting set under any of its names reported as `log_config`
    (the broker's resolution of the same properties) has it, under Kafka's broker key.

    Keys are mapped, not copied as written, so that `log.retention.hours` and `log.roll.hours`
    reach DescribeConfigs and a later synonym wins there as it does in the broker.
    """
    static = {
        key: value
        for key, value in properties.items()
        if key in BROKER_CONFIGS and key not in _LOG_BROKER_KEYS.values()
    }
    fields = {BY_DOTTED_NAME[key][0] for key in properties if key in BY_DOTTED_NAME}
    if "log.flush.scheduler.interval.ms" in properties:
        fields.add("flush_interval_ms")  # its fallback (`LogManagerConfig.from_properties`)
    for field, broker_key in _LOG_BROKER_KEYS.items():
        if field in fields:
            static[broker_key] = str(getattr(log_config, field))
    return static


def listener_endpoints(text: str, key: str) -> tuple[Endpoint, ...]:
    """`NAME://host:port,...` (a bare host:port is listener PLAINTEXT); an empty host stays
    empty (the wildcard) and an IPv6 host is kept without its brackets (`net_address`)."""
    endpoints = []
    for entry in (e.strip() for e in text.split(",")):
        if not entry:
            continue
        name, _, address = entry.rpartition("://")
        host, port = parse_host_port(address, f"{key} entry", empty_host=True)
        name = name or "PLAINTEXT"
        protocol = name if name in SECURITY_PROTOCOLS else "PLAINTEXT"
        endpoints.append(Endpoint(name, host, port, protocol))
    return tuple(endpoints)


def kafka_listener_endpoints(
    listeners: tuple[Endpoint, ...],
    protocol_map: str,
    controller_names: frozenset[str] = frozenset(),
) -> tuple[Endpoint, ...]:
    """The `listeners` entries served with Kafka's protocol, each with its security protocol:
    every entry after the first (the first is the node's gRPC listener), with its security
    protocol by `listener.security.protocol.map` (`NAME:PROTOCOL,...`) or, for a
    name it does not map, by its name (a name that is no protocol: not served); every entry
    after the first named in `controller_names` (`controller.listener.names`), PLAINTEXT
    unless mapped to another protocol. Two such entries may not share a port, nor use the gRPC
    port."""
    mapped = parse_protocol_map(protocol_map)
    served = []
    for endpoint in listeners[1:]:
        protocol = mapped.get(endpoint.name, endpoint.name)
        if endpoint.name in controller_names:
            # Any of the four, as on a broker's (Kafka serves SASL on controller listeners).
            protocol = protocol if protocol in SECURITY_PROTOCOLS else "PLAINTEXT"
            served.append(replace(endpoint, security_protocol=protocol))
        elif protocol in SECURITY_PROTOCOLS:
            served.append(replace(endpoint, security_protocol=protocol))
    taken = {listeners[0].port} if listeners and listeners[0].port else set()
    for endpoint in served:
        if endpoint.port and endpoint.port in taken:
            raise ConfigError(
                f"listeners entry '{endpoint.name}://"
                f"{format_host_port(endpoint.host, endpoint.port)}': port {endpoint.port} is "
                "already another listener's; each Kafka listener needs its own port"
            )
        taken.add(endpoint.port)
    return tuple(served)


def controller_listener_names(properties: Mapping[str, str]) -> frozenset[str]:
    """`controller.listener.names` as a set of names."""
    text = properties.get("controller.listener.names", "")
    return frozenset(name.strip() for name in text.split(",") if name.strip())


def split_controller_listener(
    served: tuple[Endpoint, ...], controller_names: frozenset[str], roles: frozenset[str]
) -> tuple[tuple[Endpoint, ...], Endpoint | None]:
    """The Kafka listeners a broker serves, and the one a controller serves (None: none)."""
    controllers = [e for e in served if e.name in controller_names]
    if len(controllers) > 1:
        names = ", ".join(e.name for e in controllers)
        raise ConfigError(
            f"listeners: {names} are all named in controller.listener.names; a node serves one "
            "controller listener with Kafka's protocol"
        )
    if controllers and "controller" not in roles:
        raise ConfigError(
            f"listeners entry '{controllers[0].name}://"
            f"{format_host_port(controllers[0].host, controllers[0].port)}' is named in "
            "controller.listener.names, but this node has no controller role "
            "(process.roles); leave it out of listeners, as Kafka requires of a broker"
        )
    brokers = tuple(e for e in served if e.name not in controller_names)
    return brokers, (controllers[0] if controllers else None)


def _refuse_unspecified(endpoints: tuple[Endpoint, ...], key: str) -> None:
    """Kafka's start-up check: no broker advertises the non-routable meta-address."""
    for endpoint in endpoints:
        if endpoint.host and is_wildcard(endpoint.host):
            entry = f"{endpoint.name}://{format_host_port(endpoint.host, endpoint.port)}"
            inherited = (
                " (advertised.listeners is unset, so the broker would advertise its listeners)"
                if key == "listeners"
                else ""
            )
            raise ConfigError(
                f"{key} entry {entry!r}: cannot advertise the non-routable meta-address "
                f"{endpoint.host}{inherited}; set advertised.listeners to a host clients can "
                f"reach, or leave the host empty ({endpoint.name}://:{endpoint.port}) to bind "
                "every interface and advertise this machine's host name"
            )
