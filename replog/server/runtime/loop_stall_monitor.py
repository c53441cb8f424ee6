"""How long the node's event loop was kept from running, and what kept it: the stall every Raft
fetch, heartbeat and request waiting on it saw.

A task asks to wake every `interval_s` (a tick) and measures how much later than asked it
woke, and the loop's selector times each run of callbacks between two waits for I/O
(`IterationClock`): a tick's stall is the longer of its lateness and the longest such run since
the tick before. The lateness alone reads a stall short by up to the interval (a stall that began
just before a tick was due); the runs are exact, so ticks can be few: 20 a second
(`TICK_S`) by default, each of which wakes an idle node's process (about 100 us of CPU on a
small VM, so 100 a second cost an idle node 3% of a core). Each stall goes into the
`replog_event_loop_stall_seconds` histogram
(`NodeMetrics`), the longest seen into `longest_s`, and one of `warn_s` (`WARN_STALL_S`, or
`REPLOG_LOOP_STALL_WARN_MS` from the environment) or more is logged at WARNING: a stall that long
is a bug to find (docs/operations.md, "Metrics"). Lowering it (to 50 ms, say) names every turn
that takes the loop from the stall goal, in a benchmark's node logs.

Rules:
- The warning says where the loop was held: each time the loop comes back (each tick) it
  re-arms a timer (`ITIMER_REAL`) to go off `SAMPLE_AFTER_S` after its next tick is due (a
  fifth and a half of `warn_s` when that is lower, so that a shorter stall gets samples too),
  and every `SAMPLE_EVERY_S` after that; a loop that keeps time re-arms it before it goes off,
  so it never does. A late loop gets the timer's signal (`SAMPLE_SIGNAL`), whose handler names
  the loop thread's stack, and the warning names the replog call chain seen in most samples
  ("held in a < b < c, 7 of 9 samples"). A timer, not a thread that watches the loop: a
  thread that wakes needs the GIL, and CPython 3.11 hands the GIL to a thread that asks for it
  and keeps the thread that let go (the loop) waiting until the asker runs, which on a loaded
  machine first waits for a core. A watching thread woken every 4-6 ms made a fifth of the
  stalls' wait off the CPUs that way. The timer's signal asks no thread for the GIL: Python
  runs its handler on the main thread, the loop's, between two bytecodes.
- The stack is only ever read by its own thread: Python runs a signal's handler in the main
  thread, between two bytecodes, with that thread's frame. Reading another thread's frames
  (`sys._current_frames` and `f_back`) can crash CPython 3.11 in `PyFrame_GetBack` (a node
  did, at 11:53 on 2026-11-27), as it crashes other sampling profilers. So a loop that is not
  the main thread's, or a process whose `SAMPLE_SIGNAL` already has a handler of its own, gets
  its stalls measured and logged with no stack samples.
- The handler is installed once per process and stays: a late signal must never meet the
  signal's default action, which ends the process. Interrupted system calls restart. The
  timer is the process's only `ITIMER_REAL`: one already set (or a handler of another for its
  signal) means no samples, and a stopped monitor disarms it.
- Both are the process's, so only its entry point may hand them over
  (`sample_stalls_with_the_process_timer`, called by `replog node`): a monitor in an
  embedding application's process measures and logs its stalls without samples, and never
  re-arms a timer, or meets a handler, that the application set after it started.
- It says how much of the stall the loop thread spent on a CPU: a stall of 300 ms with 40 ms on
  a CPU was a wait for a core (other processes, on a loaded machine), not work to bound.
- It says how much of the stall the loop thread waited for a core (the kernel's run-queue
  delay, `ThreadRunQueueClock`): wall time neither on a CPU nor waiting for one was a wait off
  the CPUs, in a blocking system call or for the GIL. In creations of 10,000-20,000
  partitions (perf's scheduler events) nearly all of it was the GIL, handed to another of the
  node's threads that asked for it (a bulk thread, the default executor's, the log manager's)
  and then waited for a core before it ran and let go: the machine's load, through another
  thread.
- It also says how much of the stall was the garbage collector's (`gc.callbacks`), which no
  stack sample shows: it runs inside whatever allocation triggered it; and how much of that
  ran in other threads, holding the GIL the loop waited for (a node runs its automatic ones on
  its loop, loop_collections.py: what is left is an explicit `gc.collect` in another thread).
"""

from __future__ import annotations

import asyncio
import gc
import logging
import math
import os
import signal
import threading
from collections import Counter
from collections.abc import Callable, Mapping
from types import FrameType
from typing import Any

from replog.clock import ThreadRunQueueClock, monotonic_s, thread_cpu_s
from replog.errors import ConfigError

log = logging.getLogger("replog.server.loop_stall")

WARN_STALL_S = 1.0
TICK_S = 0.05  # the longest interval between ticks (module docstring)
WARN_ENV = "REPLOG_LOOP_STALL_WARN_MS"
SAMPLE_AFTER_S = 0.1  # the stall goal: a loop held longer is worth explaining
SAMPLE_EVERY_S = 0.05
SAMPLE_TIMER = signal.ITIMER_REAL  # wall time: a late loop is sampled whatever held it
SAMPLE_SIGNAL = signal.SIGALRM  # the signal SAMPLE_TIMER sends
CHAIN_FRAMES = 3  # the innermost project frames a sample names
_ASYNCIO_DIR = os.sep + "asyncio" + os.sep

# The packages whose frames name a stall (the project's own code, not asyncio's or grpc's).
_PROJECT_ROOTS = tuple(
    os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))) + os.sep + name
    for name in ("replog", "quorum", "timeline", "checkpoints")
)


def call_chain(frame: FrameType | None, depth: int = CHAIN_FRAMES) -> str:
    """Where a stack is: its entry (the first project frame inside the event loop's machinery:
    the task or callback the loop ran) and its innermost `depth` project frames ("func
    (file:line)"), as "entry: inner < ...": frames of any code when none is the project's."""
    frames: list[FrameType] = []
    while frame is not None:
        frames.append(frame)
        frame = frame.f_back
    frames.reverse()  # outermost first
    inside_loop = 0
    for index, each in enumerate(frames):
        if _ASYNCIO_DIR in each.f_code.co_filename:
            inside_loop = index + 1
    inside = frames[inside_loop:]
    if not inside:  # the loop's own frame was innermost: C code it called (gRPC, protobuf)
        return f"C code called by {_name(frames[-1])}" if frames else ""
    project = [f for f in inside if f.f_code.co_filename.startswith(_PROJECT_ROOTS)] or inside
    named = project[-depth:]
    inner = " < ".join(_name(f) for f in reversed(named))
    return inner if project[0] in named else f"{_name(project[0])}: {inner}"


def _name(frame: FrameType) -> str:
    return f"{frame.f_code.co_name} ({os.path.basename(frame.f_code.co_filename)}:{frame.f_lineno})"


class StallSampler:
    """Samples the loop thread's stack while the loop is late (module Rules): the loop arms the
    timer (`arm`) at each tick; `take` and the samples run on the loop thread."""

    def __init__(
        self,
        loop_thread_id: int,
        last_tick: Callable[[], float],
        *,
        after_s: float = SAMPLE_AFTER_S,
        every_s: float = SAMPLE_EVERY_S,
    ) -> None:
        self._thread_id = loop_thread_id
        self._last_tick = last_tick
        self._after_s = after_s
        self._every_s = every_s
        self._samples: Counter[str] = Counter()

    def start(self) -> bool:
        """Start sampling; False where the loop thread cannot be sampled (module Rules)."""
        if not _sample_signal_handled(self._thread_id):
            return False
        _sampling.add(self)
        return True

    def arm(self, due_in_s: float) -> None:
        """The loop's next tick is due in `due_in_s`: the timer goes off `after_s` after that,
        unless the tick re-arms it first, then every `every_s` (module Rules)."""
        if self in _sampling:
            signal.setitimer(SAMPLE_TIMER, due_in_s + self._after_s, self._every_s)

    def stop(self) -> None:
        if self in _sampling:
            _sampling.discard(self)
            signal.setitimer(SAMPLE_TIMER, 0)

    def late(self) -> bool:
        """Whether the loop is late enough for a sample."""
        return monotonic_s() - self._last_tick() >= self._after_s

    def add(self, chain: str) -> None:
        """One sample, taken by the loop thread itself (`_on_sample_signal`)."""
        self._samples[chain] += 1

    def take(self) -> tuple[str, int, int]:
        """The chain seen most since the last take, its samples and all samples; resets."""
        if not self._samples:  # the common case, each tick: no new Counter
            return "", 0, 0
        samples, self._samples = self._samples, Counter()
        chain, count = samples.most_common(1)[0]
        return chain, count, samples.total()


# The samplers started in this process (all on the main thread's loops), whether its entry
# point handed the timer over, and whether this process's handler is ours.
_sampling: set[StallSampler] = set()
_timer_handed_over = False
_handler_installed = False
_in_handler = False  # True while the handler runs: a signal met inside it names nothing


def sample_stalls_with_the_process_timer() -> None:
    """Let this process's stall monitors take stack samples with `SAMPLE_TIMER` and
    `SAMPLE_SIGNAL` (module Rules): process-wide, so for process entry points only."""
    global _timer_handed_over
    _timer_handed_over = True


def _on_sample_signal(signum: int, frame: FrameType | None) -> None:
    """The main thread names its own stack to every sampler whose loop is late. Not inside
    itself: the timer's next signal, when this one's handler was kept from finishing (a wait
    for a core), would name the handler."""
    global _in_handler
    if _in_handler:
        return
    _in_handler = True
    try:
        chain: str | None = None
        for sampler in list(_sampling):  # a copy: a sampler stopped meanwhile
            if sampler.late():
                if chain is None:
                    chain = call_chain(frame)
                sampler.add(chain)
    finally:
        _in_handler = False


def _sample_signal_handled(loop_thread_id: int) -> bool:
    """Whether the loop thread answers `SAMPLE_SIGNAL` with its stack: installs the handler
    the first time, from the main thread, if the process handed the timer over and the signal
    has no handler already and the timer is not set."""
    global _handler_installed
    if not _timer_handed_over:
        return False  # an embedding application's: its timer and signal are its own
    if loop_thread_id != threading.main_thread().ident or not hasattr(signal, "setitimer"):
        return False
    if _handler_installed:
        return True
    if threading.get_ident() != loop_thread_id:
        return False  # only the main thread may install a handler
    if signal.getsignal(SAMPLE_SIGNAL) is not signal.SIG_DFL:
        return False  # someone else's: leave it alone
    if signal.getitimer(SAMPLE_TIMER) != (0.0, 0.0):
        return False  # someone else's timer (signal.alarm, a profiler): leave it alone
    signal.signal(SAMPLE_SIGNAL, _on_sample_signal)
    signal.siginterrupt(SAMPLE_SIGNAL, False)  # blocking calls the signal meets restart
    _handler_installed = True
    return True


class GarbageCollectionClock:
    """Seconds the garbage collector ran (every thread waits for it), summed until `take`, and
    the oldest generation it collected meanwhile (2: a full collection, whose cost grows with
    every unfrozen object the process holds; 0 and 1: young ones, with what was allocated
    since). Also how many of those seconds were collections in threads other than the one that
    made the clock (the loop's): such a collection holds the GIL throughout, so the loop waits
    for it off the CPUs, and for as long as that thread waits for a core."""

    def __init__(self) -> None:
        self._thread = threading.get_ident()
        self._started = 0.0
        self._seconds = 0.0
        self._elsewhere = 0.0
        self._generation = -1

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._started = monotonic_s()
            self._generation = max(self._generation, info.get("generation", -1))
        else:
            took = monotonic_s() - self._started
            self._seconds += took
            if threading.get_ident() != self._thread:
                self._elsewhere += took

    def take(self) -> float:
        seconds, self._seconds = self._seconds, 0.0
        self._elsewhere = 0.0
        self._generation = -1
        return seconds

    def take_with_generation(self) -> tuple[float, int]:
        """`take`, and the oldest generation collected (-1: none)."""
        generation = self._generation
        return self.take(), generation

    def take_all(self) -> tuple[float, int, float]:
        """`take_with_generation`, and the seconds of it in other threads."""
        elsewhere = self._elsewhere
        return *self.take_with_generation(), elsewhere


def warn_stall_s(environ: Mapping[str, str]) -> float:
    """The stall worth a WARNING: `REPLOG_LOOP_STALL_WARN_MS` when set (a positive number of
    milliseconds), else `WARN_STALL_S`."""
    text = environ.get(WARN_ENV)
    if text is None:
        return WARN_STALL_S
    try:
        ms = float(text)
    except ValueError:
        ms = 0.0
    if not ms > 0:
        raise ConfigError(f"{WARN_ENV}={text!r}: expected a positive number of milliseconds")
    return ms / 1000


class IterationClock:
    """The longest run of an asyncio loop's callbacks between two of its waits for I/O (each
    iteration's work, during which nothing else on the loop can run), kept by wrapping the
    loop's selector's `select`: two clock reads an iteration. `take` returns it and starts
    again. A loop without a selector (not asyncio's selector loop) is not timed: `take` is 0."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._selector = getattr(loop, "_selector", None)
        self._longest_s = 0.0
        self._returned = monotonic_s()
        self.timing = False

    def install(self) -> None:
        selector = self._selector
        if selector is None or "select" in vars(selector):  # none, or another clock's already
            return
        select = selector.select
        clock = monotonic_s

        def timed_select(timeout: float | None = None) -> Any:
            busy = clock() - self._returned
            if busy > self._longest_s:
                self._longest_s = busy
            try:
                return select(timeout)
            finally:
                self._returned = clock()

        selector.select = timed_select
        self.timing = True

    def uninstall(self) -> None:
        if self.timing:
            del self._selector.select  # type: ignore[union-attr]
            self.timing = False

    def take(self) -> float:
        """The longest run since the last take, counting the run in progress so far."""
        longest = max(self._longest_s, monotonic_s() - self._returned) if self.timing else 0.0
        self._longest_s = 0.0
        return longest


class LoopStallMonitor:
    """Measures the event loop's stalls (module docstring); `run` until cancelled. `interval_s`
    (None: `TICK_S`, or less when a lowered `warn_s` asks for samples sooner) sets how often it
    ticks."""

    def __init__(
        self,
        observe: Callable[[float], None],
        *,
        interval_s: float | None = None,
        warn_s: float = WARN_STALL_S,
    ) -> None:
        self._observe = observe
        self._warn_s = warn_s
        self._sample_after_s = min(SAMPLE_AFTER_S, warn_s / 2)
        # A tick at least every half of the sampling delay: a stall is sampled from at most
        # one and a half times that delay past its start.
        self._interval_s = (
            min(TICK_S, self._sample_after_s / 2) if interval_s is None else interval_s
        )
        self._tick = monotonic_s()
        self.longest_s = 0.0

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        self._tick = math.inf  # no tick yet, so nothing is late
        sampler = StallSampler(
            threading.get_ident(),
            lambda: self._tick,
            after_s=self._sample_after_s,
            every_s=min(SAMPLE_EVERY_S, self._warn_s / 5),
        )
        if not sampler.start():
            log.debug(
                "event loop stalls are logged without stack samples: the process did not hand"
                " its timer over (only `replog node` does), or the loop is not the main"
                " thread's, or %s has a handler of another, or ITIMER_REAL is set",
                SAMPLE_SIGNAL.name,
            )
        collecting = GarbageCollectionClock()
        gc.callbacks.append(collecting)
        run_queue = ThreadRunQueueClock()  # opened on the loop thread: its own delay
        iterations = IterationClock(loop)
        iterations.install()
        try:
            while True:
                asked = loop.time() + self._interval_s
                self._tick = monotonic_s() + self._interval_s
                sampler.arm(self._interval_s)
                cpu_before = thread_cpu_s()
                queued_before = run_queue()
                await asyncio.sleep(self._interval_s)
                stall = max(0.0, loop.time() - asked, iterations.take())
                cpu_s = thread_cpu_s() - cpu_before
                queued_after = run_queue()
                self._tick = monotonic_s()
                self._observe(stall)
                if stall > self.longest_s:
                    self.longest_s = stall
                chain, seen, samples = sampler.take()
                collected_s, generation, elsewhere_s = collecting.take_all()
                held = f" ({cpu_s * 1000:.0f} ms of it on a CPU"
                if queued_before is not None and queued_after is not None:
                    held += f", {(queued_after - queued_before) * 1000:.0f} ms waiting for one"
                held += ")"
                if samples:
                    held += f": held in {chain} ({seen} of {samples} samples)"
                if collected_s >= self._sample_after_s / 2:
                    held += (
                        f"; {collected_s * 1000:.0f} ms of it collecting garbage"
                        f" (generations up to {generation})"
                    )
                    if elsewhere_s >= 0.0005:
                        held += f", {elsewhere_s * 1000:.0f} ms of that in other threads"
                if stall >= self._warn_s:
                    log.warning("the event loop was held for %.0f ms%s", stall * 1000, held)
                elif samples:
                    log.debug("the event loop was held for %.0f ms%s", stall * 1000, held)
        finally:
            iterations.uninstall()
            sampler.stop()
            gc.callbacks.remove(collecting)
            run_queue.close()
