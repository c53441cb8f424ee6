"""BrokerRuntime: the broker role of one node process, metadata replay plus lifecycle.

It wires the broker side of the metadata plane together:

    RaftDriver --ApplyItem--> BrokerMetadataListener --Publication--> publishers
                                  |  (MetadataLoader)                  - lifecycle feed
                                  |                                    - LocalChangesLog
                                  '--LeaderChange--> controller hint   - (replica manager, #6)
    BrokerLifecycleDriver <--offsets, readiness-- lifecycle feed
    BrokerLifecycleDriver --BrokerRegistration/BrokerHeartbeat--> controllers (gRPC)

Rules:
- The metadata offset in heartbeats is the loader's last published offset: the controller
  unfences the broker only once the broker has published an image containing its own
  registration record.
- Ready to unfence (Kafka's BrokerServer order): once the lifecycle has caught up (RECOVERY),
  the first image is published, and the logs are recovered (no partition logs before the data
  plane of issue #6, so that step is empty for now).
- `stop(graceful=True)`: controlled shutdown first (the controller moves leaderships away),
  bounded by `controlled_shutdown_timeout_ms`, then stop the lifecycle. `stop(graceful=False)`:
  stop at once; the controller fences the broker after `broker.session.timeout.ms`.
- Configuration comes from the node's config (`cluster.id`, `broker.heartbeat.interval.ms`
  2000) and Kafka-named properties read in `broker_config_from_node`:
  `broker.session.timeout.ms` (9000), `initial.broker.registration.timeout.ms` (60000),
  `broker.rack` (none), `advertised.listeners` (default: `listeners`); the controllers are
  `controller.quorum.voters`, the request timeout `controller.quorum.request.timeout.ms`.
"""

from __future__ import annotations

import asyncio
import logging
import random
import uuid
from collections.abc import Callable, Mapping

from quorum.metadata.broker_lifecycle import BrokerLifecycleConfig, LifecycleState
from quorum.metadata.delta import MetadataDelta
from quorum.metadata.image import MetadataImage
from quorum.metadata.loader import LoaderManifest, MetadataPublisher
from quorum.metadata.records import Endpoint
from quorum.raft.ready import ApplyItem
from quorum.raft.snapshot_id import SnapshotId
from replog.clock import Clock, monotonic_ms
from replog.errors import BrokerLifecycleError, ConfigError
from replog.server.broker_lifecycle_driver import BrokerLifecycleDriver
from replog.server.metadata_publisher import BrokerMetadataListener, LocalChangesLog
from replog.server.node_config import NodeConfig
from replog.server.raft_driver import RaftDriver

log = logging.getLogger("replog.server.broker")

CONTROLLED_SHUTDOWN_TIMEOUT_MS_DEFAULT = 30_000


class BrokerRuntime:
    """The broker role: `listener` goes to the Raft driver, `start`/`stop` to the node."""

    def __init__(
        self,
        config: BrokerLifecycleConfig,
        controller_addresses: Mapping[int, str],
        *,
        read_snapshot: Callable[[SnapshotId], bytes],
        high_watermark: Callable[[], int | None],
        clock: Clock = monotonic_ms,
        rng: random.Random | None = None,
        incarnation_id: uuid.UUID | None = None,
        controlled_shutdown_timeout_ms: int = CONTROLLED_SHUTDOWN_TIMEOUT_MS_DEFAULT,
    ) -> None:
        self.config = config
        self.controlled_shutdown_timeout_ms = controlled_shutdown_timeout_ms
        self.lifecycle = BrokerLifecycleDriver(
            config, controller_addresses, clock=clock, rng=rng, incarnation_id=incarnation_id
        )
        self.metadata = BrokerMetadataListener(
            config.broker_id,
            read_snapshot=read_snapshot,
            high_watermark=high_watermark,
            on_leader_change=self.lifecycle.controller_hint,
        )
        self._first_image = asyncio.Event()
        self.metadata.install(_LifecycleFeed(self.lifecycle, self._first_image))
        self.local_changes = LocalChangesLog(config.broker_id)
        self.metadata.install(self.local_changes)
        self._unfence_task: asyncio.Task[None] | None = None

    @classmethod
    def for_node(cls, node: NodeConfig, raft_driver: RaftDriver) -> BrokerRuntime:
        """The broker role of `node`, listening to its Raft driver (call before `run`)."""
        config, addresses = broker_config_from_node(node)
        runtime = cls(
            config,
            addresses,
            read_snapshot=raft_driver.storage.read_whole_snapshot,
            high_watermark=lambda: raft_driver.status().high_watermark,
            clock=raft_driver.clock,
        )
        raft_driver.add_listener(runtime.listener)
        return runtime

    # --- for the node ------------------------------------------------------------------------

    def listener(self, item: ApplyItem) -> None:
        """The Raft driver's listener (chain it with the controller's in a combined node)."""
        self.metadata(item)

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
        if self._unfence_task is None:
            self._unfence_task = asyncio.get_running_loop().create_task(self._become_ready())

    async def wait_until_running(self) -> None:
        """Until the controller unfenced the broker; `BrokerLifecycleError` if it gave up."""
        await self.lifecycle.wait_until_running()

    async def stop(self, graceful: bool = True) -> None:
        if graceful and self.lifecycle.state is not LifecycleState.SHUTTING_DOWN:
            await self.lifecycle.controlled_shutdown(self.controlled_shutdown_timeout_ms)
        if self._unfence_task is not None:
            self._unfence_task.cancel()
        await self.lifecycle.stop()

    async def _become_ready(self) -> None:
        try:
            await self.lifecycle.wait_until_caught_up()
        except BrokerLifecycleError:  # it shut down first: nothing to get ready for
            return
        await self._first_image.wait()
        # Log recovery would be awaited here once the broker has partition logs (issue #6).
        self.lifecycle.set_ready_to_unfence()


class _LifecycleFeed:
    """Publisher: every published offset goes into the heartbeats; the first image is noted."""

    name = "broker-lifecycle"

    def __init__(self, lifecycle: BrokerLifecycleDriver, first_image: asyncio.Event) -> None:
        self._lifecycle = lifecycle
        self._first_image = first_image

    def on_metadata_update(
        self, delta: MetadataDelta, image: MetadataImage, manifest: LoaderManifest
    ) -> None:
        self._lifecycle.update_metadata_offset(image.provenance.last_offset)
        self._first_image.set()


def broker_config_from_node(node: NodeConfig) -> tuple[BrokerLifecycleConfig, dict[int, str]]:
    """The lifecycle settings and controller addresses of a node's broker role."""
    properties = node.properties

    def integer(key: str, default: int) -> int:
        text = properties.get(key)
        if text is None:
            return default
        try:
            value = int(text)
        except ValueError:
            raise ConfigError(f"{key}={text!r}: must be an integer") from None
        if value <= 0:
            raise ConfigError(f"{key}={value}: must be positive")
        return value

    rack = properties.get("broker.rack", "").strip() or None
    advertised = properties.get("advertised.listeners", "").strip()
    config = BrokerLifecycleConfig(
        broker_id=node.node_id,
        cluster_id=node.cluster_id,
        controller_ids=tuple(voter.node_id for voter in node.raft.voters),
        listeners=_endpoints(advertised, "advertised.listeners")
        if advertised
        else _endpoints(properties.get("listeners", node.listener), "listeners"),
        rack=rack,
        heartbeat_interval_ms=node.broker_heartbeat_interval_ms,
        session_timeout_ms=integer("broker.session.timeout.ms", 9000),
        initial_registration_timeout_ms=integer("initial.broker.registration.timeout.ms", 60_000),
        request_timeout_ms=node.raft.request_timeout_ms,
    )
    addresses = {voter.node_id: f"{voter.host}:{voter.port}" for voter in node.raft.voters}
    return config, addresses


def _endpoints(text: str, key: str) -> tuple[Endpoint, ...]:
    """`NAME://host:port,...` (a bare host:port is listener PLAINTEXT)."""
    endpoints = []
    for entry in (e.strip() for e in text.split(",")):
        if not entry:
            continue
        name, _, address = entry.rpartition("://")
        host, sep, port = address.rpartition(":")
        if not sep or not port.isdigit():
            raise ConfigError(f"{key}={text!r}: expected NAME://host:port")
        name = name or "PLAINTEXT"
        protocol = (
            name if name in ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL") else "PLAINTEXT"
        )
        endpoints.append(Endpoint(name, host.strip("[]"), int(port), protocol))
    return tuple(endpoints)
