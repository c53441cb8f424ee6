"""The file maker child's protocol (replog/storage/file_maker_process.py): a real child, run as
the broker runs it."""

from __future__ import annotations

import asyncio
import errno
import os
import signal
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from replog.storage.file_maker_process import FileMakerGone, FileMakerProcess, make_logs

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
        # Its first request answered means it lowered its priority already.
        asyncio.run(started.make([], []))
        if hasattr(os, "sched_getscheduler"):
            assert os.sched_getscheduler(started.pid) == os.SCHED_IDLE
        # `replog cluster stop` signals the node's process group: the node ends the child.
        os.kill(started.pid, signal.SIGTERM)
        os.kill(started.pid, signal.SIGINT)
        asyncio.run(started.make([], []))
    finally:
        started.close()
    assert started._process.returncode == 0  # it saw EOF and returned, not killed


def _umask() -> int:
    current = os.umask(0)
    os.umask(current)
    return current
