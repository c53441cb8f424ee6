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
- Records and response are immutable values.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from quorum.metadata.records import MetadataRecord

R = TypeVar("R")


@dataclass(frozen=True, slots=True)
class ControllerResult(Generic[R]):
    records: tuple[MetadataRecord, ...]
    response: R
    is_atomic: bool = False
    on_batch_end: Callable[[int], None] | None = None

    @classmethod
    def of(
        cls,
        records: Sequence[MetadataRecord],
        response: R,
        *,
        is_atomic: bool = False,
        on_batch_end: Callable[[int], None] | None = None,
    ) -> ControllerResult[R]:
        """A result from any sequence of records."""
        return cls(tuple(records), response, is_atomic, on_batch_end)
