"""ControllerResult: what a write operation produces: records to append, and a response.

Every manager's write method returns one; the controller appends the records, replays them,
and hands the response to the caller once they commit.

Rules:
- Producing a result changes no durable (timeline) state: the records change it, when the
  controller replays them. It may change soft state (heartbeat sessions).
- `is_atomic` results must fit in one Raft batch, so they commit (or vanish) all together;
  non-atomic results (the default, as Kafka's `ControllerResult.of`) may be split into
  several batches, each committed on its own. Results whose records depend on their own
  offsets (a broker registration) or that must never be seen half done are atomic.
- `on_batch_end`, if given, is told the last offset of the write (for a write with no records:
  the offset its response waits for). The heartbeat uses it to remember the offset of a
  broker's controlled shutdown records.
- A write may be **stepped**, so that no single loop turn builds (and replays) an unbounded
  number of records: a result with `then` is one step of its write; the controller appends its
  records, and on a later loop turn runs `then` against the state they leave, until a result
  has no `then`. The last result's response answers the caller once its records commit; the
  earlier steps' responses are never read (`partial`). A result with `after` answers as usual,
  and the controller runs `after` (stepped the same way) on later turns with nobody waiting.
  Each step sees the latest state, other writes included: it re-derives what is left to do
  rather than trusting what an earlier step saw. A step's `on_drop`, if given, is called when
  the controller drops the write after that step because its records were refused (the step
  may hold soft state for the steps to come, such as an evacuation mark); a renounce drops
  every step and the soft state with it, without calling it.
- `notices` say which brokers the records fence or unfence and why (`fence_notices`): the
  controller hands them to its shell, for the log, once the records are appended.
- Records and response are immutable values.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar, cast

from replog.quorum.metadata.fence_notices import FenceNotice
from replog.quorum.metadata.records import MetadataRecord

R = TypeVar("R")

# The partition changes one step of a write for a broker event makes (fencing, unfencing,
# controlled shutdown, the sweeps): Kafka bounds its periodic elections at 1,000 a run, but a step
# of 1,000 (built, replayed and encoded in one loop turn) took 60-90 ms of a loaded machine's CPU
# at a 10,000-partition restart; 250 keep a turn near the 20 ms the Raft driver gives its inputs.
MAX_PARTITION_CHANGES_PER_STEP = 250


class StepContext(Protocol):
    """What a later step of a write is told (the controller passes its `WriteContext`)."""

    @property
    def now_ms(self) -> int: ...

    @property
    def next_write_offset(self) -> int: ...


# The next step of a write: run on a later loop turn, against the latest state.
Step = Callable[[StepContext], "ControllerResult[R]"]


@dataclass(frozen=True, slots=True)
class ControllerResult(Generic[R]):
    records: tuple[MetadataRecord, ...]
    response: R
    is_atomic: bool = False
    on_batch_end: Callable[[int], None] | None = None
    then: Step[R] | None = None
    after: Step[None] | None = None
    on_drop: Callable[[], None] | None = None
    notices: tuple[FenceNotice, ...] = ()

    @classmethod
    def of(
        cls,
        records: Sequence[MetadataRecord],
        response: R,
        *,
        is_atomic: bool = False,
        on_batch_end: Callable[[int], None] | None = None,
        after: Step[None] | None = None,
        notices: Sequence[FenceNotice] = (),
    ) -> ControllerResult[R]:
        """A result from any sequence of records."""
        return cls(
            tuple(records), response, is_atomic, on_batch_end, None, after, None, tuple(notices)
        )

    @classmethod
    def partial(
        cls,
        records: Sequence[MetadataRecord],
        then: Step[R],
        *,
        is_atomic: bool = False,
        on_batch_end: Callable[[int], None] | None = None,
        after: Step[None] | None = None,
        on_drop: Callable[[], None] | None = None,
    ) -> ControllerResult[R]:
        """One step of a write that goes on with `then`; it has no response of its own (the
        controller never reads it: the last step answers)."""
        return cls(tuple(records), cast(R, None), is_atomic, on_batch_end, then, after, on_drop)
