"""The node's start-up freeze (replog/server/collector.py): what exists is frozen, start-up
garbage is collected first, and full collections then skip the frozen objects."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from replog.server.collector import GrowthFreezer, freeze_startup_objects


class Node:
    def __init__(self) -> None:
        self.other: Node | None = None


@pytest.fixture
def unfrozen() -> Iterator[None]:
    """The freeze is process-wide: give the test process its collector back afterwards.
    Automatic collections are off meanwhile, so only the one under test can free garbage."""
    assert gc.get_freeze_count() == 0
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.unfreeze()
        if was_enabled:
            gc.enable()


def test_what_start_up_built_leaves_the_collectors_sight(unfrozen: None) -> None:
    kept = [Node(), {"state": [1, 2, 3]}]
    assert any(o is kept for o in gc.get_objects())
    frozen = freeze_startup_objects()
    # The count can only fall since (reference counting frees frozen objects, in any thread
    # of this process: earlier tests leave some running), never rise without another freeze.
    assert 0 < gc.get_freeze_count() <= frozen
    assert not any(o is kept for o in gc.get_objects())
    born_later = [Node()]
    assert any(o is born_later for o in gc.get_objects())  # later objects are collected as ever


def test_start_up_garbage_is_collected_not_frozen(unfrozen: None) -> None:
    a, b = Node(), Node()
    a.other, b.other = b, a  # a cycle: reference counting alone never frees it
    gone = weakref.ref(a)
    del a, b
    freeze_startup_objects()
    assert gone() is None


def test_a_slow_full_collection_freezes_its_survivors_from_the_callback(unfrozen: None) -> None:
    """The freeze runs inside CPython's own `gc.callbacks` (growth freezer, last rule): what the
    collection found reachable leaves the collector's sight, its garbage is still collected."""
    freezer = GrowthFreezer(freeze_after_collection_s=0.0)
    kept = [Node()]
    a, b = Node(), Node()
    a.other, b.other = b, a
    gone = weakref.ref(a)
    del a, b
    gc.callbacks.append(freezer.on_collection)
    try:
        gc.collect()
    finally:
        gc.callbacks.remove(freezer.on_collection)
    assert gone() is None
    assert freezer.freezes_after_collection == 1 and gc.get_freeze_count() > 0
    assert not any(o is kept for o in gc.get_objects())
