"""Capture the request frames kafka-python's real clients send, for tests/kafka/captured/.

Usage: python tests/kafka/capture_kafka_python.py   (rewrites captured/kafka-python.txt)

A throw-away single-node broker on a loopback port answers with replog's generated codecs just
enough for kafka-python's producer (idempotent, acks=all), consumer (group, commit) and admin
client to send their usual requests; every request frame is recorded as one hex line with its
API name and version. The test test_kafka_captured.py decodes them; this script is run by hand
when a client version changes (not by the test suite: it needs a few seconds of real sockets).
"""

from __future__ import annotations

import importlib.metadata
import socket
import socketserver
import sys
import threading
from pathlib import Path
from typing import Any

from replog.kafka.messages import REQUESTS, RESPONSES
from replog.kafka.protocol import framing

OUT = Path(__file__).resolve().parent / "captured" / "kafka-python.txt"
TOPIC = "orders"
NODE = 0


def struct_class(message_cls: type, name: str) -> Any:
    return getattr(sys.modules[message_cls.__module__], name)


class FakeBroker(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.frames: list[tuple[str, int, bytes]] = []
        self.lock = threading.Lock()
        self.assignment = b""


class Handler(socketserver.BaseRequestHandler):
    server: FakeBroker

    def handle(self) -> None:
        sock: socket.socket = self.request
        while True:
            prefix = recv_exact(sock, 4)
            if prefix is None:
                return
            frame = recv_exact(sock, framing.frame_size(prefix))
            if frame is None:
                return
            header, body = framing.decode_request(frame)
            key, version = header.request_api_key, header.request_api_version
            with self.server.lock:
                self.server.frames.append((type(body).NAME, version, prefix + frame))
            if key == 0 and body.acks == 0:  # type: ignore[attr-defined]
                continue
            response = answer(self.server, key, version, body)
            sock.sendall(framing.encode_response(key, version, header.correlation_id, response))


def recv_exact(sock: socket.socket, n: int) -> bytes | None:
    data = bytearray()
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            return None
        data += chunk
    return bytes(data)


def answer(server: FakeBroker, key: int, version: int, body: Any) -> Any:
    cls = RESPONSES[key]
    host, port = server.server_address[:2]
    if key == 18:  # ApiVersions
        entry = struct_class(cls, "ApiVersion")
        return cls(
            api_keys=[
                entry(api_key=k, min_version=r.MIN_VERSION, max_version=r.MAX_VERSION)
                for k, r in sorted(REQUESTS.items())
            ]
        )
    if key == 3:  # Metadata: one node leading one partition of one topic
        broker = struct_class(cls, "MetadataResponseBroker")
        topic = struct_class(cls, "MetadataResponseTopic")
        partition = struct_class(cls, "MetadataResponsePartition")
        return cls(
            brokers=[broker(node_id=NODE, host=host, port=port)],
            cluster_id="capture",
            controller_id=NODE,
            topics=[
                topic(
                    name=TOPIC,
                    partitions=[
                        partition(
                            partition_index=0,
                            leader_id=NODE,
                            replica_nodes=[NODE],
                            isr_nodes=[NODE],
                        )
                    ],
                )
            ],
        )
    if key == 22:  # InitProducerId
        return cls(producer_id=4000, producer_epoch=0)
    if key == 10:  # FindCoordinator
        if version >= 4:
            coordinator = struct_class(cls, "Coordinator")
            return cls(
                coordinators=[
                    coordinator(key=k, node_id=NODE, host=host, port=port)
                    for k in body.coordinator_keys
                ]
            )
        return cls(node_id=NODE, host=host, port=port)
    if key == 0:  # Produce
        topic = struct_class(cls, "TopicProduceResponse")
        partition = struct_class(cls, "PartitionProduceResponse")
        return cls(
            responses=[
                topic(
                    name=t.name,
                    partition_responses=[
                        partition(index=p.index, base_offset=0) for p in t.partition_data
                    ],
                )
                for t in body.topic_data
            ]
        )
    if key == 2:  # ListOffsets
        topic = struct_class(cls, "ListOffsetsTopicResponse")
        partition = struct_class(cls, "ListOffsetsPartitionResponse")
        return cls(
            topics=[
                topic(
                    name=t.name,
                    partitions=[
                        partition(partition_index=p.partition_index, offset=0, timestamp=-1)
                        for p in t.partitions
                    ],
                )
                for t in body.topics
            ]
        )
    if key == 1:  # Fetch: nothing new
        topic = struct_class(cls, "FetchableTopicResponse")
        partition = struct_class(cls, "PartitionData")
        return cls(
            responses=[
                topic(
                    topic=t.topic,
                    topic_id=t.topic_id,
                    partitions=[
                        partition(
                            partition_index=p.partition,
                            high_watermark=0,
                            last_stable_offset=0,
                            log_start_offset=0,
                            records=b"",
                        )
                        for p in t.partitions
                    ],
                )
                for t in body.topics
            ]
        )
    if key == 11:  # JoinGroup: the only member leads
        member_id = body.member_id or "member-1"
        member = struct_class(cls, "JoinGroupResponseMember")
        protocol = body.protocols[0]
        return cls(
            generation_id=1,
            protocol_type=body.protocol_type,
            protocol_name=protocol.name,
            leader=member_id,
            member_id=member_id,
            members=[member(member_id=member_id, metadata=protocol.metadata)],
        )
    if key == 14:  # SyncGroup: the leader's own assignment back
        server.assignment = next(
            (a.assignment for a in body.assignments if a.member_id == body.member_id), b""
        )
        return cls(
            protocol_type=body.protocol_type,
            protocol_name=body.protocol_name,
            assignment=server.assignment,
        )
    if key == 9:  # OffsetFetch: nothing committed
        return offset_fetch_answer(cls, body, version)
    return cls()  # everything else: an empty, error-free answer


def offset_fetch_answer(cls: Any, body: Any, version: int) -> Any:
    if version >= 8:
        group = struct_class(cls, "OffsetFetchResponseGroup")
        topic = struct_class(cls, "OffsetFetchResponseTopics")
        partition = struct_class(cls, "OffsetFetchResponsePartitions")
        return cls(
            groups=[
                group(
                    group_id=g.group_id,
                    topics=[
                        topic(
                            name=t.name,
                            partitions=[
                                partition(partition_index=i, committed_offset=-1)
                                for i in t.partition_indexes
                            ],
                        )
                        for t in (g.topics or [])
                    ],
                )
                for g in body.groups
            ]
        )
    topic = struct_class(cls, "OffsetFetchResponseTopic")
    partition = struct_class(cls, "OffsetFetchResponsePartition")
    return cls(
        topics=[
            topic(
                name=t.name,
                partitions=[
                    partition(partition_index=i, committed_offset=-1) for i in t.partition_indexes
                ],
            )
            for t in (body.topics or [])
        ]
    )


def drive_clients(bootstrap: str, api_version: tuple[int, ...] | None) -> None:
    """One producer, one group consumer and the admin calls; `api_version` caps the versions
    as kafka-python does for an older broker (older, non-flexible requests)."""
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
    from kafka.admin import ConfigResource, ConfigResourceType, NewPartitions, NewTopic
    from kafka.structs import OffsetAndMetadata, TopicPartition

    producer = KafkaProducer(
        bootstrap_servers=bootstrap, acks="all", linger_ms=0, api_version=api_version
    )
    producer.send(TOPIC, key=b"k", value=b"v" * 100).get(timeout=10)
    producer.close(timeout=5)

    consumer = KafkaConsumer(
        TOPIC,
        bootstrap_servers=bootstrap,
        group_id="capture-group",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        consumer_timeout_ms=1500,
        api_version=api_version,
    )
    for _ in consumer:
        pass
    consumer.commit({TopicPartition(TOPIC, 0): OffsetAndMetadata(0, "", -1)})
    consumer.close()

    if api_version is not None:
        return
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=3000)
    for call in (
        lambda: admin.create_topics([NewTopic("t2", 1, 1)]),
        lambda: admin.create_partitions({"t2": NewPartitions(2)}),
        lambda: admin.describe_cluster(),
        lambda: admin.list_groups(),
        lambda: admin.describe_groups(["capture-group"]),
        lambda: admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, TOPIC)]),
        lambda: admin.alter_configs(
            [ConfigResource(ConfigResourceType.TOPIC, TOPIC, configs={"retention.ms": "1000"})]
        ),
        lambda: admin.describe_log_dirs(),
        lambda: admin.delete_records({TopicPartition(TOPIC, 0): 0}),
        lambda: admin.describe_producers([TopicPartition(TOPIC, 0)]),
        lambda: admin.list_partition_reassignments(),
        lambda: admin.elect_leaders(0, [TopicPartition(TOPIC, 0)]),
        lambda: admin.delete_groups(["capture-group"]),
        lambda: admin.delete_topics(["t2"]),
    ):
        try:
            call()
        except Exception as exc:
            print(f"admin call ended with {type(exc).__name__}: {exc}", file=sys.stderr)
    admin.close()


def main() -> int:
    server = FakeBroker()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    host, port = str(server.server_address[0]), int(server.server_address[1])
    try:
        for broker_version in (None, (2, 0, 0), (1, 0, 0)):
            drive_clients(f"{host}:{port}", broker_version)
    finally:
        server.shutdown()
    client_version = importlib.metadata.version("kafka-python")
    OUT.parent.mkdir(exist_ok=True)
    seen: set[tuple[str, int]] = set()
    lines = [f"# request frames kafka-python {client_version} sent (capture_kafka_python.py)"]
    for name, api_version, frame in server.frames:
        if (name, api_version) in seen:
            continue
        seen.add((name, api_version))
        lines.append(f"{name} v{api_version} {frame.hex()}")
    OUT.write_text("\n".join(lines) + "\n")
    print(f"wrote {len(lines) - 1} frames to {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
