"""replog's storage engine: Kafka-format segmented logs, recovery, retention and checkpoints.

from replog.storage import Log, LogConfig, LogManager
log = Log.open(path, LogConfig(...))        # recovers if needed
info = log.append_as_leader(batch_bytes, leader_epoch)
data = log.read(start_offset, max_bytes, upper_bound_offset=None)
"""

from replog.storage.leader_epoch_cache import LeaderEpochCache
from replog.storage.log import Log
from replog.storage.log_append_info import LogAppendInfo
from replog.storage.log_config import LogConfig
from replog.storage.log_manager import LogManager, LogManagerConfig

__all__ = [
    "LeaderEpochCache",
    "Log",
    "LogAppendInfo",
    "LogConfig",
    "LogManager",
    "LogManagerConfig",
]
