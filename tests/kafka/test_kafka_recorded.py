"""Apache Kafka 4.4's own answers, recorded (tests/kafka/recorded/, by record_kafka_clients.py
through recording_proxy.py), decode with replog's codecs, and real clients run against them
served by the replay server (replay_server.py): no JVM in the test run."""

from __future__ import annotations

import socket
import time
from collections import Counter
from pathlib import Path

import pytest

from replog.kafka.messages.produce_request import ProduceRequest
from replog.kafka.messages.produce_response import ProduceResponse
from replog.kafka.protocol import framing
from tests.kafka.recorded_exchanges import RECORDED, Recording, parse_address
from tests.kafka.recording_proxy import RecordingProxy
from tests.kafka.replay_server import MAX_REPEAT_WAIT_S, ReplayServer

RECORDINGS = sorted(RECORDED.glob("*.json"))
PRODUCE_CONSUME = RECORDED / "kafka-python-produce-consume.json"
CONSUMER_GROUP = RECORDED / "confluent-kafka-consumer-group.json"
RECORDS = [b"record-%03d" % i for i in range(20)]  # what record_kafka_clients.py sends
PARTITIONS = 3


def test_the_recordings_hold_kafkas_answers_to_the_clients_main_requests() -> None:
    apis = {e.api for path in RECORDINGS for e in Recording.load(path).exchanges if e.response}
    assert {
        "Metadata",
        "Produce",
        "Fetch",
        "ListOffsets",
        "FindCoordinator",
        "JoinGroup",
        "SyncGroup",
        "ConsumerGroupHeartbeat",
        "OffsetCommit",
        "OffsetFetch",
        "InitProducerId",
        "CreateTopics",
        "DescribeConfigs",
        "DescribeCluster",
        "DeleteRecords",
        "ElectLeaders",
        "DescribeQuorum",
    } <= apis
    assert {Recording.load(path).kafka for path in RECORDINGS} == {"4.4.0"}


@pytest.mark.parametrize("path", RECORDINGS, ids=[p.stem for p in RECORDINGS])
def test_every_recorded_frame_decodes_and_encodes_back_to_kafkas_bytes(path: Path) -> None:
    for exchange in Recording.load(path).exchanges:
        header, body = framing.decode_request(exchange.request)
        assert (header.request_api_key, header.request_api_version) == (
            exchange.key,
            exchange.version,
        )
        assert framing.encode_request(header, body, framed=False) == exchange.request
        if exchange.response is None:
            continue
        answer_header, answer = framing.decode_response(
            exchange.response, exchange.key, exchange.version
        )
        assert answer_header.correlation_id == exchange.correlation_id
        again = framing.encode_response(
            exchange.key, exchange.version, exchange.correlation_id, answer, framed=False
        )
        assert again == exchange.response, f"{exchange.api} v{exchange.version}"


def produce_and_consume_with_kafka_python(bootstrap: str) -> tuple[list[int], list[bytes]]:
    """The scenario of record_kafka_clients.py: the offsets the producer was given, and the
    values a classic-group consumer read."""
    from kafka import KafkaConsumer, KafkaProducer

    producer = KafkaProducer(
        bootstrap_servers=bootstrap, acks="all", enable_idempotence=True, linger_ms=0
    )
    offsets = [
        producer.send(PRODUCE_CONSUME.stem, key=b"k%d" % (i % PARTITIONS), value=value)
        .get(timeout=10)
        .offset
        for i, value in enumerate(RECORDS)
    ]
    producer.close(timeout=5)
    consumer = KafkaConsumer(
        PRODUCE_CONSUME.stem,
        bootstrap_servers=bootstrap,
        group_id=f"{PRODUCE_CONSUME.stem}-group",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    got: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(got) < len(RECORDS) and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=500).values():
            got += [r.value for r in records]
    consumer.commit()
    consumer.close()
    return offsets, got


def recorded_offsets(recording: Recording) -> list[int]:
    """The base offsets Kafka gave in its Produce responses (one record per request)."""
    found = []
    for exchange in recording.exchanges:
        if exchange.api == "Produce" and exchange.response is not None:
            _, answer = framing.decode_response(exchange.response, exchange.key, exchange.version)
            assert isinstance(answer, ProduceResponse)
            found += [p.base_offset for t in answer.responses for p in t.partition_responses]
    return sorted(found)


def test_kafka_python_produces_and_consumes_against_kafkas_replayed_answers() -> None:
    recording = Recording.load(PRODUCE_CONSUME)
    with ReplayServer(recording) as kafka:
        offsets, got = produce_and_consume_with_kafka_python(kafka.bootstrap)
        assert kafka.misses == []
        answered = {e.api for e in kafka.answered}
    assert sorted(got) == RECORDS
    assert sorted(offsets) == recorded_offsets(recording)
    assert len(offsets) == len(set(zip(offsets, got, strict=True))) == len(RECORDS)
    assert {"InitProducerId", "Produce", "JoinGroup", "SyncGroup", "Fetch"} <= answered


def test_the_client_stays_on_the_stand_ins_that_answer_for_kafkas_brokers() -> None:
    recording = Recording.load(PRODUCE_CONSUME)
    with ReplayServer(recording) as kafka:
        produce_and_consume_with_kafka_python(kafka.bootstrap)
        stand_ins = set(kafka.bootstrap.split(","))
        reached = {e.broker for e in kafka.answered}
    # Kafka's own addresses (nothing listens there now) were never dialled: every broker the
    # client learned of from Metadata and FindCoordinator was answered by its stand-in.
    assert reached == set(recording.brokers)
    assert all(parse_address(s)[1] not in {parse_address(b)[1] for b in reached} for s in stand_ins)


def test_confluent_kafka_consumer_protocol_group_reads_from_kafkas_replayed_answers() -> None:
    import confluent_kafka

    with ReplayServer(Recording.load(CONSUMER_GROUP)) as kafka:
        with confluent_kafka.Consumer(
            {
                "bootstrap.servers": kafka.bootstrap,
                "group.id": f"{CONSUMER_GROUP.stem}-group",
                "group.protocol": "consumer",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
            }
        ) as consumer:
            consumer.subscribe([CONSUMER_GROUP.stem])
            got: list[bytes] = []
            deadline = time.monotonic() + 30
            while len(got) < len(RECORDS) and time.monotonic() < deadline:
                message = consumer.poll(0.5)
                value = None if message is None or message.error() else message.value()
                if value is not None:
                    got.append(value)
        answered = {e.api for e in kafka.answered}
    assert sorted(got) == RECORDS
    assert "ConsumerGroupHeartbeat" in answered


def test_the_recording_proxy_records_each_exchange_that_passes_it() -> None:
    original = Recording.load(PRODUCE_CONSUME)
    with ReplayServer(original) as kafka:
        proxy = RecordingProxy(kafka.bootstrap.split(","))
        try:
            _, got = produce_and_consume_with_kafka_python(proxy.bootstrap)
            time.sleep(2 * MAX_REPEAT_WAIT_S)  # what is still in flight is answered
            recording = proxy.take("again", client="kafka-python")
            answered = list(kafka.answered)
        finally:
            proxy.close()
    assert sorted(got) == RECORDS
    # Every request the stand-ins answered went through the proxy (the client followed the
    # rewritten addresses); the proxy kept the answers that reached it before the client closed
    # its connections (a long-poll Fetch may be answered after that, to nobody).
    assert Counter(e.api for e in answered) <= Counter(e.api for e in recording.exchanges)
    with_answers = Counter(e.api for e in recording.exchanges if e.response is not None)
    assert with_answers - Counter(e.api for e in answered) == Counter()
    assert set(with_answers) == {e.api for e in answered}
    by_correlation = {(e.broker, e.connection, e.correlation_id): e for e in recording.exchanges}
    assert len(by_correlation) == len(recording.exchanges)
    for exchange in recording.exchanges:
        if exchange.response is None:
            continue
        _, body = framing.decode_response(exchange.response, exchange.key, exchange.version)
        assert framing.decode_request(exchange.request)[0].correlation_id == (
            exchange.correlation_id
        )
        assert body.NAME == framing.response_class(exchange.key).NAME


def test_a_request_gets_the_answer_recorded_for_a_request_like_it() -> None:
    """Produce requests sent in the reverse of the recorded order are each answered for their
    own partition, in the recorded order within it (records differ run to run and do not count;
    the partition does)."""
    recording = Recording.load(PRODUCE_CONSUME)
    produce = [e for e in recording.exchanges if e.api == "Produce"]
    answers: dict[int, list[int]] = {}
    with (
        ReplayServer(recording) as kafka,
        socket.create_connection(parse_address(kafka.bootstrap.split(",")[0]), timeout=10) as sock,
    ):
        for correlation_id, exchange in enumerate(reversed(produce)):
            header, request = framing.decode_request(exchange.request)
            header.correlation_id = correlation_id
            sock.sendall(framing.encode_request(header, request))
            size = framing.frame_size(receive(sock, 4))
            answer_header, answer = framing.decode_response(
                receive(sock, size), exchange.key, exchange.version
            )
            assert answer_header.correlation_id == correlation_id
            assert isinstance(request, ProduceRequest) and isinstance(answer, ProduceResponse)
            [asked] = [p.index for t in request.topic_data for p in t.partition_data]
            [(index, offset)] = [
                (p.index, p.base_offset) for t in answer.responses for p in t.partition_responses
            ]
            assert index == asked
            answers.setdefault(index, []).append(offset)
        assert kafka.misses == []
    assert len(answers) > 1
    assert all(offsets == sorted(offsets) for offsets in answers.values())


@pytest.mark.parametrize("api", ["FindCoordinator", "Metadata"])
def test_a_request_the_recorded_client_did_not_wait_for_is_answered_not_held(api: str) -> None:
    """The recorded client closed a connection before Kafka answered one of its requests (a
    FindCoordinator, the last Metadata). A slower run that sends each of them, and one more,
    gets Kafka's answers: held, a request would block the connection that the partitions'
    ListOffsets and Fetch go on next."""
    recording = Recording.load(CONSUMER_GROUP)
    sent = sorted((e for e in recording.exchanges if e.api == api), key=lambda e: e.seq)
    assert [e.response is None for e in sent].count(True) == 1
    with (
        ReplayServer(recording) as kafka,
        socket.create_connection(parse_address(kafka.bootstrap.split(",")[0]), timeout=10) as sock,
    ):
        for correlation_id, exchange in enumerate([*sent, sent[0]]):
            header, request = framing.decode_request(exchange.request)
            header.correlation_id = correlation_id
            sock.sendall(framing.encode_request(header, request))
            what = f"an answer to {api} {correlation_id + 1} of {len(sent) + 1}"
            size = framing.frame_size(receive(sock, 4, what))
            answer_header, _ = framing.decode_response(
                receive(sock, size, what), exchange.key, exchange.version
            )
            assert answer_header.correlation_id == correlation_id
        assert kafka.held == [] and kafka.misses == []


def receive(sock: socket.socket, n: int, what: str = "the replay server's answer") -> bytes:
    data = b""
    while len(data) < n:
        try:
            chunk = sock.recv(n - len(data))
        except TimeoutError:
            raise AssertionError(f"not within {sock.gettimeout():g} s: {what}") from None
        assert chunk, "the replay server closed the connection"
        data += chunk
    return data
