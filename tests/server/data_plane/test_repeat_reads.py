"""Kept reads (`replog/server/data_plane/repeat_reads.py`) change nothing that a fetcher or the
leader's replication rules can see.

The main check is differential: two identical clusters go through the same random steps
(appends, follower and consumer fetch rounds on sessions, consumer fetches that wait in the
purgatory and are woken or expire, partitions dropped and fetched again, answers cut short by
max_bytes, sessions restarted, time passing with ISR shrinks and
expansions accepted or refused, DeleteRecords, new leader epochs, a follower fenced and
unfenced, min.insync.replicas changes), one leader serving its sessions with kept reads and
the other without. At every step both must give the same answers and the same follower
progress (docs/design/replication.md#caught-up-time), HW and ISR.

The same steps also hold dirty-only session rounds (`fetch_session` Rules) to the leader that
reads every partition of a session each round: `Cluster(dirty_only=True)` serves its sessions
through `BrokerCores.replica_fetch` (rounds of the session's dirty partitions, idle ones parked),
the other through the walk-everything path (`full_request`, every partition read).
"""

from __future__ import annotations

import asyncio
import random
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from replog.errors import OperationNotAttemptedError
from replog.quorum.metadata.image import MetadataImage
from replog.quorum.metadata.records import (
    BrokerRegistrationChangeRecord,
    ConfigRecord,
    ConfigResourceType,
    FenceChange,
    PartitionChangeRecord,
)
from replog.replication.fetch_session import FetchChanges, FetcherSession, LeaderFetchSession
from replog.replication.messages import (
    NO_SESSION,
    DeleteRecordsPartition,
    DeleteRecordsRequest,
    FetchPartition,
    FetchRequest,
    FetchResponse,
)
from replog.server.data_plane import replica_manager
from replog.server.data_plane.broker_cores import BrokerCores
from replog.server.data_plane.repeat_reads import RepeatReads
from replog.testing import ManualClock
from replog.wire import broker_codec as codec
from tests.metadata.metadata_helpers import create_topic, replayed
from tests.server.data_plane.test_replica_manager import (
    TID,
    Node,
    batch,
    batch_offsets,
    cluster_image,
    produce,
    settle,
)

PARTITIONS = 8
FOLLOWERS = (2, 3)


class CountedRepeatReads(RepeatReads):
    """Counts the entries its kept reads answered."""

    def __init__(self) -> None:
        super().__init__()
        self.answered = 0

    def answer(self, *args: Any) -> Any:
        result = super().answer(*args)
        self.answered += result is not None
        return result


class CountedSession(LeaderFetchSession):
    """Counts the partitions its rounds gave to read."""

    def __init__(self) -> None:
        super().__init__()
        self.read = 0

    def round_request(self, request: FetchRequest) -> FetchRequest:
        round_request = super().round_request(request)
        self.read += len(round_request.partitions)
        return round_request

    def full_request(self, request: FetchRequest) -> FetchRequest:
        full = super().full_request(request)
        self.read += len(full.partitions)
        return full


class Fetcher:
    """One fetcher (a follower's or the consumer's) and the leader's side of its session."""

    def __init__(self, service: BrokerCores, *, keep_reads: bool, dirty_only: bool) -> None:
        self.service = service
        self.keep_reads = keep_reads
        self.dirty_only = dirty_only
        self.read = 0
        self.restart()

    def restart(self) -> None:
        """A new ReplicaFetch stream: a new session on both sides."""
        self.session = FetcherSession()
        self.shadow = FetcherSession()  # the same requests, told no changes
        self.leader_session = CountedSession()
        self.repeats = CountedRepeatReads() if self.keep_reads else None

    async def round(
        self, request: FetchRequest, changes: FetchChanges | None = None
    ) -> FetchResponse:
        """One request answered; it waits in the purgatory only if `request` says so. With
        `changes`, what is sent must be what comparing every entry sends."""
        sent = self.session.to_send(request, (), changes)
        compared = self.shadow.to_send(request)
        assert _wire(sent) == _wire(compared)
        read_before = self.leader_session.read
        try:
            if not self.dirty_only:
                # Every partition of the session read each round, as a sessionless fetch.
                full = self.leader_session.full_request(sent)
                if self.repeats is not None:
                    if sent.session_epoch == 0:
                        self.repeats.clear()
                    self.repeats.forget(sent.forgotten)
                rm = self.service._ready()
                response = await rm.fetch(replace(full, session_epoch=NO_SESSION), self.repeats)
                return self.leader_session.answer(sent, response)
            return await self.service.replica_fetch(
                codec.fetch_request_to_proto(sent), self.leader_session, self.repeats
            )
        finally:
            self.read += self.leader_session.read - read_before


class Cluster:
    """Broker 1 leads topic "t" (replicas 1, 2, 3); its followers fetch over sessions."""

    def __init__(self, root: Path, *, keep_reads: bool, dirty_only: bool = False) -> None:
        self.clock = clock = ManualClock()
        self.image = cluster_image(*create_topic("t", TID, *[(1, 2, 3)] * PARTITIONS))
        where = root / f"keep{keep_reads}-dirty{dirty_only}"
        self.nodes = {b: Node(where, b, clock) for b in (1, *FOLLOWERS)}
        self.apply(self.image)
        self.leader = self.nodes[1]
        service = BrokerCores(1, replica_manager=self.leader.rm)
        self.fetchers = {
            b: Fetcher(service, keep_reads=keep_reads, dirty_only=dirty_only)
            for b in (*FOLLOWERS, -1)
        }
        self.positions = dict.fromkeys(range(PARTITIONS), 0)  # the consumer's
        # Per follower, its last request as built and as sent (with no wait).
        self.built: dict[int, FetchRequest] = {}
        self.sent_as: dict[int, FetchRequest] = {}

    def apply(self, image: MetadataImage) -> None:
        self.image = image
        for node in self.nodes.values():
            node.rm.apply_image(image)

    async def follower_round(self, broker_id: int) -> Any:
        follower = self.nodes[broker_id]
        now_ms = self.clock()
        request = follower.rm.build_follower_fetch(1, now_ms)
        # Built from the touched partitions only, it asks what walking every partition asks.
        assert _by_key(() if request is None else request.partitions) == _walked(follower, now_ms)
        if request is None:
            return None
        changes = follower.rm.follower_fetch_changes(1)
        built, request = request, replace(request, max_wait_ms=0)
        if changes is not None and changes.since is self.built.get(broker_id, built):
            # The changes are relative to the request built, which went out as a copy.
            changes = replace(changes, since=self.sent_as[broker_id])
        self.built[broker_id], self.sent_as[broker_id] = built, request
        answer = await self.fetchers[broker_id].round(request, changes)
        follower.rm.process_follower_fetch(1, request, answer, now_ms)
        return _seen(answer)

    async def consumer_round(
        self, partitions: list[int], max_bytes: int, wake: int | None = None
    ) -> Any:
        """A consumer round; with `wake`, the fetch waits in the purgatory while the leader
        appends to partition `wake`, and expires if that did not answer it."""
        # A small max_bytes leaves later partitions empty although they have records.
        request = FetchRequest(
            tuple(FetchPartition("t", p, self.positions[p]) for p in partitions),
            max_bytes=max_bytes,
            max_wait_ms=0 if wake is None else 100,
        )
        fetch = asyncio.ensure_future(self.fetchers[-1].round(request))
        if wake is not None:
            for _ in range(20):  # parked (a round read in steps lets turns pass)
                await asyncio.sleep(0)
            await produce(self.leader, batch(1, tag=-1), partition=wake)
            await asyncio.sleep(0)
            if not fetch.done():
                self.leader.rm.tick(self.clock.advance(200))
        async with asyncio.timeout(5):
            answer = await fetch
        for result in answer.partitions:
            if result.records:
                self.positions[result.partition] = batch_offsets(result.records)[-1][1] + 1
        return _seen(answer)

    def answer_isr_changes(self, accept: bool) -> list[Any]:
        """The controller accepts every pending ISR change, or refuses each having applied
        nothing (the leader reverts to its committed ISR)."""
        changes = self.leader.rm.pending_isr_changes()
        for change in changes:
            error = None if accept else OperationNotAttemptedError("refused")
            self.leader.rm.on_isr_change_result(
                change, error, change.new_isr, change.leader_epoch, change.partition_epoch + 1
            )
        return [(c.partition, c.new_isr) for c in changes]

    def state(self) -> list[Any]:
        """Per partition: HW, ISRs, log start offset and each follower's progress."""
        states = []
        for p in range(PARTITIONS):
            leader_state = self.leader.leader("t", p)
            states.append(
                (
                    leader_state.high_watermark,
                    leader_state.isr,
                    leader_state.maximal_isr,
                    self.leader.log("t", p).log_start_offset,
                    [leader_state.progress(b) for b in FOLLOWERS],
                )
            )
        return states


def _by_key(entries: Any) -> dict[Any, Any]:
    return {(e.topic, e.partition): e for e in entries}


def _walked(node: Node, now_ms: int) -> dict[Any, Any]:
    """The entries a follower's build that walks every partition asks leader 1 for."""
    walked = {}
    for key, partition in node.rm.partitions().items():
        follower = partition.follower
        if follower is None or follower.leader_id != 1 or now_ms < follower.backoff_until_ms:
            continue
        walked[key] = FetchPartition(
            partition.topic,
            partition.partition,
            fetch_offset=follower.fetch_offset,
            partition_max_bytes=node.rm.config.replica_fetch_max_bytes,
            current_leader_epoch=follower.leader_epoch,
            last_fetched_epoch=follower.last_fetched_epoch,
            log_start_offset=partition.log.log_start_offset,
            topic_id=partition.topic_id,
        )
    return walked


def _wire(request: FetchRequest) -> Any:
    """A sent request as its leader takes it (the order of its entries aside)."""
    return (_by_key(request.partitions), set(request.forgotten), request.session_epoch)


def _seen(answer: FetchResponse) -> list[Any]:
    """An answer as its fetcher sees it (errors by type and text)."""
    return [
        (
            r.topic,
            r.partition,
            None if r.error is None else (type(r.error).__name__, str(r.error)),
            r.high_watermark,
            r.log_start_offset,
            r.diverging_epoch,
            bytes(r.records),
        )
        for r in answer.partitions
    ]


async def _step(cluster: Cluster, step: tuple[Any, ...]) -> Any:
    kind = step[0]
    if kind == "append":
        return (await produce(cluster.leader, batch(step[2], tag=step[3]), partition=step[1])).error
    if kind == "follower":
        return await cluster.follower_round(step[1])
    if kind == "consumer":
        return await cluster.consumer_round(*step[1:])
    if kind == "restart":
        cluster.fetchers[step[1]].restart()
        return None
    if kind == "time":
        cluster.clock.advance(step[1])
        cluster.leader.rm.tick(cluster.clock())
        return cluster.answer_isr_changes(step[2])
    if kind == "delete":
        hw = cluster.leader.leader("t", step[1]).high_watermark
        response = await cluster.leader.rm.delete_records(
            DeleteRecordsRequest((DeleteRecordsPartition("t", step[1], hw),), timeout_ms=0)
        )
        return [(r.partition, r.low_watermark, r.error is None) for r in response.partitions]
    if kind == "epoch":
        cluster.apply(replayed(cluster.image, PartitionChangeRecord(TID, step[1], leader=1)))
        return None
    if kind == "fence":
        # Broker 3 fenced (not ISR-eligible) or unfenced again.
        change = FenceChange.FENCE if step[1] else FenceChange.UNFENCE
        cluster.apply(replayed(cluster.image, BrokerRegistrationChangeRecord(3, 30, change)))
        return None
    if kind == "config":
        record = ConfigRecord(ConfigResourceType.TOPIC, "t", "min.insync.replicas", step[1])
        cluster.apply(replayed(cluster.image, record))
        return None
    raise AssertionError(kind)


def _random_steps(rng: random.Random, count: int) -> list[tuple[Any, ...]]:
    steps: list[tuple[Any, ...]] = []
    for index in range(count):
        roll = rng.random()
        if roll < 0.1:
            step: tuple[Any, ...] = ("append", rng.randrange(PARTITIONS), rng.randint(1, 3), index)
        elif roll < 0.55:
            # Follower 3 fetches less often: it falls behind and out of the ISR at times.
            steps_follower = 2 if rng.random() < 0.7 else 3
            step = ("follower", steps_follower)
        elif roll < 0.75:
            partitions = [p for p in range(PARTITIONS) if rng.random() < 0.8]
            wake = rng.randrange(PARTITIONS) if rng.random() < 0.25 else None
            step = ("consumer", partitions or [0], rng.choice([1, 100, 50 << 20]), wake)
        elif roll < 0.83:
            step = ("time", rng.choice([1, 50, 16_000, 31_000]), rng.random() < 0.7)
        elif roll < 0.87:
            step = ("restart", rng.choice([*FOLLOWERS, -1]))
        elif roll < 0.92:
            step = ("delete", rng.randrange(PARTITIONS))
        elif roll < 0.95:
            step = ("epoch", rng.randrange(PARTITIONS))
        elif roll < 0.98:
            step = ("fence", rng.random() < 0.5)
        else:
            step = ("config", rng.choice(["1", "2", "3"]))
        steps.append(step)
    return steps


async def _run_both(first: Cluster, second: Cluster, steps: list[tuple[Any, ...]]) -> None:
    """Both clusters through `steps`: the same answers and leader state after each."""
    for index, step in enumerate(steps):
        outcomes = [await _step(cluster, step) for cluster in (first, second)]
        assert outcomes[0] == outcomes[1], f"step {index} {step}: answers differ"
        assert first.state() == second.state(), f"step {index} {step}: leader state differs"


@pytest.mark.asyncio
@pytest.mark.parametrize("seed", range(12))
async def test_kept_reads_answer_and_record_exactly_as_full_reads(
    tmp_path: Path, seed: int
) -> None:
    full = Cluster(tmp_path, keep_reads=False)
    kept = Cluster(tmp_path, keep_reads=True)
    answered = 0
    await _run_both(full, kept, _random_steps(random.Random(seed), 150))
    for fetcher in kept.fetchers.values():
        assert isinstance(fetcher.repeats, CountedRepeatReads)
        answered += fetcher.repeats.answered
    # The comparison proves something only if kept reads answered often.
    assert answered >= 20


@pytest.mark.asyncio
@pytest.mark.parametrize("seed", range(10))
async def test_dirty_only_rounds_answer_and_record_exactly_as_walking_every_partition(
    tmp_path: Path, seed: int
) -> None:
    walking = Cluster(tmp_path, keep_reads=True)
    dirty = Cluster(tmp_path, keep_reads=True, dirty_only=True)
    await _run_both(walking, dirty, _random_steps(random.Random(seed), 150))
    read_walking = sum(f.read for f in walking.fetchers.values())
    read_dirty = sum(f.read for f in dirty.fetchers.values())
    # The comparison proves something only if the dirty-only rounds skipped many reads.
    assert read_dirty < read_walking * 0.7, (read_dirty, read_walking)


def _counted_steps(monkeypatch: pytest.MonkeyPatch, step: int) -> list[int]:
    """A session round's reads in steps of `step` partitions; the list grows by one for each
    turn of the loop the reads let pass between two steps."""
    monkeypatch.setattr(replica_manager, "FETCH_READ_STEP_PARTITIONS", step)
    turns: list[int] = []
    real_yield = replica_manager.yield_turn

    async def counted_yield() -> None:
        turns.append(1)
        await real_yield()

    monkeypatch.setattr(replica_manager, "yield_turn", counted_yield)
    return turns


@pytest.mark.asyncio
@pytest.mark.parametrize("seed", range(4))
async def test_rounds_read_in_steps_answer_and_record_exactly_as_walking_every_partition(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, seed: int
) -> None:
    # The byte budget and the first batch rule carry from step to step; parking, kept reads and
    # follower progress are each partition's, read within one step.
    turns = _counted_steps(monkeypatch, 2)
    walking = Cluster(tmp_path, keep_reads=True)
    dirty = Cluster(tmp_path, keep_reads=True, dirty_only=True)
    await _run_both(walking, dirty, _random_steps(random.Random(seed), 150))
    # The comparison proves something only if rounds took several steps.
    assert len(turns) >= 20, len(turns)


@pytest.mark.asyncio
async def test_a_round_in_steps_lets_the_loop_run_and_answers_at_once_after_news_meanwhile(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    turns = _counted_steps(monkeypatch, 3)
    cluster = Cluster(tmp_path, keep_reads=True, dirty_only=True)
    for _ in range(3):  # caught up, told the HW: every partition parked
        await cluster.follower_round(2)
    session = cluster.fetchers[2].leader_session
    # News that changes no answer for all 8: the round reads them in 3 steps, each idle.
    for p in range(PARTITIONS):
        cluster.leader.rm._fetch_news(("t", p))
    turns.clear()
    fetch, read = await _round_started(cluster, 2, 60_000)
    assert read == PARTITIONS and len(turns) == 1 and not fetch.done()
    # Partition 0, read and parked in the first step, gets records: the round answers without
    # its max wait, and the next round reads them.
    await produce(cluster.leader, batch(2, tag=7), partition=0)
    async with asyncio.timeout(5):
        assert (await fetch).partitions == ()
    assert len(turns) == 2 and session.is_dirty(("t", 0))
    seen = await cluster.follower_round(2)
    assert [(p, batch_offsets(records)) for _, p, *_, records in seen] == [(0, [(0, 1)])]


@pytest.mark.asyncio
async def test_a_kept_read_answers_only_the_fetcher_that_read_it(tmp_path: Path) -> None:
    # A consumer's empty read at the HW is no answer for a follower at the same offset, whose
    # bound is the leader's log end offset (a session has one fetcher: this is a guard).
    cluster = Cluster(tmp_path, keep_reads=True)
    entry = FetchPartition("t", 0, 0)
    repeats = RepeatReads()
    consumer = FetchRequest((entry,), max_wait_ms=0)
    follower = replace(consumer, replica_id=2, replica_epoch=20)
    await cluster.leader.rm.fetch(follower, repeats)  # follower 2 is at offset 0
    await produce(cluster.leader, batch(3))  # at the leader only: HW 0, log end offset 3
    (result,) = (await cluster.leader.rm.fetch(consumer, repeats)).partitions
    assert result.records == b"" and len(repeats) == 1
    (result,) = (await cluster.leader.rm.fetch(follower, repeats)).partitions
    assert batch_offsets(result.records) == [(0, 2)]


@pytest.mark.asyncio
async def test_the_kept_reads_hold_only_the_sessions_partitions(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path, keep_reads=True, dirty_only=True)
    consumer = cluster.fetchers[-1]
    await cluster.consumer_round(list(range(PARTITIONS)), 1 << 20)
    assert len(consumer.repeats or ()) == PARTITIONS
    await cluster.consumer_round([0, 1], 1 << 20)  # the others are forgotten
    assert len(consumer.repeats or ()) == 2
    consumer.session.reset()  # the next request is a full one, on the same call
    consumer.shadow.reset()
    await cluster.consumer_round([3], 1 << 20)
    assert len(consumer.repeats or ()) == 1


def _unfencing_steps() -> list[tuple[Any, ...]]:
    """Follower 3 fenced, caught up outside the ISR while fenced, then unfenced and fetching."""
    steps: list[tuple[Any, ...]] = [("fence", True)]
    steps += [("append", p, 1, p) for p in range(PARTITIONS)]
    steps += [("follower", 2), ("follower", 2), ("time", 31_000, True)]
    return steps + [("follower", 3)] * 3 + [("fence", False), ("follower", 3)]


@pytest.mark.asyncio
async def test_an_unfenced_follower_rejoins_the_isr_in_a_dirty_only_round(tmp_path: Path) -> None:
    # Follower 3 catches up while fenced, so its idle partitions are parked outside the ISR.
    # Unfencing it is news for no partition, yet its next round must expand the ISR, as a
    # leader reading every partition would.
    steps = _unfencing_steps()
    walking = Cluster(tmp_path, keep_reads=True)
    dirty = Cluster(tmp_path, keep_reads=True, dirty_only=True)
    await _run_both(walking, dirty, steps)
    pending = [dirty.leader.leader("t", p).pending_isr_change for p in range(PARTITIONS)]
    assert all(change is not None and change.is_expansion for change in pending)


@pytest.mark.asyncio
async def test_an_unfenced_follower_rejoins_the_isr_when_a_started_leader_refreshes_in_rounds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The same, with the leaders' replica managers started: an image's new eligibility
    # reaches the leader states a few partitions a round, between loop turns, and each one
    # reached must be read again in its session (its follower was parked outside the ISR).
    monkeypatch.setattr(replica_manager, "APPLY_ROUND_CHANGES", 3)
    steps = _unfencing_steps()
    walking = Cluster(tmp_path, keep_reads=True)
    dirty = Cluster(tmp_path, keep_reads=True, dirty_only=True)
    for cluster in (walking, dirty):
        await cluster.leader.rm.start()
    try:
        for index, step in enumerate(steps):
            outcomes = []
            for cluster in (walking, dirty):
                outcomes.append(await _step(cluster, step))
                await settle()  # the leader's refresh rounds, if the step started any
            assert outcomes[0] == outcomes[1], f"step {index} {step}: answers differ"
            assert walking.state() == dirty.state(), f"step {index} {step}: state differs"
        pending = [dirty.leader.leader("t", p).pending_isr_change for p in range(PARTITIONS)]
        assert all(change is not None and change.is_expansion for change in pending)
    finally:
        for cluster in (walking, dirty):
            await cluster.leader.rm.stop()


async def _round_started(cluster: Cluster, broker_id: int, max_wait_ms: int) -> tuple[Any, int]:
    """A follower's round sent with `max_wait_ms`, run until it waits or is answered, and how
    many partitions the leader's session gave it to read."""
    request = cluster.nodes[broker_id].rm.build_follower_fetch(1, cluster.clock())
    assert request is not None
    fetcher = cluster.fetchers[broker_id]
    read_before = fetcher.leader_session.read
    fetch = asyncio.ensure_future(fetcher.round(replace(request, max_wait_ms=max_wait_ms)))
    await asyncio.sleep(0)
    return fetch, fetcher.leader_session.read - read_before


@pytest.mark.asyncio
async def test_an_idle_dirty_only_round_reads_nothing_and_waits_for_any_partitions_news(
    tmp_path: Path,
) -> None:
    cluster = Cluster(tmp_path, keep_reads=True, dirty_only=True)
    for _ in range(3):  # caught up, told the HW: every partition parked
        await cluster.follower_round(2)
    session = cluster.fetchers[2].leader_session
    # No news: the round reads no partition and waits until its deadline.
    fetch, read = await _round_started(cluster, 2, 500)
    assert read == 0
    await asyncio.sleep(0)
    assert not fetch.done()
    cluster.leader.rm.tick(cluster.clock.advance(600))
    async with asyncio.timeout(5):
        assert (await fetch).partitions == ()
    # News for a partition the round did not read: it joins the round's answer.
    fetch, read = await _round_started(cluster, 2, 500)
    read_before = session.read
    await produce(cluster.leader, batch(2, tag=7), partition=5)
    async with asyncio.timeout(5):
        (result,) = (await fetch).partitions
    assert read == 0 and session.read == read_before
    assert (result.partition, batch_offsets(result.records)) == (5, [(0, 1)])


@pytest.mark.asyncio
async def test_bounded_rounds_answer_at_once_and_a_waiting_one_rereads_at_most_its_bound(
    tmp_path: Path,
) -> None:
    cluster = Cluster(tmp_path, keep_reads=True, dirty_only=True)
    session = cluster.fetchers[2].leader_session
    session.round_partitions = 3
    # Every partition is new: the rounds read 3, then 3, each answering without its max wait.
    for _ in range(2):
        fetch, read = await _round_started(cluster, 2, 60_000)
        async with asyncio.timeout(5):
            await fetch
        assert read == 3 and session.deferred > 0
    # The last 2, idle: this round waits.
    fetch, read = await _round_started(cluster, 2, 60_000)
    assert read == 2 and session.deferred == 0
    await asyncio.sleep(0)
    assert not fetch.done()
    # News that changes no answer (as an ISR change's) for 4 partitions it did not read: 3 join
    # it, the 4th completes it at once, and stays dirty for the next round.
    for p in range(4):
        cluster.leader.rm._fetch_news(("t", p))
    async with asyncio.timeout(5):
        await fetch
    assert [session.is_dirty(("t", p)) for p in range(4)] == [True] * 4


@pytest.mark.asyncio
async def test_a_failed_fetch_takes_its_partitions_out_of_the_request_until_the_back_off_ends(
    tmp_path: Path,
) -> None:
    cluster = Cluster(tmp_path, keep_reads=True, dirty_only=True)
    await cluster.follower_round(2)
    follower, now_ms = cluster.nodes[2], cluster.clock()
    request = follower.rm.build_follower_fetch(1, now_ms)
    assert request is not None and len(request.partitions) == PARTITIONS
    follower.rm.follower_fetch_failed(1, request, now_ms)
    assert follower.rm.build_follower_fetch(1, now_ms) is None  # all backing off
    later = cluster.clock.advance(follower.rm.config.replica_fetch_backoff_ms)
    again = follower.rm.build_follower_fetch(1, later)
    assert again is not None and _by_key(again.partitions) == _walked(follower, later)
    changes = follower.rm.follower_fetch_changes(1)
    assert changes is not None and set(changes.entries) == set(_by_key(again.partitions))
