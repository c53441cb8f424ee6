"""Records without a key on a compacted topic: Kafka's LogValidator refusal, through the Kafka
listener's Produce into a real ReplicaManager over logs in tmp_path.

- A topic whose cleanup.policy has `compact` refuses a batch holding a record without a key:
  INVALID_RECORD, one record error per such record (its index in the batch, Kafka's message
  naming the topic partition), Kafka's summary as the error message (v8+; older versions carry
  the code alone), nothing appended; compressed batches alike; a corrupt batch stays
  CORRUPT_MESSAGE (its CRC is checked first, as Kafka orders them).
- Keyed records are appended; a topic without `compact` takes keyless records as before.
- Clients: replog's producer fails the send with `RecordsRejectedError` (an
  `InvalidRecordError`) naming the topic partition and the refused records; confluent-kafka
  and kafka-python get INVALID_RECORD. They talk to a fake broker (`FakeKafkaBroker`) that
  answers Metadata itself and hands each Produce to the real handlers, and to the broker's own
  Kafka listener.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Iterator
from pathlib import Path
from typing import Any

import pytest

from replog import Producer
from replog.aio import Producer as AsyncProducer
from replog.errors import CorruptRecordError, InvalidRecordError, RecordsRejectedError
from replog.kafka.messages.produce_request import ProduceRequest
from replog.kafka.messages.produce_response import ProduceResponse
from replog.kafka.protocol.codec import Message
from replog.record import COMPRESSION_GZIP, build_batch
from replog.testing import FakeKafkaBroker, ManualClock, running_fake_kafka_broker
from tests.server.data_plane.test_replica_manager import T0, Node
from tests.server.kafka.compacted_listener import compacted_listener
from tests.server.kafka.test_kafka_produce import (
    corrupt_crc,
    leading,
    listener,
    produce,
    request,
    results,
)

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

COMPACT = ("cleanup.policy", "compact")
MESSAGE = "Compacted topic cannot accept message without key in topic partition t-0."


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


def keyed(*keys: bytes | None, **options: Any) -> bytes:
    return build_batch([(T0, key, b"v", ()) for key in keys], **options)


@pytest.mark.asyncio
@pytest.mark.parametrize("policy", ["compact", "compact,delete", "delete,compact"])
async def test_a_compacted_topic_refuses_records_without_a_key_naming_each(
    tmp_path: Path, clock: ManualClock, policy: str
) -> None:
    node = leading((1,), ("cleanup.policy", policy), tmp_path, clock)
    records = keyed(b"k0", None, b"k2", None)
    answer = await produce(listener(node), request(("t", 0, records), acks=1), version=9)
    (result,) = results(answer).values()
    assert result.error_code == InvalidRecordError.code == 87
    assert [(e.batch_index, e.batch_index_error_message) for e in result.record_errors] == [
        (1, MESSAGE),
        (3, MESSAGE),
    ]
    assert result.error_message == (
        "One or more records have been rejected due to 2 record errors in total, and only "
        f"showing the first three errors at most: [RecordError(batchIndex=1, message='{MESSAGE}'), "
        f"RecordError(batchIndex=3, message='{MESSAGE}')]"
    )
    assert node.log().log_end_offset == 0


@pytest.mark.asyncio
async def test_a_version_before_8_carries_the_code_alone(
    tmp_path: Path, clock: ManualClock
) -> None:
    node = leading((1,), COMPACT, tmp_path, clock)
    answer = await produce(listener(node), request(("t", 0, keyed(None)), acks=1), version=7)
    encoded = ProduceResponse.decode(answer.encode(7), 7)
    (result,) = results(encoded).values()
    assert result.error_code == 87
    assert result.record_errors == [] and result.error_message is None


@pytest.mark.asyncio
async def test_keyed_records_are_appended_and_a_compressed_keyless_one_refused(
    tmp_path: Path, clock: ManualClock
) -> None:
    node = leading((1,), COMPACT, tmp_path, clock)
    apis = listener(node)
    answer = await produce(apis, request(("t", 0, keyed(b"a", b"b")), acks=1))
    (result,) = results(answer).values()
    assert (result.error_code, result.base_offset) == (0, 0)
    compressed = keyed(b"a", None, compression=COMPRESSION_GZIP)
    answer = await produce(apis, request(("t", 0, compressed), acks=1))
    (result,) = results(answer).values()
    assert result.error_code == 87
    assert [e.batch_index for e in result.record_errors] == [1]
    assert node.log().log_end_offset == 2


@pytest.mark.asyncio
async def test_a_corrupt_batch_is_corrupt_before_its_keys_are_read(
    tmp_path: Path, clock: ManualClock
) -> None:
    node = leading((1,), COMPACT, tmp_path, clock)
    answer = await produce(listener(node), request(("t", 0, corrupt_crc(keyed(None))), acks=1))
    (result,) = results(answer).values()
    assert result.error_code == CorruptRecordError.code


@pytest.mark.asyncio
async def test_a_topic_without_compact_takes_records_without_a_key(
    tmp_path: Path, clock: ManualClock
) -> None:
    node = leading((1,), ("cleanup.policy", "delete"), tmp_path, clock)
    answer = await produce(listener(node), request(("t", 0, keyed(None, None)), acks=1))
    (result,) = results(answer).values()
    assert (result.error_code, result.record_errors) == (0, [])
    assert node.log().log_end_offset == 2


# --- clients --------------------------------------------------------------------------------


def _run(call: Coroutine[Any, Any, Any]) -> Any:
    """`call` run to its end here: a Produce with acks=1 awaits nothing that waits."""
    try:
        call.send(None)
    except StopIteration as done:
        return done.value
    raise AssertionError("the produce waited")


@pytest.fixture
def fronted(tmp_path: Path, clock: ManualClock) -> Iterator[tuple[FakeKafkaBroker, Node]]:
    """A fake broker leading t-0 whose Produce answers come from a real compacted node."""
    node = leading((1,), COMPACT, tmp_path, clock)
    apis = listener(node)

    def produced(sent: Message, version: int) -> Message:
        assert isinstance(sent, ProduceRequest)
        answer: Message = _run(apis.produce(sent, version))
        return answer

    with running_fake_kafka_broker() as fake:
        fake.answer("Metadata", fake.metadata("t"))
        fake.answer("Produce", produced)
        yield fake, node


def test_replog_s_producer_fails_a_keyless_send_naming_the_topic(
    fronted: tuple[FakeKafkaBroker, Node],
) -> None:
    fake, node = fronted
    producer = Producer(bootstrap_servers=fake.address, acks=1, enable_idempotence=False)
    try:
        assert producer.send("t", b"v", key=b"k", partition=0).get(timeout=10).offset == 0
        failed = producer.send("t", b"v", partition=0)
        with pytest.raises(RecordsRejectedError) as raised:
            failed.get(timeout=10)
    finally:
        producer.close()
    assert isinstance(raised.value, InvalidRecordError)
    assert "t-0" in str(raised.value) and "without key" in str(raised.value)
    assert raised.value.record_errors == ((0, MESSAGE),)
    assert node.log().log_end_offset == 1


def test_confluent_kafka_gets_invalid_record(fronted: tuple[FakeKafkaBroker, Node]) -> None:
    import confluent_kafka as confluent

    from tests.confluent_producer import confluent_producer

    fake, node = fronted
    reports: list[Any] = []
    with confluent_producer(
        {"bootstrap.servers": fake.address, "acks": 1, "enable.idempotence": False}
    ) as producer:
        # One batch each: a batch is refused whole, its keyed records with it (as Kafka does).
        producer.produce("t", value=b"v", key=b"k", partition=0, on_delivery=_note(reports))
        assert producer.flush(10) == 0
        producer.produce("t", value=b"v", partition=0, on_delivery=_note(reports))
        assert producer.flush(10) == 0
    codes = [None if error is None else error.code() for error in reports]
    assert codes == [None, confluent.KafkaError.INVALID_RECORD]
    assert node.log().log_end_offset == 1


def _note(reports: list[Any]) -> Any:
    return lambda error, message: reports.append(error)


def test_kafka_python_gets_invalid_record(fronted: tuple[FakeKafkaBroker, Node]) -> None:
    import kafka

    fake, node = fronted
    producer = kafka.KafkaProducer(bootstrap_servers=fake.address, acks=1, retries=0)
    try:
        producer.send("t", value=b"v", key=b"k", partition=0).get(timeout=10)
        with pytest.raises(kafka.errors.InvalidRecordError):
            producer.send("t", value=b"v", partition=0).get(timeout=10)
    finally:
        producer.close()
    assert node.log().log_end_offset == 1


# --- through replog's Kafka listener --------------------------------------------------------


@pytest.mark.asyncio
async def test_through_the_kafka_listener_replog_s_and_kafka_s_producers_are_refused(
    tmp_path: Path, clock: ManualClock
) -> None:
    """The broker's own listener in front of the node (its Metadata from an image naming the
    listener's port): replog's asyncio producer on this loop, kafka-python and confluent-kafka
    in threads."""
    async with compacted_listener(tmp_path, clock) as (node, address):
        # Idempotent (the default): after the refusal the next keyed record is still written.
        async with AsyncProducer(bootstrap_servers=address, request_timeout_ms=5000) as producer:
            assert (await producer.send("t", b"v", key=b"k", partition=0)).offset == 0
            with pytest.raises(RecordsRejectedError) as raised:
                await producer.send("t", b"v", partition=0)
            assert (await producer.send("t", b"w", key=b"k", partition=0)).offset == 1
        assert raised.value.record_errors == ((0, MESSAGE),)
        assert "t-0" in str(raised.value)
        assert await asyncio.to_thread(_kafka_python_keyless, address) == "InvalidRecordError"
        assert await asyncio.to_thread(_confluent_keyless, address) == 87
        assert node.log().log_end_offset == 2


def _kafka_python_keyless(address: str) -> str:
    import kafka

    producer = kafka.KafkaProducer(bootstrap_servers=address, acks=1, retries=0)
    try:
        producer.send("t", value=b"v", partition=0).get(timeout=10)
    except kafka.errors.KafkaError as error:
        return type(error).__name__
    finally:
        producer.close()
    return "accepted"


def _confluent_keyless(address: str) -> int | None:
    from tests.confluent_producer import confluent_producer

    reports: list[Any] = []
    with confluent_producer({"bootstrap.servers": address, "acks": 1}) as producer:
        producer.produce("t", value=b"v", partition=0, on_delivery=_note(reports))
        producer.flush(10)
    (error,) = reports
    return None if error is None else int(error.code())
