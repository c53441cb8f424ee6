"""A deterministic simulation of the metadata quorum: controllers on the Raft simulation.

`ControllerSimulation` is the Raft `Simulation` (same seed-derived cluster shape, network
faults, crashes losing unflushed data, resignations, snapshots and compaction) with a metadata
layer on every host (`sim_controller_host.py`): voters run a `QuorumController`, observers the
broker-side image replay. On top, the clients of `sim_controller_workload.py`: simulated
brokers (register, heartbeat, AlterPartition; crash, stall, controlled shutdown) and an admin
client (topics, partitions, elections, reassignments, configs, reads). The seed also draws the
controller's settings (session timeout, batch size limit, balancing and unclean intervals).

Phases, as in the Raft simulation:
- Safety (`safety_ms`): all of the above under faults; `ControllerChecker` checks Raft's and
  the metadata layer's invariants after every event.
- Liveness (f): Raft faults stop, every node and broker restarts, stalled brokers resume.
  Within `liveness_bound_ms`: a CreateTopics request succeeds, every node applies it, a
  controller is active (and its node leads in its epoch), and every broker is registered as its
  live incarnation, unfenced and not shutting down in the committed metadata.

The runner also checks the service rule that a write reaching a standby is refused at once
with NOT_CONTROLLER (the answer carries the controller Raft last named as leader), and:

(g) The sweep of fenced brokers makes progress. The shell's timer fires every
    `CONTROLLER_TICK_MS` and ticks a controller only when its `next_wake_ms` is due, as the
    node's does. At every firing, for each active controller the shell may call, the
    (partition, broker) pairs its latest state names a fenced broker in (beside other ISR
    members, or as leader) are compared with those of its previous firing in the same term:
    while some are named, at least one must leave within every `SWEEP_STALL_TURNS` firings,
    and likewise of those where the fenced broker leads (not counting firings at which the
    controller refuses new writes, its purgatory full).
    So a fenced broker named in an ISR or as leader is moved out within a bounded number of
    loop turns after the active controller saw its fencing (from its activation, after a
    failover), whether the controller never sweeps, sweeps only on activation, or waits for
    some unrelated deadline to tick.

`EVACUATIONS` (with `EVACUATION_FAULTS` for Raft) is the profile that reaches that state
often: topics of up to 12 partitions, rarely deleted, a step of 2 partition changes, brokers
whose sessions expire often, rarer Raft faults (so that the large topics and the fencings
commit), and the Raft leader resigning (`fence_failover_rate`, per firing) while the committed
metadata names a fenced broker, so that a new active controller finds the moves half made.

The shell's rule stays the Raft one: the controller is called (requests, ticks) only while no
Raft `Ready` is in flight on its host; a request arriving meanwhile waits in the host's queue.
Replay a failing seed with `CONTROLLER_SIM_SEED=<seed>`.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from sim_controller_host import ControllerFactory, ControllerNodeHost
from sim_controller_invariants import Ack, ControllerChecker, ReadResult
from sim_controller_workload import CLUSTER_ID, AdminClient, Invoke, Reply, SimBroker
from sim_invariants import InvariantViolation
from sim_runner import Simulation, SimulationFailure, _HostState

from replog.errors import NotControllerError
from replog.quorum.controller.controller import QuorumController
from replog.quorum.controller.controller_config import ControllerConfig
from replog.quorum.controller.operation import ReadContext
from replog.quorum.controller.pending_response import PendingResponse
from replog.quorum.metadata.image import MetadataImage
from replog.quorum.metadata.records import NO_LEADER, PartitionRecord
from replog.quorum.raft import RaftNode

CONTROLLER_TICK_MS = 10
RPC_TIMEOUT_MS = 150
# (g): a tick runs the queued steps in order, at least one, and each chain (a sweep, a broker's
# evacuation or unfencing elections, a stepped request) holds one place in that queue: with at
# most 5 brokers, a dozen chains at once is generous.
SWEEP_STALL_TURNS = 12
# (g): a fenced broker named in a partition: (topic id, partition, broker, whether it leads).
Named = tuple[UUID, int, int, bool]


# Shorter than the Raft simulation's runs: the metadata layer costs time per event, and many
# short seeds (each its own cluster shape and settings) cover more than a few long ones.
DEFAULT_SAFETY_MS = 1000


def replay_command(seed: int, safety_ms: int = DEFAULT_SAFETY_MS, test: str = "test_seed") -> str:
    length = "" if safety_ms == DEFAULT_SAFETY_MS else f"CONTROLLER_SIM_SAFETY_MS={safety_ms} "
    return (
        f"CONTROLLER_SIM_SEED={seed} {length}.venv/bin/pytest "
        f"tests/sim/test_controller_simulation.py -q -k {test}"
    )


@dataclass(frozen=True)
class ControllerOptions:
    """Everything the seed decides about the metadata layer and its clients."""

    brokers: int
    racks: bool
    heartbeat_interval_ms: int
    session_timeout_ms: int
    max_idle_interval_ms: int
    max_records_per_batch: int
    max_pending_writes: int
    auto_leader_rebalance: bool
    balance_interval_ms: int
    unclean_interval_ms: int
    admin_interval_ms: int
    broker_fault_interval_ms: int
    broker_crash_rate: float
    broker_stall_rate: float
    broker_shutdown_rate: float
    max_partition_changes_per_step: int

    @staticmethod
    def from_seed(rng: random.Random) -> ControllerOptions:
        heartbeat = rng.choice((25, 50))
        return ControllerOptions(
            brokers=rng.choice((3, 4, 5)),
            racks=rng.random() < 0.3,
            heartbeat_interval_ms=heartbeat,
            session_timeout_ms=heartbeat * rng.choice((5, 8, 12)),
            max_idle_interval_ms=rng.choice((0, 100, 300)),
            # A small limit splits non-atomic writes (fencing many partitions) into batches and
            # refuses atomic ones that do not fit.
            max_records_per_batch=rng.choice((10_000, 10_000, 6, 2)),
            # A small purgatory makes writes fail fast (REQUEST_TIMED_OUT) under load.
            max_pending_writes=rng.choice((100_000, 100_000, 4)),
            auto_leader_rebalance=rng.random() < 0.7,
            balance_interval_ms=rng.choice((100, 400)),
            unclean_interval_ms=rng.choice((100, 400)),
            admin_interval_ms=rng.choice((5, 15, 40)),
            broker_fault_interval_ms=rng.choice((100, 200)),
            broker_crash_rate=rng.choice((0.0, 0.03, 0.1)),
            broker_stall_rate=rng.choice((0.0, 0.05, 0.1)),
            broker_shutdown_rate=rng.choice((0.0, 0.02, 0.05)),
            # A small limit steps broker events' writes over several ticks (drawn last, so
            # that the other options of a seed stay what they were).
            max_partition_changes_per_step=rng.choice((1_000, 1_000, 3, 1)),
        )

    # Not drawn: their defaults keep every seed's run as it was; `EVACUATIONS` sets them.
    partitions_per_topic: int = 3  # a CreateTopics asks for 1 to this many
    topic_delete_weight: float = 8  # of the admin's requests (`AdminClient.random_request`)
    fence_failover_rate: float = 0.0

    def controller_config(self, node_id: int) -> ControllerConfig:
        return ControllerConfig(
            node_id=node_id,
            cluster_id=CLUSTER_ID,
            broker_session_timeout_ms=self.session_timeout_ms,
            metadata_max_idle_interval_ms=self.max_idle_interval_ms,
            max_records_per_batch=self.max_records_per_batch,
            max_pending_writes=self.max_pending_writes,
            auto_leader_rebalance_enable=self.auto_leader_rebalance,
            leader_imbalance_check_interval_ms=self.balance_interval_ms,
            unclean_leader_election_interval_ms=self.unclean_interval_ms,
            leaderless_partition_check_interval_ms=self.unclean_interval_ms,
            max_partition_changes_per_step=self.max_partition_changes_per_step,
        )


EVACUATIONS: Mapping[str, object] = {
    "partitions_per_topic": 12,
    "topic_delete_weight": 1,
    "max_partition_changes_per_step": 2,
    "max_records_per_batch": 10_000,  # a topic's creation is atomic: it must fit in a batch
    "broker_stall_rate": 0.4,
    "broker_crash_rate": 0.1,
    "fence_failover_rate": 0.1,
}
# The Raft faults under `EVACUATIONS`: rarer than most seeds draw, so that the quorum commits
# the large topics and the fencings; the failovers that matter are the profile's own.
EVACUATION_FAULTS: Mapping[str, object] = {
    "crash_rate": 0.02,
    "partition_rate": 0.05,
    "drop_rate": 0.02,
}


@dataclass
class _SweepWatch:
    """(g) for one active controller's term: the pairs named at its last firing."""

    term: tuple[int, int | None]  # (host incarnation, claim epoch)
    named: frozenset[Named]
    # Firings since a pair last left: of all pairs, and of the leading ones (a leader's
    # AlterPartition moves fenced followers out of ISRs, so only the controller moves a fenced
    # leader, and a sweep that never runs shows there first).
    stalled: dict[bool, int] = field(default_factory=lambda: {False: 0, True: 0})


@dataclass
class ControllerReport:
    seed: int
    events: int
    end_ms: int
    committed_end: int
    leader_epochs: int
    crashes: int
    appended_batches: int
    reverted_batches: int  # appended by some controller, never committed as written
    stats: dict[str, int]


class ControllerSimulation(Simulation):
    """One run (module docstring)."""

    checker: ControllerChecker

    def __init__(
        self,
        seed: int,
        *,
        safety_ms: int = DEFAULT_SAFETY_MS,
        controller_factory: ControllerFactory = QuorumController,
        node_factory: Callable[..., RaftNode] = RaftNode,
        option_overrides: Mapping[str, object] | None = None,
        controller_overrides: Mapping[str, object] | None = None,
        replay_test: str = "test_seed",
    ) -> None:
        super().__init__(
            seed, safety_ms=safety_ms, node_factory=node_factory, option_overrides=option_overrides
        )
        # Drawn after the Raft options, from the same stream: one seed decides everything.
        self.ctl = ControllerOptions.from_seed(self.rng)
        self.replay_test = replay_test
        if controller_overrides:
            self.ctl = ControllerOptions(**{**self.ctl.__dict__, **controller_overrides})
        config = self.options.raft_config()
        # The base class built plain Raft hosts; replace them by metadata hosts (same ids).
        for node_id in list(self.hosts):
            host = ControllerNodeHost(
                node_id,
                config,
                seed,
                controller_config=self.ctl.controller_config,
                controller_factory=controller_factory,
                clock=lambda: self.now_ms,
                node_factory=node_factory,
            )
            self.hosts[node_id] = _HostState(host)
        self.checker = ControllerChecker(state.host for state in self.hosts.values())
        for state in self.hosts.values():
            state.host.listener = self.checker
        self.voter_ids = tuple(sorted(config.voter_ids))
        self.brokers = {
            broker_id: SimBroker(
                self, broker_id, f"rack-{broker_id % 2}" if self.ctl.racks else None
            )
            for broker_id in range(1, self.ctl.brokers + 1)
        }
        self.admin = AdminClient(self)
        self.stats: Counter[str] = Counter()
        self.sweep_watches: dict[int, _SweepWatch] = {}

    # --- running ------------------------------------------------------------------------------

    def run(self) -> ControllerReport:  # type: ignore[override]
        try:
            for broker in self.brokers.values():
                self.at(self.rng.randrange(1, 50), broker.start)
                self.at(self.rng.randrange(1, 50), broker.tick)
            self.at(CONTROLLER_TICK_MS, self.controller_tick)
            self.at(self.ctl.broker_fault_interval_ms, self.broker_fault_tick)
            self._run()
        except Exception as e:
            # A replay or controller failure is a finding as much as a broken invariant.
            kind = "" if isinstance(e, InvariantViolation | AssertionError) else f"{e!r} from "
            raise SimulationFailure(
                f"seed {self.seed} failed at {self.now_ms} ms after {self.checker.events} "
                f"events ({self.options}, {self.ctl}): {kind}{e}\n"
                f"replay: {replay_command(self.seed, self.options.safety_ms, self.replay_test)}"
            ) from e
        appended = [b for state in self.hosts.values() for b in _appended(state)]
        reverted = sum(1 for batch in appended if not self._committed_as_written(batch))
        return ControllerReport(
            self.seed,
            self.checker.events,
            self.now_ms,
            self.checker.committed_end,
            len(self.checker.leaders_by_epoch),
            self.crashes,
            len(appended),
            reverted,
            dict(self.checker.stats + self.stats),
        )

    def _committed_as_written(self, batch: Any) -> bool:
        records = self.checker.records[batch.base_offset : batch.last_offset + 1]
        return batch.last_offset < self.checker.table_end and records == list(batch.records)

    # --- the controller shell: requests and ticks ---------------------------------------------

    def rpc(
        self, node_id: int, description: str, invoke: Invoke, on_reply: Callable[[Reply], None]
    ) -> None:
        """Send a request to node `node_id`'s controller; `on_reply` runs exactly once, with
        the answer or with a failure (refused connection, lost request or answer: timeout)."""
        answered = False

        def reply(answer: Reply) -> None:
            nonlocal answered
            if not answered:
                answered = True
                on_reply(answer)

        def time_out() -> None:
            if answered:
                self.checker.quiet = True  # the usual case, which changes nothing
            else:
                reply(Reply(answered=False))

        self.at(self.now_ms + RPC_TIMEOUT_MS, time_out)
        if self._lost():
            return
        # The network may deliver a request twice; the client takes the first answer.
        copies = 2 if self.faults_on and self.rng.random() < self.options.duplicate_rate else 1
        for _ in range(copies):
            arrive = self.now_ms + self._delay()
            self.at(arrive, lambda: self._arrive(node_id, description, invoke, reply))

    def _arrive(
        self, node_id: int, description: str, invoke: Invoke, reply: Callable[[Reply], None]
    ) -> None:
        state = self.hosts[node_id]
        host = state.host
        assert isinstance(host, ControllerNodeHost)
        if host.node is None:
            self.at(self.now_ms + self._delay(), lambda: reply(Reply(answered=False)))
            return
        if not host.can_call_controller:
            # A Ready is in flight: the request waits in the shell's queue.
            self.at(self.now_ms + 1, lambda: self._arrive(node_id, description, invoke, reply))
            return
        controller = host.controller
        assert controller is not None
        was_active = controller.is_active
        with host.record_appends() as appended:
            answer = invoke(controller, self.now_ms)
        if isinstance(answer, PendingResponse):
            if not was_active and not isinstance(answer.error, NotControllerError):
                raise InvariantViolation(
                    f"standby controller {node_id} answered {description!r} with {answer} "
                    "instead of NOT_CONTROLLER"
                )

            def settled(pending: PendingResponse[Any]) -> None:
                error = pending.error
                if error is None:
                    self.checker.acknowledged(Ack(description, node_id, tuple(appended)))
                elif appended:
                    self.stats["failed writes that had appended"] += 1
                value = None if error is not None else pending.result()
                self._answer(
                    reply, Reply(True, value, error, controller.leader_id, tuple(appended))
                )

            answer.add_done_callback(settled)
        else:
            self._answer(reply, Reply(True, answer, None, controller.leader_id))
        self.poke(state)

    def _answer(self, reply: Callable[[Reply], None], answer: Reply) -> None:
        if not self._lost():
            self.at(self.now_ms + self._delay(), lambda: reply(answer))

    def _lost(self) -> bool:
        return self.faults_on and self.rng.random() < self.options.drop_rate

    def _delay(self) -> int:
        return self.rng.randint(self.options.delay_ms_min, self.options.delay_ms_max)

    def read_from(self, node_id: int) -> None:
        """A describe of every topic and broker, checked against the committed log (c)."""

        def invoke(controller: QuorumController, now_ms: int) -> ReadResult:
            def query(ctx: ReadContext) -> ReadResult:
                return ReadResult(
                    node_id,
                    controller.last_committed_offset,
                    {
                        d.name: (d.topic_id, d.partitions)  # type: ignore[misc]
                        for d in ctx.replication.describe_topics(ctx.offset)
                    },
                    ctx.cluster.registrations(ctx.offset),
                )

            result = controller.read(query)
            self.checker.read_returned(result)
            return result

        self.rpc(node_id, "describe", invoke, lambda reply: None)

    def controller_tick(self) -> None:
        """The shell's timer: run each controller's periodic work when it is due."""
        self.checker.quiet = True
        for state in self.hosts.values():
            host = state.host
            assert isinstance(host, ControllerNodeHost)
            if not host.can_call_controller:
                continue
            controller = host.controller
            assert controller is not None
            can_write = len(controller.purgatory) < controller.config.max_pending_writes
            wake = controller.next_wake_ms(self.now_ms)
            if wake is not None and wake <= self.now_ms:
                controller.tick(self.now_ms)
                self.checker.quiet = False
                self.poke(state)
            if controller.is_active:
                self._watch_sweep(host.node_id, host.incarnation, controller, can_write)
                self._fail_over_mid_sweep(state)
        if not self.done:
            self.at(self.now_ms + CONTROLLER_TICK_MS, self.controller_tick)

    def _watch_sweep(
        self, node_id: int, incarnation: int, controller: QuorumController, can_write: bool
    ) -> None:
        """(g), at one firing of the shell's timer (module docstring)."""
        named = _fenced_named(controller)
        term = (incarnation, controller.claim_epoch)
        watch = self.sweep_watches.get(node_id)
        if watch is None or watch.term != term:
            watch = self.sweep_watches[node_id] = _SweepWatch(term, named)
            if named:
                self.stats["activations finding a fenced broker named"] += 1
            return
        if named:
            self.stats["turns with a fenced broker named"] += 1
        for leading in (False, True):
            now = {pair for pair in named if pair[3] or not leading}
            before = {pair for pair in watch.named if pair[3] or not leading}
            if not now or before - now:
                watch.stalled[leading] = 0
            elif can_write:
                watch.stalled[leading] += 1
                if watch.stalled[leading] > SWEEP_STALL_TURNS:
                    where = "as leaders" if leading else "in ISRs or as leaders"
                    raise InvariantViolation(
                        f"active controller {node_id} (quorum epoch {controller.claim_epoch}) "
                        f"has named fenced brokers {where} "
                        f"for {watch.stalled[leading]} turns of {CONTROLLER_TICK_MS} ms without "
                        f"moving any out: {sorted(now, key=str)[:6]} ({len(now)} in all)"
                    )
        watch.named = named

    def _fail_over_mid_sweep(self, state: _HostState) -> None:
        """The `EVACUATIONS` fault: the leader resigns while the committed metadata names a
        fenced broker, so that the next active controller finds the moves half made."""
        node = state.host.node
        rate = self.ctl.fence_failover_rate
        if not (rate and self.faults_on and self.checker.fenced_named and node is not None):
            return
        if node.status().role == "leader" and self.rng.random() < rate:
            node.resign(self.now_ms)
            self.checker.quiet = False
            self.stats["failovers while a fenced broker is named"] += 1
            self.poke(state)

    # --- workload and faults -----------------------------------------------------------------

    def workload_tick(self) -> None:
        """The admin client's requests: random ones under faults, the marker in liveness."""
        if self.faults_on:
            self.admin.random_request()
            if self.rng.random() < 0.02:
                self.describe()
        else:
            self.admin.create_marker_topic()
            self.check_liveness()
        if not self.done:
            interval = self.ctl.admin_interval_ms if self.faults_on else 10
            self.at(self.now_ms + interval, self.workload_tick)

    def broker_restart_delay_ms(self) -> int:
        return self.rng.randrange(50, 600) if self.faults_on else 10

    def broker_fault_tick(self) -> None:
        if not self.faults_on:
            return
        rng, ctl = self.rng, self.ctl
        running = [b for b in self.brokers.values() if b.mode == "running"]
        if running and rng.random() < ctl.broker_crash_rate:
            rng.choice(running).stop(self.broker_restart_delay_ms())
            self.stats["broker crashes"] += 1
        elif running and rng.random() < ctl.broker_stall_rate:
            broker = rng.choice(running)
            broker.mode = "stalled"
            self.stats["broker stalls"] += 1
            stall_ms = int(ctl.session_timeout_ms * rng.uniform(0.5, 3.0))

            def resume() -> None:
                if broker.mode == "stalled":
                    broker.mode = "running"

            self.at(self.now_ms + stall_ms, resume)
        elif running and rng.random() < ctl.broker_shutdown_rate:
            rng.choice(running).mode = "shutting_down"
            self.stats["controlled shutdowns started"] += 1
        self.at(self.now_ms + ctl.broker_fault_interval_ms, self.broker_fault_tick)

    def begin_liveness(self) -> None:
        super().begin_liveness()
        for broker in self.brokers.values():
            if broker.mode == "down":
                broker.start()
            elif broker.mode == "stalled":
                broker.mode = "running"

    def check_liveness(self) -> None:
        """(f): done once the marker topic committed and every node applied it, a controller
        is active, every broker is healthy in the committed metadata, and so every partition
        has a leader (each has a live ISR member then)."""
        offset = self.admin.marker_offset
        if offset is None:
            return
        hosts = [state.host for state in self.hosts.values()]
        if any(h.node is None or h.machine.next_offset <= offset for h in hosts):
            return
        image = self.checker.latest_image
        if not all(broker.healthy_in(image) for broker in self.brokers.values()):
            return
        if _leaderless(image):
            return
        if not any(self._active_leader(host) for host in hosts):
            return
        self.done = True

    @staticmethod
    def _active_leader(host: Any) -> bool:
        controller, node = host.controller, host.node
        return (
            controller is not None
            and node is not None
            and controller.is_active
            and node.status().role == "leader"
            and node.election_state.quorum_epoch == controller.claim_epoch
        )

    def _liveness_problem(self) -> str:
        image = self.checker.latest_image
        brokers = "; ".join(
            f"broker {b.broker_id}: {b.mode} epoch={b.epoch} fenced={b.fenced} "
            f"registered={image.cluster.brokers.get(b.broker_id)}"
            for b in self.brokers.values()
        )
        controllers = "; ".join(
            f"{node_id}: {state.host.controller!r}"  # type: ignore[attr-defined]
            for node_id, state in sorted(self.hosts.items())
            if getattr(state.host, "controller", None) is not None
        )
        return (
            f"marker offset {self.admin.marker_offset} after {self.admin.marker_attempts} "
            f"attempts; {super()._liveness_problem()}; controllers: {controllers}; {brokers}; "
            f"leaderless partitions: {_leaderless(image)}"
        )


def _fenced_named(controller: QuorumController) -> frozenset[Named]:
    """(topic id, partition, broker, whether it leads) for every fenced broker the controller's
    latest state names beside other ISR members or as leader (unregistered ones are property
    e's)."""
    registrations = controller.cluster.registrations(None)
    fenced = {broker_id for broker_id, r in registrations.items() if r.fenced}
    if not fenced:
        return frozenset()
    named: set[Named] = set()
    for record in controller.replication.snapshot_records(None):
        if not isinstance(record, PartitionRecord):
            continue
        for broker_id in record.isr:
            leads = broker_id == record.leader
            if broker_id in fenced and (leads or len(record.isr) > 1):
                named.add((record.topic_id, record.partition_id, broker_id, leads))
    return frozenset(named)


def _leaderless(image: MetadataImage) -> int:
    return sum(
        partition.leader == NO_LEADER
        for topic in image.topics.by_name.values()
        for partition in topic.partitions.values()
    )


def _appended(state: _HostState) -> list[Any]:
    host = state.host
    return list(getattr(host, "appended_log", ()))


def run_controller_seed(
    seed: int,
    *,
    safety_ms: int = DEFAULT_SAFETY_MS,
    controller_factory: ControllerFactory = QuorumController,
    option_overrides: Mapping[str, object] | None = None,
    controller_overrides: Mapping[str, object] | None = None,
    replay_test: str = "test_seed",
) -> ControllerReport:
    """Run one seed; raises `SimulationFailure` (with the replay command, which runs
    `replay_test`) on any violation."""
    return ControllerSimulation(
        seed,
        safety_ms=safety_ms,
        controller_factory=controller_factory,
        option_overrides=option_overrides,
        controller_overrides=controller_overrides,
        replay_test=replay_test,
    ).run()
