"""`replog.testing`, the test doubles shipped for users' tests and the project's own: the
manual clock, the fake broker, and a real local cluster for the length of a `with` block."""

from __future__ import annotations

from pathlib import Path

import grpc
import pytest

from replog import Admin, Consumer, NewTopic, Producer, TopicPartition
from replog.cli.local_cluster import METRICS_PORT_OFFSET
from replog.pb import broker_pb2
from replog.testing import (
    GARBAGE,
    ManualClock,
    local_cluster,
    running_fake_broker,
)
from replog.testing import (
    METRICS_PORT_OFFSET as TESTING_METRICS_OFFSET,
)


def test_a_manual_clock_moves_only_when_told_or_by_its_tick() -> None:
    clock = ManualClock(1_000)
    assert clock() == clock() == 1_000
    assert clock.advance(250) == 1_250 and clock() == 1_250
    with pytest.raises(ValueError, match="does not go back"):
        clock.advance(-1)
    ticking = ManualClock(0, tick_ms=7)
    assert [ticking(), ticking()] == [7, 14]


def test_the_fake_broker_answers_what_the_test_scripts() -> None:
    with running_fake_broker() as broker:
        broker.answer("InitProducerId", broker_pb2.InitProducerIdResponse(producer_id=42), GARBAGE)
        with grpc.insecure_channel(broker.address) as channel:
            call = channel.unary_unary("/replog.pb.broker.Broker/InitProducerId")
            first = call(b"")
            assert broker_pb2.InitProducerIdResponse.FromString(first).producer_id == 42
            assert call(b"") == GARBAGE
            with pytest.raises(grpc.RpcError) as refused:
                channel.unary_unary("/replog.pb.broker.Broker/Metadata")(b"")
            assert refused.value.code() is grpc.StatusCode.UNIMPLEMENTED
        assert broker.calls["InitProducerId"] == 2


def test_a_local_cluster_serves_clients_for_the_block_and_stops_after_it(tmp_path: Path) -> None:
    assert TESTING_METRICS_OFFSET == METRICS_PORT_OFFSET  # the layout `replog cluster` writes
    with local_cluster(tmp_path / "cluster") as servers:
        with Admin(bootstrap_servers=servers) as admin:
            admin.create_topics([NewTopic("events", 1, 1)])
        with Producer(bootstrap_servers=servers) as producer:
            producer.send("events", b"hello").get(timeout=30)
        with Consumer(bootstrap_servers=servers, auto_offset_reset="earliest") as consumer:
            consumer.assign([TopicPartition("events", 0)])
            records = consumer.poll(10_000).get(TopicPartition("events", 0), [])
            assert [r.value for r in records] == [b"hello"]
    with grpc.insecure_channel(servers) as channel, pytest.raises(grpc.FutureTimeoutError):
        grpc.channel_ready_future(channel).result(timeout=1)  # stopped with the block
