"""The confluent-kafka bench consumer hands records over as they arrive: it waits for the
first one only, then takes what else is ready, so no record's end-to-end latency includes a
wait for a batch to fill (librdkafka's `consume` returns only with `num_messages` records or
at its timeout)."""

from __future__ import annotations

from typing import Any

from replog.cli.bench import drivers
from replog.cli.bench.drivers import CONSUME_BATCH


class _Message:
    def __init__(self, value: bytes | None, error: str | None = None) -> None:
        self._value = value
        self._error = error

    def value(self) -> bytes | None:
        return self._value

    def error(self) -> str | None:
        return self._error


class _FakeLibrdkafka:
    """`poll` returns the first queued message (None when none is queued: its timeout
    passed); `consume` returns up to `num_messages` more and records how it was called."""

    def __init__(self, queued: list[_Message]) -> None:
        self.queued = queued
        self.calls: list[tuple[Any, ...]] = []

    def poll(self, timeout: float) -> _Message | None:
        self.calls.append(("poll", timeout))
        return self.queued.pop(0) if self.queued else None

    def consume(self, num_messages: int, timeout: float) -> list[_Message]:
        self.calls.append(("consume", num_messages, timeout))
        taken, self.queued = self.queued[:num_messages], self.queued[num_messages:]
        return taken


def consumer_over(fake: _FakeLibrdkafka) -> Any:
    consumer = object.__new__(drivers._ConfluentConsumer)
    consumer._consumer = fake
    return consumer


def test_poll_waits_for_the_first_record_then_takes_the_ready_ones_without_waiting() -> None:
    fake = _FakeLibrdkafka(
        [_Message(b"a"), _Message(b"b"), _Message(None, "partition EOF"), _Message(b"c")]
    )
    assert consumer_over(fake).poll(0.1) == [b"a", b"b", b"c"]
    assert fake.calls == [("poll", 0.1), ("consume", CONSUME_BATCH - 1, 0)]


def test_poll_takes_at_most_a_batch() -> None:
    fake = _FakeLibrdkafka([_Message(b"%d" % i) for i in range(CONSUME_BATCH + 5)])
    assert len(consumer_over(fake).poll(0.1)) == CONSUME_BATCH
    assert len(fake.queued) == 5


def test_poll_with_nothing_arriving_returns_nothing_after_its_timeout() -> None:
    fake = _FakeLibrdkafka([])
    assert consumer_over(fake).poll(0.1) == []
    assert fake.calls == [("poll", 0.1)]
