"""A real node (`replog node`, broker and controller) with a Kafka PLAINTEXT listener next to its
gRPC one, driven by kafka-python and by raw sockets:

- kafka-python's admin client and consumer bootstrap (ApiVersions, Metadata), list and
  describe topics created through replog's own admin client, and find the broker at the Kafka
  listener's address (the listener the client connected through), not at the gRPC one;
- kafka-python's producer (idempotent with acks=all, and acks=1, acks=0) appends through the
  listener, and replog's own consumer reads the records back over gRPC, in order, once each;
  kafka-python's consumer finds the earliest, latest and by-timestamp offsets (ListOffsets) and
  reads every record back through the listener, from the beginning and from an offset (Fetch);
- Produce requests pipelined on one connection are appended and answered in the order sent,
  OffsetForLeaderEpoch finds where the current epoch ends, and ListOffsets v8-v11 answers the
  tiered-storage timestamps (-4, -5, -6) as Kafka does without tiered storage;
- an unknown topic is UNKNOWN_TOPIC_OR_PARTITION and is not created; a topic id next to the
  name "" is a lookup by id;
- the node's loggers are described and a level set through BROKER_LOGGER; a config resource
  type not served is answered with its error, alone or next to a served one;
- ApiVersions at a version above the served range is answered UNSUPPORTED_VERSION (v0 body);
- garbage, a negative size, an oversize frame, an unknown API key, an unsupported version and a
  frame cut short by the client's going away each close only their own connection, with one
  WARNING line naming the peer and the cause, while the others are served; random bytes on
  twenty connections at once leave the listener serving;
  so does an acks=0 produce that fails (Kafka's broker closes the connection: no response can
  carry the error).
"""

from __future__ import annotations

import random
import socket
import struct
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kafka
import pytest

from replog.admin.controller_client import ControllerClient
from replog.admin.controller_results import NewTopic
from replog.kafka.messages.api_versions_request import ApiVersionsRequest
from replog.kafka.messages.api_versions_response import ApiVersionsResponse
from replog.kafka.messages.describe_configs_request import (
    DescribeConfigsRequest,
    DescribeConfigsResource,
)
from replog.kafka.messages.incremental_alter_configs_request import (
    AlterableConfig,
    AlterConfigsResource,
    IncrementalAlterConfigsRequest,
)
from replog.kafka.messages.list_offsets_request import (
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsTopic,
)
from replog.kafka.messages.list_offsets_response import ListOffsetsResponse
from replog.kafka.messages.metadata_request import MetadataRequest, MetadataRequestTopic
from replog.kafka.messages.metadata_response import MetadataResponse
from replog.kafka.messages.offset_for_leader_epoch_request import (
    OffsetForLeaderEpochRequest,
    OffsetForLeaderPartition,
    OffsetForLeaderTopic,
)
from replog.kafka.messages.offset_for_leader_epoch_response import OffsetForLeaderEpochResponse
from replog.kafka.messages.produce_request import (
    PartitionProduceData,
    ProduceRequest,
    TopicProduceData,
)
from replog.kafka.messages.produce_response import ProduceResponse as KafkaProduceResponse
from replog.kafka.messages.request_header import RequestHeader
from replog.kafka.protocol.framing import decode_response, encode_request
from replog.record import build_batch
from replog.server.kafka.kafka_acl_apis import ACL_SERVED
from replog.server.kafka.kafka_admin_apis import ADMIN_SERVED
from replog.server.kafka.kafka_apis import SERVED
from replog.server.kafka.kafka_feature_apis import FEATURE_SERVED
from replog.server.kafka.kafka_group_apis import GROUP_SERVED
from replog.server.kafka.kafka_quorum_apis import QUORUM_SERVED
from replog.server.kafka.kafka_sasl_apis import SASL_SERVED
from replog.server.kafka.kafka_txn_apis import TXN_SERVED
from replog.server.kafka.kafka_txn_marker_apis import KafkaTxnMarkerApis
from tests.eventually import wait_until
from tests.kafka.kafka_node import RunningNode, running_node

API_VERSIONS = ApiVersionsRequest(
    client_software_name="replog-tests", client_software_version="1.0"
)


@pytest.fixture
def node(tmp_path: Path) -> Iterator[RunningNode]:
    with running_node(
        tmp_path, "kafka-listener-test", ["socket.request.max.bytes=1048576"]
    ) as running:
        yield running


def create_topic(node: RunningNode, name: str, partitions: int) -> None:
    with ControllerClient(f"127.0.0.1:{node.grpc_port}", default_timeout_s=30) as admin:
        (created,) = admin.create_topics([NewTopic(name, partitions, 1)])
        assert created.error is None, created


def wait_serving(node: RunningNode) -> None:
    def accepts() -> bool:
        assert node.process.poll() is None, node.log_text()
        try:
            api_versions(node, version=3, correlation_id=1)
        except OSError:
            return False
        return True

    wait_until(accepts, "the Kafka listener answers ApiVersions", timeout_s=60)


def raw(node: RunningNode) -> socket.socket:
    return socket.create_connection(("127.0.0.1", node.kafka_port), timeout=10)


def read_frame(sock: socket.socket) -> bytes:
    prefix = read_exactly(sock, 4)
    (size,) = struct.unpack(">i", prefix)
    return read_exactly(sock, size)


def read_exactly(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError(f"closed after {len(data)} of {n} bytes")
        data += chunk
    return data


def api_versions(node: RunningNode, *, version: int, correlation_id: int) -> ApiVersionsResponse:
    header = RequestHeader(
        request_api_key=18, request_api_version=version, correlation_id=correlation_id
    )
    with raw(node) as sock:
        sock.sendall(encode_request(header, API_VERSIONS))
        got_header, body = decode_response(read_frame(sock), 18, version)
    assert got_header.correlation_id == correlation_id
    assert isinstance(body, ApiVersionsResponse)
    return body


def closed_by_peer(sock: socket.socket) -> bool:
    """The broker closed the connection (EOF or reset) within the socket's timeout."""
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


def test_kafka_python_bootstraps_and_reads_metadata_through_the_listener(
    node: RunningNode,
) -> None:
    create_topic(node, "orders", 3)
    wait_serving(node)
    admin: Any = kafka.KafkaAdminClient(
        bootstrap_servers=node.kafka_address, request_timeout_ms=10_000
    )
    try:
        wait_until(lambda: "orders" in admin.list_topics(), "orders listed", timeout_s=30)
        (described,) = admin.describe_topics(["orders"])
        assert described["error_code"] == 0
        partitions = sorted(described["partitions"], key=lambda p: p["partition_index"])
        assert [p["partition_index"] for p in partitions] == [0, 1, 2]
        for partition in partitions:
            assert partition["leader_id"] == 1
            assert partition["replica_nodes"] == [1] and partition["isr_nodes"] == [1]
            assert partition["leader_epoch"] >= 0
        cluster = admin.describe_cluster()  # DescribeCluster v2 (it used Metadata before)
        assert cluster["cluster_id"] == "kafka-listener-test"
        assert [(b["broker_id"], b["host"], b["port"]) for b in cluster["brokers"]] == [
            (1, "127.0.0.1", node.kafka_port)
        ]
    finally:
        admin.close()
    consumer: Any = kafka.KafkaConsumer(bootstrap_servers=node.kafka_address)
    try:
        assert consumer.partitions_for_topic("orders") == {0, 1, 2}
        assert not consumer.partitions_for_topic("absent")  # unknown, and not created
    finally:
        consumer.close()


def test_kafka_python_produces_and_replogs_consumer_reads_the_records(node: RunningNode) -> None:
    create_topic(node, "events", 1)
    wait_serving(node)
    sent: list[bytes] = []
    for acks, idempotent in (("all", True), (1, False), (0, False)):
        producer: Any = kafka.KafkaProducer(
            bootstrap_servers=node.kafka_address, acks=acks, enable_idempotence=idempotent
        )
        try:
            for i in range(5):
                value = f"{acks}-{i}".encode()
                metadata = producer.send("events", key=b"k", value=value).get(timeout=30)
                assert metadata.topic == "events" and metadata.partition == 0
                if acks != 0:
                    assert metadata.offset == len(sent)
                sent.append(value)
            producer.flush(timeout=30)
        finally:
            producer.close(timeout=10)
    from replog import Consumer, TopicPartition

    consumer = Consumer(bootstrap_servers=node.kafka_address)
    try:
        partition = TopicPartition("events", 0)
        consumer.assign([partition])
        consumer.seek_to_beginning(partition)
        read: list[bytes | None] = []
        deadline = time.monotonic() + 30
        while len(read) < len(sent) and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                read += [r.value for r in records]
        assert read == sent
    finally:
        consumer.close()
    # ListOffsets through the listener: earliest, latest, by timestamp.
    kafka_consumer: Any = kafka.KafkaConsumer(bootstrap_servers=node.kafka_address)
    try:
        events = kafka.TopicPartition("events", 0)
        assert kafka_consumer.beginning_offsets([events]) == {events: 0}
        assert kafka_consumer.end_offsets([events]) == {events: len(sent)}
        (found,) = kafka_consumer.offsets_for_times({events: 0}).values()
        assert found.offset == 0
        assert kafka_consumer.offsets_for_times({events: 2**62}) == {events: None}
        # Fetch through the listener: every record, in order, once.
        kafka_consumer.assign([events])
        kafka_consumer.seek_to_beginning(events)
        fetched: list[bytes] = []
        deadline = time.monotonic() + 30
        while len(fetched) < len(sent) and time.monotonic() < deadline:
            for records in kafka_consumer.poll(timeout_ms=500).values():
                fetched += [r.value for r in records]
        assert fetched == sent
        assert kafka_consumer.poll(timeout_ms=200) == {}  # nothing twice
        kafka_consumer.seek(events, 7)
        (records,) = kafka_consumer.poll(timeout_ms=5000, max_records=3).values()
        assert [(r.offset, r.value) for r in records] == [(i, sent[i]) for i in (7, 8, 9)]
    finally:
        kafka_consumer.close()


def test_an_unknown_topic_is_unknown_and_not_created(node: RunningNode) -> None:
    wait_serving(node)
    header = RequestHeader(request_api_key=3, request_api_version=12, correlation_id=5)
    request = MetadataRequest(
        topics=[MetadataRequestTopic(name="nope")], allow_auto_topic_creation=True
    )
    for _ in range(2):
        with raw(node) as sock:
            sock.sendall(encode_request(header, request))
            _, body = decode_response(read_frame(sock), 3, 12)
        assert isinstance(body, MetadataResponse)
        (topic,) = body.topics
        assert (topic.name, topic.error_code, topic.partitions) == ("nope", 3, [])


def ask(node: RunningNode, body: Any, version: int) -> Any:
    """`body` at `version` on a connection of its own: the answer's body."""
    header = RequestHeader(
        request_api_key=body.API_KEY, request_api_version=version, correlation_id=11
    )
    with raw(node) as sock:
        sock.sendall(encode_request(header, body))
        _, answer = decode_response(read_frame(sock), body.API_KEY, version)
    return answer


def test_a_topic_id_with_an_empty_name_and_the_nodes_loggers_are_served(
    node: RunningNode,
) -> None:
    """What Kafka's Java tools send: Metadata by id with the name "" (`kafka-topics --describe
    --topic-id`), BROKER_LOGGER described and set (`kafka-configs --entity-type
    broker-loggers`), and a config resource type not served, answered rather than closing the
    connection."""
    create_topic(node, "orders", 1)
    wait_serving(node)
    (by_name,) = ask(node, MetadataRequest(topics=[MetadataRequestTopic(name="orders")]), 12).topics
    (by_id,) = ask(
        node, MetadataRequest(topics=[MetadataRequestTopic(name="", topic_id=by_name.topic_id)]), 12
    ).topics
    assert (by_id.name, by_id.topic_id, by_id.error_code) == ("orders", by_name.topic_id, 0)

    def loggers() -> dict[str, str]:
        (result,) = ask(
            node,
            DescribeConfigsRequest(
                resources=[DescribeConfigsResource(resource_type=8, resource_name="1")]
            ),
            4,
        ).results
        assert result.error_code == 0, result.error_message
        return {c.name: c.value for c in result.configs}

    assert loggers()["replog.server.kafka"] == "INFO"
    set_debug = AlterConfigsResource(
        resource_type=8,
        resource_name="1",
        configs=[AlterableConfig(name="replog.server.kafka", config_operation=0, value="DEBUG")],
    )
    unserved = AlterConfigsResource(resource_type=16, resource_name="metrics")
    answered = ask(node, IncrementalAlterConfigsRequest(resources=[set_debug, unserved]), 1)
    assert [(r.resource_type, r.error_code) for r in answered.responses] == [(8, 0), (16, 42)]
    assert loggers()["replog.server.kafka"] == "DEBUG"
    assert "Updated the log level of replog.server.kafka to DEBUG" in node.log_text()
    (alone,) = ask(node, IncrementalAlterConfigsRequest(resources=[unserved]), 1).responses
    assert alone.error_code == 42


def test_api_versions_above_the_served_range_is_answered_unsupported(node: RunningNode) -> None:
    wait_serving(node)
    served = api_versions(node, version=4, correlation_id=2)
    assert served.error_code == 0
    # Every handler table the broker wires: the core's, the admin, ACL, group, transaction,
    # transaction marker, quorum, SASL and feature ones.
    tables = {
        **SERVED,
        **ADMIN_SERVED,
        **ACL_SERVED,
        **GROUP_SERVED,
        **TXN_SERVED,
        **KafkaTxnMarkerApis.served,
        **QUORUM_SERVED,
        **SASL_SERVED,
        **FEATURE_SERVED,
    }
    assert {(k.api_key, k.min_version, k.max_version) for k in served.api_keys} == {
        (key, low, high) for key, (low, high) in tables.items()
    }
    assert (19, 2, 7) in {(k.api_key, k.min_version, k.max_version) for k in served.api_keys}
    # v5: the header is a flexible one; the answer is a v0 body under header v0.
    frame = struct.pack(">hhih", 18, 5, 9, -1) + b"\x00" + b"\x01\x01\x00"
    with raw(node) as sock:
        sock.sendall(struct.pack(">i", len(frame)) + frame)
        header, body = decode_response(read_frame(sock), 18, 0)
    assert header.correlation_id == 9
    assert isinstance(body, ApiVersionsResponse)
    assert body.error_code == 35
    assert [(k.api_key, k.min_version, k.max_version) for k in body.api_keys] == [(18, 0, 4)]


def test_bad_input_closes_only_its_own_connection_with_one_log_line(node: RunningNode) -> None:
    wait_serving(node)
    bystander = raw(node)  # open throughout: served before and after the others' garbage
    header = RequestHeader(request_api_key=18, request_api_version=3, correlation_id=40)
    bystander.sendall(encode_request(header, API_VERSIONS))
    read_frame(bystander)
    rng = random.Random(53)
    attacks = {
        "negative": struct.pack(">i", -5),
        "oversize": struct.pack(">i", 1048577),
        "unknown key": struct.pack(">ihhi", 8, 999, 0, 1),
        "garbage": struct.pack(">i", 64) + bytes(rng.randrange(256) for _ in range(64)),
        "unsupported version": struct.pack(">ihhih", 10, 3, 99, 2, -1),
        "truncated": struct.pack(">i", 100) + bytes(10),
    }
    peers = {}
    for what, payload in attacks.items():
        with raw(node) as sock:
            peers[what] = f"127.0.0.1:{sock.getsockname()[1]}"
            sock.sendall(payload)
            if what == "truncated":
                sock.shutdown(socket.SHUT_WR)  # the client goes away in the middle of a frame
            assert closed_by_peer(sock), what
    bystander.sendall(encode_request(header, API_VERSIONS))
    got, _ = decode_response(read_frame(bystander), 18, 3)
    assert got.correlation_id == 40
    bystander.close()
    assert api_versions(node, version=3, correlation_id=41).error_code == 0

    def logged() -> list[str]:
        return [
            line
            for line in node.log_text().splitlines()
            if "Kafka listener PLAINTEXT: closing connection from" in line
        ]

    wait_until(lambda: len(logged()) >= len(attacks), "a line per closed connection")
    time.sleep(0.2)  # a second line per connection would show up by now
    lines = logged()
    assert len(lines) == len(attacks), lines
    causes = {
        "negative": "invalid frame size -5 (negative)",
        "oversize": "frame size 1048577 is larger than socket.request.max.bytes (1048576)",
        "unknown key": "API key 999 (correlation id 1) is not served",
        "garbage": "",
        "unsupported version": "Metadata v99 (correlation id 2) is not served (versions 0-13)",
        "truncated": "closed in the middle of a frame (14 bytes of it read)",
    }
    for what, cause in causes.items():
        (line,) = [line for line in lines if f"from {peers[what]}: " in line]
        assert "WARNING" in line and cause in line, line
    assert node.process.poll() is None

    # Random bytes on many connections at once: each connection is answered or closed, and
    # the listener goes on serving.
    blasts = [raw(node) for _ in range(20)]
    for sock in blasts:
        sock.sendall(bytes(rng.randrange(256) for _ in range(rng.randrange(1, 400))))
        sock.shutdown(socket.SHUT_WR)
    for sock in blasts:
        with sock:
            deadline = time.monotonic() + 10
            while not closed_by_peer(sock):  # a random frame may be a request and answered
                assert time.monotonic() < deadline, "a connection sent random bytes stays open"
    assert api_versions(node, version=3, correlation_id=42).error_code == 0
    assert node.process.poll() is None


def test_a_failed_acks_0_produce_closes_the_connection(node: RunningNode) -> None:
    wait_serving(node)
    header = RequestHeader(request_api_key=0, request_api_version=9, correlation_id=12)
    request = ProduceRequest(
        acks=0,
        timeout_ms=1000,
        topic_data=[
            TopicProduceData(
                name="nope",
                partition_data=[
                    PartitionProduceData(index=0, records=build_batch([(0, b"k", b"v", ())]))
                ],
            )
        ],
    )
    with raw(node) as sock:
        sock.sendall(encode_request(header, request))
        assert closed_by_peer(sock)
        peer = f"127.0.0.1:{sock.getsockname()[1]}"

    def logged() -> list[str]:
        return [line for line in node.log_text().splitlines() if f"from {peer}: " in line]

    wait_until(logged, "the closed connection logged")
    (line,) = logged()
    assert "Produce v9 (correlation id 12) refused: " in line
    assert "acks=0 produce to nope-0 failed with UNKNOWN_TOPIC_OR_PARTITION" in line, line


def test_pipelined_produce_requests_are_appended_and_answered_in_the_order_sent(
    node: RunningNode,
) -> None:
    create_topic(node, "piped", 1)
    wait_serving(node)

    def produce_frame(i: int) -> bytes:
        header = RequestHeader(request_api_key=0, request_api_version=9, correlation_id=100 + i)
        records = build_batch([(0, b"k", str(i).encode(), ())])
        request = ProduceRequest(
            acks=1,
            timeout_ms=5000,
            topic_data=[
                TopicProduceData(
                    name="piped", partition_data=[PartitionProduceData(index=0, records=records)]
                )
            ],
        )
        return encode_request(header, request)

    def partition_answer(body: object) -> Any:
        assert isinstance(body, KafkaProduceResponse)
        (topic,) = body.responses
        (partition,) = topic.partition_responses
        return partition

    def first_appended() -> bool:  # once the broker leads the new partition
        with raw(node) as sock:
            sock.sendall(produce_frame(0))
            return bool(
                partition_answer(decode_response(read_frame(sock), 0, 9)[1]).error_code == 0
            )

    wait_until(first_appended, "the broker leads piped-0")
    with raw(node) as sock:
        sock.sendall(b"".join(produce_frame(i) for i in range(1, 30)))  # all before any answer
        answers = [decode_response(read_frame(sock), 0, 9) for _ in range(1, 30)]
    assert [header.correlation_id for header, _ in answers] == [100 + i for i in range(1, 30)]
    partitions = [partition_answer(body) for _, body in answers]
    assert [p.error_code for p in partitions] == [0] * 29
    assert [p.base_offset for p in partitions] == list(range(1, 30))
    # OffsetForLeaderEpoch: the current epoch ends at the log end.
    (described,) = metadata(node, "piped").topics
    (partition_metadata,) = described.partitions
    epoch = partition_metadata.leader_epoch
    header = RequestHeader(request_api_key=23, request_api_version=4, correlation_id=3)
    asked = OffsetForLeaderEpochRequest(
        replica_id=-1,
        topics=[
            OffsetForLeaderTopic(
                topic="piped",
                partitions=[
                    OffsetForLeaderPartition(
                        partition=0,
                        current_leader_epoch=epoch,
                        leader_epoch=epoch,
                    )
                ],
            )
        ],
    )
    with raw(node) as sock:
        sock.sendall(encode_request(header, asked))
        _, answer = decode_response(read_frame(sock), 23, 4)
    assert isinstance(answer, OffsetForLeaderEpochResponse)
    (result,) = answer.topics[0].partitions
    assert (result.error_code, result.leader_epoch, result.end_offset) == (0, epoch, 30)
    # ListOffsets' tiered-storage timestamps at the first version with each, and the newest:
    # as Kafka without tiered storage, the log start (-4) and no offset, no error (-5, -6).
    for timestamp, version, expected in [
        (-4, 8, (0, 0, epoch)),
        (-5, 9, (0, -1, -1)),
        (-6, 11, (0, -1, -1)),
        (-4, 11, (0, 0, epoch)),
        (-1, 11, (0, 30, epoch)),
    ]:
        assert list_offset(node, "piped", timestamp, version) == expected, (timestamp, version)


def list_offset(node: RunningNode, topic: str, timestamp: int, version: int) -> tuple[int, ...]:
    """(error code, offset, leader epoch) of partition 0 of `topic` at `timestamp`."""
    header = RequestHeader(request_api_key=2, request_api_version=version, correlation_id=4)
    request = ListOffsetsRequest(
        replica_id=-1,
        topics=[
            ListOffsetsTopic(
                name=topic,
                partitions=[ListOffsetsPartition(partition_index=0, timestamp=timestamp)],
            )
        ],
    )
    with raw(node) as sock:
        sock.sendall(encode_request(header, request))
        _, answer = decode_response(read_frame(sock), 2, version)
    assert isinstance(answer, ListOffsetsResponse)
    (partition,) = answer.topics[0].partitions
    return (partition.error_code, partition.offset, partition.leader_epoch)


def metadata(node: RunningNode, *topics: str) -> MetadataResponse:
    header = RequestHeader(request_api_key=3, request_api_version=12, correlation_id=8)
    request = MetadataRequest(topics=[MetadataRequestTopic(name=t) for t in topics])
    with raw(node) as sock:
        sock.sendall(encode_request(header, request))
        _, body = decode_response(read_frame(sock), 3, 12)
    assert isinstance(body, MetadataResponse)
    return body
