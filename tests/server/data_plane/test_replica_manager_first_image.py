"""A restart's first image names every replica the broker holds: the replica manager queues its
changes in steps, so that the step acting on the image only links them into its queue
(`replica_change_queue`, Rules; docs/benchmarks.md, "The stalls: waits for a core")."""

from __future__ import annotations

from pathlib import Path

import pytest

from replog.quorum.metadata.image import MetadataImage, MetadataProvenance
from replog.quorum.metadata.loader import LoaderManifest, ManifestKind, Publication
from replog.quorum.metadata.local_changes import LocalPartition
from replog.server.data_plane import replica_change_queue
from replog.server.data_plane.replica_change_queue import ReplicaChange
from replog.server.data_plane.replica_manager import ReplicaManager, ReplicaManagerConfig
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

PARTITIONS = 30
PER_STEP = 10


def first_image() -> Publication:
    """Every partition of a topic, led by broker 2 and followed by broker 1, as the first
    image a broker starts from."""
    base = replayed(bootstrapped(), register(2, 20, fenced=False))
    records = create_topic("t", topic_id(1), *[(2, 1)] * PARTITIONS)
    delta = delta_of(base, *records)
    image = delta.apply(MetadataProvenance(base.provenance.last_offset + len(records), 1))
    manifest = LoaderManifest(ManifestKind.LOG, image.provenance, MetadataImage.EMPTY, 1, 1)
    return Publication(delta, image, manifest)


def test_a_first_images_changes_are_queued_in_steps_before_the_step_acting_on_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Fails where the step that acts on the image builds every replica change itself."""
    built: list[int] = [0]

    class CountedChange(ReplicaChange):
        def __new__(cls, kind: str, local: LocalPartition) -> CountedChange:
            built[0] += 1
            return super().__new__(cls, kind, local)

    monkeypatch.setattr(replica_change_queue, "ReplicaChange", CountedChange)
    monkeypatch.setattr(replica_change_queue, "STAGE_STEP_CHANGES", PER_STEP, raising=False)
    log_manager = LogManager(str(tmp_path), LogConfig())
    try:
        manager = ReplicaManager(ReplicaManagerConfig(1), log_manager, tasks=LoopTasks())
        steps = manager.update_in_steps(first_image())
        per_step: list[int] = []
        while True:
            built[0] = 0
            try:
                next(steps)
            except StopIteration:
                last = built[0]
                break
            per_step.append(built[0])
        assert last == 0  # acting on the image built none of them
        assert sum(per_step) == PARTITIONS and max(per_step) <= PER_STEP
        # And they were queued and applied (the manager is not started: at once).
        assert manager.pending_changes == 0
        assert len(log_manager.all_logs()) == PARTITIONS
    finally:
        log_manager.shutdown()
