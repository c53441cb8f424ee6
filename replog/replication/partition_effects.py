"""What a partition core asks its shell to do: the outputs of `PartitionCore.step`.

Rules:
- Effects are executed in the order `step` returns them, before the next event is stepped;
  an effect that needs I/O (an append) comes back to the core as an event (`LogAppended`).
- The shell adds no decision of its own: which waiters to re-check, what error to answer,
  when to send an AlterPartition and when to wake the core again are all here.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from replog.common.frozen_init import fast_frozen_init
from replog.errors import KafkaError
from replog.replication.leader_state import IsrChange
from replog.replication.messages import DeleteRecordsPartitionResult
from replog.replication.producer_state import BatchMetadata


@fast_frozen_init
@dataclass(frozen=True, slots=True)
class AssignLeaderEpoch:
    """Record in the leader-epoch cache, durably and before anything else, that
    `leader_epoch` starts at `start_offset` (docs/design/replication.md#leader-epoch-cache)."""

    leader_epoch: int
    start_offset: int


@fast_frozen_init
@dataclass(frozen=True, slots=True)
class AppendToLog:
    """Append the produce's batches as leader, then step `LogAppended`."""


@fast_frozen_init
@dataclass(frozen=True, slots=True)
class Refuse:
    """Answer the event's request (this partition's part of it) with `error`; nothing was
    appended or recorded."""

    error: KafkaError


@fast_frozen_init
@dataclass(frozen=True, slots=True)
class AnswerDuplicate:
    """An idempotent retry of batches already in the log: the answer carries their offsets
    and nothing is appended; the answer itself (`AnswerProduce`, `ParkProduce`) follows."""

    batch: BatchMetadata


@fast_frozen_init
@dataclass(frozen=True, slots=True)
class AnswerProduce:
    """Answer the produce now: `error` None is success (the shell fills in the offsets)."""

    error: KafkaError | None = None


@fast_frozen_init
@dataclass(frozen=True, slots=True)
class ParkProduce:
    """An acks=all produce waits until the HW reaches `required_offset`: park it, and step
    `ParkedProduceWoken` whenever a `WakeWaiters` with `produce` names this partition."""

    required_offset: int


@fast_frozen_init
@dataclass(frozen=True, slots=True)
class CompleteParked:
    """The parked produce that was woken is done: with success (None) or `error`."""

    error: KafkaError | None = None


@fast_frozen_init
@dataclass(frozen=True, slots=True)
class MoveLogStart:
    """Raise the log start offset to `offset` (DeleteRecords), then step `LogStartMoved`."""

    offset: int


@fast_frozen_init
@dataclass(frozen=True, slots=True)
class ParkDeleteRecords:
    """A DeleteRecords waits until the low watermark reaches `offset`: park it, and step
    `ParkedDeleteRecordsWoken` whenever a `WakeWaiters` with `delete` names this partition."""

    offset: int


@fast_frozen_init
@dataclass(frozen=True, slots=True)
class CompleteDeleteRecords:
    """This partition's DeleteRecords is done: with `error` (None: success), and the low
    watermark to answer with (None: the answer carries none)."""

    low_watermark: int | None
    error: KafkaError | None = None

    def applied_to(self, result: DeleteRecordsPartitionResult) -> DeleteRecordsPartitionResult:
        """`result` with this completion's error and low watermark."""
        if self.low_watermark is None:
            return replace(result, error=self.error)
        return replace(result, error=self.error, low_watermark=self.low_watermark)


@fast_frozen_init
@dataclass(frozen=True, slots=True)
class TruncateTo:
    """A follower truncates its log to `offset` (through the log, even at its LEO: that drops a
    dangling epoch entry); `completed` False: it asks again with its new latest epoch."""

    offset: int
    completed: bool = True


@fast_frozen_init
@dataclass(frozen=True, slots=True)
class RestartLogAt:
    """A follower empties its log and restarts it at `offset` (the leader's log start)."""

    offset: int


@fast_frozen_init
@dataclass(frozen=True, slots=True)
class BackOff:
    """A follower's partition waits `replica.fetch.backoff.ms` before it is fetched again."""


@fast_frozen_init
@dataclass(frozen=True, slots=True)
class AdvanceHighWatermark:
    """The HW moved to `high_watermark`: mirror it into the log (its checkpoint) and re-check
    every waiter of this partition (produces, fetches, DeleteRecords)."""

    high_watermark: int


@fast_frozen_init
@dataclass(frozen=True, slots=True)
class WakeWaiters:
    """Re-check the named waiters of this partition (nothing about the HW moved)."""

    produce: bool = True
    fetch: bool = True
    delete: bool = True


@fast_frozen_init
@dataclass(frozen=True, slots=True)
class SendAlterPartition:
    """What to send the controller changed: `change` is the AlterPartition to send now (a
    shrink, an expansion or a KIP-704 recovery report); None: nothing is to be sent.
    `shrink`: the periodic ISR check made it (the shell reports those together)."""

    change: IsrChange | None
    shrink: bool = False


@fast_frozen_init
@dataclass(frozen=True, slots=True)
class HandOverAlterPartition:
    """Give `change` to the AlterPartition sender, which collects it (`AlterPartitionCollected`):
    a change is handed over once, until it is answered or the leadership changes."""

    change: IsrChange


@fast_frozen_init
@dataclass(frozen=True, slots=True)
class FetchNews:
    """Who may join the ISR changed: every fetch session reads this partition again at its
    next round (a follower parked under the previous eligibility may join now); nothing
    waiting in a purgatory is re-checked."""


@fast_frozen_init
@dataclass(frozen=True, slots=True)
class ScheduleWakeup:
    """Step `TimerFired` at `at_ms` (a failed AlterPartition's retry)."""

    at_ms: int


PartitionEffect = (
    AssignLeaderEpoch
    | AppendToLog
    | Refuse
    | AnswerDuplicate
    | AnswerProduce
    | ParkProduce
    | CompleteParked
    | MoveLogStart
    | ParkDeleteRecords
    | CompleteDeleteRecords
    | TruncateTo
    | RestartLogAt
    | BackOff
    | AdvanceHighWatermark
    | WakeWaiters
    | SendAlterPartition
    | HandOverAlterPartition
    | FetchNews
    | ScheduleWakeup
)

APPEND = AppendToLog()
ANSWER_OK = AnswerProduce()
COMPLETE_OK = CompleteParked()
WAKE_FETCHES = WakeWaiters(produce=False, fetch=True, delete=False)
WAKE_NOT_FETCHES = WakeWaiters(produce=True, fetch=False, delete=True)
WAKE_DELETES = WakeWaiters(produce=False, fetch=False, delete=True)
WAKE_ALL = WakeWaiters()
BACK_OFF = BackOff()
FETCH_NEWS = FetchNews()
