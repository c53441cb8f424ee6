"""A controller failover, timed: kill -9 of the active controller, then a CreateTopics of a new
1-partition topic sent to the survivors every `RETRY_S` until one is answered without error:
the seconds from the kill to that answer. `replog bench`'s controller run and
bench/controller.py both time failovers with it.

- `over_grpc`: replog's Controller service, each survivor asked in turn over connections
  opened before the kill (so the clock measures the cluster, not connecting); the answer also
  says when a survivor first names the new controller.
- `over_kafka`: Kafka's protocol (confluent-kafka's AdminClient, bootstrapped with the
  survivors, a new one per attempt): Apache Kafka, or replog's Kafka listener.

Rules: the probe topic has replication factor 1, since from the broker session's timeout after
the kill until the node is back only two brokers are active, and a replication factor 3 create
would then be refused for lack of brokers, not of a controller. An answer "topic already exists"
counts: an earlier attempt timed out here but did commit. No answer within `timeout_s` is a
`BenchSystemError`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from replog.errors import BenchSystemError

RETRY_S = 0.01
ATTEMPT_TIMEOUT_S = 1.0
CONTROLLER_TIMEOUT_MS = 900  # the controller answers within an attempt's deadline
TOPIC_ALREADY_EXISTS = 36  # Kafka's error code, which replog's Controller service answers too


@dataclass(frozen=True, slots=True)
class Failover:
    seconds: float  # kill -9 -> the first CreateTopics answered without error
    new_controller: int  # the survivor that answered it (-1: not known)
    known_s: float | None = None  # kill -9 -> a survivor first named the new controller


def over_grpc(
    addresses: dict[int, str],
    killed: int,
    kill: Callable[[], None],
    topic: str,
    timeout_s: float = 120.0,
) -> Failover:
    """`kill()` the active controller `killed`; time a CreateTopics of `topic` through the
    other nodes of `addresses` (node id -> gRPC address)."""
    import grpc

    from replog.pb import controller_pb2 as cpb
    from replog.pb import controller_pb2_grpc
    from replog.wire.link_security import blocking_grpc_channel

    survivors = {i: a for i, a in addresses.items() if i != killed}
    # Mutual TLS when the caller installed the cluster's (`LocalCluster.internal_tls`).
    channels = {
        i: blocking_grpc_channel(a, options=[("grpc.use_local_subchannel_pool", 1)])
        for i, a in survivors.items()
    }
    stubs = {i: controller_pb2_grpc.ControllerStub(c) for i, c in channels.items()}  # type: ignore[no-untyped-call]
    request = cpb.CreateTopicsRequest(
        topics=[cpb.CreatableTopic(name=topic, num_partitions=1, replication_factor=1)],
        timeout_ms=CONTROLLER_TIMEOUT_MS,
    )
    known_s: float | None = None
    try:
        for channel in channels.values():
            grpc.channel_ready_future(channel).result(timeout=10)
        killed_at = time.perf_counter()
        kill()
        while time.perf_counter() - killed_at < timeout_s:
            for node_id, stub in stubs.items():
                try:
                    answer = stub.CreateTopics(request, timeout=ATTEMPT_TIMEOUT_S)
                except grpc.RpcError:
                    continue
                now = time.perf_counter() - killed_at
                if answer.controller_id not in (-1, killed) and known_s is None:
                    known_s = now
                codes = {answer.error.code, *(t.error.code for t in answer.topics)}
                if codes <= {0, TOPIC_ALREADY_EXISTS} and answer.topics:
                    return Failover(now, node_id, known_s)
            time.sleep(RETRY_S)
    finally:
        for channel in channels.values():
            channel.close()
    raise BenchSystemError(f"no CreateTopics answered within {timeout_s:g} s of the kill")


def over_kafka(
    bootstrap_servers: str, kill: Callable[[], None], topic: str, timeout_s: float = 120.0
) -> Failover:
    """`kill()` the active controller; time a CreateTopics of `topic` through the survivors'
    Kafka listeners (`bootstrap_servers`: theirs only)."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient
    from confluent_kafka.cimpl import NewTopic  # where its type stubs declare it

    # Each client is destroyed at the end of its `with`, not left to be freed: a failed
    # attempt's exception, kept by its future, holds this frame in a reference cycle, and a
    # client only the garbage collector frees goes on reconnecting to the cluster after it stops.
    with AdminClient({"bootstrap.servers": bootstrap_servers}) as admin:
        admin.list_topics(timeout=10)
    killed_at = time.perf_counter()
    kill()
    while time.perf_counter() - killed_at < timeout_s:
        # A client of its own per attempt: librdkafka keeps sending admin requests to the
        # controller its last Metadata named until its next refresh, and Kafka's brokers may
        # name the killed node (a random broker still unfenced).
        with AdminClient({"bootstrap.servers": bootstrap_servers}) as admin:
            futures = admin.create_topics(
                [NewTopic(topic, 1, 1)],
                request_timeout=ATTEMPT_TIMEOUT_S,
                operation_timeout=ATTEMPT_TIMEOUT_S,
            )
            try:
                futures[topic].result(timeout=2 * ATTEMPT_TIMEOUT_S)
            except KafkaException as exc:
                code = getattr(exc.args[0], "code", lambda: None)() if exc.args else None
                if code == TOPIC_ALREADY_EXISTS:
                    return Failover(time.perf_counter() - killed_at, -1)
            except Exception:
                pass  # a timeout, or no controller yet: try again
            else:
                return Failover(time.perf_counter() - killed_at, -1)
        time.sleep(RETRY_S)
    raise BenchSystemError(f"no CreateTopics answered within {timeout_s:g} s of the kill")
