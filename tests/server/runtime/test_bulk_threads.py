"""Bulk file work (log loading and creation, deferred syncs) runs in threads below the event
loop's CPU priority, so that on a machine short of cores the loop gets them first."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from replog.server.broker import broker_runtime
from replog.server.data_plane.data_plane_host import DataPlaneHost
from replog.server.data_plane.deferred_syncs import DeferredSyncs
from replog.server.runtime import bulk_threads
from replog.server.runtime.bulk_threads import BULK_NICE_STEP, MAX_NICE, run_bulk
from replog.storage.fs import Unsynced
from replog.storage.log_manager import LogManager, LogManagerConfig
from replog.testing import LoopTasks, ManualClock
from tests.metadata.metadata_helpers import create_topic, topic_id
from tests.server.broker.test_broker_lifecycle_driver import dead_address, runtime_of, until
from tests.server.data_plane.test_replica_manager import Node, cluster_image

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="a thread's own priority is Linux's"
)


def this_threads_nice() -> int:
    return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())


def lowered(nice: int) -> int:
    return min(MAX_NICE, nice + BULK_NICE_STEP)


@pytest.mark.asyncio
async def test_bulk_work_runs_below_the_loop_and_leaves_the_loop_threads_priority() -> None:
    loop_nice = this_threads_nice()
    assert await run_bulk(this_threads_nice) == lowered(loop_nice)
    assert await run_bulk(lambda a, *, b: a + b, 1, b=2) == 3
    assert this_threads_nice() == loop_nice  # only the worker threads are lowered


def test_a_thread_that_cannot_be_lowered_runs_as_it_did(monkeypatch: pytest.MonkeyPatch) -> None:
    def refused(*_: object) -> None:
        raise PermissionError("not allowed")

    monkeypatch.setattr(os, "setpriority", refused)
    assert bulk_threads.lower_this_threads_priority() is None


@pytest.mark.asyncio
async def test_deferred_syncs_sync_in_a_bulk_thread() -> None:
    seen: list[int] = []
    syncs = DeferredSyncs(lambda _: seen.append(this_threads_nice()), tasks=LoopTasks())
    found = Unsynced()
    found.paths.add("a")
    syncs.add(found)
    await syncs.drain()
    assert seen == [lowered(this_threads_nice())]


@pytest.mark.asyncio
async def test_a_started_replica_manager_opens_new_logs_in_a_bulk_thread(tmp_path: Path) -> None:
    node = Node(tmp_path, 1, ManualClock())
    seen: list[int] = []
    open_logs = node.rm._open_logs

    def watched(creations: list) -> list:  # type: ignore[type-arg]
        seen.append(this_threads_nice())
        return open_logs(creations)

    node.rm._open_logs = watched  # type: ignore[method-assign]
    await node.rm.start()
    try:
        node.rm.apply_image(cluster_image(*create_topic("t", topic_id(1), *[(1, 2)] * 12)))
        await asyncio.wait_for(node.rm.wait_applied(), 10)
        assert node.rm.partition("t", 11) is not None
        assert seen and set(seen) == {lowered(this_threads_nice())}
    finally:
        await node.rm.stop()


@pytest.mark.asyncio
async def test_a_starting_broker_loads_its_logs_in_a_bulk_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log_dir = tmp_path / "logs"
    made = LogManager([str(log_dir)], LogManagerConfig())
    made.get_or_create_log("orders", 0)
    made.shutdown(broker_epoch=7)
    seen: list[int] = []

    class Watched(LogManager):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            seen.append(this_threads_nice())
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(broker_runtime, "LogManager", Watched)
    runtime = runtime_of(
        {1: dead_address(), 2: dead_address(), 3: dead_address()}, lambda: None, log_dir
    )
    await runtime.start()
    try:
        await until(lambda: "logs_loaded" in runtime.start_phases, "the logs are open")
        assert seen == [lowered(this_threads_nice())]
    finally:
        await runtime.stop(graceful=False)


@pytest.mark.asyncio
async def test_work_held_in_all_but_one_thread_does_not_hold_back_the_next_call() -> None:
    """Several brokers of one process each sync or create logs at once: as many threads as
    the default executor gives `asyncio.to_thread` (`ThreadPoolExecutor`'s default, CPUs + 4),
    so that slow syncs in all but one of them leave a broker's new logs a thread."""
    default_threads = min(32, (os.cpu_count() or 1) + 4)
    held = threading.Event()
    slow = [asyncio.ensure_future(run_bulk(held.wait, 10)) for _ in range(default_threads - 1)]
    try:
        assert await asyncio.wait_for(run_bulk(lambda: "done"), 5) == "done"
    finally:
        held.set()
        await asyncio.gather(*slow)


def bulk_threads_running() -> int:
    return sum(1 for t in threading.enumerate() if t.name.startswith("replog-bulk"))


@pytest.mark.asyncio
async def test_bulk_calls_start_no_thread_once_the_threads_are_started(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`Thread.start` waits for the new thread to run: the loop calling `run_bulk` must not be
    the one starting bulk threads, even with every thread busy at once."""
    monkeypatch.setattr(bulk_threads, "_executor", None)
    monkeypatch.setattr(bulk_threads, "_started", False)
    await asyncio.to_thread(bulk_threads.start_bulk_threads)
    started_on_the_loop: list[str] = []
    start = threading.Thread.start

    def watched_start(thread: threading.Thread) -> None:
        if threading.current_thread() is threading.main_thread():
            started_on_the_loop.append(thread.name)
        start(thread)

    monkeypatch.setattr(threading.Thread, "start", watched_start)
    all_at_once = threading.Barrier(bulk_threads.BULK_THREADS)
    calls = [run_bulk(all_at_once.wait, 10) for _ in range(bulk_threads.BULK_THREADS)]
    await asyncio.wait_for(asyncio.gather(*calls), 20)
    assert started_on_the_loop == []
    bulk_threads.start_bulk_threads()  # once per process: a second call starts nothing
    assert started_on_the_loop == []


@pytest.mark.asyncio
async def test_a_starting_broker_starts_the_bulk_threads_off_its_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    started_in: list[threading.Thread] = []
    host = DataPlaneHost(prepare_bulk_work=lambda: started_in.append(threading.current_thread()))
    runtime = runtime_of(
        {1: dead_address(), 2: dead_address(), 3: dead_address()},
        lambda: None,
        tmp_path / "l",
        host,
    )
    await runtime.start()
    try:
        await until(lambda: "logs_loaded" in runtime.start_phases, "the logs are open")
        assert len(started_in) == 1 and started_in[0] is not threading.current_thread()
    finally:
        await runtime.stop(graceful=False)


def test_a_node_process_takes_the_gil_back_within_half_a_millisecond() -> None:
    """`replog node` sets the switch interval (process-wide, so in a process of its own here):
    the loop waits that long, not 5 ms, each time it takes the GIL back from a bulk thread."""
    code = (
        "import sys\n"
        "from replog.server.runtime.bulk_threads import GIL_SWITCH_INTERVAL_S\n"
        "from replog.server.runtime.bulk_threads import share_the_gil_promptly\n"
        "before = sys.getswitchinterval()\n"
        "share_the_gil_promptly()\n"
        "print(before, sys.getswitchinterval(), GIL_SWITCH_INTERVAL_S)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    before, after, wanted = (float(x) for x in done.stdout.split())
    assert before == 0.005 and after == wanted <= 0.001
