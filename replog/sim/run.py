"""One seeded simulation run of a replog cluster (`simulate`), as `replog sim` runs it.

A run, all of it decided by its seed:
1. Setup: the nodes start and the data topics are created (within `SETUP_BOUND_S`).
2. Safety (`SAFETY_S` of virtual time): three or five nodes (combined, the real Raft,
   controller and broker shells on in-memory disks, `cluster`) and zero to two broker-only
   nodes (observers of the metadata quorum); a client creates a
   topic every few hundred ms through whichever controller it believes active; the network
   delays, drops, duplicates and reorders messages at the seed's rates and partitions the
   nodes; nodes are killed (kill -9), stopped cleanly and restarted (a rolling restart's
   stop: controlled shutdown, the clean-shutdown marker), lose power alone or all together,
   and restart; a node's disk fails or fills up, turns slow, its wall clock jumps
   (`node_faults`: a node stops on a disk failure, as a node process does); which of these
   kinds strike is the seed's (`fault_mix`: swarm testing, so runs end in varied states).
   The data workload (`workload`) produces (acks 0, 1 and all, idempotent) and consumes; the
   transactional workload (`txn_workload`) runs transactions across two partitions through
   the brokers' transaction coordinators, with zombie instances, and read_committed
   consumers, whose every answer `TxnChecker` checks (a break raised after the iteration that
   saw it); the operator's admin client (`admin`) adds partitions, changes a config,
   reassigns partitions and asks for preferred elections on a topic of its own.
   `SafetyChecker` runs after every
   iteration of the loop (the log rule too: a node's log start moves up to a snapshot only
   loop turns after its high watermark passed it, so the committed history sees every batch
   before the last copy below a log start goes), as does `LeaderAnnouncements` (a node's state
   machine hears of its own leadership only after its epoch start), `DataChecker` and
   `MetadataChecker` (the committed metadata log's partition records, and `SweepProgress`,
   the sweep of fenced brokers, with the controllers' step of partition changes drawn per
   seed) every `DATA_CHECK_S`, `DataChecker` also before every power loss (its images, each
   controller's committed view and the durability of the
   committed metadata log, every `IMAGE_CHECK_S`, as are `ReadChecker`, each controller's
   reads, and `SnapshotChecker`, the nodes' metadata snapshots and log starts, in the seeds
   whose `SnapshotShape` takes snapshots); around every power loss `SyncedData` checks that
   each replica of a `flush.messages=1` topic keeps what its log had synced. The leader of the
   newest quorum epoch resigns at some fault ticks with every node up.
3. Liveness: faults stop, the network heals, every disk is healthy, every node starts, the
   producers stop. Within `LIVENESS_BOUND_S` a controller must lead, every broker be
   registered and unfenced, a new topic be created, and (a producer starting then looks for a
   transaction coordinator until `__transaction_state` exists: `txn_workload`) every data
   partition (the admin topic's and `__transaction_state`'s too) have a leader and its full
   ISR, or be offline by KIP-966 as the committed metadata log shows it (no leader, neither
   ISR nor ELR members, every replica of its last-known ELR registered after an unclean
   shutdown: `offline_reason`); a partition offline for any other reason fails.
4. At the end every topic whose creation was acknowledged exists: a controller answers only
   once the creation is committed, so no crash or power loss may lose it. Every acknowledged
   acks=all batch is readable at its offset from its leader (on a partition offline by KIP-966:
   held by a running replica's log), unless more than `replicas - min.insync.replicas` of its
   replicas lost power since it was sent (and never on a topic with `flush.messages=1`).
   Then the operator elects a leader for each partition offline by KIP-966 as Kafka's does
   (`replog elect-leaders --election-type unclean`: ElectLeaders UNCLEAN at the active
   controller), and within `LIVENESS_BOUND_S` of asking, every data partition has a leader
   and its full ISR; what the elected replica lacked is lost, by the operator's choice.
   Within `LIVENESS_BOUND_S` more every reassignment of the admin topic completes, and what
   the controllers acknowledged to the admin client holds in the committed metadata
   (`AdminClient.check`).
   Then every transaction finishes within `TXN_FINISHED_BOUND_S` (`txn_liveness`).
A break raises `SimulationFailure`, whose message names the seed and the command that replays
it; the same seed on the same code replays the run byte for byte.
"""

from __future__ import annotations

import asyncio
import hashlib
import random
from collections.abc import Callable
from dataclasses import dataclass, field

from replog.errors import ElectionNotNeededError
from replog.pb import common_pb2
from replog.pb import controller_pb2 as pb
from replog.quorum.controller.controller import QuorumController
from replog.quorum.metadata.image import MetadataImage
from replog.server.controller.controller_service import ControllerService
from replog.server.raft.raft_driver import RaftDriver
from replog.sim.admin import AdminClient
from replog.sim.cluster import STATE_PARTITIONS, SimCluster
from replog.sim.controller_reads import ReadChecker
from replog.sim.data_invariants import DataChecker
from replog.sim.data_liveness import (
    READABLE_BOUND_S,
    acked_batches_readable,
    partitions_replicated,
)
from replog.sim.fault_mix import ALL_FAULTS, FaultMix
from replog.sim.invariants import InvariantViolation, SafetyChecker
from replog.sim.leader_announcements import LeaderAnnouncements
from replog.sim.metadata_invariants import MetadataChecker
from replog.sim.network import CallLost, NetworkFaults, SimNetwork
from replog.sim.node_faults import NodeFaults
from replog.sim.snapshot_invariants import SnapshotChecker
from replog.sim.snapshot_shape import NO_SNAPSHOTS, SnapshotShape
from replog.sim.sweep_progress import STEP_CHOICES, SweepProgress
from replog.sim.synced_data import SyncedData
from replog.sim.txn_invariants import TxnChecker
from replog.sim.txn_liveness import TXN_FINISHED_BOUND_S, transactions_finished
from replog.sim.txn_workload import TxnWorkload
from replog.sim.virtual_loop import VirtualLoop
from replog.sim.workload import DataWorkload, topic_specs

__all__ = ["SimReport", "SimulationFailure", "replay_command", "simulate"]

# The data topics are created before the faults begin; at the seed's worst network (40 ms
# delays, 5% of messages dropped) a healthy cluster may take over 10 s.
SETUP_BOUND_S = 30.0
SAFETY_S = 15.0
LIVENESS_BOUND_S = 15.0
DATA_CHECK_S = 0.05
IMAGE_CHECK_S = 1.0
CLIENT_ID = 999
CREATE_EVERY_S = (0.1, 0.5)
CALL_TIMEOUT_S = 2.0
# Broker-only nodes (Raft observers of the metadata log) beside the voters, drawn per seed.
OBSERVERS = (0, 1, 2)
OBSERVER_BASE_ID = 101


def replay_command(seed: int) -> str:
    return f"replog sim --seed {seed}"


class SimulationFailure(AssertionError):
    """A run broke a rule or made no progress (module docstring)."""

    def __init__(self, seed: int, what: str) -> None:
        self.seed = seed
        super().__init__(f"seed {seed}: {what}\nreplay: {replay_command(seed)}")


@dataclass
class SimReport:
    """What one clean run did."""

    seed: int
    nodes: int
    faults: NetworkFaults
    snapshots: SnapshotShape = field(default_factory=lambda: NO_SNAPSHOTS)
    partition_changes_per_step: int = STEP_CHOICES[0]  # the controllers' step of moves
    observer_ids: tuple[int, ...] = ()  # the broker-only nodes
    fault_mix: FaultMix = ALL_FAULTS  # the fault kinds the seed enables (swarm testing)
    virtual_s: float = 0.0
    kills: int = 0
    clean_restarts: int = 0
    power_losses: int = 0
    # Power losses of a node whose metadata log held appends not yet flushed: a crash
    # between writing a Raft Ready's entries and flushing them.
    unflushed_power_losses: int = 0
    whole_cluster_power_losses: int = 0
    partitions: int = 0
    disk_errors: int = 0
    full_disks: int = 0
    disk_fail_stops: int = 0  # nodes stopped by their failed disk
    slow_disks: int = 0
    clock_jumps: int = 0
    resignations: int = 0
    topics_acknowledged: int = 0
    checks: int = 0
    data: dict[str, int] = field(default_factory=dict)
    # Each acknowledged acks=all batch: (topic, partition, offset, virtual ms acknowledged).
    acked: list[tuple[str, int, int, int]] = field(default_factory=list)
    events: list[tuple[int, str]] = field(default_factory=list)
    # A digest of the run's outcome (the committed metadata log, the network's counts, the
    # exact virtual end time): two runs of a seed agree on it when they replay byte for byte.
    fingerprint: str = ""

    def summary(self) -> str:
        return (
            f"seed {self.seed}: clean ({self.nodes} combined nodes and {len(self.observer_ids)} "
            f"broker-only, {self.snapshots.describe()}, "
            f"{self.fault_mix.describe()}, "
            f"steps of {self.partition_changes_per_step} partition changes, "
            f"{self.virtual_s:.1f} s simulated, "
            f"{self.kills} kills, {self.clean_restarts} clean restarts, "
            f"{self.power_losses} power losses "
            f"({self.whole_cluster_power_losses} of every node, {self.unflushed_power_losses} "
            f"before a metadata flush), {self.partitions} partitions, "
            f"{self.disk_errors} disk errors and {self.full_disks} full disks "
            f"({self.disk_fail_stops} nodes stopped by them), {self.slow_disks} slow disks, "
            f"{self.clock_jumps} clock jumps, {self.resignations} resignations, "
            f"{self.topics_acknowledged} topics acknowledged, {self.checks} checks; "
            + ", ".join(f"{count} {what}" for what, count in self.data.items())
            + ")"
        )


def simulate(seed: int) -> SimReport:
    """Run seed `seed` (module docstring); its report, or SimulationFailure."""
    rng = random.Random(seed)
    node_ids = tuple(range(1, rng.choice((3, 3, 5)) + 1))
    faults = NetworkFaults(
        delay_ms_min=0,
        delay_ms_max=rng.choice((2, 10, 40)),
        drop_rate=rng.choice((0.0, 0.01, 0.05)),
        duplicate_rate=rng.choice((0.0, 0.01, 0.05)),
    )
    report = SimReport(seed, len(node_ids), faults)
    loop = VirtualLoop()
    network = SimNetwork(loop, random.Random(rng.getrandbits(64)), faults)
    cluster_rng = random.Random(rng.getrandbits(64))
    streams = [random.Random(rng.getrandbits(64)) for _ in range(3)]
    # Drawn last: the other streams do not depend on how the seed snapshots.
    report.snapshots = SnapshotShape.from_seed(random.Random(rng.getrandbits(64)))
    admin_rng = random.Random(rng.getrandbits(64))
    report.partition_changes_per_step = random.Random(rng.getrandbits(64)).choice(STEP_CHOICES)
    observers = random.Random(rng.getrandbits(64)).choice(OBSERVERS)
    report.observer_ids = tuple(range(OBSERVER_BASE_ID, OBSERVER_BASE_ID + observers))
    # Drawn after them: a seed that enables every fault kind runs as the full mix would.
    report.fault_mix = FaultMix.from_seed(random.Random(rng.getrandbits(64)))
    txn_rng = random.Random(rng.getrandbits(64))
    cluster = SimCluster(
        node_ids,
        loop,
        network,
        cluster_rng,
        report.snapshots,
        report.partition_changes_per_step,
        report.observer_ids,
    )
    checker = SafetyChecker(cluster)
    announcements = LeaderAnnouncements()
    cluster.on_raft_driver.append(announcements.watch)
    snapshot_checker = SnapshotChecker(cluster)
    read_checker = ReadChecker()
    specs = topic_specs(len(node_ids), STATE_PARTITIONS)
    names = {spec.name for spec in specs}
    data_checker = DataChecker(cluster, specs)
    metadata_checker = MetadataChecker()
    sweep = SweepProgress()
    metadata_checker.after_batch.append(sweep.after_batch)
    workload = DataWorkload(cluster, data_checker, specs, streams[0])
    txn_checker = TxnChecker(cluster, data_checker, STATE_PARTITIONS)
    (txn_spec,) = [spec for spec in specs if spec.kind == "transactional"]
    txn_workload = TxnWorkload(workload, txn_checker, txn_spec, txn_rng)
    run = _Run(cluster, report, streams[1], workload, lambda: checker.committed)
    admin = run.admin = AdminClient(cluster, admin_rng)
    run.image = lambda: metadata_checker.images.image
    run.txn = txn_workload
    node_faults = run.node_faults = NodeFaults(cluster, streams[2])
    synced = SyncedData(cluster, specs, node_faults.suspended)
    main = loop.create_task(run.main())
    next_data_check = next_image_check = 0.0
    unhandled: list[str] = []  # errors asyncio would only log: a callback's, say
    loop.set_exception_handler(lambda _, context: unhandled.append(_unhandled(context)))
    try:
        with loop.running():  # this thread's running loop for every iteration
            while not main.done():
                loop.run_once()
                if unhandled:
                    raise InvariantViolation(f"at {loop.now_ms()} ms: {unhandled[0]}")
                if txn_checker.found:
                    raise InvariantViolation(txn_checker.found[0])
                for stopped in node_faults.stop_failed_nodes():
                    run.note(stopped)
                data_checker.note_iteration()
                checker.check_states()
                announcements.check()
                with node_faults.suspended():
                    checker.check_logs()
                now = loop.time()
                if now >= next_data_check:
                    with node_faults.suspended():
                        metadata_checker.follow(checker.committed)
                        data_checker.check_replicas()
                    next_data_check = now + DATA_CHECK_S
                if now >= next_image_check:
                    with node_faults.suspended():
                        metadata_checker.follow(checker.committed)
                        data_checker.check_images(metadata_checker.images)
                        metadata_checker.check_controllers(_controllers(cluster))
                        read_checker.check(_controllers(cluster), metadata_checker.images)
                        snapshot_checker.check(metadata_checker.images)
                        checker.check_durable()
                    next_image_check = now + IMAGE_CHECK_S
        main.result()
        with node_faults.suspended():
            checker.check_logs(whole=True)
            metadata_checker.follow(checker.committed)
            metadata_checker.check_controllers(_controllers(cluster))
            read_checker.check(_controllers(cluster), metadata_checker.images)
            snapshot_checker.check(metadata_checker.images)
            checker.check_durable()
            data_checker.check_replicas()
            data_checker.check_images(metadata_checker.images)
            admin.check(metadata_checker.images.image)
    except (InvariantViolation, AssertionError) as exc:
        raise SimulationFailure(seed, str(exc)) from exc
    finally:
        txn_workload.stop()
        workload.stop()
        loop.run_until_complete(cluster.stop_all())
        _end_every_task(loop)
        loop.close()
    report.virtual_s = loop.time()
    report.checks = checker.checks
    report.data = {
        **workload.counts,
        **admin.counts,
        "replica checks": data_checker.checks,
        "partition records checked": metadata_checker.partition_records,
        "controller views checked": metadata_checker.controller_views,
        "controller reads checked": read_checker.reads_checked,
        "images checked": data_checker.images_checked,
        "snapshots checked": snapshot_checker.snapshots_checked,
        "moved log starts seen": snapshot_checker.log_starts_moved,
        "excused losses": data_checker.excused,
        "synced batches kept": synced.checked,
        "own leaderships announced": announcements.announcements,
        "batches naming a fenced broker": sweep.batches_naming,
        "longest sweep stall (batches)": sweep.longest_stall,
        "data partitions left leaderless": len(
            {(topic, index) for topic, index in metadata_checker.left_leaderless if topic in names}
        ),
        **txn_checker.report(),
    }
    report.acked = [(a.topic, a.partition, a.base_offset, a.acked_ms) for a in workload.acked]
    outcome = hashlib.sha256(checker.committed)
    outcome.update(f"{network.sent} {network.delivered} {network.dropped} {loop.time()!r}".encode())
    report.fingerprint = outcome.hexdigest()[:16]
    report.disk_errors, report.full_disks = node_faults.disk_errors, node_faults.full_disks
    report.disk_fail_stops, report.slow_disks = node_faults.fail_stops, node_faults.slow_disks
    report.clock_jumps = node_faults.clock_jumps
    report.clean_restarts = node_faults.clean_restarts
    return report


def _controllers(cluster: SimCluster) -> list[tuple[int, QuorumController]]:
    return [(i, service.driver.controller) for i, service in cluster.services.items()]


def _unflushed(cluster: SimCluster, node_id: int) -> bool:
    """Whether node `node_id`'s metadata log holds appends it has not flushed."""
    raft = cluster.nodes[node_id].raft
    return raft is not None and raft.storage.log.recovery_point < raft.storage.log_end_offset


def _unhandled(context: dict[str, object]) -> str:
    error = context.get("exception")
    return f"{context.get('message')}: {type(error).__name__}: {error}" if error else str(context)


def _end_every_task(loop: VirtualLoop) -> None:
    """Cancel what is left on the loop (the workload, a failed run's main) and let it end."""
    left = asyncio.all_tasks(loop)
    for task in left:
        task.cancel()
    if left:
        loop.run_until_complete(asyncio.gather(*left, return_exceptions=True))


class _Run:
    """The workload, the faults and the end-of-run checks of one run."""

    def __init__(
        self,
        cluster: SimCluster,
        report: SimReport,
        rng: random.Random,
        workload: DataWorkload,
        committed: Callable[[], bytes | bytearray],  # the longest committed metadata log seen
    ) -> None:
        self.cluster = cluster
        self.committed = committed
        self.report = report
        self.rng = rng
        self.workload = workload
        self.acknowledged: set[str] = set()
        self.created = 0
        self.controller_hint: int | None = None
        self.node_faults: NodeFaults | None = None
        self.admin: AdminClient | None = None
        self.image: Callable[[], MetadataImage] = lambda: MetadataImage.EMPTY
        self.txn: TxnWorkload | None = None

    def note(self, what: str) -> None:
        self.report.events.append((self.cluster.loop.now_ms(), what))

    async def main(self) -> None:
        cluster = self.cluster
        for node_id in cluster.node_ids:
            cluster.start(node_id)
        client = asyncio.ensure_future(self.create_topics_forever())
        workload = self.workload
        workload.start()
        admin = self.admin
        assert admin is not None
        if self.txn is not None:
            self.txn.start()
        try:
            async with asyncio.timeout(SETUP_BOUND_S):
                await workload.create_topics()
                await admin.create_topic()
        except TimeoutError:
            raise InvariantViolation(
                f"the data topics were not created within {SETUP_BOUND_S:.0f} s of a healthy start"
            ) from None
        self.note("data topics created")
        operator = asyncio.ensure_future(admin.run())
        await self.faults(SAFETY_S)
        operator.cancel()
        (ended,) = await asyncio.gather(operator, return_exceptions=True)
        if not isinstance(ended, asyncio.CancelledError):
            raise InvariantViolation(f"the admin client failed: {ended!r}")
        cluster.network.heal()
        assert self.node_faults is not None
        self.node_faults.heal()
        for node in cluster.nodes.values():
            if not node.up:
                cluster.start(node.node_id)
        workload.stop_producing()
        self.note("faults stop")
        deadline = cluster.loop.time() + LIVENESS_BOUND_S
        await self.until_live()
        if self.txn is not None:  # every broker registered: the topic gets a replica on each
            self.txn.find_coordinator_after_faults()
        client.cancel()
        await asyncio.gather(client, return_exceptions=True)
        specs = (*workload.specs, admin.spec(self.image()))
        offline = await partitions_replicated(cluster, specs, deadline, self.committed)
        workload.counts["offline partitions"] = len(offline)
        self.note(
            "data partitions replicated"
            + (f" (offline by KIP-966: {sorted(offline)})" if offline else "")
        )
        await self.acknowledged_topics_exist()
        self.report.topics_acknowledged = len(self.acknowledged)
        await acked_batches_readable(cluster, workload, workload.checker, READABLE_BOUND_S, offline)
        if offline:
            deadline = cluster.loop.time() + LIVENESS_BOUND_S
            await self.elect_uncleanly(offline, deadline)
            await partitions_replicated(cluster, specs, deadline)
            self.note("data partitions replicated after the operator's unclean elections")
        workload.counts["offline partitions healed by unclean election"] = len(offline)
        await admin.settled(self.image, cluster.loop.time() + LIVENESS_BOUND_S)
        if self.txn is not None:
            await transactions_finished(cluster, self.txn.checker, TXN_FINISHED_BOUND_S)
            self.note("transactions finished")
            self.txn.stop()
        workload.stop()
        failures = [*workload.tasks.failures, *(self.txn.tasks.failures if self.txn else ())]
        if failures:
            raise InvariantViolation(f"a client task failed: {failures[0]}")

    # --- faults -------------------------------------------------------------------------------

    async def faults(self, duration_s: float) -> None:
        cluster, rng = self.cluster, self.rng
        loop = cluster.loop
        node_faults = self.node_faults
        assert node_faults is not None
        end = loop.time() + duration_s
        while loop.time() < end:
            await asyncio.sleep(rng.uniform(0.1, 1.0))
            up = [n.node_id for n in cluster.up_nodes()]
            down = [i for i in cluster.node_ids if i not in up]
            fault = self.report.fault_mix.draw(rng.random())
            if fault == "partition":
                split = rng.randint(1, len(cluster.node_ids) - 1)
                shuffled = rng.sample(cluster.node_ids, len(cluster.node_ids))
                groups = [shuffled[:split], shuffled[split:]]
                cluster.network.partition(groups)
                self.report.partitions += 1
                self.note(f"partition {groups}")
            elif fault == "heal":
                cluster.network.heal()
                self.note("heal")
            elif fault == "kill" and up:
                victim = rng.choice(up)
                cluster.kill(victim)
                self.report.kills += 1
                self.note(f"kill -9 node {victim}")
            elif fault == "clean restart" and up:
                for what in await node_faults.clean_restart(rng.choice(up)):
                    self.note(what)
            elif fault == "power loss" and up:
                victim = rng.choice(up)
                with node_faults.suspended():  # what is committed is seen before
                    self.workload.checker.check_replicas()
                self.report.unflushed_power_losses += _unflushed(cluster, victim)
                cluster.power_loss(victim)
                self.report.power_losses += 1
                self.note(f"power loss of node {victim}")
            elif fault == "whole power loss" and up:
                with node_faults.suspended():
                    self.workload.checker.check_replicas()
                for victim in up:
                    self.report.unflushed_power_losses += _unflushed(cluster, victim)
                    cluster.power_loss(victim)
                self.report.power_losses += len(up)
                self.report.whole_cluster_power_losses += 1
                self.note("power loss of every node")
            elif fault == "disk":
                repaired = node_faults.repair_disk()
                self.note(repaired or node_faults.fail_disk(rng.choice(cluster.node_ids)))
            elif fault == "slow disk":
                self.note(node_faults.slow_disk(rng.choice(cluster.node_ids)))
            elif fault == "clock":
                self.note(node_faults.jump_clock(rng.choice(cluster.node_ids)))
            elif down:
                self.note(node_faults.start(rng.choice(down)))
            elif (leader := self.quorum_leader()) is not None:
                # Every node up: the leader of the newest epoch resigns, as a controller does
                # on an error (EndQuorumEpoch to the voters, then an election).
                leader.resign()
                self.report.resignations += 1
                self.note(f"node {leader.node_id} resigns its leadership")

    # --- the client ---------------------------------------------------------------------------

    async def create_topics_forever(self) -> None:
        """A creation every few hundred ms, each its own task: a lost call holds up no other."""
        attempts: dict[asyncio.Task[bool], None] = {}  # in start order, as `SimTasks` keeps
        try:
            while True:
                await asyncio.sleep(self.rng.uniform(*CREATE_EVERY_S))
                attempt = asyncio.ensure_future(self.create_topic(f"topic-{self.created}"))
                attempts[attempt] = None
                attempt.add_done_callback(lambda done: attempts.pop(done, None))
                self.created += 1
        finally:
            for attempt in attempts:
                attempt.cancel()

    async def create_topic(self, name: str) -> bool:
        """One attempt through the controller the client believes active: whether the
        creation was acknowledged (a topic that already exists was, by an earlier attempt
        whose answer was lost)."""
        cluster = self.cluster
        target = self.controller_hint or self.rng.choice(cluster.voter_ids)
        request = pb.CreateTopicsRequest(
            topics=[pb.CreatableTopic(name=name, num_partitions=1, replication_factor=1)],
            timeout_ms=int(CALL_TIMEOUT_S * 1000),
        )
        try:
            answer = await self._call(target, request)
        except CallLost:
            self.controller_hint = None
            return False
        if answer.error.code:
            self.controller_hint = answer.controller_id if answer.controller_id > 0 else None
            return False
        result = answer.topics[0]
        if result.error.code in (0, 36):  # 36: TOPIC_ALREADY_EXISTS
            self.acknowledged.add(name)
            return True
        return False

    async def _call(self, target: int, request: pb.CreateTopicsRequest) -> pb.CreateTopicsResponse:
        service = self.cluster.services.get(target)

        async def serve(service: ControllerService | None = service) -> pb.CreateTopicsResponse:
            assert service is not None
            return await service.CreateTopics(request, None)

        return await self.cluster.network.call(
            CLIENT_ID, target, None if service is None else serve, timeout_s=CALL_TIMEOUT_S
        )

    # --- the end ------------------------------------------------------------------------------

    async def until_live(self) -> None:
        """Liveness (module docstring): raises once `LIVENESS_BOUND_S` passes without it."""
        loop = self.cluster.loop
        deadline = loop.time() + LIVENESS_BOUND_S
        while True:
            fenced = await self.brokers_at_active_controller()
            all_unfenced = (
                fenced is not None
                and sorted(fenced) == sorted(self.cluster.node_ids)
                and not any(fenced.values())
            )
            if all_unfenced and await self.create_topic(f"live-{self.created}"):
                self.note("live")
                return
            if loop.time() > deadline:
                raise InvariantViolation(
                    f"no progress {LIVENESS_BOUND_S:.0f} s after the faults stopped: "
                    f"brokers at the active controller (fenced?) {fenced}"
                )
            await asyncio.sleep(0.1)

    def quorum_leader(self) -> RaftDriver | None:
        """The Raft driver of the leader of the newest quorum epoch: a leader cut off in an
        older epoch may still believe it leads (until its check-quorum timeout)."""
        leaders = [
            (status.quorum_epoch, node.node_id, node.raft)
            for node in self.cluster.up_nodes()
            if node.raft is not None and (status := node.raft.status()).role == "leader"
        ]
        return max(leaders, key=lambda leader: leader[:2])[2] if leaders else None

    def active_controller(self) -> ControllerService | None:
        """The service of the leader of the newest quorum epoch (`quorum_leader`): a leader
        cut off in an older epoch answers from the metadata it had, which the end checks must
        not take for the cluster's."""
        leader = self.quorum_leader()
        return None if leader is None else self.cluster.services.get(leader.node_id)

    async def brokers_at_active_controller(self) -> dict[int, bool] | None:
        service = self.active_controller()
        if service is None:
            return None
        answer = await service.DescribeCluster(pb.DescribeClusterRequest(), None)
        if answer.error.code:
            return None
        return {b.broker_id: b.fenced for b in answer.brokers}

    async def elect_uncleanly(self, partitions: set[tuple[str, int]], deadline: float) -> None:
        """The operator's unclean election of `partitions` (module docstring, 4.), asked of
        the active controller again until each is elected or needs none; raises once
        `deadline` (virtual seconds) passes first."""
        loop, checker = self.cluster.loop, self.workload.checker
        data_topics = {spec.name for spec in self.workload.specs}
        for topic, index in sorted(partitions):
            if topic in data_topics:  # it may commit before the answer
                checker.note_unclean_election(topic, index)
        left = set(partitions)
        answered: object = "no active controller"
        while left:
            service = self.active_controller()
            if service is not None:
                request = pb.ElectLeadersRequest(
                    election_type=1,  # UNCLEAN
                    partitions=[
                        common_pb2.TopicPartition(topic=topic, partition=index)
                        for topic, index in sorted(left)
                    ],
                    timeout_ms=int(CALL_TIMEOUT_S * 1000),
                )
                answer = await service.ElectLeaders(request, None)
                answered = answer.error if answer.error.code else list(answer.results)
                for result in answer.results:
                    if result.error.code in (0, ElectionNotNeededError.code):
                        left.discard((result.topic, result.partition_index))
            if not left:
                self.note(f"unclean election of {sorted(partitions)} by the operator")
                return
            if loop.time() > deadline:
                raise InvariantViolation(
                    f"the operator's unclean election of {sorted(left)} did not succeed within "
                    f"{LIVENESS_BOUND_S:.0f} s: {answered}"
                )
            await asyncio.sleep(0.1)

    async def acknowledged_topics_exist(self) -> None:
        service = self.active_controller()
        answer = None if service is None else await service.Metadata(pb.MetadataRequest(), None)
        if answer is None or answer.error.code:
            raise InvariantViolation("no active controller answered Metadata at the end")
        present = {topic.name for topic in answer.topics}
        lost = sorted(self.acknowledged - present)
        if lost:
            raise InvariantViolation(f"{len(lost)} acknowledged topic creations lost: {lost[:5]}")
