"""MetadataLoader: turns the committed metadata log into published images
(docs/design/kraft.md#brokers-react-to-metadata).

A node's Raft listener feeds the loader every committed batch and every snapshot load, in log
order, each with the high watermark the node knows at that moment. The loader replays them into
a `MetadataDelta` over the last published image and, at batch ends, builds the next image and
hands it out as a `Publication`: the delta (what changed), the new image, and a manifest.
Publishers (the broker's replica manager, its metadata cache) act on publications; the loader
does no I/O and calls nobody: each input returns the publication it produced, if any.

Rules:
- Catch-up first (Kafka's `stillNeedToCatchUp`): nothing is published until the loader has
  loaded every offset below the high watermark known at the time (a high watermark must be
  known, and the last loaded offset >= high watermark - 1). After a start the shell passes None
  until the Raft node has learned the high watermark from its leader: the snapshot a node
  restarts from is committed, but may be far behind the quorum. A node that restarts or falls
  behind thus never publishes a half-replayed history of what it knows to be committed (nor a
  stale snapshot as current); the batches it loads meanwhile accumulate in one delta. Once
  caught up, the loader stays caught up: from then on every batch end publishes.
- Publications happen only at batch ends (and after a snapshot load): never in the middle of a
  batch. replog writes no metadata transactions, so a batch end is always a consistent state.
- A committed batch may be loaded in steps (`commit_in_steps`, `REPLAY_STEP_RECORDS` records
  each) so that a caller on an event loop can let other work run between them; the image and
  every offset the loader reports stay those of the last publication until the batch's last
  step, and no other input is taken while a batch is half loaded (`MetadataLoadError`). A
  snapshot load may run in the same steps (`load_snapshot_in_steps`), under the same rule.
- A control batch (Raft's LeaderChange and friends) holds no metadata records, but it is a batch
  end like any other: it moves the image's provenance and counts toward the catch-up.
- Offsets never go back and never skip: a batch starts right after the last loaded offset, a
  snapshot ends at or after it. Anything else, and any record that cannot be replayed, raises
  `MetadataLoadError` naming the offset; the loader is then failed for good (every later input
  raises too), since every image after that point would be wrong.
- A snapshot load replaces everything loaded so far with a delta from the empty image (the
  manifest says `SNAPSHOT`); batches after it continue that delta until the next publication.
  For a `LOG` publication `delta.base` is the image published before it; for a `SNAPSHOT` one it
  is the empty image, so the difference publishers must act on is between `manifest.previous`
  and the new image (`Publication.local_changes` does the right thing for both).

Theory of operation: `_delta` is the open delta, `_loaded` the provenance of the last batch or
snapshot replayed into it, `_kind` whether it started at a snapshot. Publishing applies the delta
at `_loaded`, makes that image the base of a fresh delta, and resets the counters.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import NoReturn, Protocol, runtime_checkable

from replog.errors import MetadataLoadError, MetadataReplayError
from replog.quorum.metadata.delta import MetadataDelta
from replog.quorum.metadata.image import MetadataImage, MetadataProvenance
from replog.quorum.metadata.local_changes import (
    LocalChanges,
    local_changes_between_in_steps,
    local_changes_in_steps,
)
from replog.quorum.metadata.log_batches import CommittedRecords, SnapshotRecords
from replog.quorum.metadata.records import MetadataRecord
from replog.quorum.metadata.snapshot import image_record_count
from replog.quorum.metadata.steps import REPLAY_STEP_RECORDS, Steps, run_to_end


class ManifestKind(Enum):
    LOG = "log"  # the delta holds committed batches over the previously published image
    SNAPSHOT = "snapshot"  # the delta starts from the empty image (a snapshot, or a new publisher)


@dataclass(frozen=True, slots=True)
class LoaderManifest:
    """Where a publication comes from."""

    kind: ManifestKind
    provenance: MetadataProvenance  # the last offset (and its quorum epoch) the image contains
    previous: MetadataImage  # what publishers had before this publication (EMPTY at first)
    batches: int  # committed batches in the delta (a snapshot counts none)
    records: int  # metadata records replayed into the delta (snapshot records included)


@dataclass(frozen=True, slots=True)
class Publication:
    """One new image for publishers: `delta` replayed over its base gives `image`."""

    delta: MetadataDelta
    image: MetadataImage
    manifest: LoaderManifest

    def local_changes(self, broker_id: int) -> LocalChanges:
        """What `broker_id` must do to go from `manifest.previous` to `image`."""
        return run_to_end(self.local_changes_in_steps(broker_id))

    def local_changes_in_steps(self, broker_id: int) -> Steps[LocalChanges]:
        """`local_changes` in steps (`replog.quorum.metadata.local_changes`): a first image holds
        thousands of partitions."""
        if self.manifest.kind is ManifestKind.LOG:
            # The delta's base is the previous image, so the delta knows exactly what changed.
            return (yield from local_changes_in_steps(self.delta, broker_id))
        # A delta from the empty image knows nothing of what the broker had: compare images.
        return (
            yield from local_changes_between_in_steps(self.manifest.previous, self.image, broker_id)
        )


class MetadataPublisher(Protocol):
    """Anything that acts on published images (the shell hands publications to each)."""

    @property
    def name(self) -> str: ...

    def on_metadata_update(
        self, delta: MetadataDelta, image: MetadataImage, manifest: LoaderManifest
    ) -> None: ...


@runtime_checkable
class SteppedMetadataPublisher(MetadataPublisher, Protocol):
    """A publisher whose work on one publication may run in steps (a broker's first image at
    a restart holds thousands of partitions): it changes nothing anyone else sees before its
    last step, and `on_metadata_update` is the same work at once."""

    def update_in_steps(self, publication: Publication) -> Steps[None]: ...


class MetadataLoader:
    """Replays committed batches and snapshots; publishes images (module docstring)."""

    __slots__ = (
        "_batches",
        "_caught_up",
        "_delta",
        "_failure",
        "_image",
        "_kind",
        "_loaded",
        "_loading_batch",
        "_records",
    )

    def __init__(self) -> None:
        self._image = MetadataImage.EMPTY  # the last published image
        self._delta = MetadataDelta(self._image)
        self._loaded = MetadataProvenance.EMPTY
        self._kind = ManifestKind.LOG
        self._batches = 0
        self._records = 0
        self._caught_up = False
        self._failure: MetadataLoadError | None = None
        # A `commit_in_steps` or a `load_snapshot_in_steps` has begun and not ended.
        self._loading_batch = False

    # --- what it has -------------------------------------------------------------------------

    @property
    def image(self) -> MetadataImage:
        """The last published image (`MetadataImage.EMPTY` before the first publication)."""
        return self._image

    @property
    def last_applied_offset(self) -> int:
        """The last offset published publishers have seen (-1: none): what a broker reports in
        its heartbeats as its current metadata offset."""
        return self._image.provenance.last_offset

    @property
    def last_loaded_offset(self) -> int:
        """The last offset replayed, published or not (-1: none)."""
        return self._loaded.last_offset

    @property
    def caught_up(self) -> bool:
        """Whether the loader has reached the high watermark once (and so publishes)."""
        return self._caught_up

    # --- inputs ------------------------------------------------------------------------------

    def handle_commit(
        self, batch: CommittedRecords, high_watermark: int | None
    ) -> Publication | None:
        """Load one committed batch (a control batch has no records); `high_watermark` is the
        node's current one (exclusive; None: not known yet). Returns the publication made at
        the batch end, if the loader is caught up."""
        return run_to_end(self.commit_in_steps(batch, high_watermark))

    def commit_in_steps(
        self, batch: CommittedRecords, high_watermark: int | None
    ) -> Steps[Publication | None]:
        """`handle_commit` as steps: each step replays at most `REPLAY_STEP_RECORDS` records,
        and the last one makes the publication, returned as the generator's value (module
        Rules: nothing of the batch shows before)."""
        self._check_not_failed()
        expected = self._loaded.last_offset + 1
        if batch.base_offset != expected:
            self._fail(
                f"committed batch {batch.base_offset}..{batch.last_offset} does not follow the "
                f"last loaded offset {self._loaded.last_offset}: expected a batch at offset "
                f"{expected}",
                batch.base_offset,
            )
        records = batch.records
        self._loading_batch = True
        for start in range(0, len(records), REPLAY_STEP_RECORDS):
            if start:
                yield
            step = records[start : start + REPLAY_STEP_RECORDS]
            for offset, record in enumerate(step, start=batch.base_offset + start):
                self._replay(record, offset)
        if len(records) > REPLAY_STEP_RECORDS:
            yield  # the image is built and published in a step of its own
        self._loading_batch = False
        self._loaded = MetadataProvenance(batch.last_offset, batch.quorum_epoch)
        self._batches += 1
        self._records += len(records)
        return self._maybe_publish(high_watermark)

    def handle_load_snapshot(
        self, snapshot: SnapshotRecords, high_watermark: int | None
    ) -> Publication | None:
        """Replace everything loaded with a snapshot's state; publish it if caught up."""
        return run_to_end(self.load_snapshot_in_steps(snapshot, high_watermark))

    def load_snapshot_in_steps(
        self, snapshot: SnapshotRecords, high_watermark: int | None
    ) -> Steps[Publication | None]:
        """`handle_load_snapshot` as steps of at most `REPLAY_STEP_RECORDS` records (a
        restart's snapshot holds a record per partition), under `commit_in_steps`' rule:
        nothing of the snapshot shows before the last step, and no other input is taken
        while it is half loaded."""
        self._check_not_failed()
        last = snapshot.last_contained_offset
        if last < self._loaded.last_offset:
            self._fail(
                f"snapshot ending at offset {last} would take the metadata back from offset "
                f"{self._loaded.last_offset}",
                last,
            )
        records = snapshot.records
        self._loading_batch = True
        self._delta = MetadataDelta(MetadataImage.EMPTY)
        self._kind = ManifestKind.SNAPSHOT
        self._batches = 0
        self._records = len(records)
        # A snapshot keeps no per-record offsets: all its records stand at its last one.
        what = f"snapshot record at offset {last}"
        for start in range(0, len(records), REPLAY_STEP_RECORDS):
            if start:
                yield
            for record in records[start : start + REPLAY_STEP_RECORDS]:
                self._replay(record, last, what=what)
        if len(records) > REPLAY_STEP_RECORDS:
            yield  # the image is built and published in a step of its own
        self._loading_batch = False
        self._loaded = MetadataProvenance(last, snapshot.quorum_epoch)
        return self._maybe_publish(high_watermark)

    def publication_for_new_publisher(self) -> Publication | None:
        """What a publisher installed after the first publication must get first: the current
        image as a delta from the empty image (None: nothing published yet)."""
        if self._image is MetadataImage.EMPTY:
            return None
        delta = MetadataDelta.of_image(self._image)
        manifest = LoaderManifest(
            ManifestKind.SNAPSHOT,
            self._image.provenance,
            MetadataImage.EMPTY,
            batches=0,
            records=image_record_count(self._image),
        )
        return Publication(delta, self._image, manifest)

    # --- internals ---------------------------------------------------------------------------

    def _replay(self, record: MetadataRecord, offset: int, what: str = "") -> None:
        try:
            self._delta.replay(record, offset)
        except MetadataReplayError as exc:
            where = what or f"offset {offset}"
            self._fail(f"cannot load the metadata {where}: {exc}", offset, cause=exc)

    def _maybe_publish(self, high_watermark: int | None) -> Publication | None:
        if self._still_catching_up(high_watermark):
            return None
        provenance = self._loaded
        image = self._delta.apply(provenance)
        previous = self._image
        if self._kind is ManifestKind.LOG:
            assert self._delta.base is previous, "a log delta is built over the published image"
        manifest = LoaderManifest(self._kind, provenance, previous, self._batches, self._records)
        publication = Publication(self._delta, image, manifest)
        self._image = image
        self._delta = MetadataDelta(image)
        self._kind = ManifestKind.LOG
        self._batches = 0
        self._records = 0
        return publication

    def _still_catching_up(self, high_watermark: int | None) -> bool:
        if self._caught_up:
            return False
        if high_watermark is None or self._loaded.last_offset < high_watermark - 1:
            return True
        self._caught_up = True
        return False

    def _fail(self, message: str, offset: int, cause: Exception | None = None) -> NoReturn:
        self._failure = MetadataLoadError(message, offset)
        raise self._failure from cause

    def _check_not_failed(self) -> None:
        if self._loading_batch and self._failure is None:
            # The half-loaded batch's steps were abandoned, or another input came in between
            # them: what the delta holds is no batch end.
            self._fail(
                "an input arrived while a committed batch or a snapshot was half loaded",
                self._loaded.last_offset + 1,
            )
        if self._failure is not None:
            raise MetadataLoadError(
                f"the metadata loader stopped at offset {self._failure.offset}: {self._failure}",
                self._failure.offset,
            )
