"""A producer retrying a retriable error says so (issue #52 item 4): acks=all with too few
in-sync replicas used to retry for delivery.timeout.ms (120 s) with nothing printed. Now the
cause is logged at WARNING once per partition and cause while it lasts (Kafka's "Got error
produce response ... on topic-partition ..., retrying ... Error: NOT_ENOUGH_REPLICAS"), again
after the partition delivered and the error came back, and `replog produce` prints it.
Records that wait for a leader (none elected) are warned about too, once."""

from __future__ import annotations

import contextlib
import io
import logging
import sys
from unittest import mock

import pytest
from producer_fakes import FakeCluster
from test_producer import Made, cluster, make, until  # noqa: F401 - fixtures

from replog.cli.main import main
from replog.client import sender
from replog.errors import NotEnoughReplicasError


def retry_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.levelno == logging.WARNING and "retrying" in r.getMessage()
    ]


def not_enough(name: str) -> NotEnoughReplicasError:
    return NotEnoughReplicasError(f"{name}: the ISR [1] has 1 replicas, fewer than 2")


@pytest.mark.asyncio
async def test_a_retried_cause_is_warned_about_once_per_partition_and_spell(
    cluster: FakeCluster,  # noqa: F811
    make: Made,  # noqa: F811
    caplog: pytest.LogCaptureFixture,
) -> None:
    producer = make()
    caplog.set_level(logging.DEBUG, logger="replog.client")
    cluster.refuse("t", 0, not_enough("t-0"), times=4)
    cluster.refuse("t", 1, not_enough("t-1"), times=3)
    first = producer.send_nowait("t", b"a", partition=0)
    second = producer.send_nowait("t", b"b", partition=1)
    assert (await first).offset == 0 and (await second).offset == 0
    warnings = retry_warnings(caplog)
    assert len(warnings) == 2, warnings
    for partition, warning in zip((0, 1), sorted(warnings), strict=True):
        assert f"Got error produce response on topic-partition t-{partition}, retrying" in warning
        assert "Error: NOT_ENOUGH_REPLICAS: " in warning and "fewer than 2" in warning
    # The partition delivered: the next spell of the same error is said again.
    caplog.clear()
    cluster.refuse("t", 0, not_enough("t-0"), times=2)
    assert (await producer.send("t", b"c", partition=0)).offset == 1
    assert len(retry_warnings(caplog)) == 1


@pytest.mark.asyncio
async def test_records_waiting_for_a_leader_are_warned_about_once(
    cluster: FakeCluster,  # noqa: F811
    make: Made,  # noqa: F811
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(sender, "NO_LEADER_WARN_MS", 100)
    caplog.set_level(logging.WARNING, logger="replog.client")
    cluster.log("one").leader = -1  # the metadata names no leader (all replicas down)
    producer = make(delivery_timeout_ms=10_000)
    future = producer.send_nowait("one", b"v")

    def warnings() -> list[str]:
        return [r.getMessage() for r in caplog.records if "no leader" in r.getMessage()]

    await until(lambda: bool(warnings()))
    asked = cluster.metadata_calls
    await until(lambda: cluster.metadata_calls >= asked + 3)  # more passes: still one warning
    (warning,) = warnings()
    assert warning.startswith("Partition one-0 has had no leader for ")
    assert "delivery.timeout.ms=10000 ms" in warning
    cluster.log("one").leader = 0
    assert (await future).offset == 0


def test_replog_produce_prints_the_retried_cause(
    cluster: FakeCluster,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The command sets up logging to stderr as it does for a user (pytest's own handlers
    # would otherwise keep `logging.basicConfig` from doing anything).
    monkeypatch.setattr(logging.root, "handlers", [])
    cluster.refuse("one", 0, not_enough("one-0"), times=3)
    stderr = io.StringIO()
    stdin = io.TextIOWrapper(io.BytesIO(b"v\n"))
    try:
        with mock.patch.object(sys, "stdin", stdin), contextlib.redirect_stderr(stderr):
            code = main(["produce", "--topic", "one", "--bootstrap-server", cluster.bootstrap])
    finally:
        for handler in logging.root.handlers:
            handler.close()
    assert code == 0, stderr.getvalue()
    (line,) = [line for line in stderr.getvalue().splitlines() if "retrying" in line]
    assert "WARNING replog.client: Got error produce response on topic-partition one-0" in line
    assert "NOT_ENOUGH_REPLICAS" in line
    assert cluster.log("one").values() == [b"v"]
