"""The connection core (`replog.kafka.connection`): framing of a byte stream cut anywhere,
random bytes and random frames giving nothing but requests or a typed refusal,
responses in request order whatever order the handlers finish in, and the refusals that close
a connection (bad frame sizes, unserved keys and versions, undecodable requests), each a typed
error naming the peer and the cause; ApiVersions at an unserved version answered as Kafka does.
"""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from replog.errors import IllegalStateError, InvalidFrameSizeError, KafkaConnectionError
from replog.kafka.connection import KafkaConnection, KafkaRequest
from replog.kafka.messages.api_versions_request import ApiVersionsRequest
from replog.kafka.messages.api_versions_response import ApiVersion, ApiVersionsResponse
from replog.kafka.messages.metadata_request import MetadataRequest, MetadataRequestTopic
from replog.kafka.messages.metadata_response import MetadataResponse
from replog.kafka.messages.produce_request import (
    PartitionProduceData,
    ProduceRequest,
    TopicProduceData,
)
from replog.kafka.messages.request_header import RequestHeader
from replog.kafka.protocol.framing import decode_response, encode_request

PEER = "10.0.0.7:50123"
SERVED = {3: (0, 13), 18: (0, 4)}


def request_frame(correlation_id: int, *, key: int = 3, version: int = 12) -> bytes:
    header = RequestHeader(
        request_api_key=key,
        request_api_version=version,
        correlation_id=correlation_id,
        client_id="test",
    )
    if key == 18:
        return encode_request(header, ApiVersionsRequest(), framed=True)
    topics = [MetadataRequestTopic(name=f"topic-{correlation_id}")]
    return encode_request(header, MetadataRequest(topics=topics), framed=True)


def connection(limit: int = 1 << 20) -> KafkaConnection:
    return KafkaConnection(PEER, SERVED, request_bytes_max=limit)


def drain(core: KafkaConnection) -> list[KafkaRequest]:
    requests = []
    while (request := core.next_request()) is not None:
        requests.append(request)
    return requests


def response_correlation_ids(frames: list[bytes], key: int = 3, version: int = 12) -> list[int]:
    ids = []
    for frame in frames:
        (size,) = struct.unpack_from(">i", frame)
        assert size == len(frame) - 4
        header, _ = decode_response(frame[4:], key, version)
        ids.append(header.correlation_id)
    return ids


@settings(max_examples=60, deadline=None)
@given(
    count=st.integers(1, 8),
    cuts=st.lists(st.integers(0, 2000), max_size=20),
)
def test_any_chunking_of_a_stream_of_frames_gives_the_same_requests(
    count: int, cuts: list[int]
) -> None:
    stream = b"".join(request_frame(i) for i in range(count))
    whole = drain_fed(connection(), [stream])
    points = sorted({c % (len(stream) + 1) for c in cuts})
    chunks = [stream[a:b] for a, b in zip([0, *points], [*points, len(stream)], strict=True)]
    chunked = drain_fed(connection(), chunks)
    assert [(r.correlation_id, r.body, r.sequence) for r in chunked] == [
        (r.correlation_id, r.body, r.sequence) for r in whole
    ]
    assert [r.correlation_id for r in whole] == list(range(count))
    assert whole[0].body == MetadataRequest(topics=[MetadataRequestTopic(name="topic-0")])


@pytest.mark.parametrize("chunk", [7777, 65536, 200_000])
def test_a_long_stream_of_small_frames_in_chunks_loses_nothing(chunk: int) -> None:
    stream = b"".join(request_frame(i) for i in range(3000))  # ~150 KB
    chunks = [stream[i : i + chunk] for i in range(0, len(stream), chunk)]
    requests = drain_fed(connection(), chunks)
    assert [r.correlation_id for r in requests] == list(range(3000))
    assert [r.sequence for r in requests] == list(range(3000))


def produce_frame(correlation_id: int, records: bytes) -> bytes:
    header = RequestHeader(
        request_api_key=0, request_api_version=9, correlation_id=correlation_id, client_id="t"
    )
    data = PartitionProduceData(index=0, records=records)
    body = ProduceRequest(
        acks=-1, timeout_ms=1000, topic_data=[TopicProduceData(name="t", partition_data=[data])]
    )
    return encode_request(header, body, framed=True)


def records_of(request: KafkaRequest) -> memoryview:
    assert isinstance(request.body, ProduceRequest)
    records = request.body.topic_data[0].partition_data[0].records
    assert isinstance(records, memoryview)
    return records


def test_records_of_a_frame_within_one_chunk_are_a_view_of_it_and_others_are_joined_once() -> None:
    first, second = bytes(range(256)) * 64, b"\x07" * 5000
    chunk = produce_frame(1, first) + produce_frame(2, second)[:100]
    core = KafkaConnection(PEER, {0: (3, 12), 18: (0, 4)})
    core.feed(chunk)
    [whole] = drain(core)
    assert records_of(whole).obj is chunk  # decoded where it lies: no copy of the records
    assert records_of(whole) == first
    rest = bytearray(produce_frame(2, second)[100:])
    core.feed(rest)
    rest[-1] = 0  # a mutable buffer is copied when fed: later writes do not reach the request
    [joined] = drain(core)
    assert records_of(joined) == second and core.buffered_bytes == 0


def drain_fed(core: KafkaConnection, chunks: list[bytes]) -> list[KafkaRequest]:
    requests = []
    for chunk in chunks:
        core.feed(chunk)
        requests += drain(core)
    assert core.buffered_bytes == 0
    return requests


@settings(max_examples=60, deadline=None)
@given(st.permutations(list(range(7))), st.lists(st.booleans(), min_size=7, max_size=7))
def test_responses_leave_in_request_order_whatever_order_the_handlers_finish(
    finish_order: list[int], take_between: list[bool]
) -> None:
    core = connection()
    core.feed(b"".join(request_frame(100 + i) for i in range(7)))
    requests = drain(core)
    assert core.in_flight == 7
    out: list[bytes] = []
    for index, take in zip(finish_order, take_between, strict=True):
        core.respond(requests[index], MetadataResponse(cluster_id="c"))
        if take:
            out += core.take_output()
    out += core.take_output()
    assert response_correlation_ids(out) == [100 + i for i in range(7)]
    assert core.in_flight == 0


def test_an_answer_is_held_until_every_earlier_request_is_answered() -> None:
    core = connection()
    core.feed(request_frame(1) + request_frame(2))
    first, second = drain(core)
    core.respond(second, MetadataResponse())
    assert not core.output_ready and core.take_output() == [] and core.in_flight == 2
    core.respond(first, MetadataResponse())
    assert response_correlation_ids(core.take_output()) == [1, 2]


def test_the_requests_read_released_and_unanswered_say_where_a_closing_connection_stands() -> None:
    core = connection()
    core.feed(request_frame(1) + request_frame(2) + request_frame(3))
    first, second, _ = drain(core)
    core.respond(second, MetadataResponse())
    assert (core.requests_read, core.requests_released) == (3, 0)
    assert core.unanswered(2) == ["Metadata v12 (correlation id 1)"]
    assert core.unanswered(3) == [
        "Metadata v12 (correlation id 1)",
        "Metadata v12 (correlation id 3)",
    ]
    core.respond(first, MetadataResponse())
    core.take_output()
    assert core.requests_released == 2 and core.unanswered(2) == []


def test_a_request_answered_with_no_response_frees_its_slot_without_bytes() -> None:
    core = connection()
    core.feed(request_frame(1) + request_frame(2))
    first, second = drain(core)
    core.respond(first, None)  # as Produce with acks=0
    core.respond(second, MetadataResponse())
    assert response_correlation_ids(core.take_output()) == [2]
    assert core.in_flight == 0


def test_answering_twice_is_an_error() -> None:
    core = connection()
    core.feed(request_frame(1))
    (request,) = drain(core)
    core.respond(request, MetadataResponse())
    with pytest.raises(IllegalStateError, match="answered twice"):
        core.respond(request, MetadataResponse())


@pytest.mark.parametrize(
    ("size", "cause"),
    [
        (-1, r"invalid frame size -1 \(negative\)"),
        (-(2**31), r"invalid frame size -2147483648 \(negative\)"),
        (1025, r"frame size 1025 is larger than socket.request.max.bytes \(1024\)"),
    ],
)
def test_a_frame_size_out_of_bounds_is_a_typed_error_naming_peer_and_cause(
    size: int, cause: str
) -> None:
    core = connection(limit=1024)
    core.feed(struct.pack(">i", size))  # refused on the prefix alone: nothing is buffered
    with pytest.raises(InvalidFrameSizeError, match=f"^{PEER}: {cause}$") as refused:
        core.next_request()
    assert refused.value.peer == PEER
    assert isinstance(refused.value, KafkaConnectionError)


def test_a_frame_at_the_limit_is_accepted() -> None:
    frame = request_frame(5)
    core = connection(limit=len(frame) - 4)
    core.feed(frame)
    assert [r.correlation_id for r in drain(core)] == [5]


@pytest.mark.parametrize(
    ("frame", "cause"),
    [
        (request_frame(9, key=3, version=12)[:4] + b"", None),  # incomplete: waits
        (struct.pack(">ihhi", 8, 999, 0, 9), r"API key 999 \(correlation id 9\) is not served"),
        (struct.pack(">ihhi", 8, 0, 9, 9), r"Produce \(correlation id 9\) is not served"),
        (struct.pack(">ihhi", 8, 3, 14, 9), r"Metadata v14 \(correlation id 9\) is not served"),
        (struct.pack(">ihh", 4, 3, 1), "bad request header"),
        (struct.pack(">ihhi", 8, 3, 1, 9), r"Metadata v1 \(correlation id 9\) does not decode"),
    ],
)
def test_unserved_and_undecodable_requests_close_the_connection(
    frame: bytes, cause: str | None
) -> None:
    core = connection()
    core.feed(frame)
    if cause is None:
        assert core.next_request() is None
        return
    with pytest.raises(KafkaConnectionError, match=f"^{PEER}: .*{cause}"):
        core.next_request()


def test_bytes_after_a_request_body_are_ignored_as_kafka_ignores_them() -> None:
    # librdkafka 2.16's Metadata v13 for every topic, as it sends it: the body (null topics,
    # no auto-creation, no authorized operations, no tagged fields) and three bytes more.
    frame = bytes.fromhex("0003000d00000003000772646b61666b610000000000010000")
    core = connection()
    core.feed(struct.pack(">i", len(frame)) + frame)
    (request,) = drain(core)
    assert request.correlation_id == 3
    assert request.body == MetadataRequest(topics=None, allow_auto_topic_creation=False)


@pytest.mark.parametrize("version", [5, 9, 32767])
def test_api_versions_above_the_served_range_is_answered_unsupported_in_a_v0_body(
    version: int,
) -> None:
    core = connection()
    # A newer client's request: flexible header (v2) and a body this codec may not know.
    header = struct.pack(">hhih", 18, version, 77, 4) + b"test" + b"\x00"
    body = b"\x05name\x041.0\x00"
    frame = header + body
    core.feed(struct.pack(">i", len(frame)) + frame + request_frame(78))
    (metadata,) = drain(core)  # the ApiVersions request never reaches a handler
    core.respond(metadata, MetadataResponse())
    first, second = core.take_output()
    header_v0, answer = decode_response(first[4:], 18, 0)
    assert header_v0.correlation_id == 77
    assert answer == ApiVersionsResponse(
        error_code=35, api_keys=[ApiVersion(api_key=18, min_version=0, max_version=4)]
    )
    assert response_correlation_ids([second]) == [78]


def test_api_versions_inside_the_range_reaches_the_handler() -> None:
    core = connection()
    core.feed(request_frame(3, key=18, version=4))
    (request,) = drain(core)
    assert request.api_key == 18 and request.api_version == 4


@settings(max_examples=300, deadline=None)
@given(
    key=st.sampled_from([0, 1, 2, 3, 18, 22, 7, 999, -1]),
    version=st.integers(-2, 20),
    body=st.binary(max_size=200),
)
def test_random_frames_give_requests_or_a_typed_refusal_only(
    key: int, version: int, body: bytes
) -> None:
    served = {0: (3, 12), 1: (4, 12), 2: (1, 7), 3: (0, 13), 18: (0, 4), 22: (0, 5)}
    core = KafkaConnection(PEER, served)
    frame = struct.pack(">hhi", key, version, 1) + body
    core.feed(struct.pack(">i", len(frame)) + frame)
    try:
        drain(core)
    except KafkaConnectionError as refused:
        assert refused.peer == PEER and refused.cause


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300))
def test_random_bytes_give_requests_or_a_typed_refusal_only(data: bytes) -> None:
    core = connection(limit=256)
    core.feed(data)
    try:
        drain(core)
    except KafkaConnectionError as refused:
        assert refused.peer == PEER and refused.cause
