"""ReplicationHooks: what the controller and cluster control need from the replication manager.

The replication manager (`replication_control.ReplicationControl`) owns topics and partitions.
The broker lifecycle changes partitions: a fenced or shutting-down broker leaves every ISR and
its leaderships move; an unfenced broker may lead leaderless partitions again. Cluster control
decides *when* (heartbeats, session expiry); the replication manager decides *which*
PartitionChangeRecords that takes.

Rules:
- Each `handle_*` method returns PartitionChangeRecords only, and changes no state: cluster
  control adds its own BrokerRegistrationChangeRecord, and the controller replays them all.
- They are bounded: at most `max_records` changes, fewer meaning these are all; cluster control
  writes the rest in later steps of the same write, one per loop turn. `handle_broker_unfenced`
  returns a `ControllerResult` whose `then` elects the leaders left over.
- They are asked while the broker's registration still shows its old state (the records are
  replayed afterwards), so `handle_broker_fenced(b)`, `handle_broker_unclean_shutdown(b)` and
  `handle_controlled_shutdown(b)` must treat `b` as unable to lead or join an ISR, and
  `handle_broker_unfenced(b)` must treat it as able to.
- `has_leaderships(b)` and `topic_exists(name)` describe the latest state.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from replog.quorum.controller.controller_result import ControllerResult
from replog.quorum.metadata.records import (
    MetadataRecord,
    PartitionChangeRecord,
    PartitionRecord,
    RemoveTopicRecord,
    TopicRecord,
)

ReplicationRecord = TopicRecord | PartitionRecord | PartitionChangeRecord | RemoveTopicRecord


class ReplicationHooks(Protocol):
    def replay(self, record: ReplicationRecord, offset: int) -> None:
        """Apply a topic or partition record written at `offset`."""
        ...

    def handle_broker_fenced(
        self, broker_id: int, *, max_records: int | None = None
    ) -> Sequence[MetadataRecord]:
        """Records removing `broker_id` from every ISR and moving its leaderships away (at
        most `max_records`; fewer means all)."""
        ...

    def handle_broker_unfenced(self, broker_id: int, *, max_records: int) -> ControllerResult[None]:
        """Records electing leaders for leaderless partitions, `broker_id` now eligible (at
        most `max_records`; `then` elects the rest)."""
        ...

    def handle_broker_unregistered(
        self, broker_id: int, *, max_records: int | None = None
    ) -> Sequence[MetadataRecord]:
        """Records removing `broker_id` from every ISR and moving its leaderships away, before
        its registration is removed (at most `max_records`; fewer means all)."""
        ...

    def handle_broker_unclean_shutdown(
        self, broker_id: int, *, max_records: int | None = None
    ) -> Sequence[MetadataRecord]:
        """Records removing `broker_id`, registering again after an unclean shutdown, from
        every ISR and ELR and moving its leaderships away (at most `max_records`; fewer means
        all)."""
        ...

    def handle_controlled_shutdown(
        self, broker_id: int, *, max_records: int | None = None
    ) -> Sequence[MetadataRecord]:
        """Records moving `broker_id`'s leaderships away and removing it from ISRs (at most
        `max_records`; fewer means all)."""
        ...

    def has_leaderships(self, broker_id: int) -> bool:
        """Whether `broker_id` leads any partition (latest state)."""
        ...

    def topic_exists(self, topic_name: str) -> bool:
        """Whether a topic named `topic_name` exists (latest state)."""
        ...
