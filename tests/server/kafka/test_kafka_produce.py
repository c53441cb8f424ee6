"""The Kafka listener's Produce (`KafkaApis.produce`) through the Broker service's core into a
real ReplicaManager over logs in tmp_path: each request is encoded and decoded with the Kafka
codec first, so the records reach the broker as views of the request's bytes, and each answer
is encoded at the request's version, as the listener sends it.

- every per-partition refusal is Kafka's error code in the answer (illegal acks, a batch with a
  bad CRC or magic, a record too large, an unknown topic, not the leader, not enough in-sync
  replicas, a sequence gap), the other partitions of the request go on;
- an idempotent retry is answered with the first append's offset and not appended again;
- acks=0 gets no answer, or closes the connection (`RequestRefusedError`) when a partition
  failed; a partition named twice and a broker not serving data close it too;
- acks=all waits in the purgatory until the follower's fetch moves the high watermark, or
  until the request's own timeout (REQUEST_TIMED_OUT);
- the records are never decoded into protobuf or copied on the way in;
- a topic listed in two entries is answered entry by entry, each result under its own.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from replog.errors import (
    CorruptRecordError,
    InvalidRequiredAcksError,
    InvalidTopicError,
    MessageSizeTooLargeError,
    NotEnoughReplicasError,
    NotLeaderOrFollowerError,
    OutOfOrderSequenceNumberError,
    RequestRefusedError,
    RequestTimedOutError,
    UnknownTopicOrPartitionError,
)
from replog.kafka.messages.produce_request import (
    PartitionProduceData,
    ProduceRequest,
    TopicProduceData,
)
from replog.kafka.messages.produce_response import PartitionProduceResponse, ProduceResponse
from replog.quorum.metadata.records import (
    ConfigRecord,
    ConfigResourceType,
    PartitionRecord,
    TopicRecord,
)
from replog.replication import messages as m
from replog.server.data_plane.broker_cores import BrokerCores
from replog.server.kafka.kafka_apis import KafkaApis
from replog.testing import ManualClock
from tests.server.data_plane.test_replica_manager import (
    TID,
    Node,
    batch,
    cluster_image,
    nodes_with,
    pending,
    replicate,
    settle,
    solo_node,
    two_nodes,
)

pytestmark = pytest.mark.asyncio


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


def listener(node: Node | None) -> KafkaApis:
    """The Kafka handlers of `node`'s broker (None: a broker whose logs are not recovered)."""
    service = BrokerCores(
        1 if node is None else node.broker_id, replica_manager=None if node is None else node.rm
    )
    return KafkaApis(1, cluster_id="c", image=lambda: cluster_image(), broker_service=service)


def request(
    *partitions: tuple[str, int, bytes], acks: int = -1, timeout_ms: int = 1000, version: int = 9
) -> ProduceRequest:
    """A Produce request as the listener decodes it from the wire (records: views of its bytes)."""
    topics: dict[str, list[PartitionProduceData]] = {}
    for topic, partition, records in partitions:
        topics.setdefault(topic, []).append(PartitionProduceData(index=partition, records=records))
    sent = ProduceRequest(
        acks=acks,
        timeout_ms=timeout_ms,
        topic_data=[TopicProduceData(name=t, partition_data=p) for t, p in topics.items()],
    )
    return ProduceRequest.decode(sent.encode(version), version)


async def produce(apis: KafkaApis, sent: ProduceRequest, version: int = 9) -> Any:
    # Bounded, so a produce that wrongly waits fails the test instead of hanging it.
    answer = await asyncio.wait_for(apis.produce(sent, version), 5)
    if answer is not None:
        answer.encode(version)  # what the listener sends must encode at the version
    return answer


def results(answer: ProduceResponse) -> dict[tuple[str, int], PartitionProduceResponse]:
    return {(t.name, p.index): p for t in answer.responses for p in t.partition_responses}


def leading(
    replicas: tuple[int, ...], config: tuple[str, str], tmp_path: Path, clock: ManualClock
) -> Node:
    """Broker 1 leading t-0 over `replicas` with only itself in the ISR, the topic's `config`
    (name, value) set."""
    node = Node(tmp_path, 1, clock)
    node.rm.apply_image(
        cluster_image(
            TopicRecord("t", TID),
            PartitionRecord(TID, 0, replicas, (1,), 1),
            ConfigRecord(ConfigResourceType.TOPIC, "t", *config),
        )
    )
    return node


def corrupt_crc(records: bytes) -> bytes:
    changed = bytearray(records)
    changed[-1] ^= 0xFF
    return bytes(changed)


def bad_magic(records: bytes) -> bytes:
    changed = bytearray(records)
    changed[16] = 1  # the magic byte: v2 batches only
    return bytes(changed)


async def test_one_request_many_partitions_each_answered_with_its_own_error(
    tmp_path: Path, clock: ManualClock
) -> None:
    leader, _ = nodes_with(tmp_path, clock, (1, 2), (1, 2), (1, 2))
    answer = await produce(
        listener(leader),
        request(
            ("t", 0, batch(2)),
            ("t", 1, bad_magic(batch())),
            ("t", 2, corrupt_crc(batch())),
            ("t", 7, batch()),  # no such partition
            ("nope", 0, batch()),  # no such topic
            ("bad/name", 0, batch()),  # illegal name
            acks=1,
        ),
    )
    got = results(answer)
    assert [t.name for t in answer.responses] == ["t", "nope", "bad/name"]
    assert [p.index for p in answer.responses[0].partition_responses] == [0, 1, 2, 7]
    assert got["t", 0].error_code == 0 and got["t", 0].base_offset == 0
    assert got["t", 7].error_code == UnknownTopicOrPartitionError.code
    assert got["nope", 0].error_code == UnknownTopicOrPartitionError.code
    assert "nope-0" in (got["nope", 0].error_message or "")
    assert got["bad/name", 0].error_code == InvalidTopicError.code
    # Framing and magic are the broker's check, before the replica manager.
    assert got["t", 1].error_code == CorruptRecordError.code
    assert "not whole v2 batches" in (got["t", 1].error_message or "")
    # The CRC is the log's (the broker never decodes the records): CORRUPT_MESSAGE too.
    assert got["t", 2].error_code == CorruptRecordError.code
    ends = [leader.log("t", p).log_end_offset for p in range(3)]
    assert ends == [2, 0, 0]


async def test_illegal_acks_fail_every_partition_and_append_nothing(
    tmp_path: Path, clock: ManualClock
) -> None:
    leader, _, _ = two_nodes(tmp_path, clock)
    answer = await produce(listener(leader), request(("t", 0, batch()), ("t", 1, batch()), acks=2))
    codes = {key: r.error_code for key, r in results(answer).items()}
    assert codes == {
        ("t", 0): InvalidRequiredAcksError.code,
        ("t", 1): InvalidRequiredAcksError.code,
    }
    assert leader.log().log_end_offset == 0


async def test_a_record_too_large_for_the_topic_is_message_too_large(
    tmp_path: Path, clock: ManualClock
) -> None:
    node = leading((1,), ("max.message.bytes", "64"), tmp_path, clock)
    answer = await produce(listener(node), request(("t", 0, batch(4)), acks=1))
    (result,) = results(answer).values()
    assert result.error_code == MessageSizeTooLargeError.code


async def test_not_the_leader_names_the_leader_where_the_version_has_the_field(
    tmp_path: Path, clock: ManualClock
) -> None:
    _, follower, _ = two_nodes(tmp_path, clock)
    apis = listener(follower)
    old = await produce(apis, request(("t", 0, batch()), acks=1))
    new = await produce(apis, request(("t", 0, batch()), acks=1, version=10), version=10)
    (before_v10,) = results(old).values()
    (from_v10,) = results(new).values()
    assert before_v10.error_code == from_v10.error_code == NotLeaderOrFollowerError.code
    assert before_v10.current_leader.leader_id == -1
    assert (from_v10.current_leader.leader_id, from_v10.current_leader.leader_epoch) == (1, 0)


async def test_acks_all_below_min_insync_is_not_enough_replicas(
    tmp_path: Path, clock: ManualClock
) -> None:
    node = leading((1, 2), ("min.insync.replicas", "2"), tmp_path, clock)
    apis = listener(node)
    (refused,) = results(await produce(apis, request(("t", 0, batch())))).values()
    assert refused.error_code == NotEnoughReplicasError.code
    (taken,) = results(await produce(apis, request(("t", 0, batch()), acks=1))).values()
    assert taken.error_code == 0


async def test_an_idempotent_retry_gets_the_first_offset_and_a_gap_is_out_of_order(
    tmp_path: Path, clock: ManualClock
) -> None:
    node = solo_node(tmp_path, clock)
    apis = listener(node)

    def idempotent(sequence: int, tag: int = 0) -> bytes:
        return batch(2, tag=tag, producer_id=7, producer_epoch=0, base_sequence=sequence)

    (first,) = results(await produce(apis, request(("t", 0, idempotent(0))))).values()
    (retry,) = results(await produce(apis, request(("t", 0, idempotent(0))))).values()
    assert first.error_code == retry.error_code == 0
    assert retry.base_offset == first.base_offset == 0
    assert node.log().log_end_offset == 2  # not appended again
    (gap,) = results(await produce(apis, request(("t", 0, idempotent(9, tag=1))))).values()
    assert gap.error_code == OutOfOrderSequenceNumberError.code


async def test_acks_zero_gets_no_answer_or_closes_the_connection_when_a_partition_failed(
    tmp_path: Path, clock: ManualClock
) -> None:
    leader, _, _ = two_nodes(tmp_path, clock)
    apis = listener(leader)
    assert await produce(apis, request(("t", 0, batch()), acks=0)) is None
    assert leader.log().log_end_offset == 1
    with pytest.raises(RequestRefusedError, match=r"broker 1: acks=0 produce to nope-0 failed"):
        await produce(apis, request(("t", 0, batch()), ("nope", 0, batch()), acks=0))
    assert leader.log().log_end_offset == 2  # the partition that was fine was appended


async def test_a_partition_named_twice_or_a_broker_not_serving_data_closes_the_connection(
    tmp_path: Path, clock: ManualClock
) -> None:
    leader, _, _ = two_nodes(tmp_path, clock)
    twice = request(("t", 0, batch()), acks=1)
    twice.topic_data[0].partition_data *= 2
    with pytest.raises(RequestRefusedError, match="names t-0 more than once"):
        await produce(listener(leader), twice)
    with pytest.raises(RequestRefusedError, match="not serving data requests"):
        await produce(listener(None), request(("t", 0, batch())))
    assert leader.log().log_end_offset == 0


async def test_acks_all_waits_in_the_purgatory_until_the_follower_moves_the_high_watermark(
    tmp_path: Path, clock: ManualClock
) -> None:
    leader, follower, _ = two_nodes(tmp_path, clock)
    waiting = asyncio.create_task(produce(listener(leader), request(("t", 0, batch(2)))))
    await settle()
    assert pending(waiting)
    await replicate(follower, leader)
    await settle()
    assert pending(waiting)
    await replicate(follower, leader)  # the follower's next offset moves the HW to 2
    (done,) = results(await waiting).values()
    assert (done.error_code, done.base_offset) == (0, 0)


async def test_acks_all_times_out_after_the_requests_own_timeout(
    tmp_path: Path, clock: ManualClock
) -> None:
    leader, _, _ = two_nodes(tmp_path, clock)
    waiting = asyncio.create_task(
        produce(listener(leader), request(("t", 0, batch()), timeout_ms=3000))
    )
    await settle()
    assert leader.rm.next_tick_ms() == clock() + 3000
    leader.rm.tick(clock.advance(2999))
    await settle()
    assert pending(waiting)
    leader.rm.tick(clock.advance(1))
    (timed_out,) = results(await waiting).values()
    assert timed_out.error_code == RequestTimedOutError.code
    assert timed_out.base_offset == 0  # appended; only the acks timed out


async def test_the_records_reach_the_replica_manager_as_the_requests_bytes(
    tmp_path: Path, clock: ManualClock
) -> None:
    leader, _, _ = two_nodes(tmp_path, clock)
    seen: list[m.ProduceRequest] = []
    produce_in_manager = leader.rm.produce

    async def recorded(sent: m.ProduceRequest, **kwargs: Any) -> m.ProduceResponse:
        seen.append(sent)
        return await produce_in_manager(sent, **kwargs)

    leader.rm.produce = recorded  # type: ignore[method-assign]
    records = batch(3)
    sent = request(("t", 0, records), acks=1)
    await produce(listener(leader), sent)
    (partition,) = seen[0].partitions
    assert isinstance(partition.records, memoryview)  # a view of the request, not a copy
    assert partition.records.obj is sent.topic_data[0].partition_data[0].records.obj  # type: ignore[union-attr]
    assert bytes(partition.records) == records


async def test_a_topic_listed_twice_gets_each_partition_answered_under_its_own_entry(
    tmp_path: Path, clock: ManualClock
) -> None:
    # Kafka lets a request list a topic in two entries; the answer follows the request's
    # entries, each partition's result under the entry that named it.
    (leader,) = nodes_with(tmp_path, clock, (1,), (1,))
    sent = ProduceRequest(
        acks=1,
        timeout_ms=1000,
        topic_data=[
            TopicProduceData(name=name, partition_data=[PartitionProduceData(index=p, records=r)])
            for name, p, r in (("t", 0, batch()), ("nope", 0, batch()), ("t", 1, batch(2)))
        ],
    )
    answer = await produce(listener(leader), ProduceRequest.decode(sent.encode(9), 9))
    got = [
        (t.name, [(p.index, p.error_code, p.base_offset) for p in t.partition_responses])
        for t in answer.responses
    ]
    unknown = UnknownTopicOrPartitionError.code
    assert got == [("t", [(0, 0, 0)]), ("nope", [(0, unknown, -1)]), ("t", [(1, 0, 0)])]
    assert [leader.log("t", p).log_end_offset for p in range(2)] == [1, 2]
