"""BrokerRuntime: the broker role of one node process: metadata replay, lifecycle, data plane.

It wires the broker side of the metadata plane and the data plane together:

    RaftDriver --ApplyItem--> BrokerMetadataListener --Publication--> publishers
                                  |  (MetadataLoader)                  - lifecycle feed
                                  '--LeaderChange--> controller hint   - ReplicaManager
    BrokerLifecycleDriver <--offsets, readiness-- lifecycle feed
    BrokerLifecycleDriver --BrokerRegistration/BrokerHeartbeat--> controllers (gRPC)
    BrokerCores (data requests) --> ReplicaManager <--> LogManager (log.dirs)
    ReplicaFetcherManager --Fetch--> partition leaders;  AlterPartitionSender --> controller
    KafkaApis.init_producer_id --> ProducerIdManager --AllocateProducerIds--> controller
    KafkaGroupApis (Kafka listeners) --> GroupCoordinator --> ReplicaManager
                                                   '--CreateTopics __consumer_offsets--> controller
    KafkaTxnApis (Kafka listeners) --> TransactionCoordinator --> ReplicaManager
                                          |--CreateTopics __transaction_state--> controller
                                          '--TxnMarkerSender--WriteTxnMarkers--> leaders

Rules:
- The metadata offset in heartbeats is the loader's last published offset: the controller
  unfences the broker only once the broker has published an image containing its own
  registration record.
- The logs are opened from the start on, while the broker catches up with the metadata log:
  the `LogManager` over `log.dirs` (log recovery) and the producer tables, on a worker thread,
  so the event loop keeps replaying metadata. Kafka's broker waits for the catch-up first, to
  recover with the topics' current configs; replog's log settings are the node's own
  (`LogManagerConfig.from_properties`), so nothing in the metadata log changes how a log is
  opened, and a restart of 10,000 logs waits for the longer of the two, not their sum. A
  failure to open them is a storage error (or a failed start) at once.
- Ready to unfence (Kafka's BrokerServer order): once the lifecycle has caught up (RECOVERY),
  the first image is published, and the logs are open, the
  `ReplicaManager` is started and installed as a publisher (it gets the current image first,
  its local changes found in steps between other tasks (`install_in_steps`), and applies it
  in rounds, its log work in a worker thread; the data plane waits until every
  replica of that image exists: docs/storage.md, "Creating many replicas"), the
  fetchers, the AlterPartition sender, the log manager's task thread and the producer-id
  manager (which asks the controller for its first block at once) start, and the Broker
  service starts serving data requests (it answers UNAVAILABLE before; Metadata always;
  InitProducerId COORDINATOR_LOAD_IN_PROGRESS until the first block arrived); last the group
  coordinator and the transaction coordinator follow the images the replica manager has
  applied (the `__consumer_offsets` and `__transaction_state` leaderships it took) and the
  Kafka listeners' group and transaction handlers serve from them (COORDINATOR_NOT_AVAILABLE
  before, and again once the data plane stops). The transaction coordinator writes its
  markers through each leader's Broker gRPC service (`GrpcMarkerChannel`), at the address the
  replica fetchers use.
- `stop(graceful=True)`: controlled shutdown first (the controller moves leaderships away while
  this broker still replicates), bounded by `controlled_shutdown_timeout_ms`; then the data
  plane stops (service detached, fetchers, sender, replica manager) and the log manager shuts
  down cleanly, writing the clean-shutdown marker with the broker epoch; then the lifecycle.
  `stop(graceful=False)`: the same without the handover; the controller fences the broker after
  `broker.session.timeout.ms`.
- A `KafkaStorageError` anywhere in the data plane (recovery, an append, a fetch, a metadata
  change the replica manager applies) sets `storage_failure`; the node then stops with a
  non-zero exit code (a disk it cannot trust). So does a lifecycle that ends on its own (no
  registration within `initial.broker.registration.timeout.ms`, as Kafka's broker exits), and
  so does any other error that stops the data plane from starting (logged with its traceback;
  a bad setting is refused before the node starts, `node_config`): `wait_failed` returns when
  any of these happens, saying which. A broker never waits in recovery for a start-up that
  has already failed.
- What the data plane runs on (its disk, wall clock, worker threads, child processes and
  fetch streams to leaders) comes from its `DataPlaneHost`, a node process's unless given.
- Configuration comes from the node's config (`cluster.id`, `broker.heartbeat.interval.ms`
  2000, `log.dirs`) and Kafka-named properties: `broker.session.timeout.ms` (9000),
  `initial.broker.registration.timeout.ms` (60000), `broker.rack` (none),
  the endpoints it registers (`NodeConfig.advertised_listeners`: `advertised.listeners`, else
  `listeners`; an empty host is registered as this machine's canonical host name, resolved
  here at start-up as Kafka's broker does; port 0 as the port the node's listener bound, which
  is why the node binds before it builds this runtime), `replica.socket.timeout.ms` (30000),
  `socket.request.max.bytes` (104857600), `max.incremental.fetch.session.cache.slots` (1000)
  and `min.incremental.fetch.session.eviction.ms` (120000) for the Kafka listeners' fetch
  sessions, the `LogManagerConfig`, `ReplicaManagerConfig`, `GroupCoordinatorConfig` and
  `TransactionCoordinatorConfig` keys, `transaction.partition.verification.enable` (true;
  dynamic: this broker's level, else the cluster default, else the property, read at each
  transactional append that would verify); the controllers are `controller.quorum.voters`,
  the request timeout `controller.quorum.request.timeout.ms`.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import random
import threading
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import replace

from replog.clock import Clock, monotonic_ms
from replog.config import positive_setting
from replog.errors import (
    BrokerLifecycleError,
    BrokerNotAvailableError,
    ConfigError,
    KafkaStorageError,
)
from replog.net_address import format_host_port, local_canonical_host_name
from replog.quorum.metadata.broker_lifecycle import BrokerLifecycleConfig, LifecycleState
from replog.quorum.metadata.delta import MetadataDelta
from replog.quorum.metadata.fence_notices import own_fence_notice
from replog.quorum.metadata.image import ConfigResource, MetadataImage
from replog.quorum.metadata.loader import LoaderManifest, MetadataPublisher, Publication
from replog.quorum.metadata.records import ConfigResourceType, Endpoint
from replog.quorum.metadata.steps import Steps, run_to_end
from replog.quorum.raft.ready import ApplyItem
from replog.quorum.raft.snapshot_id import SnapshotId
from replog.replication.producer_state import ProducerEntry
from replog.replication.txn_verification import verification_enabled
from replog.server.broker.broker_lifecycle_driver import BrokerLifecycleDriver
from replog.server.broker.metadata_publisher import BrokerMetadataListener
from replog.server.broker.producer_id_manager import ProducerIdManager, allocate_from_controller
from replog.server.config.authorizer_config import AuthorizerConfig
from replog.server.config.data_plane_config import (
    REQUEST_BYTES_MAX_DEFAULT,
    DataPlaneConfig,
    data_plane_config_from_node,
)
from replog.server.config.node_config import NodeConfig, static_broker_configs
from replog.server.controller.controller_calls import ControllerCalls
from replog.server.coordination import internal_topic_creator
from replog.server.data_plane.alter_partition_sender import AlterPartitionSender
from replog.server.data_plane.broker_cores import BrokerCores
from replog.server.data_plane.broker_service import BrokerService
from replog.server.data_plane.data_plane_host import DataPlaneHost
from replog.server.data_plane.replica_fetch_service import ReplicaFetchService
from replog.server.data_plane.replica_fetcher import ReplicaFetcherManager
from replog.server.data_plane.replica_manager import ReplicaManager, ReplicaManagerConfig
from replog.server.groups.group_coordinator import GroupCoordinator
from replog.server.groups.offsets_topic_creator import OffsetsTopicCreator, create_via_controller
from replog.server.kafka.broker_authorizer import BrokerAuthorizer
from replog.server.kafka.kafka_acl_apis import KafkaAclApis
from replog.server.kafka.kafka_admin_apis import KafkaAdminApis
from replog.server.kafka.kafka_apis import KafkaApis, MetadataStalenessOf, fetch_session_cache
from replog.server.kafka.kafka_feature_apis import KafkaFeatureApis
from replog.server.kafka.kafka_group_apis import KafkaGroupApis
from replog.server.kafka.kafka_quorum_apis import KafkaQuorumApis
from replog.server.kafka.kafka_sasl_apis import KafkaSaslApis
from replog.server.kafka.kafka_txn_apis import KafkaTxnApis
from replog.server.kafka.kafka_txn_marker_apis import KafkaTxnMarkerApis
from replog.server.metrics.instruments import BrokerCounters
from replog.server.raft.raft_driver import RaftDriver
from replog.server.runtime.bulk_threads import run_bulk
from replog.server.runtime.loop_turns import yield_turn
from replog.server.runtime.node_tasks import Spawner
from replog.server.runtime.peer_channels import PeerChannels, PeerLinksFactory
from replog.server.transactions.marker_channel import BrokerCalls, GrpcMarkerChannel
from replog.server.transactions.marker_sender import TxnMarkerSender
from replog.server.transactions.produce_verifier import ProduceVerifier, producer_entry
from replog.server.transactions.transaction_coordinator import TransactionCoordinator
from replog.server.transactions.txn_verifier import TxnVerifier, answer_to_wire
from replog.storage.log_manager import (
    LogLoadingAborted,
    LogManager,
    LogManagerConfig,
    clean_shutdown_broker_epoch,
)
from replog.topic_names import TRANSACTION_STATE_TOPIC

log = logging.getLogger("replog.server.broker")

# The phases of a broker's start, in order (`start_phases`, and the metrics'
# `replog_broker_start_phase_time_seconds`): its lifecycle started; the controller accepted its
# registration; it caught up with the metadata log; its logs are open; every replica of its
# first image exists (it serves); the controller unfenced it.
START_PHASES = (
    "started",
    "registered",
    "metadata_caught_up",
    "logs_loaded",
    "replicas_applied",
    "unfenced",
)
CONTROLLED_SHUTDOWN_TIMEOUT_MS_DEFAULT = 30_000


class BrokerRuntime:
    """The broker role: `listener` goes to the Raft driver, `start`/`stop` to the node."""

    def __init__(
        self,
        config: BrokerLifecycleConfig,
        controller_addresses: Mapping[int, str],
        *,
        tasks: Spawner,
        read_snapshot: Callable[[SnapshotId], bytes],
        high_watermark: Callable[[], int | None],
        clock: Clock = monotonic_ms,
        rng: random.Random | None = None,
        incarnation_id: uuid.UUID | None = None,
        controlled_shutdown_timeout_ms: int = CONTROLLED_SHUTDOWN_TIMEOUT_MS_DEFAULT,
        data_plane: DataPlaneConfig | None = None,
        quorum_apis: KafkaQuorumApis | None = None,
        metadata_staleness: MetadataStalenessOf | None = None,
        controller_links: PeerLinksFactory = PeerChannels,
        host: DataPlaneHost | None = None,
        authorizer: AuthorizerConfig | None = None,
        txn_calls: BrokerCalls | None = None,
    ) -> None:
        """`controller_links`: makes each of its parts' links to the controllers (gRPC channels
        unless given: the simulator's network); `host`: what the data plane runs on (a node
        process's unless given: `data_plane_host`); `authorizer`: the Kafka listeners'
        authorization settings (None: off); `txn_calls`: how the transaction coordinator and
        the leaders' verification reach other brokers (gRPC unless given: the simulator's
        network)."""
        self._host = host or DataPlaneHost()
        self._txn_calls = txn_calls
        self._spawner = tasks  # its background tasks' owner (node_tasks)
        self._controller_links = controller_links
        self.config = config
        self.controlled_shutdown_timeout_ms = controlled_shutdown_timeout_ms
        self._clock = clock
        self._controller_addresses = dict(controller_addresses)
        self.lifecycle = BrokerLifecycleDriver(
            config,
            controller_addresses,
            tasks=tasks,
            clock=clock,
            rng=rng,
            incarnation_id=incarnation_id,
            leaves_nothing_to_hand_over=lambda: self.metadata.image.leaves_nothing_to_hand_over(
                config.broker_id
            ),
            on_registered=lambda broker_epoch: self._reached("registered"),
            controller_links=controller_links,
        )
        self._raft_leader: int | None = None
        self.metadata = BrokerMetadataListener(
            config.broker_id,
            read_snapshot=read_snapshot,
            high_watermark=high_watermark,
            on_leader_change=self._on_leader_change,
        )
        self._first_image = asyncio.Event()
        self.metadata.install(_LifecycleFeed(self.lifecycle, self._first_image))
        self._unfence_task: asyncio.Task[None] | None = None
        # The logs opened from `start` on (module Rules): the replica manager over them, or None
        # when they did not open (said at once) or the broker stopped meanwhile. Always set in
        # the end, so that `stop` can wait for the log manager and shut it down cleanly.
        self._opened: asyncio.Future[ReplicaManager | None] | None = None
        # Set by `stop`: the log loading thread ends before its next log, so that a stop
        # waits for one log's load, not for 100,000 (`LogManager`'s `abort`).
        self._abort_loading = threading.Event()
        # The data plane (None: a broker without partition logs, as the lifecycle tests run).
        self.data_plane = data_plane
        # Requests to the active controller other than the lifecycle's and AlterPartition's.
        self.controller_calls = ControllerCalls(
            controller_addresses,
            lambda: self._raft_leader,
            request_timeout_ms=config.request_timeout_ms,
            clock=clock,
            controller_links=controller_links,
        )
        self.producer_ids = ProducerIdManager(
            config.broker_id,
            lambda: self.lifecycle.broker_epoch,
            allocate_from_controller(self.controller_calls, config.broker_id),
            tasks=tasks,
            clock=clock,
        )
        self.service = BrokerCores(
            config.broker_id,
            request_bytes_max=(
                REQUEST_BYTES_MAX_DEFAULT if data_plane is None else data_plane.request_bytes_max
            ),
            on_storage_error=self._on_storage_error,
            wall_clock=self._host.wall_clock,
            on_markers_written=self._on_markers_written,
        )
        # Followers' fetch streams (`replica_fetch_service`); the node registers it.
        self.replica_fetch_service = ReplicaFetchService(
            config.broker_id, self.service.replica_fetch, self.service.request_bytes_max
        )
        # Other nodes' calls to this broker (`broker_service`: WriteTxnMarkers); the node
        # registers it.
        self.broker_service = BrokerService(
            config.broker_id,
            self.service,
            lambda request: answer_to_wire(self.transaction_coordinator, request, config.broker_id),
        )

        # Each part's random choices from a generator of its own, drawn from `rng` when given
        # (a simulation's seeded one), so that a seed replays them.
        def child_rng() -> random.Random | None:
            return None if rng is None else random.Random(rng.getrandbits(64))

        self._log_rng, self._group_rng = child_rng(), child_rng()
        authorizing = authorizer is not None and authorizer.enabled
        admin_apis = KafkaAdminApis(
            config.broker_id,
            cluster_id=config.cluster_id,
            image=lambda: self.metadata.image,
            forward=self.controller_calls.call,
            broker_service=self.service,
            describe_producers=self._describe_producers,
            quorum_leader=lambda: self._raft_leader,
            static_configs=(
                {}
                if data_plane is None
                else static_broker_configs(
                    data_plane.properties,
                    LogManagerConfig.from_properties(data_plane.properties).log,
                )
            ),
            rng=child_rng(),
        )
        # The handlers of the Kafka listeners (if any `listeners` entry is one).
        self.kafka_apis = KafkaApis(
            config.broker_id,
            cluster_id=config.cluster_id,
            image=lambda: self.metadata.image,
            controller_id=lambda: -1 if self._raft_leader is None else self._raft_leader,
            metadata_staleness=metadata_staleness,
            broker_service=self.service,
            producer_ids=self.producer_ids,
            clock=clock,
            transactions=lambda: self.transaction_coordinator,
            produce_verifier=lambda: self.produce_verifier,
            fetch_sessions=(
                None
                if data_plane is None
                else fetch_session_cache(
                    data_plane.fetch_session_cache_slots,
                    data_plane.fetch_session_eviction_ms,
                    child_rng(),
                )
            ),
            rng=child_rng(),
            authorizer=(
                BrokerAuthorizer(authorizer, lambda: self.metadata.image)
                if authorizer is not None and authorizing
                else None
            ),
            extensions=[
                admin_apis,
                KafkaAclApis(
                    config.broker_id,
                    enabled=authorizing,
                    image=lambda: self.metadata.image,
                    forward=admin_apis.forward_request,
                ),
                KafkaGroupApis(
                    config.broker_id,
                    lambda: self.group_coordinator,
                    lambda: self.metadata.image,
                    lambda: self.transaction_coordinator,
                ),
                KafkaTxnApis(
                    config.broker_id,
                    lambda: self.transaction_coordinator,
                    lambda: self.metadata.image,
                ),
                KafkaTxnMarkerApis(config.broker_id, self.service),
                KafkaSaslApis(lambda: self.metadata.image, admin_apis.forward_request),
                KafkaFeatureApis(admin_apis.forward_request),
                *([] if quorum_apis is None else [quorum_apis]),
            ],
        )
        self._serving_clients = asyncio.Event()  # what `wait_serving_clients` waits for
        self.group_coordinator: GroupCoordinator | None = None
        self.transaction_coordinator: TransactionCoordinator | None = None
        self._marker_channel: GrpcMarkerChannel | None = None
        # The leader's and group coordinator's questions to transaction coordinators (KIP-890).
        self.txn_verifier: TxnVerifier | None = None
        self.produce_verifier: ProduceVerifier | None = None
        self.log_manager: LogManager | None = None
        self.replica_manager: ReplicaManager | None = None
        self.fetchers: ReplicaFetcherManager | None = None
        self.alter_partition: AlterPartitionSender | None = None
        self.storage_failure = asyncio.Event()
        self.storage_error: KafkaStorageError | None = None
        self._loop: asyncio.AbstractEventLoop | None = None  # the data plane's, once it starts
        # Set when the data plane could not start for another reason (module docstring).
        self.start_failure = asyncio.Event()
        self.start_error: str | None = None
        self._stopping = False
        # The data plane's metrics (the node sets its registry's; None: a private one).
        self.counters: BrokerCounters | None = None
        # When this process's broker reached each of START_PHASES (Unix time; wall clock, so
        # that a benchmark can set it against its own).
        self.start_phases: dict[str, float] = {}

    @classmethod
    def for_node(
        cls,
        node: NodeConfig,
        raft_driver: RaftDriver,
        *,
        tasks: Spawner,
        bound_port: int | None = None,
        kafka_ports: Mapping[str, int] | None = None,
        quorum_apis: KafkaQuorumApis | None = None,
        metadata_staleness: MetadataStalenessOf | None = None,
    ) -> BrokerRuntime:
        """The broker role of `node`, listening to its Raft driver (call before `run`).
        `bound_port` is the port the node's listener bound: it replaces port 0 (an ephemeral
        port) in the endpoints the broker registers (`broker_config_from_node`);
        `kafka_ports` the ports its Kafka listeners bound, by listener name; `quorum_apis`
        answers DescribeQuorum on them; `metadata_staleness` (a combined node's controller)
        says in Metadata answers how current they are."""
        config, addresses = broker_config_from_node(
            node, bound_port=bound_port, kafka_ports=kafka_ports
        )
        runtime = cls(
            config,
            addresses,
            read_snapshot=raft_driver.storage.read_whole_snapshot,
            # Unknown (None) after a restart until the leader answers, so that the loader does
            # not count itself caught up at the snapshot it restarted from.
            high_watermark=raft_driver.learned_high_watermark,
            tasks=tasks,
            clock=raft_driver.clock,
            data_plane=data_plane_config_from_node(node),
            quorum_apis=quorum_apis,
            metadata_staleness=metadata_staleness,
            authorizer=node.authorizer,
        )
        raft_driver.add_stepped_listener(runtime.listener_steps)
        return runtime

    def _describe_producers(self, topic: str, partition: int) -> Sequence[ProducerEntry]:
        """DescribeProducers of a partition (the Kafka listener's), by its replica manager."""
        if self.replica_manager is None:
            raise BrokerNotAvailableError(
                f"broker {self.config.broker_id} is not serving data requests (starting or "
                "stopping)"
            )
        return self.replica_manager.describe_producers(topic, partition)

    # --- for the node ------------------------------------------------------------------------

    def listener(self, item: ApplyItem) -> None:
        """The Raft driver's listener (chain it with the controller's in a combined node)."""
        self.metadata(item)

    def listener_steps(self, item: ApplyItem) -> Iterator[None]:
        """`listener` in steps: the Raft driver's stepped listener (a large committed batch
        replayed a slice per step, published whole at its end)."""
        return self.metadata.apply_in_steps(item)

    def install(self, publisher: MetadataPublisher) -> None:
        """Add a metadata publisher (the replica manager, issue #6)."""
        self.metadata.install(publisher)

    @property
    def image(self) -> MetadataImage:
        """The latest published metadata image."""
        return self.metadata.image

    @property
    def state(self) -> LifecycleState:
        return self.lifecycle.state

    async def start(self) -> None:
        """Start registering and heartbeating; returns at once (see `wait_until_running`)."""
        self.lifecycle.start()
        self._reached("started")
        if self.data_plane is not None and self._opened is None:
            self._opened = asyncio.get_running_loop().create_future()
            self._spawner.spawn(
                self._load_logs(self.data_plane, self._opened), name="the broker's log loading"
            )
        if self._unfence_task is None:
            self._unfence_task = self._spawner.spawn(
                self._become_ready(), name="the broker's data plane start"
            )

    async def wait_until_running(self) -> None:
        """Until the controller unfenced the broker; `BrokerLifecycleError` if it gave up."""
        await self.lifecycle.wait_until_running()

    async def wait_serving_clients(self) -> None:
        """Until the broker serves clients: it caught up with the metadata log, published its
        first image and (with a data plane) recovered its logs and attached the replica manager
        to the Broker service, as Kafka's broker enables its listeners once started."""
        await self._serving_clients.wait()

    async def wait_failed(self) -> str:
        """Until the broker role cannot go on (a storage error, a data plane that did not
        start, or its lifecycle ended without `stop`); returns why. The node then stops with
        a non-zero exit code."""
        storage = asyncio.ensure_future(self.storage_failure.wait())
        start = asyncio.ensure_future(self.start_failure.wait())
        lifecycle = asyncio.ensure_future(self.lifecycle.wait_shut_down())
        try:
            await asyncio.wait({storage, start, lifecycle}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            storage.cancel()
            start.cancel()
            lifecycle.cancel()
        if self.storage_failure.is_set():
            return f"storage error: {self.storage_error}"
        if self.start_failure.is_set():
            return f"the data plane did not start: {self.start_error}"
        return f"the broker lifecycle ended: {lifecycle.result()}"

    async def stop(self, graceful: bool = True) -> None:
        self._stopping = True
        self._abort_loading.set()  # logs still loading: none are served, the load ends
        if graceful and self.lifecycle.state is not LifecycleState.SHUTTING_DOWN:
            await self.lifecycle.controlled_shutdown(self.controlled_shutdown_timeout_ms)
        if self._unfence_task is not None:
            self._unfence_task.cancel()
        if self._opened is not None:
            await asyncio.shield(self._opened)  # its log manager, if any, is shut down next
        await self._stop_data_plane()
        await self.producer_ids.stop()
        await self.controller_calls.close()
        await self.lifecycle.stop()

    def _reached(self, phase: str) -> None:
        self.start_phases.setdefault(phase, self._host.wall_clock() / 1000)

    async def _become_ready(self) -> None:
        try:
            await self.lifecycle.wait_until_caught_up()
        except BrokerLifecycleError:  # it shut down first: nothing to get ready for
            return
        self._reached("metadata_caught_up")
        await self._first_image.wait()
        if self.data_plane is None:
            self._serving_clients.set()
        else:
            try:
                started = await self._start_data_plane(self.data_plane)
            except KafkaStorageError as error:
                self._on_storage_error(error)
                return
            except Exception as error:
                # Anything else would end this task silently, leaving the broker in recovery
                # for good while the node looked alive.
                self._on_start_error(error)
                return
            if self._stopping or not started:
                return
        self.lifecycle.set_ready_to_unfence()
        try:
            await self.lifecycle.wait_until_running()
        except BrokerLifecycleError:
            return
        self._reached("unfenced")

    # --- the data plane ----------------------------------------------------------------------

    async def _load_logs(
        self, data_plane: DataPlaneConfig, opened: asyncio.Future[ReplicaManager | None]
    ) -> None:
        """`_open_logs` into `opened`; a failure stops the broker at once, caught up or not."""
        try:
            opened.set_result(await self._open_logs(data_plane))
        except LogLoadingAborted as aborted:
            log.info("broker %d: stopping: %s", self.config.broker_id, aborted)
            opened.set_result(None)
        except KafkaStorageError as error:
            opened.set_result(None)
            self._on_storage_error(error)
        except Exception as error:
            opened.set_result(None)
            self._on_start_error(error)
        finally:
            if not opened.done():  # cancelled with the node's tasks
                opened.set_result(None)

    async def _open_logs(self, data_plane: DataPlaneConfig) -> ReplicaManager | None:
        """Open the logs and load their producer tables (module Rules); the replica manager
        over them, not started yet, or None when the broker stopped meanwhile."""
        broker_id = self.config.broker_id
        log_config = LogManagerConfig.from_properties(data_plane.properties)
        log.info("broker %d: recovering the logs in %s", broker_id, list(data_plane.log_dirs))
        began_ms = self._clock()
        # The bulk threads start off the loop before their first call (`bulk_threads`); a
        # node process started them before its loop ran, an embedding may not have.
        await asyncio.to_thread(self._host.prepare_bulk_work)
        # Recovery reads every unflushed segment: off the event loop, which goes on replaying
        # metadata and heartbeating meanwhile, in a thread that leaves it the cores
        # (`bulk_threads`).
        log_manager = await run_bulk(
            LogManager,
            list(data_plane.log_dirs),
            log_config,
            fs=self._host.fs,
            clock=self._host.wall_clock,
            task_clock=self._clock,
            on_logs_loaded=self._host.on_logs_loaded,
            abort=self._abort_loading,
            rng=self._log_rng,
        )
        self.log_manager = log_manager
        if self._stopping:
            return None  # stop() shuts it down
        replica_manager = ReplicaManager(
            ReplicaManagerConfig.from_properties(broker_id, data_plane.properties),
            log_manager,
            tasks=self._spawner,
            clock=self._clock,
            wall_clock=self._host.wall_clock,
            broker_epoch=self._broker_epoch,
            counters=self.counters,
            on_storage_error=self._on_storage_error,
        )
        # Off the event loop too, before any replica exists (Kafka loads it with the logs).
        await run_bulk(replica_manager.preload_producer_states)
        if self._stopping:
            return None  # stop() shuts the log manager down
        self._reached("logs_loaded")
        log.info(
            "broker %d: %d logs loaded in %d ms",
            broker_id,
            len(log_manager.all_logs()),
            self._clock() - began_ms,
        )
        return replica_manager

    async def _start_data_plane(self, data_plane: DataPlaneConfig) -> bool:
        """Start serving on the opened logs; False when it did not (the logs did not open, or
        the broker is stopping)."""
        broker_id = self.config.broker_id
        assert self._opened is not None, "start() opens the logs"
        replica_manager = await asyncio.shield(self._opened)
        if replica_manager is None or self._stopping:
            return False  # a failure said already, or stop() shuts the log manager down
        self.replica_manager = replica_manager
        log_manager = replica_manager.log_manager
        maker = await asyncio.to_thread(self._host.start_file_maker, log_manager, broker_id)
        if maker is not None and self._stopping:  # stop() stopped the replica manager already
            await asyncio.to_thread(maker.close)
            return False
        if maker is not None:
            replica_manager.use_file_maker(maker)  # closed when the replica manager stops
        # Started first, so that it applies the whole current image, which installing hands it,
        # in rounds with the file work off the event loop; the broker serves (and may be
        # unfenced) once every replica of that image exists.
        await replica_manager.start()
        # The catch-up (the image's local changes: thousands at a restart) in steps, with the
        # loop's other tasks (Raft, heartbeats) run between them.
        for _ in self.metadata.install_in_steps(
            _StorageGuard(replica_manager, self._on_storage_error)
        ):
            await yield_turn()
        await self._wait_replicas_applied(replica_manager)
        if self._stopping:
            return False
        self._reached("replicas_applied")
        self.fetchers = ReplicaFetcherManager(
            replica_manager,
            self._broker_address,
            self._clock,
            request_timeout_ms=data_plane.replica_socket_timeout_ms,
            on_storage_error=self._on_storage_error,
            tasks=self._spawner,
            streams=self._host.fetch_streams,
        )
        self.fetchers.start()
        self.alter_partition = AlterPartitionSender(
            replica_manager,
            broker_id,
            lambda: self.lifecycle.broker_epoch,
            self._controller_addresses,
            lambda: self._raft_leader,
            tasks=self._spawner,
            request_timeout_ms=self.config.request_timeout_ms,
            controller_links=self._controller_links,
        )
        self.alter_partition.start()
        self._loop = asyncio.get_running_loop()
        self._host.run_log_tasks(log_manager, self._storage_error_from_thread)
        self.producer_ids.start()
        self.service.attach(replica_manager)
        self._serving_clients.set()
        self._start_group_coordinator(data_plane, replica_manager)
        self._start_transaction_coordinator(data_plane, replica_manager)
        log.info(
            "broker %d: %d partition logs recovered; serving the data plane",
            broker_id,
            len(log_manager.all_logs()),
        )
        return True

    async def _wait_replicas_applied(self, replica_manager: ReplicaManager) -> None:
        """Until the replicas of the current image exist, saying every 5 s what it waits for."""
        started_ms = self._clock()
        while True:
            try:
                async with asyncio.timeout(5):
                    await replica_manager.wait_applied()
                return
            except TimeoutError:
                if self._stopping:
                    return
                log.info(
                    "broker %d: still creating and loading replicas (%d changes to apply, %d "
                    "ms so far); serving once every replica of the metadata image exists",
                    self.config.broker_id,
                    replica_manager.pending_changes,
                    self._clock() - started_ms,
                )

    def _start_group_coordinator(
        self, data_plane: DataPlaneConfig, replica_manager: ReplicaManager
    ) -> None:
        """The group coordinator follows `__consumer_offsets` leadership from now on: installed
        after the replica manager, it sees each image after the replicas changed role."""
        broker_id = self.config.broker_id
        config = data_plane.group_coordinator
        creator = OffsetsTopicCreator(
            broker_id,
            create_via_controller(
                self.controller_calls,
                broker_id,
                num_partitions=config.offsets_topic_num_partitions,
                replication_factor=config.offsets_topic_replication_factor,
                segment_bytes=config.offsets_topic_segment_bytes,
                timeout_ms=self.config.request_timeout_ms,
            ),
            tasks=self._spawner,
            clock=self._clock,
        )
        coordinator = GroupCoordinator(
            broker_id,
            replica_manager,
            creator,
            config,
            tasks=self._spawner,
            clock=self._clock,
            wall_clock=self._host.wall_clock,
            rng=self._group_rng,
            txn_verifier=lambda: self.txn_verifier,
            txn_verification_enabled=functools.partial(
                self._txn_verification_enabled, data_plane.properties
            ),
            metadata_image=lambda: self.metadata.image,
        )
        self.group_coordinator = coordinator
        # It follows the images whose replicas exist: an offsets partition it is to load must
        # be led here already.
        replica_manager.follow_applied_images(coordinator.apply_image)
        coordinator.start()  # offsets retention; `_stop_data_plane` stops it

    def _txn_verification_enabled(self, properties: Mapping[str, str]) -> bool:
        """`transaction.partition.verification.enable` now: this broker's dynamic config, else
        the cluster default's, else server.properties' `properties` (dynamic, as Kafka's)."""
        configs = self.metadata.image.configs
        return verification_enabled(
            (
                configs.get(ConfigResource(ConfigResourceType.BROKER, str(self.config.broker_id))),
                configs.get(ConfigResource(ConfigResourceType.BROKER, "")),
                properties,
            )
        )

    def _start_transaction_coordinator(
        self, data_plane: DataPlaneConfig, replica_manager: ReplicaManager
    ) -> None:
        """The transaction coordinator follows `__transaction_state` leadership from now on,
        as the group coordinator follows `__consumer_offsets`."""
        broker_id = self.config.broker_id
        config = data_plane.transaction_coordinator
        creator = internal_topic_creator.InternalTopicCreator(
            broker_id,
            TRANSACTION_STATE_TOPIC,
            internal_topic_creator.create_via_controller(
                self.controller_calls,
                broker_id,
                topic=TRANSACTION_STATE_TOPIC,
                num_partitions=config.state_log_num_partitions,
                replication_factor=lambda: config.state_log_replication(
                    len(self.metadata.image.cluster.brokers)
                ),
                configs=config.state_log_configs,
                timeout_ms=self.config.request_timeout_ms,
            ),
            tasks=self._spawner,
            clock=self._clock,
        )
        # The markers go to each leader's Broker service, at the address its fetchers use.
        channel = self._marker_channel = GrpcMarkerChannel(
            broker_id,
            self._broker_address,
            request_timeout_ms=config.request_timeout_ms,
            calls=self._txn_calls,
        )
        coordinator = TransactionCoordinator(
            broker_id,
            replica_manager,
            creator,
            lambda leaders: TxnMarkerSender(broker_id, channel, leaders),
            self.producer_ids.generate_producer_id,
            config,
            offsets_topic_num_partitions=data_plane.group_coordinator.offsets_topic_num_partitions,
            tasks=self._spawner,
            clock=self._clock,
            wall_clock=self._host.wall_clock,
        )
        self.transaction_coordinator = coordinator
        self.txn_verifier = TxnVerifier(
            broker_id, lambda: self.transaction_coordinator, lambda: self.metadata.image, channel
        )
        self.produce_verifier = ProduceVerifier(
            self.txn_verifier,
            functools.partial(producer_entry, replica_manager),
            functools.partial(self._txn_verification_enabled, data_plane.properties),
        )
        replica_manager.follow_applied_images(
            lambda image, _removed: coordinator.apply_image(image)
        )
        coordinator.start()  # timeouts and expiration; `_stop_data_plane` stops them

    async def _stop_data_plane(self) -> None:
        self.service.attach(None)
        self.replica_fetch_service.stop()
        self.produce_verifier = self.txn_verifier = None
        transactions, self.transaction_coordinator = self.transaction_coordinator, None
        if transactions is not None:
            await transactions.stop()
        channel, self._marker_channel = self._marker_channel, None
        if channel is not None:
            await channel.close()
        # The group handlers answer COORDINATOR_NOT_AVAILABLE from here on.
        coordinator, self.group_coordinator = self.group_coordinator, None
        if coordinator is not None:
            await coordinator.stop()
        if self.fetchers is not None:
            await self.fetchers.stop()
        if self.alter_partition is not None:
            await self.alter_partition.stop()
        if self.replica_manager is not None:
            await self.replica_manager.stop()
        log_manager, self.log_manager = self.log_manager, None
        if log_manager is not None and self.storage_error is not None:
            # No clean-shutdown marker after a failed disk; the logs' files are released all
            # the same (an embedding application may build a new node).
            await asyncio.to_thread(log_manager.close_after_failure)
        elif log_manager is not None:
            # Clean shutdown: flush, checkpoints, then the marker with this broker epoch.
            try:
                await asyncio.to_thread(log_manager.shutdown, self._broker_epoch())
            except KafkaStorageError as error:
                self._on_storage_error(error)
            except OSError as error:
                self._on_storage_error(KafkaStorageError(f"log shutdown failed: {error}"))

    def _broker_epoch(self) -> int:
        epoch = self.lifecycle.broker_epoch
        return -1 if epoch is None else epoch

    def _on_markers_written(
        self, producer_id: int, committed: bool, partitions: list[tuple[str, int]]
    ) -> None:
        """A transaction's marker written here: its offsets in `__consumer_offsets` apply."""
        coordinator = self.group_coordinator
        if coordinator is not None:
            coordinator.on_markers_written(producer_id, committed, partitions)

    def _broker_address(self, broker_id: int) -> str | None:
        """host:port of a broker's first registered listener in the current image."""
        registration = self.metadata.image.cluster.brokers.get(broker_id)
        if registration is None or not registration.endpoints:
            return None
        endpoint = registration.endpoints[0]
        return format_host_port(endpoint.host, endpoint.port)

    def _on_leader_change(self, leader_id: int | None) -> None:
        self._raft_leader = leader_id
        self.lifecycle.controller_hint(leader_id)

    def _on_start_error(self, error: Exception) -> None:
        if self._stopping:
            log.info("broker %d: data plane start abandoned: %r", self.config.broker_id, error)
            return
        self.start_error = f"{type(error).__name__}: {error}"
        log.critical(
            "broker %d: the data plane did not start, stopping: %s",
            self.config.broker_id,
            self.start_error,
            exc_info=error,
        )
        self.start_failure.set()

    def _storage_error_from_thread(self, error: KafkaStorageError) -> None:
        """`_on_storage_error` from another thread (the log manager's background tasks): the
        broker's state lives on the event loop. A loop already closed has stopped anyway."""
        assert self._loop is not None  # set before the log manager's thread starts
        with contextlib.suppress(RuntimeError):
            self._loop.call_soon_threadsafe(self._on_storage_error, error)

    def _on_storage_error(self, error: KafkaStorageError) -> None:
        if self._stopping and self.log_manager is None:
            # The logs are closed on purpose: a late request that found them closed is no
            # failed disk.
            log.info("broker %d: after shutdown: %s", self.config.broker_id, error)
            return
        if self.storage_error is None:
            log.critical("broker %d: storage error, stopping: %s", self.config.broker_id, error)
            self.storage_error = error
        self.storage_failure.set()


class _StorageGuard:
    """The replica manager as a publisher, with its storage errors made fatal: the metadata
    listener logs and swallows publisher errors, which is right for a bug in one publisher
    but not for a disk that failed under it. A storage error (or an OSError that escaped
    unwrapped) goes to the broker's storage-failure path, which says what failed and stops
    the broker; it is not raised on, where the listener would log it again with a traceback."""

    def __init__(
        self, replica_manager: ReplicaManager, on_storage_error: Callable[[KafkaStorageError], None]
    ) -> None:
        self._replica_manager = replica_manager
        self._on_storage_error = on_storage_error
        self.name = replica_manager.name

    def on_metadata_update(
        self, delta: MetadataDelta, image: MetadataImage, manifest: LoaderManifest
    ) -> None:
        run_to_end(self.update_in_steps(Publication(delta, image, manifest)))

    def update_in_steps(self, publication: Publication) -> Steps[None]:
        try:
            yield from self._replica_manager.update_in_steps(publication)
        except KafkaStorageError as error:
            self._on_storage_error(error)
        except OSError as exc:
            self._on_storage_error(
                KafkaStorageError(
                    f"applying the metadata image at offset "
                    f"{publication.manifest.provenance.last_offset}: {exc}"
                )
            )


class _LifecycleFeed:
    """Publisher: every published offset goes into the heartbeats; the first image is noted;
    the controller fencing or unfencing this broker is logged with why (`own_fence_notice`)."""

    name = "broker-lifecycle"

    def __init__(self, lifecycle: BrokerLifecycleDriver, first_image: asyncio.Event) -> None:
        self._lifecycle = lifecycle
        self._first_image = first_image

    def on_metadata_update(
        self, delta: MetadataDelta, image: MetadataImage, manifest: LoaderManifest
    ) -> None:
        self._lifecycle.update_metadata_offset(image.provenance.last_offset)
        self._first_image.set()
        lifecycle = self._lifecycle
        notice = own_fence_notice(delta, lifecycle.config.broker_id, lifecycle.state)
        if notice is not None:
            log.info("%s (metadata offset %d)", notice.describe(), image.provenance.last_offset)


def broker_config_from_node(
    node: NodeConfig,
    *,
    bound_port: int | None = None,
    kafka_ports: Mapping[str, int] | None = None,
) -> tuple[BrokerLifecycleConfig, dict[int, str]]:
    """The lifecycle settings and controller addresses of a node's broker role. `bound_port`,
    the port the node's listener bound, is needed only when an advertised endpoint has port 0
    (`_advertised_endpoints`); `kafka_ports` are the ports the Kafka listeners bound, by
    listener name, which an advertised port 0 of that name becomes."""
    properties = node.properties

    rack = properties.get("broker.rack", "").strip() or None
    config = BrokerLifecycleConfig(
        broker_id=node.node_id,
        cluster_id=node.cluster_id,
        controller_ids=tuple(voter.node_id for voter in node.raft.voters),
        listeners=_advertised_endpoints(node, bound_port, kafka_ports or {}),
        rack=rack,
        heartbeat_interval_ms=node.broker_heartbeat_interval_ms,
        session_timeout_ms=positive_setting(properties, "broker.session.timeout.ms", 9000),
        initial_registration_timeout_ms=positive_setting(
            properties, "initial.broker.registration.timeout.ms", 60_000
        ),
        request_timeout_ms=node.raft.request_timeout_ms,
        # A clean previous run's epoch lets this run replace its registration at once, even
        # while that registration's session looks live (cluster_control.succeeds_cleanly).
        previous_broker_epoch=clean_shutdown_broker_epoch(
            data_plane_config_from_node(node).log_dirs
        ),
    )
    addresses = {
        voter.node_id: format_host_port(voter.host, voter.port) for voter in node.raft.voters
    }
    return config, addresses


def _advertised_endpoints(
    node: NodeConfig, bound_port: int | None, kafka_ports: Mapping[str, int]
) -> tuple[Endpoint, ...]:
    """The endpoints the broker registers: `node.advertised_listeners` with an empty host
    resolved (`_wildcard_hosts_resolved`) and port 0 replaced by the port its Kafka listener
    bound (by name), else by `bound_port` (`_ephemeral_ports_bound`), so that no client is ever
    told to dial either."""
    endpoints = tuple(
        replace(e, port=kafka_ports[e.name]) if e.port == 0 and e.name in kafka_ports else e
        for e in _wildcard_hosts_resolved(node)
    )
    return _ephemeral_ports_bound(endpoints, bound_port, node.advertised_listeners_key)


def _wildcard_hosts_resolved(node: NodeConfig) -> tuple[Endpoint, ...]:
    """An empty host becomes this machine's canonical host name (Kafka's
    `ListenerInfo.withWildcardHostnamesResolved`), looked up once."""
    endpoints = node.advertised_listeners
    blank = [e for e in endpoints if not e.host]
    if not blank:
        return endpoints
    try:
        host = local_canonical_host_name()
    except OSError as error:  # Kafka's broker stops on the UnknownHostException too
        entry = f"{blank[0].name}://:{blank[0].port}"
        raise ConfigError(
            f"{node.advertised_listeners_key} entry {entry!r}: an empty host is advertised as "
            f"this machine's canonical host name, which cannot be found ({error}); set "
            "advertised.listeners to a host clients can reach"
        ) from None
    log.info("broker %d: advertising the wildcard host as %s", node.node_id, host)
    return tuple(Endpoint(e.name, e.host or host, e.port, e.security_protocol) for e in endpoints)


def _ephemeral_ports_bound(
    endpoints: tuple[Endpoint, ...], bound_port: int | None, key: str
) -> tuple[Endpoint, ...]:
    """Port 0 (an ephemeral port: "any free port") in an endpoint becomes `bound_port`, the port
    the node's listener actually bound; any other port is kept (Kafka's
    `ListenerInfo.withEphemeralPortsCorrected`). Kafka takes the bound port of the listener of
    the same name; a replog node binds one socket, its first listener's, and serves every
    listener name on it, so that port is each name's. `key` names where the endpoints came
    from, for the error: without a bound port, port 0 cannot be registered at all."""
    if all(endpoint.port != 0 for endpoint in endpoints):
        return endpoints
    if bound_port is None or not 1 <= bound_port <= 65535:
        zero = next(e for e in endpoints if e.port == 0)
        entry = f"{zero.name}://{format_host_port(zero.host, zero.port)}"
        raise ValueError(
            f"{key} entry {entry!r}: port 0 (an ephemeral port) is registered as the port the "
            f"node's listener bound, and that is not known (bound port: {bound_port}); bind the "
            "listener before building the broker"
        )
    return tuple(
        endpoint if endpoint.port != 0 else replace(endpoint, port=bound_port)
        for endpoint in endpoints
    )
