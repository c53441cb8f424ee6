"""Work in steps: a generator that yields between bounded pieces of its work and returns its
result, so that a caller on an event loop can let other tasks run between two pieces
(`RaftDriver.add_stepped_listener`), and any other caller can run it to its end at once.

Rules: a step changes nothing another party can see until the last one (each user says what it
keeps to itself meanwhile); abandoning steps half way is the user's to detect.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import TypeVar

T = TypeVar("T")

# Metadata records one step replays (the broker's loader, a standby controller) or decodes: a
# few milliseconds of PartitionChangeRecords.
REPLAY_STEP_RECORDS = 250

Steps = Generator[None, None, T]


def run_to_end(steps: Steps[T]) -> T:
    """Run every step at once; the work's result."""
    outcome: list[T] = []
    while not take_step(steps, outcome):
        pass
    return outcome[0]


def take_step(steps: Steps[T], outcome: list[T]) -> bool:
    """Run one step of `steps`; True once they ended, their result appended to `outcome`."""
    try:
        next(steps)
    except StopIteration as done:
        outcome.append(done.value)
        return True
    return False
