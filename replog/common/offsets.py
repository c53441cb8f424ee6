"""Offsets and leader epochs.

- `NO_OFFSET`, `NO_LEADER_EPOCH`: -1, Kafka's "none / not known" for an offset and a leader
  epoch, on the wire and in the cores' messages.
- `OffsetAndMetadata(offset, metadata, leader_epoch)`: a consumer group's committed position
  of one partition: the offset of the *next* record to read (Kafka's convention), an optional
  metadata string, and the leader epoch of the last record read (-1: not known). An immutable
  named tuple, shaped like kafka-python's.
"""

from __future__ import annotations

from typing import NamedTuple

NO_OFFSET = -1
NO_LEADER_EPOCH = -1


class OffsetAndMetadata(NamedTuple):
    offset: int  # the next offset to read, not the last one read
    metadata: str = ""
    leader_epoch: int = NO_LEADER_EPOCH
