"""A deterministic simulation of a Raft quorum: one seed, one run, invariants after every event.

The seed drives everything (swarm testing, as in TigerBeetle's VOPR): the cluster shape (3 or 5
voters, 0-2 observers), fault rates, network delays, timer jitter (each node's `random.Random`
is derived from it), the workload and the fault schedule. One thread, a virtual clock and a
priority queue of events ordered by (time, sequence number) make a run a pure function of its
seed and of the code.

Phases:
- Safety (`safety_ms` of virtual time): the network delays, drops, duplicates and reorders
  messages and partitions nodes; nodes crash, losing unflushed data (and some crash between
  writing a Ready and flushing it), and restart later; the state machines snapshot their state
  and compact their logs; a workload proposes to whoever it believes leads.
- Liveness: faults stop, every node restarts and the network heals. Within
  `liveness_bound_ms` a leader must commit a new proposal and every node must apply it.

After every event `InvariantChecker.check` runs (see invariants.py). A failure raises
`SimulationFailure` naming the seed and the command that replays it.
"""

from __future__ import annotations

import heapq
import itertools
import random
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace

from sim_host import NodeHost
from sim_invariants import InvariantChecker, InvariantViolation

from replog.errors import NotLeaderOrFollowerError
from replog.quorum.raft import CommittedBatch, Message, RaftConfig, RaftNode, VoterAddress
from replog.quorum.raft.messages import DescribeQuorumRequest

OBSERVER_BASE_ID = 101
CLIENT_ID = 999
EVENTS_MAX = 400_000
INBOX_MAX = 256


class SimulationFailure(AssertionError):
    """A run broke an invariant or made no progress; the message says how to replay it."""


def replay_command(seed: int) -> str:
    return f"SIM_SEED={seed} .venv/bin/pytest tests/sim -q"


@dataclass(frozen=True)
class SimOptions:
    """Everything the seed decides about a run's shape."""

    voters: int
    observers: int
    drop_rate: float
    duplicate_rate: float
    delay_ms_min: int
    delay_ms_max: int
    crash_rate: float  # per fault tick
    mid_ready_crash_rate: float  # per Ready
    partition_rate: float  # per fault tick
    resign_rate: float  # per fault tick
    fault_interval_ms: int
    propose_interval_ms: int
    snapshot_every_batches: int
    compact_rate: float
    linger_ms: int
    fetch_bytes_max: int
    safety_ms: int
    liveness_bound_ms: int

    @staticmethod
    def from_seed(rng: random.Random, safety_ms: int) -> SimOptions:
        return SimOptions(
            voters=rng.choice((3, 3, 5)),
            observers=rng.choice((0, 1, 2)),
            drop_rate=rng.choice((0.0, 0.02, 0.1)),
            duplicate_rate=rng.choice((0.0, 0.02, 0.05)),
            delay_ms_min=1,
            delay_ms_max=rng.choice((3, 10, 25)),
            crash_rate=rng.choice((0.0, 0.05, 0.15, 0.3)),
            mid_ready_crash_rate=rng.choice((0.0, 0.002)),
            partition_rate=rng.choice((0.0, 0.1, 0.3, 0.5)),
            resign_rate=rng.choice((0.0, 0.0, 0.05)),
            fault_interval_ms=rng.choice((30, 60, 120)),
            propose_interval_ms=rng.choice((5, 20, 50)),
            snapshot_every_batches=rng.choice((2, 5, 20, 1000)),
            compact_rate=rng.choice((0.0, 0.5, 1.0)),
            linger_ms=rng.choice((0, 0, 3)),
            # Small fetches split snapshots into many chunks and logs into many responses.
            fetch_bytes_max=rng.choice((256, 1024, 4096)),
            safety_ms=safety_ms,
            liveness_bound_ms=4000,
        )

    def raft_config(self) -> RaftConfig:
        return RaftConfig(
            voters=tuple(VoterAddress(i, "sim", 9000 + i) for i in range(1, self.voters + 1)),
            election_timeout_ms=100,
            fetch_timeout_ms=200,
            election_backoff_ms_max=100,
            election_backoff_ms_base=10,
            request_timeout_ms=80,
            append_linger_ms=self.linger_ms,
            retry_backoff_ms=10,
            fetch_wait_ms_max=40,
            fetch_bytes_max=self.fetch_bytes_max,
        )


@dataclass(frozen=True)
class RequestFailure:
    """What a real transport reports when a request of the node got no answer: refused
    (`unreachable`: the destination is down) or timed out."""

    destination_id: int
    correlation_id: int
    unreachable: bool


@dataclass
class _HostState:
    """The simulator's bookkeeping for one host (the "process scheduler" part of a shell)."""

    host: NodeHost
    inbox: deque[Message | RequestFailure] = field(default_factory=deque)
    pump_scheduled: bool = False
    busy: bool = False
    wake_at: int | None = None
    wake_generation: int = 0
    batches_since_snapshot: int = 0


@dataclass
class SimReport:
    seed: int
    options: SimOptions
    events: int
    end_ms: int
    committed_end: int
    leader_epochs: int
    crashes: int
    op_counts: dict[str, int]


class Simulation:
    """One run (module docstring)."""

    def __init__(
        self,
        seed: int,
        *,
        safety_ms: int = 1500,
        node_factory: Callable[..., RaftNode] = RaftNode,
        lying_disk_nodes: Iterable[int] = (),
        option_overrides: Mapping[str, object] | None = None,
    ) -> None:
        self.seed = seed
        self.rng = random.Random(seed)
        self.options = replace(
            SimOptions.from_seed(self.rng, safety_ms), **dict(option_overrides or {})
        )
        config = self.options.raft_config()
        voter_ids = list(range(1, self.options.voters + 1))
        observer_ids = list(range(OBSERVER_BASE_ID, OBSERVER_BASE_ID + self.options.observers))
        self.hosts: dict[int, _HostState] = {}
        for node_id in voter_ids + observer_ids:
            host = NodeHost(node_id, config, seed, node_factory=node_factory, snapshot_padding=600)
            self.hosts[node_id] = _HostState(host)
        for node_id in lying_disk_nodes:
            self.hosts[node_id].host.log.lies_about_fsync = True
        self.checker = InvariantChecker(state.host for state in self.hosts.values())
        for state in self.hosts.values():
            state.host.listener = self.checker
        self.now_ms = 0
        self._queue: list[tuple[int, int, Callable[[], None]]] = []
        self._sequence = itertools.count()
        self.faults_on = True
        self.groups: list[frozenset[int]] = []
        self.proposals = itertools.count()
        self.crashes = 0
        self.op_counts: dict[str, int] = {}
        self.liveness_marker: tuple[int, int, int] | None = None  # (epoch, offset, leader)
        self.done = False

    # --- scheduling -------------------------------------------------------------------------

    def at(self, time_ms: int, action: Callable[[], None]) -> None:
        heapq.heappush(self._queue, (time_ms, next(self._sequence), action))

    def run(self) -> SimReport:
        try:
            self._run()
        except (InvariantViolation, AssertionError) as e:
            raise SimulationFailure(
                f"seed {self.seed} failed at {self.now_ms} ms after {self.checker.events} "
                f"events ({self.options}): {e}\nreplay: {replay_command(self.seed)}"
            ) from e
        return SimReport(
            self.seed,
            self.options,
            self.checker.events,
            self.now_ms,
            self.checker.committed_end,
            len(self.checker.leaders_by_epoch),
            self.crashes,
            self.op_counts,
        )

    def _run(self) -> None:
        for state in self.hosts.values():
            state.host.start(0)
            self.poke(state)
        self.at(self.options.fault_interval_ms, self.fault_tick)
        self.at(1, self.workload_tick)
        self.at(self.options.safety_ms, self.begin_liveness)
        deadline = self.options.safety_ms + self.options.liveness_bound_ms
        while not self.done:
            if not self._queue:
                raise AssertionError("no events left")
            time_ms, _, action = heapq.heappop(self._queue)
            if time_ms > deadline:
                raise AssertionError(
                    f"no liveness: {self.options.liveness_bound_ms} ms after faults stopped, "
                    f"{self._liveness_problem()}"
                )
            self.now_ms = time_ms
            action()
            self.checker.check()
            if self.checker.events > EVENTS_MAX:
                raise AssertionError(f"more than {EVENTS_MAX} events")

    # --- the shell: processing Readies --------------------------------------------------------

    def poke(self, state: _HostState) -> None:
        """The host may have work: schedule a pump unless one is due or a Ready is in flight."""
        if state.host.node is None or state.busy or state.pump_scheduled:
            return
        state.pump_scheduled = True
        incarnation = state.host.incarnation
        self.at(self.now_ms + self.rng.randrange(0, 2), lambda: self.pump(state, incarnation))

    def pump(self, state: _HostState, incarnation: int) -> None:
        state.pump_scheduled = False
        host = state.host
        node = host.node
        if node is None or host.incarnation != incarnation or state.busy:
            return
        while state.inbox:
            item = state.inbox.popleft()
            if isinstance(item, RequestFailure):
                node.request_failed(
                    item.destination_id,
                    item.correlation_id,
                    unreachable=item.unreachable,
                    now_ms=self.now_ms,
                )
            else:
                node.step(item, self.now_ms)
        node.tick(self.now_ms)
        if not node.has_ready():
            self.arm_wake(state)
            return
        for message in host.write_phase():
            self.send(message)
        state.busy = True
        if self.faults_on and self.rng.random() < self.options.mid_ready_crash_rate:
            self.crash(state)  # written, not flushed, nothing sent
            return
        fsync_ms = self.rng.randrange(0, 3)
        self.at(self.now_ms + fsync_ms, lambda: self.finish(state, incarnation))

    def finish(self, state: _HostState, incarnation: int) -> None:
        host = state.host
        if host.node is None or host.incarnation != incarnation:
            return
        ready = host.in_flight
        assert ready is not None
        applied = sum(isinstance(item, CommittedBatch) for item in ready.to_apply)
        for op in ready.log_ops:
            self.op_counts[type(op).__name__] = self.op_counts.get(type(op).__name__, 0) + 1
        for message in host.finish_phase():
            self.send(message)
        state.busy = False
        state.batches_since_snapshot += applied
        self.maybe_snapshot(state)
        self.poke(state)

    def arm_wake(self, state: _HostState) -> None:
        node = state.host.node
        assert node is not None
        wake_at = node.wake_at_ms()
        if wake_at is None or wake_at == state.wake_at:
            return
        wake_at = max(wake_at, self.now_ms + 1)
        state.wake_at = wake_at
        state.wake_generation += 1
        generation = state.wake_generation

        def wake() -> None:
            if generation == state.wake_generation:
                state.wake_at = None
                self.poke(state)

        self.at(wake_at, wake)

    def maybe_snapshot(self, state: _HostState) -> None:
        """The state machine's snapshot policy: every N applied batches, then maybe compact."""
        host, node = state.host, state.host.node
        assert node is not None
        if state.batches_since_snapshot < self.options.snapshot_every_batches:
            return
        state.batches_since_snapshot = 0
        end_offset = host.machine.next_offset
        latest = host.log.snapshot_ids()
        if end_offset <= node.status().log_start_offset or (
            latest and end_offset <= latest[-1].end_offset
        ):
            return
        node.create_snapshot(end_offset, host.machine.snapshot_bytes(), self.now_ms)
        if latest and self.rng.random() < self.options.compact_rate:
            node.delete_log_prefix(latest[-1], self.now_ms)

    # --- network ------------------------------------------------------------------------------

    def send(self, message: Message) -> None:
        if message.destination_id == CLIENT_ID:
            return
        copies = 1
        if self.faults_on:
            if self.cut(message.source_id, message.destination_id) or (
                self.rng.random() < self.options.drop_rate
            ):
                self.maybe_report_timeout(message)
                return
            if self.rng.random() < self.options.duplicate_rate:
                copies = 2
        for _ in range(copies):
            delay = self.rng.randint(self.options.delay_ms_min, self.options.delay_ms_max)
            self.at(self.now_ms + delay, lambda: self.deliver(message))

    def report_failure(self, message: Message, *, unreachable: bool, delay_ms: int) -> None:
        """Tell the sender of a lost request, as its transport would, after `delay_ms`."""
        if not message.is_request:
            return
        source = self.hosts.get(message.source_id)
        if source is None or source.host.node is None:
            return
        incarnation = source.host.incarnation
        failure = RequestFailure(message.destination_id, message.body.correlation_id, unreachable)

        def report() -> None:
            if source.host.node is not None and source.host.incarnation == incarnation:
                source.inbox.append(failure)
                self.poke(source)

        self.at(self.now_ms + delay_ms, report)

    def maybe_report_timeout(self, message: Message) -> None:
        """A real transport reports a lost request when its deadline passes; sometimes the
        report itself is late or missing (the core must not depend on it)."""
        if self.rng.random() < 0.5:
            timeout = self.options.raft_config().request_timeout_ms
            self.report_failure(message, unreachable=False, delay_ms=timeout)

    def cut(self, source: int, destination: int) -> bool:
        source_group = next((g for g in self.groups if source in g), None)
        destination_group = next((g for g in self.groups if destination in g), None)
        return source_group is not destination_group

    def deliver(self, message: Message) -> None:
        state = self.hosts[message.destination_id]
        if state.host.node is None:
            # Nobody listens at a crashed node's port: the connection is refused.
            delay = self.rng.randint(self.options.delay_ms_min, self.options.delay_ms_max)
            self.report_failure(message, unreachable=True, delay_ms=delay)
            return
        if len(state.inbox) >= INBOX_MAX:
            return
        state.inbox.append(message)
        self.poke(state)

    # --- faults and workload ------------------------------------------------------------------

    def crash(self, state: _HostState) -> None:
        state.host.crash(self.rng)
        state.inbox.clear()
        state.busy = False
        state.pump_scheduled = False
        state.wake_at = None
        state.wake_generation += 1
        self.crashes += 1
        self.at(self.now_ms + self.rng.randrange(20, 400), lambda: self.restart(state))

    def restart(self, state: _HostState) -> None:
        if state.host.node is not None:
            return
        state.host.start(self.now_ms)
        state.batches_since_snapshot = 0
        self.poke(state)

    def fault_tick(self) -> None:
        if not self.faults_on:
            return
        options, rng = self.options, self.rng
        alive = [s for s in self.hosts.values() if s.host.node is not None]
        leaders = [
            s for s in alive if s.host.node is not None and s.host.node.status().role == "leader"
        ]
        if alive and rng.random() < options.crash_rate:
            # Leaders are the interesting victims: half the crashes aim at one.
            self.crash(rng.choice(leaders if leaders and rng.random() < 0.5 else alive))
        elif leaders and not leaders[0].busy and rng.random() < options.resign_rate:
            leader = leaders[0].host.node
            assert leader is not None
            leader.resign(self.now_ms)  # graceful: EndQuorumEpoch to the voters
            self.poke(leaders[0])
        if rng.random() < options.partition_rate:
            ids = list(self.hosts)
            rng.shuffle(ids)
            if leaders and rng.random() < 0.5:
                leader_id = leaders[0].host.node_id
                ids.remove(leader_id)
                ids.insert(0, leader_id)
            kind = rng.choice(("heal", "isolate", "split"))
            if kind == "heal":
                self.groups = []
            elif kind == "isolate":
                self.groups = [frozenset(ids[:1]), frozenset(ids[1:])]
            else:
                cut_at = rng.randrange(1, len(ids))
                self.groups = [frozenset(ids[:cut_at]), frozenset(ids[cut_at:])]
        self.at(self.now_ms + options.fault_interval_ms, self.fault_tick)

    def describe(self) -> None:
        """An operator's DescribeQuorum to a random node (the answer goes to a client id)."""
        state = self.rng.choice(list(self.hosts.values()))
        if state.host.node is not None:
            request = DescribeQuorumRequest(next(self.proposals))
            self.deliver(Message(CLIENT_ID, state.host.node_id, request))

    def workload_tick(self) -> None:
        # A client usually knows the leader; sometimes it asks a random node and is told off.
        leaders = [
            s
            for s in self.hosts.values()
            if s.host.node is not None and s.host.node.status().role == "leader"
        ]
        if leaders and self.rng.random() < 0.8:
            state = self.rng.choice(leaders)
        else:
            state = self.rng.choice(list(self.hosts.values()))
        node = state.host.node
        # In the liveness phase one proposal is the test; more would only race the catch-up.
        proposing = self.faults_on or self.liveness_marker is None
        if node is not None and not state.busy and proposing:
            values = [f"{self.seed}-{next(self.proposals)}".encode()]
            try:
                result = node.propose(values, self.now_ms)
            except NotLeaderOrFollowerError:
                pass
            else:
                if not self.faults_on and self.liveness_marker is None:
                    self.liveness_marker = (result.quorum_epoch, result.base_offset, node.node_id)
                self.poke(state)
        if self.rng.random() < 0.02:
            self.describe()
        if self.liveness_marker is not None:
            self.check_liveness()
        if not self.done:
            interval = self.options.propose_interval_ms if self.faults_on else 5
            self.at(self.now_ms + interval, self.workload_tick)

    def begin_liveness(self) -> None:
        self.faults_on = False
        self.groups = []
        for state in self.hosts.values():
            if state.host.node is None:
                self.restart(state)

    def check_liveness(self) -> None:
        """Done once the marker proposal committed and every node applied it; a marker lost
        to a leader change is replaced by the next successful proposal."""
        assert self.liveness_marker is not None
        epoch, offset, leader_id = self.liveness_marker
        if self.checker.table_end <= offset:
            leader = self.hosts[leader_id].host.node
            if leader is None or leader.election_state.quorum_epoch != epoch:
                self.liveness_marker = None  # its leader is gone before committing it
            return
        if self.checker.committed_epoch_at(offset) != epoch:
            self.liveness_marker = None
            return
        if all(
            s.host.node is not None and s.host.machine.next_offset > offset
            for s in self.hosts.values()
        ):
            self.done = True

    def _liveness_problem(self) -> str:
        statuses = []
        for node_id, state in sorted(self.hosts.items()):
            node = state.host.node
            if node is None:
                statuses.append(f"{node_id}: down")
                continue
            s = node.status()
            statuses.append(
                f"{node_id}: {s.role} epoch={s.quorum_epoch} leader={s.leader_id} "
                f"hw={s.high_watermark} end={s.log_end_offset} applied={s.applied_offset}"
            )
        return f"marker {self.liveness_marker}; nodes: " + "; ".join(statuses)


def run_seed(
    seed: int,
    *,
    safety_ms: int = 1500,
    node_factory: Callable[..., RaftNode] = RaftNode,
    lying_disk_nodes: Iterable[int] = (),
    option_overrides: Mapping[str, object] | None = None,
) -> SimReport:
    """Run one seed; raises `SimulationFailure` (with the replay command) on any violation."""
    simulation = Simulation(
        seed,
        safety_ms=safety_ms,
        node_factory=node_factory,
        lying_disk_nodes=lying_disk_nodes,
        option_overrides=option_overrides,
    )
    return simulation.run()
