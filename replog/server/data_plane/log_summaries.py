"""Log lines about many partitions at once: a count and the first few names.

A broker acting on thousands of partitions in one step (creating them, a leader moving away)
writes one line for the step, never one per partition: a line per partition cost its event
loop seconds at 10,000 partitions. Each partition's own line, where one exists, is at DEBUG.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

from replog.quorum.metadata.local_changes import LocalPartition

SHOWN = 5


def few_names(names: Sequence[str], shown: int = SHOWN, *, total: int | None = None) -> str:
    """`a, b, c`, or `a, b, c, d, e and 7 more` past `shown` names; `total` counts them when
    `names` holds only the first few."""
    count = len(names) if total is None else total
    head = ", ".join(names[:shown])
    return head + (f" and {count - shown} more" if count > shown else "")


def partition_names(partitions: Sequence[LocalPartition]) -> str:
    """`3 (a-0, b-1, c-2)`, `-` for none: a count and a few names of a broker's local changes
    of one kind (one publication may change thousands of partitions)."""
    if not partitions:
        return "-"
    first = [f"{p.topic_name}-{p.partition_id}" for p in partitions[:SHOWN]]
    return f"{len(partitions)} ({few_names(first, total=len(partitions))})"


class TurnSummary:
    """Per-partition log lines of one kind gathered over one event-loop turn and written as one
    line per kind: an answer about thousands of partitions (an AlterPartition response) reaches
    the broker one partition at a time, within one turn.

    `add(level, kind, name, single)`: `single` is the partition's own line, written as it is
    when the turn brings only that one; otherwise one line gives the kind, the count and the
    first names. Without a running event loop (synchronous callers) each line is written at
    once. The turn's flush is scheduled whether the lines are logged or not: what runs on the
    loop never depends on how logging is configured (a seeded simulation replays the same
    run whether its nodes' lines are shown or not).
    """

    def __init__(self, logger: logging.Logger) -> None:
        self._logger = logger
        self._pending: dict[tuple[int, str], list[tuple[str, str]]] = {}
        self._scheduled = False

    def add(self, level: int, kind: str, name: str, single: str) -> None:
        enabled = self._logger.isEnabledFor(level)
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            if enabled:
                self._logger.log(level, "%s", single)
            return
        if enabled:
            self._pending.setdefault((level, kind), []).append((name, single))
        if not self._scheduled:
            self._scheduled = True
            loop.call_soon(self.flush)

    def flush(self) -> None:
        pending, self._pending, self._scheduled = self._pending, {}, False
        for (level, kind), lines in pending.items():
            if len(lines) == 1:
                self._logger.log(level, "%s", lines[0][1])
                continue
            names = [name for name, _ in lines]
            self._logger.log(
                level,
                "%s for %d partitions: %s; the first: %s",
                kind,
                len(lines),
                few_names(names),
                lines[0][1],
            )
