"""A child process that makes new logs' files for the event loop: the client and the child.

Why a process: a broker's worker threads made a round's new logs (a directory and three small
files each, then one `syncfs`), and every system call a worker thread returns from asks for
the GIL. CPython 3.11 keeps the event loop waiting until that thread, at a lower priority, gets
a core and takes it (priority inversion), and the threads' CPU competes with the loop's. A
child process shares no GIL and no lock with the loop, so it can run at `SCHED_IDLE` (only
when a core is otherwise idle): nothing the loop needs can wait for it, only the round's
answer, which the loop awaits without blocking (docs/storage.md, "Creating many replicas").
On a host whose cores are never idle that answer could wait for minutes, so a round whose
child waits for a core too long is raised to the bulk threads' priority, or handed to them
(aging, as the cleaner's children: `pass_priority`).

Rules:
- This file imports only the standard library: the child runs it as a script
  (`python -I -S <this file>`), without site packages or replog on its path, so it starts fast
  and whatever the parent's environment.
- The child ignores SIGINT and SIGTERM (a node's process group gets them: the node ends it)
  and answers requests one at a time: a length-prefixed pickle on stdin, its answer likewise
  on stdout; it exits at EOF, so a node killed with SIGKILL leaves it only the request in
  hand.
- A request is a round's new logs, each its directory and its files with their bytes, plus the
  directories whose file systems to sync once at the end. Each directory is made, then each
  file created (O_EXCL, 0o644: an empty one O_RDWR, as `FileSystem.create_empty_file`; the
  others written in one write, and removed again if that fails, as `write_new_file`), nothing
  synced until the one `syncfs` per file system at the end.
- The answer gives per log None (made) or the OSError (errno, strerror, path). The child stops
  at the first error other than EEXIST on a log's own directory (a directory no log took: the
  caller opens it the old way): the later logs are not answered, and nothing is synced, as an
  exception in a `deferred_sync` block skips its sync. A failed sync is the answer's second
  part.
- Only the parent sets the child's priority, so a promotion never races the child's own
  setting: `SCHED_IDLE` (else nice 19) as it starts it. A request whose child has waited
  `STARVED_S` for a core (`/proc/<pid>/schedstat`; without it, one whose answer has not
  come in `STARVED_WALL_S`) is starved: the parent raises the child to `URGENT_NICE` (the
  bulk threads' priority) for good, or, where the kernel refuses (raising needs
  `CAP_SYS_NICE` or an `RLIMIT_NICE` reaching it), kills it: `FileMakerGone`, and its
  caller's bulk threads make the round's logs, as after any other loss of the child.
- `FileMakerProcess.start` blocks (`Popen`): call it off the event loop. `make` runs on the
  loop, one request at a time; `FileMakerGone` (with the exit status) once the child is gone,
  after which every call raises it. `close` closes stdin, waits briefly and kills if need be.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import ctypes.util
import errno
import logging
import os
import pickle
import signal
import struct
import subprocess
import sys
from collections.abc import Callable, Sequence
from typing import BinaryIO

log = logging.getLogger(__name__)

# Each message: its length (4 bytes, big-endian), then a pickle.
_HEADER = struct.Struct(">I")
_READ_BYTES = 1 << 20
# How long `close` waits for the child to see EOF and exit before it kills it, and how long a
# caller that read EOF waits for its exit status.
CLOSE_WAIT_S = 2.0
EXIT_STATUS_WAIT_S = 1.0
# A request is starved once its child has waited this long for a core (module Rules), looked
# at every `STARVED_CHECK_S` while the answer is awaited; on an idle core it waits not at all.
STARVED_S = 1.0
STARVED_WALL_S = 10.0
STARVED_CHECK_S = 0.25
# A starved child's nice value from then on: the bulk threads' (`bulk_threads`), which would
# make the round's files without it.
URGENT_NICE = 10

# One log of a request: its directory, then its files (path, bytes) in the order they are
# made; an empty file is created empty.
NewLogRequest = tuple[str, Sequence[tuple[str, bytes]]]
# Why a log (or the sync) failed: errno, strerror, the path it failed on.
FileError = tuple[int, str, str]


class FileMakerGone(Exception):
    """The file maker process is gone (exited, killed, or never answered)."""

    def __init__(self, message: str, exit_status: int | None) -> None:
        super().__init__(message)
        self.exit_status = exit_status


class FileMakerAnswer:
    """The child's answer to `make`: per log answered, None (made) or its error; logs past
    the first failure are not answered. `sync_error`: the sync's error, if any."""

    __slots__ = ("results", "sync_error")

    def __init__(self, results: list[FileError | None], sync_error: FileError | None) -> None:
        self.results = results
        self.sync_error = sync_error


class FileMakerProcess:
    """The parent's end of one file maker child (module Rules)."""

    def __init__(self, process: subprocess.Popen[bytes]) -> None:
        assert process.stdin is not None and process.stdout is not None
        self._process = process
        self._stdin = process.stdin
        self._stdout = process.stdout
        os.set_blocking(self._stdin.fileno(), False)
        os.set_blocking(self._stdout.fileno(), False)
        self._busy = False
        self._gone: FileMakerGone | None = None
        self.promoted = False  # raised to `URGENT_NICE` (module Rules)

    @classmethod
    def start(cls) -> FileMakerProcess:
        """Start a child at idle priority (blocks: not on an event loop); OSError if it cannot
        start."""
        process = subprocess.Popen(
            [sys.executable, "-I", "-S", os.path.abspath(__file__)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            close_fds=True,
        )
        run_at_idle_priority(process.pid)
        return cls(process)

    @property
    def pid(self) -> int:
        return self._process.pid

    async def make(
        self, logs: Sequence[NewLogRequest], sync_dirs: Sequence[str]
    ) -> FileMakerAnswer:
        """Have the child make `logs` and sync `sync_dirs`' file systems; its answer.
        FileMakerGone if it is gone; a call cancelled midway ends the child (an answer left
        in the pipe would be read as the next one's)."""
        if self._gone is not None:
            raise self._gone
        if self._busy:
            raise RuntimeError("a file maker takes one request at a time")
        self._busy = True
        try:
            starved = _Starvation(self.pid)
            payload = pickle.dumps((list(logs), list(sync_dirs)), pickle.HIGHEST_PROTOCOL)
            await self._send(_HEADER.pack(len(payload)) + payload, starved)
            header = await self._receive(_HEADER.size, starved)
            (size,) = _HEADER.unpack(header)
            results, sync_error = pickle.loads(await self._receive(size, starved))
            return FileMakerAnswer(results, sync_error)
        except FileMakerGone as gone:
            self._gone = gone
            raise
        except BaseException:
            self._gone = FileMakerGone("file maker abandoned mid-request", None)
            with contextlib.suppress(OSError):
                self._process.kill()
            raise
        finally:
            self._busy = False

    async def _send(self, data: bytes, starved: _Starvation) -> None:
        view = memoryview(data)
        fd = self._stdin.fileno()
        while view:
            try:
                view = view[os.write(fd, view) :]
            except BlockingIOError:
                await self._wait(fd, starved, writing=True)
            except (BrokenPipeError, ConnectionResetError):
                raise await self._gone_error() from None

    async def _receive(self, size: int, starved: _Starvation) -> bytes:
        chunks = bytearray()
        fd = self._stdout.fileno()
        while len(chunks) < size:
            try:
                chunk = os.read(fd, min(_READ_BYTES, size - len(chunks)))
            except BlockingIOError:
                await self._wait(fd, starved, writing=False)
                continue
            if not chunk:
                raise await self._gone_error()
            chunks += chunk
        return bytes(chunks)

    async def _wait(self, fd: int, starved: _Starvation, *, writing: bool) -> None:
        """Until the child's end of `fd` is ready, raising a starved child on the way
        (module Rules)."""
        if self.promoted:
            await _ready(fd, writing=writing)
            return
        while not await _ready(fd, writing=writing, timeout_s=STARVED_CHECK_S):
            waited = starved.after_quiet_check()
            if waited is not None:
                self._promote_or_kill(waited)
                await _ready(fd, writing=writing)
                return

    def _promote_or_kill(self, waited: str) -> None:
        """The request is starved (module Rules): raise the child to `URGENT_NICE`, or kill it
        where the kernel refuses (FileMakerGone)."""
        refused = leave_idle_priority(self.pid, URGENT_NICE)
        if refused is not None:
            with contextlib.suppress(OSError):
                self._process.kill()
            raise FileMakerGone(
                f"file maker process {self.pid} {waited} at idle priority, and may not be "
                f"raised to nice {URGENT_NICE} ({refused}): it was killed",
                None,
            )
        self.promoted = True
        log.warning(
            "file maker process %d %s at idle priority: raised to nice %d from now on",
            self.pid,
            waited,
            URGENT_NICE,
        )

    async def _gone_error(self) -> FileMakerGone:
        """The child closed its pipes: its exit status, once it has one (waited for on the
        loop's timers, not blocking it)."""
        waited = 0.0
        while (status := self._process.poll()) is None and waited < EXIT_STATUS_WAIT_S:
            await asyncio.sleep(0.01)
            waited += 0.01
        gone = f"file maker process {self.pid} is gone ({exit_status_text(status)})"
        return FileMakerGone(gone, status)

    def close(self) -> None:
        """Close its stdin, wait up to `CLOSE_WAIT_S` for it to exit, then kill it (blocks:
        not on an event loop)."""
        with contextlib.suppress(OSError):
            self._stdin.close()
        try:
            self._process.wait(CLOSE_WAIT_S)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        with contextlib.suppress(OSError):
            self._stdout.close()


class _Starvation:
    """How long one request's child has waited for a core (module Rules)."""

    def __init__(self, pid: int) -> None:
        self._path = f"/proc/{pid}/schedstat"
        self._quiet_checks = 0  # the answer's waits that timed out, `STARVED_CHECK_S` each
        self._waited_ns = self._runqueue_ns()

    def _runqueue_ns(self) -> int | None:
        """The child's time runnable but not running, in all (ns); None where unknown."""
        try:
            with open(self._path, "rb") as stats:
                return int(stats.read().split()[1])
        except (OSError, IndexError, ValueError):
            return None

    def after_quiet_check(self) -> str | None:
        """After a wait of `STARVED_CHECK_S` without an answer: what the request waited, if
        it is starved; None while it is not."""
        self._quiet_checks += 1
        now = self._runqueue_ns()
        if now is not None and self._waited_ns is not None:
            waited = (now - self._waited_ns) / 1e9
            return f"waited {waited:.1f} s for a core" if waited >= STARVED_S else None
        took = self._quiet_checks * STARVED_CHECK_S
        return f"took over {took:.1f} s" if took >= STARVED_WALL_S else None


async def _ready(fd: int, *, writing: bool, timeout_s: float | None = None) -> bool:
    """Until `fd` can be written (`writing`) or read, without blocking the loop, or until
    `timeout_s` has passed: whether it can."""
    loop = asyncio.get_running_loop()
    ready: asyncio.Future[bool] = loop.create_future()
    if writing:
        loop.add_writer(fd, _settle, ready, True)
    else:
        loop.add_reader(fd, _settle, ready, True)
    timer = None if timeout_s is None else loop.call_later(timeout_s, _settle, ready, False)
    try:
        return await ready
    finally:
        if timer is not None:
            timer.cancel()
        if writing:
            loop.remove_writer(fd)
        else:
            loop.remove_reader(fd)


def _settle(future: asyncio.Future[bool], ready: bool) -> None:
    # The timer and the reader may both run in one iteration: the first one decides.
    if not future.done():
        future.set_result(ready)


def exit_status_text(status: int | None) -> str:
    """How a child process ended, for a message."""
    if status is None:
        return "no exit status yet"
    if status < 0:
        return f"killed by signal {-status}"
    return f"exit status {status}"


# --- the child --------------------------------------------------------------------------------


def run_at_idle_priority(pid: int) -> None:
    """Run process `pid` at `SCHED_IDLE` (only when a core is otherwise idle); where that is
    refused or missing, at nice 19."""
    try:
        os.sched_setscheduler(pid, os.SCHED_IDLE, os.sched_param(0))
    except (AttributeError, OSError):  # not Linux, or not allowed
        with contextlib.suppress(OSError):
            os.setpriority(os.PRIO_PROCESS, pid, 19)


def leave_idle_priority(pid: int, nice: int) -> Exception | None:
    """Run process `pid` at the default policy and nice value `nice` (a promotion from
    `run_at_idle_priority`); None, or why the kernel refused (raising a priority needs
    `CAP_SYS_NICE` or an `RLIMIT_NICE` reaching it) or the platform cannot."""
    try:
        os.setpriority(os.PRIO_PROCESS, pid, nice)
        os.sched_setscheduler(pid, os.SCHED_OTHER, os.sched_param(0))
    except (AttributeError, OSError) as exc:  # not Linux, or not allowed
        return exc
    return None


def _load_syncfs() -> Callable[[int], int] | None:
    """libc's `syncfs(fd)` where the platform has it (Linux), else None."""
    try:
        function = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True).syncfs
    except (OSError, AttributeError):
        return None
    function.argtypes = [ctypes.c_int]
    function.restype = ctypes.c_int
    return function


def make_logs(logs: Sequence[NewLogRequest]) -> list[FileError | None]:
    """Make each log's directory and files (module Rules); stop at the first failure that is
    not EEXIST on a log's own directory."""
    results: list[FileError | None] = []
    for directory, files in logs:
        path = directory
        try:
            os.mkdir(directory)
            for path, data in files:
                _create(path, data)
        except OSError as exc:
            error = (exc.errno or 0, exc.strerror or str(exc), path)
            results.append(error)
            if not left_to_the_caller(error, directory):
                break
        else:
            results.append(None)
    return results


def left_to_the_caller(error: FileError, directory: str) -> bool:
    """Whether `error` is EEXIST on the log's own directory: not a failure, a directory no log
    took, which the caller opens the old way."""
    return error[0] == errno.EEXIST and error[2] == directory


def _create(path: str, data: bytes) -> None:
    if not data:
        os.close(os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644))
        return
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(path)
        raise
    finally:
        os.close(fd)


def sync_file_systems(directories: Sequence[str], syncfs: Callable[[int], int] | None) -> None:
    """One `syncfs` per file system of `directories` (without it, one `sync`); OSError naming
    the directory."""
    if syncfs is None:
        os.sync()
        return
    seen: set[int] = set()
    for directory in sorted(directories):
        fd = os.open(directory, os.O_RDONLY)
        try:
            device = os.fstat(fd).st_dev
            if device not in seen:
                seen.add(device)
                if syncfs(fd) != 0:
                    error = ctypes.get_errno()
                    raise OSError(error, os.strerror(error), directory)
        finally:
            os.close(fd)


def _answer(request: bytes, syncfs: Callable[[int], int] | None) -> bytes:
    logs, sync_dirs = pickle.loads(request)
    results = make_logs(logs)
    sync_error: FileError | None = None
    # `make_logs` stopped early only at a failure, which is then the last result.
    if all(r is None or left_to_the_caller(r, d) for r, (d, _) in zip(results, logs, strict=False)):
        try:
            sync_file_systems(sync_dirs, syncfs)
        except OSError as exc:
            sync_error = (exc.errno or 0, exc.strerror or str(exc), exc.filename or "")
    return pickle.dumps((results, sync_error), pickle.HIGHEST_PROTOCOL)


def _read_exactly(stream: BinaryIO, size: int) -> bytes | None:
    data = b""
    while len(data) < size:
        chunk = stream.read(size - len(data))
        if not chunk:
            return None
        data += chunk
    return data


def main() -> None:
    """The child: answer requests until EOF on stdin (module Rules)."""
    # A terminal's Ctrl-C, and `replog cluster stop`'s SIGTERM, reach the node's whole process
    # group: the node decides when this ends (EOF), and a round under way is answered.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    syncfs = _load_syncfs()
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    while (header := _read_exactly(stdin, _HEADER.size)) is not None:
        request = _read_exactly(stdin, _HEADER.unpack(header)[0])
        if request is None:
            return
        answer = _answer(request, syncfs)
        stdout.write(_HEADER.pack(len(answer)) + answer)
        stdout.flush()


if __name__ == "__main__":
    main()
