"""`VirtualLoop`: asyncio's own event loop on a virtual clock, for running replog's real shells
(drivers, replica managers, request cores) inside one seeded simulation.

Theory of operation: `asyncio.BaseEventLoop` runs ready callbacks, then asks its selector for
I/O with the time left until the next timer. Here the selector is `_NoIo`: there is no I/O, and
waiting for a timeout moves the virtual clock forward by exactly that timeout instead of
sleeping. So `asyncio.sleep`, `call_later`, `wait_for` and every timeout of the shells take no
wall time, and a run is a function of its inputs: callbacks run in asyncio's order (FIFO, then
timers by deadline, ties in scheduling order), nothing else decides.

Rules:
- One thread. `run_in_executor` (and so `asyncio.to_thread`) runs the function at once, on the
  loop's thread, and returns a finished future: the work a node hands to threads runs where
  the simulation can see it, in a deterministic order. `call_soon_threadsafe` from another
  thread is refused (a simulation has none).
- Work that takes time (a slow disk's fsync: `block(seconds)`, called by what the work calls)
  holds what runs it: inside `run_in_executor` its future is settled that much later (the
  worker thread was busy, the loop was not); anywhere else the clock moves on at once, as
  when the loop's own thread blocks (every timer due meanwhile fires late).
- The clock starts at `start_s` and moves only while the loop waits for its next timer
  (`time()`; `now_ms()` in integer milliseconds, the shells' clock).
- With nothing ready and no timer the simulated system can never move again: the loop raises
  `SimulationIdleError` instead of waiting forever.
- `run_once()` runs one iteration (a round of ready callbacks, after moving the clock to the
  next timer if nothing was ready), so a simulator can check its invariants between any two.
- The iteration is asyncio's own (`_run_once`, the same steps in the same order), with each
  timer kept in the heap as `(deadline, handle)`: tuples compare in C, while asyncio's
  `TimerHandle` compares in Python (its `__lt__` runs some 100,000 times a seed). The order
  is asyncio's exactly: two entries compare by deadline as handles do, and on equal
  deadlines both say "not less" (the tuple then asks the handles, which compare by deadline
  too), so the heap takes the same shape and pops the same handle. asyncio's debug mode
  (slow-callback warnings, which would time virtual seconds, its thread and callback checks,
  each handle's traceback) is left out, and with it the calls that ask for it: `call_soon`,
  `call_later` and `call_at` make their handle and queue it at once, and the iteration runs
  each callback as `Handle._run` does, without calling it (a task's every wake-up is one).
"""

from __future__ import annotations

import asyncio
import asyncio.events as asyncio_events
import asyncio.format_helpers as format_helpers
import concurrent.futures
import contextlib
import contextvars
import heapq
import math
import threading
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

__all__ = ["SimulationIdleError", "VirtualLoop"]

T = TypeVar("T")

# asyncio's own thresholds (`asyncio.base_events`), which `_run_once` keeps.
_MIN_SCHEDULED_TIMER_HANDLES = 100
_MIN_CANCELLED_TIMER_HANDLES_FRACTION = 0.5
_MAXIMUM_SELECT_TIMEOUT = 24 * 3600


class SimulationIdleError(RuntimeError):
    """The loop has nothing ready and no timer: the simulated system cannot move again."""


class _NoIo:
    """The selector of a loop without I/O: a wait is the clock moving forward."""

    def __init__(self, loop: VirtualLoop) -> None:
        self._loop = loop

    def select(self, timeout: float | None) -> list[Any]:
        if timeout is None:
            raise SimulationIdleError(
                f"at virtual time {self._loop.time():.3f} s nothing is ready and no timer is "
                "set: every task waits for something that cannot happen"
            )
        if timeout > 0:
            self._loop._advance(timeout)
        return []

    def close(self) -> None:
        pass


class VirtualLoop(asyncio.BaseEventLoop):
    """An asyncio event loop whose clock is virtual (module docstring)."""

    def __init__(self, start_s: float = 0.0) -> None:
        super().__init__()
        self._now = float(start_s)
        self._now_ms = math.floor(self._now * 1000 + 1e-6)
        self._selector = _NoIo(self)
        self._clock_resolution = 1e-9
        self._thread_id_at_start = threading.get_ident()
        self._executor_busy_s: float | None = None  # the blocking of the work in `run_in_executor`

    # --- the clock ------------------------------------------------------------------------------

    def time(self) -> float:
        return self._now

    def now_ms(self) -> int:
        """The virtual time in whole milliseconds (what replog's shells take as `clock`); a
        nanosecond of slack absorbs the float sums of the clock's advances. Computed when the
        clock moves: the shells read it far more often."""
        return self._now_ms

    def _advance(self, seconds: float) -> None:
        self._now += seconds
        self._now_ms = math.floor(self._now * 1000 + 1e-6)

    def block(self, seconds: float) -> None:
        """The code running now takes `seconds` of virtual time (module Rules)."""
        if seconds < 0:
            raise ValueError(f"a block takes 0 seconds or more, not {seconds}")
        if self._executor_busy_s is not None:
            self._executor_busy_s += seconds
        else:
            self._advance(seconds)

    # --- running --------------------------------------------------------------------------------

    def run_once(self) -> None:
        """One iteration of the loop (module Rules), as the running loop of this thread."""
        if asyncio_events._get_running_loop() is self:
            self._run_once()
            return
        with self.running():
            self._run_once()

    @contextlib.contextmanager
    def running(self) -> Iterator[None]:
        """This loop is this thread's running loop meanwhile, so that a sequence of `run_once`
        calls does not set and unset it each time (`run_until_complete` is not called
        within)."""
        asyncio_events._set_running_loop(self)
        try:
            yield
        finally:
            asyncio_events._set_running_loop(None)

    # --- timers (module Rules: asyncio's iteration over (deadline, handle) entries) ------------

    def call_soon(  # type: ignore[override]
        self, callback: Callable[..., object], *args: Any, context: Any = None
    ) -> asyncio.Handle:
        # asyncio's, without the debug mode's checks (module Rules): each task's wake-up and
        # each future's callback comes through here, hundreds of thousands a seed.
        if self._closed:  # type: ignore[attr-defined]
            raise RuntimeError("Event loop is closed")
        handle = _Handle(callback, args, self, context)
        self._ready.append(handle)  # type: ignore[attr-defined]
        return handle

    def call_later(  # type: ignore[override]
        self, delay: float, callback: Callable[..., object], *args: Any, context: Any = None
    ) -> asyncio.TimerHandle:
        if delay is None:
            raise TypeError("delay must not be None")
        return self.call_at(self._now + delay, callback, *args, context=context)

    def call_at(  # type: ignore[override]
        self, when: float, callback: Callable[..., object], *args: Any, context: Any = None
    ) -> asyncio.TimerHandle:
        if when is None:
            raise TypeError("when cannot be None")
        if self._closed:  # type: ignore[attr-defined]
            raise RuntimeError("Event loop is closed")
        timer = _TimerHandle(when, callback, args, self, context)
        heapq.heappush(self._scheduled, (when, timer))
        timer._scheduled = True
        return timer

    def _run_once(self) -> None:
        """asyncio's `BaseEventLoop._run_once`, step for step, over `(deadline, handle)`
        entries (module Rules)."""
        scheduled: list[tuple[float, asyncio.TimerHandle]] = self._scheduled  # type: ignore[has-type]
        count = len(scheduled)
        if (
            count > _MIN_SCHEDULED_TIMER_HANDLES
            and self._timer_cancelled_count / count > _MIN_CANCELLED_TIMER_HANDLES_FRACTION  # type: ignore[has-type]
        ):
            kept = []
            for entry in scheduled:
                if entry[1]._cancelled:
                    entry[1]._scheduled = False  # type: ignore[attr-defined]
                else:
                    kept.append(entry)
            heapq.heapify(kept)
            self._scheduled = scheduled = kept
            self._timer_cancelled_count = 0
        else:
            while scheduled and scheduled[0][1]._cancelled:
                self._timer_cancelled_count -= 1
                heapq.heappop(scheduled)[1]._scheduled = False  # type: ignore[attr-defined]
        ready = self._ready  # type: ignore[attr-defined]
        timeout = None
        if ready or self._stopping:  # type: ignore[attr-defined]
            timeout = 0.0
        elif scheduled:
            timeout = min(max(0.0, scheduled[0][0] - self._now), _MAXIMUM_SELECT_TIMEOUT)
        self._selector.select(timeout)
        end_time = self._now + self._clock_resolution
        handle: Any  # a `Handle`: its slots are read here as `Handle._run` reads them
        while scheduled and scheduled[0][0] < end_time:
            handle = heapq.heappop(scheduled)[1]
            handle._scheduled = False
            ready.append(handle)
        # The callbacks ready at this point, none that these add (they run next time), as asyncio's.
        # `Handle._run` inlined: one Python call less per callback; an error goes to the
        # exception handler as there (`_report`).
        popleft = ready.popleft
        for _ in range(len(ready)):
            handle = popleft()
            if not handle._cancelled:
                try:
                    handle._context.run(handle._callback, *handle._args)
                except (SystemExit, KeyboardInterrupt):
                    raise
                except BaseException as exc:
                    _report(handle, exc)
        handle = None  # no cycle through an exception's frame

    def _process_events(self, event_list: list[Any]) -> None:
        pass  # no I/O

    def _write_to_self(self) -> None:
        pass  # nothing to wake: the loop never blocks

    def call_soon_threadsafe(  # type: ignore[override]
        self, callback: Callable[..., object], *args: Any, context: Any = None
    ) -> asyncio.Handle:
        if threading.get_ident() != self._thread_id_at_start:
            raise RuntimeError("a simulation runs in one thread: no other thread may call in")
        return self.call_soon(callback, *args, context=context)

    def run_in_executor(  # type: ignore[override]
        self, executor: concurrent.futures.Executor | None, func: Callable[..., T], *args: Any
    ) -> asyncio.Future[T]:
        future: asyncio.Future[T] = self.create_future()
        outer = self._executor_busy_s  # None: not nested in another executor's work
        self._executor_busy_s = 0.0
        try:
            settle: Callable[..., object] = future.set_result
            outcome: object = func(*args)
        except BaseException as exc:  # handed to the awaiting task, as a thread's would be
            settle, outcome = future.set_exception, exc
        finally:
            busy_s, self._executor_busy_s = self._executor_busy_s, outer
        if outer is not None:
            self._executor_busy_s = outer + busy_s  # the same thread ran both
        if busy_s > 0 and outer is None:
            self.call_later(busy_s, _settle_unless_cancelled, future, settle, outcome)
        else:
            settle(outcome)
        return future

    def close(self) -> None:
        super().close()
        self._selector = _NoIo(self)  # BaseEventLoop.close does not close it; nothing to free


class _Handle(asyncio.Handle):
    """asyncio's `Handle`, made and cancelled without asking the loop for its debug mode (module
    Rules: never on here)."""

    __slots__ = ()

    def __init__(
        self, callback: Callable[..., object], args: tuple[Any, ...], loop: Any, context: Any
    ) -> None:
        self._context = contextvars.copy_context() if context is None else context
        self._loop = loop
        self._callback = callback
        self._args = args
        self._cancelled = False
        self._repr = None
        self._source_traceback = None

    def cancel(self) -> None:
        if not self._cancelled:
            self._cancelled = True
            self._callback = None  # type: ignore[assignment]
            self._args = None  # type: ignore[assignment]


class _TimerHandle(asyncio.TimerHandle):
    """asyncio's `TimerHandle`, made and cancelled as `_Handle` is."""

    __slots__ = ()

    def __init__(
        self,
        when: float,
        callback: Callable[..., object],
        args: tuple[Any, ...],
        loop: Any,
        context: Any,
    ) -> None:
        _Handle.__init__(self, callback, args, loop, context)  # type: ignore[arg-type]
        self._when = when
        self._scheduled = False

    def cancel(self) -> None:
        if not self._cancelled:
            if self._scheduled:  # `_run_once` drops cancelled timers by this count
                self._loop._timer_cancelled_count += 1  # type: ignore[attr-defined]
            self._cancelled = True
            self._callback = None
            self._args = None  # type: ignore[assignment]


def _report(handle: Any, exc: BaseException) -> None:
    """What `Handle._run` hands the exception handler when a callback raises."""
    callback = format_helpers._format_callback_source(handle._callback, handle._args)
    handle._loop.call_exception_handler(
        {"message": f"Exception in callback {callback}", "exception": exc, "handle": handle}
    )


def _settle_unless_cancelled(
    future: asyncio.Future[Any], settle: Callable[..., object], outcome: object
) -> None:
    """A blocked worker's result, unless its awaiter gave up meanwhile."""
    if not future.cancelled():
        settle(outcome)
