"""The replicas' producer tables as others see them: preloaded at start-up, read by the log
cleaner and DescribeProducers, snapshotted at stop.

Rules (Kafka's `ProducerStateManager`, `LogCleaner`, DescribeProducers):
- A starting broker loads every log's producer table before it installs the metadata image,
  so no replica reads its log on the event loop; tables no replica took are dropped once the
  first image's replicas exist.
- The cleaner's thread reads one copy of a table (`entries`), which the event loop replaces
  entries of, never mutates; a replica whose table is not loaded yet is not cleaned.
- DescribeProducers: a follower's table is the leader's as of its log end.
- At stop, each replica's snapshot at the LEO, `SWEEP_SLICE` replicas and at most
  `STOP_SNAPSHOT_WRITES_PER_TURN` written snapshots a loop turn.
"""

from __future__ import annotations

from replog.common import TopicPartitionKey
from replog.errors import NotLeaderOrFollowerError, UnknownTopicOrPartitionError
from replog.replication.producer_state import ProducerEntry
from replog.server.data_plane.producer_state_loader import preload_producer_tables
from replog.server.data_plane.replica_shell import ReplicaShell
from replog.server.data_plane.replica_timers import SWEEP_SLICE
from replog.server.runtime.loop_turns import yield_turn
from replog.storage.cleaner.batch_filter import ProducerLastBatch

# Producer snapshots (a small file each) a stop writes in one loop turn.
STOP_SNAPSHOT_WRITES_PER_TURN = 20


class ReplicaProducers(ReplicaShell):
    """The replicas' producer tables (module docstring)."""

    def _producer_last_batches(self, key: TopicPartitionKey) -> dict[int, ProducerLastBatch] | None:
        """Each producer's last data batch in the replica's log, for the cleaner's thread;
        None while the replica's producer table is not loaded (the log waits to be
        cleaned). Reads one copy of the table (`entries`), which the event loop replaces
        entries of, never mutates."""
        partition = self._partitions.get(key)
        if partition is None or not partition.producer_state_loaded:
            return None
        return {
            producer_id: ProducerLastBatch(
                entry.batches[-1].last_offset if entry.batches else None, entry.producer_epoch
            )
            for producer_id, entry in partition.producer_state.entries().items()
        }

    def _first_unstable_offset(self, key: TopicPartitionKey) -> int | None:
        """The first offset of the replica's lowest open transaction, for the cleaner's thread
        (None: none open, or the table not loaded, when the cleaner waits anyway). Reads one
        copy of the table, as `_producer_last_batches` does."""
        partition = self._partitions.get(key)
        if partition is None or not partition.producer_state_loaded:
            return None
        entries = partition.producer_state.entries().values()
        return min((e.current_txn_first_offset for e in entries if e.in_transaction), default=None)

    def preload_producer_states(self) -> None:
        """Load every log's producer table now. A starting broker calls this in a worker
        thread before it installs the metadata image, as Kafka loads producer state with its
        logs: after a crash a table is its last snapshot plus the headers written since (up
        to a segment), and the replicas the image creates then take their roles without
        reading them on the event loop."""
        self._preloaded = preload_producer_tables(
            self.log_manager.all_logs(), self._producer_expiry()
        )

    def describe_producers(self, topic: str, partition_id: int) -> tuple[ProducerEntry, ...]:
        """The producers a replica of the partition on this broker knows of (Kafka's
        DescribeProducers: a follower's table is the leader's as of its log end), by producer
        id; UNKNOWN_TOPIC_OR_PARTITION, or NOT_LEADER_OR_FOLLOWER if this broker hosts no
        replica of it."""
        partition = self._partitions.get((topic, partition_id))
        if partition is None:
            where = f"{topic}-{partition_id}"
            topic_image = self.image.topics.by_name.get(topic)
            if topic_image is None or partition_id not in topic_image.partitions:
                raise UnknownTopicOrPartitionError(f"{where}: unknown topic-partition")
            replicas = topic_image.partitions[partition_id].replicas
            raise NotLeaderOrFollowerError(
                f"{where}: broker {self.broker_id} hosts no replica of it (replicas: "
                f"{', '.join(map(str, replicas))})"
            )
        partition.ensure_producer_state()
        entries = partition.producer_state.entries()
        return tuple(entries[producer_id] for producer_id in sorted(entries))

    async def _write_producer_snapshots_at_stop(self) -> None:
        """Each replica's producer snapshot at the LEO
        (`Partition.write_producer_snapshot_at_stop`), `SWEEP_SLICE` replicas a loop turn: the
        check alone, over 100,000 replicas in one turn, held the loop 158-168 ms of CPU, while
        the node's Raft driver (its controller's stop snapshot among others) still runs on it.
        A turn also ends after `STOP_SNAPSHOT_WRITES_PER_TURN` written snapshots (a file
        each)."""
        rest = list(self._partitions.values())
        rest.reverse()  # taken off the end, in the map's order
        while rest:
            written = 0
            for _ in range(min(SWEEP_SLICE, len(rest))):
                if rest.pop().write_producer_snapshot_at_stop():
                    written += 1
                    if written >= STOP_SNAPSHOT_WRITES_PER_TURN:
                        break
            if rest:
                await yield_turn()
