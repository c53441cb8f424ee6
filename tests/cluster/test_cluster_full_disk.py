"""A node whose disk fills up, for real: node 2's data dir is a small tmpfs, filled by an acks=all
stream, or nearly full while topics are created (docs/reliability.md, "Broker data plane": full
disk).

What must hold when records fill it, as Kafka's broker behaves with its only log dir failed:
- the node stops on the first failed write (ENOSPC from the kernel, not an injected error:
  an append's, or a rolled segment's index flush in the background), with a CRITICAL line
  naming the partition, the file and the cause, and no traceback or ERROR line on any node.
  In particular the followers' ReplicaFetch streams
  to the stopping node end cleanly instead of being cancelled by the server's stop (which
  gRPC logs as tracebacks),
  and a background index flush that fails stops the broker instead of logging a traceback
  every 100 ms;
- the other two nodes carry on: the stream (RF 3, `min.insync.replicas=2`) has no failed send;
- once the disk has room again (the tmpfs grown) and the node restarted, it recovers its logs,
  catches up and is back in every ISR;
- every acknowledged record is in the log once, at its offset, in send order; after a clean
  stop the three replicas hold the same batches below the high watermark.

When metadata fills it (the node's metadata log shares the dir, and each partition placed on
it writes a directory and a leader-epoch checkpoint): the node stops the same way, naming the
file, also when its metadata log's last index writes fail as it stops (a bare OSError without
a file name ended the process before); with room again it restarts and knows every topic.

Mounting a tmpfs needs root (CI runs as root); without it the test fails saying so.
"""

from __future__ import annotations

import re
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from client_cluster import ClientCluster, start_client_cluster
from cluster_helpers import wait_for
from proxied_cluster import Stream, assert_exactly_once_in_order, read_log
from replication_helpers import assert_identical, overrides, read_replicas

from replog.admin.controller_results import NewTopic

pytestmark = pytest.mark.slow

TOPIC = "full"
PARTITIONS = 3
FULL_NODE = 2
DISK_BYTES = 24 << 20  # the metadata log and about 20 MiB of records
ROOMY_BYTES = 512 << 20
ACKS_AFTER_THE_STOP = 3000  # acknowledged by the other two nodes once node 2 is gone
METADATA_ROOM_BYTES = 40 << 10
MAX_TOPICS = 200


def mount_tmpfs(path: Path, size: int, *options: str) -> None:
    option = ",".join([*options, f"size={size}"])
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", option, "tmpfs", str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, (
        f"this test mounts a tmpfs as the full disk, which needs root (CI runs as root): "
        f"mount -o {option} {path}: {done.stderr.strip()}"
    )


@contextmanager
def small_disk_under(cluster: ClientCluster, node_id: int) -> Iterator[Path]:
    """Node `node_id`'s data dir moved onto a DISK_BYTES tmpfs (the node stopped, its files
    copied over, the node restarted); the cluster stopped and the tmpfs unmounted on the way
    out."""
    loopback = cluster.loopback
    data = Path(loopback.layout.node(node_id).data_path)
    loopback.signal(node_id, signal.SIGTERM)
    wait_for(lambda: node_id not in loopback.running(), 40, f"node {node_id} to stop")
    saved = data.with_name("data-before-tmpfs")
    data.rename(saved)
    data.mkdir()
    mounted = False
    try:
        mount_tmpfs(data, DISK_BYTES)
        mounted = True
        shutil.copytree(saved, data, dirs_exist_ok=True)
        loopback.restart(node_id)
        yield data
    finally:
        cluster.stop()
        if mounted:
            subprocess.run(["umount", "-l", str(data)], check=False)


def node_log(cluster: ClientCluster, node_id: int) -> str:
    return Path(cluster.loopback.layout.node(node_id).log_path).read_text(errors="replace")


def assert_stopped_on_the_full_disk(cluster: ClientCluster, disk: Path, what: str) -> None:
    """The full node said, at CRITICAL, that it stops on a storage error naming `what` (a
    pattern) and a file on `disk` with the kernel's ENOSPC: its broker's (`storage error`) or
    its metadata log's (`disk failure`, when a Raft append or state write failed first)."""
    critical = [line for line in node_log(cluster, FULL_NODE).splitlines() if "CRITICAL" in line]
    stopping = rf"(storage error|disk failure), stopping: {what}.*{re.escape(str(disk))}/"
    assert any(
        re.search(stopping, line) and "No space left on device" in line for line in critical
    ), critical


def assert_no_errors_logged(cluster: ClientCluster) -> None:
    """No traceback or ERROR line, and no error that ended a process without going through
    its log (the CLI's last word, `replog node: ...`, names no file)."""
    for node_id in (1, 2, 3):
        bad = [
            line
            for line in node_log(cluster, node_id).splitlines()
            if "Traceback" in line or re.search(r"\bERROR\b", line) or line.startswith("replog ")
        ]
        assert not bad, f"node {node_id}: {bad[:5]}"


def test_a_node_whose_disk_fills_stops_and_rejoins_once_it_has_room(tmp_path: Path) -> None:
    cluster = start_client_cluster(
        tmp_path / "cluster",
        3,
        *overrides(replica_lag_time_max_ms=2000, broker_session_timeout_ms=4000),
    )
    with small_disk_under(cluster, FULL_NODE) as disk:
        cluster.wait_healthy([])
        cluster.create_topic(
            TOPIC, PARTITIONS, 3, {"min.insync.replicas": "2", "segment.bytes": str(1 << 20)}
        )
        with (
            cluster.producer(linger_ms=5) as producer,
            Stream(producer, TOPIC, PARTITIONS, value_size=1000) as stream,
        ):
            wait_for(
                lambda: FULL_NODE not in cluster.loopback.running(),
                120,
                f"node {FULL_NODE} to stop on its full disk",
            )
            stopped_at = stream.completed
            stream.wait_acks(ACKS_AFTER_THE_STOP, 60, "acks from the other nodes")
        # The first failed write names its partition and file: an append's, or the index
        # flush of a rolled segment in the background.
        assert_stopped_on_the_full_disk(cluster, disk, rf"{TOPIC}-\d: ")

        # Room again: the tmpfs grown in place, as an operator frees space, then a restart.
        mount_tmpfs(disk, ROOMY_BYTES, "remount")
        cluster.loopback.restart(FULL_NODE)
        cluster.wait_healthy([TOPIC], timeout_s=90)

        log = read_log(cluster, TOPIC, PARTITIONS)
        checked = assert_exactly_once_in_order(stream, log)
        assert checked >= stopped_at + ACKS_AFTER_THE_STOP
        ends = {p: entries[-1][0] + 1 if entries else 0 for p, entries in log.items()}
        stopped = cluster.loopback.cli("stop")
        assert stopped.returncode == 0, stopped.stderr
        for partition in range(PARTITIONS):
            replicas = read_replicas(
                cluster.loopback, [1, 2, 3], TOPIC, tmp_path / "scratch", partition
            )
            assert_identical(replicas, ends[partition], f"{TOPIC}-{partition}")
        assert_no_errors_logged(cluster)
    print(f"\n{checked} acknowledged records checked; node {FULL_NODE} stopped after {stopped_at}")


def test_a_node_whose_disk_fills_with_metadata_stops_and_catches_up_once_it_has_room(
    tmp_path: Path,
) -> None:
    cluster = start_client_cluster(tmp_path / "cluster", 3)
    with small_disk_under(cluster, FULL_NODE) as disk:
        cluster.wait_healthy([])
        # All but METADATA_ROOM_BYTES taken by another file: what the node writes next for
        # new topics (metadata records, partition directories, checkpoints) finds no room.
        filler = disk / "filler"
        free = shutil.disk_usage(disk).free
        filler.write_bytes(b"\0" * (free - METADATA_ROOM_BYTES))
        created: list[str] = []
        while FULL_NODE in cluster.loopback.running():
            assert len(created) < MAX_TOPICS, f"node {FULL_NODE} still runs: {created}"
            name = f"meta{len(created)}"
            with cluster.admin() as admin:
                (result,) = admin.create_topics([NewTopic(name, 1, 1)])
            assert result.error is None, result.error
            created.append(name)
            time.sleep(0.05)
        assert_stopped_on_the_full_disk(cluster, disk, "")
        filler.unlink()
        cluster.loopback.restart(FULL_NODE)
        cluster.wait_healthy(created, timeout_s=60)
        for name in created:  # every node's broker, node 2's too, leads or knows each
            cluster.wait_for_leaders(name, 1, 30)
        assert_no_errors_logged(cluster)
    print(f"\nnode {FULL_NODE} stopped after {len(created)} topics")
