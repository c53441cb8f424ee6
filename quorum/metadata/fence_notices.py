"""Fence notices: a broker fenced or unfenced, with why, for the operators' log.

The metadata says only that a broker's registration was fenced or unfenced
(`BrokerRegistrationChangeRecord`); an operator wants one line saying which broker, at which
broker epoch, and why. The active controller knows why when it decides (`fence_notices`, from
the records it writes and its reason); a broker learns it from the metadata it replays and
knows why for its own registration only (`own_fence_notice`, from its lifecycle state).

Rules:
- A notice stands for a `BrokerRegistrationChangeRecord` that fences or unfences; a new
  registration (a new incarnation starts fenced) is not a fencing.
- The broker side notices its own registration changing its fenced flag at the same broker
  epoch, between two images it replayed (a first image, from the empty one, knows no previous
  state and notices nothing). Fenced while it is shutting down: its controlled shutdown;
  otherwise, while running, the controller stopped hearing its heartbeats (the only other way
  the controller fences a running broker).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from replog.quorum.metadata.broker_lifecycle import LifecycleState
from replog.quorum.metadata.delta import MetadataDelta
from replog.quorum.metadata.records import (
    BrokerRegistrationChangeRecord,
    FenceChange,
    MetadataRecord,
)


@dataclass(frozen=True, slots=True)
class FenceNotice:
    broker_id: int
    broker_epoch: int
    fenced: bool  # False: unfenced
    reason: str

    def describe(self) -> str:
        """The log line's text after its "who says" prefix."""
        what = "fenced" if self.fenced else "unfenced"
        return f"broker {self.broker_id} {what} at broker epoch {self.broker_epoch}: {self.reason}"


def fence_notices(records: Iterable[MetadataRecord], reason: str) -> tuple[FenceNotice, ...]:
    """A notice for each fencing or unfencing among `records`, all for `reason`."""
    return tuple(
        FenceNotice(r.broker_id, r.broker_epoch, r.fenced == FenceChange.FENCE, reason)
        for r in records
        if isinstance(r, BrokerRegistrationChangeRecord) and r.fenced != FenceChange.NONE
    )


def own_fence_notice(
    delta: MetadataDelta, broker_id: int, state: LifecycleState
) -> FenceNotice | None:
    """The notice for `broker_id`'s own registration in `delta`, if its fenced flag changed
    (module Rules); `state` is the broker's lifecycle state when it replays it."""
    if broker_id not in delta.broker_changes:
        return None
    after = delta.broker_changes[broker_id]
    before = delta.base.cluster.brokers.get(broker_id)
    if (
        after is None
        or before is None
        or before.broker_epoch != after.broker_epoch
        or before.fenced == after.fenced
    ):
        return None
    if not after.fenced:
        reason = "the controller unfenced it (caught up with the metadata log, ready to serve)"
    elif state in (LifecycleState.PENDING_CONTROLLED_SHUTDOWN, LifecycleState.SHUTTING_DOWN):
        reason = "its controlled shutdown"
    else:
        reason = (
            "the controller fenced it: its heartbeats did not reach the active controller "
            "within broker.session.timeout.ms"
        )
    return FenceNotice(broker_id, after.broker_epoch, after.fenced, reason)
