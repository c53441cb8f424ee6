"""The Kafka listener's fetch sessions against a real client's session logic: kafka-python's
`FetchSessionHandler` (KIP-227 as a Kafka client implements it) drives `KafkaApis.fetch` over
any sequence of rounds (partitions added, moved, dropped; high watermarks moving; the broker
losing the session). Every answer must be one the client accepts, the broker must read exactly
the partitions the client wants at the client's positions, and the client, reading a missing
partition as "nothing new", must always know every wanted partition's high watermark."""

from __future__ import annotations

import asyncio
import collections
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.consumer.fetcher import FetchSessionHandler
from kafka.structs import TopicPartition

from replog.kafka.messages.fetch_request import (
    FetchPartition,
    FetchRequest,
    FetchTopic,
    ForgottenTopic,
)
from replog.replication.fetch_session_cache import SESSION_ID_MAX, FetchSessionCache
from replog.server.data_plane.broker_cores import BrokerCores
from replog.server.kafka.kafka_apis import KafkaApis
from tests.server.kafka.test_kafka_apis import FetchLog, fetch_now, image

PARTITIONS = 2  # the test image's topic "orders" has two


rounds = st.lists(
    st.tuples(
        st.dictionaries(st.integers(0, PARTITIONS - 1), st.integers(0, 3)),  # wanted: offsets
        st.dictionaries(st.integers(0, PARTITIONS - 1), st.integers(0, 3)),  # HW moves
        st.booleans(),  # the broker loses the session before this round
    ),
    min_size=1,
    max_size=12,
)


def request_for(data: Any, version: int) -> FetchRequest:
    return FetchRequest(
        session_id=data.id,
        session_epoch=data.epoch,
        topics=[
            FetchTopic(
                topic=topic.topic,
                partitions=[
                    FetchPartition(partition=p, fetch_offset=offset, partition_max_bytes=1000)
                    for p, offset in topic.partitions
                ],
            )
            for topic in data.to_send
        ],
        forgotten_topics_data=[
            ForgottenTopic(topic=topic.topic, partitions=list(topic.partitions))
            for topic in data.to_forget
        ],
    )


@settings(max_examples=150, deadline=None)
@given(rounds)
def test_kafka_pythons_session_logic_agrees_with_the_broker(
    steps: list[tuple[dict[int, int], dict[int, int], bool]],
) -> None:
    current = image()
    log = FetchLog()
    ids = iter(range(1, SESSION_ID_MAX))
    cache = FetchSessionCache(lambda: next(ids))
    service = BrokerCores(2, replica_manager=log)  # type: ignore[arg-type]
    handlers = KafkaApis(
        2, cluster_id="c1", image=lambda: current, broker_service=service, fetch_sessions=cache
    )
    client = FetchSessionHandler(node_id=2)
    known: dict[int, int] = {}  # partition -> the high watermark the client last read

    async def run() -> None:
        for wanted, moves, lose in steps:
            for p, advance in moves.items():
                key = ("orders", p)
                log.high_watermarks[key] = log.high_watermarks.get(key, 0) + advance
            if lose:
                for session in list(cache):
                    cache.remove(session.session_id)
            next_partitions = collections.OrderedDict(
                (TopicPartition("orders", p), (p, offset)) for p, offset in sorted(wanted.items())
            )
            data = client.build_next(next_partitions)
            reads = len(log.reads)
            answer = fetch_now(handlers, request_for(data, 12), 12)
            accepted = client.handle_response(answer)
            if answer.error_code:
                # Only a lost session is refused, and the client starts afresh after it.
                assert lose and answer.error_code == 70 and not accepted
                assert len(log.reads) == reads
                known.clear()
                continue
            assert accepted, answer
            now = log.reads[reads:]  # none when nothing is wanted: nothing to read
            assert len(now) == (1 if wanted else 0)
            read = sorted((p.partition, p.fetch_offset) for r in now for p in r.partitions)
            assert read == sorted(wanted.items())
            for topic in answer.responses:
                for partition in topic.partitions:
                    known[partition.partition_index] = partition.high_watermark
            for p in wanted:
                assert known.get(p) == log.high_watermarks.get(("orders", p), 0), (p, known)

    asyncio.run(run())
