"""A producer wait that lasts says what it waits for while it lasts (`replog.client.wait_notice`):
records whose leader is down or not elected (the quorum lost) are retried for
delivery.timeout.ms (2 min), and a bootstrap address that never answers for max.block.ms: a
WARNING comes after a few seconds and then at intervals, naming the partition or topic, the
cause and the time the retries end. The intervals are shortened here (5 s and 10 s in use)."""

from __future__ import annotations

import contextlib
import io
import logging
import re
import socket
import sys
from collections.abc import Iterator
from unittest import mock

import pytest
from producer_fakes import FakeCluster
from test_producer import Made, cluster, make, until  # noqa: F401 - fixtures

from replog.aio import Producer as AsyncProducer
from replog.cli.main import main
from replog.client import cluster_metadata, wait_notice
from replog.errors import (
    KafkaTimeoutError,
    NetworkError,
    NotEnoughReplicasError,
    ReplogError,
    RequestTimedOutError,
)

UNTIL = re.compile(r"retrying until \d\d:\d\d:\d\d ")


@pytest.fixture(autouse=True)
def short_notices(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(wait_notice, "FIRST_NOTICE_MS", 100)
    monkeypatch.setattr(wait_notice, "NOTICE_EVERY_MS", 150)


def notices(caplog: pytest.LogCaptureFixture, marker: str) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.levelno == logging.WARNING and marker in r.getMessage()
    ]


@pytest.mark.asyncio
async def test_records_refused_by_their_leader_are_said_to_wait_while_they_wait(
    cluster: FakeCluster,  # noqa: F811
    make: Made,  # noqa: F811
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="replog.client")
    too_few = NotEnoughReplicasError("one-0: the ISR [0] has 1 replicas, fewer than 2")
    cluster.refuse("one", 0, too_few, times=1_000_000)  # the followers are gone
    producer = make(delivery_timeout_ms=60_000)
    future = producer.send_nowait("one", b"v")
    await until(lambda: len(notices(caplog, "Producer waiting")) >= 2)
    first, second = notices(caplog, "Producer waiting")[:2]
    for notice in (first, second):
        assert "one-0's records not acknowledged yet" in notice, notice
        assert "last error: NotEnoughReplicasError: one-0: the ISR [0] has 1" in notice
        assert "1 record(s) waiting" in notice
        assert UNTIL.search(notice) and notice.endswith("(delivery.timeout.ms=60000)")
    cluster.refusals.clear()
    assert (await future).offset == 0
    said = len(notices(caplog, "Producer waiting"))
    assert (await producer.send("one", b"w")).offset == 1  # nothing waits: nothing said
    assert len(notices(caplog, "Producer waiting")) == said


@pytest.mark.asyncio
async def test_records_waiting_for_a_leader_say_so_and_since_when(
    cluster: FakeCluster,  # noqa: F811
    make: Made,  # noqa: F811
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="replog.client")
    cluster.log("one").leader = -1  # no leader elected
    producer = make(delivery_timeout_ms=60_000)
    future = producer.send_nowait("one", b"v")
    await until(lambda: len(notices(caplog, "Producer waiting")) >= 2)
    notice = notices(caplog, "Producer waiting")[-1]
    assert re.search(r"for a leader of one-0 \(no leader known since \d\d:\d\d:\d\d\)", notice)
    assert UNTIL.search(notice), notice
    cluster.log("one").leader = 0
    assert (await future).offset == 0


@pytest.fixture
def silent_address() -> Iterator[str]:
    """An address that accepts connections and never answers (a hung or foreign host)."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        yield f"127.0.0.1:{listener.getsockname()[1]}"


@pytest.mark.asyncio
async def test_a_send_waiting_for_metadata_says_what_it_waits_for(
    silent_address: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="replog.client")
    async with AsyncProducer(
        bootstrap_servers=silent_address, max_block_ms=2_000, request_timeout_ms=1_000
    ) as producer:
        with pytest.raises(KafkaTimeoutError) as raised:
            await producer.send("orders", b"v")
    assert silent_address in str(raised.value)
    said = notices(caplog, "for metadata of topic 'orders'")
    assert said, [r.getMessage() for r in caplog.records]
    for notice in said:
        assert notice.startswith("waiting ")
        assert f"no broker reachable at {silent_address}" in notice or "no answer yet" in notice
        assert UNTIL.search(notice) and notice.endswith("(max.block.ms=2000)")


@pytest.mark.parametrize(
    ("error", "cause"),
    [
        (NetworkError("cannot connect to 127.0.0.1:1: connection refused"), "connection refused"),
        (NetworkError("no connection to 10.0.0.1:9092 within 10000 ms "
                      "(socket.connection.setup.timeout.ms): is the address right and the "
                      "broker up?"), "no answer (connection timed out)"),
        (NetworkError("cannot connect to nosuchhost.invalid:9092: name or service not known"),
         "host name not found"),
        (NetworkError("the connection to 127.0.0.1:1 was lost: connection reset by peer"),
         "connection reset"),
        (RequestTimedOutError("127.0.0.1:1 did not answer Metadata within 1000 ms"),
         "no answer in time"),
    ],
)  # fmt: skip
def test_a_failed_connections_wordings_come_out_in_a_few_words(
    error: ReplogError, cause: str
) -> None:
    assert cluster_metadata._short_cause(error) == cause


def test_replog_produce_says_what_it_waits_for_until_it_gives_up(
    cluster: FakeCluster,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The command's stderr, as a user sees it (its own logging set up, not pytest's)."""
    monkeypatch.setattr(logging.root, "handlers", [])
    too_few = NotEnoughReplicasError("one-0: the ISR [0] has 1 replicas, fewer than 2")
    cluster.refuse("one", 0, too_few, times=1_000_000)
    stderr = io.StringIO()
    stdin = io.TextIOWrapper(io.BytesIO(b"v\n"))
    try:
        with mock.patch.object(sys, "stdin", stdin), contextlib.redirect_stderr(stderr):
            code = main(
                ["produce", "--topic", "one", "--bootstrap-server", cluster.bootstrap,
                 "--producer-property", "delivery.timeout.ms=1500", "request.timeout.ms=1000"]
            )  # fmt: skip
    finally:
        for handler in logging.root.handlers:
            handler.close()
    assert code == 1
    lines = stderr.getvalue().splitlines()
    waiting = [line for line in lines if "WARNING replog.client: Producer waiting " in line]
    assert len(waiting) >= 2, lines
    assert all("one-0's records not acknowledged yet" in line for line in waiting)
    assert lines[-1].startswith("replog produce: 1 record(s) to topic one failed; first: ")
