"""What the Spark fetcher makes of a Kafka Fetch answer (`partition_fetcher.answer_for`),
without a cluster.

- The partition's records are a view of the buffer the answer frame was received into (no
  copy), with its high watermark and log start offset; no records is an empty view.
- OFFSET_OUT_OF_RANGE raises `OffsetOutOfRangeError` naming the partition and the offset,
  retriable errors and a missing partition ask again (saying why), others raise the broker's
  typed error naming the partition.
"""

from __future__ import annotations

import pytest

from replog.client.records import TopicPartition
from replog.errors import (
    FencedLeaderEpochError,
    KafkaError,
    NotLeaderOrFollowerError,
    OffsetOutOfRangeError,
    TopicAuthorizationFailedError,
)
from replog.kafka.messages.fetch_response import (
    FetchableTopicResponse,
    FetchResponse,
    PartitionData,
)
from replog.kafka.protocol.framing import decode_response, encode_response
from replog.spark.partition_fetcher import FetchAnswer, answer_for

TP = TopicPartition("t", 0)
VERSION = 12


def _answer(
    code: int = 0, *, topic: str = "t", partition: int = 0, records: bytes | None = b"batches"
) -> tuple[bytearray, FetchResponse]:
    """A FetchResponse as `KafkaConnection` hands it over: decoded from the frame's own
    buffer (returned too)."""
    body = FetchResponse(
        responses=[
            FetchableTopicResponse(
                topic=topic,
                partitions=[
                    PartitionData(
                        partition_index=partition,
                        error_code=code,
                        high_watermark=90,
                        log_start_offset=10,
                        records=records,
                    )
                ],
            )
        ]
    )
    frame = bytearray(encode_response(1, VERSION, 7, body, framed=False))
    _, response = decode_response(memoryview(frame), 1, VERSION)
    assert isinstance(response, FetchResponse)
    return frame, response


def _outcome(code: int = 0, **fields: object) -> object:
    try:
        answer = answer_for(TP, _answer(code, **fields)[1], 42)  # type: ignore[arg-type]
    except KafkaError as exc:
        return type(exc), str(exc)
    if isinstance(answer, str):  # why to ask again
        return answer
    return bytes(answer.records), answer.high_watermark, answer.log_start_offset


def test_the_records_are_a_view_of_the_answer_s_buffer_with_the_partition_s_offsets() -> None:
    frame, response = _answer()
    answer = answer_for(TP, response, 42)
    assert isinstance(answer, FetchAnswer)
    assert answer.records.obj is frame and bytes(answer.records) == b"batches"
    assert (answer.high_watermark, answer.log_start_offset) == (90, 10)
    assert _outcome(records=None) == (b"", 90, 10)


def test_error_paths() -> None:
    assert _outcome(OffsetOutOfRangeError.code) == (
        OffsetOutOfRangeError,
        "t-0: fetch offset 42 is out of range",
    )
    assert _outcome(NotLeaderOrFollowerError.code) == "the leader answered NOT_LEADER_OR_FOLLOWER"
    assert _outcome(FencedLeaderEpochError.code) == "the leader answered FENCED_LEADER_EPOCH"
    assert _outcome(TopicAuthorizationFailedError.code) == (
        TopicAuthorizationFailedError,
        "t-0: the leader answered the fetch at offset 42 with TOPIC_AUTHORIZATION_FAILED",
    )
    assert _outcome(partition=1) == "the answer leaves t-0 out"
    assert _outcome(topic="u") == "the answer leaves t-0 out"


@pytest.mark.parametrize("code", [9999, -1])
def test_an_unknown_error_code_is_raised_as_an_unknown_server_error(code: int) -> None:
    outcome = _outcome(code)
    assert isinstance(outcome, tuple) and outcome[0].__name__ == "UnknownServerError"
