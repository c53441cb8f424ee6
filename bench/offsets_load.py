"""A group coordinator's takeover of a `__consumer_offsets` partition before and after the log
cleaner compacted it (issue #78's goal: load time bounded by the live keys, not the commits).

Written: one offsets partition's log (`cleanup.policy=compact`, `segment.bytes` 100 MiB as
Kafka's `offsets.topic.segment.bytes`) holding `--commits` offset commits of `--groups`
classic consumer groups, each reading one topic of `--partitions` partitions with two members:
every round each group commits all its partitions in one batch (one OffsetCommit request, as
a consumer's auto-commit), and every `--rebalance-every` rounds it rebalances (a group
membership record with the next generation). At the end 1% of the groups are deleted (the
tombstones of their offsets and of the group, as DeleteGroups writes). Every record is made
by the coordinator's own encoders (`offsets_records`, `group_records`, `consumer_protocol`)
into one batch per request (`BatchBuilder`), appended with `Log.append_as_leader` as the
replica manager does. The active segment is then rolled, as `segment.ms` would: the cleaner
never touches it.

Measured: the coordinator's load (`GroupCoordinator._read_offsets`, what a new leader of the
partition runs on a worker thread: the log read from its start in `offsets.load.buffer.size`
chunks and replayed into the offsets cache and both protocols' group cores), `--runs` times;
then one cleaning of the log as the broker's cleaner runs it (`summarize_log` and
`log_to_clean` choose the offsets, `clean_log` passes with a `log.cleaner.dedupe.buffer.size`
key map until the dirty section is done); then the load again. The loaded state (every
group's committed offsets, every classic group's generation and members, the consumer
groups) must be identical before and after, or the script fails.

    .venv/bin/python bench/offsets_load.py [--commits 1000000] [--groups 1000] [--runs 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from typing import Any

from replog.clock import wall_clock_ms
from replog.common import TopicPartition
from replog.coordinator.consumer_protocol import (
    Subscription,
    assignment_to_bytes,
    subscription_to_bytes,
)
from replog.coordinator.group_records import (
    GroupMetadataValue,
    MemberMetadata,
    encode_group_key,
    encode_group_value,
)
from replog.coordinator.offsets_records import (
    GroupMetadataKey,
    OffsetCommitKey,
    OffsetCommitValue,
    encode_key,
    encode_value,
)
from replog.record.builder import BatchBuilder
from replog.server.config.group_coordinator_config import GroupCoordinatorConfig
from replog.server.groups.group_coordinator import GroupCoordinator
from replog.storage import Log, LogConfig
from replog.storage.cleaner.cleanable import log_to_clean
from replog.storage.cleaner.log_cleaning import clean_log
from replog.storage.cleaner.log_summary import summarize_log
from replog.storage.cleaner.offset_map import OffsetMap
from replog.topic_names import CONSUMER_OFFSETS_TOPIC

OFFSETS_SEGMENT_BYTES = 100 * 1024 * 1024  # Kafka's offsets.topic.segment.bytes
DEDUPE_BUFFER_BYTES = 128 * 1024 * 1024  # Kafka's log.cleaner.dedupe.buffer.size
DELETE_RETENTION_MS = 86_400_000  # Kafka's delete.retention.ms
MIN_CLEANABLE_DIRTY_RATIO = 0.5  # Kafka's min.cleanable.dirty.ratio
LEADER_EPOCH = 0
MEMBERS = 2
DELETED_GROUPS_EVERY = 100  # 1% of the groups are deleted at the end


def group_value(group: str, topic: str, partitions: int, generation: int, now_ms: int) -> bytes:
    """A Stable group of `MEMBERS` range-assigned consumers, as the coordinator stores it."""
    members = []
    for m in range(MEMBERS):
        mine = [TopicPartition(topic, p) for p in range(partitions) if p % MEMBERS == m]
        members.append(
            MemberMetadata(
                member_id=f"consumer-{group}-{m}-{generation:08d}",
                group_instance_id=None,
                client_id=f"consumer-{group}-{m}",
                client_host="/127.0.0.1",
                rebalance_timeout_ms=300_000,
                session_timeout_ms=45_000,
                subscription=subscription_to_bytes(Subscription((topic,))),
                assignment=assignment_to_bytes(mine),
            )
        )
    return encode_group_value(
        GroupMetadataValue(
            protocol_type="consumer",
            generation=generation,
            protocol="range",
            leader=members[0].member_id,
            current_state_timestamp_ms=now_ms,
            members=tuple(members),
        )
    )


def write_commits(
    plog: Log, commits: int, groups: int, partitions: int, rebalance_every: int
) -> dict[str, int]:
    """Fill `plog` (module docstring); what was written."""
    rounds = max(1, commits // (groups * partitions))
    start_ms = wall_clock_ms() - 3_600_000  # an hour of commits ending now
    step_ms = max(1, 3_600_000 // rounds)
    names = [f"group-{g:05d}" for g in range(groups)]
    topics = [f"topic-{g % 100:03d}" for g in range(groups)]
    written = {"offset_records": 0, "group_records": 0, "tombstones": 0, "batches": 0}

    def append(batch: BatchBuilder) -> None:
        plog.append_as_leader(batch.build(), LEADER_EPOCH)
        written["batches"] += 1

    for r in range(rounds):
        now_ms = start_ms + r * step_ms
        for g, group in enumerate(names):
            if r % rebalance_every == 0:
                generation = r // rebalance_every + 1
                batch = BatchBuilder()
                batch.append(
                    now_ms,
                    encode_group_key(GroupMetadataKey(group)),
                    group_value(group, topics[g], partitions, generation, now_ms),
                )
                append(batch)
                written["group_records"] += 1
            batch = BatchBuilder()
            for p in range(partitions):
                value = OffsetCommitValue(1_000 * (r + 1) + 7 * p + g, LEADER_EPOCH, "", now_ms)
                batch.append(
                    now_ms, encode_key(OffsetCommitKey(group, topics[g], p)), encode_value(value)
                )
            append(batch)
            written["offset_records"] += partitions
    end_ms = start_ms + rounds * step_ms
    for g in range(0, groups, DELETED_GROUPS_EVERY):
        batch = BatchBuilder()
        for p in range(partitions):
            batch.append(end_ms, encode_key(OffsetCommitKey(names[g], topics[g], p)), None)
        batch.append(end_ms, encode_group_key(GroupMetadataKey(names[g])), None)
        append(batch)
        written["tombstones"] += partitions + 1
    plog.high_watermark = plog.log_end_offset
    plog.roll()
    return written


def load(plog: Log, config: GroupCoordinatorConfig) -> tuple[float, int, Any]:
    """(seconds, records replayed, the loaded state) of one coordinator load."""
    started = time.perf_counter()
    cache, classic, consumer, stats = GroupCoordinator._read_offsets(
        plog,
        config.offsets_load_buffer_size,
        config.classic,
        config.consumer,
        wall_clock_ms,
    )
    elapsed = time.perf_counter() - started
    assert not stats.skipped, f"the load skipped records: {stats.reasons}"
    state = (
        {group: cache.committed(group) for group in cache.groups()},
        {
            group_id: (g.generation, g.state, g.protocol_name, g.leader_id, sorted(g.members))
            for group_id, g in classic.groups.items()
        },
        classic.describe(sorted(classic.groups)),
        sorted(consumer.groups),
    )
    return elapsed, stats.records, state


def clean(plog: Log) -> tuple[float, int]:
    """Clean `plog` as the broker's cleaner would, to the end of its dirty section: (seconds,
    passes)."""
    started = time.perf_counter()
    offset_map = OffsetMap(DEDUPE_BUFFER_BYTES)
    checkpoint: int | None = None
    passes = 0
    while True:
        now_ms = wall_clock_ms()
        summary = summarize_log(
            plog,
            min_cleanable_dirty_ratio=MIN_CLEANABLE_DIRTY_RATIO,
            min_compaction_lag_ms=0,
            max_compaction_lag_ms=sys.maxsize,
        )
        chosen = log_to_clean(summary, checkpoint, now_ms)
        if chosen.first_dirty >= chosen.first_uncleanable or (passes and not chosen.qualifies):
            break
        result = clean_log(
            plog,
            offset_map,
            first_dirty=chosen.first_dirty,
            first_uncleanable=chosen.first_uncleanable,
            now_ms=now_ms,
            delete_retention_ms=DELETE_RETENTION_MS,
        )
        assert not result.abandoned, "the cleaning pass was abandoned"
        passes += 1
        checkpoint = result.end_offset
    return time.perf_counter() - started, passes


def spread(values: list[float]) -> str:
    return f"min {min(values):.3f} / median {statistics.median(values):.3f} / max {max(values):.3f}"


def measured(
    what: str, plog: Log, config: GroupCoordinatorConfig, runs: int
) -> tuple[list[float], Any]:
    times: list[float] = []
    states: list[Any] = []
    records = 0
    for _ in range(runs):
        seconds, records, state = load(plog, config)
        times.append(seconds)
        states.append(state)
    assert all(s == states[0] for s in states), f"{what}: loads disagree"
    offsets = sum(len(v) for v in states[0][0].values())
    print(
        f"{what}: log {plog.size_in_bytes / 1e6:.1f} MB in {plog.segment_count} segments, "
        f"{records:,} records read, {offsets:,} committed offsets of {len(states[0][0]):,} "
        f"groups; load s {spread(times)}"
    )
    return times, states[0]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--commits", type=int, default=1_000_000, help="offset records")
    parser.add_argument("--groups", type=int, default=1_000)
    parser.add_argument("--partitions", type=int, default=10, help="partitions per group")
    parser.add_argument("--rebalance-every", type=int, default=25, help="rounds")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args(argv)
    config = GroupCoordinatorConfig()
    log_config = LogConfig(cleanup_policy="compact", segment_bytes=OFFSETS_SEGMENT_BYTES)
    with tempfile.TemporaryDirectory(prefix="replog-offsets-load-") as work:
        plog = Log.open(f"{work}/{CONSUMER_OFFSETS_TOPIC}-0", log_config)
        started = time.perf_counter()
        written = write_commits(
            plog, args.commits, args.groups, args.partitions, args.rebalance_every
        )
        print(
            f"wrote {written['offset_records']:,} offset commits, {written['group_records']:,} "
            f"group records and {written['tombstones']:,} tombstones in {written['batches']:,} "
            f"batches ({time.perf_counter() - started:.1f} s)"
        )
        before, state_before = measured("before cleaning", plog, config, args.runs)
        seconds, passes = clean(plog)
        print(f"cleaned in {seconds:.2f} s ({passes} passes)")
        after, state_after = measured("after cleaning ", plog, config, args.runs)
        assert state_before == state_after, "the state loaded after cleaning differs"
        print(
            "loaded state identical before and after cleaning; load time ratio (median) "
            f"{statistics.median(before) / statistics.median(after):.1f}x"
        )
        plog.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
