"""partition.metadata: Kafka's bytes, the round trip, and what a reader refuses."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from replog.checkpoints.partition_metadata import (
    parse_partition_metadata,
    render_partition_metadata,
)
from replog.errors import CorruptCheckpointError

TOPIC_ID = uuid.UUID("7cdf2a61-5b8e-4a06-9f2b-2d9f0bd0f4e1")
KAFKA_BYTES = b"version: 0\ntopic_id: fN8qYVuOSgafKy2fC9D04Q"  # Kafka's formatter, no newline


def test_the_bytes_are_kafkas() -> None:
    assert render_partition_metadata(TOPIC_ID) == KAFKA_BYTES
    assert parse_partition_metadata(KAFKA_BYTES, source="f") == TOPIC_ID


def test_a_trailing_newline_and_wider_spacing_are_read() -> None:
    text = b"version:  0\ntopic_id:   fN8qYVuOSgafKy2fC9D04Q\n"
    assert parse_partition_metadata(text, source="f") == TOPIC_ID


@given(st.uuids())
def test_every_topic_id_round_trips(topic_id: uuid.UUID) -> None:
    assert parse_partition_metadata(render_partition_metadata(topic_id), source="f") == topic_id


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"", r"line 1: expected 'key: value', found ''"),
        (b"version: 1\ntopic_id: fN8qYVuOSgafKy2fC9D04Q", "unsupported version '1'"),
        (b"topic_id: fN8qYVuOSgafKy2fC9D04Q\nversion: 0", "expected the keys version and topic_id"),
        (b"version: 0", "expected the keys version and topic_id, found \\['version'\\]"),
        (b"version: 0\ntopic_id: fN8qYVuOSgafKy2f", "is not 16 bytes of URL-safe base64"),
        (b"version: 0\ntopic_id: fN8q!VuOSgafKy2fC9D04Q", "is not 16 bytes of URL-safe base64"),
        (b"version: 0\ntopic_id: \xff", "not UTF-8"),
        (b"version: 0\n\ntopic_id: fN8qYVuOSgafKy2fC9D04Q", "line 2: expected 'key: value'"),
    ],
    ids=["empty", "version", "order", "no-id", "short-id", "bad-char", "not-utf8", "blank-line"],
)
def test_anything_else_is_corrupt_naming_the_file(data: bytes, reason: str) -> None:
    with pytest.raises(CorruptCheckpointError, match=f"^/d/t-0/partition.metadata: .*{reason}"):
        parse_partition_metadata(data, source="/d/t-0/partition.metadata")
