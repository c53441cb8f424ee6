"""A seeded simulation of the data plane under random faults: produces, follower fetches,
consumer reads, crashes, power failures, restarts, network cuts, metadata that arrives late,
leader changes and time passing, in random order, with the safety invariants checked after
every step.

The scenario tests (`test_scenarios_kafka.py`) replay docs/design/replication.md#scenarios scripts;
this file looks for the sequences nobody scripted. Each seed drives `scenario_harness.Cluster` (real
ReplicaManagers over real logs; the harness plays controller, network and clock) through
`STEPS` random steps on two topics (RF 3, min.insync.replicas 2, led by different brokers),
then heals every fault and lets replication settle. One topic takes plain
produces (acks=all and acks=1) and DeleteRecords; the other takes the batches of one idempotent
producer, one in flight at a time, each retried with the same sequences after any retriable
error or dropped call until it is acknowledged (Kafka's producer with
`max.in.flight.requests.per.connection` = 1).

Faults, and the controller's answers to them:
- kill -9 of a broker (the page cache survives); the controller fences it a few steps later
  (its session times out), moving leadership to a live ISR member; it restarts only once
  fenced (KRaft refuses a second registration of a live incarnation);
- a power failure: the active `.log` loses its tail from a random batch on, sometimes with torn
  bytes left behind. Without ELR (docs/design/replication.md#leader-election, KIP-966) a replica
  that lost acknowledged records may be left the last ISR member and lead, which
  docs/design/replication.md#scenarios documents as a loss (S5), so a power failure strikes only
  while every other broker is up, connected, current and in the ISR, and no other fault is injected
  until the broker is back in the ISR;
- a broker cut off the data plane (its fetches and the fetches to it fail; the controller still
  hears it), healed later;
- a broker that stops receiving metadata for a while (it acts on a stale image), then catches
  up;
- a clean election of another live ISR member (a preferred or reassigned leader: KIP-279's fast
  leader changes), and lost fetch requests and answers;
- DeleteRecords at a random offset up to the HW (often inside a batch), and, in half the
  seeds, segments of 1 KiB, so that truncation, recovery and deletion cross segment bounds;
- one broker per seed fetching one batch per request (a slow link), so that followers trail
  the HW by whole batches for many steps;
- in every fourth seed, unclean elections on the plain topic: once its last ISR member is
  fenced, the controller may elect a live replica outside the ISR
  (docs/design/replication.md#leader-election: ISR := [it], RECOVERING). The documented loss is
  computed before: from the first offset at which the new leader lacks (or holds otherwise) a record
  acknowledged under acks=all or read by a consumer, those acknowledgements and reads are forgiven;
  everything below must survive, and that offset may not lie below the new leader's HW (what a
  replica holds below its HW is committed: a difference there is a replication fault, not the
  election's), unless an earlier unclean election left it stale. The idempotent topic stays clean (a
  loss would break its exactly-once check by design).
In odd seeds followers fetch as the real fetcher does, in a replica fetch stream's
incremental fetch session served by the leader's `BrokerCores` (idle entries answered from
kept reads); in even ones straight from the replica managers. A second test runs seeds both
ways without the slow link and requires the same steps, outcomes and final logs.

Invariants, after every step:
- every record acknowledged under acks=all is at its offset, with its value, on the leader
  and on every live ISR member (ISR as the controller committed it), unless DeleteRecords
  removed it there;
- two live replicas hold the same batches below the smaller of their high watermarks (except
  a replica that was outside the ISR at an unclean election, until it is back in the ISR:
  below its old HW it may hold what the election lost until it fetches and truncates);
- `log start <= HW <= LEO` on every replica, a log start no higher than the highest
  DeleteRecords offset asked for (no retention runs here), and a leader's HW never goes back
  within its leader epoch;
- a consumer (reading from the leader, its current leader epoch named) never receives a record
  at or above the answer's HW, and what any consumer read at an offset never changes;
- no two acknowledged writes share an offset, and the idempotent producer's batches fail only
  with retriable errors (never OUT_OF_ORDER_SEQUENCE_NUMBER).
After the settle: all three replicas are in every ISR with the same logs, holding every
acknowledged record and everything a consumer read (above the log start offset), and the
idempotent producer's batches are each in the log exactly once, in sequence order, with no
sequence missing: retries of a batch that was appended but not answered are de-duplicated,
through leader changes, truncations and rebuilt producer state.

It found two faults, both now fixed and replayed step by step in
`test_found_by_simulation.py`: a leader re-elected past a missed epoch counting a follower's
stale log end offset towards the HW, and a follower stranded by a truncation to a log start
offset inside a batch. Wider runs than CI's (ad hoc; see docs/reliability.md) call `simulate`
with other seeds and step counts.
"""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from scenario_harness import Cluster

from replog.errors import (
    NotEnoughReplicasAfterAppendError,
    NotEnoughReplicasError,
    NotLeaderOrFollowerError,
    RequestTimedOutError,
)
from replog.quorum.metadata.records import NO_LEADER
from replog.record import RecordBatch, iter_frames
from replog.replication.messages import (
    ACKS_ALL,
    ACKS_LEADER,
    ProducePartitionResult,
)
from replog.storage.log_config import LogConfig

T = "events"  # plain produces (acks=all and acks=1) and DeleteRecords
IDEM = "ledger"  # one idempotent producer, one batch in flight, retried until acked
TOPICS = (T, IDEM)
BROKERS = (1, 2, 3)
SEEDS = range(24)
STEPS = 400
LAG_MS = 1_000
PRODUCER_ID = 4_000
# Rounds to catch up after healing: the slow broker fetches one batch per round.
SETTLE_ROUNDS = 2 * STEPS
SMALL_SEGMENT_BYTES = 1_024
# A batch's base offset and length (64 bytes), with nothing after them.
TORN_HEADER = (7).to_bytes(8, "big") + (64).to_bytes(4, "big")
ONE_BATCH_PER_FETCH = {"replica_fetch_max_bytes": 1, "replica_fetch_response_max_bytes": 1}
# What a retry may follow: the leader moved or died, or replication did not finish in time.
RETRIABLE = (
    NotLeaderOrFollowerError,
    RequestTimedOutError,
    NotEnoughReplicasError,
    NotEnoughReplicasAfterAppendError,
)


@dataclass
class InFlight:
    """The idempotent producer's batch: sequences [sequence, sequence + len(values))."""

    sequence: int
    values: list[bytes]
    task: asyncio.Task[ProducePartitionResult] | None = None  # None: to be sent (again)
    attempts: int = 0


@dataclass
class Sim:
    """One seed's run: the cluster, the faults in force and what clients were told."""

    c: Cluster
    rng: random.Random
    crashed: set[int] = field(default_factory=set)  # down, not yet fenced by the controller
    fenced: set[int] = field(default_factory=set)  # down and fenced: may restart
    power_failed: int | None = None  # lost its page cache; not back in every ISR yet
    tasks: list[tuple[asyncio.Task[ProducePartitionResult], int, list[bytes]]] = field(
        default_factory=list
    )
    in_flight: InFlight | None = None
    next_sequence: int = 0
    # Per topic: offset -> value read by consumers (what acks=all acknowledged is the
    # harness's ledger, `c.ledger.acked`).
    seen: dict[str, dict[int, bytes | None]] = field(
        default_factory=lambda: {t: {} for t in TOPICS}
    )
    # (topic, broker, leader epoch) -> the last HW seen there.
    leader_hw: dict[tuple[str, int, int], int] = field(default_factory=dict)
    trace: list[str] = field(default_factory=list)
    # (broker, topic) -> (log start offset, batches) once healed and settled.
    final_logs: dict[tuple[int, str], tuple[int, list[tuple[int, bytes]]]] = field(
        default_factory=dict
    )
    next_value: int = 0
    counts: dict[str, int] = field(default_factory=dict)
    # Whether T allows unclean elections (IDEM never does: its exactly-once check would not
    # hold across a documented loss).
    unclean: bool = False
    # Replicas of T outside its ISR at an unclean election, until back in the ISR: below their
    # old HW they may hold what the election lost, until they fetch and truncate.
    stale: set[int] = field(default_factory=set)
    deleted_to: dict[str, int] = field(default_factory=dict)  # highest DeleteRecords offset

    # --- helpers --------------------------------------------------------------------------

    def alive(self) -> list[int]:
        return self.c.alive_ids()

    def live_leader(self, topic: str) -> int | None:
        leader = self.c.partition(topic).leader
        return leader if leader != NO_LEADER and self.c.brokers[leader].alive else None

    def fragile(self) -> bool:
        """A power-failed replica is not back in every ISR: no second fault now (module doc).
        Until the controller fences it, a dead broker is still listed in the ISRs: back means
        restarted (which needs the fence, which takes it out) and in them again."""
        broker = self.power_failed
        if broker is None:
            return False
        if self.c.brokers[broker].alive and all(broker in self.c.partition(t).isr for t in TOPICS):
            self.power_failed = None
            return False
        return True

    def new_values(self, count: int) -> list[bytes]:
        values = [f"v{self.next_value + i}".encode() for i in range(count)]
        self.next_value += count
        return values

    def note(self, what: str) -> None:
        self.trace.append(what)
        kind = what.split(" ", 1)[0]
        self.counts[kind] = self.counts.get(kind, 0) + 1

    # --- steps ----------------------------------------------------------------------------

    def produce(self) -> None:
        leader = self.live_leader(T)
        if leader is None:
            return
        acks = ACKS_ALL if self.rng.random() < 0.85 else ACKS_LEADER
        values = self.new_values(self.rng.randint(1, 3))
        timeout_ms = self.rng.choice((300, 1_000, 5_000))
        task = self.c.start_produce(leader, T, values, acks=acks, timeout_ms=timeout_ms)
        self.tasks.append((task, acks, values))
        self.note(f"produce acks={acks} {len(values)} to {leader}")

    def produce_idempotent(self) -> None:
        """The next batch, or the retry of the last one (same sequences, same values), as
        Kafka's idempotent producer with max.in.flight.requests.per.connection = 1."""
        leader = self.live_leader(IDEM)
        flight = self.in_flight
        if leader is None or (flight is not None and flight.task is not None):
            return
        if flight is None:
            flight = InFlight(self.next_sequence, self.new_values(self.rng.randint(1, 3)))
            self.next_sequence += len(flight.values)
            self.in_flight = flight
        flight.attempts += 1
        flight.task = self.c.start_produce(
            leader,
            IDEM,
            flight.values,
            timeout_ms=self.rng.choice((300, 1_000, 5_000)),
            batch_options={
                "producer_id": PRODUCER_ID,
                "producer_epoch": 0,
                "base_sequence": flight.sequence,
            },
        )
        self.note(f"produce-idempotent seq={flight.sequence} try={flight.attempts} to {leader}")

    async def fetch(self) -> None:
        followers = [b for b in self.alive() if self.c.rm(b).fetch_sources()]
        if not followers:
            return
        follower = self.rng.choice(followers)
        source = self.rng.choice(self.c.rm(follower).fetch_sources())
        drop_request = self.rng.random() < 0.05
        drop_response = not drop_request and self.rng.random() < 0.05
        await self.c.deliver_fetch(
            follower, source, drop_request=drop_request, drop_response=drop_response
        )
        self.note(f"fetch {follower}<-{source} drop={drop_request or drop_response}")

    def answer_isr(self) -> None:
        committed = self.c.answer_isr_changes()
        self.note(f"isr answered {committed}")

    def advance(self) -> None:
        ms = self.rng.choice((1, 10, 50, 100, 200)) if self.rng.random() < 0.9 else LAG_MS // 2
        self.c.advance(ms)
        self.note(f"advance {ms}")

    def crash(self) -> None:
        if self.fragile():
            return
        candidates = self.alive()
        if len(candidates) < 2:  # keep one broker up: a crash of all is S5's territory
            return
        if len(candidates) < len(BROKERS) and self.rng.random() < 0.7:
            return  # a second broker down at once, but less often
        broker = self.rng.choice(candidates)
        others_ready = all(
            b in self.alive()
            and b not in self.c.isolated
            and b not in self.c.held_back
            and all(b in self.c.partition(t).isr for t in TOPICS)
            for b in BROKERS
            if b != broker
        )
        if others_ready and self.rng.random() < 0.3:
            cuts = {}
            for topic in TOPICS:
                log = self.c.log(broker, topic)
                cuts[topic] = self.rng.randint(log.log_start_offset, log.log_end_offset)
            # Half the time a batch header whose body never reached the disk.
            torn = {T: TORN_HEADER} if cuts[T] % 2 else None
            self.c.crash(broker, cut_to_offset=cuts, torn_tail=torn)
            self.power_failed = broker
            self.note(f"power-failure {broker} from offsets {cuts} torn={bool(torn)}")
        else:
            self.c.crash(broker)
            self.note(f"crash {broker}")
        self.crashed.add(broker)

    def fence(self) -> None:
        if not self.crashed:
            return
        broker = self.rng.choice(sorted(self.crashed))
        self.crashed.discard(broker)
        self.fenced.add(broker)
        self.c.fence(broker)
        self.note(f"fence {broker}")

    def restart(self) -> None:
        if not self.fenced:
            return
        broker = self.rng.choice(sorted(self.fenced))
        self.fenced.discard(broker)
        self.c.held_back.discard(broker)  # a new incarnation reads the metadata log afresh
        self.c.restart(broker)
        self.note(f"restart {broker}")

    def isolate(self) -> None:
        if self.c.isolated or self.fragile():
            return
        broker = self.rng.choice(self.alive())
        self.c.isolate(broker)
        self.note(f"isolate {broker}")

    def heal(self) -> None:
        if self.c.isolated:
            healed = sorted(self.c.isolated)
            self.c.heal()
            self.note(f"heal {healed}")

    def hold_metadata(self) -> None:
        if self.c.held_back or self.fragile():
            return
        broker = self.rng.choice(self.alive())
        self.c.held_back.add(broker)
        self.note(f"metadata held {broker}")

    def release_metadata(self) -> None:
        if self.c.held_back:
            broker = self.c.held_back.pop()
            self.c.publish()
            self.note(f"metadata caught-up {broker}")

    def elect(self) -> None:
        topic = self.rng.choice(TOPICS)
        registration = self.c.partition(topic)
        candidates = [
            b
            for b in registration.isr
            if b != registration.leader and b in self.alive() and b not in self.fenced
        ]
        if not candidates:
            return
        leader = self.rng.choice(candidates)
        self.c.elect(topic, leader)
        self.note(f"elect {topic} {leader} epoch={self.c.partition(topic).leader_epoch}")

    def elect_unclean(self) -> None:
        """With T leaderless (its last ISR member fenced), the controller elects a live
        replica outside the ISR (docs/design/replication.md#leader-election). What the new leader
        does not hold as acknowledged or read, from the first such offset on, is the loss the design
        note documents: forgiven in the ledger and in what consumers read, and nothing else may
        go."""
        registration = self.c.partition(T)
        if not self.unclean or registration.leader != NO_LEADER:
            return
        candidates = [
            b for b in registration.replicas if b not in registration.isr and b in self.alive()
        ]
        if not candidates:
            return
        leader = self.rng.choice(candidates)
        log = self.c.log(leader, T)
        held = self.c.records(leader, T)
        differing = [
            offset
            for known in (self.c.ledger.acked.get(T, {}), self.seen[T])
            for offset, value in known.items()
            if offset >= log.log_start_offset and held.get(offset) != value
        ]
        loss_from = min(differing, default=log.log_end_offset)
        # Below its HW a replica holds committed records: a loss there is a replication
        # fault, not the election's (unless an earlier unclean election left it stale).
        assert leader in self.stale or loss_from >= log.high_watermark, (
            f"{T}: replica {leader} differs from what was acknowledged or read at offset "
            f"{loss_from}, below its HW {log.high_watermark}"
        )
        lost = self.c.ledger.forgive_from(T, loss_from, f"unclean election of {leader}")
        for offset in [o for o in self.seen[T] if o >= loss_from]:
            del self.seen[T][offset]
        self.stale = (self.stale | set(candidates)) - {leader}
        self.c.elect_unclean(T, leader)
        self.note(
            f"elect-unclean {T} {leader} epoch={self.c.partition(T).leader_epoch} "
            f"LEO={log.log_end_offset} loss-from={loss_from} acked-lost={len(lost)}"
        )

    async def consume(self) -> None:
        topic = self.rng.choice(TOPICS)
        leader = self.live_leader(topic)
        if leader is None:
            return
        log = self.c.log(leader, topic)
        offset = self.rng.randint(log.log_start_offset, log.high_watermark)
        result = await self.c.consumer_fetch(
            leader, topic, offset, leader_epoch=self.c.partition(topic).leader_epoch
        )
        self.note(f"consume {topic} {leader}@{offset} error={type(result.error).__name__}")
        if result.error is not None:
            return
        seen = self.seen[topic]
        for offset_seen, value in records_of(result.records):
            assert offset_seen < result.high_watermark, (
                f"{topic}: consumer got offset {offset_seen} at or above the HW "
                f"{result.high_watermark}"
            )
            before = seen.setdefault(offset_seen, value)
            assert before == value, (
                f"{topic}: offset {offset_seen} read as {value!r}, earlier as {before!r}"
            )

    def delete_records(self) -> None:
        leader = self.live_leader(T)
        if leader is None:
            return
        log = self.c.log(leader, T)
        offset = self.rng.randint(log.log_start_offset, log.high_watermark)
        self.deleted_to[T] = max(self.deleted_to.get(T, 0), offset)
        self.c.start_delete_records(leader, T, offset, timeout_ms=1_000)
        self.note(f"delete-records {leader} below {offset}")

    async def step(self) -> None:
        actions = (
            (self.produce, 14),
            (self.produce_idempotent, 8),
            (self.fetch, 40),
            (self.answer_isr, 8),
            (self.advance, 12),
            (self.consume, 8),
            (self.crash, 2),
            (self.fence, 5),
            (self.restart, 5),
            (self.isolate, 2),
            (self.heal, 4),
            (self.hold_metadata, 2),
            (self.release_metadata, 4),
            (self.elect, 2),
            (self.elect_unclean, 3),
            (self.delete_records, 1),
        )
        action = self.rng.choices([a for a, _ in actions], [w for _, w in actions])[0]
        outcome = action()
        if asyncio.iscoroutine(outcome):
            await outcome
        for _ in range(3):
            await asyncio.sleep(0)
        self.collect()

    # --- invariants -----------------------------------------------------------------------

    def collect(self) -> None:
        """Take the produce answers that came (the harness's ledger records the acks=all ones
        and refuses an offset acknowledged twice)."""
        waiting = []
        for task, acks, values in self.tasks:
            if not task.done():
                waiting.append((task, acks, values))
            elif not task.cancelled() and task.result().error is None and acks == ACKS_ALL:
                self.note(f"acked {T} {task.result().base_offset}+{len(values)}")
        self.tasks = waiting
        flight = self.in_flight
        if flight is None or flight.task is None or not flight.task.done():
            return
        # A crash of the leader cancels the call: the producer saw the connection drop.
        result = None if flight.task.cancelled() else flight.task.result()
        if result is not None and result.error is None:
            self.note(f"acked {IDEM} {result.base_offset}+{len(flight.values)}")
            self.in_flight = None
            return
        error = None if result is None else result.error
        assert error is None or isinstance(error, RETRIABLE), (
            f"{IDEM}: the idempotent batch at sequence {flight.sequence} failed with {error!r}"
        )
        flight.task = None  # send it again

    def check(self) -> None:
        for topic in TOPICS:
            self.check_topic(topic)

    def check_topic(self, topic: str) -> None:
        c = self.c
        c.assert_acked_present(topic)
        logs = {b: c.log(b, topic) for b in self.alive()}
        for broker, log in logs.items():
            assert log.log_start_offset <= log.high_watermark <= log.log_end_offset, (
                f"{topic}: broker {broker}: start {log.log_start_offset}, HW "
                f"{log.high_watermark}, LEO {log.log_end_offset}"
            )
            # No retention here: only DeleteRecords moves a log start up.
            assert log.log_start_offset <= self.deleted_to.get(topic, 0), (
                f"{topic}: broker {broker}'s log starts at {log.log_start_offset}, past every "
                f"DeleteRecords (up to {self.deleted_to.get(topic, 0)})"
            )
            partition = c.rm(broker).partition(topic, 0)
            state = None if partition is None else partition.leader_state
            if state is not None:
                key = (topic, broker, state.leader_epoch)
                last = self.leader_hw.get(key, 0)
                assert state.high_watermark >= last, (
                    f"{topic}: leader {broker} in epoch {key[2]}: HW went from {last} to "
                    f"{state.high_watermark}"
                )
                self.leader_hw[key] = state.high_watermark
        ids = sorted(logs)
        if topic == T and self.stale:
            self.stale -= set(c.partition(topic).isr)  # back in the ISR: truncated and caught up
            ids = [b for b in ids if b not in self.stale]
        for i, a in enumerate(ids):
            for b in ids[i + 1 :]:
                end = min(logs[a].high_watermark, logs[b].high_watermark)
                start = max(logs[a].log_start_offset, logs[b].log_start_offset)
                assert c.batches(a, topic, start, end) == c.batches(b, topic, start, end), (
                    f"{topic}: brokers {a} and {b} differ below offset {end} (their HWs "
                    f"{logs[a].high_watermark}, {logs[b].high_watermark})"
                )

    def check_exactly_once(self) -> None:
        """The idempotent producer's batches are in the log once each, in sequence order,
        every sequence it sent, at the offsets it was told."""
        leader = self.live_leader(IDEM)
        assert leader is not None
        log = self.c.log(leader, IDEM)
        expected = 0
        for _, data in log.read_batches(log.log_start_offset):
            header = RecordBatch.parse(data).header
            if header.producer_id != PRODUCER_ID:
                continue
            assert header.base_sequence == expected, (
                f"{IDEM}: batch at offset {header.base_offset} has sequence "
                f"{header.base_sequence}, expected {expected} (a duplicate or a gap)"
            )
            expected = header.base_sequence + header.last_offset_delta + 1
        assert expected == self.next_sequence, (
            f"{IDEM}: the log ends at sequence {expected}; the producer sent up to "
            f"{self.next_sequence}"
        )

    # --- the end ----------------------------------------------------------------------------

    async def heal_and_settle(self) -> None:
        c = self.c
        c.heal()
        c.held_back.clear()
        c.publish()
        for broker in sorted(self.crashed):
            c.fence(broker)
            self.fenced.add(broker)
        self.crashed.clear()
        for broker in sorted(self.fenced):
            c.restart(broker)
        self.fenced.clear()
        for _ in range(40):
            self.produce_idempotent()  # the retry of an unanswered batch, if any
            await c.settle(max_rounds=SETTLE_ROUNDS)
            c.advance(LAG_MS // 4)
            self.collect()
            full = all(set(c.partition(t).isr) == set(BROKERS) for t in TOPICS)
            if full and not self.tasks and self.in_flight is None:
                break
        else:
            raise AssertionError(
                f"no full ISR after healing: {[list(c.partition(t).isr) for t in TOPICS]}, "
                f"{len(self.tasks)} produces unanswered, idempotent batch {self.in_flight}"
            )
        await c.settle(max_rounds=SETTLE_ROUNDS)
        self.check()
        self.check_exactly_once()
        for broker in BROKERS:
            for topic in TOPICS:
                log = c.log(broker, topic)
                self.final_logs[(broker, topic)] = (
                    log.log_start_offset,
                    c.batches(broker, topic, log.log_start_offset, log.log_end_offset),
                )
        for topic in TOPICS:
            end = c.assert_identical(topic, BROKERS)
            leader = self.live_leader(topic)
            assert leader is not None
            final = c.records(leader, topic)
            assert c.log(leader, topic).high_watermark == end
            start = c.log(leader, topic).log_start_offset
            for offset, value in self.seen[topic].items():
                assert offset < start or final.get(offset) == value, (
                    f"{topic}: a consumer read {value!r} at offset {offset}; the log now has "
                    f"{final.get(offset)!r}"
                )


def records_of(data: bytes) -> list[tuple[int, bytes | None]]:
    out = []
    for position, size in iter_frames(data):
        for record in RecordBatch.parse(data[position : position + size]).records():
            out.append((record.offset, record.value))
    return out


async def simulate(
    root: Path,
    seed: int,
    steps: int = STEPS,
    *,
    fetch_sessions: bool | None = None,
    slow_link: bool = True,
    unclean: bool | None = None,
) -> Sim:
    """One seed's run (module docstring): `steps` random steps with the invariants checked
    after each, then healing and the final checks. An AssertionError names the seed and the
    last steps taken. Followers fetch over fetch sessions served by the leaders' broker
    services (kept reads included) in odd seeds, straight from the replica managers in even
    ones, unless `fetch_sessions` says. Without `slow_link` no broker's fetches are cut to
    one batch. T allows unclean elections in every fourth seed, unless `unclean` says."""
    if fetch_sessions is None:
        fetch_sessions = seed % 2 == 1
    if unclean is None:
        unclean = seed % 4 == 3
    rng = random.Random(seed)
    # One broker's fetches carry one batch each, so that followers lag behind the HW by
    # whole batches for many steps (a slow link), not only between two fetches.
    slow_broker = rng.choice(BROKERS)
    slow = {slow_broker: ONE_BATCH_PER_FETCH} if slow_link else {}
    # Half the seeds roll segments every few batches: truncation, recovery and deletion then
    # cross segment boundaries.
    segment_bytes = rng.choice((LogConfig().segment_bytes, SMALL_SEGMENT_BYTES))
    async with Cluster(
        root,
        BROKERS,
        replica_lag_time_ms_max=LAG_MS,
        default_min_insync_replicas=2,
        broker_overrides=slow,
        log_config=LogConfig(segment_bytes=segment_bytes, segment_index_bytes=64 * 1024),
        fetch_sessions=fetch_sessions,
    ) as c:
        c.create_topic(T, BROKERS)
        c.create_topic(IDEM, (2, 3, 1))  # led by another broker
        sim = Sim(c, rng, unclean=unclean)
        try:
            for _ in range(steps):
                await sim.step()
                sim.check()
            await sim.heal_and_settle()
        except AssertionError as error:
            tail = "\n  ".join(sim.trace[-40:])
            raise AssertionError(f"seed {seed}: {error}\nlast steps:\n  {tail}") from error
        return sim


@pytest.mark.asyncio
@pytest.mark.parametrize("seed", SEEDS)
async def test_random_faults_keep_acknowledged_and_committed_records(tmp_path, seed):
    sim = await simulate(tmp_path, seed)
    # Not vacuous: the run must have acknowledged writes, read them and injected faults.
    counts = sim.counts
    acked = sim.c.ledger.acked
    assert sum(len(acked.get(topic, {})) for topic in TOPICS) >= 15, counts
    assert len(acked.get(IDEM, {})) >= 5, counts
    assert sum(len(seen) for seen in sim.seen.values()) >= 5, counts
    assert counts.get("crash", 0) + counts.get("power-failure", 0) >= 1, counts


# Leaderless moments with a live replica outside the ISR are rare: these seeds run longer, and
# they are the seeds of 1,000-1,015 whose runs elect unclean leaders (9 elections, 2 of them
# lossy, at `a926d79f`); the other eleven elected none.
UNCLEAN_SEEDS = (1_000, 1_002, 1_004, 1_011, 1_015)
UNCLEAN_STEPS = 2 * STEPS


@pytest.mark.asyncio
async def test_unclean_elections_lose_only_what_the_new_leader_lacks(tmp_path):
    """Seeds with unclean elections allowed on T, checked as above: the invariants hold with
    only the documented loss forgiven, and the runs together must have elected unclean
    leaders, some of which lost acknowledged records (else this proves nothing)."""
    elections = lossy = 0
    for seed in UNCLEAN_SEEDS:
        sim = await simulate(tmp_path / str(seed), seed, UNCLEAN_STEPS, unclean=True)
        unclean = [step for step in sim.trace if step.startswith("elect-unclean")]
        elections += len(unclean)
        lossy += sum(1 for step in unclean if not step.endswith("acked-lost=0"))
    assert elections >= 3 and lossy >= 1, (elections, lossy)


@pytest.mark.asyncio
@pytest.mark.parametrize("seed", range(6))
async def test_fetch_sessions_and_kept_reads_change_nothing_a_client_or_replica_sees(
    tmp_path, seed
):
    """The same seed with followers on fetch sessions (incremental requests and answers,
    idle entries answered from kept reads) and on whole fetches: the same steps, outcomes and
    final logs. (Without the slow link: under a one-batch budget the session's own rotation
    may hand the batch to another partition than the follower's order would, both fair.)"""
    whole = await simulate(tmp_path / "whole", seed, fetch_sessions=False, slow_link=False)
    sessions = await simulate(tmp_path / "sessions", seed, fetch_sessions=True, slow_link=False)
    assert sessions.trace == whole.trace
    assert sessions.final_logs == whole.final_logs
    assert len(whole.final_logs) == len(BROKERS) * len(TOPICS)
