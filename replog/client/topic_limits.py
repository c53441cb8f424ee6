"""What the producer knows of each topic's batch limit, the smaller of its `max.message.bytes`
and `segment.bytes` (a broker refuses an append larger than a segment), so that its batches are
sized to it up front instead of being refused whole (the sender splits a refused batch either
way).

Rules:
- Asked with DescribeConfigs (the topic's `max.message.bytes` and `segment.bytes` only) of the
  brokers' Kafka listeners at the addresses the metadata knows, in the order a metadata refresh asks
  them (the broker that answered last first, those that failed last). An address that does not serve
  it, does not answer or answers nonsense is skipped; when none answers the limit stays unknown
  (batches keep batch.size), said at DEBUG only: the split still delivers every record.
- Per topic, cached, and handed to the accumulator (`set_limit`). A topic is described when
  the producer first sends to it (that send waits for the answer, up to request.timeout.ms
  and its own deadline), again after the broker refused one of its batches as too large
  (`stale`), and with a metadata refresh once `metadata.max.age.ms` has passed since.
- One describe runs at a time and covers every topic that needs one, as a task of the
  producer's TaskGroup (`task_owner`): a bug in it stops the producer. Once the group no
  longer runs (closed, or stopped on such a bug) nothing is described: the limit stays as it
  is, and the send's own checks say why the producer stopped.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from replog.client.cluster_metadata import ClusterMetadata
from replog.client.task_owner import TaskOwner
from replog.errors import KafkaError, ReplogError

log = logging.getLogger("replog.client")

MAX_MESSAGE_BYTES = "max.message.bytes"
SEGMENT_BYTES = "segment.bytes"


class TopicLimits:
    """Each topic's batch limit, described and refreshed (module docstring). Lives
    on the producer's loop."""

    def __init__(
        self,
        metadata: ClusterMetadata,
        set_limit: Callable[[str, int | None], None],
        tasks: TaskOwner,
        *,
        request_timeout_ms: int,
        max_age_ms: int,
    ) -> None:
        self._metadata = metadata
        self._clock = metadata.clock
        self._set_limit = set_limit
        self._tasks = tasks
        self._request_timeout_ms = request_timeout_ms
        self._max_age_ms = max_age_ms
        self._described: dict[str, int] = {}  # topic -> when it was last described
        self._wanted: set[str] = set()  # topics to describe in the next pass
        self._task: asyncio.Task[None] | None = None

    async def ensure(self, topic: str, deadline_ms: int) -> None:
        """Describe `topic` unless done before; wait for it up to `deadline_ms`."""
        if topic in self._described:
            return
        self._wanted.add(topic)
        task = self._start()
        remaining_ms = min(deadline_ms - self._clock(), self._request_timeout_ms)
        if task is None or remaining_ms <= 0:
            return
        try:
            async with asyncio.timeout(remaining_ms / 1000):
                await asyncio.shield(task)
        except TimeoutError:
            log.debug("no batch limit for topic %r in time: batch.size applies", topic)
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if not task.cancelled() or (current is not None and current.cancelling()):
                raise
            # The describe was cancelled, not this caller: the producer's TaskGroup ended.

    def stale(self, topic: str) -> None:
        """Describe `topic` again (its batch was refused as too large)."""
        self._wanted.add(topic)
        self._start()

    def on_metadata(self) -> None:
        """A metadata refresh: describe again the topics described too long ago."""
        now_ms = self._clock()
        old = [t for t, when in self._described.items() if now_ms - when >= self._max_age_ms]
        if old:
            self._wanted.update(old)
            self._start()

    async def close(self) -> None:
        task, self._task = self._task, None
        if task is not None and not task.done():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    def _start(self) -> asyncio.Task[None] | None:
        """The describe under way, started if needed; None once the TaskGroup stopped."""
        if self._task is None or self._task.done():
            if not self._tasks.running:
                return None
            self._task = self._tasks.spawn(self._describe(), name="describe topic limits")
        return self._task

    async def _describe(self) -> None:
        while self._wanted:
            topics = sorted(self._wanted)
            self._wanted.clear()
            answer = await self._ask(topics)
            now_ms = self._clock()
            for topic in topics:
                self._described[topic] = now_ms
                found = answer.get(topic)
                if isinstance(found, dict):
                    self._set_limit(topic, batch_limit(found))

    async def _ask(self, topics: list[str]) -> dict[str, dict[str, str | None] | KafkaError]:
        """The first answer of an address that serves DescribeConfigs ({} if none does)."""
        addresses = self._metadata.addresses_to_try()
        connections = self._metadata.connections
        causes = []
        for address in addresses:
            try:
                return await connections.topic_configs(
                    address,
                    topics,
                    [MAX_MESSAGE_BYTES, SEGMENT_BYTES],
                    timeout_ms=self._request_timeout_ms,
                )
            except ReplogError as exc:
                causes.append(f"{address}: {type(exc).__name__}: {exc}")
        log.debug(
            "batch limits of %s unknown (batch.size applies): %s",
            ", ".join(topics),
            "; ".join(causes),
        )
        return {}


def batch_limit(configs: dict[str, str | None]) -> int | None:
    """The smaller of a topic's `max.message.bytes` and `segment.bytes` (None: neither known)."""
    known = [
        v
        for v in (_limit(configs.get(MAX_MESSAGE_BYTES)), _limit(configs.get(SEGMENT_BYTES)))
        if v is not None
    ]
    return min(known) if known else None


def _limit(value: str | None) -> int | None:
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None
