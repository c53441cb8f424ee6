"""Log lines about many partitions at once: a count and the first few names.

A broker acting on thousands of partitions in one step (creating them, a leader moving away)
writes one line for the step, never one per partition: a line per partition cost its event
loop seconds at 10,000 partitions. Each partition's own line, where one exists, is at DEBUG.
"""

from __future__ import annotations

from collections.abc import Sequence

SHOWN = 5


def few_names(names: Sequence[str], shown: int = SHOWN, *, total: int | None = None) -> str:
    """`a, b, c`, or `a, b, c, d, e and 7 more` past `shown` names; `total` counts them when
    `names` holds only the first few."""
    count = len(names) if total is None else total
    head = ", ".join(names[:shown])
    return head + (f" and {count - shown} more" if count > shown else "")
