"""A consumer group's committed position of one partition.

`OffsetAndMetadata(offset, metadata, leader_epoch)`: the offset of the *next* record to read
(Kafka's convention), an optional metadata string, and the leader epoch of the last record read
(-1: not known). An immutable named tuple, shaped like kafka-python's.
"""

from __future__ import annotations

from typing import NamedTuple


class OffsetAndMetadata(NamedTuple):
    offset: int  # the next offset to read, not the last one read
    metadata: str = ""
    leader_epoch: int = -1
