"""ProducerIdControl: hands out blocks of producer ids for idempotent producers.

Brokers ask for a block (AllocateProducerIds) and assign ids from it locally; the controller
only remembers where the next block starts, so no id is ever handed out twice, across
failovers included.

Rules (Kafka's ProducerIdControlManager):
- A block is 1000 consecutive ids, starting where the previous block ended; the first block
  starts at 0.
- The requesting broker must name its current broker epoch (STALE_BROKER_EPOCH otherwise).
- A ProducerIdsRecord carries the first id of the *next* block; replaying one that does not
  move it forward is a corrupt log (`MetadataReplayError`).
- Ids are int64: when the next block would pass the largest one, allocation fails
  (UNKNOWN_SERVER_ERROR naming the exhaustion) rather than wrapping.
"""

from __future__ import annotations

from dataclasses import dataclass

from replog.errors import MetadataReplayError, StaleBrokerEpochError, UnknownServerError
from replog.quorum.controller.broker_liveness import BrokerLiveness
from replog.quorum.controller.controller_result import ControllerResult
from replog.quorum.metadata.records import ProducerIdsRecord
from replog.timeline import SnapshotRegistry, TimelineLong

PRODUCER_ID_BLOCK_SIZE = 1000
_PRODUCER_ID_MAX = 2**63 - 1


@dataclass(frozen=True, slots=True)
class ProducerIdsBlock:
    assigned_broker_id: int
    first_producer_id: int
    size: int

    @property
    def last_producer_id(self) -> int:
        return self.first_producer_id + self.size - 1

    @property
    def next_block_first_id(self) -> int:
        return self.first_producer_id + self.size


class ProducerIdControl:
    """The first producer id of the next block, in timeline state."""

    __slots__ = ("_cluster", "_next_producer_id")

    def __init__(self, registry: SnapshotRegistry, cluster: BrokerLiveness) -> None:
        self._cluster = cluster
        self._next_producer_id = TimelineLong(registry)

    def next_producer_id(self, offset: int | None = None) -> int:
        """The first id of the next block at `offset` (None: latest)."""
        return self._next_producer_id.get(offset)

    def generate_next_block(
        self, broker_id: int, broker_epoch: int
    ) -> ControllerResult[ProducerIdsBlock]:
        """Allocate the next block to `broker_id`."""
        current_epoch = self._cluster.broker_epoch(broker_id)
        if current_epoch is None:
            raise StaleBrokerEpochError(
                f"broker {broker_id} (broker epoch {broker_epoch}) asked for producer ids but "
                "is not registered"
            )
        if current_epoch != broker_epoch:
            raise StaleBrokerEpochError(
                f"broker {broker_id} asked for producer ids with broker epoch {broker_epoch}, "
                f"but its registration has broker epoch {current_epoch}"
            )
        first = self._next_producer_id.get()
        if first > _PRODUCER_ID_MAX - PRODUCER_ID_BLOCK_SIZE:
            raise UnknownServerError(
                f"producer ids are exhausted: the next block would start at {first}, past "
                f"the largest int64 less a block of {PRODUCER_ID_BLOCK_SIZE}"
            )
        block = ProducerIdsBlock(broker_id, first, PRODUCER_ID_BLOCK_SIZE)
        record = ProducerIdsRecord(broker_id, broker_epoch, block.next_block_first_id)
        return ControllerResult.of([record], block, is_atomic=True)

    def replay(self, record: ProducerIdsRecord, offset: int) -> None:
        current = self._next_producer_id.get()
        if record.next_producer_id <= current:
            raise MetadataReplayError(
                f"ProducerIdsRecord at offset {offset} moves the next producer id from "
                f"{current} to {record.next_producer_id}, which is not forward"
            )
        self._next_producer_id.set(record.next_producer_id)

    def snapshot_records(self, offset: int | None = None) -> list[ProducerIdsRecord]:
        """The record that recreates the state at `offset` (none before the first block)."""
        next_id = self._next_producer_id.get(offset)
        if next_id == 0:
            return []
        # Kafka's snapshots name no broker for this record; -1 says "not a real request".
        return [ProducerIdsRecord(-1, -1, next_id)]
