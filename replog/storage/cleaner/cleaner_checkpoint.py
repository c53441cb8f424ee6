"""A log dir's `cleaner-offset-checkpoint`: per compacted partition, the offset cleaning reached
(the next pass's first dirty offset).

Rules:
- Kafka's format, that of the other offset checkpoints: version 0, the entry count, then one
  "topic partition offset" line per partition (`replog.checkpoints.offset_checkpoint`), replaced
  atomically (`OffsetCheckpointFile`).
- `update` changes one partition's offset and leaves the others as they are (Kafka's
  `updateCheckpoints`); `remove` forgets a partition (a deleted or moved log). A missing file
  reads as empty; a malformed one raises `CorruptCheckpointError` naming it.
- One owner per log dir orders the calls (the cleaner); no lock here.
"""

from __future__ import annotations

import os

from replog.checkpoints.offset_checkpoint import CLEANER_OFFSET_CHECKPOINT
from replog.common import TopicPartitionKey
from replog.storage.checkpoint_file import OffsetCheckpointFile
from replog.storage.fs import LOCAL_FS, FileSystem


class CleanerCheckpoint:
    """The `cleaner-offset-checkpoint` of `log_dir`."""

    __slots__ = ("_file",)

    def __init__(self, log_dir: str, fs: FileSystem = LOCAL_FS) -> None:
        self._file = OffsetCheckpointFile(os.path.join(log_dir, CLEANER_OFFSET_CHECKPOINT), fs)

    @property
    def path(self) -> str:
        return self._file.path

    def read(self) -> dict[TopicPartitionKey, int]:
        return self._file.read()

    def write(self, offsets: dict[TopicPartitionKey, int]) -> None:
        """Replace the whole file with `offsets` (a cleaner that keeps them in memory)."""
        self._file.write(offsets)

    def update(self, partition: TopicPartitionKey, offset: int) -> None:
        offsets = self._file.read()
        offsets[partition] = offset
        self._file.write(offsets)

    def remove(self, partition: TopicPartitionKey) -> None:
        offsets = self._file.read()
        if offsets.pop(partition, None) is not None:
            self._file.write(offsets)
