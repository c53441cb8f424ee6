"""A log's topic id, kept in its directory's `partition.metadata` (Kafka's file).

Rules: read once and cached (only this log writes the file); written atomically, or in place
the first time in a log `Log.create` made (`checkpoint_file`'s Rules); a file that does not
parse is a KafkaStorageError. These take no lock: nothing else in the log reads or writes
the file or the cached id.
"""

from __future__ import annotations

import os
import uuid

from replog.checkpoints.partition_metadata import PARTITION_METADATA
from replog.errors import CorruptCheckpointError, KafkaStorageError
from replog.storage.checkpoint_file import PartitionMetadataFile
from replog.storage.log_state import LogState


class LogTopicId(LogState):
    """The topic id of a `Log` (log_state.py says why its parts share one state)."""

    def topic_id(self) -> uuid.UUID | None:
        """The topic id this log's `partition.metadata` records; None when it has none (a log
        made before its replica took it, or by a replog that wrote no such file). A file
        that does not parse is a KafkaStorageError, as Kafka takes such a log dir offline:
        replog writes it whole or not at all (atomically, or a new log's first one in place,
        removed if its write fails), so only something else can have damaged it. Read once:
        only this log writes the file."""
        if self._known_topic_id is None:
            try:
                self._known_topic_id = (self._partition_metadata().read(),)
            except CorruptCheckpointError as exc:
                raise KafkaStorageError(f"{self.name}: {exc}") from exc
        return self._known_topic_id[0]

    def record_topic_id(self, topic_id: uuid.UUID) -> None:
        """Write `partition.metadata` (atomically, or in place the first time in a log `create`
        made: `checkpoint_file`'s Rules): the log belongs to `topic_id` from now on.
        KafkaStorageError naming the file if the write fails."""
        new = self._known_topic_id == (None,) and self.created_empty
        self._known_topic_id = None
        self._partition_metadata(new=new).write(topic_id)
        self._known_topic_id = (topic_id,)

    def _partition_metadata(self, *, new: bool = False) -> PartitionMetadataFile:
        return PartitionMetadataFile(
            os.path.join(self.directory, PARTITION_METADATA), self._fs, new=new
        )
