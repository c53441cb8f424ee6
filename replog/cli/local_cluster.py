"""The files of a local multi-process cluster: one directory, described by its `cluster.json`.

`replog cluster` writes and reads them; `replog quorum` (and later client-side commands) read
`cluster.json` to find the local nodes when no `--bootstrap-server` is given.

Layout of a cluster directory (default `./.replog/cluster`)::

    cluster.json                   the nodes, their roles and listeners (this module's format)
    node-<id>/server.properties    the node's configuration (`replog node --config` reads it)
    node-<id>/data/                its log.dirs (the metadata log lives in here)
    node-<id>/node.log             the node's stdout and stderr
    node-<id>/node.pid             its pid while it runs

`cluster.json` (paths relative to the directory holding it)::

    {"version": 1, "voters": "1@127.0.0.1:19092,...", "cluster_id": "q1Sh-9_ISia_zwGINzRvyQ",
     "nodes": [{"node_id": 1, "roles": ["broker", "controller"],
                "listeners": {"CONTROLLER": "127.0.0.1:19092", "PLAINTEXT": "127.0.0.1:9092"},
                "dir": "node-1", "metrics": "http://127.0.0.1:19192/metrics"}, ...]}

Rules:
- Node ids are 1..N; node i's controller listener is `127.0.0.1:<base port + i - 1>`, its
  Prometheus metrics endpoint `http://127.0.0.1:<base port + 100 + i - 1>/metrics`
  (`metrics.port` in its server.properties). A `cluster.json` written before metrics existed
  names none, and its nodes serve none.
- With a Kafka base port K (`cluster start --kafka-base-port`; without it a new cluster's K is
  9092, or base port + 200 when `--base-port` is given: `kafka_base_port_for`) every broker also
  serves Kafka's protocol: node i's `PLAINTEXT` listener is `127.0.0.1:<K + i - 1>`, written to
  its server.properties as Kafka names it (a `PLAINTEXT://` entry in `listeners` and in
  `advertised.listeners`, and `listener.security.protocol.map` mapping both listener names to
  PLAINTEXT), so `bootstrap.servers=localhost:9092` works as in Kafka's quick start. A
  cluster planned without one (`replog demo`, a `cluster.json` written before) has none.
  Every controller also serves Kafka's protocol as a controller (`--bootstrap-controller`):
  node i's `CONTROLLER_KAFKA` listener is `127.0.0.1:<K + 100 + i - 1>`, named in
  `controller.listener.names` after `CONTROLLER` (Kafka's way of marking controller
  listeners), so a broker never registers it.
- A stopped cluster may move to other ports (`on_ports`, by the rules above; both Kafka
  listeners move with K): `rewrite_addresses` rewrites only the keys of each
  server.properties that name ports (`address_properties`: voters, listeners, advertised
  listeners, metrics host and port); the voters are ids in the metadata log, so the data
  stays valid. A move keeps each node's listener names, so `controller.listener.names` stays
  as written. `cluster.json` names the new ports first, with `"rewrite_pending": true` until
  every node's file is rewritten: a move that fails partway is finished by the next start
  (`rewrite_pending`), never left with some nodes on the old ports and some on the new.
  Rewriting sets the same keys to the same values, so doing it again is harmless; a start
  without a pending move leaves the files as they are (hand edits included).
- A cluster started with `--security ssl` or `sasl_ssl` says so in `cluster.json`
  (`"security"`, absent for plaintext): its brokers' Kafka listener is named `SSL` or
  `SASL_SSL` instead of `PLAINTEXT` (and mapped to that protocol; the controllers' Kafka
  listener keeps its name, mapped to the same protocol), its nodes take the TLS
  settings of `cluster_tls_files` (and under sasl_ssl those of `cluster_sasl`), and every start
  writes `client.properties` and `client-java.properties` beside `cluster.json`.
- A new cluster gets a fresh cluster id (Kafka's form: a random UUID in unpadded url-safe
  base64, 22 characters), written to `cluster.json` and as `cluster.id` to every node's
  server.properties. A `cluster.json` written before cluster ids existed has none.
- Roles are per node and drive what its `server.properties` says. By default every node is
  combined: a controller (a voter) and a broker, both served on the node's one listener (the
  broker data plane's `Broker` service included), named `CONTROLLER` in `server.properties`
  (`PLAINTEXT` is left for a Kafka-protocol listener); `cluster start` shows it as internal,
  with what it serves (`listener_summary`), and `cluster status` under INTERNAL (gRPC): clients
  use the Kafka listeners (`bootstrap_servers`).
- A cluster with fewer brokers than Kafka's `offsets.topic.replication.factor` default (3)
  gets `offsets.topic.replication.factor=<brokers>`, so `__consumer_offsets` can be created
  and consumer groups can commit offsets (an override given to `start` still wins).
- Every problem with the files is a `ReplogError` naming the file.
- Commands that find their servers through these files first try them with a TCP connect
  (`require_answering`): when none accepts one, the cluster is not running, and the command
  says so at once instead of retrying for its timeout, as it must for an address a user named.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import socket
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from replog.cli.cluster_tls_files import ClusterTlsFiles, node_principal
from replog.config import render_properties
from replog.errors import ReplogError
from replog.net_address import format_host_port, parse_host_port

DEFAULT_DATA_DIR = os.path.join(".replog", "cluster")
DEFAULT_NODE_COUNT = 3
DEFAULT_BASE_PORT = 19092
METRICS_PORT_OFFSET = 100  # node i's metrics port: base port + 100 + i - 1
DEFAULT_ROLES = ("broker", "controller")
LOOPBACK = "127.0.0.1"
CLUSTER_FILE = "cluster.json"
CONTROLLER_LISTENER = "CONTROLLER"
KAFKA_LISTENER = "PLAINTEXT"  # the listener name Kafka's clients and docs expect
SSL_LISTENER = "SSL"  # a broker's Kafka listener in a cluster started with --security ssl
SASL_SSL_LISTENER = "SASL_SSL"  # ... with --security sasl_ssl
KAFKA_LISTENERS = (KAFKA_LISTENER, SSL_LISTENER, SASL_SSL_LISTENER)
# What `cluster start --security` takes, and the brokers' Kafka listener of each.
SECURITY_PLAINTEXT, SECURITY_SSL, SECURITY_SASL_SSL = "plaintext", "ssl", "sasl_ssl"
BROKER_LISTENERS = {
    SECURITY_PLAINTEXT: KAFKA_LISTENER,
    SECURITY_SSL: SSL_LISTENER,
    SECURITY_SASL_SSL: SASL_SSL_LISTENER,
}
SECURITY_CHOICES = tuple(BROKER_LISTENERS)
CLIENT_PROPERTIES = "client.properties"
# The same for Kafka's Java clients and tools (`java_client_properties`).
JAVA_CLIENT_PROPERTIES = "client-java.properties"
# A controller's Kafka-protocol listener (`--bootstrap-controller`), named in
# `controller.listener.names` after the gRPC one.
KAFKA_CONTROLLER_LISTENER = "CONTROLLER_KAFKA"
KAFKA_CONTROLLER_PORT_OFFSET = 100  # node i's: Kafka base port + 100 + i - 1
DEFAULT_KAFKA_BASE_PORT = 9092
# A new cluster given a base port P and no Kafka base port: its Kafka listeners at P + 200, its
# controllers' at P + 300 (`kafka_base_port_for`).
DERIVED_KAFKA_PORT_OFFSET = 200
PROBE_TIMEOUT_S = 0.5  # a TCP connect on loopback: refused or accepted at once
FORMAT_VERSION = 1


@dataclass(frozen=True, slots=True)
class LocalNode:
    """One node of a local cluster; paths are absolute."""

    node_id: int
    roles: tuple[str, ...]
    listeners: Mapping[str, str]  # listener name -> host:port
    directory: str
    metrics_address: str | None = None  # host:port of its metrics endpoint; None: none

    @property
    def metrics_url(self) -> str | None:
        return None if self.metrics_address is None else f"http://{self.metrics_address}/metrics"

    @property
    def is_controller(self) -> bool:
        return "controller" in self.roles

    @property
    def controller_address(self) -> str:
        return self.listeners[CONTROLLER_LISTENER]

    @property
    def kafka_address(self) -> str | None:
        """host:port of its Kafka listener, PLAINTEXT or SSL (None: it serves none)."""
        return next((self.listeners[n] for n in KAFKA_LISTENERS if n in self.listeners), None)

    @property
    def kafka_controller_address(self) -> str | None:
        """host:port of its controller's Kafka listener (None: it serves none)."""
        return self.listeners.get(KAFKA_CONTROLLER_LISTENER)

    @property
    def listener_summary(self) -> str:
        """How `cluster start` shows the node's listeners: each address with what it serves
        (the `CONTROLLER` listener of `server.properties` is replog's internal gRPC listener,
        which the nodes use between them for every role the node has)."""
        shown = []
        for name, address in self.listeners.items():
            if name == CONTROLLER_LISTENER:
                served = "+".join(role for role in ("broker", "controller") if role in self.roles)
                shown.append(f"{address} (internal gRPC: {served})")
            else:
                shown.append(f"{name}://{address}")
        return ", ".join(shown)

    @property
    def config_path(self) -> str:
        return os.path.join(self.directory, "server.properties")

    @property
    def log_path(self) -> str:
        return os.path.join(self.directory, "node.log")

    @property
    def pid_path(self) -> str:
        return os.path.join(self.directory, "node.pid")

    @property
    def data_path(self) -> str:
        return os.path.join(self.directory, "data")


@dataclass(frozen=True, slots=True)
class LocalCluster:
    """A cluster directory and its nodes (see the module docstring)."""

    directory: str
    nodes: tuple[LocalNode, ...]
    cluster_id: str | None = None
    # A move to other ports began and did not finish (module docstring): not part of where
    # the cluster is, so not of equality either.
    rewrite_pending: bool = field(default=False, compare=False)
    # How its brokers' Kafka listeners are secured: plaintext, or ssl (mutual TLS).
    security: str = SECURITY_PLAINTEXT

    @classmethod
    def plan(
        cls,
        directory: str,
        node_count: int = DEFAULT_NODE_COUNT,
        base_port: int = DEFAULT_BASE_PORT,
        roles: tuple[str, ...] = DEFAULT_ROLES,
        kafka_base_port: int | None = None,
        security: str = SECURITY_PLAINTEXT,
    ) -> LocalCluster:
        """The layout of a new cluster (nothing is written); with `kafka_base_port`, a Kafka
        listener on every broker (module docstring), SSL with `security` ssl, SASL_SSL with
        sasl_ssl."""
        directory = os.path.realpath(directory)
        if security != SECURITY_PLAINTEXT and (kafka_base_port is None or "broker" not in roles):
            raise ReplogError(
                f"--security {security} secures the brokers' Kafka listeners: a cluster without "
                "brokers serving Kafka's protocol has none"
            )
        broker_listener = BROKER_LISTENERS[security]
        if node_count < 1:
            raise ReplogError(f"--nodes {node_count}: a cluster needs at least one node")
        if not 1 <= base_port <= 65536 - node_count - METRICS_PORT_OFFSET:
            last = base_port + METRICS_PORT_OFFSET + node_count - 1
            raise ReplogError(
                f"--base-port {base_port}: ports {base_port}..{last} (listeners, then metrics "
                f"from {base_port + METRICS_PORT_OFFSET}) are not all in [1, 65535]"
            )
        controller_base_port = None
        if kafka_base_port is not None:
            _check_kafka_ports(kafka_base_port, node_count, base_port)
            if "controller" in roles:
                controller_base_port = kafka_base_port + KAFKA_CONTROLLER_PORT_OFFSET
            if "broker" not in roles:
                kafka_base_port = None

        def listeners(i: int) -> dict[str, str]:
            found = {CONTROLLER_LISTENER: format_host_port(LOOPBACK, base_port + i - 1)}
            if kafka_base_port is not None:
                found[broker_listener] = format_host_port(LOOPBACK, kafka_base_port + i - 1)
            if controller_base_port is not None:
                found[KAFKA_CONTROLLER_LISTENER] = format_host_port(
                    LOOPBACK, controller_base_port + i - 1
                )
            return found

        nodes = tuple(
            LocalNode(
                node_id=i,
                roles=roles,
                listeners=listeners(i),
                directory=os.path.join(directory, f"node-{i}"),
                metrics_address=format_host_port(LOOPBACK, base_port + METRICS_PORT_OFFSET + i - 1),
            )
            for i in range(1, node_count + 1)
        )
        return cls(directory, nodes, new_cluster_id(), security=security)

    @staticmethod
    def file_path(directory: str) -> str:
        return os.path.join(os.path.realpath(directory), CLUSTER_FILE)

    @classmethod
    def exists(cls, directory: str) -> bool:
        return os.path.exists(cls.file_path(directory))

    @classmethod
    def load(cls, directory: str) -> LocalCluster:
        """The cluster described by `directory/cluster.json`."""
        directory = os.path.realpath(directory)
        path = cls.file_path(directory)
        try:
            with open(path, encoding="utf-8") as f:
                document = json.load(f)
        except FileNotFoundError:
            raise ReplogError(
                f"no cluster in {directory} ({CLUSTER_FILE} not found); "
                "start one with `replog cluster start`"
            ) from None
        except (OSError, ValueError) as exc:
            raise ReplogError(f"{path}: unreadable: {exc}") from None
        try:
            if document["version"] != FORMAT_VERSION:
                raise ReplogError(f"{path}: unknown format version {document['version']!r}")
            nodes = tuple(_node_from_json(directory, entry) for entry in document["nodes"])
        except (KeyError, TypeError, ValueError) as exc:
            raise ReplogError(f"{path}: not a replog cluster file: {exc!r}") from None
        if not nodes:
            raise ReplogError(f"{path}: lists no nodes")
        cluster_id = document.get("cluster_id")
        security = document.get("security", SECURITY_PLAINTEXT)
        if security not in BROKER_LISTENERS:
            raise ReplogError(f"{path}: unknown security {security!r}")
        return cls(
            directory,
            nodes,
            None if cluster_id is None else str(cluster_id),
            rewrite_pending=document.get("rewrite_pending") is True,
            security=security,
        )

    # --- queries ------------------------------------------------------------------------------

    def node(self, node_id: int) -> LocalNode:
        for node in self.nodes:
            if node.node_id == node_id:
                return node
        known = ", ".join(str(n.node_id) for n in self.nodes)
        raise ReplogError(f"no node {node_id} in the cluster in {self.directory} (nodes: {known})")

    def bootstrap_servers(self) -> str | None:
        """`bootstrap.servers` for clients: every broker's Kafka listener (None: none serves
        one)."""
        kafka = [node.kafka_address for node in self.nodes if node.kafka_address is not None]
        return ",".join(kafka) if kafka else None

    @property
    def client_config_path(self) -> str | None:
        """The client.properties clients of this cluster need (None: a plaintext cluster's
        need none)."""
        if self.security == SECURITY_PLAINTEXT:
            return None
        return os.path.join(self.directory, CLIENT_PROPERTIES)

    @property
    def java_client_config_path(self) -> str | None:
        """The properties file Kafka's Java clients and tools take (None: plaintext)."""
        if self.security == SECURITY_PLAINTEXT:
            return None
        return os.path.join(self.directory, JAVA_CLIENT_PROPERTIES)

    def controller_addresses(self) -> dict[int, str]:
        """host:port of every controller, by node id."""
        return {n.node_id: n.controller_address for n in self.nodes if n.is_controller}

    def require_answering(self, addresses: Sequence[str], servers: str) -> None:
        """Raise a `ReplogError` naming the cluster unless one of `addresses` (this cluster's
        `servers`: "broker", "controller") accepts a TCP connection."""
        if not any(accepts_connections(address) for address in addresses):
            raise ReplogError(
                f"no {servers} of the local cluster in {self.directory} answers at "
                f"{', '.join(addresses)}: is it running? (`replog cluster start`)"
            )

    def voters(self) -> str:
        """The `controller.quorum.voters` value."""
        return ",".join(f"{i}@{a}" for i, a in self.controller_addresses().items())

    def node_properties(
        self, node: LocalNode, overrides: Mapping[str, str] | None = None
    ) -> dict[str, str]:
        """What `node`'s server.properties holds; `overrides` replace or add keys."""
        properties = {
            "process.roles": ",".join(node.roles),
            "node.id": str(node.node_id),
            "controller.listener.names": ",".join(
                name
                for name in (CONTROLLER_LISTENER, KAFKA_CONTROLLER_LISTENER)
                if name in node.listeners
            ),
            "log.dirs": node.data_path,
            **self.address_properties(node),
        }
        if self.security == SECURITY_SSL:
            # Every listener TLS: the Kafka ones, the controller's and the internal one.
            properties["listener.security.protocol.map"] = ",".join(
                f"{name}:{SSL_LISTENER}" for name in node.listeners
            )
        elif self.security == SECURITY_SASL_SSL:
            # The Kafka listeners, the brokers' and the controllers', SASL_SSL; the internal
            # one mutual TLS between the nodes.
            protocols = {
                CONTROLLER_LISTENER: SSL_LISTENER,
                SASL_SSL_LISTENER: SASL_SSL_LISTENER,
                KAFKA_CONTROLLER_LISTENER: SASL_SSL_LISTENER,
            }
            properties["listener.security.protocol.map"] = ",".join(
                f"{name}:{protocols.get(name, KAFKA_LISTENER)}" for name in node.listeners
            )
        elif node.kafka_address is not None or node.kafka_controller_address is not None:
            properties["listener.security.protocol.map"] = ",".join(
                f"{name}:{KAFKA_LISTENER}" for name in node.listeners
            )
        if self.security == SECURITY_SSL:
            properties.update(self._tls_properties(node))
        elif self.security == SECURITY_SASL_SSL:
            properties.update(self._sasl_ssl_properties(node))
        if self.cluster_id is not None:
            properties["cluster.id"] = self.cluster_id
        # Imported here: the client tools read cluster.json without the server's settings.
        from replog.server.config.group_coordinator_config import (
            OFFSETS_TOPIC_REPLICATION_FACTOR_DEFAULT,
        )

        brokers = sum(1 for n in self.nodes if "broker" in n.roles)
        if 0 < brokers < OFFSETS_TOPIC_REPLICATION_FACTOR_DEFAULT:
            properties["offsets.topic.replication.factor"] = str(brokers)
        properties.update(overrides or {})
        return properties

    @property
    def tls_files(self) -> ClusterTlsFiles:
        """Where an ssl cluster's certificates are (`cluster_tls_files`)."""
        return ClusterTlsFiles(self.directory)

    def _tls_properties(self, node: LocalNode) -> dict[str, str]:
        """A node's TLS settings in an ssl cluster: its keystore, the cluster's CA as the
        truststore, client certificates required (`local_certificates` makes the files), and
        the nodes' principals as `super.users`, which the internal links let in
        (`cluster_tls_files`)."""
        files = self.tls_files
        return {
            "ssl.keystore.location": files.node_keystore(node.node_id),
            "ssl.truststore.location": files.ca_certificate,
            "ssl.client.auth": "required",
            "super.users": ";".join(node_principal(n.node_id) for n in self.nodes),
        }

    @contextlib.contextmanager
    def internal_tls(self) -> Iterator[None]:
        """Within it, this process dials the cluster's internal gRPC listeners as its nodes
        do (an ssl or sasl_ssl cluster's are mutual TLS, open to the nodes' certificates
        only): `cluster start`, `status` and `restart` present the first node's certificate,
        whose files they hold. What was installed before is put back after (a test runs
        these commands in its own process)."""
        if self.security not in (SECURITY_SSL, SECURITY_SASL_SSL):
            yield
            return
        # Imported here: only an ssl cluster's commands load the TLS of the internal links.
        from replog.security.principal_mapping import PrincipalMapper
        from replog.wire import link_security

        files = self.tls_files
        settings = link_security.LinkSettings(
            keystore_location=files.node_keystore(self.nodes[0].node_id),
            truststore_location=files.ca_certificate,
            node_principals=frozenset(node_principal(n.node_id) for n in self.nodes),
            principal_mapper=PrincipalMapper.from_rules(),
        )
        try:
            security = link_security.LinkSecurity(settings)
        except ReplogError as exc:
            raise ReplogError(f"the cluster's certificates in {files.directory}: {exc}") from None
        with link_security.installed_while(security):
            yield

    def _sasl_ssl_properties(self, node: LocalNode) -> dict[str, str]:
        """A node's TLS, SASL and authorizer settings in a sasl_ssl cluster (`cluster_sasl`)."""
        from replog.cli.cluster_sasl import sasl_ssl_node_properties

        node_ids = [n.node_id for n in self.nodes]
        return sasl_ssl_node_properties(self.tls_files, node.node_id, node_ids)

    def client_properties(self) -> dict[str, str]:
        """What an ssl or sasl_ssl cluster's client.properties holds: librdkafka's keys, which
        confluent-kafka, `kcat -F` and replog's `--command-config` read as they are."""
        files = self.tls_files
        if self.security == SECURITY_SASL_SSL:
            from replog.cli.cluster_sasl import sasl_ssl_client_properties

            bootstrap = {"bootstrap.servers": self.bootstrap_servers() or ""}
            return bootstrap | sasl_ssl_client_properties(files, self.directory)
        return {
            "bootstrap.servers": self.bootstrap_servers() or "",
            "security.protocol": "SSL",
            "ssl.ca.location": files.ca_certificate,
            "ssl.certificate.location": files.client_certificate,
            "ssl.key.location": files.client_key,
        }

    def write_client_properties(self) -> None:
        """Write `client_properties` to `client_config_path` and `java_client_properties` to
        `java_client_config_path` (not for a plaintext cluster); done at every start, so a
        cluster moved to other ports names its new ones. A sasl_ssl cluster's hold the
        administrator's password: their owner's only."""
        path, java_path = self.client_config_path, self.java_client_config_path
        if path is None or java_path is None:
            return
        from replog.cli.cluster_sasl import write_private
        from replog.cli.java_client_properties import client_keystore_pem, java_client_properties

        properties = self.client_properties()
        text = render_properties(
            properties,
            header=(
                f"Clients of the replog cluster in {self.directory}, written by `replog "
                "cluster start`:\n`replog ... --command-config` with this file; "
                "confluent-kafka and `kcat -F` read it as it is."
            ),
        )
        java_text = render_properties(
            java_client_properties(properties, self.tls_files),
            header=(
                f"Kafka's Java clients and tools for the replog cluster in {self.directory}, "
                "written by `replog cluster start`:\nkafka-topics.sh, kafka-acls.sh, "
                "kafka-console-producer.sh, ... --command-config with this file."
            ),
        )
        if self.security == SECURITY_SASL_SSL:
            write_private(path, text)
            write_private(java_path, java_text)
        else:
            write_private(self.tls_files.client_keystore, client_keystore_pem(self.tls_files))
            _write_atomically(path, text)
            _write_atomically(java_path, java_text)

    def address_properties(self, node: LocalNode) -> dict[str, str]:
        """The keys of `node`'s server.properties that name this cluster's ports: the quorum's
        voters, its listeners (gRPC, a broker's and a controller's Kafka ones) and its metrics
        endpoint."""
        properties = {
            "controller.quorum.voters": self.voters(),
            "listeners": ",".join(f"{name}://{a}" for name, a in node.listeners.items()),
        }
        if node.kafka_address is not None or node.kafka_controller_address is not None:
            # Kafka's names: the gRPC listener stays first (replog's clients find brokers by
            # it), the Kafka ones are PLAINTEXT by protocol.
            properties["advertised.listeners"] = properties["listeners"]
        if node.metrics_address is not None:
            host, port = parse_host_port(node.metrics_address, f"node {node.node_id} metrics")
            properties["metrics.host"] = host  # bare, as metrics.host is written
            properties["metrics.port"] = str(port)
        return properties

    def on_ports(self, base_port: int | None, kafka_base_port: int | None) -> LocalCluster:
        """This cluster with its nodes on the ports a cluster planned with `base_port` and
        `kafka_base_port` has (None: where it is now), by the same rules; nodes, roles, cluster
        id and data stay. A node without a metrics endpoint or either Kafka listener (a broker's,
        a controller's at K + 100) gets none."""
        first = self.nodes[0]
        base = base_port or parse_host_port(first.controller_address, "base", error=ReplogError)[1]
        kafka = kafka_base_port
        if kafka is None and first.kafka_address is not None:
            kafka = parse_host_port(first.kafka_address, "kafka", error=ReplogError)[1]
        elif kafka is None and first.kafka_controller_address is not None:  # controllers only
            address = first.kafka_controller_address
            kafka = parse_host_port(address, "kafka", error=ReplogError)[1]
            kafka -= KAFKA_CONTROLLER_PORT_OFFSET
        planned = LocalCluster.plan(
            self.directory,
            len(self.nodes),
            base,
            first.roles,
            kafka_base_port=kafka,
            security=self.security,
        )
        nodes = tuple(
            LocalNode(
                node_id=node.node_id,
                roles=node.roles,
                listeners={
                    name: address
                    for name, address in planned.node(node.node_id).listeners.items()
                    if name in node.listeners
                },
                directory=node.directory,
                metrics_address=(
                    None
                    if node.metrics_address is None
                    else planned.node(node.node_id).metrics_address
                ),
            )
            for node in self.nodes
        )
        return LocalCluster(self.directory, nodes, self.cluster_id, security=self.security)

    # --- writing ------------------------------------------------------------------------------

    def rewrite_addresses(self) -> None:
        """Write this cluster's ports into its nodes' server.properties (`address_properties`;
        every other line stays as it is): cluster.json first, marked `rewrite_pending`, then
        each node's file, then cluster.json unmarked (module docstring). A file that cannot be
        read or written is a `ReplogError` naming it."""
        self._write_cluster_file(rewrite_pending=True)
        try:
            for node in self.nodes:
                self._rewrite_node_addresses(node)
        except ReplogError as exc:
            raise ReplogError(
                f"{exc}; the move to other ports is unfinished ({self.file_path(self.directory)} "
                "names them, not every node's server.properties yet): `replog cluster start` "
                "finishes it"
            ) from None
        self._write_cluster_file()

    def _rewrite_node_addresses(self, node: LocalNode) -> None:
        try:
            with open(node.config_path, encoding="utf-8") as f:
                text = f.read()
        except OSError as exc:
            raise ReplogError(f"cannot read {node.config_path}: {exc.strerror or exc}") from None
        wanted = self.address_properties(node)
        rewritten = []
        for line in text.splitlines():
            key = line.split("=", 1)[0].strip()
            if "=" in line and not line.lstrip().startswith(("#", "!")) and key in wanted:
                rewritten.append(f"{key}={wanted.pop(key)}")
            else:
                rewritten.append(line)
        rewritten += [f"{key}={value}" for key, value in wanted.items()]
        _write_atomically(node.config_path, "\n".join(rewritten) + "\n")

    def write(self, overrides: Mapping[str, str] | None = None) -> None:
        """Create the node directories and write every server.properties, then cluster.json."""
        for node in self.nodes:
            os.makedirs(node.data_path, exist_ok=True)
            text = render_properties(
                self.node_properties(node, overrides),
                header=f"replog node {node.node_id}, written by `replog cluster start`.",
            )
            with open(node.config_path, "w", encoding="utf-8") as f:
                f.write(text)
        self._write_cluster_file()

    def _write_cluster_file(self, rewrite_pending: bool = False) -> None:
        document: dict[str, Any] = {
            "version": FORMAT_VERSION,
            "voters": self.voters(),
            "cluster_id": self.cluster_id,
            "nodes": [self._node_to_json(node) for node in self.nodes],
        }
        if self.security != SECURITY_PLAINTEXT:
            document["security"] = self.security
        if rewrite_pending:
            document["rewrite_pending"] = True
        _write_atomically(self.file_path(self.directory), json.dumps(document, indent=2) + "\n")

    def _node_to_json(self, node: LocalNode) -> dict[str, Any]:
        document: dict[str, Any] = {
            "node_id": node.node_id,
            "roles": list(node.roles),
            "listeners": dict(node.listeners),
            "dir": os.path.relpath(node.directory, self.directory),
        }
        if node.metrics_url is not None:
            document["metrics"] = node.metrics_url
        return document


def kafka_base_port_for(base_port: int | None, kafka_base_port: int | None) -> int:
    """The Kafka base port of a new cluster: `kafka_base_port` if given; else, with a base port
    P given, P + 200, above the gRPC (P..) and metrics (P + 100..) ports, its controllers' Kafka
    listeners at P + 300.., none of them overlapping another for up to 100 nodes, so clusters
    given different base ports never share a Kafka port; else 9092, Kafka's own."""
    if kafka_base_port is not None:
        return kafka_base_port
    if base_port is not None:
        return base_port + DERIVED_KAFKA_PORT_OFFSET
    return DEFAULT_KAFKA_BASE_PORT


def _check_kafka_ports(kafka_base_port: int, node_count: int, base_port: int) -> None:
    """Refuse Kafka ports (brokers' and controllers') out of range or among the gRPC and
    metrics ports."""
    kafka = [
        *range(kafka_base_port, kafka_base_port + node_count),
        *range(
            kafka_base_port + KAFKA_CONTROLLER_PORT_OFFSET,
            kafka_base_port + KAFKA_CONTROLLER_PORT_OFFSET + node_count,
        ),
    ]
    if not 1 <= kafka_base_port <= 65536 - node_count - KAFKA_CONTROLLER_PORT_OFFSET:
        raise ReplogError(
            f"--kafka-base-port {kafka_base_port}: ports {kafka[0]}..{kafka[-1]} (brokers, then "
            f"controllers from {kafka_base_port + KAFKA_CONTROLLER_PORT_OFFSET}) are not all in "
            "[1, 65535]"
        )
    others = [
        *range(base_port, base_port + node_count),
        *range(base_port + METRICS_PORT_OFFSET, base_port + METRICS_PORT_OFFSET + node_count),
    ]
    clash = sorted(set(kafka) & set(others))
    if clash:
        raise ReplogError(
            f"--kafka-base-port {kafka_base_port}: port {clash[0]} is also a node's gRPC or "
            f"metrics port (from --base-port {base_port}); choose ports that do not overlap"
        )


def _write_atomically(path: str, text: str) -> None:
    """Replace `path` by `text` whole; an `OSError` is a `ReplogError` naming `path`, and
    leaves `path` as it was."""
    try:
        with open(path + ".tmp", "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(path + ".tmp", path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.remove(path + ".tmp")
        raise ReplogError(f"cannot write {path}: {exc.strerror or exc}") from None


def accepts_connections(address: str) -> bool:
    """Whether something accepts a TCP connection at `address` (host:port)."""
    host, port = parse_host_port(address, "a node address")
    try:
        with socket.create_connection((host, port), timeout=PROBE_TIMEOUT_S):
            return True
    except OSError:
        return False


def new_cluster_id() -> str:
    """A fresh cluster id in Kafka's form (`kafka-storage.sh random-uuid`)."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode("ascii").rstrip("=")


def _node_from_json(directory: str, entry: dict[str, Any]) -> LocalNode:
    node = LocalNode(
        node_id=int(entry["node_id"]),
        roles=tuple(str(r) for r in entry["roles"]),
        listeners={str(name): str(address) for name, address in entry["listeners"].items()},
        directory=os.path.join(directory, str(entry["dir"])),
        metrics_address=_metrics_address(entry.get("metrics")),
    )
    if node.is_controller and CONTROLLER_LISTENER not in node.listeners:
        raise ValueError(f"controller {node.node_id} has no {CONTROLLER_LISTENER} listener")
    return node


def _metrics_address(url: object) -> str | None:
    """`http://host:port/metrics` -> `host:port` (None stays None)."""
    if url is None:
        return None
    text = str(url)
    prefix, suffix = "http://", "/metrics"
    if not text.startswith(prefix) or not text.endswith(suffix):
        raise ValueError(f"metrics {text!r}: expected http://host:port/metrics")
    address = text[len(prefix) : -len(suffix)]
    try:  # an IPv6 host is in brackets: http://[::1]:19192/metrics
        parse_host_port(address, "address", error=ValueError)
    except ValueError as exc:
        raise ValueError(f"metrics {text!r}: expected http://host:port/metrics ({exc})") from None
    return address
