"""What a replica's log cleaner left on its broker's disk, read from the files directly (as a
dump tool would, whole batches only): its `cleaner-offset-checkpoint` entry and the records of
its segment files.

A replica's files are read once its cleaner is done (`wait_until_cleaned`): a pass still
running swaps segments under the reader and moves the checkpoint past what was read."""

from __future__ import annotations

import time
from pathlib import Path

from client_cluster import ClientCluster

from replog.record import RecordBatch, iter_frames

Record = tuple[int, bytes | None, bytes | None]  # offset, key, value


def partition_dir(cluster: ClientCluster, node_id: int, topic: str) -> Path:
    return Path(cluster.loopback.layout.node(node_id).data_path) / f"{topic}-0"


def cleaned_offset(cluster: ClientCluster, node_id: int, topic: str) -> int | None:
    """The replica's cleaner checkpoint entry for the topic's partition 0, if any."""
    path = partition_dir(cluster, node_id, topic).parent / "cleaner-offset-checkpoint"
    try:
        lines = path.read_text().splitlines()
    except FileNotFoundError:
        return None
    for line in lines[2:]:
        name, partition, offset = line.split()
        if (name, partition) == (topic, "0"):
            return int(offset)
    return None


def active_segment_base(cluster: ClientCluster, node_id: int, topic: str) -> int | None:
    """The base offset of the replica's active segment (its last `.log` file), if any."""
    bases = [int(path.stem) for path in partition_dir(cluster, node_id, topic).glob("*.log")]
    return max(bases, default=None)


def wait_until_cleaned(
    cluster: ClientCluster, nodes: list[int], topic: str, timeout_s: float = 60
) -> dict[int, int]:
    """Each replica's cleaned offset once its cleaner has nothing left to clean: its
    checkpoint entry at its active segment's base offset (the active segment is never
    cleaned). A pass writes its entry after its swap, and with nothing written to the topic
    meanwhile no pass starts after it, so the files hold still from then on."""
    deadline = time.monotonic() + timeout_s
    while True:
        reached = {n: cleaned_offset(cluster, n, topic) for n in nodes}
        active = {n: active_segment_base(cluster, n, topic) for n in nodes}
        if all(reached[n] is not None and reached[n] == active[n] for n in nodes):
            return {n: r for n, r in reached.items() if r is not None}
        assert time.monotonic() < deadline, (
            f"after {timeout_s} s the cleaned offsets of {topic} are {reached}, "
            f"its active segments' bases {active}"
        )
        time.sleep(0.1)


def replica_records(cluster: ClientCluster, node_id: int, topic: str) -> list[Record]:
    """(offset, key, value) of every record in the replica's segment files of partition 0, in
    file order; a batch still being written at the end of the active segment is left out.
    Read again when a pass swapped segments in meanwhile (a file listed is gone)."""
    for _ in range(50):
        records = []
        try:
            for segment in sorted(partition_dir(cluster, node_id, topic).glob("*.log")):
                data = segment.read_bytes()
                for at, length in iter_frames(data):
                    batch = RecordBatch.parse(data[at : at + length], sparse=True)
                    records.extend((r.offset, r.key, r.value) for r in batch.records())
        except FileNotFoundError:
            time.sleep(0.05)
            continue
        return records
    raise AssertionError(f"node {node_id}: the segments of {topic} kept changing while read")
