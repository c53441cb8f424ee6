"""The node's start-up freeze (replog/server/runtime/collector.py): what exists is frozen, start-up
garbage is collected first, and full collections then skip the frozen objects."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator
from uuid import UUID

import pytest

from replog.quorum.metadata.loader import MetadataLoader
from replog.quorum.metadata.log_batches import CommittedRecords
from replog.quorum.metadata.records import (
    METADATA_VERSION_FEATURE,
    FeatureLevelRecord,
    MetadataRecord,
    PartitionRecord,
    RemoveTopicRecord,
    TopicRecord,
)
from replog.server.runtime.collector import GrowthFreezer, freeze_startup_objects


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


def test_deleted_topics_metadata_is_freed_though_it_was_frozen(unfrozen: None) -> None:
    """Freezing every `FREEZE_AFTER_RECORDS` records applied is safe only while the metadata a
    deletion drops (the topic's image entries, the image it replaced) is freed by reference
    counting: frozen cyclic garbage is never collected. Create and delete topics with a freeze
    after every batch: the frozen set stays the size of what lives."""
    freezer = GrowthFreezer(freeze_after_records=1)
    loader = MetadataLoader()
    offset = 0

    def commit(records: list[MetadataRecord]) -> None:
        nonlocal offset
        last = offset + len(records) - 1
        loader.handle_commit(CommittedRecords(offset, last, 1, tuple(records)), last + 1)
        offset = last + 1
        freezer.records_applied(len(records))

    def create_and_delete(first: int) -> None:
        ids = [UUID(int=n) for n in range(first, first + 20)]
        commit(
            [
                record
                for tid in ids
                for record in (
                    TopicRecord(f"t{tid.int}", tid),
                    *(PartitionRecord(tid, p, (1,), (1,), 1) for p in range(5)),
                )
            ]
        )
        commit([RemoveTopicRecord(tid) for tid in ids])

    commit([FeatureLevelRecord(METADATA_VERSION_FEATURE, 7)])
    create_and_delete(1)
    settled = gc.get_freeze_count()
    for cycle in range(1, 21):
        create_and_delete(1 + 20 * cycle)
    # 20 cycles of 120 records each, frozen after each batch: a leak would keep thousands.
    assert gc.get_freeze_count() - settled < 200, gc.get_freeze_count() - settled
    assert freezer.freezes == 1 + 2 + 40  # the bootstrap, then two per cycle


def test_logging_slow_collections_never_finds_the_list_emptied_under_it(unfrozen: None) -> None:
    """A starting node counts opened logs on a bulk thread while its loop counts metadata
    records; each then logs the slow collections noted so far. Another thread logging (and
    emptying the list) between one's check and its read of the list made `max` raise
    ValueError, which failed the node's start. That interleaving, forced in one thread."""
    freezer = GrowthFreezer()
    interleaved = False

    class OtherThreadLogsAfterTheCheck(list[float]):
        def __bool__(self) -> bool:
            nonlocal interleaved
            checked = len(self) > 0
            if not interleaved:
                interleaved = True
                freezer._log_collections()  # the other thread, right after this check
            return checked

    freezer._unlogged = OtherThreadLogsAfterTheCheck([0.02, 0.05])
    freezer._log_collections()
    assert interleaved
    assert not freezer._unlogged
