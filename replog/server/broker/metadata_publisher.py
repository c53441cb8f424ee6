"""The broker role's Raft listener: committed metadata in, published images out to publishers.

Theory of operation: `RaftDriver` hands its listener every `ApplyItem` after `advance`, in log
order. `BrokerMetadataListener` decodes a `CommittedBatch`, reads and decodes the snapshot of a
`LoadSnapshot` (the same translation the controller uses: `raft_metadata_log`,
`replog.quorum.metadata.record_batches`), and feeds both to the pure `MetadataLoader` together
with the node's current high watermark; every `Publication` the loader makes goes to each
installed `MetadataPublisher`, in install order. A `LeaderChange` names the Raft leader, which
is the active controller: it goes to `on_leader_change` (the broker lifecycle uses it to find
the controller without a redirect).

Rules:
- A record that cannot be decoded (`CorruptMetadataRecordError`) or replayed, or a gap in the
  offsets (`MetadataLoadError`, naming the offset) propagates out of the listener and stops the
  Raft driver: a node must never go on with a wrong image (fail-stop, like a controller replay
  failure).
- A publisher that raises is logged (its name and the offset) and the publication still goes to
  the others; it keeps getting later ones. Publishing faults are not fatal on a broker, as in
  Kafka: one bad consumer of metadata must not stop replication for all partitions.
- A publisher installed after the first publication first gets the whole current image (a
  SNAPSHOT manifest over the empty image), so it never acts on a delta without its base.
- Snapshot files are read on the event loop thread: snapshot loads are rare (start-up, a
  follower far behind), and the listener is synchronous by the Raft driver's contract.
- A committed batch is replayed in steps (`replog.quorum.metadata.steps.REPLAY_STEP_RECORDS`
  records each) when the Raft driver runs the listener as a stepped one (`apply_in_steps`),
  so that a batch of thousands of records (a broker's controlled shutdown moves all its
  leaderships in one) lets Raft fetches, heartbeats and requests run between steps; the
  image publishers and request handlers see changes only at the batch end, whole
  (`MetadataLoader`). A snapshot is decoded and loaded in the same steps (a restart loads one
  record per partition), and shows whole after its last one. A publisher that
  works in steps (`SteppedMetadataPublisher`: the replica manager finds a first image's
  thousands of local changes a slice at a time) gets the publication that way; the publishers
  after it get it once its last step ran, so the loop's other tasks may run between two
  publishers' updates of one image.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace
from typing import cast

from replog.quorum.metadata.image import MetadataImage
from replog.quorum.metadata.loader import (
    MetadataLoader,
    MetadataPublisher,
    Publication,
    SteppedMetadataPublisher,
)
from replog.quorum.metadata.steps import Steps, run_to_end
from replog.quorum.raft.ready import ApplyItem, CommittedBatch, LeaderChange, LoadSnapshot
from replog.quorum.raft.snapshot_id import SnapshotId
from replog.server.raft.raft_metadata_log import (
    committed_records_in_steps,
    snapshot_records_in_steps,
)

log = logging.getLogger("replog.server.metadata")


class BrokerMetadataListener:
    """Raft listener -> MetadataLoader -> publishers (module docstring)."""

    def __init__(
        self,
        node_id: int,
        *,
        read_snapshot: Callable[[SnapshotId], bytes],
        high_watermark: Callable[[], int | None],
        on_leader_change: Callable[[int | None], None] | None = None,
    ) -> None:
        self.node_id = node_id
        self.loader = MetadataLoader()
        self._read_snapshot = read_snapshot
        self._high_watermark = high_watermark
        self._on_leader_change = on_leader_change
        # Each publisher with whether it works in steps, asked once at install: an isinstance
        # check against the runtime-checkable protocol costs tens of microseconds, and each
        # publication goes to every publisher.
        self._publishers: list[tuple[MetadataPublisher, bool]] = []
        self.publisher_faults = 0

    @property
    def image(self) -> MetadataImage:
        """The last published image."""
        return self.loader.image

    @property
    def last_applied_offset(self) -> int:
        return self.loader.last_applied_offset

    def install(self, publisher: MetadataPublisher) -> None:
        """Add a publisher; it gets the current image at once if one was published."""
        self._publishers.append((publisher, isinstance(publisher, SteppedMetadataPublisher)))
        catch_up = self.loader.publication_for_new_publisher()
        if catch_up is not None:
            self._deliver(publisher, catch_up)

    def install_in_steps(self, publisher: SteppedMetadataPublisher) -> Steps[None]:
        """`install` with the catch-up in the publisher's steps (the replica manager at a
        restart: the first image names every replica it holds). The publisher joins the
        publishers only in the step that finds it has the current image, so a publication
        made between two catch-up steps never reaches it before the catch-up is done: the
        next round of the catch-up brings it from the image it has to the current one."""
        had = MetadataImage.EMPTY
        while (current := self.loader.image) is not had:
            catch_up = self.loader.publication_for_new_publisher()
            assert catch_up is not None and catch_up.image is current
            if had is not MetadataImage.EMPTY:
                # From the image it has, not from nothing: it acts on what changed since.
                catch_up = Publication(
                    catch_up.delta, current, replace(catch_up.manifest, previous=had)
                )
            yield from self._deliver_in_steps(publisher, catch_up)
            had = current
        self._publishers.append((publisher, True))

    def __call__(self, item: ApplyItem) -> None:
        run_to_end(self.apply_in_steps(item))

    def apply_in_steps(self, item: ApplyItem) -> Steps[None]:
        """Load `item` in steps (the Raft driver's stepped listener, module Rules): a
        committed batch's records decoded and replayed a slice at a time, then its
        publication, whole for each publisher."""
        if isinstance(item, CommittedBatch):
            records = yield from committed_records_in_steps(item, node_id=self.node_id)
            publication = yield from self.loader.commit_in_steps(records, self._high_watermark())
        elif isinstance(item, LoadSnapshot):
            data = self._read_snapshot(item.snapshot_id)
            snapshot = yield from snapshot_records_in_steps(item, data, node_id=self.node_id)
            log.info(
                "node %d: loading metadata snapshot %s (%d records)",
                self.node_id,
                item.snapshot_id,
                len(snapshot.records),
            )
            publication = yield from self.loader.load_snapshot_in_steps(
                snapshot, self._high_watermark()
            )
        else:
            assert isinstance(item, LeaderChange), item
            if self._on_leader_change is not None:
                self._on_leader_change(item.leader_id)
            return
        if publication is not None:
            # The publishers of now: one installed between two steps got this image already
            # (`install`'s catch-up).
            for publisher, stepped in tuple(self._publishers):
                if stepped:
                    yield from self._deliver_in_steps(
                        cast(SteppedMetadataPublisher, publisher), publication
                    )
                else:
                    self._deliver(publisher, publication)

    def _deliver(self, publisher: MetadataPublisher, publication: Publication) -> None:
        try:
            publisher.on_metadata_update(publication.delta, publication.image, publication.manifest)
        except Exception:
            self._fault(publisher, publication)

    def _deliver_in_steps(
        self, publisher: SteppedMetadataPublisher, publication: Publication
    ) -> Steps[None]:
        try:
            yield from publisher.update_in_steps(publication)
        except Exception:
            self._fault(publisher, publication)

    def _fault(self, publisher: MetadataPublisher, publication: Publication) -> None:
        """Count and log the exception `publisher` raised on `publication` (module Rules)."""
        self.publisher_faults += 1
        log.exception(
            "metadata publisher %s failed on the image at offset %d",
            publisher.name,
            publication.manifest.provenance.last_offset,
        )
