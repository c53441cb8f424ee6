"""BrokerRegistration: one registered broker as the metadata image knows it.

Built from a `RegisterBrokerRecord` and advanced by `BrokerRegistrationChangeRecord`s, with
Kafka's replay rules (KIP-631):
- A `RegisterBrokerRecord` replaces the whole registration. Its `broker_epoch` is the offset at
  which the controller wrote the record for a new incarnation (a retried registration of the same
  incarnation keeps the old epoch), so the record's field is kept as it is, never recomputed.
- A change carries a tri-state `fenced` (-1 unfence, 0 no change, 1 fence) and
  `in_controlled_shutdown` (True enters controlled shutdown, False changes nothing): only a new
  registration leaves controlled shutdown, because the next incarnation starts afresh.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from uuid import UUID

from replog.errors import MetadataReplayError
from replog.quorum.metadata.records import (
    BrokerRegistrationChangeRecord,
    Endpoint,
    FeatureRange,
    FenceChange,
    RegisterBrokerRecord,
    UnregisterBrokerRecord,
)


@dataclass(frozen=True, slots=True)
class BrokerRegistration:
    broker_id: int
    incarnation_id: UUID
    broker_epoch: int
    endpoints: tuple[Endpoint, ...] = ()
    features: tuple[FeatureRange, ...] = ()
    rack: str | None = None
    fenced: bool = True
    in_controlled_shutdown: bool = False

    @classmethod
    def from_record(cls, record: RegisterBrokerRecord) -> BrokerRegistration:
        return cls(
            broker_id=record.broker_id,
            incarnation_id=record.incarnation_id,
            broker_epoch=record.broker_epoch,
            endpoints=record.endpoints,
            features=record.features,
            rack=record.rack,
            fenced=record.fenced,
            in_controlled_shutdown=record.in_controlled_shutdown,
        )

    def to_record(self) -> RegisterBrokerRecord:
        """The record that recreates this registration, flags included (snapshots)."""
        return RegisterBrokerRecord(
            broker_id=self.broker_id,
            incarnation_id=self.incarnation_id,
            broker_epoch=self.broker_epoch,
            endpoints=self.endpoints,
            features=self.features,
            rack=self.rack,
            fenced=self.fenced,
            in_controlled_shutdown=self.in_controlled_shutdown,
        )

    def merge(self, change: BrokerRegistrationChangeRecord) -> BrokerRegistration:
        """This registration after `change` (the caller has matched ids and broker epochs)."""
        assert change.broker_id == self.broker_id, (change, self.broker_id)
        fenced = {
            FenceChange.FENCE: True,
            FenceChange.UNFENCE: False,
            FenceChange.NONE: self.fenced,
        }[FenceChange(change.fenced)]
        return replace(
            self,
            fenced=fenced,
            in_controlled_shutdown=self.in_controlled_shutdown or change.in_controlled_shutdown,
        )

    @property
    def is_active(self) -> bool:
        """Unfenced and not shutting down: may lead partitions and join ISRs."""
        return not self.fenced and not self.in_controlled_shutdown

    def endpoint(self, listener_name: str) -> Endpoint | None:
        """The endpoint of one listener (where a follower fetches from this broker)."""
        return next((e for e in self.endpoints if e.name == listener_name), None)


def registration_named_by(
    record: UnregisterBrokerRecord | BrokerRegistrationChangeRecord,
    current: BrokerRegistration | None,
    offset: int,
) -> BrokerRegistration:
    """`current`, the registration `record` (at `offset`) names, checked the way every replayer
    checks it: the broker is registered and the record carries its broker epoch."""
    name = type(record).__name__
    if current is None:
        raise MetadataReplayError(
            f"{name} at offset {offset} names broker {record.broker_id}, which is not registered"
        )
    if current.broker_epoch != record.broker_epoch:
        raise MetadataReplayError(
            f"{name} at offset {offset} names broker {record.broker_id} at broker epoch "
            f"{record.broker_epoch}, but its registration has broker epoch "
            f"{current.broker_epoch}"
        )
    return current
