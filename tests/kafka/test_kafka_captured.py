"""Request frames captured from kafka-python's real producer, group consumer and admin client
(tests/kafka/capture_kafka_python.py, at its own versions and capped to older brokers' ones)
decode completely and encode back to the same bytes."""

from __future__ import annotations

from pathlib import Path

import pytest

from replog.kafka.messages.produce_request import ProduceRequest
from replog.kafka.protocol import framing

CAPTURED = Path(__file__).resolve().parent / "captured"


def frames() -> list[tuple[str, int, bytes]]:
    found = []
    for path in sorted(CAPTURED.glob("*.txt")):
        for line in path.read_text().splitlines():
            if line and not line.startswith("#"):
                name, version, hex_frame = line.split()
                found.append((name, int(version.removeprefix("v")), bytes.fromhex(hex_frame)))
    return found


FRAMES = frames()


def test_the_capture_covers_flexible_and_older_versions() -> None:
    names = {name for name, _, _ in FRAMES}
    assert {"ProduceRequest", "FetchRequest", "MetadataRequest", "JoinGroupRequest"} <= names
    produce_versions = {v for name, v, _ in FRAMES if name == "ProduceRequest"}
    assert min(produce_versions) < 9 <= max(produce_versions)


@pytest.mark.parametrize(
    ("name", "version", "frame"), FRAMES, ids=[f"{n}-v{v}" for n, v, _ in FRAMES]
)
def test_captured_request_decodes_and_encodes_back(name: str, version: int, frame: bytes) -> None:
    assert framing.frame_size(frame[:4]) == len(frame) - 4
    header, body = framing.decode_request(frame[4:])
    assert (body.NAME, header.request_api_version) == (name, version)
    assert header.client_id and header.client_id.startswith("kafka-python")
    assert framing.encode_request(header, body) == frame
    if isinstance(body, ProduceRequest):
        records = body.topic_data[0].partition_data[0].records
        assert isinstance(records, memoryview)
        assert records[16] == 2  # a RecordBatch v2 (magic byte), kept raw
