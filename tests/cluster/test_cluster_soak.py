"""The whole-system soak: a real 3-node cluster under seeded faults while a producer, a consumer
group and topic churn run, checked end to end afterwards (docs/reliability.md, "Whole-system
soak").

The cluster: 3 combined nodes (`replog cluster start`, plain loopback, no proxies: every fault is
a signal or an admin call) with short timers, `replica.lag.time.max.ms` 2 s and
`broker.session.timeout.ms` 4 s, so that faults of a few seconds shrink ISRs and fence brokers,
and 128 KiB segments, so that DeleteRecords deletes whole segments and recovery walks several.

The traffic, for the whole run:
- one idempotent acks=all producer at a steady rate, recording every acknowledgement, writing
  two topics of 6 partitions (RF 3, `min.insync.replicas=2`): `soak`, small records, and `wide`,
  4 KiB records. Sharing one producer, its requests interleave the two topics' partitions and
  pass 64 KiB whenever a backlog forms (after every fault that moves a leader): the shape that
  would send one topic's records to the other's partitions if the codec joined records out of
  serialized order (replog/wire/broker_codec.py). Followers catching up
  fetch the same mix;
- a consumer group of three members on `soak`, each committing every 3 s and closed and
  reopened every 20 s, staggered (a member leaves or joins every ~7 s, each time a rebalance
  that moves partitions between members), resuming from the group's commits;
- topic churn, a fault among the others (tests/cluster/soak_chaos.py).

The faults: tests/cluster/soak_chaos.py (kill -9 of one, two and all nodes, SIGSTOP past the
session timeout, SIGTERM restarts, reassignments also onto a node that is down, preferred
elections, DeleteRecords of part or all of a partition also followed by a kill -9 of the
leader, topic churn), one at a time on a schedule drawn from the seed, every kind at least once.

What must hold at the end:
- the faults were applied: at least MIN_FAULTS, every process-level kind at least once (with
  the chaos loop stubbed out this fails, so the checks below cannot pass vacuously);
- the cluster is healthy within HEALTHY_WITHIN_S of the last fault: every broker unfenced,
  every partition led with a full ISR, no reassignment running;
- no send failed; every acknowledged record is in the log at its acknowledged offset with its
  value, exactly once, in send order, and nothing else is (records below a partition's log
  start excused, and the log start must be one DeleteRecords asked for);
- the consumer group was given exactly the log: every offset from the log start with the log's
  value; each member's session read a partition it held from where a commit or DeleteRecords
  put its position, never below the group's last successful commit, and on without skipping
  past a record except to a DeleteRecords offset (tests/cluster/group_positions.py);
- after a clean stop, every replica's files hold the same batches below the high watermark
  (from the first batch all still hold), for every partition of every topic;
- no node logged a traceback, an ERROR or CRITICAL line, or a follower append at the wrong
  offset (a fetch answer carrying another partition's batches).

Running it: CI runs the default seed with 45 s of chaos (about a minute in all on a 2-core
machine). By hand, for longer or other seeds (`-s` shows the chaos as it happens; a basetemp of
your own keeps the node logs, which pytest's rotation of its temporary directories would
delete after three more sessions):

    REPLOG_SOAK_SEED=202 REPLOG_SOAK_SECONDS=600 .venv/bin/python -m pytest -s \\
        tests/cluster/test_cluster_soak.py --basetemp=/tmp/soak-202

A failure names the seed and the command that replays its schedule (the machine's timing is
not reproducible, so a replay may take another path, though it applies the same kinds of
faults in the same order), and the captured output holds the chaos journal.
"""

from __future__ import annotations

import os
import re
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from client_cluster import ClientCluster
from cluster_helpers import Background, LoopbackCluster
from group_positions import GroupPositions
from proxied_cluster import (
    Log,
    Stream,
    assert_consumer_was_given_the_log,
    assert_exactly_once_in_order,
    read_log,
)
from replication_helpers import assert_identical, overrides, read_replicas
from soak_chaos import CHURN_TOPIC, PROCESS_FAULTS, Chaos

from replog import Admin, Consumer, ConsumerRecord, TopicPartition
from replog.client.admin_results import TopicDescription
from replog.errors import ReplogError

pytestmark = pytest.mark.slow

SEED = int(os.environ.get("REPLOG_SOAK_SEED", "20261125"))
CHAOS_S = float(os.environ.get("REPLOG_SOAK_SECONDS", "45"))
REPLAY = (
    f"REPLOG_SOAK_SEED={SEED} REPLOG_SOAK_SECONDS={CHAOS_S:g} .venv/bin/python -m pytest -s "
    f"tests/cluster/test_cluster_soak.py --basetemp=/tmp/soak-{SEED}"
)

TOPIC, WIDE, PARTITIONS = "soak", "wide", 6
OFFSETS_TOPIC = "__consumer_offsets"
SESSION_MS = 4000
SERVER = overrides(
    replica_lag_time_max_ms=2000,
    broker_session_timeout_ms=SESSION_MS,
    broker_heartbeat_interval_ms=500,
    log_segment_bytes=256 * 1024,
    offsets_topic_num_partitions=3,
    # The member reopens every REOPEN_EVERY_S: its group's first join need not wait for others.
    group_initial_rebalance_delay_ms=0,
    # The brokers' periodic work early, and their checkpoints often: restarts then recover from
    # recent checkpoints and from the logs past them alike.
    log_initial_task_delay_ms=2000,
    log_flush_start_offset_checkpoint_interval_ms=3000,
    log_flush_offset_checkpoint_interval_ms=3000,
)
TOPIC_CONFIGS = {"min.insync.replicas": "2", "segment.bytes": str(128 * 1024)}
RATE = 400  # soak records per second
WIDE_RATE, WIDE_VALUE_SIZE = 25, 4096  # wide records per second, and their size
COMMIT_EVERY_S, REOPEN_EVERY_S = 3.0, 20.0  # the consumer group members' habits
MEMBERS = 3  # of the consumer group
# Applied faults at least. CI's run applies 15-20; the first round alone (every kind once)
# applies 10 or 11 (a preferred election may find every leader preferred), however slow the
# machine.
MIN_FAULTS = 10
HEALTHY_WITHIN_S = 60  # after the last fault (the soak script saw 1-2 s)
READ_TIMEOUT_S = 120  # reading a whole topic back, or the group up to the end
# A node log line that fails the soak. "follower append starts at": a follower was given batches
# that do not continue its log (another partition's); a WARNING, but never
# legitimate.
FORBIDDEN = re.compile(r"Traceback|\bERROR\b|\bCRITICAL\b|follower append starts at")


@dataclass
class Journal:
    """Timestamped lines of what the soak did, printed as they happen (pytest shows them when
    the test fails)."""

    started: float = field(default_factory=time.monotonic)

    def note(self, line: str) -> None:
        print(f"[{time.monotonic() - self.started:7.1f}] {line}", flush=True)


def test_the_whole_system_survives_seeded_faults(cluster: LoopbackCluster, tmp_path: Path) -> None:
    journal = Journal()
    journal.note(f"seed {SEED}, {CHAOS_S:g} s of chaos; replay: {REPLAY}")
    try:
        soak(cluster, tmp_path / "replicas", journal)
    except BaseException as exc:
        exc.add_note(f"soak seed {SEED}; replay its schedule with: {REPLAY}")
        exc.add_note(f"node logs: {cluster.data_dir}/node-*/node.log")
        raise


def soak(cluster: LoopbackCluster, scratch: Path, journal: Journal) -> None:
    cluster.start(*SERVER)
    clients = ClientCluster(cluster)
    for topic in (TOPIC, WIDE):
        clients.create_topic(topic, PARTITIONS, 3, TOPIC_CONFIGS)
    admin = Admin(bootstrap_servers=clients.bootstrap, default_api_timeout_ms=30_000)
    with (
        admin,
        clients.producer(acks="all", enable_idempotence=True, linger_ms=5) as producer,
        Stream(producer, TOPIC, PARTITIONS, rate=RATE) as stream,
        Stream(producer, WIDE, PARTITIONS, rate=WIDE_RATE, value_size=WIDE_VALUE_SIZE) as wide,
        GroupReader(clients, TOPIC, PARTITIONS) as reader,
    ):
        stream.wait_acks(RATE, 30, "before the first fault")
        chaos = Chaos(clients, admin, TOPIC, PARTITIONS, SEED, SESSION_MS / 1000, journal.note)
        steps = chaos.run(CHAOS_S)
        chaos_ended = time.monotonic()
        journal.note(f"chaos over: {steps} steps, applied {dict(chaos.applied)}")
        journal.note(f"refused {dict(chaos.refused)}")
        assert_faults_applied(chaos)

        chaos.settle()
        topics = [TOPIC, WIDE, OFFSETS_TOPIC, *([CHURN_TOPIC] if chaos.churn_generation else [])]
        clients.wait_healthy(topics, max(1.0, chaos_ended + HEALTHY_WITHIN_S - time.monotonic()))
        journal.note(f"healthy {time.monotonic() - chaos_ended:.1f} s after the last fault")

        for each in (stream, wide):
            each.stop()  # every send settled: acknowledged or failed
        described = admin.describe_topics(None, include_internal=True)
        starts, ends = log_bounds(admin, described)
        soak_starts = {p: starts[TOPIC, p] for p in range(PARTITIONS)}
        assert_log_starts_were_asked_for(soak_starts, chaos.deleted_before)
        log = read_log(clients, TOPIC, PARTITIONS, READ_TIMEOUT_S)
        checked = assert_exactly_once_in_order(stream, log, soak_starts)
        wide_log = read_log(clients, WIDE, PARTITIONS, READ_TIMEOUT_S)
        checked += assert_exactly_once_in_order(wide, wide_log)
        deleted = sum(1 for ack in stream.acked.values() if ack.offset < soak_starts[ack.partition])
        journal.note(
            f"{len(stream.acked)} + {len(wide.acked)} acknowledged, {deleted} of them deleted; "
            f"{checked} in the logs exactly once, in order; sends failed: 0"
        )

        reader.finish(soak_starts, {p: ends[TOPIC, p] for p in range(PARTITIONS)})
        reader.assert_moved_only_by(chaos.deleted_before)
        assert_consumer_was_given_the_log(reader, log)
        journal.note(reader.summary())
        # Again: the group's last commits went to the offsets topic.
        starts, ends = log_bounds(admin, described)

    stopped = cluster.cli("stop")
    assert stopped.returncode == 0, stopped.stderr
    compared = assert_replicas_identical(cluster, described, starts, ends, scratch)
    journal.note(f"replicas identical below the high watermark: {compared} partitions")
    assert_quiet_logs(cluster)


def assert_faults_applied(chaos: Chaos) -> None:
    """Non-vacuity: the faults really happened."""
    missing = [kind for kind in PROCESS_FAULTS if not chaos.applied[kind]]
    total = sum(chaos.applied.values())
    assert not missing and total >= MIN_FAULTS, (
        f"the chaos applied too little to prove anything: {total} faults (at least {MIN_FAULTS}"
        f"), none of {missing}; applied {dict(chaos.applied)}, refused {dict(chaos.refused)}"
    )


Bounds = dict[tuple[str, int], int]  # (topic, partition) -> offset


def log_bounds(admin: Admin, described: dict[str, TopicDescription]) -> tuple[Bounds, Bounds]:
    """Every partition's log start offset and high watermark (ListOffsets earliest, latest)."""
    tps = [TopicPartition(name, p.partition) for name, t in described.items() for p in t.partitions]
    bounds = []
    for spec in (-2, -1):
        answers = admin.list_offsets({tp: spec for tp in tps})
        assert all(a is not None for a in answers.values()), f"ListOffsets {spec}: {answers}"
        bounds.append({(tp.topic, tp.partition): a.offset for tp, a in answers.items() if a})
    return bounds[0], bounds[1]


def assert_log_starts_were_asked_for(starts: dict[int, int], asked: dict[int, list[int]]) -> None:
    """Records go only when DeleteRecords asks (no retention is configured): a partition's log
    start is 0 or an offset it was asked to delete before."""
    unasked = {p: start for p, start in starts.items() if start and start not in asked.get(p, ())}
    assert not unasked, (
        f"{TOPIC}: log starts {unasked} are no offset DeleteRecords asked for ({asked}): records "
        "were deleted that nobody deleted"
    )


def assert_replicas_identical(
    cluster: LoopbackCluster,
    described: dict[str, TopicDescription],
    starts: Bounds,
    ends: Bounds,
    scratch: Path,
) -> int:
    """Every partition's replicas hold the same batches below its high watermark, from the
    first batch every replica still holds, which must hold the log start offset; the number
    of partitions compared. The nodes must be stopped."""
    compared = 0
    for name, topic in described.items():
        for p in topic.partitions:
            if (name, p.partition) not in ends:
                continue
            where = f"{name}-{p.partition}"
            replicas = read_replicas(cluster, p.replicas, name, scratch / where, p.partition)
            first = max((r.batches[0][0] for r in replicas if r.batches), default=0)
            assert first <= starts[name, p.partition], (
                f"{where}: a replica's first batch starts at {first}, past the log start offset "
                f"{starts[name, p.partition]}: it lost records that were not deleted"
            )
            assert_identical(replicas, ends[name, p.partition], where, start=first)
            compared += 1
    return compared


def assert_quiet_logs(cluster: LoopbackCluster) -> None:
    """No node logged a line FORBIDDEN matches, in any of its lives (restarts append)."""
    found = []
    for node in cluster.layout.nodes:
        lines = Path(node.log_path).read_text(errors="replace").splitlines()
        bad = [line for line in lines if FORBIDDEN.search(line)]
        if bad:
            found.append(f"node {node.node_id}: {len(bad)} lines, first: {bad[:5]}")
    assert not found, "node logs with tracebacks, errors or misplaced appends:\n" + "\n".join(found)


# --- the consumer group -------------------------------------------------------------------------


def _clock() -> str:
    """The wall clock as the nodes' log lines give it, to set a note beside them."""
    now = time.time()
    return time.strftime("%H:%M:%S", time.localtime(now)) + f".{int(now * 1000) % 1000:03d}"


class _ForgetMoved:
    """A rebalance listener of one member's session: whenever the group takes a partition away
    or gives it (again), the session's holding of it ends (the consumer's position starts over
    from the group's committed offset, and a commit covers that position, not the records
    given before). It runs on the consumer's loop, while the member's thread waits in poll."""

    def __init__(self, reader: GroupReader, session: int, events: list[str]) -> None:
        self._reader, self._session = reader, session
        self._events = events  # what a problem's note names: this session's rebalances

    def _forget(self, kind: str, partitions: set[TopicPartition]) -> None:
        moved = {tp.partition for tp in partitions}
        self._events.append(f"{_clock()} {kind} {sorted(moved)}")
        with self._reader.lock:
            self._reader.positions.release(self._session, moved)

    def on_partitions_revoked(self, partitions: set[TopicPartition]) -> None:
        self._forget("revoked", partitions)

    def on_partitions_assigned(self, partitions: set[TopicPartition]) -> None:
        self._forget("assigned", partitions)

    def on_partitions_lost(self, partitions: set[TopicPartition]) -> None:
        self._forget("lost", partitions)


@dataclass
class GroupReader(Background):
    """A consumer group of MEMBERS members reading `topic` as an application would: each with
    manual commits every COMMIT_EVERY_S, closed and reopened every REOPEN_EVERY_S (its first
    session shorter by a share, so that the members come and go at different times), through
    the public Consumer, each in a thread of its own, until `finish`. What they were given is
    checked as the group's semantics allow (`group_positions.GroupPositions`: per session and
    partition, from where a commit or DeleteRecords put the position, without skips; a member
    whose session expired unknown to it may go on reading beside the partition's next owner).

    A commit covers only the partitions this session was given records of since the group last
    gave them to it (an eager rebalance takes every partition and gives some back, their
    positions read again from the committed offsets: `_ForgetMoved`): the consumer commits its
    positions, and a session that has none yet (its coordinator still down) commits nothing
    and succeeds at once, as Kafka's commitSync of no offsets does. Counting such a call as a
    commit of everything read before once made a re-delivery look like a lost commit."""

    clients: ClientCluster
    topic: str
    partitions: int
    positions: GroupPositions = field(default_factory=GroupPositions)
    sessions: int = 0
    commits: int = 0
    empty_commits: int = 0  # sessions with no positions yet: nothing to commit
    commit_failures: Counter[str] = field(default_factory=Counter)
    poll_errors: Counter[str] = field(default_factory=Counter)
    # How each record that did not follow its session's record before came (the session's
    # rebalances and failed commits), and each commit that covered more than its session was
    # given: what a failure names, since a run's node logs keep only their last restart's lines.
    notes: list[str] = field(default_factory=list)
    ahead: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.lock = threading.Lock()  # the members' threads (and listeners) share what is below
        self._starts: dict[int, int] = {}
        self._ends: dict[int, int] | None = None  # set by finish: read up to these, then end
        self._crash: BaseException | None = None

    @property
    def seen(self) -> Log:
        """What it was given from the log start on, each offset once, by offset."""
        given = self.positions.given
        return {
            p: sorted((o, v) for o, v in given.get(p, {}).items() if o >= self._starts[p])
            for p in range(self.partitions)
        }

    def finish(self, starts: dict[int, int], ends: dict[int, int]) -> None:
        """Read up to `ends` (partition -> high watermark), commit, close and end."""
        self._starts, self._ends = starts, ends
        self._thread.join(READ_TIMEOUT_S)
        if self._crash is not None:
            raise AssertionError("the consumer group's thread failed") from self._crash
        assert not self._thread.is_alive(), (
            f"the consumer group did not read up to {ends} within {READ_TIMEOUT_S} s: given up "
            f"to {[self.positions.highest_next(p) for p in range(self.partitions)]}; "
            f"{self.summary()}"
        )

    def assert_moved_only_by(self, deleted_before: dict[int, list[int]]) -> None:
        """Positions moved past records only to offsets DeleteRecords asked for, none back
        below a commit, and every offset given twice had one value."""
        problems = self.positions.problems(deleted_before)
        assert not problems, (
            f"the consumer group's positions: {problems[:10]}; DeleteRecords asked for "
            f"{deleted_before}; how: {self.notes[:10]}; commits that covered more than was "
            f"given: {self.ahead[:10]}; {self.summary()}"
        )
        # Non-vacuity: the members' comings and goings moved partitions between them.
        assert self.positions.handoffs > 0, f"no partition passed between members: {self.summary()}"

    def summary(self) -> str:
        return (
            f"consumer group: {self.positions.summary()}, in {self.sessions} sessions of "
            f"{MEMBERS} members; {self.commits} commits ({self.empty_commits} of nothing), "
            f"failures {dict(self.commit_failures)}, poll errors {dict(self.poll_errors)}"
        )

    def _done(self) -> bool:
        if self._stop.is_set():
            return True
        ends = self._ends
        return ends is not None and all(
            end <= self._starts[p] or self.positions.highest_next(p) >= end
            for p, end in ends.items()
        )

    def _run(self) -> None:
        members = [
            threading.Thread(target=self._member, args=(i,), name=f"member-{i}", daemon=True)
            for i in range(MEMBERS)
        ]
        for member in members:
            member.start()
        for member in members:
            member.join()

    def _member(self, index: int) -> None:
        first = REOPEN_EVERY_S * (index + 1) / MEMBERS
        try:
            while not self._done() and self._crash is None:
                self._session(index, first)
                first = REOPEN_EVERY_S
        except BaseException as exc:
            self._crash = exc

    def _session(self, member: int, length_s: float) -> None:
        with self.lock:
            self.sessions += 1
            session = self.sessions
        events: list[str] = []  # its rebalances and failed commits, for a problem's note
        consumer = self.clients.consumer(
            group_id="soak",
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            fetch_max_wait_ms=200,
            # A member that could not leave (its coordinator was down) is dropped sooner.
            session_timeout_ms=10_000,
            heartbeat_interval_ms=1000,
        )
        try:
            consumer.subscribe([self.topic], listener=_ForgetMoved(self, session, events))
            opened = committed_at = time.monotonic()
            while not self._done():
                if self._ends is None and time.monotonic() - opened > length_s:
                    break
                try:
                    batches = consumer.poll(timeout_ms=500)
                except ReplogError as exc:  # a failed poll returns nothing: counted, not fatal
                    with self.lock:
                        self.poll_errors[type(exc).__name__] += 1
                    continue
                with self.lock:
                    for tp, records in batches.items():
                        for record in records:
                            self._take(member, session, tp.partition, record, events)
                if time.monotonic() - committed_at > COMMIT_EVERY_S:
                    self._commit(consumer, session, member, events)
                    committed_at = time.monotonic()
            self._commit(consumer, session, member, events)
        finally:
            try:
                consumer.close(autocommit=False, timeout_ms=15_000)
            except ReplogError as exc:
                with self.lock:
                    self.poll_errors[f"close: {type(exc).__name__}"] += 1
            with self.lock:
                self.positions.release(session)

    def _take(
        self, member: int, session: int, partition: int, record: ConsumerRecord, events: list[str]
    ) -> None:
        """Under the lock: one record given to `member` in `session` (`events`: the session's
        rebalances and failed commits, named if the record did not follow the one before)."""
        if self.positions.take(session, member, partition, record.offset, record.value or b""):
            self.notes.append(
                f"{partition}@{record.offset} at {_clock()}: session {session} of member "
                f"{member}; the session's last events {events[-4:]}"
            )

    def _commit(self, consumer: Consumer, session: int, member: int, events: list[str]) -> None:
        # The consumer's positions: of the partitions this session was given records of since
        # the group last gave them to it, those it still holds (a partition given up was
        # committed by the group's next owner, if at all: its position here is no longer the
        # group's).
        held = {tp.partition for tp in consumer.assignment()}
        with self.lock:
            session_next = self.positions.session_next(session)
        covered = {p: offset for p, offset in session_next.items() if p in held}
        # What commit() will send for them: its positions, which must be what poll gave.
        for p, offset in covered.items():
            try:
                position = consumer.position(TopicPartition(self.topic, p), timeout_ms=5_000)
            except ReplogError:
                continue  # looked up anew (a reset): not what poll gave, and not committed
            if position != offset:
                with self.lock:
                    self.ahead.append(
                        f"{p}: position {position}, given up to {offset} (session {session})"
                    )
        with self.lock:
            self.positions.attempt(covered)
        try:
            consumer.commit(timeout_ms=10_000)
        except ReplogError as exc:  # the coordinator may be down: the next commit covers it
            with self.lock:
                self.commit_failures[type(exc).__name__] += 1
                events.append(f"{_clock()} commit failed: {type(exc).__name__}")
            return
        with self.lock:
            if not covered:
                self.empty_commits += 1
                return
            self.commits += 1
            self.positions.committed(session, member, covered)
