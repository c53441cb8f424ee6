"""CPU of a broker's metadata apply per 1,000 partitions, in process (issue #50).

Two cases over an image of `--base-partitions` partitions (1,000-topic steps of 10 partitions,
RF 3 over brokers 1-3): `create`, a batch of 100 new topics x 10 partitions (TopicRecord and
PartitionRecords as the controller writes them); `stop`, 1,000 "leader to none"
PartitionChangeRecords (the ISR cut to its last member, as a whole cluster's stop writes).
Timed with `time.thread_time`: the loader's replay and image build, the broker's local changes
and their staging for the replica-change queue (what runs on the loop per publication);
`create decode` and `stop decode`, the same records' decoding from committed Raft batches of
250 (every node decodes each batch once for its controller and broker); with
`--replicas`, also a real broker 1's `ReplicaManager` (logs under a temporary directory) acting
on the stop's publication: its role changes, fetch-session news and fetch sources (the
creation's log files are made off the loop, so that case stays metadata only).

With `--base COMMIT` the same cases run against that commit's code too, each run in a fresh
process per side, the sides alternating (bench/base_commit.py); each case prints both sides'
min / median / max and working tree / base per run pair.

    python bench/metadata_apply_cpu.py --runs 7 --replicas
    python bench/metadata_apply_cpu.py --runs 7 --replicas --base f2d5e01
"""

from __future__ import annotations

import argparse
import gc
import json
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from uuid import UUID

from base_commit import add_arguments, against_lines, runs_against, spread

from replog.quorum.metadata.image import MetadataImage
from replog.quorum.metadata.loader import MetadataLoader, Publication
from replog.quorum.metadata.log_batches import CommittedRecords
from replog.quorum.metadata.record_batches import decode_batch_in_steps
from replog.quorum.metadata.record_codec import encode_record
from replog.quorum.metadata.records import (
    METADATA_VERSION_FEATURE,
    NO_LEADER,
    Endpoint,
    FeatureLevelRecord,
    MetadataRecord,
    PartitionChangeRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    TopicRecord,
)
from replog.quorum.metadata.steps import REPLAY_STEP_RECORDS, run_to_end
from replog.record import BatchBuilder
from replog.server.data_plane.replica_change_queue import stage_in_steps
from replog.server.data_plane.replica_manager import ReplicaManager, ReplicaManagerConfig
from replog.storage.log_config import LogConfig
from replog.storage.log_manager import LogManager
from replog.testing import LoopTasks, ManualClock

BROKER = 1
PER_TOPIC = 10


def cluster_records() -> list[MetadataRecord]:
    records: list[MetadataRecord] = [FeatureLevelRecord(METADATA_VERSION_FEATURE, 7)]
    for broker in (1, 2, 3):
        endpoint = Endpoint("PLAINTEXT", f"broker{broker}", 9092)
        records.append(
            RegisterBrokerRecord(broker, UUID(int=broker), 10 * broker, (endpoint,), fenced=False)
        )
    return records


def topic_records(first: int, topics: int) -> list[MetadataRecord]:
    records: list[MetadataRecord] = cluster_records() if first == 0 else []
    for t in range(first, first + topics):
        tid = UUID(int=(t + 1) * 7919)
        records.append(TopicRecord(f"topic-{t}", tid))
        for p in range(PER_TOPIC):
            replicas = tuple((t + p + i) % 3 + 1 for i in range(3))
            records.append(PartitionRecord(tid, p, replicas, replicas, replicas[0]))
    return records


def loaded(records: list[MetadataRecord], loader: MetadataLoader | None = None) -> MetadataLoader:
    loader = loader or MetadataLoader()
    base = loader.last_loaded_offset + 1
    batch = CommittedRecords(base, base + len(records) - 1, 1, tuple(records))
    run_to_end(loader.commit_in_steps(batch, base + len(records)))
    return loader


def timed(
    loader: MetadataLoader, records: Sequence[MetadataRecord], manager: ReplicaManager | None = None
) -> float:
    gc.collect()
    gc.disable()
    started = time.thread_time()
    base = loader.last_loaded_offset + 1
    batch = CommittedRecords(base, base + len(records) - 1, 1, tuple(records))
    publication = run_to_end(loader.commit_in_steps(batch, base + len(records)))
    assert publication is not None
    if manager is None:
        changes = run_to_end(publication.local_changes_in_steps(BROKER))
        run_to_end(stage_in_steps(changes))
    else:
        run_to_end(manager.update_in_steps(publication))
    spent = time.thread_time() - started
    gc.enable()
    return spent * 1000


def decode_timed(records: Sequence[MetadataRecord]) -> float:
    """ms to decode `records` from committed batches of `REPLAY_STEP_RECORDS` each."""
    batches = []
    for first in range(0, len(records), REPLAY_STEP_RECORDS):
        builder = BatchBuilder(base_offset=first, partition_leader_epoch=1)
        for record in records[first : first + REPLAY_STEP_RECORDS]:
            builder.append(1_700_000_000_000, None, encode_record(record))
        batches.append(builder.build())
    gc.collect()
    gc.disable()
    started = time.thread_time()
    for data in batches:
        run_to_end(decode_batch_in_steps(data, where="bench", records_per_step=REPLAY_STEP_RECORDS))
    spent = time.thread_time() - started
    gc.enable()
    return spent * 1000


def replica_manager(root: Path, publication: Publication) -> ReplicaManager:
    """Broker 1's replica manager, not started (changes applied at once), at `publication`."""
    clock = ManualClock(1_700_000_000_000)
    manager = ReplicaManager(
        ReplicaManagerConfig(BROKER),
        LogManager(str(root), LogConfig(), task_clock=clock),
        clock=clock,
        wall_clock=clock,
        broker_epoch=lambda: 10,
        tasks=LoopTasks(),
    )
    run_to_end(manager.update_in_steps(publication))
    return manager


def stop_records(image: MetadataImage, count: int) -> list[MetadataRecord]:
    records: list[MetadataRecord] = []
    for topic in image.topics.by_name.values():
        for pid, partition in topic.partitions.items():
            if len(records) == count:
                return records
            records.append(
                PartitionChangeRecord(topic.topic_id, pid, isr=partition.isr[-1:], leader=NO_LEADER)
            )
    return records


def measure(runs: int, base_partitions: int, replicas: bool) -> dict[str, list[float]]:
    """Each case's ms per 1,000 partitions, one figure per run, in this process."""
    results: dict[str, list[float]] = {"create": [], "stop": [], "create decode": []}
    results["stop decode"] = []
    if replicas:
        results["stop + replica manager"] = []
    for _ in range(runs):
        base_topics = base_partitions // PER_TOPIC
        loader = loaded(topic_records(0, base_topics))
        results["create"].append(timed(loader, topic_records(base_topics, 100)))
        results["stop"].append(timed(loader, stop_records(loader.image, 1000)))
        results["create decode"].append(decode_timed(topic_records(base_topics, 100)))
        results["stop decode"].append(decode_timed(stop_records(loader.image, 1000)))
    if replicas:
        with tempfile.TemporaryDirectory(prefix="metadata-apply-") as root:
            # 1,000 partitions whose replicas exist on broker 1, created once.
            loader = MetadataLoader()
            records = topic_records(0, 100)
            base = CommittedRecords(0, len(records) - 1, 1, tuple(records))
            first = run_to_end(loader.commit_in_steps(base, len(records)))
            assert first is not None
            manager = replica_manager(Path(root), first)
            for _ in range(runs):
                image = loader.image
                stop = stop_records(image, 1000)
                results["stop + replica manager"].append(timed(loader, stop, manager))
                # Leaders back for the next run: every partition led by its first replica.
                back = [
                    PartitionChangeRecord(
                        topic.topic_id, pid, isr=partition.replicas, leader=partition.replicas[0]
                    )
                    for topic in image.topics.by_name.values()
                    for pid, partition in topic.partitions.items()
                ]
                timed(loader, back, manager)
    return results


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument(
        "--base-partitions", type=int, default=10_000, help="partitions already there"
    )
    parser.add_argument(
        "--replicas", action="store_true", help="the stop through a real ReplicaManager too"
    )
    add_arguments(parser)
    args = parser.parse_args()
    if args.base:
        child_args = ["--base-partitions", str(args.base_partitions)]
        child_args += ["--replicas"] if args.replicas else []
        work, base = runs_against(__file__, child_args, args.runs, args.base)
        print(f"ms per 1,000 partitions, min / median / max of {args.runs} runs a side")
        print("\n".join(against_lines(work, base, args.base)))
        return
    results = measure(args.runs, args.base_partitions, args.replicas)
    if args.emit_json:
        print(json.dumps(results))
        return
    for case, times in results.items():
        print(f"{case}: ms per 1,000 partitions min/median/max {spread(times)}")


if __name__ == "__main__":
    main()
