"""One partition replica's decisions as a state machine: `step(event, now_ms) -> effects`.

Rules (docs/design/replication.md#acks-and-min-isr, #high-watermark, #isr-shrink,
#isr-expansion; the leader rules themselves are `leader_state`'s, the idempotence rules
`producer_state`'s):
- Produce (`ProduceArrived`), on a leader only (otherwise NOT_LEADER_OR_FOLLOWER): with acks=-1,
  a committed ISR below the effective min ISR is NOT_ENOUGH_REPLICAS and a full produce
  purgatory is UNKNOWN_SERVER_ERROR (`PurgatoryFullError`), both before anything is appended.
  Then the idempotence check on the batch headers: a retry of batches already in the log is
  answered with their offsets (`AnswerDuplicate`) and nothing is appended; a refused sequence
  or epoch is the answer unless the batches fail validation (corruption reports as itself);
  anything else is appended (`AppendToLog`, then `LogAppended`).
- After the append (or a duplicate), acks=0 and acks=1 are answered at once; acks=-1 is
  answered at once when `acks_all_outcome` is done (success, or
  NOT_ENOUGH_REPLICAS_AFTER_APPEND), else parked (`ParkProduce`) until a re-check
  (`ParkedProduceWoken`) finds it done, or finds this broker no longer leading:
  NOT_LEADER_OR_FOLLOWER.
- An append that moves the HW re-checks every waiter (`AdvanceHighWatermark`); one that does
  not wakes only fetches (a follower's fetch bounded by the LEO may now have data).
- A follower fetch records its progress; a new expansion is sent, a moved HW re-checks every
  waiter, a moved follower log start offset re-checks DeleteRecords (the low watermark).
- A committed AlterPartition answer that moves no HW re-checks produces and DeleteRecords (they
  read the maximal ISR); a failure the controller asks to retry is sent again
  `alter_partition_retry_ms` later (`ScheduleWakeup`, then `TimerFired`), never in a hot loop.
- The periodic ISR check (`TimerFired` with `check_isr`) shrinks the ISR of followers that are
  not caught up.
- The AlterPartition sender collects what to send (`AlterPartitionCollected`): the change to
  send is handed over (`HandOverAlterPartition`) once, and again only once it was answered,
  another change replaced it, or the leadership changed (a new leadership sends anew).
- A refreshed image whose ISR eligibility differs has every fetch session read the partition
  again (`FetchNews`): a follower parked under the previous eligibility may join now.
- A parked produce whose request times out answers REQUEST_TIMED_OUT naming the offset.
- DeleteRecords (docs/design/replication.md#low-watermark), on a leader only: a log whose
  cleanup.policy lacks `delete` is POLICY_VIOLATION; the offset (-1: the HW) must be within
  [0, HW] (OFFSET_OUT_OF_RANGE); a request that may wait and would (the low watermark, with the
  log start moved, below the offset) is refused with a full DeleteRecords purgatory, before
  the log start moves. Then the log start moves (`MoveLogStart`); a rising log start lifts the
  HW, else a moved one wakes fetches; the request is done once the low watermark reaches the
  offset (answered with it), else parked; it answers NOT_LEADER_OR_FOLLOWER once this broker
  no longer leads, and REQUEST_TIMED_OUT with the low watermark (-1 without a leader) at its
  deadline.
- A follower told of a diverging epoch truncates by KIP-101/279 (`follower_truncation`), never
  to its HW; a truncation point at or below the leader's log start restarts the log at that
  log start instead (docs/design/replication.md#follower-truncation). Told OFFSET_OUT_OF_RANGE
  (docs/design/replication.md#follower-out-of-range): a leader LEO below its own truncates to
  it, a leader log start past its LEO restarts the log there, anything else backs off.
- A new leadership or a new leader epoch first records the epoch at the log end offset in the
  leader-epoch cache (`AssignLeaderEpoch`).
- A new leadership or an update of it re-checks every waiter and re-sends what is pending; a
  lost leadership re-checks every waiter (each then answers NOT_LEADER_OR_FOLLOWER) and drops
  a scheduled retry.

Theory of operation: no I/O, clock or asyncio. The shell captures offsets from the log into
events, executes effects in order, and feeds I/O results back as events. The core holds the
leader state (`leader`, None when not leading), the replica's producer table (read here, updated
by the shell's appends), the time of a scheduled AlterPartition retry and the change last
handed to the sender. Which requests wait
on which partitions, and their deadlines, stay with the shell's purgatory: one request spans
many partitions, each partition's core answers only for its own part.
"""

from __future__ import annotations

from collections.abc import Callable
from uuid import UUID

from replog.errors import (
    KafkaError,
    NotLeaderOrFollowerError,
    OffsetOutOfRangeError,
    PolicyViolationError,
    PurgatoryFullError,
    RequestTimedOutError,
)
from replog.record.header import iter_frames, read_header, validate_batch
from replog.replication.follower_truncation import offset_truncation_state
from replog.replication.leader_state import IsrChange, PartitionLeaderState
from replog.replication.messages import ACKS_ALL, NO_OFFSET
from replog.replication.partition_effects import (
    ANSWER_OK,
    APPEND,
    BACK_OFF,
    COMPLETE_OK,
    FETCH_NEWS,
    WAKE_ALL,
    WAKE_DELETES,
    WAKE_FETCHES,
    WAKE_NOT_FETCHES,
    AdvanceHighWatermark,
    AnswerDuplicate,
    AnswerProduce,
    AssignLeaderEpoch,
    CompleteDeleteRecords,
    CompleteParked,
    HandOverAlterPartition,
    MoveLogStart,
    ParkDeleteRecords,
    ParkProduce,
    PartitionEffect,
    Refuse,
    RestartLogAt,
    ScheduleWakeup,
    SendAlterPartition,
    TruncateTo,
)
from replog.replication.partition_events import (
    AlterPartitionAnswered,
    AlterPartitionCollected,
    DeleteRecordsArrived,
    DivergingEpochAnswered,
    FollowerFetchArrived,
    ImageRefreshed,
    LeadershipChanged,
    LeadershipLost,
    LogAppended,
    LogStartMoved,
    OffsetOutOfRangeAnswered,
    ParkedDeleteRecordsExpired,
    ParkedDeleteRecordsWoken,
    ParkedProduceExpired,
    ParkedProduceWoken,
    PartitionEvent,
    ProduceArrived,
    TimerFired,
)
from replog.replication.producer_state import ProducerStateTable

Effects = tuple[PartitionEffect, ...]
_NONE: Effects = ()


class PartitionCore:
    """One partition replica on this broker (module docstring). No I/O."""

    __slots__ = (
        "alter_partition_retry_ms",
        "handed_over",
        "leader",
        "local_broker_id",
        "partition",
        "producers",
        "retry_at_ms",
        "topic",
        "topic_id",
        "where",
    )

    def __init__(
        self,
        *,
        topic: str,
        topic_id: UUID,
        partition: int,
        local_broker_id: int,
        producers: ProducerStateTable,
        alter_partition_retry_ms: int,
    ) -> None:
        self.topic = topic
        self.topic_id = topic_id
        self.partition = partition
        self.local_broker_id = local_broker_id
        self.where = f"{topic}-{partition}"
        self.producers = producers
        self.alter_partition_retry_ms = alter_partition_retry_ms
        self.leader: PartitionLeaderState | None = None
        self.retry_at_ms: int | None = None  # a failed AlterPartition is sent again then
        # The change the sender collected and has not had answered: not handed over again.
        self.handed_over: IsrChange | None = None

    def step(self, event: PartitionEvent, now_ms: int) -> Effects:
        """The effects of `event` at `now_ms`, to execute in order."""
        handler = _HANDLERS.get(type(event))
        if handler is None:
            raise TypeError(f"{self.where}: not a partition event: {event!r}")
        return handler(self, event, now_ms)

    # --- produce ------------------------------------------------------------------------------

    def _not_leader(self) -> NotLeaderOrFollowerError:
        return NotLeaderOrFollowerError(
            f"{self.where}: broker {self.local_broker_id} is not the leader"
        )

    def _produce(self, event: ProduceArrived, now_ms: int) -> Effects:
        leader = self.leader
        if leader is None:
            return (Refuse(self._not_leader()),)
        if event.acks == ACKS_ALL:
            try:
                leader.check_enough_replicas()
            except KafkaError as error:
                return (Refuse(error),)
            if event.waiting_produces >= event.waiting_produces_max:
                return (
                    Refuse(
                        PurgatoryFullError(
                            f"{self.where}: {event.waiting_produces} produce requests are "
                            "already waiting for acks=all"
                        )
                    ),
                )
        records = event.records
        headers = [read_header(records, position) for position, _ in iter_frames(records)]
        if any(h.producer_id >= 0 for h in headers):
            try:
                duplicate = self.producers.check_batches(headers, event.origin)
            except KafkaError as error:
                # Corruption is reported as itself, not as a sequence error.
                try:
                    for position, _ in iter_frames(records):
                        validate_batch(records, position, where=self.where)
                except KafkaError as corrupt:
                    return (Refuse(corrupt),)
                return (Refuse(error),)
            if duplicate is not None:
                return (
                    AnswerDuplicate(duplicate),
                    self._acks_answer(leader, event.acks, duplicate.last_offset + 1),
                )
        return (APPEND,)

    def _appended(self, event: LogAppended, now_ms: int) -> Effects:
        leader = self.leader
        if leader is None:
            return (Refuse(self._not_leader()),)
        moved = leader.on_leader_append(
            leader_log_end_offset=event.leader_log_end_offset, now_ms=now_ms
        )
        return (
            AdvanceHighWatermark(leader.high_watermark) if moved else WAKE_FETCHES,
            self._acks_answer(leader, event.acks, event.last_offset + 1),
        )

    @staticmethod
    def _acks_answer(
        leader: PartitionLeaderState, acks: int, required_offset: int
    ) -> AnswerProduce | ParkProduce:
        if acks != ACKS_ALL:
            return ANSWER_OK
        done, error = leader.acks_all_outcome(required_offset)
        if not done:
            return ParkProduce(required_offset)
        return ANSWER_OK if error is None else AnswerProduce(error)

    def _parked_woken(self, event: ParkedProduceWoken, now_ms: int) -> Effects:
        leader = self.leader
        if leader is None:
            return (
                CompleteParked(
                    NotLeaderOrFollowerError(
                        f"{self.where}: broker {self.local_broker_id} stopped leading before "
                        f"offset {event.required_offset - 1} was replicated"
                    )
                ),
            )
        done, error = leader.acks_all_outcome(event.required_offset)
        if not done:
            return _NONE
        return (COMPLETE_OK if error is None else CompleteParked(error),)

    def _parked_expired(self, event: ParkedProduceExpired, now_ms: int) -> Effects:
        return (
            CompleteParked(
                RequestTimedOutError(
                    f"{self.where}: offset {event.required_offset - 1} was not replicated to the "
                    "ISR before the request's timeout"
                )
            ),
        )

    # --- DeleteRecords ------------------------------------------------------------------------

    def _delete_records(self, event: DeleteRecordsArrived, now_ms: int) -> Effects:
        leader = self.leader
        if leader is None:
            return (Refuse(self._not_leader()),)
        policy = event.cleanup_policy
        if "delete" not in (p.strip() for p in policy.split(",")):
            return (
                Refuse(
                    PolicyViolationError(
                        f"{self.where}: records cannot be deleted with cleanup.policy={policy}"
                    )
                ),
            )
        high_watermark = leader.high_watermark
        offset = high_watermark if event.offset == -1 else event.offset
        if offset < 0 or offset > high_watermark:
            return (
                Refuse(
                    OffsetOutOfRangeError(
                        f"{self.where}: cannot delete records before offset {event.offset}: "
                        f"outside [0, high watermark {high_watermark}]"
                    )
                ),
            )
        # The bound is checked before the log start moves, as produce checks before its
        # append: refused after the move, the records would be deleted and the caller told it
        # failed. One whose low watermark reaches the offset at once never waits.
        log_start_after = max(event.leader_log_start_offset, offset)
        if (
            event.may_wait
            and leader.low_watermark(log_start_after) < offset
            and event.waiting >= event.waiting_max
        ):
            return (
                Refuse(
                    PurgatoryFullError(
                        f"{self.where}: {event.waiting} DeleteRecords requests are already "
                        f"waiting for their low watermarks; nothing deleted below offset {offset}"
                    )
                ),
            )
        return (MoveLogStart(offset),)

    def _log_start_moved(self, event: LogStartMoved, now_ms: int) -> Effects:
        leader = self.leader
        if leader is None:
            return (Refuse(self._not_leader()),)
        log_start = event.leader_log_start_offset
        if leader.on_log_start_offset(log_start):
            moved: Effects = (AdvanceHighWatermark(leader.high_watermark),)
        elif event.moved:
            # Parked fetches answer with the log start offset: they read this partition again
            # when they complete (none waits below it: the log start never passes the HW).
            moved = (WAKE_FETCHES,)
        else:
            moved = _NONE
        low_watermark = leader.low_watermark(log_start)
        if low_watermark >= event.offset:
            return (*moved, CompleteDeleteRecords(low_watermark))
        return (*moved, ParkDeleteRecords(event.offset))

    def _parked_delete_records_woken(self, event: ParkedDeleteRecordsWoken, now_ms: int) -> Effects:
        leader = self.leader
        if leader is None:
            return (
                CompleteDeleteRecords(
                    None,
                    NotLeaderOrFollowerError(
                        f"{self.where}: broker {self.local_broker_id} stopped leading before the "
                        f"low watermark reached {event.offset}"
                    ),
                ),
            )
        low_watermark = leader.low_watermark(event.leader_log_start_offset)
        if low_watermark >= event.offset:
            return (CompleteDeleteRecords(low_watermark),)
        return _NONE

    def _parked_delete_records_expired(
        self, event: ParkedDeleteRecordsExpired, now_ms: int
    ) -> Effects:
        leader = self.leader
        low_watermark = (
            NO_OFFSET if leader is None else leader.low_watermark(event.leader_log_start_offset)
        )
        return (
            CompleteDeleteRecords(
                low_watermark,
                RequestTimedOutError(
                    f"{self.where}: the low watermark {low_watermark} did not reach "
                    f"{event.offset} before the request's timeout"
                ),
            ),
        )

    # --- replication --------------------------------------------------------------------------

    def _follower_fetch(self, event: FollowerFetchArrived, now_ms: int) -> Effects:
        leader = self.leader
        if leader is None:
            return (Refuse(self._not_leader()),)
        try:
            update = leader.on_follower_fetch(
                replica_id=event.replica_id,
                broker_epoch=event.broker_epoch,
                fetch_offset=event.fetch_offset,
                log_start_offset=event.log_start_offset,
                leader_log_end_offset=event.leader_log_end_offset,
                now_ms=now_ms,
            )
        except KafkaError as error:
            return (Refuse(error),)
        change = update.isr_change
        if update.high_watermark_moved:
            hw = AdvanceHighWatermark(leader.high_watermark)
            return (hw,) if change is None else (SendAlterPartition(change), hw)
        effects: Effects = _NONE if change is None else (SendAlterPartition(change),)
        if update.follower_log_start_offset_moved:
            effects += (WAKE_DELETES,)
        return effects

    def _alter_partition_collected(self, event: AlterPartitionCollected, now_ms: int) -> Effects:
        leader = self.leader
        change = None if leader is None else leader.isr_change_to_send
        if change is None:
            self.handed_over = None
            return _NONE
        if change == self.handed_over:
            return _NONE
        self.handed_over = change
        return (HandOverAlterPartition(change),)

    def _alter_partition_answered(self, event: AlterPartitionAnswered, now_ms: int) -> Effects:
        if self.handed_over == event.change:
            self.handed_over = None
        leader = self.leader
        if leader is None:
            return _NONE
        if event.error is None:
            moved = leader.on_isr_change_committed(
                isr=event.isr,
                leader_epoch=event.leader_epoch,
                partition_epoch=event.partition_epoch,
                leader_log_end_offset=event.leader_log_end_offset,
                now_ms=now_ms,
                change=event.change,
            )
            return (
                # acks=all waiters read the maximal ISR, which just changed.
                AdvanceHighWatermark(leader.high_watermark) if moved else WAKE_NOT_FETCHES,
                SendAlterPartition(leader.isr_change_to_send),
            )
        if leader.on_isr_change_failed(event.error, change=event.change):
            # Sent again after a back-off, so a dead controller does not make a hot loop.
            self.retry_at_ms = now_ms + self.alter_partition_retry_ms
            return (ScheduleWakeup(self.retry_at_ms),)
        return (SendAlterPartition(leader.isr_change_to_send),)

    def _timer_fired(self, event: TimerFired, now_ms: int) -> Effects:
        leader = self.leader
        if leader is None:
            return _NONE
        effects: Effects = _NONE
        retry_at_ms = self.retry_at_ms
        if retry_at_ms is not None and retry_at_ms <= now_ms:
            self.retry_at_ms = None
            effects = (SendAlterPartition(leader.isr_change_to_send),)
        if event.check_isr:
            change = leader.maybe_shrink_isr(
                leader_log_end_offset=event.leader_log_end_offset, now_ms=now_ms
            )
            if change is not None:
                effects += (SendAlterPartition(change, shrink=True),)
        return effects

    # --- the follower side ---------------------------------------------------------------------

    def _diverging_epoch_answered(self, event: DivergingEpochAnswered, now_ms: int) -> Effects:
        state = offset_truncation_state(
            leader_epoch=event.leader_epoch,
            leader_end_offset=event.leader_end_offset,
            follower_end_offset_for=event.follower_end_offset_for,
            follower_log_end_offset=event.follower_log_end_offset,
            initial_fetch_offset=event.follower_high_watermark,
        )
        leader_log_start = event.leader_log_start_offset
        if leader_log_start >= 0 and state.offset <= leader_log_start:
            # Nothing of ours is wanted: from the truncation point on we diverge, and below the
            # leader's log start it deleted everything. Truncating to that offset would also
            # strand us when DeleteRecords left it inside a batch: the leader answers a fetch
            # there with the whole batch, from its base below our LEO, and only an empty log
            # may take that (tests/replication/test_random_faults.py holds this).
            return (RestartLogAt(leader_log_start),)
        return (TruncateTo(state.offset, state.truncation_completed),)

    def _offset_out_of_range_answered(
        self, event: OffsetOutOfRangeAnswered, now_ms: int
    ) -> Effects:
        leader_end = event.leader_log_end_offset
        if 0 <= leader_end < event.follower_log_end_offset:
            return (TruncateTo(leader_end),)
        if event.leader_log_start_offset > event.follower_log_end_offset:
            return (RestartLogAt(event.leader_log_start_offset),)
        # Nothing local explains it (the leader could not place our epoch, or the answer
        # lacked its offsets): retry after a back-off rather than spin.
        return (BACK_OFF,)

    # --- metadata -----------------------------------------------------------------------------

    def _leadership_changed(self, event: LeadershipChanged, now_ms: int) -> Effects:
        leader = self.leader
        registration = event.registration
        self.handed_over = None  # whatever the sender had is sent anew
        # A follower may hold entries of an epoch this replica never saw; a new epoch's entry
        # is durable before any append of it and before any follower can ask.
        assign: Effects = (
            (AssignLeaderEpoch(registration.leader_epoch, event.leader_log_end_offset),)
            if leader is None or leader.leader_epoch != registration.leader_epoch
            else _NONE
        )
        if leader is None:
            leader = self.leader = PartitionLeaderState(
                topic=self.topic,
                topic_id=self.topic_id,
                partition=self.partition,
                local_broker_id=self.local_broker_id,
                registration=registration,
                leader_log_end_offset=event.leader_log_end_offset,
                high_watermark=event.log_high_watermark,
                config=event.config,
                eligibility=event.eligibility,
                now_ms=now_ms,
            )
            moved = leader.high_watermark != event.log_high_watermark
        else:
            moved = leader.update_registration(
                registration, leader_log_end_offset=event.leader_log_end_offset, now_ms=now_ms
            )
        # A new leadership or ISR: waiting produces and fetches re-check (acks, epochs).
        if moved:
            return (
                *assign,
                AdvanceHighWatermark(leader.high_watermark),
                WAKE_ALL,
                SendAlterPartition(leader.isr_change_to_send),
            )
        return (*assign, WAKE_ALL, SendAlterPartition(leader.isr_change_to_send))

    def _leadership_lost(self, event: LeadershipLost, now_ms: int) -> Effects:
        self.leader = None
        self.retry_at_ms = None
        self.handed_over = None
        # Waiting produces, fetches and deletions now answer NOT_LEADER_OR_FOLLOWER.
        return (WAKE_ALL,)

    def _image_refreshed(self, event: ImageRefreshed, now_ms: int) -> Effects:
        leader = self.leader
        if leader is None:
            return _NONE
        leo = event.leader_log_end_offset
        eligibility = event.eligibility
        # Read by every follower fetch's ISR expansion check (identity first: the shell keeps
        # one object per image's cluster).
        news: Effects = (
            (FETCH_NEWS,)
            if eligibility is not leader.eligibility and eligibility != leader.eligibility
            else _NONE
        )
        moved = leader.update_eligibility(
            event.eligibility, leader_log_end_offset=leo, now_ms=now_ms
        )
        if event.config != leader.config:
            moved = (
                leader.update_config(event.config, leader_log_end_offset=leo, now_ms=now_ms)
                or moved
            )
        return (*news, AdvanceHighWatermark(leader.high_watermark)) if moved else news


# One table for every core (a replica is made per partition: no per-instance bound methods).
_HANDLERS: dict[type, Callable[[PartitionCore, PartitionEvent, int], Effects]] = {
    ProduceArrived: PartitionCore._produce,  # type: ignore[dict-item]
    LogAppended: PartitionCore._appended,  # type: ignore[dict-item]
    ParkedProduceWoken: PartitionCore._parked_woken,  # type: ignore[dict-item]
    ParkedProduceExpired: PartitionCore._parked_expired,  # type: ignore[dict-item]
    DeleteRecordsArrived: PartitionCore._delete_records,  # type: ignore[dict-item]
    LogStartMoved: PartitionCore._log_start_moved,  # type: ignore[dict-item]
    ParkedDeleteRecordsWoken: PartitionCore._parked_delete_records_woken,  # type: ignore[dict-item]
    ParkedDeleteRecordsExpired: PartitionCore._parked_delete_records_expired,  # type: ignore[dict-item]
    FollowerFetchArrived: PartitionCore._follower_fetch,  # type: ignore[dict-item]
    LeadershipChanged: PartitionCore._leadership_changed,  # type: ignore[dict-item]
    LeadershipLost: PartitionCore._leadership_lost,  # type: ignore[dict-item]
    ImageRefreshed: PartitionCore._image_refreshed,  # type: ignore[dict-item]
    AlterPartitionAnswered: PartitionCore._alter_partition_answered,  # type: ignore[dict-item]
    AlterPartitionCollected: PartitionCore._alter_partition_collected,  # type: ignore[dict-item]
    TimerFired: PartitionCore._timer_fired,  # type: ignore[dict-item]
    DivergingEpochAnswered: PartitionCore._diverging_epoch_answered,  # type: ignore[dict-item]
    OffsetOutOfRangeAnswered: PartitionCore._offset_out_of_range_answered,  # type: ignore[dict-item]
}
