"""Log lines about many partitions: a count and the first names (`few_names`,
`partition_names`), and per-partition lines of one event-loop turn written as one line per kind
(`TurnSummary`)."""

from __future__ import annotations

import asyncio
import logging
import uuid

import pytest

from replog.quorum.metadata.local_changes import LocalPartition
from replog.quorum.metadata.partition_registration import PartitionRegistration
from replog.server.data_plane.log_summaries import TurnSummary, few_names, partition_names

LOGGER = "replog.test.summaries"


def test_few_names_counts_what_it_does_not_show() -> None:
    assert few_names(["a", "b"]) == "a, b"
    assert few_names([f"p{i}" for i in range(7)]) == "p0, p1, p2, p3, p4 and 2 more"
    assert few_names(list("abcde"), total=10) == "a, b, c, d, e and 5 more"


def test_a_publications_local_changes_are_counted_and_a_few_named() -> None:
    """One publication may change thousands of a broker's partitions (the replica manager's
    `broker N at metadata offset M: lead ..., follow ..., delete ...` line)."""
    registration = PartitionRegistration(
        replicas=(1,), isr=(1,), leader=1, leader_epoch=0, partition_epoch=0
    )
    many = tuple(LocalPartition("many", uuid.UUID(int=7), p, registration, None) for p in range(8))
    assert partition_names(many) == "8 (many-0, many-1, many-2, many-3, many-4 and 3 more)"
    assert partition_names(many[:1]) == "1 (many-0)"
    assert partition_names(()) == "-"


@pytest.mark.asyncio
async def test_one_turns_lines_of_a_kind_become_one_line(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, LOGGER)
    summary = TurnSummary(logging.getLogger(LOGGER))
    for i in range(7):
        summary.add(logging.INFO, "ISR is now [1, 3]", f"t-{i}", f"t-{i}: ISR is now [1, 3] (e 5)")
    summary.add(logging.WARNING, "AlterPartition failed", "u-0", "u-0: AlterPartition failed: x")
    # Written at the end of the turn (its logger's records only: threads other tests left
    # behind may log meanwhile).
    assert [r for r in caplog.records if r.name == LOGGER] == []
    await asyncio.sleep(0)
    lines = [(r.levelno, r.getMessage()) for r in caplog.records]
    assert lines == [
        (
            logging.INFO,
            "ISR is now [1, 3] for 7 partitions: t-0, t-1, t-2, t-3, t-4 and 2 more; the first: "
            "t-0: ISR is now [1, 3] (e 5)",
        ),
        (logging.WARNING, "u-0: AlterPartition failed: x"),  # alone: its own line
    ]
    caplog.clear()
    summary.add(logging.INFO, "ISR is now [1]", "t-0", "t-0: ISR is now [1] (e 6)")
    await asyncio.sleep(0)  # a later turn starts afresh
    assert [r.getMessage() for r in caplog.records] == ["t-0: ISR is now [1] (e 6)"]


def test_without_an_event_loop_each_line_is_written_at_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, LOGGER)
    summary = TurnSummary(logging.getLogger(LOGGER))
    summary.add(logging.INFO, "kind", "t-0", "t-0: line")
    summary.add(logging.DEBUG, "kind", "t-1", "t-1: below the level, dropped")
    assert [r.getMessage() for r in caplog.records] == ["t-0: line"]
