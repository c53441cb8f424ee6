"""A fetch answer whose records the leader left in its segment file (`FetchPartitionResult.region`):
`fetch_response_parts` keeps the region as a part of its own, and `write_frame_parts` sends it
from the file over a real socket, the frame byte for byte the one the records as bytes make;
every region is closed once written, sent or not; a region whose file was cut back breaks the
frame with `KafkaStorageError`; where sendfile is not available the region is read and
written."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from replog.errors import KafkaStorageError
from replog.replication import messages as m
from replog.server.frame_parts import write_frame_parts
from replog.storage.file_region import FileRegion
from replog.wire import broker_codec as codec
from replog.wire import framed_wire


def region_of(path: Path, data: bytes, position: int = 0) -> FileRegion:
    path.write_bytes(b"-" * position + data + b"-" * 17)
    fd = os.open(path, os.O_RDONLY)
    try:
        return FileRegion(fd, str(path), position, len(data))
    finally:
        os.close(fd)


async def sent_over_a_socket(write: Callable[[asyncio.WriteTransport], Awaitable[None]]) -> bytes:
    """What `write` sends through a loopback connection, read to its end."""
    received: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()

    async def read_all(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        received.set_result(await reader.read())
        writer.close()

    server = await asyncio.start_server(read_all, "127.0.0.1", 0)
    try:
        port = server.sockets[0].getsockname()[1]
        transport, _ = await asyncio.get_running_loop().create_connection(
            asyncio.Protocol, "127.0.0.1", port
        )
        try:
            await write(transport)
        finally:
            transport.close()
        return await asyncio.wait_for(received, 10)
    finally:
        server.close()


def answer(records: bytes | None, region: FileRegion | None) -> m.FetchResponse:
    return m.FetchResponse(
        (
            m.FetchPartitionResult("t", 0, high_watermark=9, records=b"abc"),
            m.FetchPartitionResult("t", 1, high_watermark=7, records=records or b"", region=region),
            m.FetchPartitionResult("u", 0, high_watermark=5, records=b"x" * 10),
        )
    )


@pytest.mark.asyncio
@pytest.mark.parametrize("size", [100, 3 << 20])  # below SPLIT_MIN_BYTES, and an 8 MiB-like one
async def test_records_left_in_the_file_are_sent_from_it_as_the_bytes_would_be(
    tmp_path: Path, size: int
) -> None:
    records = os.urandom(size)
    region = region_of(tmp_path / "segment", records, position=4096 + 3)
    parts = codec.fetch_response_parts(answer(None, region))
    assert any(part is region for part in parts)
    with pytest.raises(ValueError, match="left in a file"):
        codec.fetch_response_pieces(answer(None, region))
    got = await sent_over_a_socket(lambda t: write_frame_parts(t, 7, parts))
    assert got[:8] == framed_wire.header(7, len(got) - 8)
    assert codec.fetch_response_from_wire(got[8:]) == answer(records, None)
    if size >= codec.SPLIT_MIN_BYTES:  # then the bytes too are those of the records as bytes
        assert got == framed_wire.frame(7, codec.fetch_response_to_wire(answer(records, None)))
    with pytest.raises(OSError):
        os.fstat(region.fileno())  # closed once sent


@pytest.mark.asyncio
async def test_a_region_whose_file_was_cut_back_breaks_the_frame(tmp_path: Path) -> None:
    path = tmp_path / "segment"
    region = region_of(path, b"r" * 200_000)
    os.truncate(path, 50_000)
    parts = codec.fetch_response_parts(answer(None, region))

    async def write(transport: asyncio.WriteTransport) -> None:
        with pytest.raises(KafkaStorageError, match="sent 50000 of 200000 bytes"):
            await write_frame_parts(transport, 7, parts)

    await sent_over_a_socket(write)
    with pytest.raises(OSError):
        os.fstat(region.fileno())


@pytest.mark.asyncio
async def test_without_sendfile_a_region_is_read_and_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    records = os.urandom(300_000)
    region = region_of(tmp_path / "segment", records, position=10)

    async def unavailable(*args: object, **kwargs: object) -> int:
        raise asyncio.SendfileNotAvailableError("not here")

    monkeypatch.setattr(asyncio.get_running_loop(), "sendfile", unavailable)
    parts = codec.fetch_response_parts(answer(None, region))
    got = await sent_over_a_socket(lambda t: write_frame_parts(t, 9, parts))
    assert got == framed_wire.frame(9, codec.fetch_response_to_wire(answer(records, None)))
