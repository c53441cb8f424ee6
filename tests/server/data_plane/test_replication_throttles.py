"""Replication throttles on two hand-wired brokers (`ReplicaManager`, `FollowerFetchSteps`): the
leader leaves a throttled partition's records out of a fetch by a replica outside the ISR while
its bound is exceeded, the follower leaves out a throttled partition it has not caught up on
while its own is, and both honour only what the configs name (Kafka's KIP-73 rules). Whether
the follower caught up follows Kafka's fetch state lag: set by an answer that brings records
(or the first), and by an OFFSET_OUT_OF_RANGE reset from the leader's log end offset."""

from __future__ import annotations

from pathlib import Path

import pytest

from replog.errors import OffsetOutOfRangeError
from replog.quorum.metadata.image import MetadataImage
from replog.quorum.metadata.records import (
    ConfigRecord,
    ConfigResourceType,
    PartitionRecord,
    TopicRecord,
)
from replog.replication.messages import FetchPartitionResult, FetchRequest, FetchResponse
from replog.testing import ManualClock
from tests.metadata.metadata_helpers import replayed
from tests.server.data_plane.test_replica_manager import (
    TID,
    Node,
    batch,
    clock,
    cluster_image,
    produce,
    replicate,
)

__all__ = ["clock"]  # the fixture
BATCHES = 6


def broker_config(broker: str, key: str, value: str | None) -> ConfigRecord:
    return ConfigRecord(ConfigResourceType.BROKER, broker, key, value)


def topic_config(key: str, value: str | None) -> ConfigRecord:
    return ConfigRecord(ConfigResourceType.TOPIC, "t", key, value)


async def moving_replica(
    tmp_path: Path, clock: ManualClock, *, isr: tuple[int, ...] = (1,)
) -> tuple[Node, Node, MetadataImage, int]:
    """Leader 1 with BATCHES batches and follower 2 (outside the ISR unless `isr` says), each
    follower fetch bringing one batch; and one batch's size."""
    image = cluster_image(TopicRecord("t", TID), PartitionRecord(TID, 0, (1, 2), isr, 1))
    leader = Node(tmp_path, 1, clock)
    follower = Node(tmp_path, 2, clock, replica_fetch_max_bytes=1)
    for node in (leader, follower):
        node.rm.apply_image(image)
    for tag in range(BATCHES):
        await produce(leader, batch(3, tag=tag))
    return leader, follower, image, len(batch(3))


def apply(image: MetadataImage, *nodes: Node) -> None:
    for node in nodes:
        node.rm.apply_image(image)


async def fetched(follower: Node, leader: Node) -> int:
    """Bytes of records one fetch round trip brought (0: the partition was left out or got
    none)."""
    request = follower.rm.build_follower_fetch(leader.broker_id, follower.clock())
    if request is None or not request.partitions:
        return 0
    _, response = await replicate(follower, leader)
    return sum(r.records_size for r in response.partitions)


async def throttled_replica(
    tmp_path: Path, clock: ManualClock, side: str, broker: int
) -> tuple[Node, Node, MetadataImage, int]:
    """`moving_replica` with `side`'s throttle ("leader" or "follower") at one batch a second
    on `broker`, naming it for partition 0."""
    leader, follower, image, size = await moving_replica(tmp_path, clock)
    image = replayed(
        image,
        broker_config(str(broker), f"{side}.replication.throttled.rate", str(size)),
        topic_config(f"{side}.replication.throttled.replicas", f"0:{broker}"),
    )
    apply(image, leader, follower)
    return leader, follower, image, size


@pytest.mark.asyncio
async def test_the_leader_sends_a_throttled_replica_nothing_while_over_its_rate(
    tmp_path: Path, clock: ManualClock
) -> None:
    leader, follower, image, size = await throttled_replica(tmp_path, clock, "leader", 1)
    assert await fetched(follower, leader) == size  # 0 B/s so far: under the bound
    assert leader.rm.leader_quota.rate(clock()) == size  # one batch in the first window
    clock.advance(500)
    assert await fetched(follower, leader) == size  # size B / 1 s: at the bound, not over
    assert await fetched(follower, leader) == 0  # over it: nothing, though more is there
    assert follower.log().log_end_offset == 6
    clock.advance(1500)  # 2 * size over 2 s
    assert await fetched(follower, leader) == size
    assert await fetched(follower, leader) == 0
    # The throttle off: everything else at once.
    apply(replayed(image, broker_config("1", "leader.replication.throttled.rate", None)), leader)
    while await fetched(follower, leader):
        pass
    assert follower.log().log_end_offset == 3 * BATCHES


@pytest.mark.asyncio
@pytest.mark.parametrize(
    "rate_at, replicas",
    [
        ("2", "0:1"),  # another broker's rate
        ("1", "0:2"),  # the pair names another broker as the leader
        ("1", ""),  # no replica named
    ],
)
async def test_the_leader_throttles_only_what_its_own_configs_name(
    tmp_path: Path, clock: ManualClock, rate_at: str, replicas: str
) -> None:
    leader, follower, image, size = await moving_replica(tmp_path, clock)
    image = replayed(
        image,
        broker_config(rate_at, "leader.replication.throttled.rate", "1"),
        topic_config("leader.replication.throttled.replicas", replicas or None),
    )
    apply(image, leader, follower)
    for _ in range(BATCHES):
        assert await fetched(follower, leader) == size


@pytest.mark.asyncio
async def test_an_in_sync_replica_is_never_throttled_but_counts_against_the_rate(
    tmp_path: Path, clock: ManualClock
) -> None:
    leader, follower, image, size = await moving_replica(tmp_path, clock, isr=(1, 2))
    image = replayed(
        image,
        # The cluster default counts when the broker's own is not set, as in Kafka.
        broker_config("", "leader.replication.throttled.rate", "1"),
        topic_config("leader.replication.throttled.replicas", "*"),
    )
    apply(image, leader, follower)
    for _ in range(BATCHES):
        assert await fetched(follower, leader) == size
    assert leader.rm.leader_quota.rate(clock()) == BATCHES * size
    assert leader.rm.leader_quota.is_exceeded(clock())


@pytest.mark.asyncio
async def test_the_follower_leaves_out_a_throttled_partition_while_over_its_rate(
    tmp_path: Path, clock: ManualClock
) -> None:
    leader, follower, image, size = await throttled_replica(tmp_path, clock, "follower", 2)
    assert await fetched(follower, leader) == size
    clock.advance(500)
    assert await fetched(follower, leader) == size  # at the bound, not over it
    assert follower.rm.follower_quota.is_exceeded(clock())
    assert follower.rm.build_follower_fetch(1, clock()) is None  # left out, not asked
    clock.advance(1500)
    request = follower.rm.build_follower_fetch(1, clock())
    assert isinstance(request, FetchRequest) and len(request.partitions) == 1  # back
    assert await fetched(follower, leader) == size
    # The partition no longer named: asked again at once, however fast.
    apply(replayed(image, topic_config("follower.replication.throttled.replicas", None)), follower)
    while await fetched(follower, leader):
        pass
    assert follower.log().log_end_offset == 3 * BATCHES


@pytest.mark.asyncio
async def test_a_caught_up_follower_is_never_left_out(tmp_path: Path, clock: ManualClock) -> None:
    leader, follower, image, size = await moving_replica(tmp_path, clock)
    follower_rm_config = broker_config("2", "follower.replication.throttled.rate", "0")
    while await fetched(follower, leader):  # unthrottled: caught up
        pass
    await fetched(follower, leader)
    image = replayed(
        image, follower_rm_config, topic_config("follower.replication.throttled.replicas", "*")
    )
    apply(image, leader, follower)
    await produce(leader, batch(3, tag=9))
    assert await fetched(follower, leader) == size  # 0 B/s allowed, yet it was caught up
    assert follower.rm.follower_quota.is_exceeded(clock())


@pytest.mark.asyncio
async def test_a_follower_reset_to_the_leaders_end_is_caught_up(
    tmp_path: Path, clock: ManualClock
) -> None:
    leader, follower, _, size = await throttled_replica(tmp_path, clock, "follower", 2)
    assert await fetched(follower, leader) == size  # 3 of 18 records: not caught up
    # The leader's log now starts at its end (DeleteRecords, retention): the follower restarts
    # its log there, at the leader's end, which Kafka's reset counts as lag 0.
    request = follower.rm.build_follower_fetch(1, clock())
    assert request is not None
    leader_end = BATCHES * 3
    out_of_range = FetchPartitionResult(
        "t",
        0,
        OffsetOutOfRangeError("t-0: offset 3 is below the log start"),
        high_watermark=leader_end,
        log_start_offset=leader_end,
        log_end_offset=leader_end,
    )
    follower.rm.process_follower_fetch(1, request, FetchResponse((out_of_range,)), clock())
    assert follower.log().log_end_offset == leader_end
    follower.rm.follower_quota.record(10 * size, clock())  # other throttled partitions' bytes
    assert follower.rm.follower_quota.is_exceeded(clock())
    request = follower.rm.build_follower_fetch(1, clock())
    assert isinstance(request, FetchRequest) and len(request.partitions) == 1
