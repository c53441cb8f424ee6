"""A leader serving a compacted partition it cleaned, through its own Kafka listener: records
produced with keys by replog's producer, a cleaning pass over the leader's log (the storage
layer's `clean_log`: sparse batches, removed batches, gaps), then replog's asyncio consumer,
kafka-python and confluent-kafka read from offset 0 exactly the records the cleaned log holds,
once, in order, and end at the log end offset; a consumer positioned inside a removed range
reads on from the next kept record."""

from __future__ import annotations

import asyncio
import itertools
import random
from pathlib import Path
from typing import Any

import pytest

from replog import TopicPartition
from replog.aio import Consumer as AsyncConsumer
from replog.aio import Producer as AsyncProducer
from replog.record import RecordBatch
from replog.storage.cleaner.log_cleaning import clean_log
from replog.storage.cleaner.offset_map import OffsetMap
from replog.testing import ManualClock
from tests.compacted_log import confluent_entries, kafka_python_entries
from tests.server.kafka.compacted_listener import compacted_listener

pytestmark = pytest.mark.asyncio

T0 = TopicPartition("t", 0)
Entry = tuple[int, bytes | None, bytes | None]
# 300 records over 60 keys, in a fixed random order: the latest of each key lies anywhere.
KEYS = [b"k%d" % random.Random(7 * i).randrange(60) for i in range(300)]


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


async def read_all(address: str, start: int, end_offset: int, expected: int) -> list[Entry]:
    async with AsyncConsumer(bootstrap_servers=address, request_timeout_ms=5000) as consumer:
        consumer.assign([T0])
        consumer.seek(T0, start)
        found: list[Any] = []
        for _ in range(50):
            found += (await consumer.poll(timeout_ms=100)).get(T0, [])
            if len(found) >= expected and await consumer.position(T0) == end_offset:
                break
        assert await consumer.position(T0) == end_offset
        return [(r.offset, r.key, r.value) for r in found]


async def test_a_cleaned_partition_is_read_through_the_listener_by_every_client(
    tmp_path: Path, clock: ManualClock
) -> None:
    async with compacted_listener(tmp_path, clock) as (node, address):
        log = node.log()
        async with AsyncProducer(
            bootstrap_servers=address, acks=1, enable_idempotence=False, linger_ms=50
        ) as producer:
            # One record a batch, then batches of many (which the pass leaves sparse).
            for i in range(100):
                await producer.send("t", _value(i), key=KEYS[i], partition=0)
            sent = [
                producer.send_nowait("t", _value(i), key=KEYS[i], partition=0)
                for i in range(100, 300)
            ]
            await asyncio.gather(*sent)
        assert log.log_end_offset == 300
        log.roll()
        result = clean_log(
            log,
            OffsetMap(24 * 100),
            first_dirty=0,
            first_uncleanable=log.active_segment.base_offset,
            now_ms=clock(),
            delete_retention_ms=1 << 40,
        )
        assert result.groups_swapped >= 1
        kept: list[Entry] = [
            (r.offset, r.key, r.value)
            for _, batch in log.read_batches(0)
            for r in RecordBatch.parse(batch, sparse=True).records()
        ]
        assert len(set(KEYS)) <= len(kept) < 300
        offsets = [e[0] for e in kept]
        assert any(b - a > 1 for a, b in itertools.pairwise(offsets))  # gaps between kept ones
        sparse = [h for h in log.batch_headers(0) if h.records_count != h.last_offset_delta + 1]
        assert sparse, "the pass left no sparse batch"
        end = log.log_end_offset
        assert await read_all(address, 0, end, len(kept)) == kept
        # An offset the pass removed, below a kept record.
        removed = [o for o in range(kept[-1][0]) if o not in set(offsets)]
        middle = removed[len(removed) // 2]
        assert await read_all(address, middle, end, 0) == [e for e in kept if e[0] >= middle]
        for read in (kafka_python_entries, confluent_entries):
            assert await asyncio.to_thread(read, address, end, len(kept)) == (kept, end)


def _value(i: int) -> bytes | None:
    return None if i % 11 == 10 else b"v%d" % i
