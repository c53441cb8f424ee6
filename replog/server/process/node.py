"""One replog node process: the composition root that wires storage, cores and gRPC together.

Lifecycle: open the metadata log (recovering it), bind the node's listener, start the Raft
driver and the gRPC server on it, run until SIGTERM/SIGINT, then shut down gracefully: resign
leadership (EndQuorumEpoch lets the others elect at once), stop serving, flush and close the
log.
A disk failure (of the metadata log or of a partition log), a metadata record the controller
cannot decode or replay, or a broker role that gave up (no registration within
`initial.broker.registration.timeout.ms`) stops the process with a non-zero exit code.
Every task of the node runs in its one `asyncio.TaskGroup` (`node_tasks`): the Raft driver,
the loop stall monitor, the Kafka listeners' start and the tasks of the parts it builds (they
are handed the group). Any of them failing stops the node the same way, its cause logged once
with the traceback.

A node with the `controller` role runs the quorum controller on the Raft driver's loop
(`ControllerDriver`) and serves the `Controller` service next to Raft's; the metadata log is
then written only by the controller (`MetadataLog.Append` refuses), unless
`metadata.log.raw.append.enable` asks for a bare Raft log (`node_config`). A controller also
listens for metadata append connections (`controller.quorum.append.port`,
`metadata_append_server`): `MetadataLog.Append` from other processes over framed TCP, by the
same rules (`MetadataLogAppends`), where the Raft Fetch listener listens. A node with the
`broker` role serves the `ReplicaFetch` service (followers' fetches; the data plane is
`BrokerRuntime`) on the same listener;
partition logs live in `log.dirs`, next to the metadata log's directory. A broker also serves
Kafka's own protocol on each later PLAINTEXT `listeners` entry (`kafka_listener`), bound with
the gRPC listener and accepting once the broker serves clients (metadata caught up, logs
recovered) and the controller unfenced it; none is configured by default. A controller serves
Kafka's protocol on the `listeners` entry `controller.listener.names` names after the first
(`kafka_controller_apis`: what `--bootstrap-controller` tools send), from the moment its gRPC
server runs. Every Kafka
listener answers DescribeQuorum (`kafka_quorum_apis`).

TLS inside the cluster (`internal_tls_config`): with the internal listener mapped to SSL the
node installs its link security for the process (`wire.link_security`) before anything dials:
the gRPC server serves with rotating credentials and lets in the nodes only
(`link_peer_check`), the framed listeners likewise, and every channel and connection it dials
presents its certificate. SSL Kafka listeners, the controller's among them, serve contexts that
follow their files (`RotatingServerContext`). SASL ones check SCRAM users against the broker's
image, the controller's listener against the controller's committed credentials.

Metadata snapshots: every node snapshots its own committed metadata and keeps its metadata log
within `metadata.max.retention.bytes` (`metadata_snapshots`). A controller snapshots its state
(`ControllerDriver`); a node without one (process.roles=broker) snapshots the image its broker
published (`BrokerMetadataSnapshots`), so its log does not grow without bound and a restart
loads the latest snapshot instead of replaying the log from offset 0. A graceful shutdown
writes one after the broker's controlled shutdown, before the Raft driver stops (waiting at
most `STOP_SNAPSHOT_TIMEOUT_S`).

Ephemeral ports (Kafka's BrokerServer order): the listener is bound when the node is built,
before the broker role, and a `listeners` port of 0 gets a free port from the OS
(`Node.listener_port` says which). The broker registers that port wherever an advertised
endpoint says 0, so clients are never sent to port 0; any other port is registered as
configured. A controller cannot listen on port 0: its voters dial the port
`controller.quorum.voters` names (`node_config`).

Metrics (issue #9, `replog.server.metrics`): every node keeps its own Prometheus registry
(requests and their latency through a server interceptor, the data plane's counters, the Raft
commit latency, and gauges read from live state at scrape time). With `metrics.port` set it
serves them on `http://<metrics.host>:<metrics.port>/metrics` from start to shutdown; a port in
use stops the start with an error naming it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import ssl

import grpc

from replog.errors import BrokerLifecycleError, KafkaStorageError
from replog.net_address import format_host_port
from replog.quorum.metadata.records import Endpoint
from replog.server.broker.broker_runtime import BrokerRuntime
from replog.server.config.data_plane_config import data_plane_config_from_node
from replog.server.config.node_config import WILDCARD_BIND_HOST, NodeConfig
from replog.server.controller.controller_driver import ControllerDriver
from replog.server.controller.controller_service import (
    REQUEST_TIMEOUT_MS_DEFAULT,
    ControllerService,
    add_controller_service,
)
from replog.server.data_plane.broker_service import add_broker_service
from replog.server.data_plane.replica_fetch_service import add_replica_fetch_service
from replog.server.kafka.broker_authorizer import BrokerAuthorizer, committed_acls
from replog.server.kafka.broker_metadata import committed_credentials, image_credentials
from replog.server.kafka.kafka_controller_apis import KafkaControllerApis
from replog.server.kafka.kafka_listener import KafkaListener, KafkaListenerConfig
from replog.server.kafka.kafka_quorum_apis import KafkaQuorumApis, describe_from_leader
from replog.server.kafka.tls_context import RotatingServerContext
from replog.server.metrics.http_endpoint import MetricsEndpoint
from replog.server.metrics.instruments import NodeMetrics
from replog.server.metrics.request_interceptor import RequestMetricsInterceptor
from replog.server.process.node_state import NodeState, read_node_state, register_node_state
from replog.server.raft.controller_endpoints import ControllerEndpoints
from replog.server.raft.metadata_append_server import MetadataAppendListener
from replog.server.raft.metadata_snapshots import BrokerMetadataSnapshots, snapshot_before_stop
from replog.server.raft.raft_driver import RaftDriver
from replog.server.raft.raft_service import (
    MetadataLogService,
    RaftQuorumService,
    add_raft_services,
)
from replog.server.raft.raft_storage import RaftStorage
from replog.server.raft.raft_transport import RaftTransport
from replog.server.runtime import collector
from replog.server.runtime.loop_stall_monitor import LoopStallMonitor, warn_stall_s
from replog.server.runtime.node_tasks import NodeTasks
from replog.wire import link_security
from replog.wire.link_peer_check import PeerCheck, PeerCheckInterceptor
from replog.wire.link_security import LinkSecurity

log = logging.getLogger("replog.server")

GRPC_MESSAGE_BYTES_MAX = 64 * 1024 * 1024
GRPC_OPTIONS = [
    ("grpc.max_send_message_length", GRPC_MESSAGE_BYTES_MAX),
    ("grpc.max_receive_message_length", GRPC_MESSAGE_BYTES_MAX),
    ("grpc.so_reuseport", 0),
]
# Room above socket.request.max.bytes, so the ReplicaFetch service (not gRPC) refuses a request
# that is too large, naming its size and the limit.
_REQUEST_HEADROOM_BYTES = 1024 * 1024
# How long a graceful shutdown waits for its metadata snapshot (encoding a 10,000-partition
# state takes a fraction of a second): past it the stop goes on, and the next start replays
# the log since the previous snapshot.
STOP_SNAPSHOT_TIMEOUT_S = 5.0


class Node:
    """One node: `Node(config)` binds the listener and wires the roles, `serve()` runs them
    until a stop signal. `listener_port` is the port bound (the OS's choice for port 0)."""

    def __init__(self, config: NodeConfig) -> None:
        self.config = config
        self.tasks = NodeTasks(config.node_id)
        self.storage = RaftStorage(config.metadata_log_dir, sorted(config.raft.voter_ids))
        try:
            self._wire(config)
        except BaseException:
            # Nothing runs yet. An application embedding the node (or a test) may try again
            # in the same process: leave the metadata log closed and the Kafka ports free. (A
            # failure after the gRPC port is bound leaves that port bound: `_wire`.)
            for listener in (*getattr(self, "kafka_listeners", ()), *self._controller_listeners()):
                listener.close_unstarted()
            if getattr(self, "link_security", None) is not None:
                self._uninstall_link_security()
            self.storage.close()
            raise

    def _wire(self, config: NodeConfig) -> None:
        """Bind the listener and build the roles on the open metadata log."""
        self.driver = RaftDriver(config.node_id, config.raft, self.storage, tasks=self.tasks)
        options = list(GRPC_OPTIONS)
        if config.runs_broker:
            receive_max = max(
                GRPC_MESSAGE_BYTES_MAX,
                data_plane_config_from_node(config).request_bytes_max + _REQUEST_HEADROOM_BYTES,
            )
            options = [
                (key, receive_max if key == "grpc.max_receive_message_length" else value)
                for key, value in options
            ]
        self.metrics = NodeMetrics()
        self.driver.on_commit_latency = self.metrics.raft_commit_latency.observe
        self.stall_monitor = LoopStallMonitor(
            self.metrics.event_loop_stall.observe, warn_s=warn_stall_s(os.environ)
        )
        # Kafka listeners (`listeners` entries after the first; the SSL and SASL_SSL ones with
        # the TLS context of the `ssl.*` settings, the SASL ones with their SASL settings): bound
        # now, so the broker registers their ports; they accept once its metadata caught up.
        # Bound before the gRPC port: a failed construction releases their ports, but gRPC
        # gives back a bound port only when a started server stops (`_close_unstarted`), so a
        # Kafka port in use must fail the node before that one is taken.
        self.kafka_listeners: list[KafkaListener] = []
        # Each SSL listener's context follows its files (`RotatingServerContext`).
        self.tls_contexts: dict[str, RotatingServerContext] = {
            name: RotatingServerContext(tls, name) for name, tls in config.listener_tls.items()
        }
        if config.runs_broker:
            kafka_config = KafkaListenerConfig.from_properties(config.properties)
            for endpoint in config.kafka_listeners:
                listener = KafkaListener(
                    endpoint.name,
                    endpoint.host or WILDCARD_BIND_HOST,
                    endpoint.port,
                    kafka_config,
                    on_request=self.metrics.kafka_request,
                    ssl_context=self._ssl_context(endpoint.name),
                    sasl=config.sasl.get(endpoint.name),
                    principal_mapper=config.authorizer.principal_mapper,
                    on_failed_authentication=self.metrics.failed_authentication,
                )
                self.kafka_listeners.append(listener)
                listener.bind()
        # A controller's Kafka listener (`--bootstrap-controller`), bound now for the same
        # reason; it accepts once the gRPC server runs.
        self.controller_listener: KafkaListener | None = None
        controller_endpoint = config.kafka_controller_listener
        if controller_endpoint is not None and config.controller is not None:
            self.controller_listener = KafkaListener(
                controller_endpoint.name,
                controller_endpoint.host or WILDCARD_BIND_HOST,
                controller_endpoint.port,
                KafkaListenerConfig.from_properties(config.properties),
                on_request=self.metrics.kafka_request,
                ssl_context=self._ssl_context(controller_endpoint.name),
                sasl=config.sasl.get(controller_endpoint.name),
                principal_mapper=config.authorizer.principal_mapper,
                on_failed_authentication=self.metrics.failed_authentication,
            )
            self.controller_listener.bind()
        # The internal links' mutual TLS (`wire.link_security`): this process's channels dial
        # with it, its listeners serve with it and let in the nodes only (`link_peer_check`).
        self.link_security: LinkSecurity | None = None
        interceptors: list[grpc.aio.ServerInterceptor] = []
        links = config.internal_links
        if links is not None:
            self.link_security = LinkSecurity(links)
            # A failed handshake counts as Kafka's failed-authentication-total does.
            self.peer_check = PeerCheck(
                links,
                on_failed_handshake=lambda: self.metrics.failed_authentication(
                    links.listener_name, "SSL"
                ),
            )
            interceptors.append(PeerCheckInterceptor(self.peer_check))
            link_security.install(self.link_security)
        interceptors.append(RequestMetricsInterceptor(self.metrics))
        self.server = grpc.aio.server(options=options, interceptors=interceptors)
        self._grpc_started = False
        # Bound first, as Kafka's broker binds before it builds its listener info: the broker
        # role registers this port in place of an ephemeral port 0.
        try:
            if self.link_security is None:
                self.listener_port = self.server.add_insecure_port(config.listener)
            else:
                self.listener_port = self.server.add_secure_port(
                    config.listener, self.link_security.server_credentials()
                )
        except RuntimeError as exc:  # gRPC's only word for a failed bind (a port in use)
            raise OSError(f"listeners: cannot listen on {config.listener}: {exc}") from None
        transport = self.driver.transport
        assert isinstance(transport, RaftTransport)  # a node's link is gRPC and framed TCP
        self.raft_transport = transport
        raft_quorum = RaftQuorumService(
            transport,
            voters=config.raft.voters,
            kafka_controller_listener=self._bound_controller_endpoint(),
        )
        # DescribeQuorum on every Kafka listener, and the controllers' Kafka listeners.
        self.controller_endpoints = ControllerEndpoints(config.raft.voters)
        quorum_apis = KafkaQuorumApis(
            describe_from_leader(config.raft.voters, lambda: self.driver.node.leader_id),
            controller_listeners=self.controller_endpoints.lookup,
            grpc_listener_name=config.advertised_listeners[0].name,
        )
        self.controller: ControllerDriver | None = None
        if config.controller is not None:
            self.controller = ControllerDriver(
                self.driver,
                config.controller,
                read_snapshot=self.storage.read_whole_snapshot,
                snapshot_bytes_max=config.snapshot_bytes_max,
                snapshot_interval_ms=config.snapshot_interval_ms,
                retention_bytes=config.retention_bytes,
                retention_ms=config.retention_ms,
            )
            add_controller_service(
                ControllerService(self.controller, voters=config.raft.voters),
                self.server,
                node_id=config.node_id,
            )
            self.controller_apis = KafkaControllerApis(
                cluster_id=config.cluster_id,
                controller=self.controller,
                controller_listeners=self.controller_endpoints.lookup,
                quorum=quorum_apis,
                request_timeout_ms=REQUEST_TIMEOUT_MS_DEFAULT,
                authorizer=(
                    BrokerAuthorizer(config.authorizer, committed_acls(self.controller.controller))
                    if config.authorizer.enabled
                    else None
                ),
            )
        metadata_log = MetadataLogService(
            self.driver,
            raw_appends=self.controller is None,
            append_port=lambda: self.append_listener.port,
        )
        # Appends from other processes without gRPC's per-call cost; the same rules.
        self.append_listener = MetadataAppendListener(metadata_log.appends.append)
        if config.internal_links is not None:
            self.append_listener.peer_check = self.peer_check
            self.raft_transport.fetch_listener.peer_check = self.peer_check
        add_raft_services(raft_quorum, metadata_log, self.server, node_id=config.node_id)
        # The broker role replays the committed metadata log (the same Raft driver) into
        # images, registers with the active controller and serves the data plane (issue #6).
        self.broker: BrokerRuntime | None = None
        if config.runs_broker:
            self.broker = BrokerRuntime.for_node(
                config,
                self.driver,
                tasks=self.tasks,
                bound_port=self.listener_port,
                kafka_ports={listener.name: listener.port for listener in self.kafka_listeners},
                quorum_apis=quorum_apis,
                metadata_staleness=(
                    None if self.controller is None else self.controller.metadata_staleness
                ),
            )
            self.broker.counters = self.metrics.broker
            add_replica_fetch_service(self.broker.replica_fetch_service, self.server)
            add_broker_service(self.broker.broker_service, self.server)
        # Without a controller the broker snapshots the metadata (a controller does it itself).
        # Built after the broker: its Raft listener must follow the broker's.
        self.broker_snapshots: BrokerMetadataSnapshots | None = None
        if self.broker is not None and self.controller is None:
            self.broker_snapshots = BrokerMetadataSnapshots.for_node(
                config, self.driver, self.broker.metadata
            )
        # Last: the metadata every listener before it built from a committed item is counted
        # for the process's growth freezer, when `replog node` installed one (collector.py).
        self.driver.add_listener(collector.committed_item_applied)
        # Without a broker nothing else shares the loop: small metadata-log appends may fsync
        # on it (a follower acknowledges sooner; see RaftDriver.fsync_on_loop).
        self.driver.fsync_on_loop = self.broker is None
        register_node_state(self.metrics.registry, self._read_state)
        self.metrics_endpoint: MetricsEndpoint | None = None
        if config.metrics_port:
            self.metrics_endpoint = MetricsEndpoint(
                self.metrics.registry, config.metrics_host, config.metrics_port
            )

    def _ssl_context(self, listener: str) -> ssl.SSLContext | None:
        """The SSL context an SSL or SASL_SSL Kafka listener serves with (None: plaintext)."""
        rotating = self.tls_contexts.get(listener)
        return None if rotating is None else rotating.listening

    def _controller_listeners(self) -> tuple[KafkaListener, ...]:
        listener = getattr(self, "controller_listener", None)
        return () if listener is None else (listener,)

    def _bound_controller_endpoint(self) -> Endpoint | None:
        """The controller's Kafka listener as advertised, port 0 there replaced by the port
        it bound (Kafka's `withEphemeralPortsCorrected`)."""
        endpoint = self.config.advertised_kafka_controller_listener
        if endpoint is None or self.controller_listener is None:
            return None
        return Endpoint(
            endpoint.name, endpoint.host, endpoint.port or self.controller_listener.port
        )

    def _read_state(self, replicas: bool) -> NodeState:
        return read_node_state(
            self.config.node_id, self.driver, self.controller, self.broker, replicas
        )

    async def serve(self) -> int:
        """Run until a stop signal; return the process exit code.

        A failure to start (a port in use) closes what the node opened, so an application
        embedding it may build a new Node in the same process; either way the signal handlers
        installed here are removed on return."""
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        signals = (signal.SIGTERM, signal.SIGINT)
        for sig in signals:
            loop.add_signal_handler(sig, stop.set)
        try:
            try:
                await self._start_listening()
            except BaseException:
                await self._close_unstarted()
                raise
            return await self._run_until_stopped(stop)
        finally:
            for sig in signals:
                loop.remove_signal_handler(sig)

    async def _start_listening(self) -> None:
        if self.metrics_endpoint is not None:
            self.metrics_endpoint.start()  # first: a port in use fails before anything runs
        if self.config.is_controller:
            # Before the gRPC server and the core: a port in use fails before anything runs,
            # and a peer that hears of this node may ask for the port at once.
            host, port = self.config.listener_host, self.config.raft.fetch_port
            try:
                await self.raft_transport.fetch_listener.start(host, port)
            except OSError as exc:
                raise OSError(
                    "controller.quorum.fetch.port: cannot listen on "
                    f"{format_host_port(host, port)}: {exc}"
                ) from exc
            port = self.config.raft.append_port
            try:
                await self.append_listener.start(host, port)
            except OSError as exc:
                raise OSError(
                    "controller.quorum.append.port: cannot listen on "
                    f"{format_host_port(host, port)}: {exc}"
                ) from exc
        await self.server.start()
        self._grpc_started = True
        if self.controller_listener is not None:
            assert self.controller is not None  # a controller listener needs the role
            await self.controller_listener.start(
                self.controller_apis, committed_credentials(self.controller.controller)
            )
        roles = ",".join(sorted(self.config.roles))
        log.info(
            "replog node %d (%s) serving on %s",
            self.config.node_id,
            roles,
            format_host_port(self.config.listener_host, self.listener_port),
        )

    async def _serve_kafka(self, broker: BrokerRuntime) -> None:
        """The Kafka listeners accept once the broker serves clients (caught up with the
        metadata log, logs recovered) and the controller unfenced it, as Kafka's broker enables
        request processing only then (`BrokerServer.startup`): before, its image lists no
        unfenced broker, itself included, so a Metadata answer would name no broker and no
        controller, and librdkafka's admin client waits out its whole timeout on one."""
        await broker.wait_serving_clients()
        try:
            await broker.wait_until_running()
        except BrokerLifecycleError:
            return  # it shut down first: the broker role says why (`_until_broker_failed`)
        credentials = image_credentials(lambda: broker.image)
        for listener in self.kafka_listeners:
            await listener.start(broker.kafka_apis, credentials)

    async def _close_unstarted(self) -> None:
        """After a failed start (nothing runs yet): release the ports and the metadata log.

        Everything a start opened is closed, whichever step failed: the gRPC server, the
        metrics endpoint and the metadata log."""
        if self.metrics_endpoint is not None:
            self.metrics_endpoint.stop()
        for listener in (*self.kafka_listeners, *self._controller_listeners()):
            listener.close_unstarted()
        await self.append_listener.close()
        await self.raft_transport.close()
        if not self._grpc_started:
            # gRPC gives a bound port back only when a started server stops (an unstarted
            # one holds it until the process exits, garbage collection or not). With the
            # transport closed and the stop at once, nothing that reaches it is served.
            with contextlib.suppress(Exception):  # best effort: the start failure is raised
                await self.server.start()
        await self.server.stop(None)
        self._uninstall_link_security()
        self.storage.close()

    def _uninstall_link_security(self) -> None:
        """This node's internal TLS leaves the process with it (an embedding application may
        build another node)."""
        if self.link_security is not None and link_security.installed() is self.link_security:
            link_security.install(None)

    async def _run_until_stopped(self, stop: asyncio.Event) -> int:
        """Run the node's tasks, all in its group (`node_tasks`), until a stop signal, a
        task's failure, the broker role giving up or the Raft driver's end; then stop the roles
        in order."""
        tasks = self.tasks
        async with tasks.group():
            tasks.watch("the event loop stall monitor", self.stall_monitor.run())
            run = tasks.watch("the Raft driver", self.driver.run(), ends=True)
            tasks.spawn(self._until_signalled(stop), name="the stop signal")
            if self.broker is not None:
                tasks.spawn(self._until_broker_failed(self.broker), name="the broker role")
                await self.broker.start()
                if self.kafka_listeners:
                    tasks.watch("the Kafka listeners", self._serve_kafka(self.broker))
            await tasks.wait()
            return await self._stop_roles(run)
        raise AssertionError("unreachable: the group's body returns or raises")

    async def _until_signalled(self, stop: asyncio.Event) -> None:
        await stop.wait()
        self.tasks.end()

    async def _until_broker_failed(self, broker: BrokerRuntime) -> None:
        """Until the broker role cannot go on (`BrokerRuntime.wait_failed`), which is said."""
        self.tasks.end_broker(await broker.wait_failed())

    async def _stop_roles(self, run: asyncio.Task[None]) -> int:
        """Stop what runs, in the order what ended the run asks for; the exit code."""
        # Kafka clients first: nothing new reaches a broker that is stopping.
        for listener in (*self.kafka_listeners, *self._controller_listeners()):
            await listener.stop()
        if run.done():
            if self.broker is not None:
                await self.broker.stop(graceful=False)
        elif self.tasks.failed:
            # A task failed, a partition log's disk failed, or the broker never registered:
            # stop at once (no handover; the controller fences this broker and elects other
            # leaders), let the quorum elect without us, exit 1 so that a supervisor sees it.
            # The Raft driver first: while the broker stops (its log loading ends, its logs
            # close) this node must not stand for election nor stay the active controller.
            await self.driver.stop(graceful=True)
            if self.broker is not None:
                await self.broker.stop(graceful=False)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(5):
                    await run
        else:
            log.info("node %d: shutting down", self.config.node_id)
            if self.broker is not None:
                # Controlled shutdown first: the controller moves this broker's leaderships
                # away while the Raft quorum still has this node.
                await self.broker.stop(graceful=True)
            # Then the committed metadata as a snapshot, so the next start loads it rather
            # than replaying the log (`metadata_snapshots`). Leadership goes first: writing the
            # snapshot takes up to STOP_SNAPSHOT_TIMEOUT_S, and a stopping controller must hand
            # writes to its successor at once, not answer them meanwhile.
            taker = self.controller or self.broker_snapshots
            if taker is not None:
                self.driver.resign()
                await snapshot_before_stop(self.driver, taker, STOP_SNAPSHOT_TIMEOUT_S)
            await self.driver.stop(graceful=True)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(5):
                    await run
        code = 1 if self.tasks.failed else 0
        if self.broker is not None:
            self.broker.replica_fetch_service.stop()  # a broker whose data plane never ran
        # Appends waiting on the framed listener end with their connections (as gRPC calls
        # cancelled): the core stopped, none of them commits now.
        await self.append_listener.close()
        # The transport closes first, so that requests still waiting for the stopped core end
        # with UNAVAILABLE within the grace period instead of being cancelled.
        await self.raft_transport.close()
        await self.server.stop(grace=0.5)
        if self.metrics_endpoint is not None:
            self.metrics_endpoint.stop()
        self._uninstall_link_security()
        try:
            self.storage.close()
        except KafkaStorageError as error:
            # A full or failed disk: the metadata log's last index writes failed (its records
            # are safe: the next start rebuilds indexes it cannot trust). Said, not raised as
            # a bare OSError without a file name (tests/storage/test_log_disk_full.py).
            log.critical("node %d: closing the metadata log failed: %s", self.config.node_id, error)
            code = 1
        log.info("node %d: stopped", self.config.node_id)
        return code
