"""The metadata images a committed metadata log replays to, batch by batch, for the checkers.

Rules:
- `follow` replays only what is new since the last call (the log given is the longest committed
  log seen, which only grows); a control batch moves the image's provenance only.
- What a data batch does to the image is the caller's (`replay_batch`), so each checker checks
  its own records while replaying; if it raises, the batches replayed before stay recorded and
  `image` stays where the last complete `follow` left it.
- `records_at(end)`: the records of the image at a batch end, which the checks compare with
  what nodes hold, made once per end (an image never changes).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from replog.quorum.metadata.image import MetadataImage, MetadataProvenance
from replog.quorum.metadata.records import MetadataRecord
from replog.quorum.metadata.snapshot import image_to_records
from replog.record.header import iter_frames, read_header

ReplayBatch = Callable[[MetadataImage, bytes | bytearray, int, MetadataProvenance], MetadataImage]


class CommittedImages:
    def __init__(self) -> None:
        self.image = MetadataImage.EMPTY
        self.by_end: dict[int, MetadataImage] = {0: self.image}  # by batch end (exclusive)
        self._replayed = 0  # bytes of the committed log replayed
        self._records: dict[int, tuple[MetadataRecord, ...]] = {}  # by batch end (`records_at`)

    @property
    def end(self) -> int:
        """The offset after the last batch replayed."""
        return self.image.provenance.last_offset + 1

    def follow(self, committed: bytes | bytearray, replay_batch: ReplayBatch) -> None:
        """Replay what is new in `committed`, each data batch through `replay_batch(image,
        committed, position, provenance)`."""
        image = self.image
        for position, size in iter_frames(committed, self._replayed):
            header = read_header(committed, position)
            provenance = MetadataProvenance(header.last_offset, header.partition_leader_epoch)
            if header.is_control:
                image = replace(image, provenance=provenance)
            else:
                image = replay_batch(image, committed, position, provenance)
            self.by_end[header.next_offset] = image
            self._replayed = position + size
        self.image = image

    def records_at(self, end: int) -> tuple[MetadataRecord, ...]:
        """`image_to_records` of the image at batch end `end` (in `by_end`), made once."""
        records = self._records.get(end)
        if records is None:
            records = self._records[end] = tuple(image_to_records(self.by_end[end]))
        return records
