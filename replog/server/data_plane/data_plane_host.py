"""`DataPlaneHost`: what a broker's data plane runs on: its disk, its wall clock, and where its
work off the event loop runs (the bulk threads, the file maker process, the log manager's
background thread and cleaner threads) and how its followers reach leaders.

Rules:
- The defaults are a node process's: the operating system's disk, the system clock, the
  threads and child process of `bulk_threads`, `file_maker` and `LogManager.start`, and one
  ReplicaFetch gRPC stream per leader. `BrokerRuntime` takes every one of these from here and
  from nowhere else.
- Another host (the simulator's, `replog.sim.broker_node`) replaces them all at once: an
  in-memory disk, the virtual clock, the background work run on the event loop.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from replog.clock import Clock, wall_clock_ms
from replog.errors import KafkaStorageError
from replog.server.data_plane.file_maker import start_file_maker
from replog.server.data_plane.replica_fetch_stream import ReplicaFetchStream
from replog.server.data_plane.replica_fetcher import FetchStreams
from replog.server.runtime import collector
from replog.server.runtime.bulk_threads import start_bulk_threads
from replog.storage.file_maker_process import FileMakerProcess
from replog.storage.fs import LOCAL_FS, FileSystem
from replog.storage.log_manager import LogManager

__all__ = ["DataPlaneHost", "RunLogTasks"]

# Runs a log manager's background tasks until it shuts down, handing a storage error to the
# callback (called from whatever runs them).
RunLogTasks = Callable[[LogManager, Callable[[KafkaStorageError], None]], None]


def _log_manager_threads(
    log_manager: LogManager, on_storage_error: Callable[[KafkaStorageError], None]
) -> None:
    log_manager.start(on_storage_error=on_storage_error)


@dataclass(frozen=True, slots=True)
class DataPlaneHost:
    """Where a broker's data plane runs (module docstring); the defaults are a node's."""

    fs: FileSystem = LOCAL_FS
    wall_clock: Clock = wall_clock_ms
    # Readies the bulk threads, on a worker thread (`bulk_threads.start_bulk_threads`).
    prepare_bulk_work: Callable[[], None] = start_bulk_threads
    # The file maker process for a broker's new logs, or None (`file_maker`); blocks.
    start_file_maker: Callable[[LogManager, int], FileMakerProcess | None] = start_file_maker
    run_log_tasks: RunLogTasks = _log_manager_threads
    # Hears how many logs the loading opened (a node freezes the collector's view of them).
    on_logs_loaded: Callable[[int], None] | None = collector.logs_loaded
    fetch_streams: FetchStreams = ReplicaFetchStream
