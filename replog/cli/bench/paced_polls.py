"""How long a benchmark waits between two looks at something whose every look is costly
(Kafka's Metadata of every topic, a listing of every node's log directory): paced by the
progress, seldom far from the end and often near it.

Rules (`next_poll_s`):
- A quarter of the time what is left would take at the pace since the first look, and no more
  than `ELAPSED_FRACTION` of the time waited so far, between the shortest interval and
  `LONGEST_POLL_S`; the shortest interval while no pace is known yet or nothing is left.
- The pace alone would see the end late whenever it quickens more than fourfold, as a
  creation's does after its first replicas; the bound by the time waited keeps the end seen
  within a tenth of it, whatever the pace did.
"""

from __future__ import annotations

# The longest wait between two looks.
LONGEST_POLL_S = 5.0
# And the longest as a fraction of the time waited so far: 10,000 partitions' first replicas
# came at a twentieth of the pace of the rest, and the end, at 3.1 s, was seen at 5.8 s.
ELAPSED_FRACTION = 0.1


def next_poll_s(interval_s: float, elapsed_s: float, made: int, left: int) -> float:
    """How long to sleep before the next look (module Rules): `made` things came in
    `elapsed_s` since the first look, `left` are still to come; `interval_s` is the shortest
    wait."""
    if left <= 0 or made <= 0 or elapsed_s <= 0:
        return interval_s
    by_pace = left * elapsed_s / made / 4
    return max(interval_s, min(LONGEST_POLL_S, by_pace, elapsed_s * ELAPSED_FRACTION))
