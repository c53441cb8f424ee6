"""Checkpoint file formats (pure): bytes to values and back, no file I/O.

Offset and leader-epoch checkpoints and partition.metadata are read and written by
`replog.storage.checkpoint_file`, quorum-state by `replog.server.raft.raft_storage`, the
clean-shutdown marker by the `LogManager`, all through the file-system seam. Every parser raises
`replog.errors.CorruptCheckpointError` naming the file and the reason (and the line, for the
line-based formats).
"""

from replog.checkpoints.clean_shutdown_marker import (
    CLEAN_SHUTDOWN_MARKER,
    CLEAN_SHUTDOWN_MARKER_VERSION,
    NO_BROKER_EPOCH,
    parse_clean_shutdown_marker,
    render_clean_shutdown_marker,
)
from replog.checkpoints.leader_epoch_checkpoint import (
    LEADER_EPOCH_CHECKPOINT,
    EpochEntry,
    is_strictly_increasing,
    parse_leader_epoch_checkpoint,
    render_leader_epoch_checkpoint,
)
from replog.checkpoints.offset_checkpoint import (
    CLEANER_OFFSET_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    parse_offset_checkpoint,
    render_offset_checkpoint,
)
from replog.checkpoints.partition_metadata import (
    PARTITION_METADATA,
    parse_partition_metadata,
    render_partition_metadata,
)
from replog.checkpoints.quorum_state import (
    QUORUM_STATE,
    QuorumStateData,
    parse_quorum_state,
    render_quorum_state,
)
from replog.checkpoints.text_format import CHECKPOINT_VERSION
from replog.common import TopicPartitionKey
from replog.errors import CorruptCheckpointError

__all__ = [
    "CHECKPOINT_VERSION",
    "CLEANER_OFFSET_CHECKPOINT",
    "CLEAN_SHUTDOWN_MARKER",
    "CLEAN_SHUTDOWN_MARKER_VERSION",
    "LEADER_EPOCH_CHECKPOINT",
    "LOG_START_OFFSET_CHECKPOINT",
    "NO_BROKER_EPOCH",
    "PARTITION_METADATA",
    "QUORUM_STATE",
    "RECOVERY_POINT_CHECKPOINT",
    "REPLICATION_OFFSET_CHECKPOINT",
    "CorruptCheckpointError",
    "EpochEntry",
    "QuorumStateData",
    "TopicPartitionKey",
    "is_strictly_increasing",
    "parse_clean_shutdown_marker",
    "parse_leader_epoch_checkpoint",
    "parse_offset_checkpoint",
    "parse_partition_metadata",
    "parse_quorum_state",
    "render_clean_shutdown_marker",
    "render_leader_epoch_checkpoint",
    "render_offset_checkpoint",
    "render_partition_metadata",
    "render_quorum_state",
]
