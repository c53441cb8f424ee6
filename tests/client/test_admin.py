"""The Admin clients without a cluster: bad configs fail at construction, a dead or hung
cluster fails within the call's timeout naming the address, Ctrl-C interrupts a blocked call,
close is final; and the package exports load lazily."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

import replog
import replog.aio
from replog.client import admin as aio_admin
from replog.client import sync_admin
from replog.client.records import TopicPartition
from replog.errors import (
    ClientClosedError,
    ConfigError,
    IllegalStateError,
    InvalidRequestError,
    KafkaTimeoutError,
    NoBrokersAvailableError,
    ReplogError,
)


def dead_address() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{sock.getsockname()[1]}"


@pytest.fixture
def hung_address() -> Iterator[str]:
    """A port that takes connections into its backlog but never speaks: calls hang there."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(16)
        yield f"127.0.0.1:{sock.getsockname()[1]}"


def test_a_bad_config_fails_at_construction_naming_the_key() -> None:
    with pytest.raises(ConfigError, match=r"no\.such\.setting"):
        replog.Admin({"bootstrap.servers": "127.0.0.1:1", "no.such.setting": 1})
    with pytest.raises(ConfigError, match="request_timeout_ms"):
        replog.aio.Admin(bootstrap_servers="127.0.0.1:1", request_timeout_ms="soon")


def test_a_dead_cluster_fails_within_the_timeout_naming_the_address() -> None:
    address = dead_address()
    with replog.Admin(bootstrap_servers=address) as admin:
        started = time.monotonic()
        with pytest.raises(KafkaTimeoutError, match=address):
            admin.describe_cluster(timeout_ms=800)
        assert time.monotonic() - started < 3
        started = time.monotonic()
        with pytest.raises(KafkaTimeoutError) as raised:
            admin.list_offsets({TopicPartition("t", 0): -1}, timeout_ms=800)
        assert time.monotonic() - started < 3
        assert address in str(raised.value) and "connection refused" in str(raised.value)
        with pytest.raises(NoBrokersAvailableError, match=address):
            admin.describe_quorum(timeout_ms=800)


def test_a_hung_cluster_fails_within_the_timeout(hung_address: str) -> None:
    with replog.Admin(bootstrap_servers=hung_address, request_timeout_ms=30_000) as admin:
        started = time.monotonic()
        with pytest.raises(ReplogError):
            admin.list_topics(timeout_ms=700)
        assert time.monotonic() - started < 3


def test_ctrl_c_interrupts_a_blocked_call(hung_address: str) -> None:
    assert threading.current_thread() is threading.main_thread()
    main = threading.main_thread().ident
    assert main is not None
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    timer = threading.Timer(0.3, signal.pthread_kill, (main, signal.SIGINT))
    try:
        with replog.Admin(bootstrap_servers=hung_address) as admin:
            started = time.monotonic()
            timer.start()
            with pytest.raises(KeyboardInterrupt):
                admin.describe_cluster(timeout_ms=30_000)
            assert time.monotonic() - started < 2
    finally:
        # Joined before the handler is restored: a timer firing after that would interrupt
        # whatever this process runs next (the rest of the session).
        timer.cancel()
        timer.join()
        signal.signal(signal.SIGINT, previous)


@pytest.mark.asyncio
async def test_the_asyncio_admin_refuses_calls_after_close() -> None:
    admin = replog.aio.Admin(bootstrap_servers=dead_address())
    await admin.close()
    await admin.close()
    with pytest.raises(ClientClosedError):
        await admin.list_topics()
    with pytest.raises(ClientClosedError):
        await admin.delete_records({TopicPartition("t", 0): 1})


def test_the_blocking_admin_refuses_calls_after_close() -> None:
    admin = replog.Admin(bootstrap_servers=dead_address())
    admin.close()
    admin.close()
    with pytest.raises(ClientClosedError):
        admin.describe_cluster()


def test_exports_are_the_client_classes() -> None:
    assert replog.Admin is sync_admin.Admin
    assert replog.aio.Admin is aio_admin.Admin
    assert replog.TopicPartition is TopicPartition
    assert replog.errors.KafkaTimeoutError is KafkaTimeoutError
    assert {"Producer", "Consumer", "Admin", "TopicPartition"} <= set(replog.__all__)
    assert {"Producer", "Consumer", "Admin", "TopicPartition"} <= set(replog.aio.__all__)
    # kafka-python exports it too.
    assert replog.ConfigResourceType is replog.aio.ConfigResourceType
    assert "ConfigResourceType" in replog.__all__ and "ConfigResourceType" in replog.aio.__all__
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        _ = replog.Nope


def test_importing_replog_loads_no_client_code() -> None:
    code = (
        "import sys, replog, replog.aio; "
        "loaded = [m for m in sys.modules if m.startswith(('grpc', 'replog.client'))]; "
        "print(loaded); assert not loaded"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_under_replicated_leaves_out_the_replicas_a_reassignment_is_adding() -> None:
    from replog.client.admin_results import PartitionDescription

    def described(isr: tuple[int, ...], adding: tuple[int, ...]) -> PartitionDescription:
        # 1,2 -> 2,3: replicas 2,3,1 while 3 catches up (Kafka's order), 1 being removed.
        return PartitionDescription(0, 2, 1, (2, 3, 1), isr, (), adding, (1,) if adding else ())

    # As `topics describe --under-replicated-partitions` and the leader's gauge count it.
    assert not described(isr=(1, 2), adding=(3,)).under_replicated
    assert described(isr=(2,), adding=(3,)).under_replicated
    assert described(isr=(1, 2), adding=()).under_replicated  # no reassignment: 3 is behind


@pytest.mark.asyncio
async def test_delete_records_each_asks_every_partition_at_once_and_keeps_each_outcome(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # As Kafka's Admin gives one future per partition: one partition's error does not cost
    # the others their answer, and the timeout bounds them together, not one after another.
    import asyncio

    from replog.errors import UnknownTopicOrPartitionError

    asking = [0, 0]  # partitions being asked now, the most at once

    async def one_partition(
        self: Any, before: Any, *, timeout_ms: int | None = None
    ) -> dict[TopicPartition, int]:
        ((tp, offset),) = before.items()
        asking[0] += 1
        asking[1] = max(asking)
        await asyncio.sleep(0.3)
        asking[0] -= 1
        if tp.partition == 1:
            raise UnknownTopicOrPartitionError("t-1 is not there")
        return {tp: offset}

    monkeypatch.setattr(aio_admin.Admin, "delete_records", one_partition)
    admin = replog.aio.Admin(bootstrap_servers="127.0.0.1:1")
    try:
        wanted = {TopicPartition("t", p): 5 + p for p in range(3)}
        found: dict[TopicPartition, int | ReplogError] = await admin.delete_records_each(
            wanted, timeout_ms=1_000
        )
        # Together, not one after another: counted, as a loaded machine's wall time says little.
        assert asking == [0, 3]
        assert found[TopicPartition("t", 0)] == 5 and found[TopicPartition("t", 2)] == 7
        assert isinstance(found[TopicPartition("t", 1)], UnknownTopicOrPartitionError)
    finally:
        await admin.close()


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda a: a.create_topics(["orders"]), r"expected NewTopic entries, got str \('orders'\)"),
        (
            lambda a: a.create_topics([replog.NewTopic("x", "3", 1)]),
            r"topic 'x': num_partitions must be an int, not str \('3'\)",
        ),
        (lambda a: a.create_topics(replog.NewTopic("x", 1, 1)), "expected a list of NewTopic"),
        (lambda a: a.delete_topics(None), r"expected a list of topic names, got NoneType"),
        (lambda a: a.delete_topics([7]), r"a topic name must be a str, not int \(7\)"),
    ],
    ids=["str-entry", "str-count", "one-topic", "none", "int-name"],
)
def test_wrong_argument_types_are_invalid_requests_naming_them(call: Any, message: str) -> None:
    # Typed errors at the call, not failures deep inside (AttributeError: 'str' object has no
    # attribute 'to_pb', TypeError from protobuf or from iterating None).
    with (
        replog.Admin(bootstrap_servers=dead_address(), default_api_timeout_ms=500) as admin,
        pytest.raises(InvalidRequestError, match=message),
    ):
        call(admin)


def test_new_topic_config_values_are_sent_as_text() -> None:
    # As incremental_alter_configs takes them: {"retention.ms": 1000} failed in protobuf.
    topic = aio_admin._new_topic(replog.NewTopic("x", 1, 1, configs={"retention.ms": 1000}))
    assert topic.configs == {"retention.ms": "1000"}


def test_a_timeout_that_is_no_number_is_a_value_error() -> None:
    # list_topics(timeout_ms="5") is a clear error, not a TypeError from comparing.
    with (
        replog.Admin(bootstrap_servers=dead_address()) as admin,
        pytest.raises(
            InvalidRequestError, match="timeout_ms must be a number >= 0 or None, got '5'"
        ),
    ):
        admin.list_topics(timeout_ms="5")  # type: ignore[arg-type]


def test_an_asyncio_admin_is_bound_to_the_event_loop_it_was_first_used_on() -> None:
    # Its gRPC channels belong to the loop of its first call: a call from another loop is
    # refused clearly instead of failing deep inside asyncio.
    import asyncio

    admin = replog.aio.Admin(bootstrap_servers=dead_address())
    with pytest.raises(ReplogError):  # nothing listens there, but the loop is bound
        asyncio.run(admin.describe_cluster(timeout_ms=300))

    async def elsewhere() -> None:
        with pytest.raises(IllegalStateError, match="asyncio Admin runs on the event loop"):
            await admin.describe_cluster(timeout_ms=300)

    asyncio.run(elsewhere())
    asyncio.run(admin.close())  # its loop ended: close just ends
    with pytest.raises(ClientClosedError):
        asyncio.run(admin.describe_cluster())


def test_a_config_resource_takes_kafka_pythons_spellings_and_names_what_it_refuses() -> None:
    topic = replog.ConfigResource(replog.ConfigResourceType.TOPIC, "orders")
    # kafka-python's ConfigResource takes the type's name; the wire code and an int broker id
    # are as plain. Each equals the canonical resource, so results are found under either.
    assert replog.ConfigResource("TOPIC", "orders") == topic
    assert replog.ConfigResource("topic", "orders").resource_type is replog.ConfigResourceType.TOPIC
    assert replog.ConfigResource(2, "orders") == topic
    assert replog.ConfigResource("BROKER", 1) == replog.ConfigResource.broker(1)
    assert {topic: "found"}[replog.ConfigResource("TOPIC", "orders")] == "found"
    assert replog.ConfigResource("GROUP", "g") == replog.ConfigResource.group("g")
    assert replog.ConfigResource(32, "g").resource_type is replog.ConfigResourceType.GROUP
    with pytest.raises(InvalidRequestError, match=r"unknown resource type 'USER'.*TOPIC \(2\)"):
        replog.ConfigResource("USER", "u")
    with pytest.raises(InvalidRequestError, match="unknown resource type 3"):
        replog.ConfigResource(3, "x")
    with pytest.raises(InvalidRequestError, match=r"topic's name must be a str, not int \(5\)"):
        replog.ConfigResource("TOPIC", 5)
