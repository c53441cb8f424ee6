"""A child process that runs the log cleaner's passes (`log_cleaning.run_pass`): the parent's
end and the child.

Why a process: a pass is Python (2.2-3.9 us of CPU a record, its files and swap included, in
bench/cleaner_pass.py). On a thread of the broker's process it holds the interpreter's lock
while it runs, and the event loop waits for the lock each time it wants it back: a thread's
nice value lowers its share of the cores, not of the lock. A child shares no lock with the
loop, so it can run at `SCHED_IDLE`: the kernel gives it only the CPU no one else wants.
The broker keeps the decisions and the log: the choice, the states, the checkpoint, the abort,
and the swaps under the log's lock (`LogPass.swap`), which are renames: the child writes and
syncs each cleaned segment's indexes with it. Measured (docs/benchmarks-history.md, "Log
cleaner and produce latency"): a busy cleaner's cost to the median produce latency fell from
1.8x to 1.4x with the child; its p99 fell from 4-11x to about 2x (under load) once the swap
under the lock was renames only; idle passes took the median to 1.03-1.44x (1.33-1.69x at
nice 10, same runs).

Rules:
- One child per cleaner thread, started by that thread (`CleaningProcess.start` blocks) for
  its first pass: it imports replog from the parent's source tree, ignores SIGINT and SIGTERM
  (a node's process group gets them: the node ends it) and exits at EOF on stdin, so a node
  killed with SIGKILL leaves it at most the pass in hand, which ends at the child's next look
  at its stdin (below). The parent sets its priority as it starts it, and only the parent
  changes it (`pass_priority`'s rule: `IDLE` is `SCHED_IDLE`, else nice 19; `URGENT` is
  `CLEANER_NICE`), so a promotion never races the child's own setting.
- Promotion: while an `IDLE` child's pass runs, the caller's `should_promote` is asked as
  `should_stop` is; once it answers True the parent raises the child to `URGENT` in place
  (`promote`: the child keeps its pass and becomes an urgent child). The kernel allows that
  only with `CAP_SYS_NICE` or an `RLIMIT_NICE` reaching `CLEANER_NICE`; where it refuses, the
  child is killed and its pass abandoned as on a stop (below), so its owner's next pass runs
  in an urgent child. Between two passes the owner sets the next one's priority
  (`set_priority`): lowering is always allowed, raising as a promotion; where that is refused,
  the owner `discard`s the child (killed, not waited for: an idle child may wait seconds for
  a core even to exit) and starts another.
- Messages: a 4-byte length, then a pickle. The parent sends `pass` (a `PassPlan`, the key map's
  size, the read report's size), `report` and `stop`. The child keeps its key map between
  passes, runs the pass over the plan's segment files through `LOCAL_FS` and asks the parent:
  `read` every report's size read, only while the cleaner's I/O is throttled (the parent's
  throttle may sleep, then `go`; unthrottled, the size is None and the child asks nothing until
  its swap), `swap` for the synced `.cleaned` segments of one or more groups, their indexes
  written and synced with them (the parent swaps them in, the directory's syncs and the replaced
  files' removal included, and answers `swapped`, whether it did). A pass ends with `done` (its
  `CleaningPass`) or `failed` (the exception's name and message). Every message of the child
  ends with the bytes read since its last one. A throttle set or lifted during a pass reaches
  the child as `report` (the new size), which it takes wherever it reads its stdin. So an
  unthrottled pass of a log whose cleaned groups fit in one swap
  (`log_cleaning.SWAP_BATCH_BYTES`) is three turns of the parent's thread: `pass`, `swap`,
  `done`.
- Stopping: once the caller's `should_stop` answers True (asked at each message, when
  `interrupt` wakes the parent, and every `POLL_S`) the parent sends `stop` and answers nothing
  more; the child sees it as the answer it waits for or between two batches (it looks at its
  stdin at most every `CHILD_POLL_S`), removes `.cleaned` files not swapped and ends with
  `done`, abandoned. A `stop` read while idle (its pass had ended) is ignored. A child that has
  not ended the pass `STOP_WAIT_S` after a stop is killed. An `IDLE` child is killed at once
  instead and its pass abandoned (no error: the owner starts another child): on a busy
  machine it waits seconds for a core, to read the stop or even to exit, and a truncation on
  the event loop waits for the pass to end. Its `.cleaned` files, not swapped in (the parent
  swaps), are removed by the log's next pass or its recovery.
- A child that dies (EOF, a broken pipe) is `CleaningProcessGoneError` naming the log. A pass
  whose parent side fails (a storage error in a swap) kills the child, whose answers would
  otherwise be read as the next pass's. After either, `run` raises that error (the owner starts
  another child); `failed` (`CleaningProcessError`) leaves the child usable.
- Off unless the process asks (`clean_logs_in_processes`): `replog node` does, as it starts the
  file maker; an embedding application's brokers clean on their threads unless it asks.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import select
import signal
import struct
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from replog.clock import monotonic_s
from replog.errors import CleaningProcessError, CleaningProcessGoneError
from replog.storage.cleaner.log_cleaning import (
    CleanedGroup,
    CleaningPass,
    LogPass,
    SealedSegment,
    run_pass,
)
from replog.storage.cleaner.offset_map import OffsetMap
from replog.storage.cleaner.pass_priority import IDLE, URGENT
from replog.storage.file_maker_process import (
    CLOSE_WAIT_S,
    EXIT_STATUS_WAIT_S,
    exit_status_text,
    leave_idle_priority,
    run_at_idle_priority,
)
from replog.storage.fs import LOCAL_FS, SegmentFile
from replog.storage.segment_swap import discard_cleaned

# The nice value of the cleaner's work on a thread, and of an urgent pass's child: below the
# event loop's, so that on a busy machine the loop gets the cores first.
CLEANER_NICE = 10
REPORT_BYTES = 256 * 1024
POLL_S = 0.1
CHILD_POLL_S = 0.001
STOP_WAIT_S = 5.0
_HEADER = struct.Struct(">I")
_READ_BYTES = 1 << 16
_BOOT = "from replog.storage.cleaner.cleaning_process import main; main()"
# The directory holding the `replog` package this module was imported from.
_SOURCE_ROOT = os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
)

Message = tuple[Any, ...]

_wanted = False
# Discarded children not known to have exited: reaped at each child's start (`discard`).
_unreaped: list[subprocess.Popen[bytes]] = []
_unreaped_lock = threading.Lock()


def clean_logs_in_processes(wanted: bool = True) -> None:
    """From now on, the log cleaners of this process's brokers run their passes in child
    processes (module Rules)."""
    global _wanted
    _wanted = wanted


def cleaning_in_processes() -> bool:
    return _wanted


class _Pipe:
    """Length-prefixed pickles over a pair of file descriptors."""

    __slots__ = ("_buffer", "read_fd", "write_fd")

    def __init__(self, read_fd: int, write_fd: int) -> None:
        self.read_fd = read_fd
        self.write_fd = write_fd
        self._buffer = bytearray()

    def send(self, message: Message) -> None:
        payload = pickle.dumps(message, pickle.HIGHEST_PROTOCOL)
        view = memoryview(_HEADER.pack(len(payload)) + payload)
        while view:
            view = view[os.write(self.write_fd, view) :]

    def buffered(self) -> Message | None:
        """The next whole message already read, if any."""
        if len(self._buffer) < _HEADER.size:
            return None
        (size,) = _HEADER.unpack_from(self._buffer)
        end = _HEADER.size + size
        if len(self._buffer) < end:
            return None
        message: Message = pickle.loads(self._buffer[_HEADER.size : end])
        del self._buffer[:end]
        return message

    def fill(self) -> bool:
        """Read what is there (blocks until something is); False at EOF."""
        chunk = os.read(self.read_fd, _READ_BYTES)
        self._buffer += chunk
        return bool(chunk)

    def readable(self) -> bool:
        """Whether a message or EOF can be read without waiting for the other end."""
        return bool(self._buffer) or bool(select.select([self.read_fd], [], [], 0)[0])

    def receive(self) -> Message | None:
        """The next message (blocks); None at EOF."""
        while (message := self.buffered()) is None:
            if not self.fill():
                return None
        return message


class _KilledIdle(Exception):
    """An idle child's pass is to stop, or to be promoted where the kernel refuses: it is
    killed, not waited for (module Rules)."""


class CleaningProcess:
    """The parent's end of one cleaning child (module Rules)."""

    def __init__(self, process: subprocess.Popen[bytes], priority: str) -> None:
        assert process.stdin is not None and process.stdout is not None
        self._process = process
        self.priority = priority
        self._pipe = _Pipe(process.stdout.fileno(), process.stdin.fileno())
        self._wake_read, self._wake_write = os.pipe()
        os.set_blocking(self._wake_read, False)
        os.set_blocking(self._wake_write, False)
        self._gone: CleaningProcessGoneError | None = None

    @classmethod
    def start(cls, priority: str) -> CleaningProcess:
        """Start a child whose passes run at `priority` (`IDLE`, `URGENT`; blocks: not on an
        event loop); OSError if it cannot start. Its priority is set here (module Rules)."""
        if priority not in (IDLE, URGENT):
            raise ValueError(f"a cleaning process's priority is {IDLE} or {URGENT}: {priority!r}")
        with _unreaped_lock:
            _unreaped[:] = [p for p in _unreaped if p.poll() is None]
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (_SOURCE_ROOT, env.get("PYTHONPATH")) if p)
        process = subprocess.Popen(
            [sys.executable, "-c", _BOOT],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            close_fds=True,
            env=env,
        )
        if priority == IDLE:
            run_at_idle_priority(process.pid)
        else:
            with contextlib.suppress(OSError):
                os.setpriority(os.PRIO_PROCESS, process.pid, CLEANER_NICE)
        return cls(process, priority)

    @property
    def pid(self) -> int:
        return self._process.pid

    @property
    def gone(self) -> bool:
        return self._gone is not None

    def promote(self) -> bool:
        """Run this `IDLE` child at `URGENT` from now on; whether the kernel let the parent
        (module Rules)."""
        if self.priority != IDLE:
            return self.priority == URGENT
        if leave_idle_priority(self.pid, CLEANER_NICE) is not None:
            return False  # not Linux, or not allowed (module Rules)
        self.priority = URGENT
        return True

    def set_priority(self, priority: str) -> bool:
        """Run this child's next passes at `priority` (between two passes); whether it can:
        lowering always, raising as `promote` (module Rules)."""
        if priority == URGENT:
            return self.promote()
        if self.priority != IDLE:
            run_at_idle_priority(self.pid)
            self.priority = IDLE
        return True

    def interrupt(self) -> None:
        """Have a `run` ask its `should_stop` now (from any thread)."""
        with contextlib.suppress(OSError):  # full: a wake is pending already
            os.write(self._wake_write, b"\0")

    def run(
        self,
        prepared: LogPass,
        map_bytes: int,
        *,
        should_stop: Callable[[], bool],
        on_read: Callable[[int], None],
        should_promote: Callable[[], bool] = lambda: False,
        throttled: Callable[[], bool] = lambda: True,
    ) -> CleaningPass:
        """Run the pass `prepared` plans in the child with a key map of `map_bytes`, its swaps
        here, promoted once `should_promote` says so, its reads reported while `throttled`
        says so (module Rules). CleaningProcessGoneError, CleaningProcessError."""
        if self._gone is not None:
            raise self._gone
        plan = prepared.plan
        by_base = {s.base_offset: s for s in plan.segments}
        stop_sent: float | None = None
        report_bytes = REPORT_BYTES if throttled() else None

        def stop_if_asked() -> None:
            nonlocal stop_sent, report_bytes
            if self.priority == IDLE and should_promote() and not self.promote():
                raise _KilledIdle
            if stop_sent is None:
                if should_stop():
                    if self.priority == IDLE:
                        raise _KilledIdle
                    self._send(plan.name, ("stop",))
                    stop_sent = monotonic_s()
                elif (wanted := REPORT_BYTES if throttled() else None) != report_bytes:
                    report_bytes = wanted
                    self._send(plan.name, ("report", wanted))
            elif monotonic_s() - stop_sent > STOP_WAIT_S:
                raise self._gone_error(plan.name, f"it did not stop within {STOP_WAIT_S:g} s")

        try:
            self._drain_wakes()
            self._send(plan.name, ("pass", plan, map_bytes, report_bytes))
            while True:
                message = self._receive(plan.name, stop_if_asked)
                kind = message[0]
                if message[-1]:
                    on_read(message[-1])
                if kind == "done":
                    result: CleaningPass = message[1]
                    return result
                if kind == "failed":
                    raise CleaningProcessError(
                        f"{plan.name}: the log cleaner's process {self.pid} failed the pass: "
                        f"{message[1]}"
                    )
                stop_if_asked()
                if stop_sent is not None:
                    continue  # the child ends the pass when it reads the stop
                if kind == "read":
                    self._send(plan.name, ("go",))
                elif kind == "swap":
                    groups = [
                        ([by_base[b] for b in bases], cleaned) for bases, cleaned in message[1]
                    ]
                    self._send(plan.name, ("swapped", prepared.swap(groups)))
                else:
                    raise self._gone_error(plan.name, f"it sent {kind!r}")
        except CleaningProcessError:
            raise  # the child answered: it waits for the next pass
        except _KilledIdle:
            self._kill("an idle child's pass stopped or was promoted")
            return CleaningPass(plan.first_dirty, plan.first_dirty, abandoned=True)
        except BaseException:
            self._kill("abandoned in the middle of a pass")
            raise

    def _send(self, name: str, message: Message) -> None:
        try:
            self._pipe.send(message)
        except (BrokenPipeError, ConnectionResetError):
            raise self._gone_error(name) from None

    def _receive(self, name: str, poll: Callable[[], None]) -> Message:
        while (message := self._pipe.buffered()) is None:
            ready = select.select([self._pipe.read_fd, self._wake_read], [], [], POLL_S)[0]
            if self._wake_read in ready:
                self._drain_wakes()
            if self._pipe.read_fd in ready and not self._pipe.fill():
                raise self._gone_error(name)
            poll()
        return message

    def _drain_wakes(self) -> None:
        with contextlib.suppress(BlockingIOError):
            while os.read(self._wake_read, 64):
                pass

    def _gone_error(self, name: str, why: str = "") -> CleaningProcessGoneError:
        """The error of a child that is gone, or is to be killed (`why`): its exit status,
        once it has one."""
        if why:
            self._kill(why)
        try:
            status: int | None = self._process.wait(EXIT_STATUS_WAIT_S)
        except subprocess.TimeoutExpired:
            status = None
        detail = f"{why}; " if why else ""
        self._gone = CleaningProcessGoneError(
            f"{name}: the log cleaner's process {self.pid} is gone ({detail}"
            f"{exit_status_text(status)}); the pass is abandoned"
        )
        return self._gone

    def _kill(self, why: str) -> None:
        if self._gone is None:
            self._gone = CleaningProcessGoneError(
                f"the log cleaner's process {self.pid} was killed: {why}"
            )
        with contextlib.suppress(OSError):
            self._process.kill()

    def close(self) -> None:
        """Close its stdin, wait up to `CLOSE_WAIT_S` for it to exit, then kill it (blocks)."""
        assert self._process.stdin is not None
        with contextlib.suppress(OSError):
            self._process.stdin.close()
        try:
            self._process.wait(CLOSE_WAIT_S)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        self._close_pipes()

    def discard(self) -> None:
        """Kill it and close its pipes without waiting for its exit (module Rules); reaped
        at a later child's start."""
        self._kill("discarded")
        self._close_pipes()
        if self._process.poll() is None:
            with _unreaped_lock:
                _unreaped.append(self._process)

    def _close_pipes(self) -> None:
        assert self._process.stdin is not None and self._process.stdout is not None
        with contextlib.suppress(OSError):
            self._process.stdin.close()
        for fd in (self._wake_read, self._wake_write):
            with contextlib.suppress(OSError):
                os.close(fd)
        with contextlib.suppress(OSError):
            self._process.stdout.close()


# --- the child --------------------------------------------------------------------------------


class _ChildPass:
    """The child's side of one pass: its callbacks for `run_pass`."""

    def __init__(self, pipe: _Pipe, report_bytes: int | None) -> None:
        self._pipe = pipe
        self._report_bytes = report_bytes
        self._read = 0
        self._next_poll = 0.0
        self.stopped = False
        self.eof = False

    def take_read(self) -> int:
        read, self._read = self._read, 0
        return read

    def _take(self, message: Message | None) -> bool:
        """Apply a message the parent sent unasked (a stop, EOF, a report's size); whether
        it was one."""
        if message is None:
            self.eof = self.stopped = True
        elif message[0] == "stop":
            self.stopped = True
        elif message[0] == "report":
            self._report_bytes = message[1]
        else:
            return False
        return True

    def _ask(self, message: Message) -> Message | None:
        """Send `message`, then its answer; None once stopped (a stop, EOF)."""
        try:
            self._pipe.send(message)
            while self._take(answer := self._pipe.receive()) and not self.stopped:
                pass
        except (BrokenPipeError, ConnectionResetError):
            self._take(None)
        return None if self.stopped else answer

    def on_read(self, size: int) -> None:
        self._read += size
        report = self._report_bytes
        if report is not None and self._read >= report and not self.stopped:
            self._ask(("read", self.take_read()))

    def should_stop(self) -> bool:
        if not self.stopped:
            now = monotonic_s()
            if now >= self._next_poll:
                self._next_poll = now + CHILD_POLL_S
                while not self.stopped and self._pipe.readable():
                    self._take(self._pipe.receive())  # anything else: a stale answer
        return self.stopped

    def swap(self, groups: Sequence[CleanedGroup]) -> bool:
        answer = None
        if not self.stopped:
            asked = [([s.base_offset for s in replaced], cleaned) for replaced, cleaned in groups]
            answer = self._ask(("swap", asked, self.take_read()))
        if answer is None:
            for _, cleaned in groups:  # not swapped in: the pass ends here
                discard_cleaned(LOCAL_FS, cleaned)
            return False
        return bool(answer[1])


@contextlib.contextmanager
def _open_segment(segment: SealedSegment) -> Iterator[SegmentFile]:
    file = LOCAL_FS.open_segment_file(segment.log_path, create=False)
    try:
        yield file
    finally:
        file.close()


def main() -> None:
    """The child: run passes until EOF on stdin (module Rules)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    pipe = _Pipe(sys.stdin.fileno(), sys.stdout.fileno())
    offset_map: OffsetMap | None = None
    map_bytes = 0
    while (message := pipe.receive()) is not None:
        if message[0] != "pass":
            continue  # a stop or a report's size for a pass that had ended
        _, plan, wanted_bytes, report_bytes = message
        if offset_map is None or wanted_bytes != map_bytes:
            offset_map, map_bytes = OffsetMap(wanted_bytes), wanted_bytes
        child = _ChildPass(pipe, report_bytes)
        answer: Message
        try:
            result = run_pass(
                plan,
                offset_map,
                fs=LOCAL_FS,
                open_segment=_open_segment,
                swap=child.swap,
                should_stop=child.should_stop,
                on_read=child.on_read,
            )
        except Exception as exc:
            answer = ("failed", f"{type(exc).__name__}: {exc}", child.take_read())
        else:
            answer = ("done", result, child.take_read())
        if child.eof:
            return
        try:
            pipe.send(answer)
        except (BrokenPipeError, ConnectionResetError):
            return


if __name__ == "__main__":
    main()
