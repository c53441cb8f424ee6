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
- A new leadership or an update of it re-checks every waiter and re-sends what is pending; a
  lost leadership re-checks every waiter (each then answers NOT_LEADER_OR_FOLLOWER) and drops
  a scheduled retry.

Theory of operation: no I/O, clock or asyncio. The shell captures offsets from the log into
events, executes effects in order, and feeds I/O results back as events. The core holds the
leader state (`leader`, None when not leading), the replica's producer table (read here, updated
by the shell's appends) and the time of a scheduled AlterPartition retry. Which requests wait
on which partitions, and their deadlines, stay with the shell's purgatory: one request spans
many partitions, each partition's core answers only for its own part.
"""

from __future__ import annotations

from collections.abc import Callable
from uuid import UUID

from replog.errors import (
    KafkaError,
    NotLeaderOrFollowerError,
    PurgatoryFullError,
)
from replog.record.header import iter_frames, read_header, validate_batch
from replog.replication.leader_state import PartitionLeaderState
from replog.replication.messages import ACKS_ALL
from replog.replication.partition_effects import (
    ANSWER_OK,
    APPEND,
    COMPLETE_OK,
    WAKE_ALL,
    WAKE_DELETES,
    WAKE_FETCHES,
    WAKE_NOT_FETCHES,
    AdvanceHighWatermark,
    AnswerDuplicate,
    AnswerProduce,
    CompleteParked,
    ParkProduce,
    PartitionEffect,
    Refuse,
    ScheduleWakeup,
    SendAlterPartition,
)
from replog.replication.partition_events import (
    AlterPartitionAnswered,
    FollowerFetchArrived,
    ImageRefreshed,
    LeadershipChanged,
    LeadershipLost,
    LogAppended,
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
                duplicate = self.producers.check_batches(headers)
            except KafkaError as error:
                # Corruption is reported as itself, not as a sequence error.
                for position, _ in iter_frames(records):
                    validate_batch(records, position, where=self.where)
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

    def _alter_partition_answered(self, event: AlterPartitionAnswered, now_ms: int) -> Effects:
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

    # --- metadata -----------------------------------------------------------------------------

    def _leadership_changed(self, event: LeadershipChanged, now_ms: int) -> Effects:
        leader = self.leader
        registration = event.registration
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
                AdvanceHighWatermark(leader.high_watermark),
                WAKE_ALL,
                SendAlterPartition(leader.isr_change_to_send),
            )
        return (WAKE_ALL, SendAlterPartition(leader.isr_change_to_send))

    def _leadership_lost(self, event: LeadershipLost, now_ms: int) -> Effects:
        self.leader = None
        self.retry_at_ms = None
        # Waiting produces, fetches and deletions now answer NOT_LEADER_OR_FOLLOWER.
        return (WAKE_ALL,)

    def _image_refreshed(self, event: ImageRefreshed, now_ms: int) -> Effects:
        leader = self.leader
        if leader is None:
            return _NONE
        leo = event.leader_log_end_offset
        moved = leader.update_eligibility(
            event.eligibility, leader_log_end_offset=leo, now_ms=now_ms
        )
        if event.config != leader.config:
            moved = (
                leader.update_config(event.config, leader_log_end_offset=leo, now_ms=now_ms)
                or moved
            )
        return (AdvanceHighWatermark(leader.high_watermark),) if moved else _NONE


# One table for every core (a replica is made per partition: no per-instance bound methods).
_HANDLERS: dict[type, Callable[[PartitionCore, PartitionEvent, int], Effects]] = {
    ProduceArrived: PartitionCore._produce,  # type: ignore[dict-item]
    LogAppended: PartitionCore._appended,  # type: ignore[dict-item]
    ParkedProduceWoken: PartitionCore._parked_woken,  # type: ignore[dict-item]
    FollowerFetchArrived: PartitionCore._follower_fetch,  # type: ignore[dict-item]
    LeadershipChanged: PartitionCore._leadership_changed,  # type: ignore[dict-item]
    LeadershipLost: PartitionCore._leadership_lost,  # type: ignore[dict-item]
    ImageRefreshed: PartitionCore._image_refreshed,  # type: ignore[dict-item]
    AlterPartitionAnswered: PartitionCore._alter_partition_answered,  # type: ignore[dict-item]
    TimerFired: PartitionCore._timer_fired,  # type: ignore[dict-item]
}
