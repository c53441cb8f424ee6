"""A consumer group's committed offsets: find the group's coordinator, commit, fetch, auto-commit.

Committed offsets live in the replicated `__consumer_offsets` topic; the broker leading the
group's partition of it is the group's coordinator (reached on its Kafka listener,
`KafkaCoordinatorClient`). This module is
the client side: `GroupOffsets` commits and fetches through whichever broker coordinates the
group, and `AutoCommitter` implements `enable.auto.commit`.

Rules (Kafka's `ConsumerCoordinator`):
- The coordinator is found with FindCoordinator on any broker (the ones the metadata knows
  first, then the bootstrap addresses) and remembered until it answers NOT_COORDINATOR or
  COORDINATOR_NOT_AVAILABLE, cannot be reached, loses the connection or leaves a request
  unanswered (Kafka's `markCoordinatorUnknown`); then it is looked up again. An address that
  is not a Kafka listener fails the call at once, naming what answered.
- Retriable answers (NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS,
  timeouts, an unreachable broker) are retried with backoff (`retry.backoff.ms` doubling up
  to `retry.backoff.max.ms`) until the caller's deadline; then `KafkaTimeoutError` names the
  operation, the timeout and the last cause. The timeout named is the caller's `timeout_ms`
  (the configured timeout the deadline was computed from), never a figure derived from the
  clock: a deadline read a millisecond later would name 199 ms for a 200 ms timeout. A caller
  that passes only a deadline gets the time from its call to the deadline, said as such.
  Anything else (INVALID_GROUP_ID, OFFSET_METADATA_TOO_LARGE, ...) is raised at once.
  Per-partition retriable errors retry only the partitions that failed.
- Commits are serialised: a commit starts only after the one before it finished, so an older
  auto-commit never lands after a newer explicit one.
- A committed offset is the next offset to read (the position after the last record returned).
- Auto-commit commits the consumer's positions, which move only when `poll` hands records out,
  so only records `poll` returned are ever committed (at-least-once: a crash after the commit
  and before processing cannot happen, because the commit is made by a later `poll`, or by
  `close`, after the application got the records). Positions that did not change since the
  last successful commit are not committed again.
- Every commit names its committer (client.id and a random id per consumer instance). When the
  coordinator answers that another consumer commits the same partitions of the group from
  outside its membership (`assign()` consumers of one group.id), a WARNING says so, once per
  other consumer instance.
- A group member sets `identity`: its commits then carry its generation and member id.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TypeVar

from replog.client.call_guard import guarded
from replog.client.offset_lookup import describe_partitions
from replog.client.records import OffsetAndMetadata, TopicPartition
from replog.client.task_owner import TaskOwner
from replog.clock import monotonic_ms
from replog.coordinator import messages as cm
from replog.errors import (
    CoordinatorNotAvailableError,
    InvalidGroupIdError,
    KafkaError,
    KafkaTimeoutError,
    NetworkError,
    NotCoordinatorError,
    ReplogError,
    RequestTimedOutError,
)
from replog.wire.kafka_coordinator_client import KafkaCoordinatorClient

log = logging.getLogger("replog.client.consumer")

T = TypeVar("T")


def _NO_IDENTITY() -> tuple[int, str, str | None]:
    return -1, "", None


class GroupOffsets:
    def __init__(
        self,
        group_id: str,
        *,
        coordinator_for: Callable[[str], KafkaCoordinatorClient],
        brokers: Callable[[], Sequence[str]],
        request_timeout_ms: int,
        retry_backoff_ms: int,
        retry_backoff_max_ms: int,
        committer: cm.Committer = cm.NO_COMMITTER,
        clock: Callable[[], int] = monotonic_ms,
    ) -> None:
        """`identity` (set by a group member): the (generation, member id, instance id) each
        commit carries, read when it is sent; without it commits carry no generation."""
        if not group_id:
            raise InvalidGroupIdError("group.id must be a non-empty string to commit offsets")
        self.group_id = group_id
        self._coordinator_for = coordinator_for
        self._brokers = brokers
        self._request_timeout_ms = request_timeout_ms
        self._retry_backoff_ms = retry_backoff_ms
        self._retry_backoff_max_ms = max(retry_backoff_max_ms, retry_backoff_ms)
        self._clock = clock
        self._coordinator: tuple[int, str] | None = None
        self._commit_lock = asyncio.Lock()
        self.committer = committer
        self._shared_reported: set[str] = set()  # other instances already warned about
        self.identity: Callable[[], tuple[int, str, str | None]] = _NO_IDENTITY

    @property
    def coordinator(self) -> tuple[int, str] | None:
        """(node id, address) of the group's coordinator as last found, or None."""
        return self._coordinator

    def forget_coordinator(self) -> None:
        self._coordinator = None

    async def commit(
        self,
        offsets: Mapping[TopicPartition, OffsetAndMetadata],
        *,
        deadline_ms: int,
        timeout_ms: int | None = None,
    ) -> None:
        """Commit `offsets` by `deadline_ms`; `timeout_ms`, the caller's timeout the deadline
        was computed from, is what a `KafkaTimeoutError` names (module docstring)."""
        budget = self._budget(deadline_ms, timeout_ms)
        pending = dict(offsets)
        if not pending:
            return
        what = f"commit of offsets for {describe_partitions(pending)} in group '{self.group_id}'"

        async def attempt(client: KafkaCoordinatorClient, timeout_ms: int) -> None:
            generation, member_id, instance_id = self.identity()
            answers, shared = await client.offset_commit(
                self.group_id,
                pending,
                generation_id=generation,
                member_id=member_id,
                group_instance_id=instance_id,
                committer=self.committer,
                timeout_ms=timeout_ms,
            )
            self._warn_shared(shared)
            retry: KafkaError | None = None
            for tp, error in answers.items():
                if error is None:
                    pending.pop(tp, None)
                elif not error.retriable:
                    raise error
                else:
                    retry = retry or error
                    if isinstance(error, NotCoordinatorError | CoordinatorNotAvailableError):
                        self.forget_coordinator()
            if retry is not None:
                raise retry

        async with self._commit_lock:
            await self._with_retries(what, deadline_ms, budget, "OffsetCommit", attempt)

    def _warn_shared(self, shared: Sequence[cm.SharedCommit]) -> None:
        for found in shared:
            if found.other.instance_id in self._shared_reported:
                continue
            self._shared_reported.add(found.other.instance_id)
            log.warning(
                "another consumer commits offsets for group '%s' and the same partitions (%s): "
                "%s, %d ms before this commit; both read every record of them, %s",
                self.group_id,
                found.partition_names(),
                found.other.describe(),
                found.last_commit_age_ms,
                cm.SHARED_COMMIT_ADVICE,
            )

    async def fetch(
        self,
        partitions: Sequence[TopicPartition],
        *,
        deadline_ms: int,
        timeout_ms: int | None = None,
    ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        """The committed offsets of `partitions` by `deadline_ms` (`timeout_ms`: as `commit`)."""
        budget = self._budget(deadline_ms, timeout_ms)
        wanted = list(dict.fromkeys(partitions))
        if not wanted:
            return {}
        what = (
            f"fetch of committed offsets for {describe_partitions(wanted)} "
            f"in group '{self.group_id}'"
        )

        async def attempt(
            client: KafkaCoordinatorClient, timeout_ms: int
        ) -> dict[TopicPartition, OffsetAndMetadata | None]:
            answer = await client.offset_fetch(self.group_id, wanted, timeout_ms=timeout_ms)
            return {tp: answer.get(tp) for tp in wanted}

        return await self._with_retries(what, deadline_ms, budget, "OffsetFetch", attempt)

    def _budget(self, deadline_ms: int, timeout_ms: int | None) -> str:
        """How a timeout error states the time the operation had, read when it is called (a
        commit may then wait behind the one before it: that wait was part of its time)."""
        if timeout_ms is not None:
            return f"within {timeout_ms} ms"
        return f"by its deadline, {max(0, deadline_ms - self._clock())} ms after it was called"

    async def _with_retries(
        self,
        what: str,
        deadline_ms: int,
        budget: str,
        rpc: str,
        attempt: Callable[[KafkaCoordinatorClient, int], Awaitable[T]],
    ) -> T:
        backoff_ms = self._retry_backoff_ms
        last: ReplogError | None = None
        while True:
            remaining = deadline_ms - self._clock()
            if remaining <= 0:
                raise KafkaTimeoutError(
                    f"{what} did not finish {budget}"
                    + (f"; last error: {last}" if last is not None else "")
                )
            address = "?"
            try:
                _, address = await self._find_coordinator(deadline_ms)
                timeout_ms = max(1, min(self._request_timeout_ms, deadline_ms - self._clock()))
                return await guarded(
                    attempt(self._coordinator_for(address), timeout_ms), address=address, what=rpc
                )
            except (
                NotCoordinatorError,
                CoordinatorNotAvailableError,
                NetworkError,
                RequestTimedOutError,
            ) as exc:
                self.forget_coordinator()
                last = exc
            except ReplogError as exc:
                if not exc.retriable:
                    raise
                last = exc
            log.debug("%s: retrying after %s", what, last)
            await asyncio.sleep(max(0, min(backoff_ms, deadline_ms - self._clock())) / 1000)
            backoff_ms = min(backoff_ms * 2, self._retry_backoff_max_ms)

    async def coordinator_client(self, deadline_ms: int) -> KafkaCoordinatorClient:
        """The client of the group's coordinator, found first if it is not known."""
        _, address = await self._find_coordinator(deadline_ms)
        return self._coordinator_for(address)

    async def _find_coordinator(self, deadline_ms: int) -> tuple[int, str]:
        if self._coordinator is not None:
            return self._coordinator
        errors: list[str] = []
        addresses = list(dict.fromkeys(self._brokers()))
        for address in addresses:
            timeout_ms = max(1, min(self._request_timeout_ms, deadline_ms - self._clock()))
            try:
                found = await guarded(
                    self._coordinator_for(address).find_coordinator(
                        self.group_id, timeout_ms=timeout_ms
                    ),
                    address=address,
                    what="FindCoordinator",
                )
            except (NetworkError, RequestTimedOutError) as exc:
                errors.append(str(exc))
                continue
            self._coordinator = found
            return found
        raise NetworkError(
            f"no broker answered FindCoordinator for group '{self.group_id}': "
            + ("; ".join(errors) if errors else "no broker address known")
        )


# How often auto-commit re-commits a position that has not changed (`AutoCommitter`).
RECOMMIT_UNCHANGED_MS = 3_600_000


class AutoCommitter:
    """`enable.auto.commit`: commit the consumer's positions every `interval_ms`, from `poll`.

    `maybe_commit` is called at the start of every poll; it starts a background commit of
    the positions that changed when the interval has passed and none is running, together
    with every unchanged position last committed `RECOMMIT_UNCHANGED_MS` or more ago. A failed
    auto-commit is logged and retried at the next interval (Kafka does the same). The commit
    runs in the consumer's TaskGroup (`tasks`): one that dies on anything but a ReplogError (a
    bug) fails the consumer.

    Why the re-commit: a group's offsets expire `offsets.retention.minutes` (default 7 days)
    after their commit (the coordinator's retention, KIP-211). Kafka's consumer re-commits
    every position each interval, which keeps an idle partition's offset alive; replog sends
    only what changed, because `__consumer_offsets` is never compacted here and every commit
    stays in its log, and re-commits an unchanged position hourly instead.
    """

    def __init__(
        self,
        offsets: GroupOffsets,
        tasks: TaskOwner,
        *,
        interval_ms: int,
        request_timeout_ms: int,
        clock: Callable[[], int] = monotonic_ms,
    ) -> None:
        self._offsets = offsets
        self._tasks = tasks
        self._interval_ms = interval_ms
        self._request_timeout_ms = request_timeout_ms
        self._clock = clock
        self._next_ms = clock() + interval_ms
        # Per partition: what was committed, and when (this committer's clock, ms).
        self._committed: dict[TopicPartition, tuple[OffsetAndMetadata, int]] = {}
        self._task: asyncio.Task[None] | None = None

    def changed(
        self,
        positions: Mapping[TopicPartition, OffsetAndMetadata],
        committed_before_ms: int | None = None,
    ) -> dict[TopicPartition, OffsetAndMetadata]:
        """The positions not committed as they are, and, with `committed_before_ms`, those
        whose last commit is that old or older."""
        committed = self._committed
        stale = committed_before_ms
        changed = {}
        for tp, offset in positions.items():
            last = committed.get(tp)
            if last is None or last[0] != offset or (stale is not None and last[1] <= stale):
                changed[tp] = offset
        return changed

    def maybe_commit(self, positions: Mapping[TopicPartition, OffsetAndMetadata]) -> None:
        now = self._clock()
        if now < self._next_ms or (self._task is not None and not self._task.done()):
            return
        self._next_ms = now + self._interval_ms
        changed = self.changed(positions, now - RECOMMIT_UNCHANGED_MS)
        if changed:
            self._task = self._tasks.spawn(self._commit(changed), name="auto-commit")

    async def _commit(self, offsets: dict[TopicPartition, OffsetAndMetadata]) -> None:
        try:
            await self.commit_now(
                offsets,
                deadline_ms=self._clock() + self._request_timeout_ms,
                timeout_ms=self._request_timeout_ms,
            )
        except ReplogError as exc:
            log.warning("auto-commit in group '%s' failed: %s", self._offsets.group_id, exc)

    async def commit_now(
        self,
        offsets: Mapping[TopicPartition, OffsetAndMetadata],
        *,
        deadline_ms: int,
        timeout_ms: int | None = None,
    ) -> None:
        """Commit `offsets` and remember them as committed (also used by explicit commits)."""
        await self._offsets.commit(offsets, deadline_ms=deadline_ms, timeout_ms=timeout_ms)
        now = self._clock()
        self._committed.update((tp, (offset, now)) for tp, offset in offsets.items())

    def forget(self, partitions: Sequence[TopicPartition] | None = None) -> None:
        """Partitions no longer assigned: a later re-assignment commits them again."""
        if partitions is None:
            self._committed.clear()
        for tp in partitions or ():
            self._committed.pop(tp, None)

    async def close(self, deadline_ms: int | None = None) -> None:
        """Wait for a running auto-commit (its errors are already logged) until `deadline_ms`
        on this committer's clock (None: until it ends), then cancel it: a close bounded by a
        timeout may not wait out the commit's own retries (up to `request.timeout.ms`)."""
        task, self._task = self._task, None
        if task is None or task.done():
            return
        remaining_s = None if deadline_ms is None else max(0, deadline_ms - self._clock()) / 1000
        _, running = await asyncio.wait({task}, timeout=remaining_s)
        if running:
            log.warning(
                "the running auto-commit did not finish before the close's deadline; cancelled"
            )
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
