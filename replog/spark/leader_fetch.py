"""A Spark task's Fetch on the leader's Kafka listener: a consumer's Fetch of one partition,
its records a view of the buffer the answer was received into.

Why: the range reader decodes whole batches into Arrow columns (`batch_columns`), so it needs
the batches' bytes as the leader sent them, not the consumer's per-record objects.
`KafkaConnection` receives an answer of 64 KiB or more straight into a buffer of its own
(`answer_buffer`: numpy's, not zeroed, since every byte of it is received; zeroing an 8 MiB
bytearray cost a task's fetch thread about 10 ns a row) and the generated `FetchResponse`
decode hands each partition's `records` over as a view of that buffer: nothing copies the
records between the socket and the decoder.

Rules:
- A consumer's Fetch (replica id -1, outside any fetch session: session id 0, epoch -1) at
  version 4-12 (topics by name; v4 carries the isolation level, v9 the current leader epoch):
  the leader answers records below its high watermark only (below the last stable offset
  with read_committed). Nothing else is asked of the broker, so Apache Kafka's brokers
  answer it as replog's do.
- One connection per leader address (its own `KafkaConnections`, lane `LANE`), opened at its
  first fetch and again after it failed or closed.
- A request may take `timeout_ms` plus its `max_wait_ms` (a long poll is not cut short).
- A failure raises the connection's typed error naming the address (`NetworkError`,
  `RequestTimedOutError` and `MalformedResponseError`, after which the connection is
  closed; `NotAKafkaListenerError`; `UnsupportedVersionError`), a top-level error code (v7+)
  its Kafka error.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass

import numpy as np

from replog.errors import error_for_code
from replog.kafka.messages.fetch_request import FetchPartition, FetchRequest, FetchTopic
from replog.kafka.messages.fetch_response import FetchResponse
from replog.wire.kafka_connection import KafkaConnections
from replog.wire.sasl_authentication import SaslCredentials

MIN_VERSION = 4
MAX_VERSION = 12  # topics by name: v13 and later name them by topic id
LANE = "spark-fetch"
CONSUMER_REPLICA_ID = -1


@dataclass(frozen=True, slots=True)
class PartitionFetch:
    """What one fetch asks of the leader: a partition from an offset, and the request's
    waits and sizes (Kafka's Fetch fields)."""

    topic: str
    partition: int
    fetch_offset: int
    partition_max_bytes: int
    current_leader_epoch: int  # -1: not known
    max_wait_ms: int
    min_bytes: int
    max_bytes: int
    isolation_level: int  # 0 read_uncommitted, 1 read_committed


def answer_buffer(size: int) -> np.ndarray:
    """A large answer's own buffer (module docstring): not zeroed, every byte is received."""
    return np.empty(size, dtype=np.uint8)


class LeaderFetches:
    """One session's fetches (module rules). Lives on one event loop, as its connections do."""

    def __init__(
        self,
        *,
        client_id: str,
        setup_timeout_ms: int,
        tls: ssl.SSLContext | None = None,
        sasl: SaslCredentials | None = None,
    ) -> None:
        self.connections = KafkaConnections(
            client_id=client_id,
            setup_timeout_ms=setup_timeout_ms,
            allocate=answer_buffer,
            tls=tls,
            sasl=sasl,
        )

    async def fetch(self, address: str, ask: PartitionFetch, *, timeout_ms: int) -> FetchResponse:
        """The leader at `address`'s answer to `ask` (module rules)."""
        request = FetchRequest(
            replica_id=CONSUMER_REPLICA_ID,
            max_wait_ms=ask.max_wait_ms,
            min_bytes=ask.min_bytes,
            max_bytes=ask.max_bytes,
            isolation_level=ask.isolation_level,
            session_id=0,
            session_epoch=-1,
            topics=[
                FetchTopic(
                    topic=ask.topic,
                    partitions=[
                        FetchPartition(
                            partition=ask.partition,
                            current_leader_epoch=ask.current_leader_epoch,
                            fetch_offset=ask.fetch_offset,
                            partition_max_bytes=ask.partition_max_bytes,
                        )
                    ],
                )
            ],
        )
        connection = await self.connections.get(address, LANE)
        response, _ = await connection.call(
            request,
            timeout_ms=timeout_ms + max(0, ask.max_wait_ms),
            min_version=MIN_VERSION,
            max_version=MAX_VERSION,
        )
        assert isinstance(response, FetchResponse)
        if response.error_code != 0:
            raise error_for_code(
                response.error_code, f"broker at {address} refused the Fetch of {ask.topic}"
            )
        return response

    async def close(self) -> None:
        await self.connections.close()
