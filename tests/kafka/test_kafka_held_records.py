"""Responses whose large records are held apart, not copied (`HeldRecords`,
`encode_response_pieces`): the pieces joined are exactly the frame encoded in one buffer, the
records pieces are the very objects the response held, the size prefix counts them, and an
encoding that fails after a held record forgets it.

How this can fail: a size prefix that leaves out the held bytes (a client reads a short frame),
a piece out of place (records spliced at the wrong byte), a copy of the records (the point of
it), or a failed encoding whose held records reappear in the next one; records left in their
file (`FileRecords`) held as a piece of their own whatever their size, and refused by an
encoding into one buffer, which cannot send them."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from replog.errors import ProtocolEncodeError
from replog.kafka.connection import KafkaConnection
from replog.kafka.messages.fetch_request import FetchRequest
from replog.kafka.messages.fetch_response import (
    FetchableTopicResponse,
    FetchResponse,
    PartitionData,
)
from replog.kafka.messages.request_header import RequestHeader
from replog.kafka.protocol.codec import HOLD_MIN_BYTES, HeldRecords, write_cnrecords
from replog.kafka.protocol.framing import (
    decode_response,
    encode_request,
    encode_response,
    encode_response_pieces,
)
from replog.storage.file_region import FileRegion

FETCH_KEY = 1


def fetch_response(*records: bytes | None) -> FetchResponse:
    partitions = [PartitionData(partition_index=i, records=r) for i, r in enumerate(records)]
    return FetchResponse(responses=[FetchableTopicResponse(topic="t", partitions=partitions)])


@pytest.mark.parametrize("version", [4, 11, 12, 16])
def test_large_records_are_pieces_of_their_own_and_the_frame_reads_back(version: int) -> None:
    big = bytes(range(256)) * (HOLD_MIN_BYTES // 256 + 3)
    other = memoryview(b"\x07" * (HOLD_MIN_BYTES * 2))
    small = b"small records"
    response = fetch_response(big, small, None, other)
    pieces = encode_response_pieces(FETCH_KEY, version, 42, response)
    assert any(piece is big for piece in pieces)
    assert any(piece is other for piece in pieces)
    assert not any(piece is small for piece in pieces)  # copied: below the bound
    frame = b"".join(pieces)
    assert frame == encode_response(FETCH_KEY, version, 42, response)
    (size,) = struct.unpack_from(">i", frame)
    assert size == len(frame) - 4
    header, decoded = decode_response(frame[4:], FETCH_KEY, version)
    assert header.correlation_id == 42
    assert isinstance(decoded, FetchResponse)
    read = [p.records for p in decoded.responses[0].partitions]
    assert [None if r is None else bytes(r) for r in read] == [big, small, None, bytes(other)]


def test_a_frame_without_large_records_is_one_piece() -> None:
    pieces = encode_response_pieces(FETCH_KEY, 12, 1, fetch_response(b"x" * 100))
    assert len(pieces) == 1


def test_records_left_in_a_file_are_held_whatever_their_size_and_one_buffer_refuses_them(
    tmp_path: Path,
) -> None:
    path = tmp_path / "segment.log"
    path.write_bytes(b"0123456789" * 10)
    with path.open("rb") as file:
        region = FileRegion(file.fileno(), str(path), 10, 50)
    response = fetch_response(region)  # type: ignore[arg-type]  # as kafka_apis puts it in
    pieces = encode_response_pieces(FETCH_KEY, 12, 5, response)
    assert sum(piece is region for piece in pieces) == 1
    frame = b"".join(region.read() if piece is region else piece for piece in pieces)
    (size,) = struct.unpack_from(">i", frame)
    assert size == len(frame) - 4
    _, decoded = decode_response(frame[4:], FETCH_KEY, 12)
    assert isinstance(decoded, FetchResponse)
    assert bytes(decoded.responses[0].partitions[0].records or b"") == path.read_bytes()[10:60]
    with pytest.raises(ProtocolEncodeError, match="expected bytes, got FileRegion"):
        encode_response(FETCH_KEY, 12, 5, response)
    region.close()


def test_a_failed_encoding_forgets_the_records_it_held() -> None:
    out = HeldRecords()
    write_cnrecords(out, b"y" * HOLD_MIN_BYTES)
    assert len(out.held) == 1
    response = fetch_response(b"z" * HOLD_MIN_BYTES)
    response.responses[0].partitions[0].error_code = 1 << 20  # not an int16
    mark = len(out)
    with pytest.raises(ProtocolEncodeError):
        response.write(out, 12)
    assert len(out) == mark
    assert len(out.held) == 1  # the one written before the failed message stays


def test_a_connection_gives_its_answers_in_pieces_in_request_order() -> None:
    core = KafkaConnection("peer", {FETCH_KEY: (4, 17), 18: (0, 4)})
    for correlation_id in (1, 2):
        header = RequestHeader(
            request_api_key=FETCH_KEY,
            request_api_version=12,
            correlation_id=correlation_id,
            client_id="c",
        )
        core.feed(encode_request(header, FetchRequest()))
    first, second = core.next_request(), core.next_request()
    assert first is not None and second is not None
    big = b"r" * HOLD_MIN_BYTES
    core.respond(second, fetch_response(b"small"))
    core.respond(first, fetch_response(big))
    pieces = core.take_output()
    assert any(piece is big for piece in pieces)
    data = b"".join(pieces)
    ids, at = [], 0
    while at < len(data):
        (size,) = struct.unpack_from(">i", data, at)
        header, _ = decode_response(data[at + 4 : at + 4 + size], FETCH_KEY, 12)
        ids.append(header.correlation_id)
        at += 4 + size
    assert ids == [1, 2]
