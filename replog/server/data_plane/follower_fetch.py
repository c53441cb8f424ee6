"""The follower side of replication: the synchronous steps an async fetcher drives, one Fetch
per leader broker at a time.

Rules (docs/design/replication.md#follower-truncation, #truncate-on-fetch, #follower-out-of-range,
#high-watermark "Follower HW"; Kafka's `ReplicaFetcherThread`, `AbstractFetcherThread`):
- Each fetch carries, per followed partition, the LEO as fetch offset, the log's latest leader
  epoch as last fetched epoch, the local log start offset and the follower's leader epoch as
  current leader epoch; a partition backing off is left out until its back-off ends.
- Dirty-only building: each leader broker has a *plan*, its partitions' entries in fetch
  order, kept up to date incrementally: a partition is refreshed at the next build only when
  it was *touched*, that is when something that goes into its entry or decides whether it is
  asked may have changed (an answer processed for it, a back-off started or ended, a role or
  leader epoch given by metadata, the partition added or removed). A build refreshes the
  touched partitions and hands out the plan; it tells the fetch session what changed since the
  previous build (`FetchChanges`), so the session encodes only those. A build that finds
  nothing changed hands out the previous build's request again, without copying the plan; one
  that finds changes lists the plan in its request but keeps no copy of it to read the answer
  against: the live plan, with the entries the build saw kept for the partitions changed
  since (`PlanAsBuilt`), costs what changed, not what the plan holds. A
  log start offset that retention moves (off the event loop) touches nothing: it travels with
  the partition's next change, as it only feeds the leader's low watermark
  (docs/replication.md, "Dirty-only rounds").
- Partitions are asked in a rotating order (Kafka's `updateAndMoveToEnd`): one whose answer
  carried records moves to the back of its plan, and a partition (re)joining joins the back.
  The leader fills an answer in the order asked until `replica.fetch.response.max.bytes` is
  spent, so with a fixed order the partitions at the front, while they have data, would take
  every answer and the rest would fall out of the ISR.
- An answer is applied only to a partition that still follows that leader at that leader epoch
  and fetch offset (else it is stale: metadata or the log moved meanwhile).
- Records are appended verbatim, after their header checks and CRC-32C (a spoilt batch is an
  error: the partition backs off and fetches it again); none may carry a leader epoch after
  the leader's own, a bit flipped in that field outside the CRC. HW := the leader's HW clamped
  into the local log; the log start follows the leader's, but never past the local HW.
- A DivergingEpoch truncates by the KIP-101/KIP-279 rule, never to the HW, and the next fetch
  goes at once. A truncation point at or below the leader's log start offset restarts the log
  at that offset instead (Kafka truncates to it, and then cannot append when DeleteRecords
  left it inside a batch). The partition's core decides both (`partition_core`).
- OFFSET_OUT_OF_RANGE follows docs/design/replication.md#follower-out-of-range with the leader's LEO
  and log start offset from the answer, as the partition's core decides:
  the leader's LEO below ours truncates to it; the leader's log start past our LEO restarts the
  log there; anything else backs off.
- A corrupt batch (CRC-32C or framing; found here, or answered CORRUPT_MESSAGE by the leader)
  backs off like any error, counts in `replog_follower_corrupt_fetch_total{topic,partition}`
  on every refusal, and is logged at ERROR once per partition and offset, naming the leader:
  the leader serves the same bytes again, so the follower refuses them forever (Kafka does the
  same) and only an operator can end it (docs/operations.md, "A corrupt segment").
- Any other error, a step that raises a KafkaError, or a fetch that failed as a whole backs the
  partition off for `replica.fetch.backoff.ms`; a new leader epoch in the metadata restarts it
  at once (`Partition.make_follower`).

Theory of operation: `FollowerFetchSteps` owns no replicas; it reads and steps the replica
manager's partitions through the mapping it is given, and the manager calls `touch(key)`
whenever it adds a partition to that mapping, removes one or gives one a role. The pure
cores decide (each partition's `PartitionCore` for truncation and out-of-range answers,
`follower_truncation`); this class applies their answers to the logs. Back-off
deadlines live on each partition's `FollowerFetchState`; the manager's timer calls
`end_backoffs(now_ms)` and asks `next_backoff_end_ms()`, and `on_new_deadline` tells that timer
back-offs started. The back-offs one answer (or one failed fetch) starts share their deadline,
and are kept and announced as one group: a failed fetch backs off every partition it asked,
33,000 of them per leader at 100,000 partitions.
"""

from __future__ import annotations

import heapq
import logging
from collections.abc import Callable, Iterable, Iterator, Mapping

from replog.common import TopicPartitionKey
from replog.errors import (
    CorruptRecordError,
    FencedLeaderEpochError,
    InvalidRecordError,
    KafkaError,
    KafkaStorageError,
    NotLeaderOrFollowerError,
    OffsetOutOfRangeError,
    UnknownLeaderEpochError,
)
from replog.record.header import LOG_OVERHEAD, read_frame, validate_batch
from replog.replication.fetch_session import FetchChanges
from replog.replication.follower_truncation import follower_high_watermark
from replog.replication.messages import (
    FetchPartition,
    FetchPartitionResult,
    FetchRequest,
    FetchResponse,
)
from replog.replication.partition_effects import BackOff, RestartLogAt, TruncateTo
from replog.replication.partition_events import DivergingEpochAnswered, OffsetOutOfRangeAnswered
from replog.replication.replication_quota import ReplicationQuota
from replog.server.config.replica_manager_config import ReplicaManagerConfig
from replog.server.data_plane.log_summaries import few_names
from replog.server.data_plane.partition import FollowerFetchState, Partition
from replog.server.metrics.instruments import BrokerCounters

log = logging.getLogger("replog.server.data_plane.replica_manager")


# Back-offs one `end_backoffs` ends: at a restart every leader answers NOT_LEADER at first, and
# thousands of partitions' back-offs end in the same millisecond; each ended one is refreshed
# into its plan (tens of µs), so all of them in one turn held the loop for 50-90 ms of CPU.
BACKOFF_ENDS_PER_CALL = 500
# Back-offs one call looks at, ended or stale (ended otherwise: an answer, a new role, the
# replica removed): a node stopping removes every replica, and one walk over a leader's 33,000
# stale back-offs held the loop for 21 ms of CPU (43 ms with a heap entry each).
BACKOFF_VISITS_PER_CALL = 2000


class FollowerFetchSteps:
    """Builds the follower Fetch requests of one broker and applies their answers."""

    def __init__(
        self,
        config: ReplicaManagerConfig,
        partitions: Mapping[TopicPartitionKey, Partition],
        *,
        broker_epoch: Callable[[], int],
        on_new_deadline: Callable[[int], None],
        counters: BrokerCounters | None = None,
        quota: ReplicationQuota | None = None,
    ) -> None:
        self._config = config
        self._quota = quota if quota is not None else ReplicationQuota()
        # Partitions the follower throttle left out of their plans (module Rules), by key.
        self._throttled_out: set[TopicPartitionKey] = set()
        self._partitions = partitions
        self._broker_epoch = broker_epoch
        self._on_new_deadline = on_new_deadline
        # Per leader broker, its partitions' entries in fetch order (module Rules); an entry
        # object is reused while its fields stay the same.
        self._plans: dict[int, dict[TopicPartitionKey, FetchPartition]] = {}
        self._plan_of: dict[TopicPartitionKey, int] = {}  # the plan holding each partition
        self._touched: set[TopicPartitionKey] = set()  # to refresh at the next build
        # Each followed partition's leader broker (a leader id >= 0), how many partitions
        # follow each, and the partitions touched since `fetch_sources` last counted them.
        self._source_of: dict[TopicPartitionKey, int] = {}
        self._followers_of: dict[int, int] = {}
        self._sources_touched: set[TopicPartitionKey] = set()
        # Per leader broker, the entries changed (None: left) since its last build.
        self._changes: dict[int, dict[TopicPartitionKey, FetchPartition | None]] = {}
        # Per leader broker, its last build's request, the plan as it was then (what
        # `process` reads an answer against: the live plan seen through the entries it held
        # at the build for the partitions changed since, not a copy) and that build's changes.
        self._built: dict[int, tuple[FetchRequest, PlanAsBuilt]] = {}
        self._built_changes: dict[int, FetchChanges] = {}
        # The back-offs started, soonest end first, one group per answer or failed fetch:
        # (end, sequence, group). A partition of a group whose back-off has since ended,
        # restarted or been replaced is stale and dropped when it comes up. The timer and each
        # build look only at the partitions due, not at every partition backing off
        # (thousands at a restart, when every leader answers NOT_LEADER at first: a walk of
        # them all per build and per tick was tens of ms of the loop each).
        self._backoff_ends: list[tuple[int, int, BackOffGroup]] = []
        self._backoff_sequence = 0
        self._starting: list[tuple[TopicPartitionKey, Partition]] = []  # by `_back_off`
        self._counters = counters if counters is not None else BrokerCounters()
        # The offset of the corrupt batch each partition last logged at ERROR (module Rules).
        self._corrupt_logged: dict[TopicPartitionKey, int] = {}
        # Per error name, the partitions of the answer being processed that wait for new
        # metadata (a leadership error): logged once per answer.
        self._awaiting_metadata: dict[str, list[str]] = {}

    def fetch_sources(self, local_broker_id: int) -> list[int]:
        """The leader broker ids the followed partitions fetch from, sorted. Kept up to date
        from the partitions touched since the last call, not by a walk over every partition:
        the replica manager asks after every round of replica changes, and a broker taking
        100,000 replicas in rounds of 250 walked them all 400 times."""
        touched, self._sources_touched = self._sources_touched, set()
        source_of, followers_of = self._source_of, self._followers_of
        for key in touched:
            partition = self._partitions.get(key)
            follower = None if partition is None else partition.follower
            source = -1 if follower is None else follower.leader_id
            old = source_of.get(key, -1)
            if source == old:
                continue
            if old >= 0:
                followers_of[old] -= 1
                if not followers_of[old]:
                    del followers_of[old]
            if source >= 0:
                source_of[key] = source
                followers_of[source] = followers_of.get(source, 0) + 1
            else:
                del source_of[key]
        return sorted(source for source in followers_of if source != local_broker_id)

    def touch(self, key: TopicPartitionKey) -> None:
        """`key`'s entry, or whether and from whom it is fetched, may have changed: it is
        refreshed at the next build and the next `fetch_sources` (module Rules)."""
        self._touched.add(key)
        self._sources_touched.add(key)

    def refresh(self, now_ms: int) -> None:
        """Refresh the touched partitions' entries now rather than at the next build: called
        after each round of replica changes, so that a build never refreshes the thousands a
        large creation touched while the fetchers waited (one loop turn each)."""
        if self._touched:
            self._refresh(now_ms)

    def build(self, source_broker_id: int, now_ms: int) -> FetchRequest | None:
        """The next Fetch to send to `source_broker_id`; None when nothing is due."""
        # Back-offs due end here too, not only at the timer's next tick.
        self.end_backoffs(now_ms)
        if self._throttled_out and not self._quota.is_exceeded(now_ms):
            self.throttles_changed()  # under the bound again: they rejoin their plans
        if self._touched:
            self._refresh(now_ms)
        plan = self._plans.get(source_broker_id)
        if not plan:
            return None
        changes = self._changes.pop(source_broker_id, {})
        previous = self._built.get(source_broker_id)
        broker_epoch = self._broker_epoch()
        if previous is not None and not changes and previous[0].replica_epoch == broker_epoch:
            # Nothing of the plan changed since that build (every entry changed, added, left
            # or moved is in `_changes`): its request stands. Copying the plan per round cost
            # what it holds, 33,000 partitions a leader at 100,000 (module Rules).
            self._built_changes[source_broker_id] = FetchChanges(previous[0], {})
            return previous[0]
        request = FetchRequest(
            tuple(plan.values()),
            replica_id=self._config.broker_id,
            replica_epoch=broker_epoch,
            max_wait_ms=self._config.replica_fetch_wait_ms_max,
            min_bytes=self._config.replica_fetch_min_bytes,
            max_bytes=self._config.replica_fetch_response_max_bytes,
        )
        self._built_changes[source_broker_id] = FetchChanges(
            None if previous is None else previous[0], changes
        )
        self._built[source_broker_id] = (request, PlanAsBuilt(plan))
        return request

    def throttles_changed(self) -> None:
        """The follower throttle's bound or throttled partitions changed: the partitions it
        left out are looked at again at the next build."""
        if self._throttled_out:
            self.touch_all(self._throttled_out)
            self._throttled_out = set()

    def touch_all(self, keys: Iterable[TopicPartitionKey]) -> None:
        for key in keys:
            self.touch(key)

    def changes(self, source_broker_id: int) -> FetchChanges | None:
        """What the last request built for `source_broker_id` changed since the one built
        before it (the fetch session sends only that)."""
        return self._built_changes.get(source_broker_id)

    def _refresh(self, now_ms: int) -> None:
        touched, self._touched = self._touched, set()
        quota = self._quota
        for key in sorted(touched):
            partition = self._partitions.get(key)
            follower = None if partition is None else partition.follower
            was = self._plan_of.get(key)
            old = None if was is None else self._plans[was].get(key)
            if (
                partition is None
                or follower is None
                or follower.leader_id < 0
                or now_ms < follower.backoff_until_ms
            ):
                if was is not None:
                    self._leave(was, key)
                continue
            if quota.throttled and self._follower_throttles(partition, follower, now_ms):
                self._throttled_out.add(key)
                if was is not None:
                    self._leave(was, key)
                continue
            source = follower.leader_id
            log_start_offset = partition.log.log_start_offset
            entry = old
            if (
                entry is None
                or entry.fetch_offset != follower.fetch_offset
                or entry.current_leader_epoch != follower.leader_epoch
                or entry.last_fetched_epoch != follower.last_fetched_epoch
                or entry.log_start_offset != log_start_offset
                or entry.topic_id != partition.topic_id
            ):
                entry = FetchPartition(
                    partition.topic,
                    partition.partition,
                    fetch_offset=follower.fetch_offset,
                    partition_max_bytes=self._config.replica_fetch_max_bytes,
                    current_leader_epoch=follower.leader_epoch,
                    last_fetched_epoch=follower.last_fetched_epoch,
                    log_start_offset=log_start_offset,
                    topic_id=partition.topic_id,
                )
            if was is not None and was != source:
                self._leave(was, key)
            if entry is not old or was != source:
                self._before_change(source, key)
                self._changes.setdefault(source, {})[key] = entry
            self._plans.setdefault(source, {})[key] = entry
            self._plan_of[key] = source

    def _follower_throttles(
        self, partition: Partition, follower: FollowerFetchState, now_ms: int
    ) -> bool:
        """Whether `partition` is left out of its next fetch (Kafka's
        `shouldFollowerThrottle`): not caught up, named by the follower throttle, while that
        throttle is over its bound."""
        quota = self._quota
        return (
            not follower.caught_up
            and quota.is_throttled(partition.topic, partition.partition)
            and quota.is_exceeded(now_ms)
        )

    def _leave(self, source: int, key: TopicPartitionKey) -> None:
        self._before_change(source, key)
        del self._plans[source][key]
        del self._plan_of[key]
        self._changes.setdefault(source, {})[key] = None

    def _before_change(self, source: int, key: TopicPartitionKey) -> None:
        """`key`'s entry in `source`'s plan is about to change: its last build keeps the entry
        it was built with."""
        built = self._built.get(source)
        if built is not None:
            built[1].keep(key)

    def process(
        self,
        source_broker_id: int,
        request: FetchRequest,
        response: FetchResponse,
        now_ms: int,
    ) -> None:
        """Apply a leader's Fetch answer (docs/design/replication.md#follower-truncation,
        #truncate-on-fetch, #follower-out-of-range, #high-watermark "Follower HW")."""
        built = self._built.get(source_broker_id)
        asked: Mapping[TopicPartitionKey, FetchPartition]
        if built is not None and built[0] is request:
            asked = built[1]  # the plan as `request` was built from it
        else:
            asked = {(e.topic, e.partition): e for e in request.partitions}
        try:
            for result in response.partitions:
                self._process_result(source_broker_id, asked, result, now_ms)
        finally:
            self._start_backoffs(now_ms)
            self._log_awaiting_metadata(source_broker_id)

    def _process_result(
        self,
        source_broker_id: int,
        asked: Mapping[TopicPartitionKey, FetchPartition],
        result: FetchPartitionResult,
        now_ms: int,
    ) -> None:
        entry = asked.get((result.topic, result.partition))
        if entry is None:
            log.warning(
                "%s-%d: broker %d answered a partition this fetch did not ask for",
                result.topic,
                result.partition,
                source_broker_id,
            )
            return
        partition = self._following(source_broker_id, entry)
        if partition is None:
            return
        self._touched.add(partition.key)
        try:
            self._process_partition(partition, result, now_ms)
        except KafkaStorageError:
            raise  # the disk failed: the node stops (ReplicaFetcherManager, broker runtime)
        except OSError as exc:
            # A write, truncation or file removal the OS refused is a storage failure here
            # as on the leader's side: going on would follow from a log in an unknown state.
            raise KafkaStorageError(
                f"{partition.name}: follower step failed on the disk: {exc}"
            ) from exc
        except CorruptRecordError as exc:
            self._refuse_corrupt(partition, source_broker_id, entry, result.records, exc)
            self._back_off(partition, now_ms)
        except KafkaError as exc:
            log.warning("%s: follower step failed, backing off: %s", partition.name, exc)
            self._back_off(partition, now_ms)
        finally:
            # The step may have changed the log before it failed (a truncation, some
            # segments of an append): the next fetch goes from where the log now ends,
            # never from a position the log has left.
            if partition.follower is not None and not partition.stopped:
                partition.sync_follower_offsets()

    def _log_awaiting_metadata(self, source_broker_id: int) -> None:
        for error_name, names in self._awaiting_metadata.items():
            log.info(
                "broker %d answered %s for %d partition(s): %s; waiting for new metadata",
                source_broker_id,
                error_name,
                len(names),
                few_names(names),
            )
        self._awaiting_metadata.clear()

    def fetch_failed(self, source_broker_id: int, request: FetchRequest, now_ms: int) -> None:
        """The fetch itself failed (peer down, timeout): back off every partition it asked.
        They leave their plans here, in the request's order, rather than at the next refresh:
        a failed fetch asked a leader's whole plan, and each of those partitions refreshed
        (sorted, then left one by one) cost that refresh 63 ms at 33,000 partitions."""
        until = now_ms + self._config.replica_fetch_backoff_ms
        partitions = self._partitions
        starting = self._starting
        for entry in request.partitions:
            key = (entry.topic, entry.partition)
            partition = partitions.get(key)
            follower = None if partition is None else partition.follower
            if follower is not None and follower.leader_id == source_broker_id:
                assert partition is not None
                follower.backoff_until_ms = until
                starting.append((key, partition))
        if until > now_ms:
            built = self._built.get(source_broker_id)
            whole_plan = (
                built is not None
                and built[0] is request
                and not self._changes.get(source_broker_id)
                and len(starting) == len(request.partitions)
            )
            self._leave_all(source_broker_id, starting, whole_plan=whole_plan)
        else:  # no back-off: each stays in its plan, refreshed as after an answer
            self._touched.update(key for key, _ in starting)
        self._start_backoffs(now_ms)

    def _leave_all(
        self,
        source: int,
        backing_off: list[tuple[TopicPartitionKey, Partition]],
        *,
        whole_plan: bool,
    ) -> None:
        """`backing_off` leave their plans now, as the next refresh would make them: none is
        refreshed until its back-off ends (`end_backoffs` touches it then). A plan all of
        whose partitions leave (`whole_plan`: they are its last build's request, unchanged
        since) is dropped whole: the build's view of it (`PlanAsBuilt`) keeps the dropped
        dict, which nothing changes any more."""
        keys = [key for key, _ in backing_off]
        if self._touched:
            self._touched.difference_update(keys)
        plan_of = self._plan_of
        plan = self._plans.get(source)
        rest: list[TopicPartitionKey] = keys
        if plan and len(plan) <= len(keys):
            leaving = plan.keys() if whole_plan else set(keys)
            if whole_plan or plan.keys() <= leaving:
                del self._plans[source]
                for key in plan:
                    del plan_of[key]
                self._changes.setdefault(source, {}).update(dict.fromkeys(plan))
                rest = [key for key in keys if key not in plan] if len(leaving) > len(plan) else []
        for key in rest:
            was = plan_of.get(key)
            if was is not None:
                self._leave(was, key)

    def end_backoffs(self, now_ms: int) -> bool:
        """End the back-offs due by `now_ms`, at most `BACKOFF_ENDS_PER_CALL` of them, looking
        at most at `BACKOFF_VISITS_PER_CALL` (the rest stay due: the timer comes back at once,
        and so does the next build); True when any ended (the fetcher may send)."""
        ended = 0
        visits = 0
        ends = self._backoff_ends
        while (
            ends
            and ends[0][0] <= now_ms
            and ended < BACKOFF_ENDS_PER_CALL
            and visits < BACKOFF_VISITS_PER_CALL
        ):
            until, _, group = ends[0]
            items, index = group.items, group.next
            stop = min(len(items), index + BACKOFF_VISITS_PER_CALL - visits)
            while index < stop and ended < BACKOFF_ENDS_PER_CALL:
                key, partition = items[index]
                index += 1
                visits += 1
                if self._still_backing_off(until, key, partition):
                    assert partition.follower is not None
                    partition.follower.backoff_until_ms = 0
                    self._touched.add(key)
                    ended += 1
            group.next = index
            if index == len(items):
                heapq.heappop(ends)
        return ended > 0

    def next_backoff_end_ms(self) -> int | None:
        """The soonest end of a back-off still on, looking at most at `BACKOFF_VISITS_PER_CALL`
        back-offs: past them, the end of the first not yet looked at (the timer comes then,
        and `end_backoffs` looks further)."""
        ends = self._backoff_ends
        visits = 0
        while ends:
            until, _, group = ends[0]
            items, index = group.items, group.next
            stop = min(len(items), index + BACKOFF_VISITS_PER_CALL - visits)
            # Ended otherwise (an answer, a new role, a new back-off): dropped once each.
            while index < stop and not self._still_backing_off(until, *items[index]):
                index += 1
            visits += index - group.next
            group.next = index
            if index < len(items):
                return until
            heapq.heappop(ends)
        return None

    def _still_backing_off(self, until: int, key: TopicPartitionKey, partition: Partition) -> bool:
        """Whether a back-off entry is the partition's current back-off."""
        follower = partition.follower
        return (
            follower is not None
            and follower.backoff_until_ms == until
            and self._partitions.get(key) is partition
        )

    def _following(self, source_broker_id: int, entry: FetchPartition) -> Partition | None:
        """The partition if it still follows `source_broker_id` exactly where `entry` asked."""
        partition = self._partitions.get((entry.topic, entry.partition))
        if partition is None or partition.follower is None:
            return None
        follower = partition.follower
        if (
            follower.leader_id != source_broker_id
            or follower.leader_epoch != entry.current_leader_epoch
            or follower.fetch_offset != entry.fetch_offset
            or (entry.topic_id is not None and partition.topic_id != entry.topic_id)
        ):
            return None  # the answer is stale: metadata or the log moved meanwhile
        return partition

    def _process_partition(
        self, partition: Partition, result: FetchPartitionResult, now_ms: int
    ) -> None:
        follower = partition.follower
        assert follower is not None
        plog = partition.log
        error = result.error
        if error is None and result.diverging_epoch is not None:
            _truncate_on_divergence(
                partition,
                result.diverging_epoch.leader_epoch,
                result.diverging_epoch.end_offset,
                result.log_start_offset,
                now_ms,
            )
            follower.backoff_until_ms = 0
            return
        if error is None:
            if result.records:
                info = partition.append_as_follower(
                    result.records, leader_epoch=follower.leader_epoch
                )
                follower.last_fetched_epoch = info.last_leader_epoch
                # To the back of the fetch order (module Rules).
                plan = self._plans.get(follower.leader_id)
                if plan is not None and partition.key in plan:
                    plan[partition.key] = plan.pop(partition.key)
                quota = self._quota
                if quota.throttled and quota.is_throttled(partition.topic, partition.partition):
                    quota.record(len(result.records), now_ms)
            # As Kafka's fetch state lag: an empty answer leaves it (only its lag metric moves).
            if result.records or follower.caught_up is None:
                follower.caught_up = result.high_watermark <= plog.log_end_offset
            follower.fetch_offset = plog.log_end_offset
            plog.update_high_watermark(
                follower_high_watermark(
                    result.high_watermark, plog.log_start_offset, plog.log_end_offset
                )
            )
            # The log start follows the leader's, but never past the local HW.
            new_start = min(result.log_start_offset, plog.high_watermark)
            if new_start > plog.log_start_offset:
                plog.increment_log_start_offset(new_start, "follower copies the leader's")
            follower.backoff_until_ms = 0
            return
        if isinstance(error, CorruptRecordError):
            raise error  # as if found here (`process`)
        if isinstance(error, OffsetOutOfRangeError):
            if _follow_out_of_range(partition, result, now_ms):
                follower = partition.follower
                assert follower is not None
                follower.backoff_until_ms = 0
                # Kafka's reset sets the lag from the leader's end; unknown, the next answer
                # sets it (`FollowerFetchState.caught_up`).
                leader_end = result.log_end_offset
                follower.caught_up = None if leader_end < 0 else leader_end <= follower.fetch_offset
            else:
                self._back_off(partition, now_ms)
            return
        if isinstance(
            error, FencedLeaderEpochError | UnknownLeaderEpochError | NotLeaderOrFollowerError
        ):
            # One line per answer for all such partitions (`process`): a leader moving away
            # answers this for every partition it led.
            log.debug(
                "%s: leader answered %s; waiting for new metadata (%s)",
                partition.name,
                error.error_name,
                error,
            )
            self._awaiting_metadata.setdefault(error.error_name, []).append(partition.name)
        else:
            log.warning("%s: fetch error %s: %s", partition.name, error.error_name, error)
        self._back_off(partition, now_ms)

    def _refuse_corrupt(
        self,
        partition: Partition,
        leader_id: int,
        entry: FetchPartition,
        records: bytes | memoryview,
        error: CorruptRecordError,
    ) -> None:
        """Count a corrupt answer and log it at ERROR once per partition and offset."""
        self._counters.follower_corrupt_fetch(partition.topic, partition.partition)
        offset = _first_corrupt_offset(records, entry.fetch_offset)
        if self._corrupt_logged.get(partition.key) == offset:
            log.debug("%s: corrupt batch at offset %d again: %s", partition.name, offset, error)
            return
        self._corrupt_logged[partition.key] = offset
        log.error(
            "%s: the leader, broker %d, sent a corrupt batch at offset %d (%s); this replica "
            "refuses it and fetches it again every replica.fetch.backoff.ms (%d ms): a batch "
            "damaged on the way arrives whole next time, one damaged in the leader's log keeps "
            "this replica out of the ISR until it is repaired (counted in "
            "replog_follower_corrupt_fetch_total; see docs/operations.md, 'A corrupt segment')",
            partition.name,
            leader_id,
            offset,
            error,
            self._config.replica_fetch_backoff_ms,
        )

    def _back_off(self, partition: Partition, now_ms: int) -> None:
        """Back `partition` off from `now_ms`; kept at the call's `_start_backoffs`."""
        follower = partition.follower
        if follower is not None:
            follower.backoff_until_ms = now_ms + self._config.replica_fetch_backoff_ms
            self._starting.append((partition.key, partition))
            self._touched.add(partition.key)

    def _start_backoffs(self, now_ms: int) -> None:
        """Keep the back-offs this call started, as one group, and tell the timer once."""
        if not self._starting:
            return
        until = now_ms + self._config.replica_fetch_backoff_ms
        self._backoff_sequence += 1
        group = BackOffGroup(self._starting)
        self._starting = []
        heapq.heappush(self._backoff_ends, (until, self._backoff_sequence, group))
        self._on_new_deadline(until)


class BackOffGroup:
    """The back-offs one answer or failed fetch started, in the order started (they share
    one end); `next`: the first not yet ended or found stale."""

    __slots__ = ("items", "next")

    def __init__(self, items: list[tuple[TopicPartitionKey, Partition]]) -> None:
        self.items = items
        self.next = 0


def _first_corrupt_offset(records: bytes | memoryview, default: int) -> int:
    """The base offset of the first batch of `records` that fails its checks; `default` if
    none does (the leader reported the corruption itself)."""
    position = 0
    while position + LOG_OVERHEAD <= len(records):
        base_offset, size = read_frame(records, position)
        try:
            validate_batch(records, position)
        except (CorruptRecordError, InvalidRecordError):
            return base_offset
        position += size
    return default


class PlanAsBuilt(Mapping[TopicPartitionKey, FetchPartition]):
    """A plan as it was when a request was built from it: the live plan, except for the
    partitions changed since, whose entries at the build are kept (`keep`, called before
    each change). Costs what changed since the build, not what the plan holds."""

    __slots__ = ("_kept", "_plan")

    def __init__(self, plan: dict[TopicPartitionKey, FetchPartition]) -> None:
        self._plan = plan
        self._kept: dict[TopicPartitionKey, FetchPartition | None] = {}

    def keep(self, key: TopicPartitionKey) -> None:
        """`key`'s entry in the plan is about to change (the first change since the build
        counts: later ones find it kept)."""
        if key not in self._kept:
            self._kept[key] = self._plan.get(key)

    def __getitem__(self, key: TopicPartitionKey) -> FetchPartition:
        kept = self._kept
        entry = kept[key] if key in kept else self._plan.get(key)
        if entry is None:
            raise KeyError(key)
        return entry

    def get(  # type: ignore[override]
        self, key: TopicPartitionKey, default: FetchPartition | None = None
    ) -> FetchPartition | None:
        """`Mapping.get` without its raised and caught KeyError: one call per answered
        partition of every fetch."""
        kept = self._kept
        entry = kept[key] if key in kept else self._plan.get(key)
        return default if entry is None else entry

    def __iter__(self) -> Iterator[TopicPartitionKey]:
        kept = self._kept
        for key in self._plan:
            if key not in kept:
                yield key
        for key, entry in kept.items():
            if entry is not None:
                yield key

    def __len__(self) -> int:
        return sum(1 for _ in self)


def _truncate_on_divergence(
    partition: Partition,
    leader_epoch: int,
    leader_end_offset: int,
    leader_log_start_offset: int,
    now_ms: int,
) -> None:
    """Truncate as the partition's core decides on a diverging epoch (`partition_core`)."""
    plog = partition.log
    cache = plog.leader_epoch_cache

    def follower_end_offset_for(epoch: int) -> tuple[int, int] | None:
        if cache.latest_epoch is None:
            return None
        end = cache.end_offset_for(epoch, plog.log_end_offset)
        return (end.leader_epoch, end.end_offset)

    (decided,) = partition.core.step(
        DivergingEpochAnswered(
            leader_epoch,
            leader_end_offset,
            leader_log_start_offset,
            plog.log_end_offset,
            plog.high_watermark,
            follower_end_offset_for,
        ),
        now_ms,
    )
    if isinstance(decided, RestartLogAt):
        log.info(
            "%s: diverging epoch %d ends at %d, at or below the leader's log start %d; "
            "restarting the log there",
            partition.name,
            leader_epoch,
            leader_end_offset,
            decided.offset,
        )
        partition.truncate_fully_and_start_at(decided.offset)
        return
    assert isinstance(decided, TruncateTo)
    if decided.offset < plog.high_watermark:
        log.warning(
            "%s: truncating to %d, below the high watermark %d (diverging epoch %d@%d)",
            partition.name,
            decided.offset,
            plog.high_watermark,
            leader_epoch,
            leader_end_offset,
        )
    else:
        log.info(
            "%s: truncating to %d after diverging epoch %d ending at %d%s",
            partition.name,
            decided.offset,
            leader_epoch,
            leader_end_offset,
            "" if decided.completed else " (not done: asks again)",
        )
    # Always through the log: even a target at the LEO drops a dangling epoch entry
    # (docs/design/replication.md#leader-epoch-cache).
    partition.truncate_to(decided.offset)


def _follow_out_of_range(partition: Partition, result: FetchPartitionResult, now_ms: int) -> bool:
    """docs/design/replication.md#follower-out-of-range as the partition's core decides, with
    the leader's LEO and log start offset from the answer; False: back off."""
    plog = partition.log
    leader_log_end_offset = result.log_end_offset
    leader_log_start_offset = result.log_start_offset
    (decided,) = partition.core.step(
        OffsetOutOfRangeAnswered(
            leader_log_end_offset, leader_log_start_offset, plog.log_end_offset
        ),
        now_ms,
    )
    if isinstance(decided, TruncateTo):
        log.warning(
            "%s: the leader's LEO %d is below ours %d; truncating to it",
            partition.name,
            leader_log_end_offset,
            plog.log_end_offset,
        )
        partition.truncate_to(decided.offset)
    elif isinstance(decided, RestartLogAt):
        log.warning(
            "%s: the leader's log starts at %d, past our LEO %d; restarting the log there",
            partition.name,
            leader_log_start_offset,
            plog.log_end_offset,
        )
        partition.truncate_fully_and_start_at(decided.offset)
    else:
        assert isinstance(decided, BackOff)
        log.warning(
            "%s: OFFSET_OUT_OF_RANGE at %d (leader LEO %d, log start %d): %s",
            partition.name,
            plog.log_end_offset,
            leader_log_end_offset,
            leader_log_start_offset,
            result.error,
        )
        return False
    partition.sync_follower_offsets()
    return True
