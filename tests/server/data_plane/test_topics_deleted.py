"""The group coordinator finds the topics an image deleted from the ids the deltas removed
(`ReplicaManager.follow_applied_images`), not by comparing every topic of two images: the
same names as the whole comparison, through deletions, re-creations under a new id and
images the coordinator never saw; a comparison of the whole images only where no delta
tells (`apply_image` without ids, a snapshot)."""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping
from pathlib import Path
from typing import Any
from uuid import UUID

from hypothesis import given, settings
from hypothesis import strategies as st

from replog.quorum.metadata.delta import MetadataDelta
from replog.quorum.metadata.image import MetadataImage, MetadataProvenance, TopicsImage
from replog.quorum.metadata.loader import LoaderManifest, ManifestKind, Publication
from replog.quorum.metadata.records import MetadataRecord, RemoveTopicRecord
from replog.server.data_plane.replica_manager import ReplicaManager, ReplicaManagerConfig
from replog.server.groups.group_coordinator import GroupCoordinator, _topics_deleted
from replog.storage.log_config import LogConfig
from replog.storage.log_manager import LogManager
from replog.testing import LoopTasks
from tests.metadata.metadata_helpers import (
    bootstrapped,
    create_topic,
    delta_of,
    register,
    replayed,
    topic_id,
)
from tests.server.groups.test_group_coordinator import FakeCreator


def whole_difference(previous: MetadataImage, image: MetadataImage) -> set[str]:
    """The names the whole comparison gives: every topic id of `previous` that `image` lacks."""
    before = previous.topics.by_id
    return {before[tid].name for tid in before.keys() - image.topics.by_id.keys()}


def base_image() -> MetadataImage:
    return replayed(bootstrapped(), register(2, 20, fenced=False))


# A step: ("create", name index) creates the name under a fresh id if it is not live,
# ("remove", name index) removes the live topic of that name if any; `seen` steps are
# the images the coordinator is handed (the others it never sees).
STEPS = st.lists(
    st.tuples(st.sampled_from(("create", "remove")), st.integers(0, 5), st.booleans()),
    max_size=30,
)


@settings(max_examples=200, deadline=None)
@given(STEPS)
def test_the_removed_ids_give_the_names_of_the_whole_comparison(steps: list[Any]) -> None:
    image = base_image()
    seen, removed = image, set[UUID]()
    next_id = 1
    for op, name_index, handed in steps:
        name = f"t{name_index}"
        live = image.topics.by_name.get(name)
        records: list[MetadataRecord]
        if op == "create" and live is None:
            records = create_topic(name, topic_id(next_id), (2,))
            next_id += 1
        elif op == "remove" and live is not None:
            records = [RemoveTopicRecord(live.topic_id)]
        else:
            records = []
        delta = delta_of(image, *records)
        image = delta.apply(
            MetadataProvenance(image.provenance.last_offset + max(len(records), 1), 1)
        )
        removed |= delta.deleted_topic_ids
        if handed:
            assert set(_topics_deleted(seen, image, removed)) == whole_difference(seen, image)
            assert set(_topics_deleted(seen, image, None)) == whole_difference(seen, image)
            seen, removed = image, set()


class NoWalk(Mapping[UUID, Any]):
    """A topic index that may be looked up but not walked."""

    def __init__(self, items: Mapping[UUID, Any]) -> None:
        self._items = dict(items)

    def __getitem__(self, key: UUID) -> Any:
        return self._items[key]

    def __contains__(self, key: object) -> bool:
        return key in self._items

    def __len__(self) -> int:
        return len(self._items)

    def __iter__(self) -> Iterator[UUID]:
        raise AssertionError("the whole topic index was walked")


def unwalkable(image: MetadataImage) -> MetadataImage:
    topics = TopicsImage(NoWalk(image.topics.by_id), image.topics.by_name)
    return MetadataImage(image.provenance, image.features, image.cluster, topics, image.configs)


def test_an_image_with_removed_ids_is_not_compared_whole(tmp_path: Path) -> None:
    """Fails where every image's deletions are a set difference over every topic."""
    log_manager = LogManager(str(tmp_path), LogConfig())
    try:
        rm = ReplicaManager(ReplicaManagerConfig(1), log_manager, tasks=LoopTasks())
        coordinator = GroupCoordinator(1, rm, FakeCreator(), tasks=LoopTasks())
        topics = [r for n in range(50) for r in create_topic(f"t{n}", topic_id(100 + n), (2,))]
        plain = replayed(base_image(), *topics)
        first = unwalkable(plain)
        coordinator.apply_image(first, ())
        second = unwalkable(replayed(plain, RemoveTopicRecord(topic_id(107))))
        coordinator.apply_image(second, (topic_id(107),))
        assert coordinator.image is second
        deleted = _topics_deleted(first, second, (topic_id(107), topic_id(999)))
        assert deleted == {"t7": topic_id(107)}
    finally:
        log_manager.shutdown()


class Follower:
    def __init__(self) -> None:
        self.calls: list[tuple[MetadataImage, Collection[UUID] | None]] = []

    def __call__(self, image: MetadataImage, removed: Collection[UUID] | None) -> None:
        self.calls.append((image, None if removed is None else set(removed)))

    def last(self) -> tuple[MetadataImage, Collection[UUID] | None]:
        return self.calls[-1]


def publication(previous: MetadataImage, *records: Any) -> Publication:
    delta = delta_of(previous, *records)
    image = delta.apply(MetadataProvenance(previous.provenance.last_offset + len(records), 1))
    manifest = LoaderManifest(ManifestKind.LOG, image.provenance, previous, 1, len(records))
    return Publication(delta, image, manifest)


def test_the_replica_manager_hands_the_deltas_removed_ids_to_its_followers(
    tmp_path: Path,
) -> None:
    log_manager = LogManager(str(tmp_path), LogConfig())
    try:
        rm = ReplicaManager(ReplicaManagerConfig(1), log_manager, tasks=LoopTasks())
        follower = Follower()
        rm.follow_applied_images(follower)
        start = replayed(base_image(), *create_topic("a", topic_id(1), (2,)))
        rm.apply_image(start)
        assert follower.last() == (start, None)  # no delta: compare the whole images
        step = publication(start, RemoveTopicRecord(topic_id(1)))
        rm.on_metadata_update(step.delta, step.image, step.manifest)
        assert follower.last() == (step.image, {topic_id(1)})
        again = publication(step.image, *create_topic("a", topic_id(2), (2,)))
        rm.on_metadata_update(again.delta, again.image, again.manifest)
        assert follower.last() == (again.image, set())
        # A snapshot: its delta starts from the empty image, so it names no removal.
        loaded = replayed(again.image, RemoveTopicRecord(topic_id(2)))
        manifest = LoaderManifest(ManifestKind.SNAPSHOT, loaded.provenance, again.image, 0, 0)
        rm.on_metadata_update(MetadataDelta.of_image(loaded), loaded, manifest)
        assert follower.last() == (loaded, None)
    finally:
        log_manager.shutdown()
