"""The leader's AlterPartition requests: what the sender collects, and the controller's answers.

Rules (docs/design/replication.md#isr-shrink, #isr-expansion; Kafka's `AlterPartitionManager`):
- A partition whose core asked to send (`SendAlterPartition`) is collected by the sender
  (`pending_isr_changes`); its core hands the change over once until it is answered, replaced
  or the leadership changes (`AlterPartitionCollected`).
- An answer reaches the core of the replica it was for (same topic id, still leading); a late
  one for a replica that moved on is dropped. The core decides what follows (HW, retries).
- One log line per loop turn for the answers of many partitions (`TurnSummary`).
"""

from __future__ import annotations

import logging

from replog.errors import KafkaError
from replog.replication.leader_state import IsrChange
from replog.replication.partition_effects import HandOverAlterPartition
from replog.replication.partition_events import AlterPartitionAnswered, AlterPartitionCollected
from replog.server.data_plane.replica_shell import ReplicaShell

log = logging.getLogger("replog.server.data_plane.replica_manager")  # every role's lines

ALTER_PARTITION_COLLECTED = AlterPartitionCollected()


class IsrChanges(ReplicaShell):
    """AlterPartition: collected changes and answers (module docstring)."""

    def pending_isr_changes(self) -> list[IsrChange]:
        """ISR changes to send to the controller, as each partition's core hands them over
        (once until answered)."""
        changes = []
        now_ms = self._clock()
        for key in sorted(self._isr_dirty):
            partition = self._partitions.get(key)
            if partition is None:
                continue
            for effect in partition.core.step(ALTER_PARTITION_COLLECTED, now_ms):
                assert isinstance(effect, HandOverAlterPartition)
                changes.append(effect.change)
        self._isr_dirty.clear()
        return changes

    def on_isr_change_result(
        self,
        change: IsrChange,
        error: KafkaError | None,
        isr: tuple[int, ...],
        leader_epoch: int,
        partition_epoch: int,
    ) -> None:
        """The controller's answer to `change` (or the sender's error for it)."""
        key = (change.topic, change.partition)
        partition = self._partitions.get(key)
        leader_state = partition.leader_state if partition is not None else None
        if partition is None or leader_state is None or partition.topic_id != change.topic_id:
            return  # leadership moved on meanwhile
        now_ms = self._clock()
        answered = AlterPartitionAnswered(
            change, error, isr, leader_epoch, partition_epoch, partition.log.log_end_offset
        )
        if error is None:
            isr_size_before = len(leader_state.isr)
            effects = partition.core.step(answered, now_ms)
            self.counters.isr_changed(isr_size_before, len(leader_state.isr))
            self._count_leader(partition)
            isr_now = f"ISR is now {list(leader_state.isr)}"
            self._isr_log.add(
                logging.INFO,
                isr_now,
                partition.name,
                f"{partition.name}: {isr_now} (partition epoch {leader_state.partition_epoch})",
            )
            self._execute(partition, effects)
            return
        self._isr_log.add(
            logging.WARNING,
            f"AlterPartition failed ({type(error).__name__})",
            partition.name,
            f"{partition.name}: AlterPartition to ISR {list(change.new_isr)} failed: {error}",
        )
        self._execute(partition, partition.core.step(answered, now_ms))
