"""The exactly-once check of `replog demo`: what the producer was told against what the log holds.

Pure: it takes the acknowledged and the failed sends and the records read back (each
partition from its log start up to its high watermark, in offset order) and returns the
figures and every violation.

Rules:
- Every acknowledged event (key, seq) must be in the log exactly once: absent is a loss,
  twice a duplicate.
- No event may be in the log twice, acknowledged or not (idempotence forbids duplicates from
  retries), and nothing may be there that was never sent (a stray record).
- A key's events must appear in increasing `seq` order: the records of one key all go to one
  partition and the idempotent producer keeps each partition's records in send order. Gaps
  are allowed only where a send failed.
- A failed send is not a loss: its outcome may be indeterminate (a timeout after the broker
  wrote it), so it may or may not be in the log; both are reported, neither fails the check.
- Every send must have completed (acknowledged or failed) before the check: one that did not
  is reported as unresolved and fails it.
- Records that are not demo events fail the check (the topic belongs to the demo).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Set
from dataclasses import dataclass, field

from replog.cli.demo_events import Event

EventId = tuple[str, int]  # (key, seq)
MAX_EXAMPLES = 5  # violations listed by name per kind; the rest are counted


@dataclass(frozen=True, slots=True)
class LogRecord:
    partition: int
    offset: int
    event: Event | None  # None: not a demo event
    problem: str = ""  # why it is not one


@dataclass(frozen=True)
class Verification:
    records_in_log: int
    per_partition: Mapping[int, int]
    acknowledged: int
    acknowledged_found_once: int
    failed: int
    failed_in_log: int
    unresolved: int
    total_amount: int  # cents, over every demo event in the log
    lost: list[EventId] = field(default_factory=list)
    duplicated: list[EventId] = field(default_factory=list)
    out_of_order: list[str] = field(default_factory=list)
    stray: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (
            self.lost or self.duplicated or self.out_of_order or self.stray or self.unresolved
        )

    def problems(self) -> list[str]:
        """One line per kind of violation, naming the first few."""
        lines = []
        if self.unresolved:
            lines.append(f"{self.unresolved} sends neither acknowledged nor failed")
        for what, items in (
            ("acknowledged events missing from the log (lost)", self.lost),
            ("events in the log more than once (duplicates)", self.duplicated),
            ("keys whose events are out of order", self.out_of_order),
            ("records that were never sent", self.stray),
        ):
            if items:
                lines.append(f"{len(items)} {what}: {_examples(items)}")
        return lines


def _examples(items: list[EventId] | list[str]) -> str:
    shown = [f"{i[0]} seq {i[1]}" if isinstance(i, tuple) else i for i in items[:MAX_EXAMPLES]]
    more = len(items) - len(shown)
    return ", ".join(shown) + (f" and {more} more" if more else "")


def verify(
    acknowledged: Set[EventId],
    failed: Set[EventId],
    sent: int,
    records: Iterable[LogRecord],
) -> Verification:
    """Check `records` (each partition in offset order) against the producer's outcomes."""
    seen: Counter[EventId] = Counter()
    per_partition: Counter[int] = Counter()
    last_seq: dict[str, tuple[int, int, int]] = {}  # key -> (seq, partition, offset)
    out_of_order: list[str] = []
    stray: list[str] = []
    total_amount = 0
    count = 0
    for record in records:
        count += 1
        per_partition[record.partition] += 1
        where = f"{record.partition}@{record.offset}"
        event = record.event
        if event is None:
            stray.append(f"{where} ({record.problem})")
            continue
        event_id = (event.key, event.seq)
        if event_id not in acknowledged and event_id not in failed:
            stray.append(f"{where} ({event.key} seq {event.seq})")
            continue
        seen[event_id] += 1
        total_amount += event.amount
        previous = last_seq.get(event.key)
        if previous is not None and (previous[0] >= event.seq or previous[1] != record.partition):
            out_of_order.append(
                f"{event.key} seq {event.seq} at {where} after seq {previous[0]} at "
                f"{previous[1]}@{previous[2]}"
            )
        last_seq[event.key] = (event.seq, record.partition, record.offset)
    lost = sorted(e for e in acknowledged if seen[e] == 0)
    duplicated = sorted(e for e, n in seen.items() if n > 1)
    return Verification(
        records_in_log=count,
        per_partition=dict(sorted(per_partition.items())),
        acknowledged=len(acknowledged),
        acknowledged_found_once=sum(1 for e in acknowledged if seen[e] == 1),
        failed=len(failed),
        failed_in_log=sum(1 for e in failed if seen[e] > 0),
        unresolved=max(0, sent - len(acknowledged) - len(failed)),
        total_amount=total_amount,
        lost=lost,
        duplicated=duplicated,
        out_of_order=out_of_order,
        stray=stray,
    )
