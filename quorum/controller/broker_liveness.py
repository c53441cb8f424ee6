"""BrokerLiveness: what the replication manager may ask about brokers.

`ClusterControl` implements it; the replication manager (topic creation, elections,
AlterPartition) depends only on this protocol, so it can be tested with a fake.

Rules:
- Every answer describes the controller's *latest* state, uncommitted writes included: these
  questions are asked while validating writes, and successive writes must see each other.
- Active means registered, unfenced, not in controlled shutdown and not being evacuated (a
  stepped fencing, unregistration or re-registration half done, `ClusterControl`): the brokers
  that may lead a partition, join an ISR (KIP-841) or be placed on.
- `active_brokers()` is sorted by broker id, so that placement is deterministic.
"""

from __future__ import annotations

from typing import Protocol


class BrokerLiveness(Protocol):
    def is_registered(self, broker_id: int) -> bool:
        """Whether `broker_id` has a registration (fenced or not)."""
        ...

    def is_active(self, broker_id: int) -> bool:
        """Registered, unfenced, not in controlled shutdown and not being moved out of every
        ISR (a stepped evacuation half done)."""
        ...

    def broker_epoch(self, broker_id: int) -> int | None:
        """The broker epoch of the registration, or None if unregistered."""
        ...

    def in_controlled_shutdown(self, broker_id: int) -> bool:
        """Registered and in controlled shutdown."""
        ...

    def is_fenced(self, broker_id: int) -> bool:
        """Registered and fenced."""
        ...

    def active_brokers(self) -> list[tuple[int, str | None]]:
        """(broker id, rack or None) of every active broker, by broker id."""
        ...
