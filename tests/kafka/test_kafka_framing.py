"""Frames and headers: request header v0/v1/v2, response header v0/v1 (ApiVersions always v0),
lookup by API key and version, and golden frames from kafka-python's own request builders."""

from __future__ import annotations

import contextlib
import uuid
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from replog.errors import InvalidRequestError, ProtocolDecodeError, UnsupportedVersionError
from replog.kafka.messages import REQUESTS, RESPONSES
from replog.kafka.messages.api_versions_request import ApiVersionsRequest
from replog.kafka.messages.api_versions_response import ApiVersion, ApiVersionsResponse
from replog.kafka.messages.metadata_request import MetadataRequest, MetadataRequestTopic
from replog.kafka.messages.metadata_response import MetadataResponse
from replog.kafka.messages.request_header import RequestHeader
from replog.kafka.messages.response_header import ResponseHeader
from replog.kafka.protocol import framing


def test_every_api_has_a_request_and_a_response_with_the_same_versions() -> None:
    assert REQUESTS.keys() == RESPONSES.keys()
    for key, request in REQUESTS.items():
        response = RESPONSES[key]
        assert request.API_KEY == response.API_KEY == key
        assert (request.MIN_VERSION, request.MAX_VERSION) == (
            response.MIN_VERSION,
            response.MAX_VERSION,
        ), request.NAME
    # the APIs issue #53 names, and KIP-848's two that kafka-python lacks
    for key in (
        0,
        1,
        2,
        3,
        8,
        9,
        10,
        11,
        12,
        13,
        14,
        15,
        16,
        18,
        19,
        20,
        21,
        22,
        23,
        32,
        33,
        35,
        37,
        42,
        44,
        45,
        46,
        60,
        61,
        68,
        69,
    ):
        assert key in REQUESTS, key


def test_header_versions_follow_flexibility() -> None:
    assert framing.request_header_version(3, 8) == 1  # Metadata v8: not flexible
    assert framing.request_header_version(3, 9) == 2
    assert framing.request_header_version(7, 0) == 0  # ControlledShutdown v0
    assert framing.response_header_version(3, 8) == 0
    assert framing.response_header_version(3, 9) == 1
    # ApiVersions: flexible from v3, but its response header stays v0 (KIP-511)
    assert framing.request_header_version(18, 3) == 2
    assert framing.response_header_version(18, 3) == 0
    assert framing.response_header_version(18, 4) == 0
    # a version above the spec keeps the flexible header (a client probing ApiVersions v9)
    assert framing.request_header_version(18, 9) == 2


def test_request_header_v2_keeps_the_int16_client_id() -> None:
    header = RequestHeader(
        request_api_key=18, request_api_version=3, correlation_id=7, client_id="kp"
    )
    body = ApiVersionsRequest(client_software_name="x", client_software_version="1")
    frame = framing.encode_request(header, body)
    assert frame == (
        b"\x00\x00\x00\x12"  # size
        b"\x00\x12\x00\x03\x00\x00\x00\x07"  # key 18, version 3, correlation 7
        b"\x00\x02kp"  # client id: int16 length even in header v2
        b"\x00"  # header tagged fields
        b"\x02x\x021\x00"  # compact strings, body tagged fields
    )
    assert framing.frame_size(frame[:4]) == len(frame) - 4
    assert framing.peek_request(frame[4:]) == (18, 3, 7)
    got_header, got_body = framing.decode_request(frame[4:])
    assert got_header == header and got_body == body


def test_request_header_v0_has_no_client_id() -> None:
    header = RequestHeader(request_api_key=7, request_api_version=0, correlation_id=1)
    out = bytearray()
    header.write(out, 0)
    assert bytes(out) == b"\x00\x07\x00\x00\x00\x00\x00\x01"
    assert RequestHeader.decode(bytes(out), 0) == header


def test_api_versions_responses_keep_header_v0_at_every_version() -> None:
    body = ApiVersionsResponse(api_keys=[ApiVersion(api_key=18, min_version=0, max_version=4)])
    for version in range(5):
        frame = framing.encode_response(18, version, 42, body)
        assert frame[4:8] == b"\x00\x00\x00\x2a"
        header, back = framing.decode_response(frame[4:], 18, version)
        assert header == ResponseHeader(correlation_id=42) and back == body
    # a flexible Metadata response carries the header's tag buffer
    frame = framing.encode_response(3, 12, 42, MetadataResponse())
    assert frame[4:9] == b"\x00\x00\x00\x2a\x00"


def test_lookup_errors_are_typed() -> None:
    with pytest.raises(InvalidRequestError, match="unknown API key 999"):
        framing.request_class(999)
    with pytest.raises(UnsupportedVersionError, match="MetadataRequest v99"):
        framing.request_type(3, 99)
    with pytest.raises(ProtocolDecodeError, match="truncated"):
        framing.decode_request(b"\x00\x03\x00")
    with pytest.raises(ProtocolDecodeError):
        framing.frame_size(b"\x00\x00")
    header = RequestHeader(request_api_key=3, request_api_version=12, correlation_id=1)
    with pytest.raises(InvalidRequestError, match="takes MetadataRequest, not ApiVersionsRequest"):
        framing.encode_request(header, ApiVersionsRequest())


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.sampled_from(sorted(REQUESTS)),
    st.integers(-1, 20),
    st.binary(max_size=40),
)
def test_random_frames_raise_only_typed_errors(key: int, version: int, tail: bytes) -> None:
    frame = key.to_bytes(2, "big", signed=True) + version.to_bytes(2, "big", signed=True) + tail
    with contextlib.suppress(ProtocolDecodeError, UnsupportedVersionError):
        framing.decode_request(frame)


# --- golden frames from kafka-python's request builders (kafka/net, cluster, consumer, producer)


def kafka_python_frame(message: Any, version: int, correlation_id: int = 5) -> bytes:
    message.with_header(correlation_id=correlation_id, client_id="kafka-python-3.0.12")
    frame: bytes = message.encode(version=version, header=True, framed=True)
    return frame


def kafka_python_requests() -> list[tuple[str, Any, int]]:
    from kafka.protocol.consumer import FetchRequest as KFetch
    from kafka.protocol.consumer import ListOffsetsRequest as KListOffsets
    from kafka.protocol.metadata import ApiVersionsRequest as KApiVersions
    from kafka.protocol.metadata import FindCoordinatorRequest as KFindCoordinator
    from kafka.protocol.metadata import MetadataRequest as KMetadata
    from kafka.protocol.producer import ProduceRequest as KProduce

    cases: list[tuple[str, Any, int]] = []
    for version in (0, 3, 4):
        cases.append(
            (
                "ApiVersions",
                KApiVersions(client_software_name="kafka-python", client_software_version="3.0.12"),
                version,
            )
        )
    for version in (1, 4, 9, 12, 13):
        topics = [KMetadata.MetadataRequestTopic(name="orders")]
        if version >= 10:
            topics[0].topic_id = uuid.UUID(int=0)
        cases.append(
            (
                "Metadata",
                KMetadata(
                    topics=topics,
                    allow_auto_topic_creation=True,
                    include_cluster_authorized_operations=False,
                    include_topic_authorized_operations=False,
                ),
                version,
            )
        )
    partition = KProduce.TopicProduceData.PartitionProduceData(index=0, records=b"\x00" * 70)
    for version in (3, 7, 9, 12):
        cases.append(
            (
                "Produce",
                KProduce(
                    transactional_id=None,
                    acks=-1,
                    timeout_ms=30000,
                    topic_data=[
                        KProduce.TopicProduceData(name="orders", partition_data=[partition])
                    ],
                ),
                version,
            )
        )
    fetch_partition = KFetch.FetchTopic.FetchPartition(
        partition=0,
        current_leader_epoch=-1,
        fetch_offset=10,
        log_start_offset=-1,
        partition_max_bytes=1048576,
    )
    for version in (4, 7, 11, 12):
        cases.append(
            (
                "Fetch",
                KFetch(
                    replica_id=-1,
                    max_wait_ms=500,
                    min_bytes=1,
                    max_bytes=52428800,
                    isolation_level=0,
                    session_id=0,
                    session_epoch=-1,
                    topics=[KFetch.FetchTopic(topic="orders", partitions=[fetch_partition])],
                    forgotten_topics_data=[],
                    rack_id="",
                ),
                version,
            )
        )
    lo_partition = KListOffsets.ListOffsetsTopic.ListOffsetsPartition(
        partition_index=0, current_leader_epoch=-1, timestamp=-2
    )
    for version in (1, 4, 7):
        cases.append(
            (
                "ListOffsets",
                KListOffsets(
                    replica_id=-1,
                    isolation_level=0,
                    topics=[
                        KListOffsets.ListOffsetsTopic(name="orders", partitions=[lo_partition])
                    ],
                ),
                version,
            )
        )
    for version in (0, 2, 3):
        cases.append(("FindCoordinator", KFindCoordinator(key="group-a", key_type=0), version))
    for version in (4, 6):
        cases.append(
            (
                "FindCoordinator",
                KFindCoordinator(key_type=0, coordinator_keys=["group-a"]),
                version,
            )
        )
    return cases


CASES = kafka_python_requests()


@pytest.mark.parametrize(
    ("api", "message", "version"), CASES, ids=[f"{a}-v{v}" for a, _, v in CASES]
)
def test_kafka_python_request_frames_decode_and_encode_identically(
    api: str, message: Any, version: int
) -> None:
    frame = kafka_python_frame(message, version)
    header, body = framing.decode_request(frame[4:])
    assert header.request_api_key == message.API_KEY
    assert header.request_api_version == version
    assert header.correlation_id == 5
    assert header.client_id == "kafka-python-3.0.12"
    assert type(body).__name__ == f"{api}Request"
    assert framing.encode_request(header, body) == frame


def test_our_metadata_request_is_the_frame_kafka_python_builds() -> None:
    from kafka.protocol.metadata import MetadataRequest as KMetadata

    theirs = KMetadata(
        topics=[KMetadata.MetadataRequestTopic(name="orders")],
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=True,
    )
    ours = MetadataRequest(
        topics=[MetadataRequestTopic(name="orders")],
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=True,
    )
    header = RequestHeader(
        request_api_key=3, request_api_version=12, correlation_id=5, client_id="kafka-python-3.0.12"
    )
    assert framing.encode_request(header, ours) == kafka_python_frame(theirs, 12)


def test_kafka_python_reads_our_framed_responses() -> None:
    from kafka.protocol.metadata import ApiVersionsResponse as KApiVersionsResponse

    body = ApiVersionsResponse(
        api_keys=[
            ApiVersion(api_key=k, min_version=c.MIN_VERSION, max_version=c.MAX_VERSION)
            for k, c in sorted(REQUESTS.items())
        ],
        throttle_time_ms=0,
    )
    frame = framing.encode_response(18, 4, 99, body)
    theirs = KApiVersionsResponse.decode(frame, version=4, header=True, framed=True)
    assert theirs.header.correlation_id == 99
    assert [(k.api_key, k.min_version, k.max_version) for k in theirs.api_keys] == [
        (k.api_key, k.min_version, k.max_version) for k in body.api_keys
    ]
