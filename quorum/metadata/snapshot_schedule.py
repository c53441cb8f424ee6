"""SnapshotSchedule: when a node snapshots the metadata state it has committed
(docs/design/kraft.md#snapshots).

Every node snapshots its own committed state; a snapshot lets a restart load the state instead
of replaying the whole log, and lets a new or far-behind node download it (FetchSnapshot).

Rules (Kafka's SnapshotGenerator):
- A snapshot is due once the committed data batches since the last one reach
  `metadata.log.max.record.bytes.between.snapshots` bytes (20 MiB), or once
  `metadata.log.max.snapshot.interval.ms` (1 hour; 0: never) has passed since the last one and
  some data was committed since.
- A snapshot must end past the newest one (Raft keeps snapshot ids increasing): one ending at
  or before it is never due. Loading a snapshot counts as having taken it.
- Control batches (Raft's LeaderChange) carry no metadata and never make a snapshot due.
- At a clean stop (`due_at_stop`, replog's own rule; Kafka has none) a snapshot is due once any
  data batch committed since the last one, whatever its size: the next start then loads the
  state instead of replaying every record since the last snapshot (tens of thousands at a
  restart of a cluster holding 10,000 partitions, far below 20 MiB), and writing it costs the
  stopping node, which serves nothing by then, not a running one.
"""

from __future__ import annotations

METADATA_LOG_MAX_RECORD_BYTES_BETWEEN_SNAPSHOTS = 20 * 1024 * 1024
# metadata.max.retention.bytes: past this size the log start moves up to the newest snapshot.
METADATA_MAX_RETENTION_BYTES = 100 * 1024 * 1024
# metadata.max.retention.ms: a snapshot older than this lets the log start move to the next one.
METADATA_MAX_RETENTION_MS = 7 * 24 * 3_600_000
METADATA_LOG_MAX_SNAPSHOT_INTERVAL_MS = 3_600_000


class SnapshotSchedule:
    """Counts committed bytes and time since the last snapshot."""

    __slots__ = (
        "bytes_since",
        "last_end_offset",
        "last_snapshot_ms",
        "max_bytes_between",
        "max_interval_ms",
    )

    def __init__(
        self,
        now_ms: int,
        *,
        max_bytes_between: int = METADATA_LOG_MAX_RECORD_BYTES_BETWEEN_SNAPSHOTS,
        max_interval_ms: int = METADATA_LOG_MAX_SNAPSHOT_INTERVAL_MS,
    ) -> None:
        if max_bytes_between <= 0:
            raise ValueError(
                "metadata.log.max.record.bytes.between.snapshots must be positive, not "
                f"{max_bytes_between}"
            )
        if max_interval_ms < 0:
            raise ValueError(
                f"metadata.log.max.snapshot.interval.ms must not be negative, not {max_interval_ms}"
            )
        self.max_bytes_between = max_bytes_between
        self.max_interval_ms = max_interval_ms
        # The interval counts from the start: a node that just started has nothing to save.
        self.last_snapshot_ms = now_ms
        # The end offset (exclusive) of the newest snapshot taken or loaded; 0: none.
        self.last_end_offset = 0
        self.bytes_since = 0

    def committed(self, batch_bytes: int, *, is_control: bool) -> None:
        """A batch of `batch_bytes` committed."""
        if not is_control:
            self.bytes_since += batch_bytes

    def due(self, end_offset: int, now_ms: int) -> bool:
        """Whether to snapshot the state ending at `end_offset` (exclusive) now."""
        if end_offset <= self.last_end_offset or self.bytes_since == 0:
            return False
        if self.bytes_since >= self.max_bytes_between:
            return True
        return self.max_interval_ms > 0 and now_ms - self.last_snapshot_ms >= self.max_interval_ms

    def due_at_stop(self, end_offset: int) -> bool:
        """Whether to snapshot the state ending at `end_offset` (exclusive) at a clean stop."""
        return end_offset > self.last_end_offset and self.bytes_since > 0

    def next_due_ms(self) -> int | None:
        """When the interval rule makes a snapshot due (None: not by time alone)."""
        if self.max_interval_ms == 0 or self.bytes_since == 0:
            return None
        return self.last_snapshot_ms + self.max_interval_ms

    def taken(self, end_offset: int, now_ms: int) -> None:
        """A snapshot ending at `end_offset` was taken (or loaded) at `now_ms`."""
        self.last_end_offset = max(self.last_end_offset, end_offset)
        self.last_snapshot_ms = now_ms
        self.bytes_since = 0
