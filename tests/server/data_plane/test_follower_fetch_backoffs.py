"""The follower's back-offs (`FollowerFetchSteps`): those one answer or one failed fetch starts
are kept and announced as one group, and a failed fetch's partitions leave their plans at once
(a whole plan in one step), with every observable outcome the same as one deadline per
partition, each left at the next refresh: the back-off ends, in which order and how many per
call, the next end, each partition's back-off, and every request built."""

from __future__ import annotations

import heapq
import random
from types import SimpleNamespace
from typing import Any

import pytest

from replog.errors import NotLeaderOrFollowerError, UnknownServerError
from replog.replication.messages import FetchPartitionResult, FetchRequest, FetchResponse
from replog.server.config.replica_manager_config import ReplicaManagerConfig
from replog.server.data_plane import follower_fetch
from replog.server.data_plane.follower_fetch import FollowerFetchSteps
from tests.server.data_plane.follower_fetch_helpers import LOCAL
from tests.server.data_plane.follower_fetch_helpers import partition as followed

SOURCES = (2, 3)
BACKOFF_MS = 100


def partition(key: tuple[str, int], leader: int) -> SimpleNamespace:
    """`follower_fetch_helpers.partition`, with what `process` reads of an answer's replica
    (no records are ever answered here)."""
    replica = followed(key, leader)
    replica.name = f"{key[0]}-{key[1]}"
    replica.stopped = False
    replica.sync_follower_offsets = lambda: None
    replica.log.log_end_offset = replica.log.high_watermark = 0
    replica.log.update_high_watermark = lambda hw: None
    return replica


def steps_of(
    cls: type[FollowerFetchSteps], partitions: dict[Any, Any], deadlines: list[int]
) -> FollowerFetchSteps:
    return cls(
        ReplicaManagerConfig(broker_id=LOCAL, replica_fetch_backoff_ms=BACKOFF_MS),
        partitions,
        broker_epoch=lambda: 1,
        on_new_deadline=deadlines.append,
    )


class PerPartitionSteps(FollowerFetchSteps):
    """The reference: one deadline per partition backed off, announced each, and a failed
    fetch's partitions left at the next refresh."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._ends: list[Any] = []
        self._sequence = 0

    def _back_off(self, partition: Any, now_ms: int) -> None:
        follower = partition.follower
        if follower is not None:
            follower.backoff_until_ms = now_ms + self._config.replica_fetch_backoff_ms
            self._sequence += 1
            heapq.heappush(
                self._ends, (follower.backoff_until_ms, self._sequence, partition.key, partition)
            )
            self._touched.add(partition.key)
            self._on_new_deadline(follower.backoff_until_ms)

    def _start_backoffs(self, now_ms: int) -> None:
        pass

    def fetch_failed(self, source_broker_id: int, request: FetchRequest, now_ms: int) -> None:
        for entry in request.partitions:
            partition = self._partitions.get((entry.topic, entry.partition))
            if (
                partition is not None
                and partition.follower is not None
                and partition.follower.leader_id == source_broker_id
            ):
                self._back_off(partition, now_ms)

    def end_backoffs(self, now_ms: int) -> bool:
        ended = 0
        ends = self._ends
        while ends and ends[0][0] <= now_ms and ended < follower_fetch.BACKOFF_ENDS_PER_CALL:
            until, _, key, partition = heapq.heappop(ends)
            if self._still_backing_off(until, key, partition):
                partition.follower.backoff_until_ms = 0
                self._touched.add(key)
                ended += 1
        return ended > 0

    def next_backoff_end_ms(self) -> int | None:
        ends = self._ends
        while ends and not self._still_backing_off(ends[0][0], ends[0][2], ends[0][3]):
            heapq.heappop(ends)
        return ends[0][0] if ends else None


def answer(rng: random.Random, request: FetchRequest) -> FetchResponse:
    """Some of the partitions asked, each answered with an error or without records."""
    results = []
    for entry in request.partitions:
        draw = rng.random()
        if draw < 0.3:
            continue
        error = (
            NotLeaderOrFollowerError("moved")
            if draw < 0.55
            else UnknownServerError("boom")
            if draw < 0.65
            else None
        )
        results.append(FetchPartitionResult(entry.topic, entry.partition, error))
    return FetchResponse(tuple(results))


def observed(steps: FollowerFetchSteps, partitions: dict[Any, Any]) -> Any:
    return {key: p.follower.backoff_until_ms for key, p in partitions.items() if p.follower}


@pytest.mark.parametrize("seed", range(40))
def test_grouped_back_offs_equal_one_deadline_per_partition(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(follower_fetch, "BACKOFF_ENDS_PER_CALL", 3)
    rng = random.Random(seed)
    keys = [("t", n) for n in range(24)]
    worlds = []
    for cls in (FollowerFetchSteps, PerPartitionSteps):
        partitions: dict[Any, Any] = {}
        deadlines: list[int] = []
        worlds.append((steps_of(cls, partitions, deadlines), partitions, deadlines))
    now = 0
    requests: dict[int, tuple[FetchRequest | None, FetchRequest | None]] = {}
    for _ in range(300):
        draw = rng.random()
        key = rng.choice(keys)
        source = rng.choice(SOURCES)
        outcomes = []
        if draw < 0.2:  # a new replica, a new leader or none
            leader = rng.choice((*SOURCES, -1))
            for steps, partitions, _ in worlds:
                partitions[key] = partition(key, leader)
                steps.touch(key)
        elif draw < 0.25:
            for steps, partitions, _ in worlds:
                partitions.pop(key, None)
                steps.touch(key)
        elif draw < 0.3:
            now += rng.choice((1, BACKOFF_MS // 2, BACKOFF_MS))
        elif draw < 0.55:
            built = tuple(steps.build(source, now) for steps, _, _ in worlds)
            assert (built[0] is None) == (built[1] is None)
            if built[0] is not None and built[1] is not None:
                assert built[0].partitions == built[1].partitions
                changes = [steps.changes(source) for steps, _, _ in worlds]
                assert changes[0] is not None and changes[1] is not None
                assert dict(changes[0].entries) == dict(changes[1].entries)
                requests[source] = (built[0], built[1])
        elif draw < 0.8 and source in requests:
            sent = requests.pop(source)
            seed_of_answer = rng.random()
            for (steps, _, _), request in zip(worlds, sent, strict=True):
                assert request is not None
                steps.process(source, request, answer(random.Random(seed_of_answer), request), now)
        elif draw < 0.9 and source in requests:
            for (steps, _, _), request in zip(worlds, requests.pop(source), strict=True):
                assert request is not None
                steps.fetch_failed(source, request, now)
            # The fetchers build again before the back-off ends (every 100 ms at most).
            for other in SOURCES:
                built = tuple(steps.build(other, now) for steps, _, _ in worlds)
                assert (built[0] is None) == (built[1] is None)
                if built[0] is not None and built[1] is not None:
                    assert built[0].partitions == built[1].partitions
                requests.pop(other, None)
        else:
            outcomes = [steps.end_backoffs(now) for steps, _, _ in worlds]
            assert outcomes[0] == outcomes[1]
            for steps, _, _ in worlds:
                steps.refresh(now)
        assert observed(*worlds[0][:2]) == observed(*worlds[1][:2])
        assert worlds[0][0].next_backoff_end_ms() == worlds[1][0].next_backoff_end_ms()
        assert set(worlds[0][2]) == set(worlds[1][2])  # the same deadlines announced


def test_one_answer_or_failed_fetch_announces_its_back_offs_once() -> None:
    keys = [("t", n) for n in range(50)]
    partitions: dict[Any, Any] = {key: partition(key, 2) for key in keys}
    deadlines: list[int] = []
    steps = steps_of(FollowerFetchSteps, partitions, deadlines)
    for key in keys:
        steps.touch(key)
    request = steps.build(2, now_ms=0)
    assert request is not None
    errors = tuple(FetchPartitionResult(*key, NotLeaderOrFollowerError("moved")) for key in keys)
    steps.process(2, request, FetchResponse(errors), now_ms=0)
    assert deadlines == [BACKOFF_MS]
    assert len(steps._backoff_ends) == 1
    request = steps.build(2, now_ms=BACKOFF_MS)  # every back-off ended: all asked again
    assert request is not None and len(request.partitions) == 50
    steps.fetch_failed(2, request, now_ms=BACKOFF_MS)
    assert deadlines == [BACKOFF_MS, 2 * BACKOFF_MS]


def failed_fetch(count: int) -> tuple[list[Any], dict[Any, Any], FollowerFetchSteps]:
    """`count` partitions followed from broker 2, whose fetch of them all failed at 0."""
    keys = [("t", n) for n in range(count)]
    partitions: dict[Any, Any] = {key: partition(key, 2) for key in keys}
    steps = steps_of(FollowerFetchSteps, partitions, [])
    for key in keys:
        steps.touch(key)
    request = steps.build(2, now_ms=0)
    assert request is not None
    steps.fetch_failed(2, request, now_ms=0)
    return keys, partitions, steps


def test_a_failed_fetch_leaves_its_plan_at_once_and_rejoins_in_order() -> None:
    """The partitions of a failed fetch leave the plan in the call, not at the next refresh
    (the plan, 33,000 partitions at 100,000, is dropped whole), and rejoin in their order."""
    keys, _, steps = failed_fetch(1000)
    assert not steps._touched  # nothing left for a refresh to do
    assert not steps._plans.get(2)
    assert steps.build(2, now_ms=1) is None
    while steps.end_backoffs(BACKOFF_MS):  # a bounded number per call
        pass
    again = steps.build(2, now_ms=BACKOFF_MS)
    assert again is not None
    assert [(e.topic, e.partition) for e in again.partitions] == keys


def test_stale_back_offs_are_looked_at_a_bounded_number_per_call(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A node stopping removes every replica: their back-offs, stale, are dropped a bounded
    number per call, the timer coming back at once, and the live ones still end."""
    monkeypatch.setattr(follower_fetch, "BACKOFF_VISITS_PER_CALL", 3)
    keys, partitions, steps = failed_fetch(10)
    for key in keys[:8]:  # removed: stale back-offs
        del partitions[key]
        steps.touch(key)
    group = steps._backoff_ends[0][2]
    assert steps.next_backoff_end_ms() == BACKOFF_MS  # past 3 stale ones: comes then
    assert group.next == 3
    ended = [steps.end_backoffs(BACKOFF_MS) for _ in range(2)]  # 3 stale; 2 stale, 1 on
    assert group.next == 9 and ended == [False, True]
    assert steps.next_backoff_end_ms() == BACKOFF_MS  # the last one, still on
    assert steps.end_backoffs(BACKOFF_MS)
    assert steps.next_backoff_end_ms() is None
    assert all(partitions[key].follower.backoff_until_ms == 0 for key in keys[8:])
