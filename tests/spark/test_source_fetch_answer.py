"""What the Spark fetcher makes of a Fetch answer read from its bytes (`partition_fetcher.
answer_for` over `fetch_answer_wire`), without a cluster.

- The partition's records are a view of the serialized answer (no copy), with its high
  watermark and log start offset; an error field with code 0 is no error.
- The error paths are those of the parsed answer the fetcher used before (the broker client's
  `fetch_response_from_wire`): OFFSET_OUT_OF_RANGE raises `OffsetOutOfRangeError` naming the
  partition and the offset, retriable errors and a missing partition ask again (saying why), others
  raise the broker's typed error, a topic id that is neither empty nor 16 bytes asks again.
  Held for random answers by comparison with that path.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from replog.client.records import TopicPartition
from replog.errors import (
    FencedLeaderEpochError,
    InvalidRequestError,
    KafkaError,
    NotLeaderOrFollowerError,
    OffsetOutOfRangeError,
    TopicAuthorizationFailedError,
)
from replog.pb import broker_pb2 as pb
from replog.spark.fetch_answer_wire import fetch_answer_topics
from replog.spark.partition_fetcher import FetchAnswer, answer_for
from replog.wire import broker_codec as codec
from tests.wire.broker_message_strategies import fetch_responses

TP = TopicPartition("t", 0)


def _answer(error: KafkaError | None = None, *, topic_id: bytes = b"", partition: int = 0) -> bytes:
    message = pb.FetchResponse()
    topic = message.topics.add(topic="t", topic_id=topic_id)
    p = topic.partitions.add(
        partition=partition, high_watermark=90, log_start_offset=10, records=b"batches"
    )
    if error is not None:
        p.error.CopyFrom(codec.error_to_proto(error))
    return message.SerializeToString()


def _outcome(data: bytes) -> object:
    try:
        answer = answer_for(TP, fetch_answer_topics(data), 42)
    except KafkaError as exc:
        return type(exc), str(exc)
    if isinstance(answer, str):  # why to ask again
        return None
    return bytes(answer.records), answer.high_watermark, answer.log_start_offset


def test_the_records_are_a_view_of_the_answer_with_the_partition_s_offsets() -> None:
    data = _answer()
    answer = answer_for(TP, fetch_answer_topics(data), 42)
    assert isinstance(answer, FetchAnswer)
    assert answer.records.obj is data and bytes(answer.records) == b"batches"
    assert (answer.high_watermark, answer.log_start_offset) == (90, 10)
    message = pb.FetchResponse.FromString(data)
    message.topics[0].partitions[0].error.code = 0  # present, code 0: no error
    assert _outcome(message.SerializeToString()) == (b"batches", 90, 10)


def test_error_paths() -> None:
    assert _outcome(_answer(OffsetOutOfRangeError("x"))) == (
        OffsetOutOfRangeError,
        "t-0: fetch offset 42 is out of range",
    )
    assert _outcome(_answer(NotLeaderOrFollowerError("x"))) is None
    assert _outcome(_answer(FencedLeaderEpochError("x"))) is None
    assert _outcome(_answer(TopicAuthorizationFailedError("not you"))) == (
        TopicAuthorizationFailedError,
        "not you",
    )
    assert _outcome(_answer(partition=1)) is None  # our partition missing: ask again
    assert _outcome(_answer(topic_id=b"abc")) is None  # the old parse refused it: ask again
    assert _outcome(_answer(topic_id=bytes(16))) == (b"batches", 90, 10)


def _parsed_outcome(data: bytes) -> object:
    """The fetcher's answer before the wire walk, from the broker client's parse (its code at
    aa9adca, kept here as the reference)."""
    try:
        response = codec.fetch_response_from_wire(data)
    except InvalidRequestError:
        return None  # a ReplogError from the call: asked again
    for result in response.partitions:
        if (result.topic, result.partition) != TP:
            continue
        error = result.error
        if error is None:
            return result.records, result.high_watermark, result.log_start_offset
        if isinstance(error, OffsetOutOfRangeError):
            return OffsetOutOfRangeError, "t-0: fetch offset 42 is out of range"
        if error.retriable:
            return None
        return type(error), str(error)
    return None


@st.composite
def _answers_for_t0(draw: st.DrawFn) -> bytes:
    """Random answers, some naming t-0, with errors of every kind (known codes or not)."""
    message: pb.FetchResponse = draw(fetch_responses())
    for topic in message.topics:
        if draw(st.booleans()):
            topic.topic = "t"
        for p in topic.partitions:
            if draw(st.booleans()):
                p.partition = 0
            if p.HasField("error"):
                p.error.code = draw(st.sampled_from([0, 1, 3, 6, 29, 74, 9999, -1]))
    return bytes(message.SerializeToString())


@settings(max_examples=300, deadline=None)
@given(_answers_for_t0())
def test_random_answers_give_what_the_parsed_answer_gave(data: bytes) -> None:
    assert _outcome(data) == _parsed_outcome(data)
