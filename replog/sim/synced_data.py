"""`SyncedData`: a replica of a `flush.messages=1` topic keeps, across its own power loss,
every batch its log had synced.

Rules:
- Just before a node loses power (`SimCluster.power_loss`), each of its running replicas of a
  flushed topic records the batches below its recovery point (what the log counts as synced:
  Kafka's recovery point is where a restart's recovery begins, so nothing below it is
  checked again).
- Right after, the crashed disk (what the restarted node will open, before any fetch can
  truncate the log to a leader's epochs) must hold each of those batches in the replica's
  segment files, at its offset with its bytes. A batch missing or changed is a broken
  durability promise (a failed fsync taken for a success, a segment whose directory entry
  was never synced).
- The checker's reads go through `suspended` (no disk fault fires meanwhile).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager

from replog.record.header import iter_frames, read_header
from replog.sim.cluster import SimCluster, SimNode
from replog.sim.data_invariants import READ_BYTES, TopicSpec
from replog.sim.invariants import InvariantViolation
from replog.storage.log import Log
from replog.storage.memory_fs import MemoryFileSystem

__all__ = ["SyncedData", "first_lost"]

# (topic, partition) -> (the log's directory, its recovery point, base offset -> batch bytes)
_Synced = dict[tuple[str, int], tuple[str, int, dict[int, bytes]]]


def _synced_batches(log: Log) -> dict[int, bytes]:
    """The whole batches of `log` below its recovery point, by base offset."""
    batches: dict[int, bytes] = {}
    point, offset = log.recovery_point, log.log_start_offset
    while offset < point:
        data = log.read(offset, READ_BYTES, point)
        frames = list(iter_frames(data))
        if not frames:
            break
        for position, size in frames:
            header = read_header(data, position)
            if header.next_offset > point:
                return batches
            batches[header.base_offset] = bytes(data[position : position + size])
            offset = header.next_offset
    return batches


class SyncedData:
    """Module Rules; `suspended` keeps the nodes' disk faults off while it reads."""

    def __init__(
        self,
        cluster: SimCluster,
        specs: tuple[TopicSpec, ...],
        suspended: Callable[[], AbstractContextManager[None]] = contextlib.nullcontext,
    ) -> None:
        self._cluster = cluster
        self._flushed = tuple(spec for spec in specs if spec.flushed)
        self._suspended = suspended
        self.checked = 0  # batches found on a crashed disk
        cluster.around_power_loss = self.around_power_loss

    @contextlib.contextmanager
    def around_power_loss(self, node: SimNode) -> Iterator[None]:
        """Record before node `node` loses power, check its crashed disk after (Rules)."""
        with self._suspended():
            synced = self._record(node)
        yield
        with self._suspended():
            self._check(node, synced)

    def _record(self, node: SimNode) -> _Synced:
        synced: _Synced = {}
        manager = None if node.broker is None else node.broker.replica_manager
        if manager is None:
            return synced
        for spec in self._flushed:
            for index in range(spec.partitions):
                replica = manager.partition(spec.name, index)
                if replica is None or replica.stopped or replica.log.closed:
                    continue
                log = replica.log
                synced[(spec.name, index)] = (
                    log.directory,
                    log.recovery_point,
                    _synced_batches(log),
                )
        return synced

    def _check(self, node: SimNode, synced: _Synced) -> None:
        for (topic, index), (directory, point, batches) in synced.items():
            lost = first_lost(node.disk, directory, batches)
            if lost is not None:
                base, what = lost
                raise InvariantViolation(
                    f"at {self._cluster.loop.now_ms()} ms node {node.node_id} lost power: "
                    f"its replica of {topic}-{index} (flush.messages=1) had synced up to "
                    f"offset {point}, but the batch at offset {base} is {what} on its "
                    "disk: a synced batch lost"
                )
            self.checked += len(batches)


def first_lost(
    disk: MemoryFileSystem, directory: str, batches: dict[int, bytes]
) -> tuple[int, str] | None:
    """The first of `batches` (base offset -> bytes) that the segment files in `directory`
    of `disk` do not hold at its offset with its bytes, and whether it is "missing" or
    "changed"; None when they hold every one. A torn tail past the batches is no loss."""
    if not batches:
        return None
    on_disk: dict[int, bytes] = {}
    names = sorted(disk.list_dir(directory)) if disk.exists(directory) else []
    for name in names:
        if name.endswith(".log"):
            data = disk.read_bytes(f"{directory}/{name}") or b""
            for position, size in iter_frames(data):
                base = read_header(data, position).base_offset
                on_disk.setdefault(base, data[position : position + size])
    for base in sorted(batches):
        if on_disk.get(base) != batches[base]:
            return base, "missing" if base not in on_disk else "changed"
    return None
