"""The file maker child's protocol (replog/storage/file_maker_process.py): a real child, run as
the broker runs it."""

from __future__ import annotations

import asyncio
import errno
import os
import signal
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from replog.storage import file_maker_process
from replog.storage.file_maker_process import (
    URGENT_NICE,
    FileMakerGone,
    FileMakerProcess,
    make_logs,
)

SEGMENT = "00000000000000000000.log"


@pytest.fixture
def maker() -> Iterator[FileMakerProcess]:
    started = FileMakerProcess.start()
    try:
        yield started
    finally:
        started.close()


def log_request(directory: Path, metadata: bytes = b"meta") -> tuple[str, list[tuple[str, bytes]]]:
    return (
        str(directory),
        [(str(directory / SEGMENT), b""), (str(directory / "partition.metadata"), metadata)],
    )


@pytest.mark.asyncio
async def test_it_makes_each_logs_directory_and_files_and_syncs(
    maker: FileMakerProcess, tmp_path: Path
) -> None:
    answer = await maker.make(
        [log_request(tmp_path / "t-0", b"zero"), log_request(tmp_path / "t-1", b"one")],
        [str(tmp_path)],
    )
    assert answer.results == [None, None]
    assert answer.sync_error is None
    for name, data in (("t-0", b"zero"), ("t-1", b"one")):
        assert sorted(os.listdir(tmp_path / name)) == [SEGMENT, "partition.metadata"]
        assert (tmp_path / name / SEGMENT).read_bytes() == b""
        assert (tmp_path / name / "partition.metadata").read_bytes() == data
        assert stat.S_IMODE(os.stat(tmp_path / name / SEGMENT).st_mode) == 0o644 & ~_umask()
    # One request after another on the same child.
    again = await maker.make([log_request(tmp_path / "t-2")], [str(tmp_path)])
    assert again.results == [None]


@pytest.mark.asyncio
async def test_an_existing_directory_is_left_to_the_caller_and_the_rest_made(
    maker: FileMakerProcess, tmp_path: Path
) -> None:
    (tmp_path / "t-0").mkdir()
    answer = await maker.make(
        [log_request(tmp_path / "t-0"), log_request(tmp_path / "t-1")], [str(tmp_path)]
    )
    assert answer.results[0] is not None
    assert answer.results[0][0] == errno.EEXIST
    assert answer.results[0][2] == str(tmp_path / "t-0")
    assert answer.results[1] is None
    assert os.listdir(tmp_path / "t-0") == []  # untouched
    assert answer.sync_error is None


@pytest.mark.asyncio
async def test_a_failure_names_the_file_and_stops_the_request_without_a_sync(
    maker: FileMakerProcess, tmp_path: Path
) -> None:
    # A file the disk refuses (here: its parent is missing, ENOENT; a full disk's ENOSPC or a
    # permission's EACCES come back the same way).
    refused = str(tmp_path / "t-1" / "missing" / "partition.metadata")
    request = [
        log_request(tmp_path / "t-0"),
        (str(tmp_path / "t-1"), [(str(tmp_path / "t-1" / SEGMENT), b""), (refused, b"x")]),
        log_request(tmp_path / "t-2"),
    ]
    answer = await maker.make(request, [str(tmp_path / "no such dir")])
    assert answer.results == [None, (errno.ENOENT, os.strerror(errno.ENOENT), refused)]
    assert not (tmp_path / "t-2").exists()  # nothing after the failure
    assert answer.sync_error is None  # not tried: it would have failed (no such dir)


def test_an_existing_file_is_a_failure_naming_it_and_its_namesake_stays_whole(
    tmp_path: Path,
) -> None:
    directory = tmp_path / "t-0"
    segment, _ = log_request(directory)[1]
    twice = str(directory / "partition.metadata")
    results = make_logs([(str(directory), [segment, (twice, b"x"), (twice, b"y")])])
    assert results == [(errno.EEXIST, os.strerror(errno.EEXIST), twice)]
    assert (directory / "partition.metadata").read_bytes() == b"x"


@pytest.mark.asyncio
async def test_a_sync_of_a_missing_directory_is_answered_as_the_sync_error(
    maker: FileMakerProcess, tmp_path: Path
) -> None:
    answer = await maker.make([log_request(tmp_path / "t-0")], [str(tmp_path / "gone")])
    assert answer.results == [None]
    assert answer.sync_error is not None
    assert answer.sync_error[0] == errno.ENOENT
    assert answer.sync_error[2] == str(tmp_path / "gone")


@pytest.mark.asyncio
async def test_a_child_gone_is_a_typed_error_naming_its_exit_status(
    maker: FileMakerProcess, tmp_path: Path
) -> None:
    os.kill(maker.pid, signal.SIGKILL)
    with pytest.raises(FileMakerGone, match="killed by signal 9") as gone:
        await maker.make([log_request(tmp_path / "t-0")], [str(tmp_path)])
    assert gone.value.exit_status == -signal.SIGKILL
    with pytest.raises(FileMakerGone):  # and every later call
        await maker.make([log_request(tmp_path / "t-1")], [str(tmp_path)])


def test_the_child_runs_at_idle_priority_and_exits_when_its_stdin_closes() -> None:
    started = FileMakerProcess.start()
    try:
        if hasattr(os, "sched_getscheduler"):
            assert os.sched_getscheduler(started.pid) == os.SCHED_IDLE  # set as it starts
        asyncio.run(started.make([], []))
        # `replog cluster stop` signals the node's process group: the node ends the child.
        os.kill(started.pid, signal.SIGTERM)
        os.kill(started.pid, signal.SIGINT)
        asyncio.run(started.make([], []))
        # It saw EOF and returned, not killed: waited for here as long as an idle child on a
        # busy machine may need (`close` would kill it after a short wait).
        started._stdin.close()
        assert started._process.wait(timeout=120) == 0
    finally:
        started.close()


@pytest.fixture
def hog_on_core_0() -> Iterator[None]:
    """A process that keeps core 0 busy at the default priority."""
    hog = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        os.sched_setaffinity(hog.pid, {0})
        yield
    finally:
        hog.kill()
        hog.wait()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="SCHED_IDLE and schedstat")
@pytest.mark.asyncio
async def test_a_child_starved_at_idle_priority_is_raised_and_answers(
    maker: FileMakerProcess, tmp_path: Path, hog_on_core_0: None
) -> None:
    # The child shares its one core with a busy process: at SCHED_IDLE it gets almost none.
    os.sched_setaffinity(maker.pid, {0})
    answer = await asyncio.wait_for(
        maker.make([log_request(tmp_path / "t-0")], [str(tmp_path)]), 120
    )
    assert answer.results == [None]
    assert maker.promoted
    assert os.sched_getscheduler(maker.pid) == os.SCHED_OTHER
    assert os.getpriority(os.PRIO_PROCESS, maker.pid) == URGENT_NICE


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="SCHED_IDLE and schedstat")
@pytest.mark.asyncio
async def test_a_starved_child_that_may_not_be_raised_is_killed_as_gone(
    maker: FileMakerProcess,
    tmp_path: Path,
    hog_on_core_0: None,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def refused(*_: object) -> None:
        raise PermissionError(errno.EPERM, "Operation not permitted")

    monkeypatch.setattr(os, "setpriority", refused)  # as without CAP_SYS_NICE
    os.sched_setaffinity(maker.pid, {0})
    with pytest.raises(FileMakerGone, match=r"waited \d+\.\d s for a core at idle priority"):
        await asyncio.wait_for(maker.make([log_request(tmp_path / "t-0")], [str(tmp_path)]), 120)
    assert maker._process.wait(timeout=60) == -signal.SIGKILL
    with pytest.raises(FileMakerGone):  # and every later call
        await maker.make([log_request(tmp_path / "t-1")], [str(tmp_path)])


def _umask() -> int:
    current = os.umask(0)
    os.umask(current)
    return current


@pytest.mark.asyncio
async def test_without_schedstat_a_request_unanswered_for_long_is_starved(
    maker: FileMakerProcess, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(file_maker_process._Starvation, "_runqueue_ns", lambda _: None)
    monkeypatch.setattr(file_maker_process, "STARVED_WALL_S", 0.5)
    os.kill(maker.pid, signal.SIGSTOP)  # no answer until it goes on
    asyncio.get_running_loop().call_later(1.5, os.kill, maker.pid, signal.SIGCONT)
    answer = await asyncio.wait_for(
        maker.make([log_request(tmp_path / "t-0")], [str(tmp_path)]), 60
    )
    assert answer.results == [None]
    assert maker.promoted
