"""`SnapshotShape`: how a run's nodes snapshot their metadata log and move its start, drawn
from the seed (`from_seed`).

Rules:
- A third of the seeds never snapshot (Kafka's default threshold, 20 MiB, is never reached in
  a run), so the log keeps every batch from offset 0; the others snapshot every few KiB of
  committed data and, in most of them, move the log start up to the newest snapshot once the
  log outgrows a few KiB (`metadata.max.retention.bytes`), so a node behind the leader's log
  start downloads a snapshot instead of the batches.
- The Raft fetch size bounds a snapshot download's chunks too: a small one makes a download
  take several FetchSnapshot rounds, each of which a fault may interrupt.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

__all__ = ["NO_SNAPSHOTS", "SnapshotShape"]

NEVER = 1 << 30  # bytes between snapshots no run reaches


@dataclass(frozen=True)
class SnapshotShape:
    snapshot_bytes_max: int  # committed bytes between two snapshots
    retention_bytes: int  # the log size past which its start moves up; -1: never
    fetch_bytes_max: int  # a Raft fetch's and a snapshot chunk's size bound

    @property
    def snapshots(self) -> bool:
        return self.snapshot_bytes_max < NEVER

    @staticmethod
    def from_seed(rng: random.Random) -> SnapshotShape:
        if rng.random() < 1 / 3:
            return NO_SNAPSHOTS
        return SnapshotShape(
            snapshot_bytes_max=rng.choice((2_000, 8_000, 30_000)),
            retention_bytes=rng.choice((-1, 4_000, 16_000)),
            fetch_bytes_max=rng.choice((1_000, 4_000, 8 << 20)),
        )

    def describe(self) -> str:
        if not self.snapshots:
            return "no snapshots"
        retention = "never" if self.retention_bytes < 0 else f"past {self.retention_bytes} B"
        return (
            f"snapshots every {self.snapshot_bytes_max} B, log start moved {retention}, "
            f"fetches of {self.fetch_bytes_max} B"
        )


NO_SNAPSHOTS = SnapshotShape(snapshot_bytes_max=NEVER, retention_bytes=-1, fetch_bytes_max=8 << 20)
