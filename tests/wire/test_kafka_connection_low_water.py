"""`KafkaConnection`'s receive low-water mark while a large response comes in, against a
scripted Kafka listener: the mark is what is left of the frame, at most `RECEIVE_LOW_WATER`,
and 1 between frames; responses of any size in any pieces arrive whole, and the mark is 1
after each."""

from __future__ import annotations

import asyncio
import itertools
import socket
import struct
import sys
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from replog.kafka.messages.api_versions_response import ApiVersion, ApiVersionsResponse
from replog.kafka.messages.fetch_request import FetchRequest
from replog.kafka.messages.fetch_response import (
    FetchableTopicResponse,
    FetchResponse,
    PartitionData,
)
from replog.kafka.protocol.framing import decode_request, encode_response
from replog.wire import kafka_connection
from replog.wire.kafka_connection import KafkaConnection

_SIZE = struct.Struct(">i")
VERSION = 12
LOW = kafka_connection.RECEIVE_LOW_WATER

# How the listener writes one Fetch response frame: the pieces' boundaries, each piece after the
# gate of its index is set (None: written at once).
Pieces = Callable[[bytes], list[bytes]]


def _answer(records: bytes) -> FetchResponse:
    return FetchResponse(
        responses=[
            FetchableTopicResponse(
                topic="t", partitions=[PartitionData(partition_index=0, records=records)]
            )
        ]
    )


async def _listener(
    records: list[bytes], pieces: Pieces, gates: list[asyncio.Event] | None = None
) -> asyncio.Server:
    """Answers ApiVersions, then each Fetch with the next of `records`, written in `pieces`."""
    answers = iter(records)

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                (size,) = _SIZE.unpack(await reader.readexactly(4))
                header, _ = decode_request(await reader.readexactly(size))
                if header.request_api_key == 18:
                    versions = ApiVersionsResponse(
                        api_keys=[ApiVersion(api_key=1, min_version=4, max_version=18)]
                    )
                    writer.write(
                        encode_response(
                            18, header.request_api_version, header.correlation_id, versions
                        )
                    )
                    continue
                frame = encode_response(1, VERSION, header.correlation_id, _answer(next(answers)))
                for i, piece in enumerate(pieces(frame)):
                    if gates is not None:
                        await gates[i].wait()
                    writer.write(piece)
                    await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            pass
        finally:
            writer.close()

    return await asyncio.start_server(serve, "127.0.0.1", 0)


async def _fetch(connection: KafkaConnection) -> bytes:
    response, _ = await connection.call(
        FetchRequest(), timeout_ms=10_000, min_version=VERSION, max_version=VERSION
    )
    assert isinstance(response, FetchResponse)
    return bytes(response.responses[0].partitions[0].records or b"")


def _mark(connection: KafkaConnection) -> int:
    transport = connection._transport
    assert transport is not None
    sock: socket.socket = transport.get_extra_info("socket")
    return int(sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT))


@pytest.mark.skipif(sys.platform != "linux", reason="the mark is set on Linux only")
def test_the_receive_low_water_mark_is_what_is_left_of_a_large_frame_at_most_the_cap() -> None:
    records = bytes(range(256)) * ((3 * LOW + 17) // 256)

    async def scenario() -> None:
        gates = [asyncio.Event() for _ in range(3)]
        # The size, header and 1,000 bytes; all but the last 100; the rest.
        server = await _listener(
            [records], lambda frame: [frame[:1000], frame[1000:-100], frame[-100:]], gates
        )
        address = f"127.0.0.1:{server.sockets[0].getsockname()[1]}"
        connection = await KafkaConnection.open(address, client_id="t", setup_timeout_ms=5000)

        async def mark_becomes(value: int) -> None:
            # A deadline, not a count of polls: on a busy machine the bytes sent may take
            # seconds to be read, and only the mark they leave is the outcome checked.
            deadline = asyncio.get_running_loop().time() + 30
            while _mark(connection) != value:
                if asyncio.get_running_loop().time() > deadline:
                    raise AssertionError(f"the mark is {_mark(connection)}, not {value}")
                await asyncio.sleep(0.002)

        try:
            fetch = asyncio.create_task(_fetch(connection))
            await mark_becomes(1)  # no answer yet
            gates[0].set()
            await mark_becomes(LOW)  # 3 MiB and more left: the cap
            gates[1].set()
            await mark_becomes(100)  # what is left, below the cap
            gates[2].set()
            assert await fetch == records
            assert _mark(connection) == 1  # between frames
        finally:
            connection.close()
            server.close()

    asyncio.run(scenario())


@given(
    sizes=st.lists(
        st.sampled_from([0, 1, 5000, 70_000])
        | st.integers(LOW - 2, LOW + 2)
        | st.integers(1, 3 * LOW),
        min_size=1,
        max_size=3,
    ),
    cuts=st.lists(st.floats(0, 1), max_size=4),
)
@settings(max_examples=20, deadline=None)
def test_responses_of_any_size_in_any_pieces_arrive_whole_and_leave_the_mark_at_one(
    sizes: list[int], cuts: list[float]
) -> None:
    records = [bytes([i % 256]) * size for i, size in enumerate(sizes)]

    def pieces(frame: bytes) -> list[bytes]:
        at = sorted({0, len(frame), *(int(c * len(frame)) for c in cuts)})
        return [frame[a:b] for a, b in itertools.pairwise(at)]

    async def scenario() -> None:
        server = await _listener(records, pieces)
        address = f"127.0.0.1:{server.sockets[0].getsockname()[1]}"
        connection = await KafkaConnection.open(address, client_id="t", setup_timeout_ms=5000)
        try:
            for expected in records:
                assert await _fetch(connection) == expected
                if sys.platform == "linux":
                    assert _mark(connection) == 1
        finally:
            connection.close()
            server.close()

    asyncio.run(scenario())
