"""The Spark fetcher's Fetch on the leader's Kafka listener (`leader_fetch`,
`partition_fetcher`).

Against a scripted Kafka listener: the request is a consumer's (replica id -1, no fetch
session, topic by name at v12, the leader epoch, sizes and isolation level asked), and a
large answer's records are a view of the buffer that answer was received into. A connection
closed mid-answer, an answer late past its timeout and one that does not decode are failed
fetches: retried, said once naming the leader and why, the next metadata asked of other
brokers first, the next fetch on a new connection. A leader address that is not a Kafka
listener raises `NotAKafkaListenerError` (retrying cannot help). A task that gets no answer
says why when it gives up (`ReadTimeoutError`).

On a real leader's Kafka listener in one process: a Spark task's fetch reads committed
records only, at both isolation levels, and moves no follower progress, ISR or high
watermark.

On a cluster: a range read across its leader killed and restarted gets every record once; a
worker keeps the session of a task that read its whole range for its next task (the same
connection), and tasks that stop early or fail close theirs.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import os
import struct
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from client_cluster import ClientCluster
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import LongType, StructField, StructType

from replog import Admin
from replog.client.loop_thread import LoopThread
from replog.client.records import TopicPartition
from replog.errors import NotAKafkaListenerError
from replog.kafka.messages.api_versions_response import ApiVersion, ApiVersionsResponse
from replog.kafka.messages.fetch_request import FetchRequest
from replog.kafka.messages.fetch_response import (
    FetchableTopicResponse,
    FetchResponse,
    PartitionData,
)
from replog.kafka.protocol.framing import decode_request, encode_response
from replog.server.kafka.kafka_listener import KafkaListener
from replog.spark import range_reader
from replog.spark.errors import DataLossError, ReadTimeoutError
from replog.spark.fetch_sessions import SessionPool
from replog.spark.leader_fetch import LeaderFetches, PartitionFetch
from replog.spark.options import Mode, parse_options
from replog.spark.partition_fetcher import FetchAnswer, PartitionFetcher, answer_for
from replog.spark.planning import OffsetRange
from replog.testing import ManualClock
from tests.server.data_plane.test_replica_manager import batch, batch_offsets, produce, replicate
from tests.server.kafka.test_kafka_fetch import handlers, served

SCHEMA = to_arrow_schema(StructType([StructField("offset", LongType())]), timezone="UTC")
TP = TopicPartition("t", 0)
FAST = {
    "bootstrap.servers": "127.0.0.1:1",
    "retry.backoff.ms": "10",
    "retry.backoff.max.ms": "10",
    "request.timeout.ms": "500",
    "fetch.max.wait.ms": "0",
}
_SIZE = struct.Struct(">i")


class _Body(bytes):
    """A piece written as a whole response frame to the request: its header, then these
    bytes as the body."""


# What the listener does with one Fetch (given the request): the pieces to write in turn (a
# FetchResponse is encoded for the request, an empty piece closes the connection), or None to
# stay silent.
Script = Callable[[FetchRequest], list[bytes | FetchResponse] | None]


def _fetch_answer(records: bytes, *, high_watermark: int = 10) -> FetchResponse:
    return FetchResponse(
        responses=[
            FetchableTopicResponse(
                topic=TP.topic,
                partitions=[
                    PartitionData(
                        partition_index=TP.partition,
                        high_watermark=high_watermark,
                        log_start_offset=0,
                        records=records,
                    )
                ],
            )
        ]
    )


def _answering(records: bytes) -> Script:
    return lambda request: [_fetch_answer(records)]


async def _listener(scripts: list[Script], seen: list[Any]) -> tuple[asyncio.Server, int]:
    """A Kafka listener that answers ApiVersions (Fetch 4-18), records each Fetch with its
    version and answers it as the next of `scripts` says (the last one again when none are
    left)."""
    left = list(scripts)

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                (size,) = _SIZE.unpack(await reader.readexactly(4))
                header, body = decode_request(await reader.readexactly(size))
                key, version = header.request_api_key, header.request_api_version
                if key == 18:
                    versions = ApiVersionsResponse(
                        api_keys=[
                            ApiVersion(api_key=1, min_version=4, max_version=18),
                            ApiVersion(api_key=18, min_version=0, max_version=4),
                        ]
                    )
                    writer.write(encode_response(18, version, header.correlation_id, versions))
                    continue
                assert isinstance(body, FetchRequest)
                seen.append((version, body))
                script = left.pop(0) if len(left) > 1 else left[0]
                pieces = script(body)
                if pieces is None:
                    await asyncio.sleep(3600)
                for piece in pieces or []:
                    if not piece:
                        writer.close()
                        return
                    if isinstance(piece, FetchResponse):
                        piece = encode_response(1, version, header.correlation_id, piece)
                    elif isinstance(piece, _Body):  # v12's response header: id, no tags
                        head = _SIZE.pack(header.correlation_id) + b"\0"
                        piece = _SIZE.pack(len(head) + len(piece)) + head + piece
                    writer.write(piece)
                    await writer.drain()
                    await asyncio.sleep(0.01)
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1]


def _ask(fetch_offset: int = 7, **fields: Any) -> PartitionFetch:
    asked = {
        "topic": TP.topic,
        "partition": TP.partition,
        "fetch_offset": fetch_offset,
        "partition_max_bytes": 1 << 20,
        "current_leader_epoch": 3,
        "max_wait_ms": 0,
        "min_bytes": 1,
        "max_bytes": 50 << 20,
        "isolation_level": 0,
    }
    return PartitionFetch(**{**asked, **fields})


def test_a_fetch_is_a_consumer_s_and_a_large_answer_s_records_are_a_view_of_its_own_buffer() -> (
    None
):
    records = bytes(range(256)) * 1024  # 256 KiB: received into a buffer of its own

    async def scenario() -> tuple[list[Any], FetchAnswer | str]:
        seen: list[Any] = []
        server, port = await _listener([_answering(records)], seen)
        fetches = LeaderFetches(client_id="spark", setup_timeout_ms=5000)
        try:
            ask = _ask(max_wait_ms=250, min_bytes=5, isolation_level=1)
            response = await fetches.fetch(f"127.0.0.1:{port}", ask, timeout_ms=5000)
            return seen, answer_for(TP, response, 7)
        finally:
            await fetches.close()
            server.close()

    seen, answer = asyncio.run(scenario())
    [(version, request)] = seen
    assert version == 12  # the highest that names topics (v13+ name topic ids)
    assert (request.replica_id, request.session_id, request.session_epoch) == (-1, 0, -1)
    assert (request.max_wait_ms, request.min_bytes, request.max_bytes) == (250, 5, 50 << 20)
    assert request.isolation_level == 1
    [topic] = request.topics
    [partition] = topic.partitions
    assert topic.topic == "t" and partition.partition == 0
    assert (partition.fetch_offset, partition.current_leader_epoch) == (7, 3)
    assert partition.partition_max_bytes == 1 << 20
    assert isinstance(answer, FetchAnswer) and bytes(answer.records) == records
    buffer = answer.records.obj  # the frame's own, not zeroed
    assert isinstance(buffer, np.ndarray) and len(records) < len(buffer) < len(records) + 200


class _Fetcher:
    """A PartitionFetcher whose leader (broker 1) is a scripted Kafka listener."""

    def __init__(self, scripts: list[Script], settings: dict[str, str] | None = None) -> None:
        self.fetcher = PartitionFetcher(TP, {**FAST, **(settings or {})})
        self.seen: list[Any] = []
        self.server, self.port = self.fetcher._loop.run(
            _listener(scripts, self.seen), timeout_s=10, what="listen"
        )
        self.address = f"127.0.0.1:{self.port}"

    def ask(self) -> bytes | None:
        answer = self.fetcher._loop.run(
            self.fetcher._ask(1, self.address, _ask()), timeout_s=10, what="ask"
        )
        return None if answer is None else bytes(answer.records)

    def close(self) -> None:
        self.fetcher._loop.run(self._stop(), timeout_s=10, what="stop")
        self.fetcher.close()

    async def _stop(self) -> None:
        self.server.close()


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]


# A leader there but failing for now: the listener's script of the first fetch, and what the
# failure is said as.
TRANSIENT: dict[str, tuple[Script, str]] = {
    # 10 bytes of a frame that promises 100, then the listener closes the connection.
    "reset mid-answer": (lambda r: [_SIZE.pack(100) + bytes(6), b""], "was lost"),
    "timeout": (lambda r: None, "did not answer Fetch within 500 ms"),
    # A whole frame whose body is not a FetchResponse (it ends after the throttle time).
    "undecodable": (lambda r: [_Body(b"\0\0\0\0")], "response that does not decode"),
}


@pytest.mark.parametrize("case", TRANSIENT)
def test_a_failed_fetch_is_retried_said_once_and_the_next_connects_afresh(
    case: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="replog.spark")
    script, said = TRANSIENT[case]
    f = _Fetcher([script, script, _answering(b"records")])
    try:
        distrusted: list[str] = []
        monkeypatch.setattr(f.fetcher._metadata, "distrust", distrusted.append)
        assert f.ask() is None  # a failed fetch: the caller asks again (new metadata, backoff)
        assert f.ask() is None
        # Said once, naming the leader and why; kept for the task's timeout; the next metadata
        # is asked of another broker first (it may be a leader cut off from the cluster).
        failure = f.fetcher.last_failure
        assert failure is not None and _warnings(caplog) == [failure + "; asking again"]
        assert failure.startswith(f"fetch of t-0 from broker 1 at {f.address} failed")
        assert said in failure
        assert distrusted == [f.address, f.address]
        assert f.ask() == b"records"
        assert f.fetcher.last_failure is None
    finally:
        f.close()


def test_a_leader_address_that_is_not_a_kafka_listener_is_raised_not_retried() -> None:
    async def http2(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(bytes.fromhex("000000040000000000"))  # a server's SETTINGS frame
        with contextlib.suppress(Exception):
            await reader.read()
        writer.close()

    fetcher = PartitionFetcher(TP, FAST)
    try:

        async def scenario() -> None:
            server = await asyncio.start_server(http2, "127.0.0.1", 0)
            address = f"127.0.0.1:{server.sockets[0].getsockname()[1]}"
            try:
                with pytest.raises(NotAKafkaListenerError, match="answered HTTP/2"):
                    await fetcher._ask(1, address, _ask())
            finally:
                server.close()

        fetcher._loop.run(scenario(), timeout_s=10, what="scenario")
    finally:
        fetcher.close()


def test_a_task_that_gets_no_answer_says_what_it_waited_for(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="replog.spark")
    serving = LoopThread("a leader that never answers a fetch")
    server, port = serving.run(_listener([lambda r: None], []), timeout_s=10, what="listen")
    address = f"127.0.0.1:{port}"
    fetcher = PartitionFetcher(TP, {**FAST, "request.timeout.ms": "200"})

    async def leader(deadline_ms: int) -> tuple[int, str, int]:
        return 1, address, 1

    monkeypatch.setattr(fetcher, "_leader", leader)
    monkeypatch.setattr(range_reader, "PartitionFetcher", lambda tp, settings, sessions: fetcher)
    options = parse_options(
        {
            "bootstrap.servers": "127.0.0.1:1",
            "subscribe": "t",
            "pollTimeoutMs": "1000",
            "kafka.request.timeout.ms": "200",
            "kafka.fetch.max.wait.ms": "0",
        },
        Mode.BATCH,
    )
    try:
        with pytest.raises(ReadTimeoutError) as raised:
            list(range_reader.read_range(OffsetRange("t", 0, 0, 10), options, SCHEMA))
    finally:
        serving.run(_closed(server), timeout_s=10, what="stop")
        serving.close()
    assert str(raised.value).startswith(
        "reading t-0 offsets [0, 10) made no progress within pollTimeoutMs=1000: reached "
        f"offset 0; the latest fetch attempt: fetch of t-0 from broker 1 at {address} failed: "
    )
    assert f"{address} did not answer Fetch within 200 ms" in str(raised.value)
    assert len(_warnings(caplog)) == 1  # several attempts, said once


async def _closed(server: asyncio.Server) -> None:
    server.close()


def test_a_task_s_fetch_on_a_leader_s_kafka_listener_reads_committed_records_and_moves_nothing(
    tmp_path: Path,
) -> None:
    """The leader serves the Spark task's Fetch as a consumer's: records below the high
    watermark only, at both isolation levels, and no follower progress, ISR or high watermark
    moved. A follower's fetch moves the high watermark, so the checks can fail."""

    async def scenario() -> None:
        leader, follower = served(tmp_path, ManualClock(), (1, 2))
        await produce(leader, batch(2), acks=1)
        await produce(leader, batch(3, tag=1), acks=1)
        await replicate(follower, leader)
        await produce(leader, batch(1, tag=2), acks=1)  # offset 5: not on the follower yet
        await replicate(follower, leader)  # the follower has [0, 5): HW 5
        state = leader.leader()
        assert state.high_watermark == 5 and leader.log().log_end_offset == 6

        def replication() -> tuple[Any, ...]:
            return state.progress(2), state.isr, state.high_watermark, state.pending_isr_change

        before = replication()
        listener = KafkaListener("PLAINTEXT", "127.0.0.1", 0)
        await listener.start(handlers(leader))
        fetches = LeaderFetches(client_id="spark", setup_timeout_ms=5000)
        try:
            for isolation in (0, 1):
                for offset, batches in ((0, [(0, 1), (2, 4)]), (2, [(2, 4)]), (5, []), (6, [])):
                    ask = _ask(
                        offset, current_leader_epoch=state.leader_epoch, isolation_level=isolation
                    )
                    response = await fetches.fetch(
                        f"127.0.0.1:{listener.port}", ask, timeout_ms=5000
                    )
                    answer = answer_for(TP, response, offset)
                    assert isinstance(answer, FetchAnswer), answer
                    assert batch_offsets(bytes(answer.records)) == batches
                    assert answer.high_watermark == 5
            assert replication() == before
            await replicate(follower, leader)  # a follower's fetch at 6 does move the HW
            assert state.high_watermark == 6
        finally:
            await fetches.close()
            await listener.stop()

    asyncio.run(scenario())


def test_a_range_read_across_a_leader_killed_and_restarted_gets_every_record_once(
    replog_cluster: ClientCluster,
) -> None:
    """A task reading while its leader is killed mid-range (its connection lost, maybe
    mid-answer) and restarted at the same address: the fetcher asks the new leader, then
    (once the old one is back) whoever leads, and the range comes out exactly, no record
    dropped or repeated."""
    topic = "leader-fetch-failover"
    replog_cluster.create_topic(topic, 1, 3)
    count = 3000
    with replog_cluster.producer(acks="all", linger_ms=0, batch_size=2000) as producer:
        for i in range(count):
            producer.send(topic, b"v%05d" % i + b"." * 100, partition=0)
        producer.flush()
    options = parse_options(
        {
            "bootstrap.servers": replog_cluster.bootstrap,
            "subscribe": topic,
            "pollTimeoutMs": "60000",
            "kafka.max.partition.fetch.bytes": "20000",  # many fetches: about 150 records each
        },
        Mode.BATCH,
    )
    with Admin(bootstrap_servers=replog_cluster.bootstrap) as admin:
        leader = admin.describe_topics([topic])[topic].partitions[0].leader
    offsets: list[int] = []
    try:
        for i, got in enumerate(
            range_reader.read_range(OffsetRange(topic, 0, 0, count), options, SCHEMA)
        ):
            offsets += got.column("offset").to_pylist()
            if i == 2:
                replog_cluster.loopback.kill(leader)
            elif i == 6:
                replog_cluster.loopback.restart(leader)
    finally:
        if leader not in replog_cluster.loopback.running():
            replog_cluster.loopback.restart(leader)
        replog_cluster.wait_healthy([topic], timeout_s=60)
    assert offsets == list(range(count))


def _sockets() -> set[str]:
    """This process's open sockets ("socket:[inode]")."""
    found = set()
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):  # an fd closed meanwhile
            target = os.readlink(f"/proc/self/fd/{fd}")
            if target.startswith("socket:"):
                found.add(target)
    return found


def test_a_worker_keeps_one_session_for_its_next_task_and_stopped_or_failed_tasks_close_theirs(
    replog_cluster: ClientCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker running task after task (PySpark reuses its Python workers) keeps the session of
    a task that read its whole range (metadata, its connection to the leader, a loop thread)
    and the next task uses it, the same connection included; a task abandoned by Spark after
    a batch, or failed (data loss here), closes its own. Closing the pool (the worker's exit)
    leaves no connection or thread."""
    topic = "leader-fetch-task-ends"
    replog_cluster.create_topic(topic, 1, 3)
    with replog_cluster.producer(acks="all", linger_ms=0, batch_size=2000) as producer:
        for i in range(600):
            producer.send(topic, b"v%05d" % i + b"." * 100, partition=0)
        producer.flush()
    with Admin(bootstrap_servers=replog_cluster.bootstrap) as admin:
        admin.delete_records({TopicPartition(topic, 0): 100})
    options = parse_options(
        {
            "bootstrap.servers": replog_cluster.bootstrap,
            "subscribe": topic,
            "kafka.max.partition.fetch.bytes": "20000",
        },
        Mode.BATCH,
    )
    pool: SessionPool = SessionPool()
    monkeypatch.setattr(range_reader, "worker_sessions", lambda: pool)

    others = set(threading.enumerate())  # sessions other tests left in the worker's own pool

    def fetch_threads() -> list[str]:
        return [
            t.name
            for t in threading.enumerate()
            if t.name == "replog-spark-fetch" and t not in others
        ]

    def kept_connections() -> list[Any]:
        sessions: list[Any] = [s for _, s, _ in pool._idle]
        return [c for s in sessions for c in s.fetches.connections.addresses().values()]

    before = _sockets()
    whole = range_reader.read_range(OffsetRange(topic, 0, 100, 600), options, SCHEMA)
    assert sum(b.num_rows for b in whole) == 500
    assert pool.kept() == 1 and len(fetch_threads()) == 1
    (connection,) = kept_connections()
    for _ in range(3):
        whole = range_reader.read_range(OffsetRange(topic, 0, 100, 600), options, SCHEMA)
        assert sum(b.num_rows for b in whole) == 500
        assert kept_connections() == [connection] and len(fetch_threads()) == 1
        stopped = range_reader.read_range(OffsetRange(topic, 0, 100, 600), options, SCHEMA)
        assert next(stopped).num_rows > 0 and pool.kept() == 0  # it took the kept session
        del stopped  # Spark drops the iterator: the generator is closed, its session too
        assert pool.kept() == 0 and fetch_threads() == []
        with pytest.raises(DataLossError, match=r"offsets \[0, 100\)"):
            list(range_reader.read_range(OffsetRange(topic, 0, 0, 600), options, SCHEMA))
        assert pool.kept() == 0 and fetch_threads() == []
        whole = range_reader.read_range(OffsetRange(topic, 0, 100, 600), options, SCHEMA)
        assert sum(b.num_rows for b in whole) == 500
        (connection,) = kept_connections()
    pool.close()
    gc.collect()
    assert fetch_threads() == []
    assert _sockets() <= before
