"""Worker threads for a node's bulk file work, at a lower CPU priority than its event loop.

Why: opening or creating thousands of logs (a restart's log loading and producer tables, the
replica manager's batches of new logs) and syncing their files run in worker threads so that
the event loop goes on serving; but on a machine with fewer cores than busy threads they took
the cores from the loop instead. Three nodes on this 2-core machine each run their loop and a
worker thread through a restart: the loops' stalls of 100-320 ms (wall) had 0-80 ms of CPU in
them, the rest spent waiting for a core (the stall monitor's "waiting for one",
docs/benchmarks.md, "The stalls: waits for a core"). Work that takes seconds gains nothing
from a core it gets a few ms sooner; a Raft fetch, heartbeat or request waiting on the loop
does.

Rules:
- `run_bulk` runs a call in one of this module's threads, each of which lowers its own
  scheduling priority once (`BULK_NICE_STEP` above the process's nice, at most 19) before its
  first call: Linux schedules threads one by one, so the loop thread and every other thread
  of the process keep theirs. Where threads cannot be given their own priority (not Linux, no
  permission) the work runs as it did, at the process's priority.
- Only work whose latency nobody waits on per request goes here: loading and creating logs,
  their producer tables, deferred syncs. Raft's log writes and flushes, which every commit
  waits for, stay on the default executor.
- The GIL: a thread that wants it waits the interpreter's switch interval (5 ms by default)
  before it asks the holder to let go, and the loop gives it up at each blocking system call
  and each wait for I/O. While a bulk thread runs Python (a log's objects being made), each
  time the loop took it back cost the loop up to 5 ms, on no CPU and in no run queue (the
  stall monitor's wall time less its CPU and run-queue times). A node process sets
  `GIL_SWITCH_INTERVAL_S` (`share_the_gil_promptly`, from `replog node` only: the interval is
  process-wide, never set on an embedding application's behalf), so the loop waits about that
  long instead; the bulk thread gives the GIL up more often, at a switch's microseconds each.
  A lower priority is not a lock either: a bulk thread that holds the GIL while it waits for a
  core keeps the loop waiting too (priority inversion), until it runs again and lets go. More
  often the loop lets go for a bulk thread that waited the switch interval for the GIL (back
  from a system call), and CPython 3.11 keeps the loop waiting until that thread has taken
  it: at nice +10 on a loaded machine, until it gets a core. That is most of the stall
  monitor's wait off the CPUs; threads at the process's priority took most of it away in
  creations of 10,000 partitions, and took the cores from the loop again (Why, above). So
  what these threads run is system calls with as little Python between them as can be: a
  new replica's log is made as files here and built as objects on the loop
  (`ReplicaManager._log_of_topic`, `_install`; docs/benchmarks.md, "Where a creation's CPU goes").
- The threads are started before the work, off the event loop (`start_bulk_threads`: a node
  process before its loop runs, a starting broker from a thread of the default executor): a
  `ThreadPoolExecutor` otherwise starts a thread inside `submit` whenever none is idle, and
  `Thread.start` waits until the new thread runs, which needs the GIL and a core, so the loop
  calling `run_bulk` was held for as long as another thread kept either (227 ms once, with
  6 ms of CPU: docs/benchmarks.md, "The stalls: waits for a core").
"""

from __future__ import annotations

import asyncio
import functools
import os
import sys
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

T = TypeVar("T")

BULK_NICE_STEP = 10
GIL_SWITCH_INTERVAL_S = 0.0005
MAX_NICE = 19
# As many as the default executor had (`ThreadPoolExecutor`'s own default): several brokers
# of one process (tests, embedding) each load or create logs and sync at once, and a slow sync
# must not queue the others' work behind it.
BULK_THREADS = min(32, (os.cpu_count() or 1) + 4)

# How long `start_bulk_threads` waits for every thread to take its first call; past it, the
# threads not started yet start as `submit` needs them (the behaviour without a pre-start).
START_TIMEOUT_S = 30.0

_executor: ThreadPoolExecutor | None = None
_started = False
_lock = threading.Lock()


def lower_this_threads_priority(step: int = BULK_NICE_STEP) -> int | None:
    """Lower the calling thread's CPU priority by `step` nice levels (at most to 19); its
    nice value after, or None where a thread's own priority cannot be set."""
    if not hasattr(threading, "get_native_id") or not hasattr(os, "setpriority"):
        return None
    tid = threading.get_native_id()
    try:
        nice = min(MAX_NICE, os.getpriority(os.PRIO_PROCESS, tid) + step)
        os.setpriority(os.PRIO_PROCESS, tid, nice)
    except OSError:
        return None
    return nice


def share_the_gil_promptly() -> None:
    """Make a thread that waits for the GIL ask for it after `GIL_SWITCH_INTERVAL_S` (module
    Rules); process-wide, so for process entry points only."""
    sys.setswitchinterval(GIL_SWITCH_INTERVAL_S)


def _executor_for_bulk_work() -> ThreadPoolExecutor:
    global _executor
    with _lock:
        if _executor is None:
            _executor = ThreadPoolExecutor(
                max_workers=BULK_THREADS,
                thread_name_prefix="replog-bulk",
                initializer=lower_this_threads_priority,
            )
        return _executor


def start_bulk_threads() -> None:
    """Start all `BULK_THREADS` threads now, in the calling thread, which waits for them
    (module Rules: never on an event loop); once per process, later calls return at once.

    `BULK_THREADS` calls held at a barrier until all of them run: a `ThreadPoolExecutor`
    reuses a thread only when one is idle, so each of these calls gets a thread of its own,
    and they all stay in the pool, idle, for the work that follows."""
    global _started
    executor = _executor_for_bulk_work()
    with _lock:
        if _started:
            return
        barrier = threading.Barrier(BULK_THREADS)
        calls = [executor.submit(barrier.wait, START_TIMEOUT_S) for _ in range(BULK_THREADS)]
        for call in calls:
            try:
                call.result()
            except threading.BrokenBarrierError:
                return  # busy threads held it past the timeout: they start on demand
        _started = True


async def run_bulk(func: Callable[..., T], /, *args: object, **kwargs: object) -> T:
    """`func(*args, **kwargs)` in a bulk-work thread (module Rules), awaited like
    `asyncio.to_thread`."""
    loop = asyncio.get_running_loop()
    call = functools.partial(func, *args, **kwargs)
    return await loop.run_in_executor(_executor_for_bulk_work(), call)
