"""A Fetch answer's records left in their segment file (`FileRegion`) and sent from it by the
Kafka listener (`sendfile`), over loopback sockets:

- a plain listener's requests say that it sends files (a TLS listener's do not); the answer
  reads back as the file's bytes, the records leave through `os.sendfile`, and answers
  pipelined behind it keep their order;
- every region is closed once sent;
- a file cut back under its records (fewer bytes than the frame promised) drops the
  connection with one WARNING line, and the listener goes on serving;
- a client that reads none of such an answer is dropped after the idle time, and a listener
  stopping in the middle of such an answer closes the connection at once.

How this can fail: records written out of order with the frame around them (a client reads
garbage), a short send taken as a whole answer (the client waits forever), a region's
descriptor kept open, a connection that hangs while its send from a file is stuck.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import struct
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from replog.kafka.connection import Answer, KafkaRequest
from replog.kafka.messages.fetch_request import FetchRequest
from replog.kafka.messages.fetch_response import (
    FetchableTopicResponse,
    FetchResponse,
    PartitionData,
)
from replog.kafka.messages.metadata_request import MetadataRequest
from replog.kafka.messages.metadata_response import MetadataResponse
from replog.kafka.messages.request_header import RequestHeader
from replog.kafka.protocol.codec import Buffer, Message
from replog.kafka.protocol.framing import decode_response, encode_request
from replog.server.kafka.kafka_listener import KafkaListener, KafkaListenerConfig
from replog.storage.file_region import FileRegion
from tests.eventually import eventually

FETCH, METADATA = 1, 3


class FileAnswers:
    """Fetch answered with one partition whose records are a region of `path` (its first
    `size` bytes; more than the file holds, when the test cut it back); Metadata at once."""

    served = {FETCH: (4, 12), METADATA: (0, 12), 18: (0, 4)}

    def __init__(self, path: Path, size: int) -> None:
        self.path = path
        self.size = size
        self.regions: list[FileRegion] = []
        self.sends_files: list[bool] = []

    def handle(self, request: KafkaRequest, listener_name: str) -> Answer:
        self.sends_files.append(request.sends_files)
        if request.api_key == METADATA:
            return MetadataResponse(cluster_id="c")
        with self.path.open("rb") as file:
            region = FileRegion(file.fileno(), str(self.path), 0, self.size)
        self.regions.append(region)
        # The handler's records: a region, as `kafka_apis._fetched` puts it in.
        records: Any = region
        partition = PartitionData(partition_index=0, records=records)
        return FetchResponse(responses=[FetchableTopicResponse(topic="t", partitions=[partition])])


def frame(correlation_id: int, api_key: int) -> bytes:
    version = 12
    header = RequestHeader(
        request_api_key=api_key, request_api_version=version, correlation_id=correlation_id
    )
    body: Message = FetchRequest() if api_key == FETCH else MetadataRequest(topics=[])
    return encode_request(header, body)


async def read_answer(reader: asyncio.StreamReader, api_key: int) -> tuple[int, Message]:
    async with asyncio.timeout(10):
        (size,) = struct.unpack(">i", await reader.readexactly(4))
        header, body = decode_response(await reader.readexactly(size), api_key, 12)
    return header.correlation_id, body


def records_of(answer: Message) -> bytes:
    assert isinstance(answer, FetchResponse)
    records: Buffer | None = answer.responses[0].partitions[0].records
    return bytes(records or b"")


def closed(region: FileRegion) -> bool:
    try:
        os.fstat(region.fileno())
    except OSError:
        return True
    return False


@asynccontextmanager
async def listening(handlers: FileAnswers, **config: int) -> AsyncIterator[KafkaListener]:
    listener = KafkaListener("PLAINTEXT", "127.0.0.1", 0, KafkaListenerConfig(**config))
    await listener.start(handlers)
    try:
        yield listener
    finally:
        await listener.stop()


@pytest.fixture
def sendfile_calls(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The byte counts asked of `os.sendfile` (asyncio's sendfile calls it by name)."""
    calls: list[int] = []
    real: Callable[..., int] = os.sendfile

    def counting(out_fd: int, in_fd: int, offset: int | None, count: int) -> int:
        calls.append(count)
        return real(out_fd, in_fd, offset, count)

    monkeypatch.setattr(os, "sendfile", counting)
    return calls


def file_answers(tmp_path: Path, size: int) -> tuple[FileAnswers, bytes]:
    """Handlers answering Fetch with a region of a new file of `size` bytes; those bytes."""
    data = (bytes(range(251)) * (size // 251 + 1))[:size]
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(data)
    return FileAnswers(path, size), data


@pytest.mark.asyncio
async def test_records_left_in_a_file_are_sent_from_it_in_order_with_the_answers_around(
    tmp_path: Path, sendfile_calls: list[int]
) -> None:
    handlers, data = file_answers(tmp_path, 3 << 20)
    async with listening(handlers) as listener:
        reader, writer = await asyncio.open_connection("127.0.0.1", listener.port)
        writer.write(frame(1, FETCH) + frame(2, METADATA) + frame(3, FETCH) + frame(4, METADATA))
        answers = [await read_answer(reader, key) for key in (FETCH, METADATA, FETCH, METADATA)]
        writer.close()
    assert [correlation for correlation, _ in answers] == [1, 2, 3, 4]
    assert records_of(answers[0][1]) == data and records_of(answers[2][1]) == data
    assert handlers.sends_files == [True] * 4
    assert sendfile_calls, "the records did not leave through sendfile"
    assert all(closed(region) for region in handlers.regions)


@pytest.mark.asyncio
async def test_a_file_cut_back_under_its_records_drops_the_connection_with_a_warning(
    tmp_path: Path, sendfile_calls: list[int], caplog: pytest.LogCaptureFixture
) -> None:
    handlers, data = file_answers(tmp_path, 1 << 20)
    handlers.size += 4096  # the region promises more than is there
    caplog.set_level(logging.WARNING, logger="replog.server.kafka")
    async with listening(handlers) as listener:
        reader, writer = await asyncio.open_connection("127.0.0.1", listener.port)
        writer.write(frame(1, FETCH))
        with pytest.raises(asyncio.IncompleteReadError):
            await read_answer(reader, FETCH)
        writer.close()
        # The listener goes on: a whole file is served on a new connection.
        handlers.size = len(data)
        reader, writer = await asyncio.open_connection("127.0.0.1", listener.port)
        writer.write(frame(2, FETCH))
        assert records_of((await read_answer(reader, FETCH))[1]) == data
        writer.close()
    (line,) = [r.getMessage() for r in caplog.records if "cut back" in r.getMessage()]
    assert "an answer's records not sent" in line and str(handlers.path) in line
    assert all(closed(region) for region in handlers.regions)


async def fetching_without_reading(
    listener: KafkaListener, sendfile_calls: list[int]
) -> socket.socket:
    """A client that sent a Fetch and reads none of its answer, once the answer's records
    began to leave their file."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16384)
    sock.connect(("127.0.0.1", listener.port))
    sock.sendall(frame(1, FETCH))
    await eventually(lambda: bool(sendfile_calls), "the send from the file began")
    return sock


@pytest.mark.asyncio
async def test_a_client_that_reads_none_of_records_sent_from_a_file_is_dropped_when_idle(
    tmp_path: Path, sendfile_calls: list[int], caplog: pytest.LogCaptureFixture
) -> None:
    handlers, _ = file_answers(tmp_path, 64 << 20)  # far more than the socket buffers hold
    caplog.set_level(logging.INFO, logger="replog.server.kafka")
    async with listening(handlers, connections_max_idle_ms=300) as listener:
        sock = await fetching_without_reading(listener, sendfile_calls)
        await eventually(lambda: listener.open_connections == 0, "the connection dropped", 10)
        sock.close()
    assert "its responses not read" in caplog.text
    assert all(closed(region) for region in handlers.regions)


@pytest.mark.asyncio
async def test_a_listener_stopping_in_the_middle_of_records_sent_from_a_file_closes_at_once(
    tmp_path: Path, sendfile_calls: list[int]
) -> None:
    handlers, _ = file_answers(tmp_path, 64 << 20)
    async with listening(handlers) as listener:
        sock = await fetching_without_reading(listener, sendfile_calls)
        async with asyncio.timeout(5):
            await listener.stop()
        assert listener.open_connections == 0
        await eventually(
            lambda: all(closed(region) for region in handlers.regions), "the regions closed"
        )
        sock.close()
