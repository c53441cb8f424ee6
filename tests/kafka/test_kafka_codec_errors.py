"""Bad bytes and bad values meet typed errors that name message, version and field.

Every request decoder is fuzzed with random bytes and with cut and flipped encodings of valid
requests: `ProtocolDecodeError` (INVALID_REQUEST) is the only exception that may escape.
Writing a field a version lacks with a non-default value is Kafka's UnsupportedVersion.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka_codec_support import REQUEST_SPECS, SPECS, message_class, message_strategy

from replog.errors import (
    InvalidRequestError,
    ProtocolDecodeError,
    ProtocolEncodeError,
    UnsupportedVersionError,
)
from replog.kafka.messages.api_versions_request import ApiVersionsRequest
from replog.kafka.messages.fetch_request import (
    FetchPartition,
    FetchRequest,
    FetchTopic,
    ReplicaState,
)
from replog.kafka.messages.metadata_response import MetadataResponse
from replog.kafka.messages.produce_request import (
    PartitionProduceData,
    ProduceRequest,
    TopicProduceData,
)

FUZZ = settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def ids(spec: Any) -> str:
    return str(spec.name)


def decode_or_typed_error(cls: Any, data: bytes, version: int) -> None:
    try:
        cls.decode(data, version)
    except ProtocolDecodeError as exc:
        assert exc.message_name == cls.NAME and exc.version == version
        assert isinstance(exc, InvalidRequestError) and exc.code == 42


@pytest.mark.parametrize("spec", REQUEST_SPECS, ids=ids)
def test_random_bytes_raise_only_the_typed_error(spec: Any) -> None:
    cls = message_class(spec)

    @FUZZ
    @given(st.binary(max_size=48), st.sampled_from(list(spec.versions())))
    def check(data: bytes, version: int) -> None:
        decode_or_typed_error(cls, data, version)

    check()


@pytest.mark.parametrize("spec", REQUEST_SPECS, ids=ids)
def test_cut_and_flipped_requests_raise_only_the_typed_error(spec: Any) -> None:
    cls = message_class(spec)
    versions = list(spec.versions())

    @settings(FUZZ, max_examples=4)
    @given(st.data())
    def check(data: st.DataObject) -> None:
        version = data.draw(st.sampled_from(versions))
        encoded = data.draw(message_strategy(spec, version)).encode(version)
        # every strict prefix is truncated and must name the field it stopped in
        for cut in range(len(encoded)):
            with pytest.raises(ProtocolDecodeError) as info:
                cls.decode(encoded[:cut], version)
            assert info.value.field, f"{spec.name} v{version} cut at {cut}: {info.value}"
        with pytest.raises(ProtocolDecodeError, match="left over"):
            cls.decode(encoded + b"\0", version)
        if encoded:
            at = data.draw(st.integers(0, len(encoded) - 1))
            flip = data.draw(st.integers(1, 255))
            corrupt = bytearray(encoded)
            corrupt[at] ^= flip
            decode_or_typed_error(cls, bytes(corrupt), version)

    check()


def test_the_error_names_the_nested_field_it_stopped_in() -> None:
    request = ProduceRequest(
        acks=-1,
        timeout_ms=30_000,
        topic_data=[
            TopicProduceData(
                name="t", partition_data=[PartitionProduceData(index=0, records=b"x" * 40)]
            )
        ],
    )
    data = request.encode(9)
    with pytest.raises(ProtocolDecodeError) as info:
        ProduceRequest.decode(data[:-10], 9)
    assert info.value.field == "topic_data.partition_data.records"
    assert str(info.value).startswith("ProduceRequest v9: field topic_data.partition_data.records")
    with pytest.raises(ProtocolDecodeError) as info:
        ProduceRequest.decode(data[:2], 9)  # null transactional id (1 byte), then acks
    assert info.value.field == "acks"
    with pytest.raises(ProtocolDecodeError) as info:
        ProduceRequest.decode(data[:5], 9)
    assert info.value.field == "timeout_ms"


def test_lengths_are_read_as_kafka_reads_them() -> None:
    # any negative length is null (Kafka's generated readers test `length < 0`)
    v3 = b"\xff\xfe" + b"\x00\x01" + b"\x00\x00\x00\x00" + b"\x00\x00\x00\x00"
    assert ProduceRequest.decode(v3, 3) == ProduceRequest(transactional_id=None, acks=1)
    with pytest.raises(ProtocolDecodeError, match="field topic_data: null for a non-nullable"):
        ProduceRequest.decode(
            b"\xff\xff" + b"\x00\x01" + b"\x00\x00\x00\x00" + b"\xff\xff\xff\xfe", 3
        )
    # a compact string over 32767 bytes is invalid even when the bytes are there
    long_name = b"\x81\x80\x02" + b"a" * 32768  # uvarint 32769 = length 32768
    with pytest.raises(
        ProtocolDecodeError, match="field client_software_name: string length 32768"
    ):
        ApiVersionsRequest.decode(long_name + b"\x01\x00", 3)


def test_records_stay_a_view_of_the_frame() -> None:
    batch = bytes(range(61))
    request = ProduceRequest(
        acks=1,
        topic_data=[
            TopicProduceData(name="t", partition_data=[PartitionProduceData(records=batch)])
        ],
    )
    frame = bytearray(request.encode(10))
    records = ProduceRequest.decode(frame, 10).topic_data[0].partition_data[0].records
    assert isinstance(records, memoryview) and records == batch
    assert records.obj is frame  # zero copy: a slice of the caller's buffer


def non_default(f: Any, module: Any) -> Any:
    """A value other than field `f`'s default."""
    if f.is_array:
        if f.struct is not None:
            return [getattr(module, f.struct.name)()]
        return [{"string": "x", "uuid": uuid.uuid4()}.get(f.type, 1)]
    if f.struct is not None:
        return None  # a struct differs from its default when null (if nullable) - skipped
    default = f.type and message_default(f)
    if f.type in ("int8", "int16", "uint16", "int32", "uint32", "int64"):
        return default + 1 if default < 100 else default - 1
    if f.type == "bool":
        return not default
    if f.type == "float64":
        return default + 1.5
    if f.type == "string":
        return "x" if default != "x" else "y"
    if f.type in ("bytes", "records"):
        return b"x"
    if f.type == "uuid":
        return uuid.uuid4()
    raise AssertionError(f.type)


def message_default(f: Any) -> Any:
    from kafka_codec_support import GEN

    return GEN.default_value(f)


def absent_fields() -> list[tuple[Any, int, Any]]:
    cases = []
    for spec in SPECS:
        for version in spec.versions():
            for f in spec.top.fields:
                if f.present(version) or f.tagged_in(version) or f.versions.empty():
                    continue
                if f.struct is not None and not f.is_array:
                    continue
                cases.append((spec, version, f))
    return cases


ABSENT = absent_fields()


@pytest.mark.parametrize(
    ("spec", "version", "f"), ABSENT, ids=[f"{s.name}-v{v}-{f.attr}" for s, v, f in ABSENT]
)
def test_a_non_default_value_in_a_version_without_the_field(
    spec: Any, version: int, f: Any
) -> None:
    cls = message_class(spec)
    module = __import__(cls.__module__, fromlist=["_"])
    message = cls()
    setattr(message, f.attr, non_default(f, module))
    if f.ignorable:
        # Kafka drops an ignorable field a version lacks
        back = cls.decode(message.encode(version), version)
        assert getattr(back, f.attr) == getattr(cls(), f.attr)
    else:
        with pytest.raises(
            UnsupportedVersionError, match=f"{spec.name} v{version} has no field {f.attr}"
        ):
            message.encode(version)


def test_there_are_absent_fields_of_both_kinds() -> None:
    assert any(f.ignorable for _, _, f in ABSENT)
    assert any(not f.ignorable for _, _, f in ABSENT)


def test_a_nested_non_default_field_names_its_path() -> None:
    # LastFetchedEpoch (not ignorable) arrived in Fetch v12; ReplicaState (tagged) in v15
    partition = FetchPartition(last_fetched_epoch=5)
    request = FetchRequest(topics=[FetchTopic(topic="t", partitions=[partition])])
    with pytest.raises(
        UnsupportedVersionError,
        match=r"FetchRequest v11 has no field topics\.partitions\.last_fetched_epoch",
    ):
        request.encode(11)
    assert FetchRequest.decode(request.encode(12), 12) == request
    tagged = FetchRequest(replica_state=ReplicaState(replica_id=3))
    with pytest.raises(
        UnsupportedVersionError, match="FetchRequest v14 has no field replica_state"
    ):
        tagged.encode(14)
    assert FetchRequest.decode(tagged.encode(15), 15) == tagged


def test_versions_outside_the_spec_are_unsupported() -> None:
    with pytest.raises(
        UnsupportedVersionError, match=r"ProduceRequest v2 is not supported \(versions 3-13\)"
    ):
        ProduceRequest().encode(2)
    with pytest.raises(UnsupportedVersionError, match="v14"):
        ProduceRequest.decode(b"", 14)


@pytest.mark.parametrize(
    ("message", "version", "field"),
    [
        (ProduceRequest(acks=1 << 15), 9, "acks"),
        (ProduceRequest(topic_data=[TopicProduceData(name=None)]), 3, "topic_data.name"),  # type: ignore[arg-type]
        (ApiVersionsRequest(client_software_name=7), 3, "client_software_name"),  # type: ignore[arg-type]
        (MetadataResponse(topics=None), 1, "topics"),  # type: ignore[arg-type]
    ],
)
def test_bad_values_raise_the_typed_encode_error(message: Any, version: int, field: str) -> None:
    with pytest.raises(ProtocolEncodeError) as info:
        message.encode(version)
    assert info.value.field == field
    assert info.value.message_name == message.NAME and info.value.version == version


def test_unknown_tagged_fields_are_kept_and_written_back() -> None:
    request = ApiVersionsRequest(client_software_name="c", client_software_version="1")
    request.unknown_tagged_fields = ((5, b"\x01\x02"), (9, b""))
    data = request.encode(3)
    back = ApiVersionsRequest.decode(data, 3)
    assert back.unknown_tagged_fields == ((5, b"\x01\x02"), (9, b""))
    assert back.encode(3) == data
