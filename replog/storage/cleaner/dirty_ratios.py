"""The dirty ratio of each compacted log a broker holds, for DescribeLogDirs and
`replog log-dirs describe`.

Rules:
- Only logs whose cleanup.policy has `compact` have one; the others are left out.
- A log's ratio is the one the cleaner computes when it chooses a log
  (`log_summary.dirty_ratio`): cleanable bytes over clean plus cleanable, from the log's entry
  in its log dir's `cleaner-offset-checkpoint` (the log start offset when it has none), the
  active segment and the high watermark excluded. A log never cleaned has every byte below its
  active segment dirty (1.0 once a segment rolled, 0.0 before).
- Each log dir's checkpoint file is read once per call; a log dir whose file does not read
  (`CorruptCheckpointError`) counts its logs as never cleaned, as the cleaner does.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping

from replog.common import TopicPartitionKey
from replog.errors import CorruptCheckpointError
from replog.storage.cleaner.cleaner_checkpoint import CleanerCheckpoint
from replog.storage.cleaner.log_summary import dirty_ratio
from replog.storage.log import Log


def dirty_ratios(
    log_dirs: Iterable[str], logs: Mapping[TopicPartitionKey, Log], now_ms: int
) -> dict[TopicPartitionKey, float]:
    """(topic, partition) -> dirty ratio of each compacted log of `logs` (module Rules)."""
    checkpoints: dict[str, Mapping[TopicPartitionKey, int]] = {}
    for log_dir in log_dirs:
        try:
            checkpoints[os.path.abspath(log_dir)] = CleanerCheckpoint(log_dir).read()
        except CorruptCheckpointError:
            checkpoints[os.path.abspath(log_dir)] = {}
    found: dict[TopicPartitionKey, float] = {}
    for key, log in logs.items():
        if not log.config.compacts or log.closed:
            continue
        parent = os.path.dirname(os.path.abspath(log.directory))
        offset = checkpoints.get(parent, {}).get(key)
        found[key] = dirty_ratio(log, offset, now_ms)
    return found
