"""What a broker holds in each of its log dirs: the answer to DescribeLogDirs (Kafka's KIP-113).

Pure: it reads the logs' current sizes and offsets and decides nothing else; the Broker service
(`broker_cores.DescribeLogDirs`) calls it with the replica manager's log manager.

Rules (Kafka's `ReplicaManager.describeLogDirs`, with replog's additions):
- One entry per configured log dir, in `log.dirs` order, its path made absolute; each lists
  the replicas whose log lives in it (a log lives in the dir that holds its directory), sorted
  by topic and partition. A dir with no log is listed, empty.
- `topics` filters by topic name; empty means every topic, internal ones included (Kafka's null).
- `size` is the bytes of every segment of the log (Kafka's `log.size`).
- `offset_lag` is Kafka's formula for a replica that is not a future replica:
  `max(0, high watermark - log end offset)` of the local log. A replica's high watermark never
  passes its own log end offset, so this is 0 for leaders and followers alike (as it is in
  Kafka); followers' distance from the leader shows in `log_end_offset` against the leader's.
  replog moves no replica between dirs, so `is_future` is always false.
- `error` is None: a log dir that fails takes the whole node down (the broker stops on a
  storage error), so a broker that answers has every dir online.
- replog adds each replica's `log_start_offset`, `log_end_offset` and `high_watermark`, and a
  compacted log's dirty ratio (`dirty_ratios`, computed by the caller:
  `replog.storage.cleaner.dirty_ratios`); None for the others.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Mapping, Sequence
from typing import Protocol

from replog.replication.messages import DescribeLogDirsResponse, LogDirDescription, ReplicaLogInfo


class LogView(Protocol):
    """What is read of a log (`replog.storage.Log`)."""

    @property
    def directory(self) -> str: ...
    @property
    def size_in_bytes(self) -> int: ...
    @property
    def log_start_offset(self) -> int: ...
    @property
    def log_end_offset(self) -> int: ...
    @property
    def high_watermark(self) -> int: ...


def offset_lag(high_watermark: int, log_end_offset: int) -> int:
    """Kafka's offsetLag of a replica that is not a future replica (module docstring)."""
    return max(0, high_watermark - log_end_offset)


def replica_info(
    topic: str, partition: int, log: LogView, dirty_ratio: float | None = None
) -> ReplicaLogInfo:
    # Read once each: the log may move between reads, and the answer should be one snapshot
    # per field at least.
    end = log.log_end_offset
    high_watermark = log.high_watermark
    return ReplicaLogInfo(
        topic=topic,
        partition=partition,
        size=log.size_in_bytes,
        offset_lag=offset_lag(high_watermark, end),
        is_future=False,
        log_start_offset=log.log_start_offset,
        log_end_offset=end,
        high_watermark=high_watermark,
        dirty_ratio=dirty_ratio,
    )


def describe_log_dirs(
    log_dirs: Sequence[str],
    logs: Mapping[tuple[str, int], LogView],
    topics: Collection[str] = (),
    dirty_ratios: Mapping[tuple[str, int], float] | None = None,
) -> DescribeLogDirsResponse:
    """The log dirs and the replicas in each (module docstring)."""
    wanted = set(topics)
    absolute = [os.path.abspath(d) for d in log_dirs]
    found: dict[str, list[ReplicaLogInfo]] = {d: [] for d in absolute}
    for (topic, partition), log in sorted(logs.items(), key=lambda item: item[0]):
        if wanted and topic not in wanted:
            continue
        parent = os.path.dirname(os.path.abspath(log.directory))
        # A parent not under a configured dir cannot happen with a LogManager; listed anyway.
        ratio = None if dirty_ratios is None else dirty_ratios.get((topic, partition))
        found.setdefault(parent, []).append(replica_info(topic, partition, log, ratio))
    return DescribeLogDirsResponse(
        tuple(LogDirDescription(d, None, tuple(replicas)) for d, replicas in found.items())
    )
